"""Figures of the notebooks: best-so-far traces (replayed and live), PCA of sampled configs, failures and how
searches end, efficiency CDFs of config prediction, and the panel grid, colours and axis helpers the figure modules
share (`space_plots` draws one recorded space; `notebook_tables` holds the tables)."""

from __future__ import annotations

import math
from dataclasses import dataclass
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
from tunebench.measure.result import Status

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tunebench.measure.dataset import Dataset
    from tunebench.space import Space
    from tunebench.study import Task

CONFIDENCE = 0.95
RANDOM_LABEL = "random search, expected (closed form, same budget)"
RANDOM_STYLE = {"color": "0.15", "linestyle": "--", "linewidth": 1.4}
FRACTION_LABEL = "fraction of optimum\n(optimum latency / best so far)"
PANEL_WIDTH, PANEL_HEIGHT = 4.3, 3.2  # inches per small multiple
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


def panel_grid(count: int, col_wrap: int, *, sharex: bool | str = False, sharey: bool | str = False,
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
    figure, axes = panel_grid(len(tasks), col_wrap, sharey=True, extra_height=0.9)
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
        check_kernel_tasks(by_kernel, trace["task"])
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


def check_kernel_tasks(by_kernel: Mapping[str, Sequence[str]], tasks: pd.Series) -> None:
    """Raise if a task that `by_kernel` names (kernel -> its tasks) is not among a study's `tasks`."""
    known = set(tasks)
    unknown = [name for names in by_kernel.values() for name in names if name not in known]
    if unknown:
        raise ValueError(f"tasks {unknown} of by_kernel are not in the study; its tasks: {', '.join(tasks.unique())}")


def plot_live_traces(traces: Mapping[str, pd.DataFrame], col_wrap: int = 5, mark: float = 0.99) -> Figure:
    """Live searches on the wall clock (`benchmarks/live_search.py` traces, by title): per shape, each strategy's best
    so far as a fraction of the run's best (the fastest config any strategy found there), against seconds from the
    first ask; dotted at `mark`."""
    colors = strategy_colors(list(dict.fromkeys(name for trace in traces.values() for name in trace["strategy"])))
    figure, axes = panel_grid(len(traces), col_wrap, sharey=True, extra_height=0.4)
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
    figure, axes = panel_grid(len(view.strategies), col_wrap, sharex=True, sharey=True, extra_height=0.9)
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
    times_formatter(colorbar.ax.yaxis)
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
        label_points(ax, table[column].to_numpy(), success, list(table["strategy"]))
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


# -- helpers the figure modules share ------------------------------------------------------------------------------

def times_formatter(axis) -> None:
    """Ticks of a log axis of ratios at 1, 2 and 5 times each power of ten, written 2×."""
    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}×"))
    axis.set_minor_formatter(NullFormatter())


def label_points(ax: Axes, xs: np.ndarray, ys: np.ndarray, labels: Sequence[str], fontsize: float = 7.5,
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
