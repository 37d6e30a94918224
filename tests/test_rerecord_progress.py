"""benchmarks/rerecord_progress.py on a stand-in sweep's journal: a resumed journal's sittings counted once, only
finished shapes kept, sittings of the zeroing flush or of two GPU models refused, and the per-family summaries."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from test_collect import SHAPES, StandInBench
from tunebench.collect import journal_of, read_records, sweep

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import rerecord_progress  # noqa: E402


@pytest.fixture
def journal(tmp_path) -> list[dict]:
    """A stand-in sweep's records, its sitting marked as reading the flush buffer."""
    out = tmp_path / "sweep.parquet"
    assert sweep("matmul", "bfloat16", SHAPES, out, limit_configs=6, make_bench=StandInBench)
    records = read_records(journal_of(out).path)
    for record in records:
        if record["kind"] == "provenance":
            record["provenance"]["timing"] = {"flush": "read"}
    return records


def configs_of(records: list[dict]) -> list[dict]:
    return list({str(r["config"]): r["config"] for r in records if r["kind"] == "config"}.values())


def test_a_resumed_journals_sittings_count_once_and_only_finished_shapes_are_kept(journal):
    configs = configs_of(journal)
    assert len(rerecord_progress.sittings_of([*journal, *journal])) == 1
    dataset = rerecord_progress.journal_dataset(journal, configs)
    assert sorted(map(tuple, dataset.shapes())) == sorted(SHAPES)
    unfinished = [r for r in journal if not (r["kind"] == "config" and tuple(r["shape"]) == SHAPES[1]
                                             and r["config"] == configs[0])]
    assert list(map(tuple, rerecord_progress.journal_dataset(unfinished, configs).shapes())) == [SHAPES[0]]


def test_the_side_by_side_datasets_hold_the_same_shapes(journal, tmp_path):
    from tunebench.measure.dataset import load_dataset

    configs = configs_of(journal)
    finished = [r for r in journal if not (r["kind"] == "config" and tuple(r["shape"]) == SHAPES[1])]
    new = rerecord_progress.journal_dataset(finished, configs)
    recorded = rerecord_progress.journal_dataset(journal, configs)
    paths = rerecord_progress.save_side_by_side(new, recorded, tmp_path)
    assert [path.name for path in paths] == [f"rerecorded_{new.gpu.lower()}.parquet",
                                             f"recorded_same_shapes_{new.gpu.lower()}.parquet"]
    again, old = (load_dataset(path, kernel="matmul") for path in paths)
    assert list(map(tuple, again.shapes())) == list(map(tuple, old.shapes())) == [SHAPES[0]]
    assert len(old.measurements) == len(configs) < len(recorded.measurements)


def test_the_sitting_timing_counts_slow_runs_per_sitting(journal):
    records = [dict(r) for r in journal]
    config = next(i for i, r in enumerate(records) if r["kind"] == "config")
    records[config] = {**records[config], "repeats_ms": [1.0, 1.0, 1.3], "bench_s": 0.004, "screened": True}
    table = rerecord_progress.sitting_timing(records)
    assert len(table) == 1 and table["screens"][0] == 1
    assert table["screens with a run > 1.2x their median"][0] == "100.000%"
    assert table["ms a screen (median)"][0] == "4.00"
    full = [r for r in records if r["kind"] == "config" and not r.get("screened") and r["status"] == "ok"]
    assert table["full timings"][0] == len(full) > 0


def test_a_zeroing_sitting_or_a_second_gpu_model_is_refused(journal):
    zeroing = [dict(r, provenance=dict(r["provenance"], timing={"flush": "zero"}, date="later"))
               if r["kind"] == "provenance" else r for r in journal]
    with pytest.raises(SystemExit, match=r"flushes \['read', 'zero'\]"):
        rerecord_progress.journal_dataset([*journal, *zeroing], configs_of(journal))
    other = [dict(r, provenance=dict(r["provenance"], gpu_name="H200", date="later"))
             if r["kind"] == "provenance" else r for r in journal]
    with pytest.raises(SystemExit, match="'H200', 'stand-in'"):
        rerecord_progress.journal_dataset([*journal, *other], configs_of(journal))


def test_the_family_tables_summarize_all_shapes_then_each_family():
    index = pd.MultiIndex.from_tuples([(1, 64, 64), (2, 64, 64), (512, 64, 64)], names=["M", "N", "K"])
    table = rerecord_progress.per_family({"e": pd.Series([1.0, 0.5, 0.9], index=index)})
    assert table["shapes"].tolist() == ["all", "M < 8", "128 <= M < 1024"]
    assert table["count"].tolist() == [3, 2, 1]
    assert table["e"].iloc[1] == "75.00% / 55.00% / 50.00%"
    shares = rerecord_progress.per_family({"s": pd.Series([True, False, True], index=index)}, rerecord_progress.share)
    assert shares["s"].tolist() == ["67%", "50%", "100%"]


def test_the_screens_headroom_is_the_final_bests_screened_latency_over_the_screens_best():
    def config(block_m: int, screened: bool, ms: float) -> dict:
        return {"kind": "config", "status": "ok", "shape": [1, 64, 64], "screened": screened, "repeats_ms": [ms],
                "config": {"BLOCK_M": block_m, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 1, "SPLIT_K": 1,
                           "num_warps": 4, "num_stages": 2}}
    records = [config(16, True, 1.00), config(32, True, 1.04), config(64, True, 1.50),
               config(16, False, 1.02), config(32, False, 0.99)]
    shapes = pd.MultiIndex.from_tuples([(1, 64, 64)], names=["M", "N", "K"])
    assert rerecord_progress.screen_headroom(records, shapes).tolist() == pytest.approx([1.04])


def test_the_best_of_several_picks_is_judged_by_the_fastest_that_ran():
    rows = pd.DataFrame({"M": 1, "N": 64, "K": 64, "BLOCK_M": [16, 32, 64, 128], "SPLIT_K": 1,
                         "status": ["ok", "ok", "ok", "compile_error"], "latency_ms": [2.0, 1.0, 4.0, float("nan")]})
    judged = rerecord_progress.best_of_judged(rows, {
        (1, 64, 64): [{"BLOCK_M": 64, "SPLIT_K": 1}, {"BLOCK_M": 16, "SPLIT_K": 1}]})
    assert judged.tolist() == [0.5]
    failed = rerecord_progress.best_of_judged(rows, {(1, 64, 64): [{"BLOCK_M": 128, "SPLIT_K": 1}]})
    assert failed.tolist() == [0.0]


def test_the_fresh_checks_measured_shapes_are_the_finished_ones_of_that_gpus_journals(journal, tmp_path):
    """`fresh_check_shapes.save_measured`: the shapes one GPU model's batch journals finished, as one dataset."""
    import fresh_check_shapes
    from test_rerecord_sitting import write_journal
    from tunebench.measure.dataset import load_dataset

    configs = configs_of(journal)
    unfinished = [r for r in journal if not (r["kind"] == "config" and tuple(r["shape"]) == SHAPES[1]
                                             and r["config"] == configs[0])]
    write_journal(tmp_path / "batch_01_h100.journal.jsonl.gz", unfinished)
    out = tmp_path / "measured.parquet"
    assert fresh_check_shapes.save_measured("h100", out, tmp_path, configs) == 1
    assert list(map(tuple, load_dataset(out, kernel="matmul").shapes())) == [SHAPES[0]]
    with pytest.raises(SystemExit, match="no batch_\\*_h200.journal.jsonl.gz in"):
        fresh_check_shapes.save_measured("h200", out, tmp_path, configs)
