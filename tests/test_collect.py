"""The collector: shape parsing, and a sweep killed mid-way that resumes without measuring anything twice.

The measuring back end is a deterministic stand-in here (no GPU on CI); the GPU run of the same code path
is in the README's collection command.
"""

import collections
import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tunebench.collect import (Journal, JournalBusy, build_dataset, dataset_records, main, parse_shapes,
                                provenance_records, read_records, records_after, sweep, sweep_configs,
                                sweep_provenance, whole_shapes, with_added_configs)
from tunebench.kernels import get_kernel, kernel_source_sha256
from tunebench.measure.dataset import load_dataset
from tunebench.measure.timing import TimingPolicy
from tunebench.space import ConfigError

import stand_in_bench

TESTS = Path(__file__).resolve().parent
SHAPES = [(3, 32, 48), (5, 64, 32)]


class StandInBench(stand_in_bench.StandInBench):
    """Matmul latencies from the config; split-K 8 fails to compile."""

    def latency_ms(self, config, shape):
        return config["BLOCK_M"] * 0.001 + config["num_stages"] * 0.01 + shape[0] * 0.1

    def fails_to_compile(self, config):
        return config["SPLIT_K"] == 8


class FlagsStandIn(stand_in_bench.StandInBench):
    """The TMA GEMM's space, whose WARP_SPECIALIZE and FLATTEN are bools."""

    def latency_ms(self, config, shape):
        return config["BLOCK_M"] * 0.001 + config["WARP_SPECIALIZE"] * 0.01


def test_parse_shapes():
    assert parse_shapes("1x2x3, 4x5x6", 3) == [(1, 2, 3), (4, 5, 6)]
    with pytest.raises(ValueError, match="bad shape '1x2'"):
        parse_shapes("1x2", 3)
    with pytest.raises(ValueError, match="bad shape '0x2x3'"):
        parse_shapes("0x2x3", 3)
    with pytest.raises(ValueError, match="bad shape 'axbxc'"):
        parse_shapes("axbxc", 3)


def test_journal_ignores_a_line_cut_short(tmp_path):
    journal = Journal(tmp_path / "j" / "journal.jsonl")
    journal.append({"kind": "config", "n": 1})
    with journal.path.open("a") as handle:
        handle.write('{"kind": "conf')  # a kill in the middle of a write
    assert journal.read() == [{"kind": "config", "n": 1}]


def test_killed_sweep_resumes_without_measuring_twice(tmp_path):
    out = tmp_path / "stand_in.parquet"
    child = f"""
import sys; sys.path.insert(0, {str(TESTS)!r})
from pathlib import Path
from test_collect import StandInBench, SHAPES
from tunebench.collect import sweep
sweep("matmul", "bfloat16", SHAPES, Path({str(out)!r}), limit_configs=40, make_bench=StandInBench)
"""
    process = subprocess.Popen([sys.executable, "-c", child], env={**os.environ, "STAND_IN_DELAY_S": "0.02"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    journal = out.with_suffix(".journal") / "journal.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_text().count('"kind": "config"') >= 25:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not out.exists(), "the dataset is written only when the sweep is complete"
    measured_before = sum(r["kind"] == "config" for r in Journal(journal).read())
    assert 25 <= measured_before < 80

    assert sweep("matmul", "bfloat16", SHAPES, out, limit_configs=40, make_bench=StandInBench)
    records = Journal(journal).read()
    counts = collections.Counter((tuple(r["shape"]), json.dumps(r["config"], sort_keys=True))
                                 for r in records if r["kind"] == "config")
    assert len(counts) == 80 and set(counts.values()) == {1}
    dataset = load_dataset(out, kernel="matmul")
    assert len(dataset.measurements) == 80 and len(dataset.vendor) == 2
    assert dataset.provenance["gpu_name"] == "stand-in"
    first, second = dataset.provenance["sittings"]  # the resumed sweep ran with another timing: the dataset says so
    assert first["measured_before"] == 0 and second["measured_before"] >= measured_before
    assert "timing" not in first and second["timing"] == {"delay_s": 0.0}
    assert dataset.measurements["sitting"].value_counts().to_dict() == {0: measured_before, 1: 80 - measured_before}
    assert dataset.vendor["sitting"].iloc[0] == 0  # the first shape's cuBLAS was timed before the kill
    failures = dataset.measurements[dataset.measurements.status != "ok"]
    assert (failures.status == "compile_error").all() and failures.latency_ms.isna().all()


def test_a_journal_another_collector_holds_is_refused_and_free_again_when_it_lets_go(tmp_path, capsys):
    out = tmp_path / "held.parquet"
    journal = Journal(out.with_suffix(".journal") / "journal.jsonl")
    with journal.hold():
        with pytest.raises(JournalBusy, match=rf"held.journal/journal.jsonl is being written by another collector "
                                              rf"\(pid {os.getpid()}\)"):
            sweep("matmul", "bfloat16", SHAPES, out, limit_configs=4, make_bench=StandInBench)
        assert main(["--shapes", "3x32x48", "--out", str(out), "--limit-configs", "4"]) == 1
        assert "is being written by another collector" in capsys.readouterr().err
        assert journal.read() == [], "the refused sweeps wrote nothing"
    assert sweep("matmul", "bfloat16", SHAPES, out, limit_configs=4, make_bench=StandInBench)


def test_stop_after_budget_then_finish(tmp_path):
    out = tmp_path / "budget.parquet"
    assert not sweep("matmul", "bfloat16", SHAPES, out, limit_configs=10, stop_after_s=0.0, make_bench=StandInBench)
    assert not out.exists()
    assert sweep("matmul", "bfloat16", SHAPES, out, limit_configs=10, make_bench=StandInBench)
    assert len(load_dataset(out).measurements) == 20


def test_a_journal_shared_with_an_unfinished_sweep_of_other_shapes_writes_whole_shapes_only(tmp_path, monkeypatch):
    """Batches measured in turn into one journal: the dataset a finished batch writes holds every whole shape so far,
    not the part of a shape another batch's stopped sweep left."""
    out = tmp_path / "batches.parquet"
    assert sweep("matmul", "bfloat16", SHAPES[:1], out, limit_configs=10, make_bench=StandInBench)
    monkeypatch.setenv("STAND_IN_DELAY_S", "0.02")
    assert not sweep("matmul", "bfloat16", [(7, 48, 64)], out, limit_configs=10, stop_after_s=0.1,
                     make_bench=StandInBench)
    monkeypatch.setenv("STAND_IN_DELAY_S", "0")
    records = Journal(out.with_suffix(".journal") / "journal.jsonl").read()
    assert 0 < sum(r["kind"] == "config" and r["shape"] == [7, 48, 64] for r in records) < 10
    assert sweep("matmul", "bfloat16", SHAPES[1:], out, limit_configs=10, make_bench=StandInBench)
    assert sorted(load_dataset(out).shapes()) == sorted(SHAPES)
    assert len(load_dataset(out).measurements) == 20
    configs = [r["config"] for r in records if r["kind"] == "config" and r["shape"] == list(SHAPES[0])]
    key = lambda config: tuple(sorted(config.items()))  # noqa: E731
    assert whole_shapes(records, configs, key) == [r for r in records if r.get("shape") != [7, 48, 64]]


def test_a_sweep_begun_elsewhere_resumes_from_its_gzipped_journal(tmp_path, monkeypatch):
    first = tmp_path / "machine_a" / "sweep.parquet"
    monkeypatch.setenv("STAND_IN_DELAY_S", "0.02")
    assert not sweep("matmul", "bfloat16", SHAPES, first, limit_configs=10, stop_after_s=0.1, make_bench=StandInBench)
    monkeypatch.setenv("STAND_IN_DELAY_S", "0")
    journal = first.with_suffix(".journal") / "journal.jsonl"
    partial = [r for r in Journal(journal).read() if r["kind"] == "config"]
    archive = tmp_path / "carried.jsonl.gz"
    with gzip.open(archive, "wt") as handle:
        handle.write(journal.read_text())

    second = tmp_path / "machine_b" / "sweep.parquet"
    assert sweep("matmul", "bfloat16", SHAPES, second, limit_configs=10, make_bench=StandInBench, resume_from=archive)
    records = Journal(second.with_suffix(".journal") / "journal.jsonl").read()
    assert sum(r["kind"] == "config" for r in records) == 20 and 0 < len(partial) < 20
    assert [r for r in records if r["kind"] == "config"][:len(partial)] == partial, "nothing measured twice"
    # the same command again on the same machine: its journal goes on from the archive's, so it is kept
    assert sweep("matmul", "bfloat16", SHAPES, second, limit_configs=10, make_bench=StandInBench, resume_from=archive)
    again = Journal(second.with_suffix(".journal") / "journal.jsonl").read()
    assert again[:len(records)] == records and all(r["kind"] == "provenance" for r in again[len(records):])
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps(dict(record, latency_ms=1.0)) + "\n" for record in partial))
    with pytest.raises(ValueError, match="already holds records that do not go on from"):
        sweep("matmul", "bfloat16", SHAPES, second, limit_configs=10, make_bench=StandInBench, resume_from=other)


def test_a_saved_dataset_turns_back_into_the_records_that_build_it(tmp_path):
    """A dataset whose journal is gone is extended through its records: they rebuild it exactly, and a later
    sitting's records add to it, listed as a second sitting."""
    first = tmp_path / "first.parquet"
    assert sweep("matmul", "bfloat16", SHAPES[:1], first, limit_configs=6, make_bench=StandInBench)
    dataset = load_dataset(first)
    rebuilt = build_dataset("matmul", "bfloat16", dataset_records(dataset))
    pd.testing.assert_frame_equal(rebuilt.measurements, dataset.measurements)
    pd.testing.assert_frame_equal(rebuilt.vendor, dataset.vendor)
    assert rebuilt.provenance == dataset.provenance

    second = tmp_path / "second.parquet"
    assert sweep("matmul", "bfloat16", SHAPES[1:], second, limit_configs=6, make_bench=StandInBench)
    later = Journal(second.with_suffix(".journal") / "journal.jsonl").read()
    extended = build_dataset("matmul", "bfloat16", dataset_records(dataset) + later)
    assert sorted(extended.shapes()) == sorted(SHAPES) and len(extended.measurements) == 12
    assert len(extended.provenance["sittings"]) == 2
    sittings = extended.measurements.groupby(["M", "N", "K"])["sitting"].unique().map(list).to_dict()
    assert sittings == {SHAPES[0]: [0], SHAPES[1]: [1]} and extended.vendor["sitting"].tolist() == [0, 1]
    again = build_dataset("matmul", "bfloat16", dataset_records(extended))
    assert again.provenance == extended.provenance
    pd.testing.assert_frame_equal(again.measurements, extended.measurements)

    # a shape swept again into a dataset of its own replaces its rows, which name the third sitting, not their own 0
    third = tmp_path / "third.parquet"
    assert sweep("matmul", "bfloat16", SHAPES[:1], third, limit_configs=6, make_bench=StandInBench)
    swapped = build_dataset("matmul", "bfloat16", records_after(dataset_records(extended), read_records(third)))
    assert len(swapped.provenance["sittings"]) == 3 and len(swapped.measurements) == 12
    assert swapped.provenance["sittings"][2]["measured_before"] == 12
    sittings = swapped.measurements.groupby(["M", "N", "K"])["sitting"].unique().map(list).to_dict()
    assert sittings == {SHAPES[0]: [2], SHAPES[1]: [1]} and sorted(swapped.vendor["sitting"]) == [1, 2]
    resweep = load_dataset(third).measurements.drop(columns="sitting").reset_index(drop=True)
    pd.testing.assert_frame_equal(swapped.measurements[swapped.measurements["M"] == SHAPES[0][0]]
                                  .drop(columns="sitting").reset_index(drop=True), resweep)


def test_a_dataset_of_a_space_with_flags_turns_back_into_records_of_its_configs(tmp_path):
    out = tmp_path / "tma.parquet"
    assert sweep("matmul_tma", "bfloat16", SHAPES[:1], out, limit_configs=6, make_bench=FlagsStandIn)
    dataset = load_dataset(out)
    records = [r for r in dataset_records(dataset) if r["kind"] == "config"]
    assert records and all(type(r["config"]["WARP_SPECIALIZE"]) is bool for r in records)
    rebuilt = build_dataset("matmul_tma", "bfloat16", dataset_records(dataset))
    pd.testing.assert_frame_equal(rebuilt.measurements, dataset.measurements)
    # records of configs from before SPLIT_K joined the space mean whole K, as the sweep's own records say
    before = [dict(r, config={k: v for k, v in r["config"].items() if k != "SPLIT_K"})
              if r["kind"] == "config" and r["config"]["SPLIT_K"] == 1 else r for r in dataset_records(dataset)]
    assert any("SPLIT_K" not in r["config"] for r in before if r["kind"] == "config")
    pd.testing.assert_frame_equal(build_dataset("matmul_tma", "bfloat16", before).measurements, dataset.measurements)


def test_provenance_records_invert_the_sittings_summary():
    provenance = {"gpu_name": "H200", "date": "d0", "triton": "3.6.0",
                  "sittings": [{"measured_before": 0, "date": "d0"},
                               {"measured_before": 40, "date": "d1", "triton": "3.7.0"}]}
    assert sweep_provenance(provenance_records(provenance)) == provenance
    assert sweep_provenance(provenance_records({"date": "d0"})) == {"date": "d0"}


def test_a_later_journal_extends_a_dataset_without_rewriting_it(tmp_path, monkeypatch, capsys):
    """benchmarks/extend_dataset.py: the later sitting's complete shapes become an extension file beside the dataset,
    whose own file stays byte for byte as it was; a shape already there, or not complete in the journal (here its
    vendor row is missing), is refused; the dataset the sitting wrote serves as well as its journal."""
    monkeypatch.syspath_prepend(str(TESTS.parent / "benchmarks"))
    import extend_dataset

    base = tmp_path / "base.parquet"
    assert sweep("matmul", "bfloat16", SHAPES[:1], base, limit_configs=6, make_bench=StandInBench)
    later = tmp_path / "later.parquet"
    assert sweep("matmul", "bfloat16", SHAPES[1:], later, limit_configs=6, make_bench=StandInBench)
    journal = later.with_suffix(".journal") / "journal.jsonl"
    before = base.read_bytes()

    def run(*arguments: str) -> None:
        monkeypatch.setattr(sys, "argv", ["extend_dataset.py", "--dataset", str(base), "--journal", str(journal),
                                          "--name", "later_check", *arguments])
        extend_dataset.main()

    run("--shapes", "5x64x32", "--write")
    assert base.read_bytes() == before
    extended = load_dataset(base)
    assert sorted(extended.shapes()) == sorted(SHAPES) and len(extended.measurements) == 12
    assert extended.provenance["sittings"][-1]["extension"] == "001_later_check.parquet"
    assert extended.measurements["sitting"].tolist() == [0] * 6 + [1] * 6
    assert "wrote " in capsys.readouterr().out
    with pytest.raises(SystemExit, match=r"already in .*: \[\(5, 64, 32\)\]"):
        run("--shapes", "5x64x32")
    journal.write_text("".join(line for line in journal.read_text().splitlines(keepends=True)
                               if '"shape": [5, 64, 32]' not in line or '"kind": "vendor"' not in line))
    (base.with_name("base.extensions") / "001_later_check.parquet").unlink()
    with pytest.raises(SystemExit, match=r"not complete in .*: \[\(5, 64, 32\)\]"):
        run("--shapes", "5x64x32")
    journal = later  # the sitting's own dataset serves when its journal is gone
    run("--shapes", "5x64x32", "--write")
    pd.testing.assert_frame_equal(load_dataset(base).measurements, extended.measurements)


def test_configs_a_later_sitting_timed_join_a_sweeps_shapes_beside_its_vendor_rows(tmp_path, monkeypatch, capsys):
    """benchmarks/add_configs.py: tall configs timed later join an earlier sweep's shape, each row with its sitting,
    the shape's cuBLAS row the earlier sweep's; refused are a shape the sweep lacks, another GPU, a shape the later
    sitting did not finish, and a config both hold."""
    monkeypatch.syspath_prepend(str(TESTS.parent / "benchmarks"))
    import add_configs

    every = sweep_configs("matmul_tma")
    tall = [config for config in every if config["TALL"]][:3]
    base, later = tmp_path / "base.parquet", tmp_path / "later.parquet"
    assert sweep("matmul_tma", "bfloat16", SHAPES, base, configs=every[:4], make_bench=FlagsStandIn)
    assert sweep("matmul_tma", "bfloat16", SHAPES, later, configs=tall, make_bench=FlagsStandIn)
    records = read_records(later.with_suffix(".journal") / "journal.jsonl")
    combined = with_added_configs(load_dataset(base), records, SHAPES[1:])
    assert combined.shapes() == SHAPES[1:] and len(combined.measurements) == 7
    assert combined.measurements["TALL"].tolist() == [False] * 4 + [True] * 3
    assert combined.measurements["sitting"].tolist() == [0] * 4 + [1] * 3
    assert combined.vendor["sitting"].tolist() == [0] and len(combined.provenance["sittings"]) == 2
    assert combined.provenance["sittings"][1]["measured_before"] == 4
    with pytest.raises(ValueError, match=r"shapes not in the base dataset: \[\(7, 8, 9\)\]"):
        with_added_configs(load_dataset(base), records, [(7, 8, 9)])
    with pytest.raises(ValueError, match=r"measured on \['H100'\], the base on 'stand-in'"):
        with_added_configs(load_dataset(base), [dict(r, provenance=dict(r["provenance"], gpu_name="H100"))
                                                if r["kind"] == "provenance" else r for r in records], SHAPES)
    with pytest.raises(ValueError, match=r"only some of its 3 configs at .*\{\(3, 32, 48\): 1\}"):
        with_added_configs(load_dataset(base), [r for r in records if not (
            r["kind"] == "config" and r["shape"] == [3, 32, 48] and r["config"] == tall[0])], SHAPES)
    with pytest.raises(ValueError, match=r"1 of the added configs are in the base already at \(3, 32, 48\)"):
        with_added_configs(load_dataset(base), records + [dict(records[-1], shape=[3, 32, 48], config=every[0])]
                           + [dict(records[-1], shape=[5, 64, 32], config=every[0])], SHAPES)
    out = tmp_path / "combined.parquet"
    monkeypatch.setattr(sys, "argv", ["add_configs.py", "--dataset", str(base), "--later", str(later),
                                      "--shapes", "3x32x48,5x64x32", "--out", str(out)])
    assert add_configs.main() == 0
    assert len(load_dataset(out).measurements) == 14 and "14 config rows from 2 sittings" in capsys.readouterr().out


def test_a_later_sitting_replaces_the_configs_it_timed_again_only_when_asked(tmp_path, monkeypatch):
    """Configs whose binary changed are timed again and replace the sweep's rows (`--replace`); the others stay."""
    every = sweep_configs("matmul_tma")[:4]
    base, later = tmp_path / "base.parquet", tmp_path / "later.parquet"
    assert sweep("matmul_tma", "bfloat16", SHAPES, base, configs=every, make_bench=FlagsStandIn)
    assert sweep("matmul_tma", "bfloat16", SHAPES, later, configs=every[2:], make_bench=FlagsStandIn)
    records = read_records(later.with_suffix(".journal") / "journal.jsonl")
    with pytest.raises(ValueError, match="2 of the added configs are in the base already"):
        with_added_configs(load_dataset(base), records, SHAPES)
    combined = with_added_configs(load_dataset(base), records, SHAPES, replace=True)
    assert len(combined.measurements) == 4 * len(SHAPES)
    space = get_kernel("matmul_tma").config_space()
    for shape in SHAPES:
        sittings = dict(zip(map(space.key, combined.configs(shape)), combined.task(shape)["sitting"]))
        assert sittings == {space.key(config): 0 if index < 2 else 1 for index, config in enumerate(every)}


def test_given_configs_recorded_before_a_parameter_joined_the_space_mean_its_old_value():
    recorded = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "PROGRAMS_PER_SM": 0,
                "WARP_SPECIALIZE": False, "FLATTEN": False, "EPILOGUE_SPLIT": 2, "num_warps": 4, "num_stages": 4}
    assert sweep_configs("matmul_tma", [recorded]) == [dict(recorded, WIDEN=False, TALL=False, SPLIT_K=1)]
    assert sweep_configs("matmul_tma", [dict(recorded, WIDEN=True)]) == [
        dict(recorded, WIDEN=True, TALL=False, SPLIT_K=1)]
    assert sweep_configs("matmul_tma", [dict(recorded, TALL=True)]) == [
        dict(recorded, WIDEN=False, TALL=True, SPLIT_K=1)]
    with pytest.raises(ConfigError, match="unknown parameter"):
        sweep_configs("matmul_tma", [dict(recorded, WIDTH=True)])


def test_a_gpu_sweep_stopped_and_resumed_says_which_sitting_timed_each_row():
    """results/dataset_sittings_check/: the collector on one H200, stopped after its first shape, then resumed."""
    path = TESTS.parent / "results" / "dataset_sittings_check" / "h200" / "sittings.parquet"
    dataset = load_dataset(path, kernel="matmul_tma")
    assert len(dataset.provenance["sittings"]) == 2 and dataset.gpu == "NVIDIA H200"
    sittings = dataset.measurements.groupby("M")["sitting"].agg(lambda column: sorted(set(column))).to_dict()
    assert sittings == {1024: [0], 2048: [1]} and dataset.measurements.groupby("M").size().tolist() == [80, 80]
    assert dataset.vendor.set_index("M")["sitting"].to_dict() == {1024: 0, 2048: 1}


@pytest.mark.parametrize("arguments, message", [
    (["--kernel", "gemm"], "unknown kernel 'gemm'; known kernels: matmul, "),
    (["--dtype", "int8"], "unknown dtype 'int8' for matmul; allowed: bfloat16, float16"),
    (["--shapes", "3x32"], "bad shape '3x32': expected 3 positive integers joined by 'x'; or the name of one of "
                           "matmul's shape sets: default, prediction; or @FILE"),
    (["--shapes", "@missing.txt"], "--shapes '@missing.txt': no file at missing.txt"),
    (["--stop-after-s", "-5"], "--stop-after-s must be at least 0, got -5.0"),
    (["--compile-workers", "0"], "--compile-workers must be at least 1, got 0"),
    (["--limit-configs", "0"], "--limit-configs must be at least 1, got 0"),
    (["--out", "x.csv"], "--out 'x.csv': a dataset is a .parquet file"),
    (["--configs", "missing.json"], "--configs 'missing.json' is not a readable JSON list of configs"),
    (["--screen-margin", "0.1"], "--screen-margin needs --screen-runs"),
    (["--screen-runs", "0"], "a screen times at least 1 run per config, got runs=0"),
    (["--screen-runs", "3", "--screen-margin", "-0.5"], "a screen's margin is a finite fraction >= 0 (0.2: within "
                                                        "20 %), got -0.5"),
])
def test_the_command_line_names_a_bad_value_and_what_is_allowed(arguments, message, tmp_path, capsys, monkeypatch):
    """Each refused before any journal, bench or GPU: argparse's exit status 2 and one line naming the value."""
    monkeypatch.chdir(tmp_path)
    defaults = {"--shapes": "3x32x48", "--out": "x.parquet"}
    given = dict(zip(arguments[::2], arguments[1::2]))
    with pytest.raises(SystemExit) as exit_info:
        main([item for option, value in {**defaults, **given}.items() for item in (option, value)])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir()), "nothing written"


def test_the_command_line_refuses_configs_that_are_not_a_list_of_configs(tmp_path, capsys):
    configs = tmp_path / "configs.json"
    configs.write_text('{"BLOCK_M": 64}')
    with pytest.raises(SystemExit):
        main(["--shapes", "3x32x48", "--out", str(tmp_path / "x.parquet"), "--configs", str(configs)])
    assert "holds dict, not a JSON list of configs" in capsys.readouterr().err


def test_resuming_a_journal_of_another_kernel_source_warns_and_goes_on(tmp_path, capsys):
    out = tmp_path / "edited.parquet"
    assert not sweep("matmul", "bfloat16", SHAPES, out, limit_configs=10, stop_after_s=0.0, make_bench=StandInBench)
    journal = Journal(out.with_suffix(".journal") / "journal.jsonl")
    current = kernel_source_sha256(get_kernel("matmul"))
    lines = journal.path.read_text().splitlines()
    for source, warned in ((current, False), ("0123456789abcdef", True)):
        records = [json.loads(line) for line in lines]
        for record in records:
            if record["kind"] == "provenance":
                record["provenance"]["kernel_source_sha256"] = source
        journal.path.write_text("".join(json.dumps(record) + "\n" for record in records))
        capsys.readouterr()
        assert not sweep("matmul", "bfloat16", SHAPES, out, limit_configs=10, stop_after_s=0.0,
                         make_bench=StandInBench)
        message = (f"earlier sittings of this journal measured kernel source 0123456789abcdef; the current code's is "
                   f"{current}")
        assert (message in capsys.readouterr().err) is warned


def test_a_journal_timed_with_one_flush_is_not_continued_with_the_other(tmp_path, capsys):
    """A sitting that recorded no flush zeroed the buffer; continuing its journal with --flush read is refused, on
    the command line with the journal named and the flush that continues it."""
    out = tmp_path / "zeroed.parquet"
    assert not sweep("matmul", "bfloat16", SHAPES, out, limit_configs=10, stop_after_s=0.0, make_bench=StandInBench)
    with pytest.raises(ValueError, match="was timed with --flush zero, not --flush read"):
        sweep("matmul", "bfloat16", SHAPES, out, limit_configs=10, stop_after_s=0.0, make_bench=StandInBench,
              timing=TimingPolicy(flush="read"))
    assert not sweep("matmul", "bfloat16", SHAPES, out, limit_configs=10, stop_after_s=0.0, make_bench=StandInBench,
                     timing=TimingPolicy(flush="zero"))
    with pytest.raises(SystemExit):
        main(["--shapes", "3x32x48", "--out", str(out), "--flush", "read"])
    assert "continue it with --flush zero or write another --out" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--shapes", "3x32x48", "--out", str(out), "--flush", "write"])
    assert "invalid choice: 'write' (choose from" in capsys.readouterr().err


def test_shapes_come_from_a_text_file_or_a_recorded_datasets_shapes(tmp_path):
    """`--shapes @FILE`: a text file of shapes split by commas, spaces or lines, checked like the inline list; or
    '@D.parquet', every shape of a recorded dataset of the kernel, sorted; a set name and an inline list as before."""
    from tunebench.collect import shapes_argument
    from tunebench.kernels import matmul
    listed = tmp_path / "shapes.txt"
    listed.write_text("1x768x3072,3x3017x731\n  16x5000x3000\n\n")
    assert shapes_argument(f"@{listed}", "matmul", matmul.SHAPE_SETS, 3) == [(1, 768, 3072), (3, 3017, 731),
                                                                              (16, 5000, 3000)]
    listed.write_text("1x768x3072 4x0x8")
    with pytest.raises(ValueError, match="bad shape '4x0x8'"):
        shapes_argument(f"@{listed}", "matmul", matmul.SHAPE_SETS, 3)
    recorded = TESTS.parent / "results" / "datasets" / "matmul_bfloat16_h100_flush_zero_1.parquet"
    shapes = shapes_argument(f"@{recorded}", "matmul", matmul.SHAPE_SETS, 3)
    assert len(shapes) == 10 and shapes == sorted(shapes) and shapes[0] == (1, 768, 3072)
    assert all(isinstance(value, int) for shape in shapes for value in shape)
    with pytest.raises(ValueError, match="matmul_tma"):
        shapes_argument(f"@{recorded}", "matmul_tma", {}, 3)
    assert shapes_argument("prediction", "matmul", matmul.SHAPE_SETS, 3) == list(matmul.SHAPE_SETS["prediction"])
    assert shapes_argument("2x8x8", "matmul", matmul.SHAPE_SETS, 3) == [(2, 8, 8)]
