"""Timing one GPU callable: warm-up, CUDA events around each run, an L2 flush before each, adaptive repeats.

The one notion of "the" latency in tunebench: the median of the repeats this module returns.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping

import torch
import triton
import triton.language as tl

FLUSHES = ("zero", "read")  # how the timer's flush evicts the L2 (TimingPolicy.flush)


def recorded_flush(timing: Mapping[str, Any] | None) -> str:
    """The flush of a recorded timing policy (`TimingPolicy.describe()`, as a provenance holds it): "zero" where it
    names none, since every policy before `TimingPolicy.flush` zeroed the buffer."""
    return (timing or {}).get("flush", "zero")


@dataclass(frozen=True)
class TimingPolicy:
    """How much to time each config. Defaults keep a full sweep affordable while the median stays stable
    (repeatability is measured by benchmarks/measurement_throughput.py).

    hold_base_ms, hold_per_run_ms: the timed runs are queued behind a GPU spin, so that the host's launch delays
    (a busy CPU, the scheduler) never open idle gaps inside a timed region: every run starts as soon as the GPU
    finishes the one before (nvbench's blocking kernel does the same). The spin lasts hold_base_ms + count x (the
    host's time to queue one run, as the timer's previous round measured it, x hold_margin, less the GPU time of
    one run, which the queue gains back; at least hold_per_run_ms). When the GPU runs out of queued work before the
    host has queued everything (a run's start event reached by the time the host has launched the run and recorded
    its end), the round is timed once more behind a spin sized by the host's pace in that round, times
    `hold_retry_factor`. hold_base_ms = 0 turns the hold off.
    """

    warmup_runs: int = 1
    target_ms: float = 10.0  # timed GPU time aimed at per config; repeats = target / first estimate
    min_repeats: int = 3
    max_repeats: int = 30
    flush_bytes: int = 256 * 1024 * 1024  # larger than the L2 of any current GPU (H100: 50 MiB)
    flush: str = "zero"  # how the buffer evicts the L2: "zero" writes it (leaving dirty lines), "read" sums it
    hold_base_ms: float = 0.3
    hold_per_run_ms: float = 0.02  # the least host time assumed to queue one flush, two events and a launch
    hold_margin: float = 2.0
    hold_retry_factor: float = 4.0

    def __post_init__(self) -> None:
        if not 1 <= self.min_repeats <= self.max_repeats:
            raise ValueError(f"need 1 <= min_repeats <= max_repeats, got {self.min_repeats}, {self.max_repeats}")
        if self.flush not in FLUSHES:
            raise ValueError(f"flush={self.flush!r} is not allowed; allowed: {', '.join(FLUSHES)}")
        if self.target_ms <= 0 or self.warmup_runs < 0 or self.flush_bytes < 0:
            raise ValueError(f"target_ms must be > 0 and warmup_runs, flush_bytes >= 0: {self}")
        if self.hold_base_ms < 0 or self.hold_per_run_ms < 0 or self.hold_margin < 1 or self.hold_retry_factor < 1:
            raise ValueError("hold_base_ms and hold_per_run_ms must be >= 0, hold_margin and hold_retry_factor "
                             f">= 1: {self}")

    def repeats_for(self, estimate_ms: float) -> int:
        if estimate_ms <= 0:
            return self.max_repeats
        return max(self.min_repeats, min(self.max_repeats, math.ceil(self.target_ms / estimate_ms)))

    def hold_ms(self, runs: int, host_ms_per_run: float = 0.0, gpu_ms_per_run: float = 0.0) -> float:
        """GPU time the spin holds the stream for while `runs` timed runs are queued, each taking the host
        `host_ms_per_run` to queue and the GPU `gpu_ms_per_run` to run (0: no hold)."""
        if self.hold_base_ms == 0:
            return 0.0
        per_run = max(self.hold_per_run_ms, self.hold_margin * host_ms_per_run - gpu_ms_per_run)
        return self.hold_base_ms + runs * per_run

    def describe(self) -> dict:
        method = "CUDA events around each run, L2 flushed before each run, median of repeats"
        if self.flush != "zero":
            method = method.replace("L2 flushed", f"L2 flushed ({self.flush})")
        if self.hold_base_ms > 0:
            method += ("; runs queued behind a GPU spin so host delays open no gaps, a round timed again where the GPU "
                       "ran out of queued work")
        return {"method": method, **asdict(self)}


class Timer:
    """Times callables on the current CUDA device with a policy; owns the L2 flush buffer and the spin's clock."""

    def __init__(self, policy: TimingPolicy, device: torch.device | str = "cuda") -> None:
        self.policy = policy
        self.flush = flush_buffer(policy, device)
        self.flush_ms = _flush_ms(self.flush, policy.flush)
        self.spin_cycles_per_ms = _spin_cycles_per_ms() if policy.hold_base_ms > 0 else 0.0
        self.host_ms_per_run = 10 * policy.hold_per_run_ms  # the host's pace in the latest round: the next spin's size
        self.retries = 0  # rounds timed again because the GPU ran out of queued work

    def time(self, function: Callable[[], object], repeats: int | None = None) -> list[float]:
        """The latencies in ms of `policy.repeats_for(estimate)` runs of `function`, each after an L2 flush; or of
        `repeats` runs, where given (a screen), with no estimate round."""
        if repeats is not None and repeats < 1:
            raise ValueError(f"repeats must be at least 1, got {repeats}")
        for _ in range(self.policy.warmup_runs):
            function()
        torch.cuda.synchronize()
        if repeats is not None:
            return self._timed_runs(function, repeats, self.flush_ms)
        estimate = self._timed_runs(function, 1, self.flush_ms)[0]
        return self._timed_runs(function, self.policy.repeats_for(estimate), estimate + self.flush_ms)

    def _timed_runs(self, function: Callable[[], object], count: int, gpu_ms_per_run: float) -> list[float]:
        """Times of `count` runs, each taking the GPU about `gpu_ms_per_run` (a flush included). If the GPU ran out
        of queued work before the host had queued them, they are timed once more, behind a spin sized by the host's
        pace in the drained round."""
        hold_ms = self.policy.hold_ms(count, self.host_ms_per_run, gpu_ms_per_run)
        times, self.host_ms_per_run, drained = _timed_runs(function, self.flush, self.policy.flush, count,
                                                           round(hold_ms * self.spin_cycles_per_ms))
        if drained:
            self.retries += 1
            hold_ms = max(hold_ms, self.policy.hold_ms(count, self.host_ms_per_run)) * self.policy.hold_retry_factor
            times, self.host_ms_per_run, _ = _timed_runs(function, self.flush, self.policy.flush, count,
                                                         round(hold_ms * self.spin_cycles_per_ms))
        return times


def _timed_runs(function: Callable[[], object], flush: torch.Tensor | None, mode: str, count: int,
                hold_cycles: int) -> tuple[list[float], float, bool]:
    """Times of `count` runs; the host's ms to queue one run; whether, behind a spin, the GPU ran out of queued work:
    a run's start event had already been reached when the host had launched the run and recorded its end, so that
    the GPU may have waited for the host inside the timed region."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
    drained = False
    if hold_cycles > 0:
        torch.cuda._sleep(hold_cycles)
    queued = time.perf_counter()
    for start, end in zip(starts, ends):
        evict(flush, mode)
        start.record()
        function()
        end.record()
        drained = drained or (hold_cycles > 0 and start.query())
    host_ms = 1e3 * (time.perf_counter() - queued) / count
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in zip(starts, ends)], host_ms, drained


def _spin_cycles_per_ms(calibration_cycles: int = 2_000_000, rounds: int = 5) -> float:
    """GPU clock cycles that `torch.cuda._sleep` spins per millisecond, measured (clocks vary by GPU and load)."""
    torch.cuda._sleep(calibration_cycles)  # the first spin also raises the clocks from idle
    elapsed = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(calibration_cycles)
        end.record()
        end.synchronize()
        elapsed.append(start.elapsed_time(end))
    return calibration_cycles / statistics.median(elapsed)


_READ_BLOCK = 4096  # int32s a program reads


@triton.jit
def _read_all(buffer, n, BLOCK: tl.constexpr):
    """Sum one block of the buffer and store the sum only where it equals a sentinel, so that the compiler keeps the
    loads and the L2 sees reads and (all but never) no write. About 0.1 ms for 256 MiB on an H100, as zeroing it."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    total = tl.sum(tl.load(buffer + offsets, mask=offsets < n, other=0), axis=0)
    tl.store(buffer + tl.program_id(0), total, mask=total == -123456789)


def evict(flush: torch.Tensor | None, mode: str) -> None:
    """Evict the L2 by writing the flush buffer ("zero": its lines stay in L2, dirty, and the next kernel's misses
    write them back to memory) or by reading it ("read": clean lines, dropped without a write); nothing without one.
    The read is a Triton kernel: torch's int32 `sum` took about 4.5x as long (0.49 ms against 0.11 ms for 256 MiB on
    an H100; results/flush_speed_h100.md, by benchmarks/flush_speed.py)."""
    if flush is None:
        return
    if mode == "zero":
        flush.zero_()
    else:
        _read_all[(triton.cdiv(flush.numel(), _READ_BLOCK),)](flush, flush.numel(), BLOCK=_READ_BLOCK)


def _flush_ms(flush: torch.Tensor | None, mode: str, rounds: int = 5) -> float:
    """GPU time of one L2 flush (median of a few), 0 without a flush buffer."""
    if flush is None:
        return 0.0
    elapsed = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        evict(flush, mode)
        end.record()
        end.synchronize()
        elapsed.append(start.elapsed_time(end))
    return statistics.median(elapsed)


def flush_buffer(policy: TimingPolicy, device: torch.device | str = "cuda") -> torch.Tensor | None:
    """The buffer whose zeroing (or reading) evicts the L2 cache between runs."""
    if policy.flush_bytes == 0:
        return None
    return torch.empty(policy.flush_bytes // 4, dtype=torch.int32, device=device)
