"""Checking that a dataset's best configs compile to the same binaries today (benchmarks/dataset_binaries.py): which
code timed a file, its best configs read with their integer types, the comparison, and a real sm_90 compile on this CPU
that tells two configs apart (seconds)."""

import math
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from dataset_binaries import (  # noqa: E402
    Best, TimingCode, best_configs, code_groups, compare, compile_batch, describe, job, timing_codes)
from tunebench.measure.dataset import Dataset, save_dataset  # noqa: E402
from tunebench.space import Flag, PowerOfTwo  # noqa: E402

FIRST, LATER, ADDING = "a" * 40, "b" * 40, "c" * 40
SPANS = {"aaa": [(FIRST, LATER), ("d" * 40, None)]}
MATMUL = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 1, "SPLIT_K": 1, "num_warps": 4, "num_stages": 2}


def test_the_timing_code_is_the_first_commit_with_the_recorded_hash_or_else_the_file_s_adding_commit():
    [code] = timing_codes({"kernel_source_sha256": "aaa"}, SPANS, ADDING)
    assert code.commit == FIRST and code.how == "aaa: `aaaaaaa`"
    codes = timing_codes({"kernel_source_sha256": "aaa", "sittings": [{}, {"kernel_source_sha256": "zzz"}]}, SPANS,
                         ADDING)
    assert [code.commit for code in codes] == [FIRST, None]
    assert codes[1].how == "zzz: no commit holds this code"
    [inferred] = timing_codes({"date": "2026-11-24"}, SPANS, ADDING)
    assert inferred.commit == ADDING and "inferred" in inferred.how
    [uncommitted] = timing_codes({}, SPANS, None)
    assert uncommitted.commit is None and "not committed" in uncommitted.how
    # a sweep before the hash was recorded, with a later sitting that recorded one: one code per sitting
    mixed = timing_codes({"date": "2026-11-22", "sittings": [{"date": "2026-11-22"},
                                                             {"date": "2026-12-05", "kernel_source_sha256": "aaa"}]},
                         SPANS, ADDING)
    assert [code.commit for code in mixed] == [ADDING, FIRST] and "inferred" in mixed[0].how


def test_each_best_config_is_compiled_by_its_own_sitting_s_code_where_the_rows_name_their_sittings():
    then, later, other = TimingCode(ADDING, "inferred", inferred=True), TimingCode(FIRST, "aaa"), TimingCode(LATER, "b")
    best = [Best((1,), {}, 0), Best((2,), {}, 1), Best((3,), {}, 0)]
    assert code_groups([then, later], best) == [(then, [best[0], best[2]]), (later, [best[1]])]
    unnamed = [Best((1,), {}, None), Best((2,), {}, None)]
    assert code_groups([then, later, other, later], unnamed) == [(later, unnamed), (other, unnamed)]
    assert code_groups([then, then], unnamed) == [(then, unnamed)]
    try:
        code_groups([then], best)
    except ValueError as error:
        assert "sittings [1]" in str(error) and "lists 1" in str(error)
    else:
        raise AssertionError("a row naming a sitting the provenance lacks was accepted")


def test_best_configs_are_the_fastest_ok_rows_with_integer_values_and_a_seeded_sample(tmp_path):
    rows = []
    for m in (16, 32, 48):
        for block, split, latency, status in ((16, False, 0.5 if m == 48 else 2.0, "ok"), (32, True, 1.0, "ok"),
                                              (64, False, math.nan, "crash")):
            rows.append({"M": m, "BLOCK": block, "split": split, "status": status, "latency_ms": latency,
                         "repeats_ms": [latency] if status == "ok" else [], "compile_s": 0.1, "bench_s": 0.1,
                         "error": "" if status == "ok" else "crashed"})
    vendor = pd.DataFrame([{"M": 16, "library": "torch", "latency_ms": 0.5, "repeats_ms": [0.5], "status": "ok",
                            "compile_s": 0.0, "bench_s": 0.1, "error": ""}])
    path = tmp_path / "toy.parquet"
    save_dataset(Dataset(kernel="toy", dtype="float16", gpu="GPU", shape_names=("M",),
                         parameters=(PowerOfTwo("BLOCK", 16, 64), Flag("split")), measurements=pd.DataFrame(rows),
                         vendor=vendor, provenance={}), path)
    best = best_configs(path, count=5)
    assert best == [Best((16,), {"BLOCK": 32, "split": True}, None), Best((32,), {"BLOCK": 32, "split": True}, None),
                    Best((48,), {"BLOCK": 16, "split": False}, None)]
    assert all(type(item.config["BLOCK"]) is int and type(item.config["split"]) is bool for item in best)
    sample = best_configs(path, count=2)
    assert len(sample) == 2 and sample == best_configs(path, count=2) and all(item in best for item in sample)
    assert [item.shape for item in sample] == sorted(item.shape for item in sample)
    for row in rows:
        row["sitting"] = 1 if row["M"] == 48 else 0
    save_dataset(Dataset(kernel="toy", dtype="float16", gpu="GPU", shape_names=("M",),
                         parameters=(PowerOfTwo("BLOCK", 16, 64), Flag("split")), measurements=pd.DataFrame(rows),
                         vendor=vendor.assign(sitting=0), provenance={"sittings": [{}, {}]}), path)
    assert [item.sitting for item in best_configs(path, count=5)] == [0, 0, 1]


def test_compare_tells_same_cubins_same_opcodes_and_other_instructions_apart_and_names_the_shapes():
    best = [((1, 2, 3), {}), ((4, 5, 6), {}), ((7, 8, 9), {}), ((10, 11, 12), {})]
    comparison = compare(["c1 o1", "c2 o2", "c3 o3", "error: KeyError: 'TALL'"],
                         ["c1 o1", "c9 o2", "c8 o8", "c4 o4"])
    assert (comparison.same, comparison.same_opcodes, comparison.different) == ([0], [1], [2])
    assert comparison.errors == ["error: KeyError: 'TALL'"]
    assert describe(best, comparison) == "other instructions on 7x8x9; 1 failed, e.g. KeyError: 'TALL'"
    without_disassembler = compare(["c1 ", "c2 "], ["c1 ", "c3 "])
    assert (without_disassembler.same, without_disassembler.same_opcodes, without_disassembler.different) == (
        [0], [], [1])
    assert describe(best, compare(["c1 o1"], ["c1 o1"])) == ""


def test_a_real_compile_for_sm_90_is_repeatable_and_tells_two_configs_apart():
    shape = (64, 128, 64)
    other = {**MATMUL, "num_warps": 8}
    answers = compile_batch(REPO / "lib", [job("matmul", MATMUL, shape, "float16"), job("matmul", other, shape,
                                                                                          "float16")])
    again = compile_batch(REPO / "lib", [job("matmul", MATMUL, shape, "float16")])
    assert not any(answer.startswith("error") for answer in answers), answers
    assert answers[0] == again[0]
    (cubin, opcodes), (other_cubin, other_opcodes) = (answer.split(" ") for answer in answers)
    assert len(cubin) == len(opcodes) == 16 and cubin != other_cubin and opcodes != other_opcodes
    [failed] = compile_batch(REPO / "lib", [job("matmul", {"BLOCK_M": 64}, shape, "float16")])
    assert failed.startswith("error: KeyError")
