"""Re-clocking recorded traces: each batch of a trace charged again on a replay clock from the same dataset, the
strategy's own CPU time kept as measured (under a budget of evaluations, the configs asked do not depend on the clock).
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from tqdm import tqdm

from tunebench.measure.dataset import Dataset
from tunebench.measure.replay import ReplayEvaluator, check_clock
from tunebench.study import Task, cached_dataset, key_text

RUN = ["strategy", "task", "seed"]


def configs_by_key(dataset: Dataset, shape: tuple[int, ...]) -> dict[str, dict[str, Any]]:
    """Every config recorded for the shape, by the text of its key (a trace's `config_key`)."""
    space = dataset.space(shape)
    return {key_text(space.key(config)): config for config in dataset.configs(shape)}


def batch_seconds(dataset: Dataset, shape: tuple[int, ...], batches: Sequence[Sequence[Mapping[str, Any]]],
                  clock: str, compile_workers: int | None = None) -> list[float]:
    """Each batch's seconds on `clock`, the batches asked one after another of one evaluator (a binary compiled in
    an earlier batch is not compiled again); `compile_workers` as `ReplayEvaluator` takes it."""
    evaluator = ReplayEvaluator(dataset, shape, compile_workers=compile_workers, clock=clock)
    seconds = []
    for batch in batches:
        before = evaluator.elapsed_s
        evaluator.evaluate(batch)
        seconds.append(evaluator.elapsed_s - before)
    return seconds


def _reclock_task(trace: pd.DataFrame, task: Task, clock: str) -> pd.DataFrame:
    dataset = cached_dataset(task.dataset)
    configs = configs_by_key(dataset, task.shape)
    frames = []
    for _, run in trace.groupby(RUN, sort=False):
        batches = sorted(run.batch.unique())
        asked = [[configs[key] for key in run.config_key[run.batch == batch]] for batch in batches]
        ends = dict(zip(batches, np.cumsum(batch_seconds(dataset, task.shape, asked, clock))))
        frames.append(run.assign(time_s=run.batch.map(ends).to_numpy() + run.strategy_s.to_numpy()))
    return pd.concat(frames)


def reclock(trace: pd.DataFrame, tasks: Sequence[Task], clock: str, workers: int = 1,
            progress: bool = True) -> pd.DataFrame:
    """The trace with each run's `time_s` charged again on `clock` (`CLOCKS`): a batch's seconds on that clock plus the
    strategy's CPU time up to the batch's end, as `run_search` stamps them; a process per task on `workers` cores. The
    configs and their order are the trace's own, which is what a replay on that clock asks under a budget of
    evaluations (under a budget of seconds the runs would stop elsewhere). On the clock it was replayed on, a trace
    keeps its times."""
    check_clock(clock, 0.0)
    by_name = {task.name: task for task in tasks}
    missing = sorted(set(trace.task) - set(by_name))
    if missing:
        raise ValueError(f"the trace has tasks {missing[:3]} that `tasks` does not name")
    groups = [(rows, by_name[name]) for name, rows in trace.groupby("task", sort=False)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(_reclock_task, rows, task, clock) for rows, task in groups]
        frames = [future.result() for future in tqdm(futures, unit="task", disable=not progress)]
    return pd.concat(frames).loc[trace.index]
