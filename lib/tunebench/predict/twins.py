"""Schedule-identical twins in a recorded GEMM dataset: two configs of one shape that differ only in GROUP_M yet
launch the same tiles in the same order (`matmul.launch_group_m`), so their two timings measure one kernel twice.

How far a shape's measured best is from its twin's timing is what one sitting credits a perfect pick with: a floor set
by the measurement, beside which a predictor's efficiency on the same shapes can be read.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from tunebench.kernels.matmul import launch_group_m
from tunebench.measure.result import Status
from tunebench.predict.compiled import CLASS_COLUMNS, FACTS

SHAPE = ["M", "N", "K"]


def twin_pairs(measurements: pd.DataFrame, parameter_names: Sequence[str]) -> pd.DataFrame:
    """Every pair of rows that ran (status ok) of one shape whose configs differ only in GROUP_M and launch the same
    tile order: the shape, the two GROUP_M values (`GROUP_M_a` < `GROUP_M_b`) and the two latencies."""
    names = list(parameter_names)
    missing = [name for name in [*SHAPE, *names, "status", "latency_ms"] if name not in measurements.columns]
    if "GROUP_M" not in names or missing:
        raise ValueError(f"twins need a GEMM dataset with GROUP_M among its parameters; parameters {names}, "
                         f"missing columns {missing}")
    ok = measurements.loc[measurements["status"] == Status.OK.value, [*SHAPE, *names, "latency_ms"]]
    ok = ok.assign(launch=launch_group_m(ok, (ok["M"], ok["N"])))
    key = [*SHAPE, *(name for name in names if name != "GROUP_M"), "launch"]
    pairs = ok.merge(ok, on=key, suffixes=("_a", "_b"))
    pairs = pairs[pairs["GROUP_M_a"] < pairs["GROUP_M_b"]]
    return pairs.drop(columns="launch").reset_index(drop=True)


def twin_floor(measurements: pd.DataFrame, parameter_names: Sequence[str]) -> pd.DataFrame:
    """One row per shape whose fastest row that ran has a twin: the shape, the best latency, the twin's latency
    (the mean of its twins' where the space allows several) and `twin_efficiency`, best latency / twin latency."""
    names = list(parameter_names)
    ok = measurements[measurements["status"] == Status.OK.value]
    best = ok.loc[ok.groupby(SHAPE, sort=True)["latency_ms"].idxmin(), [*SHAPE, *names, "latency_ms"]]
    pairs = twin_pairs(measurements, names)
    other = [name for name in names if name != "GROUP_M"]
    rows = []
    for first, second in (("a", "b"), ("b", "a")):  # the best may be either side of a pair
        side = pairs.rename(columns={f"GROUP_M_{first}": "GROUP_M", f"latency_ms_{second}": "twin_latency_ms"})
        rows.append(best.merge(side[[*SHAPE, *other, "GROUP_M", "twin_latency_ms"]], on=[*SHAPE, *names]))
    joined = pd.concat(rows).groupby(SHAPE, sort=True).agg(best_latency_ms=("latency_ms", "first"),
                                                            twin_latency_ms=("twin_latency_ms", "mean"))
    return joined.assign(twin_efficiency=joined["best_latency_ms"] / joined["twin_latency_ms"]).reset_index()


def apart(first: Sequence[float], second: Sequence[float]) -> np.ndarray:
    """How far two timings of one kernel lie apart: |log of their latency ratio|, as a fraction (0.01: 1 %)."""
    return np.expm1(np.abs(np.log(np.asarray(first, dtype=float) / np.asarray(second, dtype=float))))


def pair_spread(pairs: pd.DataFrame, edges_ms: Sequence[float]) -> pd.DataFrame:
    """How far twins' timings lie apart (|log of their latency ratio|, as a fraction), by the faster one's latency in
    the bins `edges_ms`: pairs, median and 90th percentile per bin."""
    faster = np.minimum(pairs["latency_ms_a"], pairs["latency_ms_b"])
    bins = pd.cut(faster, list(edges_ms), right=False)
    gaps = pd.DataFrame({"bin": bins, "apart": apart(pairs["latency_ms_a"], pairs["latency_ms_b"])})
    grouped = gaps.groupby("bin", observed=True)["apart"]
    return pd.DataFrame({"pairs": grouped.size(), "median": grouped.median(),
                         "P90": grouped.quantile(0.9)}).reset_index()


def compiled_agreement(table: pd.DataFrame, parameter_names: Sequence[str]) -> tuple[int, int]:
    """Over a compiled-resource table (`predict.compiled`): how many (config pair, alignment class) differ only in
    GROUP_M, and how many of those compiled to the same shared memory, registers, local memory and instruction
    counts."""
    key = [*(name for name in parameter_names if name != "GROUP_M"), *CLASS_COLUMNS]
    pairs = table.merge(table, on=key, suffixes=("_a", "_b"))
    pairs = pairs[pairs["GROUP_M_a"] < pairs["GROUP_M_b"]]
    same = np.logical_and.reduce([pairs[f"{fact}_a"] == pairs[f"{fact}_b"] for fact in FACTS])
    return len(pairs), int(same.sum())
