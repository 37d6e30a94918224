"""Timing one GPU callable: warm-up, CUDA events around each run, an L2 flush before each, adaptive repeats.

The one notion of "the" latency in tunebench: the median of the repeats this module returns.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class TimingPolicy:
    """How much to time each config. Defaults keep a full sweep affordable while the median stays stable
    (repeatability is measured by benchmarks/measurement_throughput.py)."""

    warmup_runs: int = 1
    target_ms: float = 10.0  # timed GPU time aimed at per config; repeats = target / first estimate
    min_repeats: int = 3
    max_repeats: int = 30
    flush_bytes: int = 256 * 1024 * 1024  # larger than the L2 of any current GPU (H100: 50 MiB)

    def __post_init__(self) -> None:
        if not 1 <= self.min_repeats <= self.max_repeats:
            raise ValueError(f"need 1 <= min_repeats <= max_repeats, got {self.min_repeats}, {self.max_repeats}")
        if self.target_ms <= 0 or self.warmup_runs < 0 or self.flush_bytes < 0:
            raise ValueError(f"target_ms must be > 0 and warmup_runs, flush_bytes >= 0: {self}")

    def repeats_for(self, estimate_ms: float) -> int:
        if estimate_ms <= 0:
            return self.max_repeats
        return max(self.min_repeats, min(self.max_repeats, math.ceil(self.target_ms / estimate_ms)))

    def describe(self) -> dict:
        return {"method": "CUDA events around each run, L2 flushed before each run, median of repeats", **asdict(self)}


def _timed_runs(function: Callable[[], object], flush: torch.Tensor | None, count: int) -> list[float]:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
    for start, end in zip(starts, ends):
        if flush is not None:
            flush.zero_()
        start.record()
        function()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in zip(starts, ends)]


def time_callable(function: Callable[[], object], policy: TimingPolicy, flush: torch.Tensor | None) -> list[float]:
    """The latencies in ms of `policy.repeats_for(estimate)` runs of `function`, each after an L2 flush."""
    for _ in range(policy.warmup_runs):
        function()
    torch.cuda.synchronize()
    estimate = _timed_runs(function, flush, 1)[0]
    return _timed_runs(function, flush, policy.repeats_for(estimate))


def flush_buffer(policy: TimingPolicy, device: torch.device | str = "cuda") -> torch.Tensor | None:
    """The buffer whose zeroing evicts the L2 cache between runs."""
    if policy.flush_bytes == 0:
        return None
    return torch.empty(policy.flush_bytes // 4, dtype=torch.int32, device=device)
