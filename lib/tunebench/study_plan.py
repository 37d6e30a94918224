"""The replay study that the strategy_comparison notebook runs and sampled_configs reuses: `StudyPlan` (which
strategies, datasets, shapes, seeds and budget), where its trace table goes, and `open_study` to read it back."""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping

import pandas as pd

from tunebench.dataset_summary import spread_shapes
from tunebench.files import write_text_atomically
from tunebench.measure.replay import MODES as REPLAY_MODES
from tunebench.report import NOTEBOOK_DIR, read_parameters, repo_path, resolve_dataset, shown_path
from tunebench.study import Budget, Task, judged_by_recorded_medians, run_study, tasks_of


@dataclass(frozen=True)
class StudyPlan:
    """A replay study: every strategy on `shapes_per_dataset` shapes of each dataset (spread over the sorted
    shapes, 0 = all), seeds 0..seeds-1, `budget` unique evaluations per run."""

    datasets: tuple[str, ...]
    shapes_per_dataset: int
    strategies: tuple[str, ...]
    seeds: int
    budget: int
    mode: str = "deterministic"
    backend: str = "replay"

    def __post_init__(self) -> None:
        object.__setattr__(self, "datasets", tuple(map(str, self.datasets)))
        object.__setattr__(self, "strategies", tuple(self.strategies))
        if self.backend == "live":
            raise NotImplementedError(
                "backend='live' is not run from a notebook: a live study needs a GPU and hours. Build a "
                "tunebench.measure.live.LiveEvaluator per shape and drive each strategy with "
                "tunebench.study.run_search(strategy, evaluator, Budget(...)); then record the sweep with "
                "`python -m tunebench.collect` and replay it here.")
        if self.backend != "replay":
            raise ValueError(f"unknown backend {self.backend!r}; allowed: 'replay' (and 'live' outside notebooks)")
        if self.mode not in REPLAY_MODES:
            raise ValueError(f"unknown mode {self.mode!r}; allowed: {', '.join(REPLAY_MODES)}")
        if not self.datasets or not self.strategies:
            raise ValueError("a study needs at least one dataset and one strategy")
        if self.seeds < 1 or self.budget < 1:
            raise ValueError(f"seeds and budget must be >= 1, got seeds={self.seeds}, budget={self.budget}")

    def __str__(self) -> str:
        shapes = "every shape" if self.shapes_per_dataset <= 0 else f"{self.shapes_per_dataset} shape(s)"
        return (f"{', '.join(self.strategies)} on {shapes} of each of {len(self.datasets)} dataset(s); "
                f"{self.seeds} seeds; {self.budget} unique evaluations per run; {self.mode} {self.backend}")

    @classmethod
    def from_parameters(cls, parameters: Mapping[str, object]) -> StudyPlan:
        """The plan of strategy_comparison's parameters (its other parameters, e.g. study_dir, are ignored)."""
        return cls(datasets=tuple(parameters["datasets"]), shapes_per_dataset=int(parameters["shapes_per_dataset"]),
                   strategies=tuple(parameters["strategies"]), seeds=int(parameters["seeds"]),
                   budget=int(parameters["budget"]), mode=str(parameters["mode"]),
                   backend=str(parameters["backend"]))

    def tasks(self) -> list[Task]:
        """The chosen shapes of every dataset as tasks, dataset paths resolved."""
        chosen = []
        for path in map(resolve_dataset, self.datasets):
            every = [task.shape for task in tasks_of(path)]
            chosen += tasks_of(path, spread_shapes(every, self.shapes_per_dataset))
        return chosen

    @property
    def name(self) -> str:
        """A file name that changes with anything that changes the traces: readable part, then a digest."""
        spec = {"datasets": [Path(path).name for path in self.datasets], "shapes": self.shapes_per_dataset,
                "strategies": list(self.strategies), "seeds": self.seeds, "budget": self.budget, "mode": self.mode}
        digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
        return f"{self.mode}_{len(self.strategies)}strategies_{self.seeds}seeds_{self.budget}evals_{digest}"

    def path(self, study_dir: str | os.PathLike[str]) -> Path:
        """Where the trace table goes: `<study_dir>/<name>.parquet`, study_dir relative to the repository root."""
        return repo_path(study_dir) / f"{self.name}.parquet"

    def run(self, study_dir: str | os.PathLike[str], workers: int | None = None) -> pd.DataFrame:
        """Run (or resume) the study with `study.run_study`, parallel over cores; the trace table, also written to
        `path(study_dir)`, with this plan beside it as `<name>.json`. Prints what was replayed and how long it took.
        In noisy mode each run's `best_ms` is the recorded median of its incumbent (`study.judged_by_recorded_medians`):
        what the config it would deploy runs at, not its luckiest draw."""
        out = self.path(study_dir)
        out.parent.mkdir(parents=True, exist_ok=True)
        tasks = self.tasks()
        total = len(self.strategies) * len(tasks) * self.seeds
        runs_dir = out.with_suffix(".runs")
        cached = len(list(runs_dir.glob("*.parquet"))) if runs_dir.is_dir() else 0
        started = time.perf_counter()
        trace = run_study(list(self.strategies), tasks, range(self.seeds), Budget(evaluations=self.budget), out,
                          workers=workers, mode=self.mode, progress=False)
        plan_file = out.with_suffix(".json")
        write_text_atomically(plan_file, json.dumps({**asdict(self), "tasks": [[task.dataset, list(task.shape)]
                                                                               for task in tasks]}, indent=1))
        reused = min(cached, total)
        print(f"{total} runs ({len(self.strategies)} strategies × {len(tasks)} tasks × {self.seeds} seeds): {reused} "
              f"reused from {runs_dir.name}/, {total - reused} replayed in {time.perf_counter() - started:.1f} s; "
              f"trace table: {shown_path(out)}")
        return judged_by_recorded_medians(trace, tasks) if self.mode == "noisy" else trace

    @classmethod
    def read(cls, trace_path: str | os.PathLike[str]) -> StudyPlan:
        """The plan written beside a trace table by `run`."""
        plan_file = Path(trace_path).with_suffix(".json")
        if not plan_file.is_file():
            raise FileNotFoundError(f"no study plan {plan_file.name} beside {trace_path}: only traces written by "
                                    "StudyPlan.run (the strategy_comparison notebook) record their datasets")
        spec = json.loads(plan_file.read_text())
        spec.pop("tasks", None)
        return cls(**spec)


def default_study_plan() -> tuple[StudyPlan, str]:
    """The plan and study_dir of the strategy_comparison notebook's defaults (read from its parameters cell)."""
    parameters = read_parameters(NOTEBOOK_DIR / "strategy_comparison.py")
    return StudyPlan.from_parameters(parameters), str(parameters["study_dir"])


def open_study(study: str) -> tuple[StudyPlan, pd.DataFrame, Path]:
    """A trace table and its plan: `study` is a trace parquet path (relative to the repository root), or "" for
    the study strategy_comparison writes with its defaults, which is run first if it is not there yet."""
    if study:
        path = repo_path(study)
        if not path.is_file():
            raise FileNotFoundError(f"no trace table at {path}")
        return StudyPlan.read(path), pd.read_parquet(path), path
    plan, study_dir = default_study_plan()
    path = plan.path(study_dir)
    if path.is_file() and path.with_suffix(".json").is_file():
        return plan, pd.read_parquet(path), path
    print(f"{shown_path(path)} is not there yet: running strategy_comparison's default study")
    return plan, plan.run(study_dir), path
