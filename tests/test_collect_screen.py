"""Two-pass sweeps (`--screen-runs`): every config screened with a few runs, the near-best timed again in full; what the
journal and the dataset hold, a sweep stopped in either pass resumed without timing anything twice, and the errors.

The measuring back end is the deterministic stand-in (no GPU on CI): its screened rows have `repeats` timings, its
full ones 3.
"""

import collections
import json
import math

import pytest

from tunebench.collect import Journal, journal_of, read_records, sweep, whole_shapes
from tunebench.kernels import get_kernel
from tunebench.measure.dataset import load_dataset
from tunebench.measure.screen import Screen

from test_collect import SHAPES, StandInBench

SCREEN = Screen(runs=1, margin=0.05)


def test_a_screen_keeps_the_configs_within_its_margin_of_the_best() -> None:
    assert Screen(3, 0.10).kept({"a": 1.0, "b": 1.1, "c": 1.11, "d": 2.0}) == {"a", "b"}
    assert Screen(3, 0.0).kept({"a": 1.0, "b": 1.0, "c": 1.01}) == {"a", "b"}
    assert Screen().kept({}) == set()


@pytest.mark.parametrize("runs, margin, message", [
    (0, 0.2, "at least 1 run per config, got runs=0"),
    (2.5, 0.2, "got runs=2.5"),
    (3, math.nan, "finite fraction >= 0 (0.2: within 20 %), got nan"),
    (3, -0.1, "got -0.1"),
])
def test_a_screen_names_a_bad_setting(runs, margin, message) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Screen(runs, margin)


def shape_rows(dataset, shape):
    rows = dataset.measurements
    return rows[(rows["M"] == shape[0]) & (rows["N"] == shape[1]) & (rows["K"] == shape[2])]


def test_a_screened_sweep_times_only_the_near_best_again_and_its_dataset_keeps_their_full_timing(tmp_path) -> None:
    out = tmp_path / "screened.parquet"
    assert sweep("matmul", "bfloat16", SHAPES, out, limit_configs=40, make_bench=StandInBench, screen=SCREEN)
    records = Journal(journal_of(out).path).read()
    dataset = load_dataset(out, kernel="matmul")
    assert dataset.provenance["screen"] == {"runs": 1, "margin": 0.05}
    key = get_kernel("matmul").config_space().key
    for shape in SHAPES:
        screened = {key(r["config"]): r for r in records
                    if r["kind"] == "config" and tuple(r["shape"]) == shape and r.get("screened")}
        assert len(screened) == 40
        ran = {k: r["repeats_ms"][0] for k, r in screened.items() if r["status"] == "ok"}
        kept = SCREEN.kept(ran)
        again = [r for r in records if r["kind"] == "config" and tuple(r["shape"]) == shape and not r.get("screened")]
        assert {key(r["config"]) for r in again} == kept and 0 < len(kept) < len(ran)
        done = [r for r in records if r["kind"] == "screen_done" and tuple(r["shape"]) == shape]
        assert done == [{"kind": "screen_done", "shape": list(shape), "timed_in_full": len(kept)}]
        rows = shape_rows(dataset, shape)
        repeats = rows[rows["status"] == "ok"].set_index(rows[rows["status"] == "ok"].apply(
            lambda row: key({name: row[name] for name in dataset.parameter_names}), axis=1))["repeats_ms"].map(len)
        assert len(rows) == 40 and (repeats[list(kept)] == 3).all()
        assert (repeats.drop(list(kept)) == SCREEN.runs).all()


def test_a_screened_sweep_stopped_in_either_pass_resumes_without_timing_anything_twice(tmp_path, monkeypatch) -> None:
    out = tmp_path / "resumed.parquet"
    calls = collections.Counter()
    original = StandInBench.measure_iter

    def stop_in_second_pass(self, configs, shape, deadline=None, repeats=None):
        calls[repeats] += 1
        for index, result in original(self, configs, shape, deadline, repeats):
            yield index, result
            if repeats is None and calls[None] == 1:
                return  # as a deadline met after the first full timing would
    monkeypatch.setattr(StandInBench, "measure_iter", stop_in_second_pass)
    assert not sweep("matmul", "bfloat16", SHAPES, out, limit_configs=40, make_bench=StandInBench, screen=SCREEN)
    key = get_kernel("matmul").config_space().key
    partial = read_records(journal_of(out).path)
    kept = [r for r in partial if r["kind"] == "config" and not r.get("screened")]
    assert len(kept) == 1, "stopped after the first full timing"
    assert not [r for r in whole_shapes(partial, [], key) if r["kind"] == "config"], \
        "a shape screened but not timed in full is not whole"
    with pytest.raises(ValueError, match=r"not yet timed in full; continue it with --screen-runs"):
        sweep("matmul", "bfloat16", SHAPES, out, limit_configs=40, make_bench=StandInBench)
    assert sweep("matmul", "bfloat16", SHAPES, out, limit_configs=40, make_bench=StandInBench, screen=SCREEN)
    records = read_records(journal_of(out).path)
    counts = collections.Counter((tuple(r["shape"]), json.dumps(r["config"], sort_keys=True), bool(r.get("screened")))
                                 for r in records if r["kind"] == "config")
    assert set(counts.values()) == {1}, "nothing timed twice in either pass"
    closed = {tuple(r["shape"]): r["timed_in_full"] for r in records if r["kind"] == "screen_done"}
    assert closed == {shape: sum(not screened for (s, _, screened) in counts if s == shape) for shape in SHAPES}, \
        "each shape's count of full timings, the sitting before the stop's included"
    assert len(load_dataset(out).measurements) == 80
