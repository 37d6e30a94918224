"""Two-pass sweeps: every config first timed with a few runs, then only the near-best timed again in full.

benchmarks/screening_sweep.py replays the rule on the recorded datasets (results/screening/summary.md): a screen of 3
runs with a 20 % margin kept every shape's best in all nine, at 21 to 57 % of the full sweep's estimated bench time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Mapping


@dataclass(frozen=True)
class Screen:
    """Time every config with `runs` timed runs (after the usual check, warm-up and estimate); the configs whose
    screened median is within `margin` of the shape's screened best are timed again with the full policy."""

    runs: int = 3
    margin: float = 0.20

    def __post_init__(self) -> None:
        if isinstance(self.runs, bool) or not isinstance(self.runs, int) or self.runs < 1:
            raise ValueError(f"a screen times at least 1 run per config, got runs={self.runs!r}")
        if not (isinstance(self.margin, (int, float)) and math.isfinite(self.margin) and self.margin >= 0):
            raise ValueError(f"a screen's margin is a finite fraction >= 0 (0.2: within 20 %), got {self.margin!r}")

    def bound(self, best_ms: float) -> float:
        """The slowest screened median that is timed again in full, given the shape's fastest screened median."""
        return best_ms * (1 + self.margin)

    def kept(self, screened_ms: Mapping[Hashable, float]) -> set[Hashable]:
        """The keys of `screened_ms` (screened medians of the configs that ran) to time again in full."""
        if not screened_ms:
            return set()
        bound = self.bound(min(screened_ms.values()))
        return {key for key, latency in screened_ms.items() if latency <= bound}
