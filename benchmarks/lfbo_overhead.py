"""LFBO pattern search's own CPU time, as the replay charges it: the library's path against a reference path that scores
candidates with scikit-learn's `predict_proba` and `apply` and draws them one `Space.perturb` call at a time.

Both arms replay the same LFBO presets on the same tasks and seeds, one run after the other, and must ask the same
configs in the same batches (checked run by run, and against the committed strategy comparison's trace where it holds
the run). Per run: CPU seconds of ask and tell (`strategy_s`), split into the forest's fit, the ranking of candidates
(`select`) and their generation (`candidates`); the report gives medians over runs and the ratio of the arms' medians.
Both arms share the search loop, so the forest it no longer fits once every copy has stopped (before 74c88a8, one more
fit at the end of each LFBO run, a restarted preset's fresh runs too) shows in the fits per run, not in the ratios.

Run: `.venv/bin/python benchmarks/lfbo_overhead.py` (about 10 minutes on a 2-core machine with the defaults, most of
it in the restarted preset and on the Kernel Tuner tasks; progress on stderr). Resumable: per_run.csv gets each run as
it ends, and a rerun measures only the runs it lacks, then reports those the arguments name. Writes
results/lfbo_overhead/summary.md and per_run.csv.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pandas as pd
from tqdm import tqdm

from strategy_comparison import KERNEL_TUNER, comparison_datasets
from tunebench.files import write_text_atomically
from tunebench.measure.replay import ReplayEvaluator
from tunebench.search import NAMES, make_strategy
from tunebench.search.base import Config
from tunebench.search.lfbo import LFBOPatternSearch, diverse_pick
from tunebench.space import Key
from tunebench.study import Budget, Run, Task, cached_dataset, replay_environment, run_search, tasks_of
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
PRESETS = ("lfbo", "lfbo_quick", "lfbo_start30", "lfbo_restarts")
STUDY_TRACE = REPO / "results" / "strategy_comparison" / "trace.parquet"
PARTS = ("fit", "select", "candidates")
BUDGET = Budget(evaluations=400)  # the strategy comparison's budget, so that its trace pairs run by run
# The library's methods that the arms time (and the reference arm replaces), as they are before any timing wraps them.
LIBRARY_METHODS = {part: getattr(LFBOPatternSearch, part) for part in PARTS}


def reference_select(self: LFBOPatternSearch, forest, candidates: list[Config], count: int) -> list[Config]:
    """`LFBOPatternSearch.select` with the forest scored by scikit-learn's `predict_proba` and `apply`."""
    if forest is None:
        return LIBRARY_METHODS["select"](self, forest, candidates, count)
    features = self.space.encode(candidates)
    probability, leaves = forest.predict_proba(features)[:, 1], forest.apply(features)
    chosen = diverse_pick(probability, leaves, min(count, len(candidates)), self.settings.similarity_penalty)
    return [candidates[index] for index in chosen]


def reference_candidates(self: LFBOPatternSearch, config: Config) -> list[Config]:
    """`LFBOPatternSearch.candidates` with one `Space.perturb` call, and its checks, per random move."""
    settings = self.settings
    found: dict[Key, Config] = {}
    if settings.include_neighbours:
        found.update((self.space.key(move), move) for move in self.space.neighbours(config))
    for _ in range(settings.num_neighbors):
        move = self.space.perturb(config, self.rng, radius=self.radius, max_changes=settings.max_changes)
        found.setdefault(self.space.key(move), move)
    found.pop(self.space.key(config), None)
    return [move for key, move in found.items() if key not in self.visited]


def timed(method: Callable, part: str, seconds: dict[str, float]) -> Callable:
    """`method` that adds its CPU seconds to `seconds[part]` and counts its calls in `seconds[part + "_calls"]`."""
    def wrapper(*args, **kwargs):
        started = time.process_time()
        try:
            return method(*args, **kwargs)
        finally:
            seconds[part] += time.process_time() - started
            seconds[f"{part}_calls"] += 1
    return wrapper


@contextmanager
def instrumented(reference: bool, seconds: dict[str, float]) -> Iterator[None]:
    """Every LFBO search built inside (a warm start's restarts too) times its fit, select and candidates into
    `seconds`; with `reference`, through the reference path's select and candidates."""
    used = dict(LIBRARY_METHODS, **({"select": reference_select, "candidates": reference_candidates} if reference
                                    else {}))
    try:
        for part, method in used.items():
            setattr(LFBOPatternSearch, part, timed(method, part, seconds))
        yield
    finally:
        for part, method in LIBRARY_METHODS.items():
            setattr(LFBOPatternSearch, part, method)


def replay(run: Run, reference: bool) -> tuple[pd.DataFrame, dict[str, float]]:
    """One run's trace and its CPU seconds per part."""
    evaluator = ReplayEvaluator(cached_dataset(run.task.dataset), run.task.shape)
    seconds: dict[str, float] = defaultdict(float)
    with instrumented(reference, seconds):
        trace = run_search(make_strategy(run.strategy, evaluator.space, seed=run.seed), evaluator, BUDGET)
    return trace, seconds


def committed_configs(trace_path: Path) -> dict[tuple[str, str, int], list[str]]:
    """Each run's asked configs in the committed strategy comparison's trace, keyed by (strategy, task, seed)."""
    if not trace_path.exists():
        return {}
    trace = pd.read_parquet(trace_path, columns=["strategy", "task", "seed", "config_key"])
    return {key: group.tolist() for key, group in trace.groupby(["strategy", "task", "seed"])["config_key"]}


def measure(runs: list[Run], committed: dict[tuple[str, str, int], list[str]], per_run_csv: Path) -> pd.DataFrame:
    """Both arms on every run, the reference first, then the library. Each finished run's two rows are written to
    `per_run_csv` at once (atomically), and runs it holds already are not measured again."""
    done = pd.read_csv(per_run_csv) if per_run_csv.exists() else pd.DataFrame(columns=["strategy", "task", "seed"])
    finished = set(zip(done["strategy"], done["task"], done["seed"]))
    rows = done.to_dict("records")
    for run in tqdm(runs, desc="LFBO runs, both arms", file=sys.stderr):
        if (run.strategy, run.task.name, run.seed) in finished:
            continue
        traces = {}
        pair = []
        for arm, reference in (("reference", True), ("library", False)):
            trace, seconds = replay(run, reference)
            traces[arm] = trace
            pair.append({"strategy": run.strategy, "task": run.task.name, "seed": run.seed, "arm": arm,
                         "evaluations": len(trace), "asks": int(trace["batch"].max()),
                         "fits": int(seconds["fit_calls"]), "replayed_with": replay_environment(),
                         "strategy_s": float(trace["strategy_s"].max()), **{f"{p}_s": seconds[p] for p in PARTS}})
        same = traces["reference"][["batch", "config_key"]].equals(traces["library"][["batch", "config_key"]])
        recorded = committed.get((run.strategy, run.task.name, run.seed))
        for row in pair:
            row["arms_agree"] = same
            row["matches_study"] = None if recorded is None else traces["library"]["config_key"].tolist() == recorded
        rows += pair
        write_text_atomically(per_run_csv, pd.DataFrame(rows).to_csv(index=False))
    wanted = {(run.strategy, run.task.name, run.seed) for run in runs}
    table = pd.DataFrame(rows)
    return table[[key in wanted for key in zip(table["strategy"], table["task"], table["seed"])]]


def summary_table(per_run: pd.DataFrame) -> pd.DataFrame:
    """Per preset: medians over runs of each arm's CPU seconds (the whole run and its parts) and their ratios."""
    columns = ["strategy_s", *(f"{part}_s" for part in PARTS)]
    medians = per_run.groupby(["strategy", "arm"], sort=False)[columns].median().unstack("arm")
    rows = []
    for strategy in dict.fromkeys(per_run["strategy"]):
        row = {"preset": strategy, "runs": int((per_run["strategy"] == strategy).sum() // 2)}
        for column in columns:
            reference = medians.loc[strategy, (column, "reference")]
            library = medians.loc[strategy, (column, "library")]
            name = "whole run" if column == "strategy_s" else column.removesuffix("_s")
            row[f"{name}: reference / library (ms)"] = f"{1e3 * reference:.0f} / {1e3 * library:.0f}"
            row[f"{name}: ratio"] = f"{library / reference:.2f}" if reference > 0 else "-"
        rows.append(row)
    return pd.DataFrame(rows)


def report(per_run: pd.DataFrame, command: str, tasks: int, seeds: int) -> str:
    counts = per_run[per_run["arm"] == "library"].groupby("strategy", sort=False)[["asks", "fits"]].median()
    matched = per_run["matches_study"].dropna()
    environments = per_run["replayed_with"].value_counts()
    lines = [
        "# LFBO's own CPU time: the library's path against the reference path",
        "",
        f"Command: `{command}`",
        "",
        f"{tasks} tasks of the strategy comparison, seeds 0 to {seeds - 1}, budget {BUDGET.evaluations} unique "
        "evaluations, deterministic replay; both arms of a run one after the other in one process. Medians over runs "
        "of CPU milliseconds per run (`time.process_time`, what the replay charges to its clock); a ratio is the "
        "library's median over the reference's.",
        "",
        "Replayed with (`study.replay_environment`): " + "; or ".join(
            f"{environment} ({count // 2} runs)" for environment, count in environments.items()) + ".",
        "",
        markdown_table(summary_table(per_run)),
        "",
        f"- The arms asked the same configs in the same batches in {int(per_run['arms_agree'].sum() // 2)} of "
        f"{len(per_run) // 2} runs.",
        f"- Against the committed strategy comparison's trace: {int(matched.sum() // 2)} of {len(matched) // 2} "
        "runs it holds asked the same configs.",
        "- Median asks and forest fits per run: " + ", ".join(f"{name} {row.asks:g} and {row.fits:g}"
                                                            for name, row in counts.iterrows()) + ".",
        "- What is left of a run's CPU time beside the three parts is the search generator's own bookkeeping and "
        "`tell`.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategies", nargs="+", default=list(PRESETS),
                        choices=[name for name in NAMES if name.startswith("lfbo")])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--every", type=int, default=3, help="every n-th task of the strategy comparison's 37")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "lfbo_overhead")
    args = parser.parse_args()
    if args.seeds < 1 or args.every < 1:
        parser.error(f"--seeds {args.seeds} and --every {args.every}: allowed: integers >= 1")
    tasks: list[Task] = [task for path in comparison_datasets(KERNEL_TUNER) for task in tasks_of(path)][::args.every]
    runs = [Run(strategy, task, seed) for strategy in args.strategies for task in tasks for seed in range(args.seeds)]
    args.out.mkdir(parents=True, exist_ok=True)
    per_run = measure(runs, committed_configs(STUDY_TRACE), args.out / "per_run.csv")
    command = shlex.join(["python", "benchmarks/lfbo_overhead.py", *sys.argv[1:]])
    text = report(per_run, command, len(tasks), args.seeds)
    write_text_atomically(args.out / "summary.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
