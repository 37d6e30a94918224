"""Replay every strategy on every task of the recorded GEMM, layer norm and softmax datasets and of the two Kernel
Tuner caches, and write the comparison tables, over all tasks and per kernel, under results/strategy_comparison/
(docs/strategies.md quotes them).

Run: `.venv/bin/python benchmarks/strategy_comparison.py` (resumable: rerun after a kill to continue; runs that
the trace table there already holds are not replayed again). `--mode noisy` answers each config with a seeded bootstrap
median of its recorded repeats and judges each run by the recorded median of the config it would deploy
(`study.judged_by_recorded_medians`); its default folder is results/strategy_comparison_noisy/. `--datasets` replays
other recorded datasets' tasks instead (results/strategy_comparison_tma/: the TMA GEMM's H200 sweeps).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.measure.replay import CLOCKS, MODES
from tunebench.metrics import median_ci_ranks, median_with_ci, summarize
from tunebench.reclock import reclock
from tunebench.search import STRATEGIES, check_strategy_names, make_strategy
from tunebench.space import Space
from tunebench.study import (Budget, Task, judged_by_recorded_medians, open_dataset, run_study, task_references,
                             tasks_by_kernel, tasks_of)
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
KERNEL_TUNER = REPO.parent / "shared" / "datasets" / "kerneltuner"
# The compute-bound GEMM and the two memory-bound row-wise kernels, each swept exhaustively on the H100.
RECORDED_DATASETS = tuple(REPO / "results" / "datasets" / f"{kernel}_bfloat16_h100.parquet"
                          for kernel in ("matmul", "layernorm", "softmax"))
KERNEL_TUNER_CACHES = ("convolution_A100.json.gz", "convolution_A4000.json.gz")
BUDGETS = (50, 100, 200, 400)
# LFBO pattern search beside the pattern search it prunes, at each shared setting (Helion's full and quick efforts)
END_PAIRS = (("lfbo", "pattern"), ("lfbo_quick", "pattern_quick"), ("lfbo_start30", "pattern_start30"))
CONFIDENCE = 0.95
# The suffix of summary_by_task.csv's seconds columns on each replay clock: the study replays on the sequential clock,
# and its trace is re-clocked on the pipelined one (the configs asked under an evaluation budget do not depend on it).
CLOCK_SUFFIX = {"sequential": "", "pipelined": "_pipelined"}
UNRECORDED_ENVIRONMENT = "not recorded (replayed before traces kept it)"


def json_value(text: str) -> object:
    """`text` parsed as JSON, for argparse: a clear error names the text and what is allowed."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not JSON ({error}); allowed: an object such as "
                                         '\'{"lfbo": {"initial_population": 20}}\'') from error


def check_settings(settings: object, strategies: Sequence[str], space: Space) -> None:
    """A clear error unless `settings` maps some of `strategies` to overrides that their settings dataclasses accept
    (checked by name and type by building each strategy once on `space`, a task's)."""
    if not isinstance(settings, dict) or not all(isinstance(value, dict) for value in settings.values()):
        raise ValueError(f"--settings must map strategy names to objects of settings, got {settings!r}")
    unknown = [name for name in settings if name not in strategies]
    if unknown:
        raise ValueError(f"--settings names strategies {unknown} that --strategies does not run: {strategies}")
    for name, overrides in settings.items():
        make_strategy(name, space, **overrides)


def overhead_per_ask_ms(trace: pd.DataFrame) -> pd.Series:
    """Median over runs of the strategy's CPU time per ask, per strategy."""
    per_run = trace.groupby(["strategy", "task", "seed"]).agg(strategy_s=("strategy_s", "max"), asks=("batch", "max"))
    return (1e3 * per_run.strategy_s / per_run.asks).groupby("strategy").median()


def interval_over_tasks(tasks: int) -> tuple[float, str]:
    """The confidence to ask `median_with_ci` for over this many tasks, and what to call the bracket: a 95 % CI,
    or, with 5 tasks or fewer, the full range (which covers the median with less than 95 %)."""
    coverage = median_ci_ranks(tasks, CONFIDENCE)[2]
    return (CONFIDENCE, f"{CONFIDENCE:.0%} CI") if coverage >= CONFIDENCE else (coverage, "range")


def headline(summary: pd.DataFrame, trace: pd.DataFrame, budgets: tuple[int, ...]) -> pd.DataFrame:
    """Per strategy, over the summary's tasks: median [95 % CI] evaluations to 0.99, fraction of optimum at each
    budget (median over tasks of the per-task medians over seeds), mean score (mean over tasks), overhead per ask."""
    rows = []
    overhead = overhead_per_ask_ms(trace)
    confidence, bracket = interval_over_tasks(summary["task"].nunique())
    for strategy, group in summary.groupby("strategy", sort=False):
        median, low, high = median_with_ci(group["evals_to_0.99"].to_numpy(), confidence)
        row = {"strategy": strategy, "tasks": len(group),
               f"evals to 0.99 (median over tasks [{bracket}])": f"{median:.0f} [{low:.0f}, {high:.0f}]"}
        for budget in budgets:
            row[f"fraction at {budget}"] = f"{group[f'fraction_at_{budget}'].median():.3f}"
        row["mean score"] = f"{group['mean_score'].mean():.3f}"
        row[f"success 0.99 @{max(budgets)}"] = f"{group['success_0.99'].mean():.0%}"
        row["overhead per ask (ms)"] = f"{overhead[strategy]:.1f}"
        rows.append(row)
    return pd.DataFrame(rows)


def seconds_by_clock(summary: pd.DataFrame) -> pd.DataFrame:
    """Per strategy, over the summary's tasks: the median [95 % CI] simulated seconds to 0.99 on each replay clock
    (a task's figure is its median over seeds; inf: the median seed did not get there), and their ratio."""
    rows = []
    confidence, bracket = interval_over_tasks(summary["task"].nunique())
    for strategy, group in summary.groupby("strategy", sort=False):
        row = {"strategy": strategy, "tasks": len(group)}
        medians = {}
        for clock in CLOCKS:
            medians[clock], low, high = median_with_ci(group[f"seconds_to_0.99{CLOCK_SUFFIX[clock]}"].to_numpy(),
                                                       confidence)
            row[f"s to 0.99, {clock} clock [{bracket}]"] = f"{medians[clock]:.1f} [{low:.1f}, {high:.1f}]"
        ratio = medians["pipelined"] / medians["sequential"]
        row["pipelined / sequential"] = f"{ratio:.2f}" if np.isfinite(ratio) else "n/a"
        rows.append(row)
    return pd.DataFrame(rows)


def expected_seconds_with_restarts(summary: pd.DataFrame) -> pd.DataFrame:
    """Per strategy, over the summary's tasks: the median [95 % CI] of the expected simulated seconds to 0.99 when a
    run that stops short is restarted with a fresh seed (COCO's average runtime, `metrics.expected_running_time`; a
    task's figure is over its seeds), on each replay clock, and the share of runs that got there."""
    rows = []
    confidence, bracket = interval_over_tasks(summary["task"].nunique())
    for strategy, group in summary.groupby("strategy", sort=False):
        row = {"strategy": strategy, "tasks": len(group)}
        for clock in CLOCKS:
            median, low, high = median_with_ci(group[f"ert_seconds_to_0.99{CLOCK_SUFFIX[clock]}"].to_numpy(),
                                               confidence)
            column = f"expected s to 0.99 with restarts, {clock} clock [{bracket}]"
            row[column] = f"{median:.1f} [{low:.1f}, {high:.1f}]"
        row["runs reaching 0.99"] = f"{group['success_0.99'].mean():.0%}"
        rows.append(row)
    return pd.DataFrame(rows)


def lfbo_vs_pattern(summary: pd.DataFrame) -> pd.DataFrame:
    """Task by task: LFBO / PatternSearch ratio of median evaluations and seconds to reach 0.99 of optimum."""
    index = summary.set_index(["strategy", "task"])
    rows = []
    for task in summary.task.unique():
        lfbo, pattern = index.loc[("lfbo", task)], index.loc[("pattern", task)]
        row = {"task": task}
        for what in ("evals", "seconds"):
            a, b = lfbo[f"{what}_to_0.99"], pattern[f"{what}_to_0.99"]
            row[f"LFBO {what}"] = f"{a:.0f}" if what == "evals" else f"{a:.1f}"
            row[f"Pattern {what}"] = f"{b:.0f}" if what == "evals" else f"{b:.1f}"
            row[f"ratio {what}"] = f"{a / b:.2f}" if np.isfinite(a) and np.isfinite(b) else "n/a"
        rows.append(row)
    return pd.DataFrame(rows)


def how_searches_end(summary: pd.DataFrame) -> pd.DataFrame:
    """Per strategy, over the summary's tasks: how long a run lasts and what it ends with, as an autotuner that stops
    by itself is judged (Helion's measure: its autotuning time and the latency it ends with). A task's figures are
    medians over its seeds; the seconds are the pipelined clock's."""
    rows = []
    confidence, bracket = interval_over_tasks(summary["task"].nunique())
    for strategy, group in summary.groupby("strategy", sort=False):
        median, low, high = median_with_ci(group[f"run_seconds{CLOCK_SUFFIX['pipelined']}"].to_numpy(), confidence)
        rows.append({"strategy": strategy, "tasks": len(group),
                     "runs ending on their own": f"{group['ended_on_its_own'].mean():.0%}",
                     "evaluations at the end (median over tasks)": f"{group['run_evals'].median():.0f}",
                     f"pipelined s at the end [{bracket}]": f"{median:.1f} [{low:.1f}, {high:.1f}]",
                     "fraction of optimum at the end (median over tasks)": f"{group['final_fraction'].median():.3f}",
                     "runs ending at >= 0.99": f"{group['success_0.99'].mean():.0%}"})
    return pd.DataFrame(rows)


def ends_side_by_side(summary: pd.DataFrame, pairs: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """Per pair (A, B) of strategies both in the summary, task by task: A's pipelined seconds at the end over B's, and
    A's final latency over B's (B's final fraction of optimum over A's; below 1: A ends on the faster config); the
    median and geometric mean over tasks, and on how many tasks A ends sooner and on a config at least as fast."""
    index = summary.set_index(["strategy", "task"])
    seconds = f"run_seconds{CLOCK_SUFFIX['pipelined']}"
    rows = []
    for a, b in pairs:
        if not {a, b} <= set(summary["strategy"]):
            continue
        first = index.loc[a]
        second = index.loc[b].loc[first.index]
        time_ratio = (first[seconds] / second[seconds]).to_numpy()
        latency_ratio = (second["final_fraction"] / first["final_fraction"]).to_numpy()
        rows.append({"A / B": f"{a} / {b}", "tasks": len(first),
                     "runs ending on their own (A, B)": f"{first['ended_on_its_own'].mean():.0%}, "
                                                        f"{second['ended_on_its_own'].mean():.0%}",
                     "time at the end, median [geometric mean]": f"{np.median(time_ratio):.3f} "
                                                                 f"[{np.exp(np.log(time_ratio).mean()):.3f}]",
                     "final latency, median [geometric mean]": f"{np.median(latency_ratio):.3f} "
                                                               f"[{np.exp(np.log(latency_ratio).mean()):.3f}]",
                     "tasks where A ends sooner": int((time_ratio < 1).sum()),
                     "tasks where A ends at least as fast": int((latency_ratio <= 1).sum())})
    return pd.DataFrame(rows)


def summary_on_both_clocks(trace: pd.DataFrame, tasks: Sequence[Task], budgets: tuple[int, ...],
                           workers: int) -> pd.DataFrame:
    """`metrics.summarize` of a study's trace, one row per (strategy, task), with the seconds columns (to a target,
    and expected with restarts) of the trace re-clocked on the pipelined clock beside the sequential ones (suffix
    `CLOCK_SUFFIX["pipelined"]`), and the seconds at a run's end likewise."""
    optima, latencies, seconds = task_references(tasks)
    summary = summarize(trace, optima, latencies, budgets=budgets, seconds_per_evaluation=seconds)
    pipelined = summarize(reclock(trace, tasks, "pipelined", workers=workers), optima, latencies, budgets=budgets)
    seconds_columns = [column for column in pipelined
                       if column.startswith(("seconds_to_", "ert_seconds_to_")) or column == "run_seconds"]
    return summary.merge(pipelined[["strategy", "task", *seconds_columns]], on=["strategy", "task"],
                         suffixes=("", CLOCK_SUFFIX["pipelined"]), validate="one_to_one")


def replay_environments(trace: pd.DataFrame) -> pd.DataFrame:
    """Per environment the runs were replayed in (`study.replay_environment`, the trace's `replayed_with`): how many
    runs, of which strategies. A study resumed or grown in another session mixes environments, and the CPU time a
    strategy is charged depends on the machine and the library versions."""
    runs = trace.drop_duplicates(["strategy", "task", "seed"])
    environment = runs["replayed_with"] if "replayed_with" in runs else pd.Series(None, index=runs.index, dtype=object)
    runs = runs.assign(environment=environment.fillna(UNRECORDED_ENVIRONMENT))
    return pd.DataFrame([{"replayed with": environment, "runs": len(rows),
                          "strategies": ", ".join(dict.fromkeys(rows["strategy"]))}
                         for environment, rows in runs.groupby("environment", sort=False)])


def budgets_up_to(budget: int) -> tuple[int, ...]:
    """The budgets at which the tables give the fraction of optimum: those of `BUDGETS` below `budget`, and it."""
    return (*(b for b in BUDGETS if b < budget), budget)


def comparison_datasets(kernel_tuner_dir: Path) -> list[Path]:
    """The recorded datasets whose tasks the comparison replays: the three H100 sweeps, then the two Kernel Tuner
    caches in `kernel_tuner_dir`."""
    return [*RECORDED_DATASETS, *(kernel_tuner_dir / name for name in KERNEL_TUNER_CACHES)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategies", nargs="*", default=[s for s in STRATEGIES if s != "exhaustive"],
                        help="registered names or a Strategy subclass's import path (docs/strategies.md)")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=int, default=max(BUDGETS), help="unique evaluations per run")
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--mode", choices=MODES, default="deterministic",
                        help="replay the recorded medians, or seeded bootstrap medians of the recorded repeats")
    parser.add_argument("--out", type=Path, default=None,
                        help="default: results/strategy_comparison/ (--mode noisy: results/strategy_comparison_noisy/)")
    parser.add_argument("--kernel-tuner-dir", type=Path, default=KERNEL_TUNER, help="where the two caches are")
    parser.add_argument("--datasets", type=Path, nargs="+", default=None,
                        help="replay these recorded datasets' tasks instead (sweeps or Kernel Tuner caches), e.g. the "
                             "TMA GEMM's; give the study its own --out")
    parser.add_argument("--trace", type=Path, default=None,
                        help="summarize this finished study's trace instead of running one (e.g. one run elsewhere)")
    parser.add_argument("--settings", type=json_value, default={},
                        help='overrides of strategies\' defaults, for an ablation in its own --out: '
                             '\'{"lfbo": {"initial_population": 20}}\'')
    args = parser.parse_args()
    try:
        check_strategy_names(args.strategies)
    except ValueError as error:
        parser.error(str(error))
    if args.settings and args.out is None:
        parser.error("--settings changes what the strategies do: give the study its own --out")
    for option, value in (("--seeds", args.seeds), ("--budget", args.budget), ("--workers", args.workers)):
        if value < 1:
            parser.error(f"{option} must be at least 1, got {value}")
    if args.datasets and args.out is None:
        parser.error("--datasets replays other tasks: give the study its own --out")
    datasets = args.datasets or comparison_datasets(args.kernel_tuner_dir)
    missing = [str(path) for path in [*datasets, *([args.trace] if args.trace else [])] if not path.is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)} (--kernel-tuner-dir names the folder of the two Kernel "
                     "Tuner caches; --trace a finished study's trace table)")
    tasks = [task for path in datasets for task in tasks_of(path)]
    try:
        check_settings(args.settings, args.strategies, open_dataset(tasks[0].dataset).space(tasks[0].shape))
    except (ValueError, TypeError) as error:
        parser.error(str(error))
    if args.out is None:
        args.out = REPO / "results" / ("strategy_comparison" + ("_noisy" if args.mode == "noisy" else ""))
    args.out.mkdir(parents=True, exist_ok=True)
    if args.trace is None:
        trace = run_study(args.strategies, tasks, range(args.seeds), Budget(evaluations=args.budget),
                          args.out / "trace.parquet", workers=args.workers, mode=args.mode, settings=args.settings)
    else:
        trace = pd.read_parquet(args.trace)
        args.strategies = list(trace.strategy.unique())
    if args.mode == "noisy":
        trace = judged_by_recorded_medians(trace, tasks)
    budgets = budgets_up_to(args.budget)
    summary = summary_on_both_clocks(trace, tasks, budgets, args.workers)
    write_text_atomically(args.out / "summary_by_task.csv", summary.to_csv(index=False))
    command = shlex.join(["python", *sys.argv])
    judged = ("" if args.mode == "deterministic" else " Each config is answered with a bootstrap median of its "
              "recorded repeats, drawn by the run's seed; a run is judged by the recorded median of its incumbent, the "
              "config fastest by what it was told (`study.judged_by_recorded_medians`).")
    changed = "".join(f" {name} runs with {', '.join(f'{key}={value!r}' for key, value in overrides.items())} (not "
                      "its defaults)." for name, overrides in args.settings.items())
    parts = [f"# Strategy comparison (replay)\n\nCommand: `{command}`\n\n{len(tasks)} tasks, {args.seeds} seeds, "
             f"budget {args.budget} unique evaluations, {args.mode} replay.{judged}{changed}",
             "## Over all tasks", markdown_table(headline(summary, trace, budgets)),
             "## Per kernel\n\nThe same table over one kernel's tasks" + (
                 " (with 5 tasks or fewer the bracket is their range, not a 95 % CI)." if args.datasets else
                 ": the GEMM is compute-bound, layer norm and softmax are memory-bound, the Kernel Tuner convolution "
                 "is one shape on two GPUs (with so few tasks the bracket is their range, not a 95 % CI).")]
    for kernel, names in tasks_by_kernel(tasks).items():
        table = headline(summary[summary["task"].isin(names)], trace[trace["task"].isin(names)], budgets)
        parts += [f"### {kernel}", markdown_table(table)]
    parts += ["## Simulated seconds on each replay clock",
              "The study replays on the sequential clock (a batch compiles, then is timed); its trace re-clocked on "
              "the pipelined one (each binary's configs timed as its compile ends while the other workers compile on, "
              "as the live bench does; `tunebench.reclock`). Against the recorded live runs of the TMA GEMM the "
              "pipelined clock matches live batches and the sequential one charges about 40 % too much "
              "(`results/replay_fidelity/summary.md`). Neither charges the start-up a live run pays once. Per task in "
              "`summary_by_task.csv` (`seconds_to_*` and `seconds_to_*_pipelined`); over all tasks, then per kernel.",
              markdown_table(seconds_by_clock(summary))]
    for kernel, names in tasks_by_kernel(tasks).items():
        parts += [f"### {kernel}", markdown_table(seconds_by_clock(summary[summary["task"].isin(names)]))]
    parts += ["## Expected seconds with restarts",
              "A run that stops short of 0.99 is restarted with a fresh seed until one gets there: per task, the "
              "seconds of all its runs (a run that stopped short charged all its seconds) over the runs that got "
              "there (COCO's average runtime, `metrics.expected_running_time`), so a strategy that stops early pays "
              "for it. Over all tasks, then per kernel.", markdown_table(expected_seconds_with_restarts(summary))]
    for kernel, names in tasks_by_kernel(tasks).items():
        parts += [f"### {kernel}", markdown_table(expected_seconds_with_restarts(summary[summary["task"].isin(names)]))]
    parts += ["## How the searches end",
              "An autotuner that stops by itself is judged by how long it ran and what it ended with (Helion reports "
              "its LFBO pattern search against its pattern search so: autotuning time and kernel latency). Per "
              "strategy: the share of runs that ended before the budget on their own (the others were cut by it, so "
              "their figures are the budget's), and, medians over seeds per task, then over tasks, the evaluations "
              "and pipelined seconds at a run's end and the fraction of optimum it ended with.",
              markdown_table(how_searches_end(summary)),
              "Side by side, task by task (the same seeds draw the same random start for both): A's seconds at the "
              "end over B's, and A's final latency over B's (below 1: A ends on the faster config).",
              markdown_table(ends_side_by_side(summary, END_PAIRS))]
    if {"lfbo", "pattern"} <= set(args.strategies):
        parts += ["## LFBO vs PatternSearch, median over seeds to reach 0.99 of optimum (inf: not reached by the "
                  "median seed within the budget)", markdown_table(lfbo_vs_pattern(summary))]
    parts += ["## Replayed with",
              "A strategy's own CPU time is charged to the replay's clock as measured, so its seconds depend on the "
              "machine and the library versions that replayed it (docs/strategies.md, \"LFBO's own CPU time\"). The "
              "runs of this trace, by the environment that replayed them:", markdown_table(replay_environments(trace))]
    text = "\n\n".join(parts) + "\n"
    write_text_atomically(args.out / "summary.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
