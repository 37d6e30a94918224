"""Tables that summarize one recorded dataset: status shares, parameter effects, failures, best config vs vendor.

Every function takes a `tunebench.measure.dataset.Dataset`; shapes are labelled like "16×4096×4096". Figures of
these tables live in `tunebench.plots`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np
import pandas as pd

from tunebench.kernels import KERNELS, get_kernel, kernel_source_sha256
from tunebench.measure.dataset import (SITTING, provenance_records, repeat_spread, sitting_count,
                                      sitting_kernel_sources)
from tunebench.measure.result import Status

if TYPE_CHECKING:
    from tunebench.measure.dataset import Dataset

STATUSES = tuple(status.value for status in Status)
FAILURE_STATUSES = tuple(status for status in STATUSES if status != Status.OK.value)
# FLOPs are counted only for a plain GEMM (C = A @ B, a multiply and an add per term), recognized by its shape names.
GEMM_SHAPE_NAMES = ("M", "N", "K")


def shape_label(shape: tuple) -> str:
    """'16×4096×4096' for the shape (16, 4096, 4096)."""
    return "×".join(str(int(size)) for size in shape)


def first_shapes(dataset: Dataset, count: int) -> Dataset:
    """The dataset restricted to its first `count` shapes in sorted order; all of it when count is 0."""
    return dataset if count <= 0 else dataset.with_shapes(dataset.shapes()[:count])


def spread_shapes(shapes: Sequence[tuple], count: int) -> list[tuple]:
    """`count` of the shapes, evenly spaced through their sorted order (for a GEMM: spread over M), first and
    last included; all of them when count is 0 or at least their number."""
    ordered = sorted(shapes)
    if count <= 0 or count >= len(ordered):
        return ordered
    if count == 1:
        return [ordered[0]]
    return [ordered[int(round(position))] for position in np.linspace(0, len(ordered) - 1, count)]


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


def varying_parameters(dataset: Dataset) -> list[str]:
    """The parameters that take more than one value in the recorded configs (the others show no effect)."""
    return [name for name in dataset.parameter_names if dataset.measurements[name].nunique() > 1]


def relative_latencies(dataset: Dataset) -> pd.DataFrame:
    """The ok measurements with a `relative` column: latency / the best ok latency of the same shape (>= 1)."""
    names = list(dataset.shape_names)
    ok = dataset.measurements[dataset.measurements["status"] == Status.OK.value].copy()
    ok["relative"] = ok["latency_ms"] / ok.groupby(names)["latency_ms"].transform("min")
    return ok


def best_with_value_fixed(dataset: Dataset, parameter: str) -> pd.DataFrame:
    """Per value of `parameter`: the best latency with that value fixed, relative to the shape's best, as the
    median over shapes (`relative_best`; 1 means some optimum uses this value) and the shapes counted."""
    ok = relative_latencies(dataset)
    per_shape = ok.groupby([*dataset.shape_names, parameter])["relative"].min().reset_index()
    return (per_shape.groupby(parameter)["relative"].agg(relative_best="median", shapes="size")
            .reset_index().sort_values(parameter, ignore_index=True))


def failure_shares_by_value(dataset: Dataset, parameter: str) -> pd.DataFrame:
    """Per value of `parameter`, pooled over shapes: configs recorded and the share (0 to 1) of each failure status."""
    measurements = dataset.measurements
    counts = pd.crosstab(measurements[parameter], measurements["status"])
    counts = counts.reindex(columns=list(STATUSES), fill_value=0)
    table = pd.DataFrame({"configs": counts.sum(axis=1)}).join(
        counts[list(FAILURE_STATUSES)].div(counts.sum(axis=1), axis=0))
    table.columns.name = None
    return table.reset_index().sort_values(parameter, ignore_index=True)


def failure_count(dataset: Dataset) -> int:
    """How many recorded configs (over all shapes) did not end ok."""
    return int((dataset.measurements["status"] != Status.OK.value).sum())


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


def timing_spread(dataset: Dataset) -> str:
    """One sentence on how repeatable the recorded timings are: the spread (max - min) / median of each ok row's
    repeats, its median, and the shares of rows above 20 % and 50 % (a run disturbed while it was timed)."""
    ok = dataset.measurements[dataset.measurements["status"] == Status.OK.value]
    repeats = ok["repeats_ms"].tolist()
    spread = repeat_spread([row for row in repeats if len(row) > 1])
    if spread.size == 0:
        return "No row records more than one repeat: the timing spread is unknown."
    return (f"Timing spread ((max - min) / median of a row's repeats) over {spread.size:,} rows: median "
            f"{np.median(spread):.1%}; above 20 %: {np.mean(spread > 0.2):.2%}; above 50 %: {np.mean(spread > 0.5):.2%}.")


def speedup_summary(best: pd.DataFrame) -> str:
    """One sentence: on how many shapes the best Triton config beats the vendor, and the median speedup."""
    speedup = best["speedup"].dropna()
    if speedup.empty:
        return "No shape has both a valid Triton config and a vendor measurement."
    return (f"The best Triton config beats the vendor library on {int((speedup > 1).sum())} of {len(speedup)} "
            f"shapes; median speedup {np.median(speedup):.2f}× (vendor latency / best Triton latency).")


def kernel_source_note(dataset: Dataset) -> str:
    """Which kernel source the dataset measured beside the current code's: a replay answers with the recorded
    binaries, a live run measures today's. Empty for a kernel tunebench does not hold (a Kernel Tuner cache's)."""
    if dataset.kernel not in KERNELS:
        return ""
    current = kernel_source_sha256(get_kernel(dataset.kernel))
    sources = sitting_kernel_sources(dataset.provenance)
    if set(sources) == {current}:
        return f"kernel source {current}, the current code's"
    recorded = list(dict.fromkeys(source for source in sources if source))
    unrecorded = sources.count(None)
    measured = ", ".join(recorded + ([f"not recorded by {unrecorded} of {len(sources)} sittings"] if unrecorded
                                     else [])) if recorded else "not recorded"
    return f"kernel source {measured} (the current code's: {current})"


def sittings_table(dataset: Dataset) -> pd.DataFrame:
    """One row per sitting of a sweep that took several: its date, command, kernel source hash and the rows it timed
    (as the rows name their sittings; blank where they do not). Empty for a sweep of one sitting."""
    records = provenance_records(dataset.provenance)
    if len(records) < 2:
        return pd.DataFrame()
    named = SITTING in dataset.measurements and dataset.measurements[SITTING].notna().any()
    counts = dataset.measurements[SITTING].value_counts() if named else pd.Series(dtype=int)
    return pd.DataFrame([{"sitting": index, "date": record["provenance"].get("date", ""),
                          "command": record["provenance"].get("command", ""),
                          "kernel source": record["provenance"].get("kernel_source_sha256") or "not recorded",
                          "rows": f"{int(counts.get(index, 0)):,}" if named else ""}
                         for index, record in enumerate(records)])


def provenance_line(dataset: Dataset) -> str:
    """One line saying where a dataset's numbers come from: GPU, software, the kernel source beside the current code's,
    date, and the command or citation (the first sitting's, and how many more there were, if any)."""
    provenance = dataset.provenance
    parts = [f"{dataset.kernel} {dataset.dtype} on {provenance.get('gpu_name', dataset.gpu)}"]
    sittings = sitting_count(provenance)
    if sittings > 1:
        rows = len(dataset.measurements)
        named = int(dataset.measurements[SITTING].notna().sum()) if SITTING in dataset.measurements else 0
        recorded = ("; each row names its own" if named == rows
                    else f"; {named:,} of {rows:,} rows name theirs" if named else "")
        parts.append(f"{sittings} sittings, the first's shown{recorded}")
    software = ", ".join(f"{name} {provenance[name]}" for name in ("driver", "cuda", "torch", "triton")
                         if provenance.get(name))
    if software:
        parts.append(software)
    timing = provenance.get("timing")
    if isinstance(timing, dict) and timing.get("method"):
        parts.append(f"timing: {timing['method']}")
    screen = provenance.get("screen")
    if isinstance(screen, dict):
        parts.append(f"a two-pass sweep: every config screened with {screen.get('runs')} runs, those within "
                     f"{screen.get('margin', 0):.0%} of the screened best timed in full")
    source = kernel_source_note(dataset)
    if source:
        parts.append(source)
    for name in ("date", "command", "citation"):
        if provenance.get(name):
            parts.append(f"{name}: {provenance[name]}")
    return "; ".join(parts)
