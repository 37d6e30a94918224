"""Figures of the pipeline-selection notebook: where each compressed-weight pipeline wins, each pipeline's measured
preprocess and matmul time, and the MLP step of the autotuned dispatch against fixed pipelines and uncompressed cuBLAS.
The tables they draw come from tunebench.kernels.compressed_matmul.selection_study."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import ListedColormap, to_rgba
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

from tunebench.kernels.compressed_matmul.pipelines import PIPELINES
from tunebench.kernels.compressed_matmul.selection_study import VENDOR, dispatch_gains
from tunebench.notebook_tables import table_style

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from pandas.io.formats.style import Styler

# A wide translucent band under the pipelines' lines, so that the pipeline it follows shows through.
DISPATCH_STYLE = {"color": "black", "alpha": 0.3, "linewidth": 8, "solid_capstyle": "round", "zorder": 1,
                  "label": "autotuned dispatch"}
VENDOR_STYLE = {"color": "0.45", "linewidth": 1.6, "linestyle": "--", "marker": "s",
                "label": "uncompressed torch.matmul (cuBLAS)"}
PREPROCESS_HATCH = "///"
TINT = 0.5  # alpha of the winners' map colours, light enough for black text
US_PER_MS = 1000.0


def pipeline_colors() -> dict[str, tuple]:
    """One colour per pipeline, the same in every figure, from the shared colour-blind palette (blue, orange, green,
    pink: its vermilion is too close to its orange for the winners' map)."""
    palette = sns.color_palette("colorblind", 10)
    return dict(zip(PIPELINES, (palette[0], palette[1], palette[2], palette[4])))


def _batch_axis(axis, batches: Sequence[int]) -> None:
    """A log2 batch axis labelled at the recorded batch sizes."""
    axis.set_major_locator(FixedLocator(batches))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def _log_axis(axis, suffix: str = "") -> None:
    """A log axis labelled in plain numbers at 1, 2 and 5 times the powers of ten."""
    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}{suffix}"))
    axis.set_minor_formatter(NullFormatter())


def plot_winners(winners: pd.DataFrame) -> Figure:
    """Projection x batch size, each cell coloured by its fastest pipeline and labelled with the margin over the
    runner-up (runner-up step / winner step); a cell says so where the dispatch picked another pipeline.
    `winners` is selection_study.winners()."""
    projections = list(dict.fromkeys(winners["projection"]))
    batches = list(dict.fromkeys(winners["batch"]))
    colors = pipeline_colors()
    cells = winners.set_index(["projection", "batch"])
    index = np.array([[PIPELINES.index(cells.loc[(name, batch), "winner"]) for batch in batches]
                      for name in projections])
    figure, ax = plt.subplots(figsize=(1.9 * len(batches) + 1.5, 0.95 * len(projections) + 1.9), layout="constrained")
    ax.imshow(index, cmap=ListedColormap([to_rgba(colors[p], TINT) for p in PIPELINES]), vmin=-0.5,
              vmax=len(PIPELINES) - 0.5, aspect="auto")
    for row, name in enumerate(projections):
        for column, batch in enumerate(batches):
            cell = cells.loc[(name, batch)]
            text = f"{cell['winner']}\n{cell['margin']:.2f}× over\n{cell['runner_up']}"
            if cell["dispatch_pipeline"] != cell["winner"]:
                text += f"\n(dispatch: {cell['dispatch_pipeline']})"
            ax.text(column, row, text, ha="center", va="center", fontsize=8.5)
    ax.set_xticks(range(len(batches)), [str(batch) for batch in batches])
    ax.set_yticks(range(len(projections)), projections)
    ax.set_xticks(np.arange(len(batches) + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(len(projections) + 1) - 0.5, minor=True)
    ax.grid(False)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="minor", length=0)
    ax.set(xlabel="batch size (rows of x)", ylabel="projection",
           title="Fastest pipeline per projection and batch size, and its margin (runner-up step / winner step)")
    won = [p for p in PIPELINES if p in set(winners["winner"])]
    figure.legend([Patch(facecolor=to_rgba(colors[p], TINT)) for p in won], won, loc="outside lower center",
                  ncols=len(won), title="fastest pipeline")
    return figure


def plot_split(split: pd.DataFrame, projections: Sequence[str] | None = None) -> Figure:
    """Per projection (a panel each), per batch size a group of bars, one per pipeline: its preprocess time (hatched)
    under its matmul time, in microseconds, with uncompressed cuBLAS marked across the group. `split` is
    selection_study.MeasuredSplit.table."""
    projections = list(projections or dict.fromkeys(split["projection"]))
    batches = sorted(set(split["batch"]))
    colors = pipeline_colors()
    width = 0.8 / len(PIPELINES)
    figure, axes = plt.subplots(len(projections), 1, figsize=(12, 3.3 * len(projections) + 0.8), sharex=True,
                                squeeze=False, layout="constrained")
    for ax, name in zip(axes[:, 0], projections):
        rows = split[split["projection"] == name].set_index(["batch", "pipeline"])
        for offset, pipeline in enumerate(PIPELINES):
            x = np.arange(len(batches)) - 0.4 + width * (offset + 0.5)
            preprocess = np.array([rows.loc[(b, pipeline), "preprocess_ms"] for b in batches]) * US_PER_MS
            matmul = np.array([rows.loc[(b, pipeline), "matmul_ms"] for b in batches]) * US_PER_MS
            ax.bar(x, preprocess, width, color=to_rgba(colors[pipeline], 0.35), edgecolor=colors[pipeline],
                   hatch=PREPROCESS_HATCH, linewidth=0.6)
            ax.bar(x, matmul, width, bottom=preprocess, color=colors[pipeline], edgecolor="white", linewidth=0.6)
        cublas = [rows.loc[b, "cublas_ms"].iloc[0] * US_PER_MS for b in batches]
        ax.hlines(cublas, np.arange(len(batches)) - 0.45, np.arange(len(batches)) + 0.45, color="black",
                  linewidth=2)
        ax.set(ylabel="time (µs)", title=f"{name}: preprocess + matmul, run one after the other")
        ax.grid(axis="x", visible=False)
    axes[-1, 0].set_xticks(range(len(batches)), [str(batch) for batch in batches])
    axes[-1, 0].set_xlabel("batch size (rows of x)")
    handles = [Patch(facecolor=colors[p], label=p) for p in PIPELINES]
    handles += [Patch(facecolor="white", edgecolor="0.3", hatch=PREPROCESS_HATCH,
                      label="preprocess (decode at 100 % of the SMs; none for direct_palette)"),
                Patch(facecolor="0.5", label="matmul (solid, on top)"),
                Line2D([], [], color="black", linewidth=2, label="uncompressed cuBLAS")]
    figure.legend(handles=handles, loc="outside lower center", ncols=4)
    return figure


def plot_mlp_steps(steps: pd.DataFrame) -> Figure:
    """Left: the MLP step (sum over the projections, µs) per batch size of each fixed pipeline, the autotuned dispatch
    and uncompressed torch.matmul. Right: each one's step over the dispatch's (above 1: the dispatch is faster).
    `steps` is selection_study.mlp_steps()."""
    colors = pipeline_colors()
    batches = list(steps.index)
    gains = dispatch_gains(steps)
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5), layout="constrained")
    for pipeline in PIPELINES:
        style = {"color": colors[pipeline], "marker": "o", "linewidth": 1.4, "label": f"always {pipeline}"}
        left.plot(batches, steps[pipeline] * US_PER_MS, **style)
        right.plot(batches, gains[pipeline], **style)
    left.plot(batches, steps["dispatch"] * US_PER_MS, **DISPATCH_STYLE)
    left.plot(batches, steps[VENDOR] * US_PER_MS, **VENDOR_STYLE)
    right.plot(batches, gains[VENDOR], **VENDOR_STYLE)
    right.axhline(1.0, color="black", linewidth=1.2, linestyle=":", zorder=1)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _batch_axis(ax.xaxis, batches)
        ax.set_xlabel("batch size (rows of x)")
    _log_axis(left.yaxis)
    _log_axis(right.yaxis, "×")
    left.set(ylabel="MLP step (µs, log scale)", title="MLP step: gate + up + down")
    right.set(ylabel="step / the dispatch's step (log scale)",
              title="Gain of the dispatch (above 1×: the dispatch is faster)")
    handles, labels = left.get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=3)
    return figure


def steps_table(steps: pd.DataFrame) -> pd.DataFrame:
    """Per batch size: the MLP step in µs of each fixed pipeline, the dispatch and uncompressed torch.matmul, and
    the fastest fixed pipeline. `steps` is selection_study.mlp_steps()."""
    table = (steps[[*PIPELINES, "dispatch", VENDOR]] * US_PER_MS).rename(columns=STEP_NAMES)
    return table.assign(**{"fastest fixed": steps["best_fixed"]}).reset_index()


def gains_table(steps: pd.DataFrame) -> pd.DataFrame:
    """Per batch size: each fixed pipeline's MLP step and uncompressed torch.matmul's over the dispatch's."""
    return dispatch_gains(steps).rename(columns=STEP_NAMES).reset_index()


STEP_NAMES = {VENDOR: "torch.matmul (uncompressed)", "dispatch": "autotuned dispatch"}


def style_table(table: pd.DataFrame, caption: str, number_format: str) -> Styler:
    """notebook_tables.table_style with `number_format` for the float columns, headers on one line and a caption."""
    numbers = {column: number_format for column in table.columns if pd.api.types.is_float_dtype(table[column])}
    return (table_style(table, numbers).set_caption(caption)
            .set_table_styles([{"selector": "th", "props": "max-width: none; white-space: nowrap"},
                               {"selector": "caption", "props": "text-align: left; font-weight: bold"}],
                              overwrite=False))
