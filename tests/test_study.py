"""The study runner: budgets, free revisits, charged strategy time, determinism and resumption."""

import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tunebench.measure.result import Result, Status
from tunebench.search.base import Strategy
from tunebench.space import PowerOfTwo, Space
from tunebench.study import (Budget, Run, cached_dataset, judged_by_recorded_medians, key_text, run_search,
                             run_study, stale_runs, task_references, tasks_by_kernel, tasks_of)

REPO = Path(__file__).resolve().parents[1]
KT_A100 = REPO.parent / "shared" / "datasets" / "kerneltuner" / "convolution_A100.json.gz"
SPACE = Space([PowerOfTwo("x", 1, 64), PowerOfTwo("y", 1, 64)])


class FixedBatches(Strategy):
    """Asks the given batches in order (repeating configs on purpose)."""

    batches: list = []

    def search(self):
        for batch in self.batches:
            yield batch


class CountingEvaluator:
    """One second per evaluation; latency x*y; counts what it was asked."""

    def __init__(self):
        self.asked = 0
        self.elapsed_s = 0.0

    def evaluate(self, configs):
        self.asked += len(configs)
        self.elapsed_s += len(configs)
        return [Result(dict(c), Status.OK, latency_ms=float(c["x"] * c["y"])) for c in configs]

    def charge(self, seconds):
        self.elapsed_s += seconds


def _strategy(batches):
    strategy = FixedBatches(SPACE, seed=0)
    strategy.batches = batches
    return strategy


def test_revisits_are_free_and_budget_counts_unique_evaluations():
    a, b, c, d = ({"x": 1, "y": 4}, {"x": 2, "y": 1}, {"x": 8, "y": 8}, {"x": 1, "y": 1})
    evaluator = CountingEvaluator()
    trace = run_search(_strategy([[a, b], [a, c], [b, d], [d]]), evaluator, Budget(evaluations=3))
    assert list(trace.eval_index) == [1, 2, 3]
    assert evaluator.asked == 3  # a was served from the cache; d was cut by the budget
    assert list(trace.best_ms) == [4.0, 2.0, 2.0]
    assert (trace.time_s.diff().dropna() >= 0).all()


def test_seconds_budget_and_charged_strategy_time():
    batches = [[{"x": 2 ** i, "y": 1}] for i in range(7)]
    evaluator = CountingEvaluator()
    trace = run_search(_strategy(batches), evaluator, Budget(seconds=3.5))
    assert len(trace) == 4  # 1 s each: the fourth starts at 3 s < 3.5 s, the fifth would start after
    assert evaluator.elapsed_s >= trace.time_s.iloc[-1] >= 4.0
    assert trace.strategy_s.iloc[-1] >= 0 and (trace.strategy_s.diff().dropna() >= 0).all()


def test_budget_needs_a_limit():
    with pytest.raises(ValueError, match="needs evaluations, seconds"):
        Budget()
    with pytest.raises(ValueError, match="got 0"):
        Budget(evaluations=0)


@pytest.fixture(scope="module")
def kt_task():
    if not KT_A100.exists():
        pytest.skip(f"Kernel Tuner cache not found at {KT_A100}")
    return tasks_of(KT_A100)


def test_study_is_deterministic_resumable_and_complete(kt_task, tmp_path):
    out = tmp_path / "study.parquet"
    budget = Budget(evaluations=30)
    first = run_study(["random", "pattern"], kt_task, [0, 1], budget, out, workers=1, progress=False)
    assert set(first.strategy) == {"random", "pattern"} and set(first.seed) == {0, 1}
    assert first.groupby(["strategy", "seed"]).eval_index.max().eq(30).all()
    runs = sorted((tmp_path / "study.runs").glob("*.parquet"))
    assert len(runs) == 4
    stamps = {path: path.stat().st_mtime_ns for path in runs}
    runs[0].unlink()  # as if the study had been killed before this run finished
    again = run_study(["random", "pattern"], kt_task, [0, 1], budget, out, workers=1, progress=False)
    # Everything but the clock is deterministic; the clock includes the strategy's measured CPU time.
    measured = ["time_s", "strategy_s"]
    pd.testing.assert_frame_equal(first.drop(columns=measured), again.drop(columns=measured))
    assert all(path.stat().st_mtime_ns == stamps[path] for path in runs[1:])


def test_a_grown_study_takes_the_runs_its_trace_table_holds_and_replays_only_the_new_ones(kt_task, tmp_path):
    out = tmp_path / "study.parquet"
    first = run_study(["random"], kt_task, [0], Budget(evaluations=20), out, workers=1, progress=False)
    shutil.rmtree(tmp_path / "study.runs")  # as a committed trace table is kept without its run files
    pd.read_parquet(out).assign(time_s=-1.0).to_parquet(out)  # a mark that only the table carries
    grown = run_study(["random"], kt_task, [0, 1], Budget(evaluations=20), out, workers=1, progress=False)
    assert (grown.loc[grown.seed == 0, "time_s"] == -1.0).all(), "seed 0 was taken from the table, not replayed"
    assert (grown.loc[grown.seed == 1, "time_s"] > 0).all() and len(grown) == 2 * len(first)
    shutil.rmtree(tmp_path / "study.runs")
    with pytest.raises(ValueError, match="more than this study's budget of 10"):
        run_study(["random"], kt_task, [0], Budget(evaluations=10), out, workers=1, progress=False)


def test_a_reused_run_that_its_dataset_no_longer_answers_so_is_replayed_again(kt_task, tmp_path, capsys):
    out = tmp_path / "study.parquet"
    budget = Budget(evaluations=20)
    first = run_study(["random", "pattern"], kt_task, [0, 1], budget, out, workers=1, progress=False)
    runs = sorted((tmp_path / "study.runs").glob("*.parquet"))
    moved = tmp_path / "study.runs" / Run("random", kt_task[0], 0).file_name
    rows = pd.read_parquet(moved)
    rows.loc[rows.status == "ok", "latency_ms"] *= 1.5  # as if the dataset had been swept again since
    rows.to_parquet(moved)
    stamps = {path: path.stat().st_mtime_ns for path in runs}
    again = run_study(["random", "pattern"], kt_task, [0, 1], budget, out, workers=1, progress=False)
    assert "1 of 4 reused runs disagree with their datasets" in capsys.readouterr().err
    measured = ["time_s", "strategy_s"]
    pd.testing.assert_frame_equal(first.drop(columns=measured), again.drop(columns=measured))
    assert [path.name for path in runs if path.stat().st_mtime_ns != stamps[path]] == [moved.name]


def test_stale_runs_names_each_kind_of_disagreement(kt_task, tmp_path):
    trace = run_study(["random"], kt_task, [0, 1, 2, 3], Budget(evaluations=15), tmp_path / "noisy.parquet",
                      workers=1, mode="noisy", progress=False)
    runs = [Run("random", kt_task[0], seed) for seed in range(4)]
    assert stale_runs(trace, runs, "noisy") == []
    assert stale_runs(trace, runs, "deterministic"), "bootstrap medians are not the recorded medians"
    first_ok = {seed: trace.index[(trace.seed == seed) & (trace.status == "ok")][0] for seed in range(1, 4)}
    trace.loc[first_ok[1], "latency_ms"] = 1e9  # outside the recorded repeats
    trace.loc[first_ok[2], "status"] = "timeout"
    trace.loc[first_ok[3], "config_key"] = "not,a,recorded,config"
    assert stale_runs(trace, runs, "noisy") == runs[1:]


def test_a_strategy_written_outside_tunebench_runs_in_the_studys_worker_processes(kt_task, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [str(REPO / "examples"), *sys.path])  # the workers inherit it, as PYTHONPATH
    name = "iterated_local_search.IteratedLocalSearch"
    out = tmp_path / "study.parquet"
    trace = run_study([name, "random"], kt_task, [0, 1], Budget(evaluations=25), out, workers=2, progress=False)
    assert set(trace.strategy) == {name, "random"}
    assert trace.groupby(["strategy", "seed"]).eval_index.max().eq(25).all()
    assert (tmp_path / "study.runs" / f"{name}__{kt_task[0].name.replace(':', '__')}__seed1.parquet").is_file()
    again = run_study([name], kt_task, [0, 1], Budget(evaluations=25), tmp_path / "again.parquet", workers=1,
                      progress=False)
    measured = ["time_s", "strategy_s"]
    pd.testing.assert_frame_equal(trace[trace.strategy == name].drop(columns=measured).reset_index(drop=True),
                                  again.drop(columns=measured))


def test_a_noisy_run_is_judged_by_the_recorded_median_of_the_config_it_would_deploy(kt_task, tmp_path):
    deterministic = run_study(["random"], kt_task, [0], Budget(evaluations=40), tmp_path / "d.parquet", workers=1,
                              progress=False)
    pd.testing.assert_frame_equal(judged_by_recorded_medians(deterministic, kt_task), deterministic)

    dataset = cached_dataset(kt_task[0].dataset)
    rows = dataset.task(kt_task[0].shape).dropna(subset=["latency_ms"]).sort_values("latency_ms")
    names = list(dataset.parameter_names)
    fast, other, slow = (key_text(tuple(rows.iloc[i][names])) for i in (0, 1, len(rows) - 1))
    recorded = {fast: rows.iloc[0].latency_ms, slow: rows.iloc[-1].latency_ms}
    # Told, in order: a failed draw, then the slowest config drawn lucky (faster than the fastest's draw), the fastest.
    trace = pd.DataFrame({"strategy": "s", "task": kt_task[0].name, "seed": 0, "eval_index": [3, 1, 2],
                          "config_key": [fast, other, slow], "latency_ms": [recorded[fast], np.nan, recorded[fast] / 2],
                          "best_ms": 0.0}, index=[10, 11, 12])
    judged = judged_by_recorded_medians(trace, kt_task)
    assert judged.index.tolist() == [10, 11, 12]
    assert judged.best_ms.tolist() == [recorded[slow], math.inf, recorded[slow]]  # the lucky draw stays incumbent
    with pytest.raises(ValueError, match="configs its tasks' datasets do not record"):
        judged_by_recorded_medians(trace.assign(config_key=[fast, "1,2", slow]), kt_task)


def test_tasks_are_grouped_by_the_kernel_their_dataset_records(kt_task):
    rowwise = [tasks_of(REPO / "results" / "datasets" / f"{kernel}_bfloat16_h100.parquet")[:2]
               for kernel in ("layernorm", "softmax")]
    groups = tasks_by_kernel([*rowwise[0], *kt_task, *rowwise[1]])
    assert list(groups) == ["layernorm", "kerneltuner/convolution_kernel", "softmax"]
    assert groups["softmax"] == [task.name for task in rowwise[1]]
    assert groups["kerneltuner/convolution_kernel"] == [kt_task[0].name]


def test_unknown_strategy_and_shape(kt_task, tmp_path):
    with pytest.raises(ValueError, match="unknown strategies \\['simulated_annealing'\\]"):
        run_study(["simulated_annealing"], kt_task, [0], Budget(evaluations=5), tmp_path / "x.parquet")
    with pytest.raises(ValueError, match="not recorded"):
        tasks_of(KT_A100, shapes=[(1, 2)])
    with pytest.raises(ValueError, match="unknown replay clock 'wall'; allowed: sequential, pipelined"):
        run_study(["random"], kt_task, [0], Budget(evaluations=5), tmp_path / "x.parquet", clock="wall")
    assert not (tmp_path / "x.runs").exists()  # refused before anything was written


def test_the_study_replays_on_the_clock_it_is_given(kt_task, tmp_path):
    runs = {clock: run_study(["random"], kt_task, [0], Budget(evaluations=30), tmp_path / f"{clock}.parquet",
                             workers=1, clock=clock, startup_s=startup, progress=False)
            for clock, startup in (("sequential", 0.0), ("pipelined", 100.0))}
    assert list(runs["sequential"].config_key) == list(runs["pipelined"].config_key)  # the clock moves time only
    # Kernel Tuner compiles one config at a time (1 worker), so less the strategies' own CPU time (measured anew in
    # each run) the clocks differ by the start-up alone, less the first ask, which runs while the workers start.
    evaluation_s = {clock: (run.time_s - run.strategy_s).to_numpy() for clock, run in runs.items()}
    difference = evaluation_s["pipelined"] - evaluation_s["sequential"]
    assert (difference <= 100.0 + 1e-9).all() and (difference > 99.0).all()
    assert difference.max() - difference.min() < 1e-9


def test_task_references_match_the_dataset(kt_task):
    optima, latencies, seconds = task_references(kt_task)
    name = kt_task[0].name
    finite = latencies[name][np.isfinite(latencies[name])]
    assert optima[name] == finite.min()
    assert len(latencies[name]) == 4362 and (~np.isfinite(latencies[name])).sum() == 161
    assert 0 < seconds[name] < 10
