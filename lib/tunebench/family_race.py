"""Searching two kernel families of one operation (the pointer and the TMA GEMM) for one shape when which is faster is
not known: each family's search alone, both in turn, or a race that probes each and keeps the leader, on one clock.

Each family's search runs against its own evaluator, so what its strategy asks never depends on the other family's
results. A policy is therefore an ordering of whole batches of the families' own traces (`study.run_search`), each batch
charged what it cost in its own trace: exact on the sequential replay clock, where one GPU runs one batch at a time.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import pandas as pd

POLICIES = ("alone", "in turn", "race")


def _batches(family: str, trace: pd.DataFrame) -> list[pd.DataFrame]:
    """The trace's batches in order, each with the seconds it took (its end less the previous batch's end)."""
    if trace.empty:
        return []
    ends = trace.groupby("batch", sort=True)["time_s"].max()
    durations = ends.diff().fillna(ends.iloc[0])
    if (durations < 0).any():
        raise ValueError(f"{family}: the trace's clock runs backwards between batches")
    return [trace[trace["batch"] == batch].assign(family=family, seconds=float(duration))
            for batch, duration in durations.items()]


def _on_one_clock(batches: list[pd.DataFrame]) -> pd.DataFrame:
    """Batches run one after another: a row per evaluation with the family, the combined clock and the best so far."""
    columns = ["family", "eval_index", "time_s", "latency_ms", "best_ms"]
    if not batches:
        return pd.DataFrame(columns=columns)
    clock, rows = 0.0, []
    for batch in batches:
        clock += batch["seconds"].iloc[0]
        rows.append(batch.assign(time_s=clock))
    combined = pd.concat(rows, ignore_index=True)
    latency = combined["latency_ms"].to_numpy(dtype=float)
    combined["best_ms"] = np.minimum.accumulate(np.where(np.isfinite(latency), latency, math.inf))
    combined["eval_index"] = np.arange(1, len(combined) + 1)
    return combined[columns]


def in_turn(traces: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Each family's whole search, one family after another in the mapping's order."""
    return _on_one_clock([batch for family, trace in traces.items() for batch in _batches(family, trace)])


def race(traces: Mapping[str, pd.DataFrame], probe_batches: int = 1, margin: float = 0.0) -> pd.DataFrame:
    """The first `probe_batches` batches of each family in the mapping's order; then, while another family's best is
    within `margin` (a fraction) of the leader's, one more batch of each such family in turn; a family further behind
    is dropped for good. The last family left searching runs to its end. With margin 0 the probes' leader continues
    alone (with any family tied with it, in turn)."""
    if probe_batches < 1:
        raise ValueError(f"probe_batches must be >= 1, got {probe_batches!r}")
    if margin < 0:
        raise ValueError(f"margin must be a fraction >= 0, got {margin!r}")
    split = {family: _batches(family, trace) for family, trace in traces.items()}
    ran = dict.fromkeys(split, 0)
    best = dict.fromkeys(split, math.inf)
    order: list[pd.DataFrame] = []

    def run(family: str, count: int) -> None:
        for batch in split[family][ran[family]:ran[family] + count]:
            order.append(batch)
            fastest = batch["latency_ms"].min()
            best[family] = min(best[family], float(fastest) if pd.notna(fastest) else math.inf)
        ran[family] = min(len(split[family]), ran[family] + count)

    for family in split:
        run(family, probe_batches)
    contenders = list(split)
    while True:
        leader = min(best[family] for family in contenders)
        contenders = [family for family in contenders if best[family] <= leader * (1 + margin)]
        searching = [family for family in contenders if ran[family] < len(split[family])]
        if len(searching) <= 1:
            for family in searching:
                run(family, len(split[family]))
            return _on_one_clock(order)
        for family in searching:
            run(family, 1)


def policy_trace(policy: str, traces: Mapping[str, pd.DataFrame], probe_batches: int = 1,
                 margin: float = 0.0) -> pd.DataFrame:
    """One policy's combined trace: `alone` needs exactly one family's trace; `in turn` and `race` (with its
    `probe_batches` and `margin`) take several."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; allowed: {', '.join(POLICIES)}")
    if policy == "alone":
        if len(traces) != 1:
            raise ValueError(f"policy 'alone' searches one family, got {len(traces)}: {', '.join(traces)}")
        return in_turn(traces)
    if len(traces) < 2:
        raise ValueError(f"policy {policy!r} needs two families or more, got {', '.join(traces) or 'none'}")
    return in_turn(traces) if policy == "in turn" else race(traces, probe_batches, margin)
