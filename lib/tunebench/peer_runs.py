"""Helion's autotune logs and tunebench's live traces read back as runs of one comparison: when each run's best reached
each fraction of cuBLAS, per-arm medians over seeds, and final configs timed again in rounds by one timer.

The GPU side is `benchmarks/helion_side_by_side.py`; this module reads what it wrote, anywhere.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from tunebench.live_traces import FRACTIONS_OF_VENDOR
from tunebench.metrics import seconds_to_reach


def helion_runs(out: Path) -> list[dict[str, Any]]:
    """Every Helion run's record in `out`, its trace attached as `trace` (time_s from the clock's start, ms), with
    `configs` (results logged) and `last_s` (the last result's second). Helion logs a config twice, as it starts and
    with its result; only the results count."""
    runs = []
    for path in sorted(out.glob("helion_*.json")):
        record = json.loads(path.read_text())
        log = pd.read_csv(path.with_suffix(".csv"))
        log = log[log.status != "started"]
        seconds = record.get("log_start_s", 0.0) + pd.to_numeric(log.timestamp_s, errors="coerce")
        perf_ms = pd.to_numeric(log.perf_ms, errors="coerce")
        timed = seconds.notna() & perf_ms.notna()
        record["trace"] = pd.DataFrame({"time_s": seconds[timed].to_numpy(), "ms": perf_ms[timed].to_numpy()})
        record["configs"] = len(log)
        record["last_s"] = float(seconds.max()) if seconds.notna().any() else 0.0
        runs.append(record)
    return runs


def trace_kernel(path: Path) -> str:
    """The GEMM a `live_search.py` trace searched, from its file name (`<gpu>_<kernel>_<dtype>_<shape>`, the kernel
    left out for the pointer GEMM): "matmul_tma" or "matmul"."""
    return "matmul_tma" if "_matmul_tma_" in f"_{path.stem}_" else "matmul"


def our_runs(traces: Sequence[Path]) -> list[dict[str, Any]]:
    """Each strategy's run in each `live_search.py` trace: its seed (from the folder), kernel, trace, cuBLAS, best
    config. Seconds count from starting the bench's workers: a trace's time_s counts from the first ask, its setup_s
    before that. A pointer-GEMM run's name says so ("tunebench_matmul_<strategy>_<seed>"); the TMA GEMM's do not."""
    runs = []
    for path in traces:
        frame = pd.read_parquet(path)
        kernel = trace_kernel(path)
        prefix = "tunebench_" if kernel == "matmul_tma" else f"tunebench_{kernel}_"
        for strategy, trace in frame.groupby("strategy", sort=False):
            seconds = trace.time_s + trace.setup_s
            ok = trace.status == "ok"
            runs.append({"run": f"{prefix}{strategy}_{path.parent.name}", "strategy": strategy, "kernel": kernel,
                         "cublas_ms": float(trace.vendor_ms.iloc[0]),
                         "trace": pd.DataFrame({"time_s": seconds[ok].to_numpy(),
                                                "ms": trace.latency_ms[ok].to_numpy()}),
                         "configs": len(trace), "last_s": float(seconds.max()),
                         "config_key": trace.loc[trace.latency_ms[ok].idxmin(), "config_key"]})
    return runs


def reach_row(run: dict[str, Any]) -> dict[str, Any]:
    """Seconds from the clock's start until the run's best reached each fraction of cuBLAS (by its own timer)."""
    trace = run["trace"].sort_values("time_s", kind="stable")
    best = np.minimum.accumulate(trace.ms.to_numpy()) if len(trace) else np.array([math.inf])
    times = trace.time_s.to_numpy() if len(trace) else np.array([math.nan])
    row = {"run": run["run"], "configs": run["configs"], "last result (s)": round(run["last_s"], 1),
           "best vs cuBLAS (own timer)": round(run["cublas_ms"] / best.min(), 3)}
    for fraction in FRACTIONS_OF_VENDOR:
        reached = seconds_to_reach(best, times, run["cublas_ms"], fraction)
        row[f"s to {fraction}x"] = "never" if math.isnan(reached) else round(float(reached), 1)
    return row


def rounds_files(out: Path) -> list[Path]:
    """The rounds' files in `out`, in the order they were timed."""
    return sorted(out.glob("rounds_*.csv"), key=lambda path: int(path.stem.split("_")[1]))


def arm_of(run: str) -> str:
    """A run's arm: its name without the seed."""
    return run.rsplit("_seed", 1)[0]


def arms_table(reach: pd.DataFrame, rounds: pd.DataFrame | None) -> pd.DataFrame:
    """Per arm, over its seeds: the runs, the median seconds to 0.99x and 1.0x cuBLAS (never counted as never, so a
    median of never is never), the median second of the last result and, from `rounds`, the median of the final
    configs' speed against cuBLAS and how many of the arm's runs it timed."""
    never = reach.replace("never", math.inf)
    timed = None if rounds is None else rounds_table(rounds).assign(arm=lambda table: table.run.map(arm_of))
    rows = []
    for arm, part in never.groupby(never.run.map(arm_of), sort=False):
        row: dict[str, Any] = {"arm": arm, "runs": len(part)}
        for fraction in (0.99, 1.0):
            median = float(np.median(part[f"s to {fraction}x"].astype(float)))
            row[f"median s to {fraction}x"] = "never" if math.isinf(median) else round(median, 1)
        row["median last result (s)"] = round(float(part["last result (s)"].median()), 1)
        if timed is not None:
            finals = timed[timed.arm == arm]["vs cuBLAS"]
            row["rounds: final vs cuBLAS (median)"] = (f"{finals.median():.3f} ({len(finals)} of {len(part)})"
                                                       if len(finals) else "not timed")
        rows.append(row)
    return pd.DataFrame(rows)


def rounds_table(rounds: pd.DataFrame) -> pd.DataFrame:
    """Per run, its median over the rounds and that against cuBLAS's median, fastest first."""
    medians = rounds.groupby("run").ms.median()
    cublas = medians.pop("cublas")
    return pd.DataFrame({"run": medians.index, "median ms": medians.round(5).to_numpy(),
                         "vs cuBLAS": (cublas / medians).round(3).to_numpy()}).sort_values("median ms")


def helion_outcome(run: dict[str, Any]) -> str:
    """How a Helion run ended, in words."""
    if run["finished"]:
        return (f"finished after {run['wall_s']:.1f} s (its log started at {run['log_start_s']:.1f} s), relative "
                f"error {run['relative_error']:.1e} against torch.matmul")
    clock = "" if "log_start_s" in run else " of its log's clock (its record predates noting when the log started)"
    return f"did not finish: stopped by the command's time limit; its last result at {run['last_s']:.1f} s{clock}"
