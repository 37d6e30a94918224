"""Summaries of one recorded dataset for its notebook: status shares, best config vs vendor, and two plots.

Every function takes a `tunebench.measure.dataset.Dataset`; shapes are labelled like "16×4096×4096".
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from tunebench.measure.result import Status

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tunebench.measure.dataset import Dataset

STATUSES = tuple(status.value for status in Status)
# FLOPs are counted only for a plain GEMM (C = A @ B, a multiply and an add per term), recognized by its shape names.
GEMM_SHAPE_NAMES = ("M", "N", "K")


def shape_label(shape: tuple) -> str:
    """'16×4096×4096' for the shape (16, 4096, 4096)."""
    return "×".join(str(int(size)) for size in shape)


def first_shapes(dataset: Dataset, count: int) -> Dataset:
    """The dataset restricted to its first `count` shapes in sorted order; all of it when count is 0."""
    if count <= 0:
        return dataset
    keep = set(dataset.shapes()[:count])

    def rows_kept(frame: pd.DataFrame) -> pd.DataFrame:
        shapes = frame[list(dataset.shape_names)].itertuples(index=False, name=None)
        return frame[[shape in keep for shape in shapes]]

    return dataclasses.replace(dataset, measurements=rows_kept(dataset.measurements), vendor=rows_kept(dataset.vendor))


def status_shares(dataset: Dataset) -> pd.DataFrame:
    """Per shape: configs measured, valid (ok) configs, then the share (0 to 1) of each status."""
    names = list(dataset.shape_names)
    measurements = dataset.measurements
    counts = pd.crosstab([measurements[name] for name in names], measurements["status"])
    counts = counts.reindex(columns=list(STATUSES), fill_value=0)
    table = pd.DataFrame({"configs": counts.sum(axis=1), "valid": counts[Status.OK.value]})
    table = table.join(counts.div(counts.sum(axis=1), axis=0))
    table.columns.name = None
    return table.reset_index()


def best_per_shape(dataset: Dataset) -> pd.DataFrame:
    """Per shape: the fastest ok config, its latency, the vendor's, speedup (vendor / best) and TFLOP/s for a GEMM.

    A shape without any ok config keeps its row, with NaN config and latency.
    """
    names = list(dataset.shape_names)
    measurements = dataset.measurements
    ok = measurements[measurements["status"] == Status.OK.value]
    fastest = ok.loc[ok.groupby(names)["latency_ms"].idxmin(), [*names, *dataset.parameter_names, "latency_ms"]]
    table = measurements[names].drop_duplicates().merge(fastest, on=names, how="left")

    vendor = dataset.vendor.dropna(subset=["latency_ms"])
    vendor = vendor[[*names, "library", "latency_ms"]].rename(
        columns={"library": "vendor_library", "latency_ms": "vendor_ms"})
    table = table.merge(vendor, on=names, how="left")
    table["speedup"] = table["vendor_ms"] / table["latency_ms"]
    if tuple(names) == GEMM_SHAPE_NAMES:
        flops = 2.0 * table["M"] * table["N"] * table["K"]
        table["tflops"] = flops / (table["latency_ms"] * 1e-3) / 1e12
        table["vendor_tflops"] = flops / (table["vendor_ms"] * 1e-3) / 1e12
    return table.sort_values(names, ignore_index=True)


def _new_axes(ax: Axes | None, rows: int) -> Axes:
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 1.2 + 0.45 * max(rows, 1)), layout="constrained")
    return ax


def plot_latency_distributions(dataset: Dataset, ax: Axes | None = None) -> Figure:
    """Box plot per shape of every valid config's latency relative to the shape's best (log scale)."""
    import seaborn as sns
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    names = list(dataset.shape_names)
    ok = dataset.measurements[dataset.measurements["status"] == Status.OK.value]
    frame = pd.DataFrame({
        "shape": [shape_label(shape) for shape in ok[names].itertuples(index=False, name=None)],
        "relative": ok["latency_ms"] / ok.groupby(names)["latency_ms"].transform("min"),
    })
    order = [shape_label(shape) for shape in sorted(set(ok[names].itertuples(index=False, name=None)))]
    ax = _new_axes(ax, len(order))
    sns.boxplot(frame, x="relative", y="shape", order=order, log_scale=True, fliersize=2, ax=ax)
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}×"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("latency / best latency of the shape (log scale)")
    ax.set_ylabel(f"shape ({'×'.join(names)})")
    ax.set_title("Valid configs: how far from the best")
    return ax.figure


def plot_best_vs_vendor(dataset: Dataset, ax: Axes | None = None) -> Figure:
    """Bars per shape: the best Triton config's speedup over the vendor library, labelled with both throughputs.

    A speedup rather than raw TFLOP/s keeps small, memory-bound shapes as readable as large ones.
    """
    import seaborn as sns

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


def speedup_summary(best: pd.DataFrame) -> str:
    """One sentence: on how many shapes the best Triton config beats the vendor, and the median speedup."""
    speedup = best["speedup"].dropna()
    if speedup.empty:
        return "No shape has both a valid Triton config and a vendor measurement."
    return (f"The best Triton config beats the vendor library on {int((speedup > 1).sum())} of {len(speedup)} "
            f"shapes; median speedup {np.median(speedup):.2f}× (vendor latency / best Triton latency).")
