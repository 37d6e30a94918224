"""Choose one setting of a strategy on some kernels' recorded tasks and report the choice on the others, as DESIGN's
fair comparison asks: tune strategy hyperparameters on some datasets, report on others.

Run: `.venv/bin/python benchmarks/held_out_setting.py --strategy lfbo --setting initial_population --values 10 20 30 50
100` (resumable: each value's runs are kept under OUT/<setting>=<value>.runs/). The tasks are the strategy comparison's
37. The rule, fixed before any run: on the choice tasks, the value with the lowest median over tasks of evaluations to
0.99 of the optimum wins (`--by seconds`: of simulated seconds to it on the pipelined clock, the one that matches live
runs, for a setting that trades evaluations for time; `--by expected_seconds`: of those seconds expected when a run that
stops short is restarted, for a setting that also trades reliability); a tie goes to the higher mean score, then to the
strategy's default. Every value is also replayed on the report tasks and shown there, but the report tasks play no part
in the choice. Writes OUT/summary.md and OUT/summary_by_task.csv (default OUT:
results/held_out_setting/<strategy>_<setting>/, with `_by_<criterion>` after it for another `--by`).
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

from strategy_comparison import (BUDGETS, KERNEL_TUNER, budgets_up_to, check_settings, comparison_datasets,
                                 expected_seconds_with_restarts, headline, json_value, seconds_by_clock,
                                 summary_on_both_clocks)
from tunebench.files import write_text_atomically
from tunebench.search import check_strategy_names, make_strategy
from tunebench.study import Budget, open_dataset, run_study, tasks_by_kernel, tasks_of
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
CHOICE_KERNELS = ("layernorm", "softmax", "kerneltuner/convolution_kernel")
REPORT_KERNELS = ("matmul",)
# What the rule ranks by (`--by`): evaluations to 0.99, simulated seconds to it on the pipelined clock, or those
# seconds expected when runs that stop short are restarted (`strategy_comparison.expected_seconds_with_restarts`).
CRITERIA = {"evals": ("evals_to_0.99", "evaluations"), "seconds": ("seconds_to_0.99_pipelined", "pipelined seconds"),
            "expected_seconds": ("ert_seconds_to_0.99_pipelined", "expected pipelined seconds with restarts")}


def label(setting: str, value: object) -> str:
    """How a value of the setting is named in the tables: `initial_population=20`."""
    return f"{setting}={json.dumps(value)}"


def choose(summary: pd.DataFrame, default: str, by: str = "evals") -> str:
    """The rule: of the labels in `summary` (one row per strategy label and task, the choice tasks only), the one
    with the lowest median over tasks of `by` to 0.99 (`CRITERIA`); a tie goes to the higher mean over tasks of the
    mean score, then to `default`, then to the first label in `summary`'s order."""
    grouped = summary.groupby("strategy", sort=False)
    table = pd.DataFrame({"cost": grouped[CRITERIA[by][0]].median(), "score": grouped["mean_score"].mean()})
    table["not_default"] = table.index != default
    table["order"] = np.arange(len(table))
    return str(table.sort_values(["cost", "score", "not_default", "order"],
                                 ascending=[True, False, True, True]).index[0])


def pairwise(summary: pd.DataFrame, chosen: str, default: str, by: str = "evals") -> str:
    """On how many tasks the chosen value needs fewer, as many and more of `by` to 0.99 than the default
    (medians over seeds; a task neither reaches counts as a tie)."""
    if chosen == default:
        return f"The default, {default}, is chosen."
    by_task = summary.pivot(index="task", columns="strategy", values=CRITERIA[by][0])
    a, b = by_task[chosen], by_task[default]
    both_inf = np.isinf(a) & np.isinf(b)
    fewer, more = int(((a < b) & ~both_inf).sum()), int(((a > b) & ~both_inf).sum())
    return (f"{chosen} needs fewer {CRITERIA[by][1]} to 0.99 than {default} on {fewer} of {len(by_task)} tasks, as "
            f"many on {len(by_task) - fewer - more}, more on {more}.")


def marked(table: pd.DataFrame, chosen: str, default: str) -> pd.DataFrame:
    """`table`'s rows in ascending order of the values they name, its chosen and default labels marked."""
    marks = {chosen: " (chosen)", default: " (default)"} if chosen != default else {chosen: " (chosen, the default)"}
    order = table["strategy"].map(lambda name: json.loads(name.partition("=")[2])).rank(method="first")
    ordered = table.iloc[np.argsort(order.to_numpy(), kind="stable")]
    return ordered.assign(strategy=[name + marks.get(name, "") for name in ordered["strategy"]])


def tables(summary: pd.DataFrame, trace: pd.DataFrame, names: Sequence[str], budgets: tuple[int, ...],
           chosen: str, default: str) -> list[str]:
    """The headline table, the seconds table and the expected seconds with restarts over the tasks `names`."""
    rows = summary["task"].isin(names)
    return [markdown_table(marked(headline(summary[rows], trace[trace["task"].isin(names)], budgets), chosen, default)),
            markdown_table(marked(seconds_by_clock(summary[rows]), chosen, default)),
            markdown_table(marked(expected_seconds_with_restarts(summary[rows]), chosen, default))]


def per_kernel(summary: pd.DataFrame, trace: pd.DataFrame, names: Sequence[str], kernels: dict[str, list[str]],
               budgets: tuple[int, ...], chosen: str, default: str) -> list[str]:
    """The tables kernel by kernel, when `names` holds more than one kernel."""
    return [part for kernel in (names if len(names) > 1 else ())
            for part in (f"### {kernel}", *tables(summary, trace, kernels[kernel], budgets, chosen, default))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategy", default="lfbo", help="a registered name, a preset or an import path")
    parser.add_argument("--setting", default="initial_population", help="the one setting to choose")
    parser.add_argument("--values", nargs="+", type=json_value, default=[10, 20, 30, 50, 100],
                        help="the candidates, each JSON (the strategy's default is added when missing)")
    parser.add_argument("--choose-on", nargs="+", default=list(CHOICE_KERNELS), help="kernels whose tasks choose")
    parser.add_argument("--report-on", nargs="+", default=list(REPORT_KERNELS), help="kernels whose tasks report")
    parser.add_argument("--by", choices=CRITERIA, default="evals",
                        help="what the rule ranks by: evaluations to 0.99, pipelined seconds to it, or those seconds "
                             "expected with restarts")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=int, default=max(BUDGETS), help="unique evaluations per run")
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--out", type=Path, default=None,
                        help="default: results/held_out_setting/<strategy>_<setting>[_by_<criterion>]")
    parser.add_argument("--kernel-tuner-dir", type=Path, default=KERNEL_TUNER, help="where the two caches are")
    args = parser.parse_args()
    for option, value in (("--seeds", args.seeds), ("--budget", args.budget), ("--workers", args.workers)):
        if value < 1:
            parser.error(f"{option} must be at least 1, got {value}")
    try:
        check_strategy_names([args.strategy])
    except ValueError as error:
        parser.error(str(error))
    datasets = comparison_datasets(args.kernel_tuner_dir)
    missing = [str(path) for path in datasets if not path.is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)} (--kernel-tuner-dir names the folder of the two Kernel Tuner "
                     "caches)")
    tasks = [task for path in datasets for task in tasks_of(path)]
    kernels = tasks_by_kernel(tasks)
    for option, names in (("--choose-on", args.choose_on), ("--report-on", args.report_on)):
        unknown = [name for name in names if name not in kernels]
        if unknown:
            parser.error(f"{option} names unknown kernels {unknown}; the tasks' kernels are: {', '.join(kernels)}")
    both = sorted(set(args.choose_on) & set(args.report_on))
    if both:
        parser.error(f"kernels {both} are both in --choose-on and --report-on: a choice is reported on other tasks")
    space = open_dataset(tasks[0].dataset).space(tasks[0].shape)
    try:
        for value in args.values:
            check_settings({args.strategy: {args.setting: value}}, [args.strategy], space)
    except (ValueError, TypeError) as error:
        parser.error(str(error))
    default_value = getattr(make_strategy(args.strategy, space).settings, args.setting)
    values = list(dict.fromkeys(json.dumps(value) for value in [*args.values, default_value]))
    if len(values) < 2:
        parser.error(f"--values {args.values} leave nothing to choose between beside the default {default_value!r}")
    by = "" if args.by == "evals" else f"_by_{args.by}"
    out = args.out or REPO / "results" / "held_out_setting" / f"{args.strategy}_{args.setting}{by}"
    out.mkdir(parents=True, exist_ok=True)

    choice_tasks = [name for kernel in args.choose_on for name in kernels[kernel]]
    report_tasks = [name for kernel in args.report_on for name in kernels[kernel]]
    studied = [task for task in tasks if task.name in {*choice_tasks, *report_tasks}]
    traces = []
    for text in values:
        name = label(args.setting, json.loads(text))
        print(f"{args.strategy} with {name}", file=sys.stderr)
        trace = run_study([args.strategy], studied, range(args.seeds), Budget(evaluations=args.budget),
                          out / f"{name}.parquet", workers=args.workers,
                          settings={args.strategy: {args.setting: json.loads(text)}})
        traces.append(trace.assign(strategy=name))
    trace = pd.concat(traces, ignore_index=True)
    budgets = budgets_up_to(args.budget)
    summary = summary_on_both_clocks(trace, studied, budgets, args.workers)
    write_text_atomically(out / "summary_by_task.csv", summary.to_csv(index=False))
    default = label(args.setting, default_value)
    chosen = choose(summary[summary["task"].isin(choice_tasks)], default, args.by)

    command = shlex.join(["python", *sys.argv])
    parts = [f"# {args.strategy}: {args.setting} chosen on some tasks, reported on others\n\nCommand: `{command}`\n\n"
             f"Values {', '.join(repr(json.loads(text)) for text in values)} (the default: {default_value!r}); "
             f"{args.seeds} seeds, budget {args.budget} unique evaluations, deterministic replay. The rule, fixed "
             f"before any run: on the choice tasks, the lowest median over tasks of {CRITERIA[args.by][1]} to 0.99 "
             "of the optimum; a tie goes to the higher mean score, then to the default.",
             f"## The choice: {chosen}\n\nOn the {len(choice_tasks)} tasks of {', '.join(args.choose_on)}. "
             + pairwise(summary[summary["task"].isin(choice_tasks)], chosen, default, args.by),
             *tables(summary, trace, choice_tasks, budgets, chosen, default),
             *per_kernel(summary, trace, args.choose_on, kernels, budgets, chosen, default),
             f"## Reported on the {len(report_tasks)} tasks of {', '.join(args.report_on)}\n\nThese tasks played no "
             "part in the choice. " + pairwise(summary[summary["task"].isin(report_tasks)], chosen, default, args.by),
             *tables(summary, trace, report_tasks, budgets, chosen, default),
             *per_kernel(summary, trace, args.report_on, kernels, budgets, chosen, default)]
    text = "\n\n".join(parts) + "\n"
    write_text_atomically(out / "summary.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
