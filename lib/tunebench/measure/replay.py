"""Replay: answer a strategy's batches from a recorded Dataset instead of a GPU, on a simulated clock.

A study that took GPU hours replays in seconds on a laptop, and every strategy runs unchanged against either.
"""

from __future__ import annotations

import heapq
import math
import numbers
import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from tunebench.kernels import launch_parameters
from tunebench.measure.dataset import Dataset
from tunebench.measure.result import Result, Status
from tunebench.space import ConfigError, Space

MODES = ("deterministic", "noisy")
# How a batch's time is charged: "sequential" compiles the batch's new binaries, then times every config
# (`compile_makespan` + the benchmark times, the design's contract and Kernel Tuner's simulation mode); "pipelined"
# times each binary's configs as its compile ends while the other workers go on compiling, as `GpuBench` does
# (`pipelined_makespan`).
CLOCKS = ("sequential", "pipelined")


@dataclass(frozen=True)
class _Record:
    """One recorded (shape, config) row, ready to answer with."""

    key: tuple
    binary: tuple  # the key without the family's launch parameters: configs that share it share a compiled binary
    config: dict[str, Any]
    status: Status
    latency_ms: float | None
    repeats_ms: tuple[float, ...]
    compile_s: float
    bench_s: float
    error: str


def compile_makespan(compile_s: Sequence[float], workers: int) -> float:
    """Seconds to compile a batch on `workers` parallel workers, each config in batch order going to the
    worker that frees first (what a worker pool draining a queue does)."""
    if not compile_s:
        return 0.0
    free_at = [0.0] * min(workers, len(compile_s))
    for seconds in compile_s:
        heapq.heappush(free_at, heapq.heappop(free_at) + seconds)
    return max(free_at)


def check_clock(clock: str, startup_s: float) -> None:
    """A clear error for a clock not in `CLOCKS` or a start-up that is not a finite number of seconds >= 0."""
    if clock not in CLOCKS:
        raise ValueError(f"unknown replay clock {clock!r}; allowed: {', '.join(CLOCKS)}")
    if not isinstance(startup_s, numbers.Real) or not math.isfinite(startup_s) or startup_s < 0:
        raise ValueError(f"startup_s must be a finite number of seconds >= 0, got {startup_s!r}")


def pipelined_makespan(timed_first_s: Sequence[float], compiles: Sequence[tuple[float, Sequence[float]]],
                       workers: int) -> float:
    """Seconds to measure a batch as `GpuBench.measure_iter` does: the configs of binaries compiled before
    (`timed_first_s`, their benchmark seconds) are timed first, one after another; then each new binary, as
    (compile seconds, benchmark seconds of its configs) in batch order, goes to the first free one of `workers`
    compile workers. A binary's configs are timed as its compile ends, on the one timer; compiles that end meanwhile
    wait for the timer, and a worker that is done gets its next binary only once the timer is idle again (the
    compile pool hands out work between timings)."""
    clock = float(sum(timed_first_s))
    waiting = list(compiles)[::-1]
    running: list[tuple[float, int, Sequence[float]]] = []  # (compile ends at, order, its configs' bench seconds)
    order = 0
    while waiting or running:
        while waiting and len(running) < workers:
            compile_s, bench_s = waiting.pop()
            heapq.heappush(running, (clock + compile_s, order, bench_s))
            order += 1
        clock = max(clock, running[0][0])
        done = []
        while running and running[0][0] <= clock:
            done.append(heapq.heappop(running))
        for _, _, bench_s in done:
            clock += sum(bench_s)
    return clock


class ReplayEvaluator:
    """The Evaluator protocol over one task (shape) of a Dataset.

    deterministic mode answers the recorded median; noisy mode a bootstrap median of the recorded repeats
    (resampled with replacement, same count) from the evaluator's own seeded generator. The simulated clock
    charges each batch its time on `compile_workers` workers by the `clock` named (`CLOCKS`), plus what `charge`
    adds; with `startup_s`, no batch starts before that many seconds from the evaluator's creation (the workers'
    start-up, which a live run pays once). As in the live evaluator (`GpuBench`), a binary is compiled once: a config
    asked again, or one that differs from another only in launch parameters (`kernels.launch_parameters`), in the
    same batch or an earlier one, charges its benchmark time only. A binary's compile time is the longest its configs
    recorded (a sweep's cache hits recorded milliseconds).
    """

    def __init__(self, dataset: Dataset, shape: Sequence[int], *, mode: str = "deterministic", seed: int = 0,
                 compile_workers: int | None = None, clock: str = "sequential", startup_s: float = 0.0) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown replay mode {mode!r}; allowed: {', '.join(MODES)}")
        check_clock(clock, startup_s)
        source = "compile_workers"
        if compile_workers is None:
            compile_workers = dataset.provenance.get("compile_workers")
            source = "the dataset's provenance['compile_workers']"
            if compile_workers is None:
                compile_workers = 1
        if not isinstance(compile_workers, numbers.Integral) or isinstance(compile_workers, bool) \
                or compile_workers < 1:
            raise ValueError(f"{source} must be an integer >= 1, got {compile_workers!r}")
        self.dataset = dataset
        self.shape = tuple(int(size) for size in shape)
        self.mode = mode
        self.seed = seed
        self.compile_workers = int(compile_workers)
        self.clock = clock
        self.startup_s = float(startup_s)
        self.space: Space = dataset.space(self.shape)
        self._names = dataset.parameter_names
        self._rng = np.random.default_rng(seed)
        self._elapsed_s = 0.0
        self._binaries: set[tuple] = set()
        self._records = self._index(dataset, self.shape)
        self._binary_compile_s: dict[tuple, float] = {}
        for record in self._records.values():
            self._binary_compile_s[record.binary] = max(record.compile_s,
                                                        self._binary_compile_s.get(record.binary, 0.0))
        ok = [record.latency_ms for record in self._records.values() if record.latency_ms is not None]
        self._optimum_ms = min(ok) if ok else None
        self._vendor_ms = dataset.vendor_ms(self.shape)

    def _index(self, dataset: Dataset, shape: tuple[int, ...]) -> dict[tuple, _Record]:
        task = dataset.task(shape)
        columns = {name: task[name].tolist()
                   for name in (*self._names, "status", "latency_ms", "repeats_ms", "compile_s", "bench_s", "error")}
        launch = launch_parameters(dataset.kernel)
        binary_names = [name for name in self._names if name not in launch]
        records = {}
        for row in range(len(task)):
            key = tuple(columns[name][row] for name in self._names)
            status = Status(columns["status"][row])
            repeats = tuple(columns["repeats_ms"][row])
            records[key] = _Record(
                key=key, binary=tuple(columns[name][row] for name in binary_names), config=dict(zip(self._names, key)),
                status=status,
                latency_ms=float(columns["latency_ms"][row]) if status is Status.OK else None,
                repeats_ms=repeats,
                compile_s=columns["compile_s"][row], bench_s=columns["bench_s"][row], error=columns["error"][row])
        return records

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Result]:
        """One result per config, in order; every config is checked before anything is charged."""
        records = [self._lookup(config) for config in configs]
        results = [Result(dict(record.config), record.status, latency_ms=self._latency(record),
                          repeats_ms=record.repeats_ms, compile_s=record.compile_s, bench_s=record.bench_s,
                          error=record.error) for record in records]
        timed_first_s = []  # configs of binaries compiled in an earlier batch
        new_binaries: dict[tuple, list[float]] = {}  # binary -> its configs' benchmark seconds, in batch order
        for record in records:
            if record.binary in self._binaries:
                timed_first_s.append(record.bench_s)
            else:
                new_binaries.setdefault(record.binary, []).append(record.bench_s)
        self._binaries.update(new_binaries)
        if records:
            self._elapsed_s = max(self._elapsed_s, self.startup_s)
        compile_s = [self._binary_compile_s[binary] for binary in new_binaries]
        if self.clock == "pipelined":
            self._elapsed_s += pipelined_makespan(timed_first_s, list(zip(compile_s, new_binaries.values())),
                                                  self.compile_workers)
        else:
            self._elapsed_s += compile_makespan(compile_s, self.compile_workers)
            self._elapsed_s += sum(record.bench_s for record in records)
        return results

    def _latency(self, record: _Record) -> float | None:
        if record.latency_ms is None or self.mode == "deterministic":
            return record.latency_ms
        count = len(record.repeats_ms)
        # statistics.median of a short list is several times faster than numpy's, and strategies ask a lot
        return statistics.median([record.repeats_ms[i] for i in self._rng.integers(0, count, size=count).tolist()])

    def _lookup(self, config: Mapping[str, Any]) -> _Record:
        if isinstance(config, Mapping) and len(config) == len(self._names):
            try:
                record = self._records.get(tuple(config[name] for name in self._names))
            except (KeyError, TypeError):  # a missing parameter or an unhashable value: explained below
                record = None
            if record is not None:
                return record
        self.space.check(config)  # raises, naming the config and each problem, the "recorded" constraint included
        raise ConfigError(f"config {config!r} was not recorded in space {self.space.name!r}")

    @property
    def elapsed_s(self) -> float:
        """Simulated seconds: compile makespans and benchmark times of the batches, plus charged strategy time."""
        return self._elapsed_s

    def charge(self, seconds: float) -> None:
        """Add a strategy's own CPU time to the simulated clock."""
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"charge takes a finite number of seconds >= 0, got {seconds!r}")
        self._elapsed_s += seconds

    @property
    def optimum_ms(self) -> float:
        """The best ok latency recorded for the task."""
        if self._optimum_ms is None:
            raise ValueError(f"{self.dataset.kernel} shape {self.shape} has no ok measurement")
        return self._optimum_ms

    @property
    def vendor_ms(self) -> float | None:
        """The vendor library's latency for the task; None if not recorded."""
        return self._vendor_ms
