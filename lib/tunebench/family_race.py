"""Searching two kernel families of one operation (the pointer and the TMA GEMM) for one shape when which is faster is
not known: each family's search alone, both in turn, or a race that probes each and keeps the leader, on one clock.

Each family's search runs against its own evaluator, so what its strategy asks never depends on the other family's
results. A policy is therefore an ordering of whole batches of the families' own searches, each batch charged what it
cost on its own evaluator's clock: `race` and `in_turn` reorder recorded traces (`study.run_search`), exact on the
sequential replay clock, where one GPU runs one batch at a time; `race_searches` and `in_turn_searches` step
`study.Search`es in that order, live or replayed, and stop the dropped ones.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping, Protocol

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from tunebench.study import Search

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
    """Batches run one after another: a row per evaluation with the family, the batch's place in the order (from 1),
    the config's key and status where every batch has them, the combined clock and the best so far."""
    columns = ["family", "eval_index", "batch", "time_s", "latency_ms", "best_ms"]
    if not batches:
        return pd.DataFrame(columns=columns)
    for place, optional in ((3, "config_key"), (4, "status")):
        if all(optional in batch for batch in batches):
            columns.insert(place, optional)
    clock, rows = 0.0, []
    for place, batch in enumerate(batches, start=1):
        clock += batch["seconds"].iloc[0]
        rows.append(batch.assign(time_s=clock, batch=place))
    combined = pd.concat(rows, ignore_index=True)
    latency = combined["latency_ms"].to_numpy(dtype=float)
    combined["best_ms"] = np.minimum.accumulate(np.where(np.isfinite(latency), latency, math.inf))
    combined["eval_index"] = np.arange(1, len(combined) + 1)
    return combined[columns]


class _Batches(Protocol):
    """One family's batches, one at a time, each a frame of its rows with `family` and the `seconds` it took."""

    def has_more(self) -> bool: ...

    def next_batch(self) -> pd.DataFrame | None: ...


class _Recorded:
    """The batches of a finished trace."""

    def __init__(self, family: str, trace: pd.DataFrame) -> None:
        self._batches, self._next = _batches(family, trace), 0

    def has_more(self) -> bool:
        return self._next < len(self._batches)

    def next_batch(self) -> pd.DataFrame | None:
        if not self.has_more():
            return None
        self._next += 1
        return self._batches[self._next - 1]


class _Stepped:
    """A search stepped on demand: a batch is the rows one or more steps add (a step whose configs were all seen
    before adds none), charged the seconds its evaluator's clock moved meanwhile."""

    def __init__(self, family: str, search: Search) -> None:
        self._family, self._search = family, search

    def has_more(self) -> bool:
        return not self._search.over

    def next_batch(self) -> pd.DataFrame | None:
        search = self._search
        before, started = search.evaluations, search.evaluator.elapsed_s
        while not search.over and search.evaluations == before:
            search.step()
        if search.evaluations == before:
            return None
        rows = search.trace().iloc[before:]
        return rows.assign(family=self._family, seconds=search.evaluator.elapsed_s - started)


def _in_turn(sources: Mapping[str, _Batches]) -> pd.DataFrame:
    order = []
    for source in sources.values():
        while source.has_more():
            batch = source.next_batch()
            if batch is not None:
                order.append(batch)
    return _on_one_clock(order)


def in_turn(traces: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Each family's whole search, one family after another in the mapping's order."""
    return _in_turn({family: _Recorded(family, trace) for family, trace in traces.items()})


def in_turn_searches(searches: Mapping[str, Search]) -> pd.DataFrame:
    """`in_turn`, stepping each family's search to its end in the mapping's order."""
    return _in_turn({family: _Stepped(family, search) for family, search in searches.items()})


def _race(sources: Mapping[str, _Batches], probe_batches: int, margin: float) -> pd.DataFrame:
    if probe_batches < 1:
        raise ValueError(f"probe_batches must be >= 1, got {probe_batches!r}")
    if margin < 0:
        raise ValueError(f"margin must be a fraction >= 0, got {margin!r}")
    best = dict.fromkeys(sources, math.inf)
    order: list[pd.DataFrame] = []

    def run(family: str, count: int | None) -> None:
        """`count` batches of the family's search (None: to its end)."""
        ran = 0
        while sources[family].has_more() and (count is None or ran < count):
            batch = sources[family].next_batch()
            ran += 1
            if batch is not None:
                order.append(batch)
                fastest = batch["latency_ms"].min()
                best[family] = min(best[family], float(fastest) if pd.notna(fastest) else math.inf)

    for family in sources:
        run(family, probe_batches)
    contenders = list(sources)
    while True:
        leader = min(best[family] for family in contenders)
        contenders = [family for family in contenders if best[family] <= leader * (1 + margin)]
        searching = [family for family in contenders if sources[family].has_more()]
        if len(searching) <= 1:
            for family in searching:
                run(family, None)
            return _on_one_clock(order)
        for family in searching:
            run(family, 1)


def race(traces: Mapping[str, pd.DataFrame], probe_batches: int = 1, margin: float = 0.0) -> pd.DataFrame:
    """The first `probe_batches` batches of each family in the mapping's order; then, while another family's best is
    within `margin` (a fraction) of the leader's, one more batch of each such family in turn; a family further behind
    is dropped for good. The last family left searching runs to its end. With margin 0 the probes' leader continues
    alone (with any family tied with it, in turn)."""
    return _race({family: _Recorded(family, trace) for family, trace in traces.items()}, probe_batches, margin)


def race_searches(searches: Mapping[str, Search], probe_batches: int = 1, margin: float = 0.0) -> pd.DataFrame:
    """`race`, stepping the families' searches (live or replayed) in its order; a dropped family's search is not
    stepped again."""
    return _race({family: _Stepped(family, search) for family, search in searches.items()}, probe_batches, margin)


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
