"""Figures and tables of the notebooks: best-so-far traces (replayed and live), PCA of sampled configs, failures,
search-space views, the roofline, efficiency CDFs of config prediction; and `StudyPlan`, the replay study that
strategy_comparison runs and sampled_configs reuses."""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import LogNorm
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, PercentFormatter

from tunebench import metrics
from tunebench.dataset_summary import (FAILURE_STATUSES, best_per_shape, best_with_value_fixed,
                                       failure_shares_by_value, relative_latencies, shape_label, spread_shapes,
                                       varying_parameters)
from tunebench.measure.replay import MODES as REPLAY_MODES
from tunebench.measure.result import Status

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from pandas.io.formats.style import Styler

    from tunebench.measure.dataset import Dataset
    from tunebench.space import Space
    from tunebench.study import Task

CONFIDENCE = 0.95
RANDOM_LABEL = "random search, expected (closed form, same budget)"
RANDOM_STYLE = {"color": "0.15", "linestyle": "--", "linewidth": 1.4}
FRACTION_LABEL = "fraction of optimum\n(optimum latency / best so far)"
PANEL_WIDTH, PANEL_HEIGHT = 4.3, 3.2  # inches per small multiple
# A bandwidth roof where the dataset's provenance holds no measured one: bytes/s and where the number comes from.
DATASHEET_BANDWIDTH = {"NVIDIA H100 80GB HBM3": (3.35e12, "H100 SXM datasheet HBM3 bandwidth")}
# The provenance key under which a measured memory bandwidth (bytes/s) would be recorded.
MEASURED_BANDWIDTH_KEY = "memory_bandwidth_bytes_per_s"
OPTIMUM_COLOR = "#d62728"
LATENCY_CMAP = "viridis_r"  # the fastest configs bright
# CK Tile's dispatcher, published (fp16 on gfx950, their protocol and candidates): P10 and min efficiency.
CK_MARKS = {"CK P10": 0.9805, "CK min": 0.9545}


def strategy_colors(strategies: Sequence[str]) -> dict[str, tuple]:
    """One colour per strategy, in the given order, from the shared colour-blind palette."""
    palette = sns.color_palette("colorblind", max(len(strategies), 1))
    return dict(zip(strategies, palette))


def _strategies_of(trace: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(trace["strategy"]))


def _grid(count: int, col_wrap: int, *, sharex: bool | str = False, sharey: bool | str = False,
          extra_height: float = 0.0) -> tuple[Figure, list[Axes]]:
    """`count` panels in rows of `col_wrap`; unused panels removed."""
    cols = max(1, min(col_wrap, count))
    rows = math.ceil(count / cols)
    figure, axes = plt.subplots(rows, cols, figsize=(PANEL_WIDTH * cols, PANEL_HEIGHT * rows + extra_height),
                                squeeze=False, sharex=sharex, sharey=sharey, layout="constrained")
    flat = list(axes.ravel())
    for ax in flat[count:]:
        ax.remove()
    return figure, flat[:count]


# -- best so far relative to the optimum --------------------------------------------------------------------------

def _median_band(matrix: np.ndarray, band: str, confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Median over rows and a band: "ci" the order-statistic CI of the median, "quartiles" the 25-75 % range.

    Also the band's coverage (for "ci": exact, from `metrics.median_ci_ranks`; for "quartiles": 0.5).
    """
    median = np.median(matrix, axis=0)
    if band == "quartiles":
        return median, np.quantile(matrix, 0.25, axis=0), np.quantile(matrix, 0.75, axis=0), 0.5
    if band != "ci":
        raise ValueError(f"unknown band {band!r}; allowed: 'ci', 'quartiles'")
    low, high, coverage = metrics.median_ci_ranks(matrix.shape[0], confidence)
    ordered = np.sort(matrix, axis=0)
    return median, ordered[low - 1], ordered[high - 1], coverage


def band_label(band: str, coverage: float, over: str) -> str:
    """What the shaded band is, for legends and captions."""
    if band == "quartiles":
        return f"band: 25–75 % of {over}"
    if coverage < CONFIDENCE:
        return f"band: full range of {over} (too few for a {CONFIDENCE:.0%} CI; covers {coverage:.0%})"
    return f"band: {CONFIDENCE:.0%} CI of the median over {over} (order statistics)"


def fraction_curves(trace: pd.DataFrame, optima: Mapping[str, float], *, over: str = "evaluations",
                    budget: int | None = None, time_unit_s: Mapping[str, float] | None = None,
                    points: int = metrics.TIME_GRID_POINTS, band: str = "ci",
                    confidence: float = CONFIDENCE) -> pd.DataFrame:
    """Fraction of optimum of the best so far, median over seeds with a band, per (strategy, task) and x.

    over="evaluations": x = 1..budget unique evaluations (default: the longest trace). over="seconds": x on a
    log-spaced grid of simulated seconds from the task's first result to its last; with `time_unit_s` (seconds
    per task) x is time in that unit, on one grid shared by every task. Columns: strategy, task, x, median, low,
    high, seeds, coverage.
    """
    if over not in ("evaluations", "seconds"):
        raise ValueError(f"over must be 'evaluations' or 'seconds', got {over!r}")
    frame = trace.sort_values(["strategy", "task", "seed", "eval_index"], kind="stable")
    if over == "evaluations":
        budget = int(budget or frame["eval_index"].max())
    times = frame.groupby("task")["time_s"]
    unit = {task: 1.0 for task in times.groups} if time_unit_s is None else time_unit_s
    last = (times.max() / pd.Series(unit)).dropna()
    first = np.maximum((times.min() / pd.Series(unit)).dropna(), last * 1e-6)  # a log grid starts above 0
    shared = np.geomspace(first.min(), last.max(), points) if time_unit_s is not None else None
    rows = []
    for (strategy, task), group in frame.groupby(["strategy", "task"], sort=False):
        optimum = float(optima[task])
        runs = [run for _, run in group.groupby("seed", sort=True)]
        if over == "evaluations":
            x = np.arange(1, budget + 1, dtype=float)
            matrix = np.stack([metrics.fraction_curve_over_evaluations(run["best_ms"].to_numpy(), optimum, budget)
                               for run in runs])
        else:
            x = shared if shared is not None else np.geomspace(first[task], last[task], points)
            matrix = np.stack([metrics.fraction_curve_over_time(run["best_ms"].to_numpy(), run["time_s"].to_numpy(),
                                                                optimum, x * unit[task]) for run in runs])
        median, low, high, coverage = _median_band(matrix, band, confidence)
        rows.append(pd.DataFrame({"strategy": strategy, "task": task, "x": x, "median": median, "low": low,
                                  "high": high, "seeds": len(runs), "coverage": coverage}))
    return pd.concat(rows, ignore_index=True)


def random_curve(latencies: np.ndarray, optimum_ms: float, x: np.ndarray, *, over: str = "evaluations",
                 seconds_per_evaluation: float | None = None, budget: int | None = None) -> np.ndarray:
    """Random search's expected fraction of optimum at each x, exactly (`metrics.random_search_expected_fraction`).

    x counts evaluations (integers from 1), or simulated seconds given `seconds_per_evaluation`: random search
    then holds floor(x / seconds_per_evaluation) results, at most `budget` (the strategies' budget) and at most
    the space size.
    """
    latencies = np.asarray(latencies, dtype=float)
    cap = latencies.size if budget is None else min(budget, latencies.size)
    if over == "evaluations":
        draws = np.minimum(np.asarray(x, dtype=int), cap)
    elif seconds_per_evaluation is None or not seconds_per_evaluation > 0:
        raise ValueError("random search over seconds needs the task's positive seconds_per_evaluation")
    else:
        draws = np.clip(np.floor(np.asarray(x, dtype=float) / seconds_per_evaluation + 1e-9), 0, cap).astype(int)
    return np.asarray(metrics.random_search_expected_fraction(latencies, optimum_ms, draws), dtype=float)


def _draw_curves(ax: Axes, curves: pd.DataFrame, colors: Mapping[str, tuple]) -> None:
    for strategy, curve in curves.groupby("strategy", sort=False):
        ax.fill_between(curve["x"], curve["low"], curve["high"], color=colors[strategy], alpha=0.12, linewidth=0)
        ax.plot(curve["x"], curve["median"], color=colors[strategy], linewidth=1.6, label=strategy)


def _x_label(over: str, normalized: bool = False) -> str:
    if over == "evaluations":
        return "unique evaluations (count, log scale)"
    if normalized:
        return "simulated time / task's seconds per random evaluation\n(evaluations' worth of time, log scale)"
    return "simulated time (s, log scale)"


def _finish_fraction_axes(ax: Axes, floor: float) -> None:
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.set_ylim(floor, 1.02)
    ax.axhline(1.0, color="0.5", linewidth=0.8)


def _y_floor(medians: Sequence[np.ndarray]) -> float:
    """A lower y limit that shows where the medians climb rather than their first, near-zero values: below the
    lowest positive median at 5 % of the way along each curve, in steps of 0.1."""
    early = [values[values > 0][len(values[values > 0]) // 20] for values in map(np.asarray, medians)
             if (values > 0).any()]
    return max(0.0, math.floor(min(early, default=0.0) * 10) / 10 - 0.05)


def _legend(figure: Figure, colors: Mapping[str, tuple], band: str) -> None:
    handles = [Line2D([], [], color=color, linewidth=2, label=strategy) for strategy, color in colors.items()]
    handles.append(Line2D([], [], label=RANDOM_LABEL, **RANDOM_STYLE))
    handles.append(Patch(facecolor="0.6", alpha=0.35, label=band))
    figure.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), frameon=False)


def _budgets(trace: pd.DataFrame) -> pd.Series:
    return trace.groupby("task")["eval_index"].max()


def plot_fraction_per_task(trace: pd.DataFrame, optima: Mapping[str, float], latencies: Mapping[str, np.ndarray], *,
                           over: str = "evaluations", seconds_per_evaluation: Mapping[str, float] | None = None,
                           col_wrap: int = 3, band: str = "ci") -> Figure:
    """Small multiples, one per task: median over seeds of the fraction of optimum with a band, one line per
    strategy, and random search's expectation with the same budget dashed; against unique evaluations or
    simulated seconds (which needs `seconds_per_evaluation`, per task, to place random search)."""
    if over == "seconds" and seconds_per_evaluation is None:
        raise ValueError("over='seconds' needs seconds_per_evaluation to place random search on the clock")
    curves = fraction_curves(trace, optima, over=over, band=band)
    colors = strategy_colors(_strategies_of(trace))
    budgets = _budgets(trace)
    tasks = list(dict.fromkeys(trace["task"]))  # the study's order
    figure, axes = _grid(len(tasks), col_wrap, sharey=True, extra_height=0.9)
    medians = []
    for ax, task in zip(axes, tasks):
        task_curves = curves[curves["task"] == task]
        _draw_curves(ax, task_curves, colors)
        x = np.sort(task_curves["x"].unique())
        baseline = random_curve(latencies[task], optima[task], x, over=over, budget=int(budgets[task]),
                                seconds_per_evaluation=None if seconds_per_evaluation is None
                                else seconds_per_evaluation[task])
        ax.plot(x, baseline, **RANDOM_STYLE)
        medians += [curve["median"].to_numpy() for _, curve in task_curves.groupby("strategy")] + [baseline]
        ax.set_title(task, fontsize="medium")
        ax.set_xlabel(_x_label(over))
    floor = _y_floor(medians)
    for ax in axes:
        _finish_fraction_axes(ax, floor)
    for ax in axes[::max(1, min(col_wrap, len(axes)))]:
        ax.set_ylabel(FRACTION_LABEL)
    seeds = int(curves["seeds"].max())
    label = band_label(band, float(curves["coverage"].min()), f"{seeds} seeds")
    what = "unique evaluations" if over == "evaluations" else "simulated seconds"
    figure.suptitle(f"Best so far relative to the optimum against {what}, per task: median over {seeds} seeds")
    _legend(figure, colors, label)
    return figure


def plot_fraction_aggregated(trace: pd.DataFrame, optima: Mapping[str, float], latencies: Mapping[str, np.ndarray],
                             seconds_per_evaluation: Mapping[str, float],
                             by_kernel: Mapping[str, Sequence[str]] | None = None) -> Figure:
    """Over all tasks: the median over tasks of each task's median over seeds, band 25-75 % of tasks; left
    against unique evaluations, right against simulated time in units of each task's seconds per random
    evaluation (tasks differ a hundredfold in seconds, so raw seconds cannot be pooled). With `by_kernel` (kernel ->
    its task names, as `study.tasks_by_kernel`), a row of the two panels per kernel, over its tasks alone."""
    colors = strategy_colors(_strategies_of(trace))
    budgets = _budgets(trace)
    tasks = list(dict.fromkeys(trace["task"]))
    if by_kernel is not None:
        _check_tasks(by_kernel, trace["task"])
    groups = {"all": tasks} if by_kernel is None else by_kernel
    figure, axes = plt.subplots(len(groups), 2, figsize=(2 * PANEL_WIDTH + 1.5, PANEL_HEIGHT * len(groups) + 1.3),
                                sharey=True, squeeze=False, layout="constrained")
    medians = []
    for column, over in enumerate(("evaluations", "seconds")):
        unit = seconds_per_evaluation if over == "seconds" else None
        per_task = fraction_curves(trace, optima, over=over, time_unit_s=unit)
        for ax, (kernel, members) in zip(axes[:, column], groups.items()):
            pooled = per_task[per_task["task"].isin(members)].groupby(["strategy", "x"], sort=False)["median"]
            curves = pd.DataFrame({"median": pooled.median(), "low": pooled.quantile(0.25),
                                   "high": pooled.quantile(0.75)}).reset_index()
            _draw_curves(ax, curves, colors)
            x = np.sort(curves["x"].unique())
            baseline = np.median([random_curve(latencies[task], optima[task], x, over=over, seconds_per_evaluation=1.0,
                                               budget=int(budgets[task])) for task in members], axis=0)
            ax.plot(x, baseline, **RANDOM_STYLE)
            ax.set_xlabel(_x_label(over, normalized=True))
            against = "against unique evaluations" if over == "evaluations" else "against simulated time"
            tasks_text = f"{len(members)} task{'s' if len(members) > 1 else ''}"
            ax.set_title(against if by_kernel is None else f"{kernel} ({tasks_text})\n{against}", fontsize="medium")
            medians += [curve["median"].to_numpy() for _, curve in curves.groupby("strategy")] + [baseline]
    floor = _y_floor(medians)
    for ax in axes.ravel():
        _finish_fraction_axes(ax, floor)
    for ax in axes[:, 0]:
        ax.set_ylabel(FRACTION_LABEL)
    seeds = int(trace.groupby(["strategy", "task"])["seed"].nunique().max())
    if by_kernel is None:
        figure.suptitle(f"Over {len(tasks)} tasks: median over tasks of the per-task medians over {seeds} seeds")
        band = band_label("quartiles", 0.5, f"the {len(tasks)} tasks' medians")
    else:
        figure.suptitle(f"Per kernel: median over its tasks of the per-task medians over {seeds} seeds")
        band = band_label("quartiles", 0.5, "the kernel's tasks' medians")
    _legend(figure, colors, band)
    return figure


def _check_tasks(by_kernel: Mapping[str, Sequence[str]], tasks: pd.Series) -> None:
    known = set(tasks)
    unknown = [name for names in by_kernel.values() for name in names if name not in known]
    if unknown:
        raise ValueError(f"tasks {unknown} of by_kernel are not in the study; its tasks: {', '.join(tasks.unique())}")


def plot_live_traces(traces: Mapping[str, pd.DataFrame], col_wrap: int = 5, mark: float = 0.99) -> Figure:
    """Live searches on the wall clock (`benchmarks/live_search.py` traces, by title): per shape, each strategy's best
    so far as a fraction of the run's best (the fastest config any strategy found there), against seconds from the
    first ask; dotted at `mark`."""
    colors = strategy_colors(list(dict.fromkeys(name for trace in traces.values() for name in trace["strategy"])))
    figure, axes = _grid(len(traces), col_wrap, sharey=True, extra_height=0.4)
    for ax, (title, trace) in zip(axes, traces.items()):
        best = trace["best_ms"].min()
        for strategy, part in trace.groupby("strategy", sort=False):
            ax.step(part["time_s"], best / part["best_ms"], where="post", color=colors[strategy], linewidth=1.6)
        ax.axhline(mark, color="0.5", linestyle=":", linewidth=0.8)
        ax.set(title=title, xlabel="wall seconds from the first ask", xlim=(0, None), ylim=(0.5, 1.01))
    axes[0].set_ylabel("run's best / best so far")
    handles = [Line2D([], [], color=color, linewidth=2, label=strategy) for strategy, color in colors.items()]
    figure.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
    return figure


# -- PCA of the sampled configs ------------------------------------------------------------------------------------

def config_key_text(key: Sequence[object]) -> str:
    """A config key as the trace table writes it: values comma-joined."""
    return ",".join(map(str, key))


@dataclass(frozen=True)
class ConfigPCA:
    """Two principal components of a task's whole valid space, standardized encoding (`Space.encode`)."""

    keys: tuple[str, ...]  # comma-joined key of each config of the space, in `Space.enumerate` order
    coordinates: np.ndarray  # (configs, 2)
    explained: tuple[float, float]  # share of the variance each component explains

    def locate(self, config_keys: Sequence[str]) -> np.ndarray:
        """Rows of `coordinates` of the given comma-joined keys; a key outside the space is an error."""
        index = {key: row for row, key in enumerate(self.keys)}
        missing = [key for key in config_keys if key not in index]
        if missing:
            raise ValueError(f"configs {missing[:3]} are not in the task's space ({len(self.keys)} configs)")
        return np.array([index[key] for key in config_keys], dtype=int)


def config_pca(space: Space) -> ConfigPCA:
    """Standardize the encoding of every valid config of `space`, fit a 2-component PCA on all of them, and
    project them; sampled configs are then located in this one fit, so every strategy shares the axes."""
    from sklearn.decomposition import PCA
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    configs = space.enumerate()
    pipeline = make_pipeline(StandardScaler(), PCA(n_components=2, random_state=0))
    coordinates = pipeline.fit_transform(space.encode(configs))
    explained = pipeline[-1].explained_variance_ratio_
    return ConfigPCA(tuple(config_key_text(space.key(config)) for config in configs), coordinates,
                     (float(explained[0]), float(explained[1])))


@dataclass(frozen=True)
class _SampledView:
    """What both PCA figures draw: the task's PCA, each config's recorded latency, and the sampled rows."""

    task: str
    pca: ConfigPCA
    latency_ms: dict[str, float]  # by comma-joined key; NaN for a failed config
    rows: pd.DataFrame  # the trace rows drawn
    strategies: list[str]  # panel order
    which_seeds: str

    @property
    def optimum_xy(self) -> np.ndarray:
        finite = [key for key in self.pca.keys if np.isfinite(self.latency_ms[key])]
        return self.pca.coordinates[self.pca.locate([min(finite, key=self.latency_ms.__getitem__)])[0]]

    def coordinates_of(self, strategy: str) -> tuple[list[str], np.ndarray]:
        keys = self.rows.loc[self.rows["strategy"] == strategy, "config_key"].tolist()
        return keys, self.pca.coordinates[self.pca.locate(keys)]


def _sampled_view(trace: pd.DataFrame, task: Task, dataset: Dataset | None, strategies: Sequence[str] | None,
                  seed: int) -> _SampledView:
    from tunebench.study import open_dataset

    rows = trace[trace["task"] == task.name]
    if rows.empty:
        raise ValueError(f"task {task.name!r} is not in the trace; its tasks: {sorted(trace['task'].unique())}")
    if seed >= 0:
        rows = rows[rows["seed"] == seed]
        if rows.empty:
            raise ValueError(f"seed {seed} is not in the trace of {task.name!r}")
    order = list(strategies or _strategies_of(rows))
    unknown = [name for name in order if name not in set(rows["strategy"])]
    if unknown:
        raise ValueError(f"strategies {unknown} have no runs on {task.name!r}; it has {_strategies_of(rows)}")
    dataset = dataset or open_dataset(task.dataset)
    records = dataset.task(task.shape)
    keys = (config_key_text(key) for key in records[list(dataset.parameter_names)].itertuples(index=False, name=None))
    return _SampledView(task.name, config_pca(dataset.space(task.shape)), dict(zip(keys, records["latency_ms"])),
                        rows[rows["strategy"].isin(order)], order,
                        f"seed {seed}" if seed >= 0 else "all seeds pooled")


def _pca_grid(view: _SampledView, col_wrap: int) -> tuple[Figure, list[Axes]]:
    """One panel per strategy, the whole space in light grey behind, the optimum as a red star on top."""
    figure, axes = _grid(len(view.strategies), col_wrap, sharex=True, sharey=True, extra_height=0.9)
    cols = max(1, min(col_wrap, len(axes)))
    for index, (ax, strategy) in enumerate(zip(axes, view.strategies)):
        ax.scatter(*view.pca.coordinates.T, s=5, color="0.86", linewidths=0, rasterized=True)
        ax.scatter(*view.optimum_xy, marker="*", s=180, color=OPTIMUM_COLOR, edgecolors="white", linewidths=0.8,
                   zorder=5)
        ax.set_title(f"{strategy} ({int((view.rows['strategy'] == strategy).sum())} configs)", fontsize="medium")
        if index + cols >= len(axes):  # bottom panel of its column
            ax.set_xlabel(f"PC 1, unitless ({view.pca.explained[0]:.0%} of variance)")
            ax.xaxis.set_tick_params(labelbottom=True)
        if index % cols == 0:
            ax.set_ylabel(f"PC 2, unitless ({view.pca.explained[1]:.0%} of variance)")
    return figure, axes


def _pca_legend(figure: Figure, view: _SampledView, evaluated: Line2D) -> None:
    handles = [Line2D([], [], marker="o", linestyle="", color="0.8",
                      label=f"whole valid space ({len(view.pca.keys)} configs)"), evaluated,
               Line2D([], [], marker="*", linestyle="", markersize=13, color=OPTIMUM_COLOR, label="optimum")]
    figure.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False)


def plot_pca_by_strategy(trace: pd.DataFrame, task: Task, dataset: Dataset | None = None, *,
                         strategies: Sequence[str] | None = None, seed: int = 0, col_wrap: int = 3) -> Figure:
    """One panel per strategy: the configs it evaluated on `task` (one seed; -1 pools all) in its colour, on
    the PCA of the task's whole valid space drawn in light grey."""
    view = _sampled_view(trace, task, dataset, strategies, seed)
    figure, axes = _pca_grid(view, col_wrap)
    colors = strategy_colors(_strategies_of(trace))
    for ax, strategy in zip(axes, view.strategies):
        ax.scatter(*view.coordinates_of(strategy)[1].T, s=14, color=colors[strategy], alpha=0.75, linewidths=0)
    figure.suptitle(f"Configs each strategy evaluated on {view.task} ({view.which_seeds}), on a PCA of the "
                    "whole space")
    _pca_legend(figure, view, Line2D([], [], marker="o", linestyle="", color="0.3",
                                     label="evaluated (colour: strategy)"))
    return figure


def plot_pca_by_latency(trace: pd.DataFrame, task: Task, dataset: Dataset | None = None, *,
                        strategies: Sequence[str] | None = None, seed: int = 0, col_wrap: int = 3) -> Figure:
    """As `plot_pca_by_strategy`, the evaluated configs coloured by latency / optimum (log colour scale),
    failed configs as black crosses."""
    view = _sampled_view(trace, task, dataset, strategies, seed)
    figure, axes = _pca_grid(view, col_wrap)
    recorded = np.array(list(view.latency_ms.values()), dtype=float)
    optimum = float(np.nanmin(recorded))
    norm = LogNorm(1.0, max(float(np.nanmax(recorded)) / optimum, 1.01))
    for ax, strategy in zip(axes, view.strategies):
        keys, xy = view.coordinates_of(strategy)
        relative = np.array([view.latency_ms[key] for key in keys], dtype=float) / optimum
        ok = np.isfinite(relative)
        drawing_order = np.argsort(-relative[ok])  # fastest drawn last, on top
        ax.scatter(*xy[ok][drawing_order].T, c=relative[ok][drawing_order], cmap=LATENCY_CMAP, norm=norm, s=14,
                   linewidths=0)
        if (~ok).any():
            ax.scatter(*xy[~ok].T, marker="x", s=16, color="black", linewidths=0.9)
    colorbar = figure.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=LATENCY_CMAP), ax=axes, shrink=0.8, pad=0.01)
    colorbar.set_label("latency / optimum (log scale; 1 = optimum)")
    _times_formatter(colorbar.ax.yaxis)
    figure.suptitle(f"Configs each strategy evaluated on {view.task} ({view.which_seeds}), coloured by latency")
    failed = int((view.rows["status"] != Status.OK.value).sum())
    _pca_legend(figure, view, Line2D([], [], marker="x", linestyle="", color="black",
                                     label=f"evaluated, failed ({failed} here)"))
    return figure


# -- failures ------------------------------------------------------------------------------------------------------

def dataset_of_task(task: str) -> str:
    """The dataset part of a task name ("matmul_bfloat16_h100:1x4096x4096" -> "matmul_bfloat16_h100")."""
    return task.split(":", 1)[0]


def failure_shares(trace: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, strategy): evaluations, failed ones and their share (0 to 1), pooled over tasks and seeds."""
    frame = trace.assign(dataset=trace["task"].map(dataset_of_task), failed=trace["status"] != Status.OK.value)
    table = frame.groupby(["dataset", "strategy"], sort=False).agg(evaluations=("failed", "size"),
                                                                   failed=("failed", "sum")).reset_index()
    table["share"] = table["failed"] / table["evaluations"]
    return table


def plot_failure_share(trace: pd.DataFrame, latencies: Mapping[str, np.ndarray] | None = None) -> Figure:
    """Bars per dataset and strategy: the share of evaluations spent on failing configs; with `latencies` (per
    task, failures inf) also the share failing in the whole space, what random search would expect."""
    table = failure_shares(trace)
    strategies = _strategies_of(trace)
    datasets = list(dict.fromkeys(table["dataset"]))
    colors = strategy_colors(strategies)
    figure, ax = plt.subplots(figsize=(max(8.0, 1.0 + 0.5 * len(strategies) * len(datasets)), 4.6),
                              layout="constrained")
    sns.barplot(table, x="dataset", y="share", hue="strategy", order=datasets, hue_order=strategies,
                palette=colors, ax=ax, legend=False)
    width = 0.8
    for position, name in enumerate(datasets):
        if latencies is not None:
            shares = [float(np.mean(~np.isfinite(values))) for task, values in latencies.items()
                      if dataset_of_task(task) == name]
            if shares:
                ax.hlines(np.mean(shares), position - width / 2, position + width / 2, color="black",
                          linestyle="--", linewidth=1.2)
        if table.loc[table["dataset"] == name, "failed"].sum() == 0:
            ax.text(position, 0.0, "no failing evaluations", ha="center", va="bottom", fontsize="small",
                    color="0.3")
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_ylim(bottom=0, top=max(0.02, float(table["share"].max()) * 1.25,
                                  *(float(np.mean(~np.isfinite(v))) * 1.25 for v in (latencies or {}).values())))
    ax.set_xlabel("dataset")
    ax.set_ylabel("evaluations on failing configs (%)")
    ax.set_title("Share of each strategy's evaluations spent on configs that failed")
    handles = [Patch(color=colors[name], label=name) for name in strategies]
    if latencies is not None:
        handles.append(Line2D([], [], color="black", linestyle="--", label="share failing in the whole space"))
    # below the axes, so that a long name (a strategy's import path) takes no width from the bars
    figure.legend(handles=handles, loc="outside lower center", ncols=min(4, len(handles)), frameon=False)
    return figure


def search_ends(summary: pd.DataFrame, seconds_per_evaluation: Mapping[str, float], target: float = 0.99
                ) -> pd.DataFrame:
    """Per strategy, over the summary's tasks (`metrics.summarize`'s rows): how its runs end. The share that ended on
    their own before the budget; medians over tasks of the evaluations at a run's end and of its seconds there in
    evaluations' worth (over the task's seconds per evaluation: the tasks differ a hundredfold in what one costs); the
    share of runs ending at or above `target` of optimum."""
    lacking = sorted(set(summary["task"]) - set(seconds_per_evaluation))
    if lacking:
        raise ValueError(f"seconds_per_evaluation lacks tasks {lacking}")
    frame = summary.assign(run_cost=summary["run_seconds"] / summary["task"].map(seconds_per_evaluation))
    grouped = frame.groupby("strategy", sort=False)
    return pd.DataFrame({"ended on its own": grouped["ended_on_its_own"].mean(),
                         "evaluations at the end": grouped["run_evals"].median(),
                         "seconds at the end, in evaluations": grouped["run_cost"].median(),
                         f"runs ending at >= {target:g}": grouped[f"success_{target:g}"].mean()}).reset_index()


def plot_search_ends(summary: pd.DataFrame, seconds_per_evaluation: Mapping[str, float], target: float = 0.99
                     ) -> Figure:
    """How long each strategy's runs last and how often they end at `target` of optimum (`search_ends`), against
    evaluations and against seconds in evaluations' worth. Filled: most runs stopped on their own, an autotuner's
    own length; hollow: most were cut by the budget, which then sets their length."""
    table = search_ends(summary, seconds_per_evaluation, target)
    colors = strategy_colors(list(table["strategy"]))
    figure, axes = plt.subplots(1, 2, figsize=(2 * PANEL_WIDTH + 1.5, PANEL_HEIGHT + 0.6), sharey=True,
                                layout="constrained")
    success = table[f"runs ending at >= {target:g}"].to_numpy()
    own = table["ended on its own"].to_numpy() >= 0.5
    for ax, column in zip(axes, ("evaluations at the end", "seconds at the end, in evaluations")):
        for strategy, x, y, filled in zip(table["strategy"], table[column], success, own):
            ax.scatter(x, y, s=60, color=colors[strategy], facecolors=colors[strategy] if filled else "none",
                       linewidths=1.6)
        _label_points(ax, table[column].to_numpy(), success, list(table["strategy"]))
        ax.set_xlabel(f"{column} (median over tasks)")
    # evaluations on a linear axis from 0; seconds on a log one (a hundredfold apart between the strategies that
    # batch and those that ask one config at a time); both with room on the right for the labels
    axes[0].set_xlim(0, table["evaluations at the end"].max() * 1.3)
    axes[1].set_xscale("log")
    axes[1].set_xlim(table["seconds at the end, in evaluations"].min() / 1.3,
                     table["seconds at the end, in evaluations"].max() * 2.2)
    axes[1].xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axes[1].xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes[1].xaxis.set_minor_formatter(NullFormatter())
    axes[0].yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    axes[0].set_ylabel(f"runs ending at >= {target:g} of optimum")
    figure.suptitle("How long a search runs, and how often it ends near the optimum\n"
                    "filled: most runs stopped on their own; hollow: most were cut by the budget")
    return figure


# -- search-space views --------------------------------------------------------------------------------------------

def _new_axes(ax: Axes | None, rows: int) -> Axes:
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 1.2 + 0.45 * max(rows, 1)), layout="constrained")
    return ax


def _times_formatter(axis) -> None:
    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}×"))
    axis.set_minor_formatter(NullFormatter())


def plot_latency_distributions(dataset: Dataset, ax: Axes | None = None) -> Figure:
    """Box plot per shape of every valid config's latency relative to the shape's best (log scale)."""
    names = list(dataset.shape_names)
    ok = relative_latencies(dataset)
    frame = pd.DataFrame({"shape": [shape_label(shape) for shape in ok[names].itertuples(index=False, name=None)],
                          "relative": ok["relative"]})
    order = [shape_label(shape) for shape in sorted(set(ok[names].itertuples(index=False, name=None)))]
    ax = _new_axes(ax, len(order))
    sns.boxplot(frame, x="relative", y="shape", order=order, log_scale=True, fliersize=2, ax=ax)
    _times_formatter(ax.xaxis)
    ax.set_xlabel("latency / best latency of the shape (log scale)")
    ax.set_ylabel(f"shape ({'×'.join(names)})")
    ax.set_title("Valid configs: how far from the best")
    return ax.figure


def plot_parameter_effects(dataset: Dataset, col_wrap: int = 4) -> Figure:
    """One panel per parameter that varies: for each of its values, the latency / shape's best of every valid
    config with that value (box, pooled over shapes) and the best achievable with the value fixed (median over
    shapes): a value whose best stays at 1× is used by some optimum."""
    parameters = varying_parameters(dataset)
    ok = relative_latencies(dataset)
    figure, axes = _grid(len(parameters), col_wrap, sharey=True, extra_height=0.6)
    color = sns.color_palette()[0]
    for ax, name in zip(axes, parameters):
        values = sorted(ok[name].unique())
        positions = {value: index for index, value in enumerate(values)}
        groups = [ok.loc[ok[name] == value, "relative"].to_numpy() for value in values]
        ax.boxplot(groups, positions=range(len(values)), widths=0.6, showfliers=False, patch_artist=True,
                   boxprops={"facecolor": color, "alpha": 0.45, "edgecolor": "0.25"},
                   medianprops={"color": "0.1"}, whiskerprops={"color": "0.25"}, capprops={"color": "0.25"})
        best = best_with_value_fixed(dataset, name)
        ax.plot([positions[value] for value in best[name]], best["relative_best"], linestyle="", marker="D",
                markersize=5, color="#d62728", zorder=4)
        ax.set_yscale("log")
        ax.set_xticks(range(len(values)), [str(value) for value in values],
                      rotation=90 if len(values) > 6 else 0)
        ax.set_xlabel(f"{name} (value)")
        ax.set_title(name, fontsize="medium")
    _times_formatter(axes[0].yaxis)
    for ax in axes[::max(1, min(col_wrap, len(axes)))]:
        ax.set_ylabel("latency / best of the shape\n(log scale)")
    shapes = len(dataset.shapes())
    figure.suptitle(f"Effect of each parameter over {shapes} shape{'s' * (shapes != 1)}")
    handles = [Patch(facecolor=color, alpha=0.45, edgecolor="0.25",
                     label="valid configs with this value (box: quartiles; whiskers: 1.5 IQR; outliers hidden)"),
               Line2D([], [], linestyle="", marker="D", color="#d62728",
                      label="best with this value fixed (median over shapes)")]
    figure.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False)
    return figure


def plot_failures_by_parameter(dataset: Dataset, col_wrap: int = 4) -> Figure:
    """One panel per parameter that varies: per value, the share of recorded configs failing, stacked by status."""
    parameters = varying_parameters(dataset)
    statuses = [status for status in FAILURE_STATUSES
                if (dataset.measurements["status"] == status).any()]
    if not statuses:
        raise ValueError("the dataset records no failures; there is nothing to plot")
    colors = dict(zip(statuses, sns.color_palette("colorblind", len(FAILURE_STATUSES))[1:]))
    figure, axes = _grid(len(parameters), col_wrap, sharey=True, extra_height=0.6)
    for ax, name in zip(axes, parameters):
        table = failure_shares_by_value(dataset, name)
        bottom = np.zeros(len(table))
        for status in statuses:
            ax.bar(range(len(table)), table[status], bottom=bottom, color=colors[status], width=0.75)
            bottom += table[status].to_numpy()
        ax.set_xticks(range(len(table)), [str(value) for value in table[name]],
                      rotation=90 if len(table) > 6 else 0)
        ax.set_xlabel(f"{name} (value)")
        ax.set_title(name, fontsize="medium")
    axes[0].yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    for ax in axes[::max(1, min(col_wrap, len(axes)))]:
        ax.set_ylabel("recorded configs failing (%)")
    total = (dataset.measurements["status"] != Status.OK.value).mean()
    figure.suptitle(f"Where the failures lie: {total:.1%} of all recorded configs failed")
    figure.legend(handles=[Patch(color=colors[status], label=status) for status in statuses],
                  loc="outside lower center", ncols=len(statuses), frameon=False)
    return figure


def plot_best_vs_vendor(dataset: Dataset, ax: Axes | None = None) -> Figure:
    """Bars per shape: the best Triton config's speedup over the vendor library, labelled with both throughputs.

    A speedup rather than raw TFLOP/s keeps small, memory-bound shapes as readable as large ones.
    """
    best = best_per_shape(dataset)
    labels = [shape_label(shape) for shape in best[list(dataset.shape_names)].itertuples(index=False, name=None)]
    vendor_name = best["vendor_library"].dropna().iloc[0] if best["vendor_library"].notna().any() else "vendor"
    gemm = "tflops" in best
    triton_column, vendor_column, unit = ("tflops", "vendor_tflops", "TFLOP/s") if gemm else (
        "latency_ms", "vendor_ms", "ms")
    texts = [f"{row.speedup:.2f}× ({getattr(row, triton_column):.3g} vs {getattr(row, vendor_column):.3g} {unit})"
             if np.isfinite(row.speedup) else "no valid config or no vendor time" for row in best.itertuples()]
    ax = _new_axes(ax, len(labels))
    bars = ax.barh(range(len(labels)), best["speedup"].fillna(0.0), color=sns.color_palette()[0])
    for text in ax.bar_label(bars, labels=texts, padding=3, fontsize="small"):
        text.set_bbox({"facecolor": "white", "edgecolor": "none", "pad": 1})  # legible over the line at 1
    ax.axvline(1.0, color="0.3", linestyle="--", linewidth=1)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()  # first shape on top, as in the tables
    ax.margins(x=0.45)  # room for the bar labels
    ax.set_xlim(left=0)
    ax.set_xlabel(f"speedup over {vendor_name}\n(vendor latency / best Triton latency; > 1: Triton faster)")
    ax.set_ylabel(f"shape ({'×'.join(dataset.shape_names)})")
    ax.set_title(f"Best Triton config vs {vendor_name}")
    return ax.figure


def roofline_points(dataset: Dataset) -> pd.DataFrame:
    """Per GEMM shape: arithmetic intensity (FLOP/byte, `matmul.flops` / `matmul.bytes_moved`), and the TFLOP/s
    of the best Triton config and of the vendor library."""
    from tunebench.kernels import matmul

    if tuple(dataset.shape_names) != tuple(matmul.SHAPE_NAMES):
        raise ValueError(f"a roofline needs a GEMM dataset (shapes {matmul.SHAPE_NAMES}), "
                         f"not {dataset.shape_names}")
    best = best_per_shape(dataset)
    shapes = list(best[list(matmul.SHAPE_NAMES)].itertuples(index=False, name=None))
    flops = np.array([matmul.flops(tuple(map(int, shape))) for shape in shapes], dtype=float)
    moved = np.array([matmul.bytes_moved(tuple(map(int, shape)), dataset.dtype) for shape in shapes], dtype=float)
    return pd.DataFrame({"shape": [shape_label(shape) for shape in shapes], "intensity": flops / moved,
                         "triton_tflops": flops / (best["latency_ms"].to_numpy() * 1e-3) / 1e12,
                         "vendor_tflops": flops / (best["vendor_ms"].to_numpy() * 1e-3) / 1e12,
                         "vendor_library": best["vendor_library"]})


def bandwidth_roof(dataset: Dataset) -> tuple[float, str] | None:
    """The memory roof (bytes/s) and where it comes from: a measured value in the provenance, else the GPU's
    datasheet figure where `DATASHEET_BANDWIDTH` knows it, else None."""
    measured = dataset.provenance.get(MEASURED_BANDWIDTH_KEY)
    if measured:
        return float(measured), f"measured bandwidth ({MEASURED_BANDWIDTH_KEY} in the dataset provenance)"
    return DATASHEET_BANDWIDTH.get(dataset.provenance.get("gpu_name", dataset.gpu))


def plot_roofline(dataset: Dataset) -> Figure:
    """Best Triton config and vendor library per shape on a roofline (both axes log): compute roof = the best
    vendor TFLOP/s measured in the dataset, memory roof from `bandwidth_roof`."""
    points = roofline_points(dataset)
    vendor_name = points["vendor_library"].dropna().iloc[0] if points["vendor_library"].notna().any() else "vendor"
    triton_color, vendor_color = sns.color_palette()[0], sns.color_palette()[1]
    figure, ax = plt.subplots(figsize=(9.5, 5.6), layout="constrained")
    for row in points.itertuples():
        if np.isfinite(row.vendor_tflops):
            ax.plot([row.intensity] * 2, [row.triton_tflops, row.vendor_tflops], color="0.7", linewidth=1, zorder=1)
    ax.scatter(points["intensity"], points["triton_tflops"], s=42, color=triton_color, zorder=3,
               label="best Triton config")
    ax.scatter(points["intensity"], points["vendor_tflops"], s=42, marker="s", color=vendor_color, zorder=3,
               label=vendor_name)
    low, high = points["intensity"].min() / 1.6, points["intensity"].max() * 4
    intensity = np.geomspace(low, high, 200)
    peak = float(np.nanmax(points["vendor_tflops"]))
    ax.axhline(peak, color="0.2", linewidth=1.3, linestyle="-",
               label=f"compute roof {peak:.0f} TFLOP/s: best {vendor_name} in the dataset (measured vendor peak)")
    roof = bandwidth_roof(dataset)
    if roof is not None:
        bandwidth, source = roof
        slanted = bandwidth * intensity / 1e12
        ax.plot(intensity[slanted <= peak], slanted[slanted <= peak], color="0.2", linewidth=1.3, linestyle=":",
                label=f"memory roof {bandwidth / 1e12:.2f} TB/s: {source}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(top=peak * 1.8)
    markers = np.concatenate([points[["intensity", "triton_tflops"]].to_numpy(),
                              points[["intensity", "vendor_tflops"]].to_numpy()])
    _label_points(ax, points["intensity"].to_numpy(), points["triton_tflops"].to_numpy(), points["shape"].tolist(),
                  avoid=markers)
    ax.set_xlabel("arithmetic intensity (FLOP/byte; FLOP = 2MNK, bytes = element size × (MK + KN + MN))")
    ax.set_ylabel("throughput (TFLOP/s)")
    gpu = dataset.provenance.get("gpu_name", dataset.gpu)
    ax.set_title(f"Roofline: {dataset.kernel} {dataset.dtype} on {gpu}")
    figure.legend(loc="outside lower center", ncols=2, frameon=False, fontsize="small")
    return figure


def _label_points(ax: Axes, xs: np.ndarray, ys: np.ndarray, labels: Sequence[str], fontsize: float = 7.5,
                  avoid: np.ndarray | None = None) -> None:
    """Label each point to its right; a label that would overlap a label placed above it or a marker (`avoid`,
    data coordinates) moves down, joined to its point by a thin line, so that clustered points stay readable."""
    figure = ax.figure
    figure.canvas.draw()  # settle the layout: label positions are computed in display pixels
    pixels_per_point = figure.dpi / 72
    height = 1.3 * fontsize * pixels_per_point
    marker = 4 * pixels_per_point  # half a marker's size
    placed: list[tuple[float, float, float]] = []  # (left, right, centre y) of each label, in pixels
    if avoid is not None:
        avoid = avoid[np.all(np.isfinite(avoid), axis=1)]
        placed += [(x - marker, x + marker, y) for x, y in ax.transData.transform(avoid)]
    anchors = ax.transData.transform(np.column_stack([xs, ys]))
    for index in np.argsort(-anchors[:, 1]):
        if not np.all(np.isfinite(anchors[index])):
            continue
        x, y = anchors[index]
        left, right = x + 6 * pixels_per_point, x + (6 + 0.62 * fontsize * len(labels[index])) * pixels_per_point
        label_y = y
        while any(left < other_right and other_left < right and abs(label_y - other_y) < height
                  for other_left, other_right, other_y in placed):
            label_y -= height / 2
        placed.append((left, right, label_y))
        moved = abs(label_y - y) > height / 2
        text = ax.annotate(labels[index], (xs[index], ys[index]), xytext=(6, (label_y - y) / pixels_per_point),
                           textcoords="offset points", va="center", fontsize=fontsize, color="0.25",
                           arrowprops={"arrowstyle": "-", "color": "0.6", "linewidth": 0.6} if moved else None)
        text.set_in_layout(False)


# -- tables of a study ---------------------------------------------------------------------------------------------

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
        _check_tasks(by_kernel, summary["task"])
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


# -- the study two notebooks share -----------------------------------------------------------------------------------

def resolve_dataset(path: str | os.PathLike[str]) -> Path:
    """A dataset path as the notebooks take it: relative to the repository root (`../shared/...` reaches the
    shared folder beside it), or absolute."""
    from tunebench.report import repo_path

    return repo_path(path).resolve()


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
        from tunebench.study import tasks_of

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
        from tunebench.report import repo_path

        return repo_path(study_dir) / f"{self.name}.parquet"

    def run(self, study_dir: str | os.PathLike[str], workers: int | None = None) -> pd.DataFrame:
        """Run (or resume) the study with `study.run_study`, parallel over cores; the trace table, also written to
        `path(study_dir)`, with this plan beside it as `<name>.json`. Prints what was replayed and how long it took.
        In noisy mode each run's `best_ms` is the recorded median of its incumbent (`study.judged_by_recorded_medians`):
        what the config it would deploy runs at, not its luckiest draw."""
        from tunebench.files import write_text_atomically
        from tunebench.study import Budget, judged_by_recorded_medians, run_study

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


def shown_path(path: Path) -> str:
    """A path relative to the repository root where it lies inside it."""
    from tunebench.report import REPO_ROOT

    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def default_study_plan() -> tuple[StudyPlan, str]:
    """The plan and study_dir of the strategy_comparison notebook's defaults (read from its parameters cell)."""
    from tunebench.report import NOTEBOOK_DIR, read_parameters

    parameters = read_parameters(NOTEBOOK_DIR / "strategy_comparison.py")
    return StudyPlan.from_parameters(parameters), str(parameters["study_dir"])


def open_study(study: str) -> tuple[StudyPlan, pd.DataFrame, Path]:
    """A trace table and its plan: `study` is a trace parquet path (relative to the repository root), or "" for
    the study strategy_comparison writes with its defaults, which is run first if it is not there yet."""
    from tunebench.report import repo_path

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


def plot_efficiency_cdf(axis: Axes, curves: Mapping[str, np.ndarray], left: float) -> Axes:
    """One step curve per picker: the share of shapes whose efficiency is at or below x, from `left` to 1 (further
    right is better). The title counts the shapes left of the axis."""
    if not 0 < left < 1:
        raise ValueError(f"left must lie in (0, 1), got {left!r}")
    below = {}
    for label, efficiency in curves.items():
        values = np.sort(np.asarray(efficiency, dtype=float))
        axis.step(values, np.arange(1, len(values) + 1) / len(values), where="post", label=label)
        below[label] = int((values < left).sum())
    for name, value in CK_MARKS.items():
        axis.axvline(value, color="grey", linestyle=":", linewidth=1)
        axis.text(value, 0.02, name, rotation=90, color="grey", ha="right")
    counted = ", ".join(f"{label} {count}" for label, count in below.items() if count)
    axis.set(xlabel="efficiency (best latency / latency of the pick)", ylabel="share of shapes at or below",
             xlim=(left, 1.005),
             title=f"shapes below {left:.0%} (left of the axis): {counted}" if counted else "every shape is on the axis")
    axis.legend(loc="upper left")
    return axis
