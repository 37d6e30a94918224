"""Running comparisons: strategies x tasks x seeds against replayed (or live) evaluators, into a trace table.

Revisits are free, budgets count unique evaluations and/or (simulated) seconds, and a strategy's own CPU
time is charged to the evaluator's clock. Studies are resumable (one file per run) and parallel over cores.
"""

from __future__ import annotations

import functools
import math
import os
import platform
import sys
import time
from importlib import metadata
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tunebench.files import write_parquet_atomically
from tunebench.measure.dataset import PARQUET_OPTIONS, Dataset, load_dataset
from tunebench.measure.result import Evaluator, Result
from tunebench.metrics import mean_seconds_per_evaluation
from tunebench.search import make_strategy
from tunebench.search.base import Strategy

# A strategy that keeps asking only for configs it has already seen is stopped after this many batches.
STALLED_BATCHES = 50
TRACE_COLUMNS = ("strategy", "task", "seed", "eval_index", "batch", "time_s", "strategy_s", "config_key", "status",
                 "latency_ms", "best_ms")


@dataclass(frozen=True)
class Budget:
    """When a search stops: after `evaluations` unique evaluations and/or `seconds` on the evaluator's clock."""

    evaluations: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        if self.evaluations is None and self.seconds is None:
            raise ValueError("a budget needs evaluations, seconds, or both")
        if self.evaluations is not None and self.evaluations < 1:
            raise ValueError(f"budget evaluations must be >= 1, got {self.evaluations}")
        if self.seconds is not None and not self.seconds > 0:
            raise ValueError(f"budget seconds must be > 0, got {self.seconds}")


@dataclass(frozen=True)
class Task:
    """One tuning problem: a shape of a recorded dataset (a Kernel Tuner cache holds one shape)."""

    dataset: str
    shape: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{Path(self.dataset).name.split('.')[0]}:{'x'.join(map(str, self.shape))}"

    @property
    def kernel(self) -> str:
        """The kernel its dataset records ("matmul", "softmax", "kerneltuner/convolution_kernel", ...)."""
        return cached_dataset(self.dataset).kernel


def open_dataset(path: str | os.PathLike[str]) -> Dataset:
    """A tunebench parquet dataset, or a Kernel Tuner cache (.json / .json.gz)."""
    text = str(path)
    if text.endswith((".json", ".json.gz")):
        from tunebench.measure.kerneltuner import load_kerneltuner_cache

        return load_kerneltuner_cache(path)
    return load_dataset(path)


@functools.lru_cache(maxsize=8)
def cached_dataset(path: str) -> Dataset:
    """`open_dataset`, read once per process (the 8 datasets opened last are kept)."""
    return open_dataset(path)


def tasks_of(path: str | os.PathLike[str], shapes: Sequence[Sequence[int]] | None = None) -> list[Task]:
    """The tasks of a dataset: every recorded shape, or the given ones (checked against the record)."""
    dataset = cached_dataset(str(path))
    recorded = dataset.shapes()
    if shapes is None:
        return [Task(str(path), shape) for shape in recorded]
    chosen = [tuple(int(v) for v in shape) for shape in shapes]
    missing = [shape for shape in chosen if shape not in recorded]
    if missing:
        raise ValueError(f"shapes {missing} are not recorded in {path}; recorded: {recorded}")
    return [Task(str(path), shape) for shape in chosen]


def tasks_by_kernel(tasks: Sequence[Task]) -> dict[str, list[str]]:
    """Task names grouped by the kernel their dataset records, kernels and tasks in their order in `tasks`."""
    groups: dict[str, list[str]] = {}
    for task in tasks:
        groups.setdefault(task.kernel, []).append(task.name)
    return groups


def key_text(key: tuple) -> str:
    """A config's key (`Space.key`) as a trace's `config_key` column writes it."""
    return ",".join(map(str, key))


class Search:
    """One strategy driven against one evaluator, a batch per `step()`, until the budget is spent or the strategy is
    done (what `run_search` runs to its end; a caller that interleaves several searches steps each in turn).

    A row per unique evaluation. Every result of a batch is known at the batch's end, so they share its
    clock reading. Configs already evaluated are answered from a cache without charge; the strategy's CPU
    time in ask and tell is measured and charged to the evaluator's clock.
    """

    def __init__(self, strategy: Strategy, evaluator: Evaluator, budget: Budget) -> None:
        self.strategy, self.evaluator, self.budget = strategy, evaluator, budget
        self.over = False  # no batch will run any more
        self._seen: dict[tuple, Result] = {}
        self._rows: list[dict[str, Any]] = []
        self._best = math.inf
        self._strategy_s = 0.0
        self._batches = 0
        self._stalled = 0

    def step(self) -> None:
        """Ask for one batch, evaluate its new configs and tell the strategy the results; or, once the budget is
        spent or the strategy asks for nothing more, mark the search `over` without running anything."""
        if self.over:
            return
        budget, evaluator, seen, rows = self.budget, self.evaluator, self._seen, self._rows
        if budget.seconds is not None and evaluator.elapsed_s >= budget.seconds:
            self.over = True
            return
        left = None if budget.evaluations is None else budget.evaluations - len(seen)
        if left is not None and left <= 0:
            self.over = True
            return
        started = time.process_time()
        batch = self.strategy.ask()
        spent = time.process_time() - started
        if not batch:
            self.over = True
            return
        keys = [self.strategy.space.key(config) for config in batch]
        new = [i for i, key in enumerate(keys) if key not in seen]
        truncated = left is not None and len(new) > left
        new = new[:left] if left is not None else new
        evaluator.charge(spent)
        fresh = evaluator.evaluate([batch[i] for i in new])
        self._batches += 1
        for i, result in zip(new, fresh):
            seen[keys[i]] = result
            self._best = min(self._best, result.objective)
            rows.append({"eval_index": len(seen), "batch": self._batches, "time_s": math.nan,
                         "config_key": key_text(keys[i]), "status": result.status.value,
                         "latency_ms": result.latency_ms if result.ok else math.nan, "best_ms": self._best})
        self._strategy_s += spent
        self._stalled = 0 if new else self._stalled + 1
        if self._stalled >= STALLED_BATCHES:
            self.over = True
            return
        if truncated:  # the budget ran out inside this batch: the search is over
            _stamp(rows, evaluator.elapsed_s, self._strategy_s)
            self.over = True
            return
        started = time.process_time()
        self.strategy.tell([seen[key] for key in keys])
        spent = time.process_time() - started
        evaluator.charge(spent)
        self._strategy_s += spent
        _stamp(rows, evaluator.elapsed_s, self._strategy_s)

    @property
    def evaluations(self) -> int:
        """Unique configs evaluated so far (the trace's rows)."""
        return len(self._rows)

    def trace(self) -> pd.DataFrame:
        """The rows so far, a row per unique evaluation."""
        return pd.DataFrame(self._rows, columns=[c for c in TRACE_COLUMNS if c not in ("strategy", "task", "seed")])


def run_search(strategy: Strategy, evaluator: Evaluator, budget: Budget) -> pd.DataFrame:
    """Drive one strategy against one evaluator until the budget is spent or the strategy is done (`Search`, run to
    its end): the trace, a row per unique evaluation."""
    search = Search(strategy, evaluator, budget)
    while not search.over:
        search.step()
    return search.trace()


def _stamp(rows: list[dict[str, Any]], time_s: float, strategy_s: float) -> None:
    for row in reversed(rows):
        if not math.isnan(row["time_s"]):
            break
        row["time_s"] = time_s
        row["strategy_s"] = strategy_s


@dataclass(frozen=True)
class Run:
    """One (strategy, task, seed) cell of a study."""

    strategy: str
    task: Task
    seed: int
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def file_name(self) -> str:
        safe = self.task.name.replace(":", "__").replace("/", "_")
        return f"{self.strategy}__{safe}__seed{self.seed}.parquet"


def replay_run(run: Run, budget: Budget, mode: str = "deterministic", clock: str = "sequential",
               startup_s: float = 0.0) -> pd.DataFrame:
    """Replay one run on its recorded dataset; the evaluator's noise (noisy mode) is seeded by the run's seed, and
    `clock` and `startup_s` set its simulated clock (`ReplayEvaluator`)."""
    from tunebench.measure.replay import ReplayEvaluator

    dataset = cached_dataset(run.task.dataset)
    evaluator = ReplayEvaluator(dataset, run.task.shape, mode=mode, seed=run.seed, clock=clock, startup_s=startup_s)
    strategy = make_strategy(run.strategy, evaluator.space, seed=run.seed, **dict(run.settings))
    trace = run_search(strategy, evaluator, budget)
    trace.insert(0, "seed", run.seed)
    trace.insert(0, "task", run.task.name)
    trace.insert(0, "strategy", run.strategy)
    trace["replayed_with"] = replay_environment()
    return trace


@functools.cache
def replay_environment() -> str:
    """What the replay's charge of a strategy's CPU time depends on, for a trace's `replayed_with` column: the CPU
    model and the versions of Python and of the libraries strategies compute with (scikit-learn 1.9.1 fits LFBO's
    forest about 1.4x slower than 1.5.2 on one machine: docs/strategies.md, "LFBO's own CPU time")."""
    versions = [f"Python {platform.python_version()}"]
    for package in ("numpy", "scikit-learn", "optuna"):
        try:
            versions.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{package} absent")
    return f"{_cpu_model()}, {os.cpu_count()} CPUs; " + ", ".join(versions)


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else (platform.processor() or platform.machine() or "unknown CPU")


def _replay_to_file(run: Run, budget: Budget, mode: str, clock: str, startup_s: float, path: Path) -> Path:
    write_parquet_atomically(replay_run(run, budget, mode, clock, startup_s), path, **PARQUET_OPTIONS)
    return path


def _reuse_trace_table(out: Path, missing: Sequence[Run], runs_dir: Path, budget: Budget) -> None:
    """Write the run file of each missing run that the trace table at `out` holds."""
    if not missing or not out.is_file():
        return
    wanted = {(run.strategy, run.task.name, run.seed): run for run in missing}
    for (strategy, task, seed), rows in pd.read_parquet(out).groupby(["strategy", "task", "seed"], sort=False):
        run = wanted.get((strategy, task, int(seed)))
        if run is None:
            continue
        if budget.evaluations is not None and rows["eval_index"].max() > budget.evaluations:
            raise ValueError(f"{out} holds run {run.file_name} with {rows['eval_index'].max()} evaluations, more than "
                             f"this study's budget of {budget.evaluations}: it is another study's trace table")
        write_parquet_atomically(rows.reset_index(drop=True), runs_dir / run.file_name, **PARQUET_OPTIONS)


def run_study(strategies: Sequence[str], tasks: Sequence[Task], seeds: Sequence[int], budget: Budget, out: Path, *,
              workers: int | None = None, mode: str = "deterministic", clock: str = "sequential",
              startup_s: float = 0.0, settings: Mapping[str, Mapping[str, Any]] | None = None,
              progress: bool = True) -> pd.DataFrame:
    """Every strategy on every task for every seed, replayed; the trace table is written to `out` (parquet).

    Each run is saved under `<out>.runs/` as it finishes, so a killed study resumes where it stopped; a run that
    the trace table already at `out` holds is taken from it (the table is kept where the run files are not), so a
    study grown by a task or a seed replays only the new runs. Reused runs are assumed to share this study's budget,
    evaluator mode, clock and settings, as run files are. `settings` maps a strategy name to overrides of its
    defaults; `clock` and `startup_s` set the replay's simulated clock (`ReplayEvaluator`).
    """
    from tunebench.measure.replay import check_clock
    from tunebench.search import check_strategy_names

    check_strategy_names(strategies)
    check_clock(clock, startup_s)
    settings = dict(settings or {})
    runs_dir = out.with_suffix(".runs")
    runs_dir.mkdir(parents=True, exist_ok=True)
    runs = [Run(name, task, seed, settings.get(name, {})) for name in strategies for task in tasks for seed in seeds]
    _reuse_trace_table(out, [run for run in runs if not (runs_dir / run.file_name).exists()], runs_dir, budget)
    workers = workers or os.cpu_count() or 1
    _replay_missing(runs, runs_dir, budget, mode, clock, startup_s, workers, progress)
    trace = pd.concat([pd.read_parquet(runs_dir / run.file_name) for run in runs], ignore_index=True)
    stale = stale_runs(trace, runs, mode)
    if stale:
        print(f"{len(stale)} of {len(runs)} reused runs disagree with their datasets as recorded now (e.g. "
              f"{stale[0].file_name}; a dataset swept again?): replaying them", file=sys.stderr)
        for run in stale:
            (runs_dir / run.file_name).unlink()
        _replay_missing(runs, runs_dir, budget, mode, clock, startup_s, workers, progress)
        trace = pd.concat([pd.read_parquet(runs_dir / run.file_name) for run in runs], ignore_index=True)
    write_parquet_atomically(trace, out, **PARQUET_OPTIONS)
    return trace


def _replay_missing(runs: Sequence[Run], runs_dir: Path, budget: Budget, mode: str, clock: str, startup_s: float,
                    workers: int, progress: bool) -> None:
    """Replay each run that has no run file yet, in `workers` processes, with a progress bar over all `runs`."""
    from tqdm import tqdm

    todo = [run for run in runs if not (runs_dir / run.file_name).exists()]
    with tqdm(total=len(runs), initial=len(runs) - len(todo), unit="run", disable=not progress) as bar:
        if workers == 1:
            for run in todo:
                _replay_to_file(run, budget, mode, clock, startup_s, runs_dir / run.file_name)
                bar.update(1)
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = [pool.submit(_replay_to_file, run, budget, mode, clock, startup_s,
                                       runs_dir / run.file_name) for run in todo]
                for future in as_completed(futures):
                    future.result()
                    bar.update(1)


def stale_runs(trace: pd.DataFrame, runs: Sequence[Run], mode: str) -> list[Run]:
    """The runs of `trace` that their datasets, as recorded now, would not have answered as the trace says: a config
    not recorded, another status, or (deterministic mode) another median, (noisy mode) a latency outside the range of
    the recorded repeats. A dataset swept again moves its latencies and is caught; a change of its compile or
    benchmark seconds alone, which only the clock reads, is not."""
    stale = []
    for task in dict.fromkeys(run.task for run in runs):
        dataset = cached_dataset(task.dataset)
        rows = dataset.task(task.shape)
        keys = [key_text(key) for key in rows[list(dataset.parameter_names)].itertuples(index=False, name=None)]
        repeats = rows["repeats_ms"].map(lambda values: (min(values), max(values)) if len(values) else (np.nan, np.nan))
        recorded = pd.DataFrame({"config_key": keys, "recorded_status": rows["status"].to_numpy(),
                                 "recorded_ms": rows["latency_ms"].to_numpy(dtype=float),
                                 "low_ms": [low for low, _ in repeats], "high_ms": [high for _, high in repeats]})
        recorded = recorded.drop_duplicates("config_key", keep="last")  # as the replay's index keeps the last row
        asked = trace.loc[trace["task"] == task.name, ["strategy", "seed", "config_key", "status", "latency_ms"]]
        both = asked.merge(recorded, on="config_key", how="left")
        ok = both["status"] == "ok"
        if mode == "deterministic":
            moved = ok & (both["latency_ms"] != both["recorded_ms"])
        else:
            moved = ok & ~both["latency_ms"].between(both["low_ms"], both["high_ms"])
        wrong = (both["status"] != both["recorded_status"]) | moved
        bad = set(both.loc[wrong, ["strategy", "seed"]].itertuples(index=False, name=None))
        stale += [run for run in runs if run.task == task and (run.strategy, run.seed) in bad]
    return stale


def judged_by_recorded_medians(trace: pd.DataFrame, tasks: Sequence[Task]) -> pd.DataFrame:
    """`trace` with each row's `best_ms` replaced by the recorded median latency of its run's incumbent, the config
    fastest by the latencies the run was told so far: a noisy replay (`ReplayEvaluator`'s noisy mode) is then judged
    by what the config it would deploy runs at, not by a lucky draw. A deterministic trace keeps its values."""
    recorded = []
    for task in tasks:
        dataset = cached_dataset(task.dataset)
        rows = dataset.task(task.shape)
        keys = [key_text(key) for key in rows[list(dataset.parameter_names)].itertuples(index=False, name=None)]
        latency = rows["latency_ms"].to_numpy(dtype=float)
        recorded.append(pd.Series(np.where(np.isnan(latency), np.inf, latency),
                                  index=pd.MultiIndex.from_arrays([[task.name] * len(keys), keys])))
    by_key = pd.concat(recorded)
    runs = ["strategy", "task", "seed"]
    frame = trace.sort_values([*runs, "eval_index"], kind="stable")
    by_run = [frame[column] for column in runs]
    told = frame["latency_ms"].fillna(np.inf)
    before = told.groupby(by_run).cummin().groupby(by_run).shift(fill_value=np.inf)
    incumbent = frame["config_key"].where(told < before).groupby(by_run).ffill()
    asked = pd.MultiIndex.from_arrays([frame["task"], frame["config_key"]])
    unknown = asked[~asked.isin(by_key.index)]
    if len(unknown):
        raise ValueError(f"the trace has configs its tasks' datasets do not record, e.g. {unknown[0]}")
    chosen = pd.MultiIndex.from_arrays([frame["task"], incumbent])
    best = by_key.reindex(chosen).fillna(np.inf).to_numpy()
    return trace.assign(best_ms=pd.Series(best, index=frame.index).loc[trace.index])


def task_references(tasks: Sequence[Task]) -> tuple[dict[str, float], dict[str, np.ndarray], dict[str, float]]:
    """Per task name: the optimum latency, every recorded config's latency (failures inf), and the mean cost of
    one evaluation in seconds (compile on the recorded workers plus benchmark), as `metrics.summarize` wants."""
    optima, latencies, seconds = {}, {}, {}
    for task in tasks:
        dataset = cached_dataset(task.dataset)
        rows = dataset.task(task.shape)
        values = rows["latency_ms"].to_numpy(dtype=float)
        latencies[task.name] = np.where(np.isnan(values), np.inf, values)
        optima[task.name] = dataset.optimum_ms(task.shape)
        workers = int(dataset.provenance.get("compile_workers", 1) or 1)
        seconds[task.name] = mean_seconds_per_evaluation(rows["compile_s"], rows["bench_s"], workers)
    return optima, latencies, seconds
