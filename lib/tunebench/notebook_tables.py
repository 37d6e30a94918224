"""Tables of the notebooks: a replay study's methodology, overview and overhead tables, and the one look every
notebook's tables share (`table_style`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import pandas as pd

from tunebench.plots import check_kernel_tasks

if TYPE_CHECKING:
    from pandas.io.formats.style import Styler


def _number(value: float, digits: int) -> str:
    return "∞" if not np.isfinite(value) else f"{value:.{digits}f}"


def _with_interval(median: float, low: float, high: float, digits: int) -> str:
    return f"{_number(median, digits)} [{_number(low, digits)}, {_number(high, digits)}]"


def table_cell(value: object) -> str:
    """A table cell as a reader wants it: a float to 4 significant digits (0.978, 11.7, 184; 0.0276), an infinity
    (a target never reached) as ∞, a missing value empty; anything else as str."""
    if isinstance(value, (float, np.floating)):
        if np.isnan(value):
            return ""
        return "∞" if np.isinf(value) else f"{value:.4g}"
    return str(value)


def table_style(table: pd.DataFrame, formats: Mapping[str, str] | None = None, wrap: Sequence[str] = ()) -> Styler:
    """The notebooks' one look for tables: no index, cells on one line but for the `wrap` columns (long text, such as
    a config), numbers to 4 significant digits (`table_cell`) unless `formats` gives a column its own."""
    formats = dict(formats or {})
    style = table.style.format(table_cell, subset=[column for column in table if column not in formats])
    for column, text in formats.items():
        if column in table:
            style = style.format(text, subset=[column])
    style = style.hide(axis="index")
    style = style.set_table_styles([{"selector": "td", "props": "white-space: nowrap"},
                                    {"selector": "th", "props": "max-width: 9em; overflow-wrap: anywhere"}])
    wrapped = [column for column in wrap if column in table]
    # !important: the table-wide nowrap rule above is the more specific selector
    return (style.set_properties(subset=wrapped, **{"white-space": "normal !important", "min-width": "24em",
                                                    "text-align": "left"})
            if wrapped else style)


def methodology_table(summary: pd.DataFrame, *, kind: str = "evals", tasks: Sequence[str] | None = None,
                      strategies: Sequence[str] | None = None) -> pd.DataFrame:
    """`metrics.summarize` output as readable text: per (task, strategy), medians over seeds with their intervals,
    tasks in turn; tasks and strategies in the given orders (default: as in `summary`).

    kind="evals": evaluations to each target, success at the largest budget, fraction of optimum at each budget,
    mean score; kind="seconds": simulated seconds to each target and the mean score over time.
    """
    targets = sorted({column.split("_")[-1] for column in summary.columns
                      if column.startswith("evals_to_") and not column.endswith(("_low", "_high"))}, key=float)
    budgets = sorted(int(column.split("_")[-1]) for column in summary.columns if column.startswith("fraction_at_"))
    task_order = {name: index for index, name in enumerate(tasks or dict.fromkeys(summary["task"]))}
    strategy_order = {name: index for index, name in enumerate(strategies or dict.fromkeys(summary["strategy"]))}
    ordered = summary.assign(_task=summary["task"].map(task_order), _strategy=summary["strategy"].map(strategy_order))
    ordered = ordered.sort_values(["_task", "_strategy"], kind="stable")
    rows = []
    for row in ordered.to_dict("records"):
        out: dict[str, object] = {"task": row["task"], "strategy": row["strategy"]}
        if kind == "evals":
            for target in targets:
                out[f"evals to {target}"] = _with_interval(row[f"evals_to_{target}"], row[f"evals_to_{target}_low"],
                                                           row[f"evals_to_{target}_high"], 0)
            out[f"seeds at {targets[-1]} by {budgets[-1]}"] = f"{row[f'success_{targets[-1]}']:.0%}"
            for budget in budgets:
                out[f"fraction at {budget}"] = f"{row[f'fraction_at_{budget}']:.3f}"
            out["mean score"] = _with_interval(row["mean_score"], row["mean_score_low"], row["mean_score_high"], 2)
        elif kind == "seconds":
            for target in targets:
                out[f"seconds to {target}"] = _with_interval(row[f"seconds_to_{target}"],
                                                             row[f"seconds_to_{target}_low"],
                                                             row[f"seconds_to_{target}_high"], 1)
            if "mean_score_time" in row:
                out["mean score over time"] = _with_interval(row["mean_score_time"], row["mean_score_time_low"],
                                                             row["mean_score_time_high"], 2)
        else:
            raise ValueError(f"kind must be 'evals' or 'seconds', got {kind!r}")
        rows.append(out)
    return pd.DataFrame(rows)


def overview_table(summary: pd.DataFrame, by_kernel: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """Per strategy, over tasks, as text: the median over tasks of the per-task medians (fraction of optimum at each
    budget, evaluations and seconds to the highest target; ∞: not reached on half the tasks), of the expected
    seconds to it with restarts (`metrics.expected_running_time`), the share of runs that reach it, and the median
    of the mean score (over evaluations and, where summarized, over time), best mean score first. With `by_kernel`
    (kernel -> its task names, as `study.tasks_by_kernel`), the same over each kernel's tasks alone, a block of rows
    per kernel."""
    if by_kernel is not None:
        check_kernel_tasks(by_kernel, summary["task"])
        table = pd.concat([overview_table(summary[summary["task"].isin(names)]).assign(kernel=kernel)
                           for kernel, names in by_kernel.items()], ignore_index=True)
        return table[["kernel", *table.columns.drop("kernel")]]
    budgets = sorted(int(column.split("_")[-1]) for column in summary.columns if column.startswith("fraction_at_"))
    target = max((column.split("_")[-1] for column in summary.columns
                  if column.startswith("evals_to_") and not column.endswith(("_low", "_high"))), key=float)
    grouped = summary.groupby("strategy", sort=False)
    table = pd.DataFrame({"tasks": grouped.size()})
    for budget in budgets:
        table[f"fraction at {budget}"] = grouped[f"fraction_at_{budget}"].median().map(lambda v: f"{v:.3f}")
    table[f"evals to {target}"] = grouped[f"evals_to_{target}"].median().map(lambda v: _number(v, 0))
    table[f"s to {target}"] = grouped[f"seconds_to_{target}"].median().map(lambda v: _number(v, 1))
    table[f"s to {target}, restarted when it stops"] = grouped[f"ert_seconds_to_{target}"].median().map(
        lambda v: _number(v, 1))
    table[f"runs reaching {target}"] = grouped[f"success_{target}"].mean().map(lambda v: f"{v:.0%}")
    score = grouped["mean_score"].median()
    table["mean score"] = score.map(lambda v: f"{v:.2f}")
    if "mean_score_time" in summary:
        table["mean score over time"] = grouped["mean_score_time"].median().map(lambda v: f"{v:.2f}")
    return table.loc[score.sort_values(ascending=False).index].reset_index()


def overhead_table(trace: pd.DataFrame) -> pd.DataFrame:
    """Per strategy, medians over runs: asks per run, configs per ask, the strategy's own CPU time per ask, and
    its share of the run's simulated time (which charges that CPU time)."""
    per_run = trace.groupby(["strategy", "task", "seed"], sort=False).agg(
        asks=("batch", "max"), evaluations=("eval_index", "max"), strategy_s=("strategy_s", "max"),
        time_s=("time_s", "max"))
    per_run["configs per ask"] = per_run["evaluations"] / per_run["asks"]
    per_run["CPU ms per ask"] = 1e3 * per_run["strategy_s"] / per_run["asks"]
    per_run["share of simulated time"] = per_run["strategy_s"] / per_run["time_s"]
    table = per_run.groupby("strategy", sort=False)[["asks", "configs per ask", "CPU ms per ask",
                                                      "share of simulated time"]].median()
    return table.rename(columns={"asks": "asks per run"}).reset_index()
