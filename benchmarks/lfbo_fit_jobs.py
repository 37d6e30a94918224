"""Wall and CPU time of LFBO's forest fit at several scikit-learn `n_jobs`, on the training sets LFBO's own replay
builds: does fitting on several cores pay on a GPU host, where the fit's wall time delays the next batch?

The LFBO presets are replayed on tasks of one recorded dataset (deterministic replay, the strategy comparison's budget),
and every training set that `LFBOPatternSearch.fit` sees is kept. Each is then fitted as `fit` does (its tree count,
`criterion="log_loss"`) at every `n_jobs`, the arms interleaved in each round; per arm the median wall and CPU
milliseconds of a fit, and of all fits of a run. A forest fitted with a seed scores the same at any `n_jobs` (checked
per training set through `lfbo.forest_scores`), so the choice changes time, not the search.

Run: `.venv/bin/python benchmarks/lfbo_fit_jobs.py` (about a minute on a 16-core host; progress on stderr). Writes
results/lfbo_fit_jobs/<host tag>.md (`--tag`, default the CPU count). Nothing to resume: it runs in minutes.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from tqdm import tqdm

from tunebench.files import write_text_atomically
from tunebench.measure.replay import ReplayEvaluator
from tunebench.search import make_strategy
from tunebench.search.lfbo import LFBOPatternSearch, forest_scores
from tunebench.study import Budget, cached_dataset, replay_environment, run_search, tasks_of
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "results" / "datasets" / "matmul_bfloat16_h100.parquet"
PRESETS = ("lfbo", "lfbo_quick")
BUDGET = Budget(evaluations=400)  # the strategy comparison's


@dataclass(frozen=True)
class TrainingSet:
    run: str
    features: np.ndarray
    labels: np.ndarray
    weights: np.ndarray
    n_trees: int


def training_sets(dataset: Path, tasks: int, seeds: int, presets: tuple[str, ...]) -> list[TrainingSet]:
    """Every training set LFBO's `fit` saw, replaying `presets` on the first `tasks` tasks of `dataset`."""
    kept: list[TrainingSet] = []
    library_fit = LFBOPatternSearch.fit
    runs = [(preset, task, seed) for preset in presets for task in tasks_of(dataset)[:tasks] for seed in range(seeds)]
    for preset, task, seed in tqdm(runs, desc="replaying LFBO to collect its training sets", file=sys.stderr):
        name = f"{preset}/{task.name}/{seed}"

        def keeping_fit(self: LFBOPatternSearch, name: str = name):
            features, labels, weights = self.training_set()
            kept.append(TrainingSet(name, features, labels, weights, self.settings.n_trees))
            return library_fit(self)

        LFBOPatternSearch.fit = keeping_fit
        try:
            evaluator = ReplayEvaluator(cached_dataset(task.dataset), task.shape)
            run_search(make_strategy(preset, evaluator.space, seed=seed), evaluator, BUDGET)
        finally:
            LFBOPatternSearch.fit = library_fit
    return [one for one in kept if one.labels.min() != one.labels.max()]  # `fit` fits no forest on one class


def fitted(one: TrainingSet, n_jobs: int) -> tuple[RandomForestClassifier, float, float]:
    """The forest `fit` would build for `one` (seed 0), with its wall and CPU seconds."""
    forest = RandomForestClassifier(n_estimators=one.n_trees, criterion="log_loss", random_state=0, n_jobs=n_jobs)
    wall, cpu = time.perf_counter(), time.process_time()
    forest.fit(one.features, one.labels, sample_weight=one.weights)
    return forest, time.perf_counter() - wall, time.process_time() - cpu


def measure(sets: list[TrainingSet], jobs: list[int], rounds: int) -> tuple[pd.DataFrame, int]:
    """Per training set and n_jobs, the median wall and CPU seconds over `rounds` interleaved fits; and how many
    training sets scored the same at every n_jobs."""
    rows, same = [], 0
    for one in tqdm(sets, desc="fitting at each n_jobs", file=sys.stderr):
        times: dict[int, list[tuple[float, float]]] = {n: [] for n in jobs}
        scores = {}
        for round_index in range(rounds):
            for n_jobs in jobs[round_index % len(jobs):] + jobs[:round_index % len(jobs)]:
                forest, wall, cpu = fitted(one, n_jobs)
                times[n_jobs].append((wall, cpu))
                scores[n_jobs] = forest_scores(forest, one.features)
        same += all(np.array_equal(scores[n][0], scores[jobs[0]][0]) for n in jobs)
        for n_jobs, pairs in times.items():
            rows.append({"run": one.run, "rows": len(one.labels), "n_jobs": n_jobs,
                         "wall_s": statistics.median(w for w, _ in pairs),
                         "cpu_s": statistics.median(c for _, c in pairs)})
    return pd.DataFrame(rows), same


def summary(per_fit: pd.DataFrame) -> pd.DataFrame:
    """Per n_jobs: the median fit's wall and CPU ms, the median run's summed fit wall ms, and wall speed-ups."""
    per_run = per_fit.groupby(["n_jobs", "run"])["wall_s"].sum().groupby("n_jobs").median()
    medians = per_fit.groupby("n_jobs")[["wall_s", "cpu_s"]].median()
    serial = medians.loc[medians.index.min(), "wall_s"]
    return pd.DataFrame({
        "n_jobs": medians.index,
        "fit wall (ms, median)": (1e3 * medians["wall_s"]).round(1).to_numpy(),
        "fit CPU (ms, median)": (1e3 * medians["cpu_s"]).round(1).to_numpy(),
        "wall speed-up over n_jobs 1": (serial / medians["wall_s"]).round(2).to_numpy(),
        "a run's fits, wall (ms, median over runs)": (1e3 * per_run).round(0).to_numpy(),
    })


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET, help="a recorded dataset whose tasks LFBO replays")
    parser.add_argument("--tasks", type=int, default=4, help="its first tasks")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--jobs", type=int, nargs="+", default=None,
                        help="n_jobs values (default: 1, 2, 4, ... up to this host's cores)")
    parser.add_argument("--rounds", type=int, default=3, help="fits per training set and n_jobs")
    parser.add_argument("--tag", default=None, help="the report's name (default: <cores>cores)")
    parser.add_argument("--out-dir", type=Path, default=REPO / "results" / "lfbo_fit_jobs")
    arguments = parser.parse_args()
    cores = os.cpu_count() or 1
    jobs = arguments.jobs or [n for n in (1, 2, 4, 8, 16, 32, 64) if n <= cores]
    if 1 not in jobs or any(n < 1 for n in jobs):
        parser.error(f"--jobs {jobs}: give positive values, 1 among them (the speed-ups are over n_jobs 1)")
    if not arguments.dataset.exists():
        parser.error(f"--dataset {arguments.dataset}: no such file")
    jobs = sorted(set(jobs))
    sets = training_sets(arguments.dataset, arguments.tasks, arguments.seeds, PRESETS)
    per_fit, same = measure(sets, jobs, arguments.rounds)
    tag = arguments.tag or f"{cores}cores"
    command = shlex.join(["python", "benchmarks/lfbo_fit_jobs.py", *sys.argv[1:]])
    rows = pd.Series([len(one.labels) for one in sets])
    text = "\n".join([
        f"# LFBO's forest fit at several n_jobs ({tag})",
        "",
        f"Command: `{command}`",
        "",
        f"Host: {replay_environment()}, {cores} cores visible.",
        "",
        f"{len(sets)} training sets: every forest fit of {', '.join(PRESETS)} replayed on the first "
        f"{arguments.tasks} tasks of `{arguments.dataset.name}`, seeds 0 to {arguments.seeds - 1}, budget "
        f"{BUDGET.evaluations} (rows per set: median {rows.median():g}, {rows.min()} to {rows.max()}). Each set fitted "
        f"{arguments.rounds} times at each n_jobs, the arms interleaved; medians of wall (`perf_counter`) and CPU "
        "(`process_time`, all of the process's threads) seconds.",
        "",
        markdown_table(summary(per_fit)),
        "",
        f"- Forests fitted at every n_jobs scored the same on {same} of {len(sets)} training sets.",
        "",
    ])
    out = arguments.out_dir / f"{tag}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
