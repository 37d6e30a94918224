"""Figures of one recorded search space: latency spread per shape, each parameter's effect, where configs fail,
the best config against the vendor library, and the roofline (the search_space notebook)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import PercentFormatter

from tunebench.dataset_summary import (FAILURE_STATUSES, best_per_shape, best_with_value_fixed,
                                       failure_shares_by_value, relative_latencies, shape_label, varying_parameters)
from tunebench.measure.result import Status
from tunebench.plots import label_points, panel_grid, times_formatter

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tunebench.measure.dataset import Dataset

# A bandwidth roof where the dataset's provenance holds no measured one: bytes/s and where the number comes from.
DATASHEET_BANDWIDTH = {"NVIDIA H100 80GB HBM3": (3.35e12, "H100 SXM datasheet HBM3 bandwidth")}
# The provenance key under which a measured memory bandwidth (bytes/s) would be recorded.
MEASURED_BANDWIDTH_KEY = "memory_bandwidth_bytes_per_s"


def _new_axes(ax: Axes | None, rows: int) -> Axes:
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 1.2 + 0.45 * max(rows, 1)), layout="constrained")
    return ax




def plot_latency_distributions(dataset: Dataset, ax: Axes | None = None) -> Figure:
    """Box plot per shape of every valid config's latency relative to the shape's best (log scale)."""
    names = list(dataset.shape_names)
    ok = relative_latencies(dataset)
    frame = pd.DataFrame({"shape": [shape_label(shape) for shape in ok[names].itertuples(index=False, name=None)],
                          "relative": ok["relative"]})
    order = [shape_label(shape) for shape in sorted(set(ok[names].itertuples(index=False, name=None)))]
    ax = _new_axes(ax, len(order))
    sns.boxplot(frame, x="relative", y="shape", order=order, log_scale=True, fliersize=2, ax=ax)
    times_formatter(ax.xaxis)
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
    figure, axes = panel_grid(len(parameters), col_wrap, sharey=True, extra_height=0.6)
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
    times_formatter(axes[0].yaxis)
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
    figure, axes = panel_grid(len(parameters), col_wrap, sharey=True, extra_height=0.6)
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
    label_points(ax, points["intensity"].to_numpy(), points["triton_tflops"].to_numpy(), points["shape"].tolist(),
                  avoid=markers)
    ax.set_xlabel("arithmetic intensity (FLOP/byte; FLOP = 2MNK, bytes = element size × (MK + KN + MN))")
    ax.set_ylabel("throughput (TFLOP/s)")
    gpu = dataset.provenance.get("gpu_name", dataset.gpu)
    ax.set_title(f"Roofline: {dataset.kernel} {dataset.dtype} on {gpu}")
    figure.legend(loc="outside lower center", ncols=2, frameon=False, fontsize="small")
    return figure
