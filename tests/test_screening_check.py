"""benchmarks/screening_check.py on stand-in sweeps: a screened sweep of the same deterministic latencies finds the full
sweep's best and counts both passes' bench seconds; sweeps of no shared shape, or an empty journal, are refused."""

import sys
from pathlib import Path

import pytest

from tunebench.collect import journal_of, read_records, sweep
from tunebench.measure.dataset import load_dataset
from tunebench.measure.screen import Screen

from test_collect import SHAPES, StandInBench

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import screening_check as check  # noqa: E402


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sweeps")
    full, screened = folder / "full.parquet", folder / "screened.parquet"
    assert sweep("matmul", "bfloat16", SHAPES, full, limit_configs=30, make_bench=StandInBench)
    assert sweep("matmul", "bfloat16", SHAPES, screened, limit_configs=30, make_bench=StandInBench,
                 screen=Screen(2, 0.05))
    return load_dataset(full), read_records(journal_of(screened).path), folder


def test_a_screen_of_the_same_latencies_finds_the_full_sweeps_best_and_pays_for_both_passes(sweeps):
    full, records, _ = sweeps
    table = check.compare(full, check.screened_rows(records, full.shape_names, full.parameter_names))
    assert table["shape"].tolist() == ["3x32x48", "5x64x32"]
    assert (table["configs"] == 30).all() and (table["timed in full"] < table["configs"]).all()
    assert table["full sweep's best kept"].all() and (table["pick / full best"] == 1.0).all()
    assert (table["full best / pick, two-pass sitting"] == 1.0).all()
    per_timing = 0.02  # the stand-in's bench seconds per config that compiled (split-K 8 does not)
    timed = [sum(r["kind"] == "config" and bool(r.get("screened")) and r["status"] == "ok" and r["shape"] == list(shape)
                 for r in records) for shape in SHAPES]
    assert table["bench s, two passes"].tolist() == pytest.approx(
        [(n + kept) * per_timing for n, kept in zip(timed, table["timed in full"])])


def test_sweeps_of_no_shared_shape_and_an_empty_journal_are_refused(sweeps):
    full, records, _ = sweeps
    elsewhere = [dict(r, shape=[7, 7, 7]) if "shape" in r else r for r in records]
    with pytest.raises(ValueError, match="share no shape"):
        check.compare(full, check.screened_rows(elsewhere, full.shape_names, full.parameter_names))
    with pytest.raises(ValueError, match="no config records"):
        check.screened_rows([], full.shape_names, full.parameter_names)


def test_the_report_is_written_with_its_command(sweeps, tmp_path):
    _, _, folder = sweeps
    out = tmp_path / "check.md"
    assert check.main(["--full", str(folder / "full.parquet"), "--screened",
                       str(journal_of(folder / "screened.parquet").path), "--out", str(out)]) == 0
    text = out.read_text()
    assert "benchmarks/screening_check.py --full" in text and "of the full sweep's" in text
