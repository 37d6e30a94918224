"""Live measurement on a GPU: parallel compilation with a timeout, then crash-isolated, checked timing.

`GpuBench` owns the worker processes of one kernel and dtype; `LiveEvaluator` adapts it to one task.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import math
import os
import platform
import statistics
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from tunebench.kernels import complete_config, get_kernel, kernel_source_sha256, launch_parameters
from tunebench.measure.cross_compile import compile_for, device_target
from tunebench.measure.result import Result, Status
from tunebench.measure.timing import TimingPolicy
from tunebench.measure.workers import (START_METHOD, Worker, WorkerDied, WorkerTimedOut, close_all,
                                       start_worker_server, wait_any)

Shape = tuple[int, ...]


@dataclass(frozen=True)
class CompileOutcome:
    """What compiling one config for one specialization gave."""

    status: Status
    compile_s: float
    error: str = ""


# --------------------------------------------------------------------------------------------
# Worker-side handlers (run in child processes; module-level so that they pickle)
# --------------------------------------------------------------------------------------------

def _short_error(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 500 else text[:500] + "..."


def _classify_compile_error(error: BaseException) -> Status:
    name = type(error).__name__
    if name == "OutOfResources" or "out of resource" in str(error).lower():
        return Status.OUT_OF_RESOURCES
    return Status.COMPILE_ERROR


def _compile_handler(kernel_name: str, dtype: str, target: Any) -> Callable[[tuple], CompileOutcome]:
    if target is not None:
        compile_for(target)
    kernel = get_kernel(kernel_name)

    def handle(request: tuple) -> CompileOutcome:
        config, shape = request
        start = time.perf_counter()
        try:
            kernel.compile_only(config, shape, dtype)
        except Exception as error:  # a failure is data: classify it and go on
            return CompileOutcome(_classify_compile_error(error), time.perf_counter() - start, _short_error(error))
        return CompileOutcome(Status.OK, time.perf_counter() - start)

    return handle


def _is_fatal_cuda_error(error: BaseException) -> bool:
    """Errors after which the CUDA context cannot be trusted (illegal address, launch failure, ...)."""
    text = f"{type(error).__name__} {error}".lower()
    return any(marker in text for marker in ("acceleratorerror", "cuda error", "illegal", "unspecified launch", "misaligned"))


def _classify_timing_error(error: BaseException) -> tuple[Status, bool]:
    """The status of an error raised while checking or timing, and whether the worker must be replaced."""
    if _is_fatal_cuda_error(error):
        return Status.CRASH, True
    if _classify_compile_error(error) is Status.OUT_OF_RESOURCES:
        return Status.OUT_OF_RESOURCES, False
    if type(error).__module__.startswith("triton.compiler"):
        return Status.COMPILE_ERROR, False
    return Status.CRASH, True  # unknown state: a fresh process is the safe assumption


class _TimingHandler:
    """Holds the CUDA context, the current shape's inputs, reference and the L2 flush buffer."""

    def __init__(self, kernel_name: str, dtype: str, policy: TimingPolicy, seed: int) -> None:
        import torch

        from tunebench.measure.timing import Timer

        self.torch = torch
        torch.backends.cuda.matmul.allow_tf32 = False  # the reference must be true fp32
        self.kernel = get_kernel(kernel_name)
        self.dtype, self.seed = dtype, seed
        self.timer = Timer(policy)
        self.shape: Shape | None = None

    def _prepare(self, shape: Shape) -> None:
        if shape != self.shape:
            self.inputs = self.reference = None
            self.torch.cuda.empty_cache()
            self.inputs = self.kernel.make_inputs(shape, self.dtype, "cuda", self.seed)
            self.reference = self.kernel.reference(self.inputs)
            self.shape = shape

    def __call__(self, request: tuple) -> dict[str, Any]:
        kind, shape, config, *screen_runs = request  # a screen: its fixed count of timed runs, if given
        start = time.perf_counter()
        try:
            self._prepare(shape)
            if kind == "prepare":
                return {"status": Status.OK.value, "bench_s": time.perf_counter() - start}
            if kind == "vendor":
                function = functools.partial(self.kernel.run_vendor, self.inputs)
            else:
                function = functools.partial(self.kernel.run, config, self.inputs)
            self.inputs.out.fill_(math.nan)  # poison: an element the kernel never writes fails the check
            function()
            self.torch.cuda.synchronize()
            error = self.kernel.relative_error(self.inputs.out, self.reference)
            tolerance = self.kernel.TOLERANCE[self.dtype]
            if not error <= tolerance:
                return {"status": Status.WRONG_RESULT.value, "bench_s": time.perf_counter() - start,
                        "error": f"relative error {error:.3g} > tolerance {tolerance:g}"}
            repeats = self.timer.time(function, *screen_runs)
        except Exception as error:
            status, fatal = _classify_timing_error(error)
            return {"status": status.value, "bench_s": time.perf_counter() - start, "error": _short_error(error),
                    "fatal": fatal}
        return {"status": Status.OK.value, "bench_s": time.perf_counter() - start, "repeats_ms": repeats,
                "relative_error": error}


def _timing_handler(kernel_name: str, dtype: str, policy: TimingPolicy, seed: int) -> _TimingHandler:
    return _TimingHandler(kernel_name, dtype, policy, seed)


# --------------------------------------------------------------------------------------------
# Parent side
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CorePlan:
    """Which CPU cores the timing worker has to itself and which the compile workers (and this process) share.

    A timing worker that shares its core with busy compile workers is preempted between launching a kernel and
    recording its end event; the gap then counts as kernel time (seen as runs 10x slower than their neighbours).
    """

    timing: frozenset[int] | None
    shared: frozenset[int] | None

    @classmethod
    def for_this_machine(cls, min_cores: int = 4) -> CorePlan:
        """The first core of this process's affinity for timing and the rest shared; no pinning on fewer cores."""
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) < min_cores:
            return cls(None, None)
        return cls(frozenset(cores[:1]), frozenset(cores[1:]))

    def default_compile_workers(self) -> int:
        """One per shared core but one, left to this process; without a plan, one per core but one."""
        cores = len(self.shared) if self.shared else (os.cpu_count() or 2)
        return max(1, cores - 1)


class CompilePool:
    """Compiles (config, shape) pairs on `workers` processes; a compile that outlives the timeout is killed. With a
    `target` (`cross_compile.device_target()`) the workers compile for it without CUDA; without one, for their GPU."""

    def __init__(self, kernel_name: str, dtype: str, workers: int, timeout_s: float,
                 cpus: frozenset[int] | None = None, target: Any = None) -> None:
        if workers < 1:
            raise ValueError(f"compile workers must be >= 1, got {workers}")
        make = functools.partial(_compile_handler, kernel_name, dtype, target)
        self.workers = [Worker(make, name=f"compile-{i}", cpus=cpus) for i in range(workers)]
        self.timeout_s = timeout_s

    def compile(self, requests: Iterable[tuple[Any, tuple[Mapping[str, Any], Shape]]]) -> Iterator[tuple[Any, CompileOutcome]]:
        """Yield (tag, outcome) for each (tag, (config, shape)) request, in order of completion."""
        pending = list(requests)[::-1]
        running: dict[Worker, Any] = {}
        try:
            yield from self._run(pending, running)
        finally:
            for worker in running:  # the consumer stopped early: drop the compiles in flight
                worker.restart()

    def _run(self, pending: list, running: dict) -> Iterator[tuple[Any, CompileOutcome]]:
        while pending or running:
            for worker in self.workers:
                if worker not in running and pending:
                    tag, request = pending.pop()
                    worker.submit(request)
                    running[worker] = tag
            for worker in wait_any(list(running), timeout_s=0.2):
                tag = running.pop(worker)
                started = worker.busy_since or time.monotonic()
                try:
                    yield tag, worker.receive(timeout_s=0)
                except (WorkerDied, WorkerTimedOut) as error:
                    yield tag, CompileOutcome(Status.CRASH, time.monotonic() - started, str(error))
            now = time.monotonic()
            overdue = [w for w in running if now - (w.busy_since or now) > self.timeout_s and not w.connection.poll()]
            for worker in overdue:
                tag = running.pop(worker)
                worker.restart()
                yield tag, CompileOutcome(Status.TIMEOUT, self.timeout_s, f"compile exceeded {self.timeout_s:.0f} s")

    def close(self) -> None:
        close_all(self.workers)


def worker_modules(kernel: str) -> tuple[str, ...]:
    """The modules a bench's workers import: the worker server imports them once for all (`start_worker_server`)."""
    return ("torch", "triton", get_kernel(kernel).__name__, __name__)


class GpuBench:
    """Compile workers and one timing worker for a kernel family and dtype, shared across shapes.

    Only the timing worker starts CUDA: the compile workers compile for this process's GPU target (`cross_compile`).
    Workers are forked from a server that imports `worker_modules(kernel)` once; started here, it delays the first
    bench of a process by that import, unless `start_worker_server` started it earlier.

    On a machine of 4 or more cores the timing worker gets a core of its own (`CorePlan`); the compile workers and
    this process are confined to the others until `close`.

    Compiled binaries live in Triton's on-disk cache; a binary (a config less the family's launch parameters, for a
    specialization) compiled once is not compiled again, and configs of one binary asked together are compiled once.
    Its first compile time is reported for every config and shape that shares it: that is what a tuning run of that
    shape alone would pay.
    """

    def __init__(self, kernel: str, dtype: str, *, compile_workers: int | None = None,
                 compile_timeout_s: float = 120.0, bench_timeout_s: float = 120.0,
                 timing: TimingPolicy = TimingPolicy(), seed: int = 0,
                 known_compile_s: Mapping[tuple, float] | None = None,
                 on_compile: Callable[[tuple, tuple, float], None] | None = None) -> None:
        self.kernel = get_kernel(kernel)
        if dtype not in self.kernel.DTYPES:
            raise ValueError(f"unknown dtype {dtype!r} for kernel {kernel}; allowed: {', '.join(self.kernel.DTYPES)}")
        self.dtype = dtype
        self.space = self.kernel.config_space()
        self.timing = timing
        self.cores = CorePlan.for_this_machine()
        self.compile_workers = compile_workers or self.cores.default_compile_workers()
        self.bench_timeout_s = bench_timeout_s
        self._affinity = os.sched_getaffinity(0)
        if self.cores.shared:
            os.sched_setaffinity(0, self.cores.shared)
        start_worker_server(worker_modules(kernel))
        # The timing worker first: its CUDA start-up, the longest, runs while the target is found and the compile
        # workers start.
        self.timer = Worker(functools.partial(_timing_handler, kernel, dtype, timing, seed), name="timing",
                            cpus=self.cores.timing)
        try:
            self.target = device_target()
        except Exception as error:  # no GPU: leave nothing running
            close_all([self.timer])
            os.sched_setaffinity(0, self._affinity)
            raise RuntimeError(f"GpuBench needs a CUDA GPU; Triton found none ({error})") from error
        self.compile_pool = CompilePool(kernel, dtype, self.compile_workers, compile_timeout_s, self.cores.shared,
                                        self.target)
        self._preparing = False  # a `prepare` request is in flight on the timing worker
        launch = launch_parameters(kernel)
        self._binary_positions = [i for i, name in enumerate(self.space.names) if name not in launch]
        self.compiled: dict[tuple, CompileOutcome] = {}  # (specialization, binary) -> outcome, this process
        # Compile times measured in an earlier sitting, by (specialization, config key): a warm on-disk cache would
        # otherwise report ~0 s. A binary's is the longest of its configs'.
        self.known_compile_s: dict[tuple, float] = {}
        for (special, key), seconds in (known_compile_s or {}).items():
            binary = (special, self.binary(key))
            self.known_compile_s[binary] = max(seconds, self.known_compile_s.get(binary, 0.0))
        self.on_compile = on_compile

    def binary(self, key: tuple) -> tuple:
        """A config key less the family's launch parameters: configs with equal ones share a compiled binary."""
        return tuple(key[i] for i in self._binary_positions)

    def measure(self, configs: Sequence[Mapping[str, Any]], shape: Shape) -> list[Result]:
        """One result per config, in order."""
        results = dict(self.measure_iter(configs, shape))
        return [results[index] for index in range(len(configs))]

    def measure_iter(self, configs: Sequence[Mapping[str, Any]], shape: Shape, deadline: float | None = None,
                     repeats: int | None = None) -> Iterator[tuple[int, Result]]:
        """Yield (index, result) as each config is timed: configs not compiled yet are compiled in parallel
        while compiled ones are timed. After `deadline` (time.monotonic()) nothing new is started. `repeats` fixes
        the number of timed runs (a screen) instead of the timing policy's."""
        shape = self.kernel.check_shape(shape)
        configs = [complete_config(self.kernel.NAME, config) for config in configs]
        for config in configs:
            self.space.check(config)
        keys = [self.space.key(config) for config in configs]
        binaries = [self.binary(key) for key in keys]
        special = self.kernel.specialization(shape)
        to_compile = []
        waiting: dict[tuple, list[int]] = {}  # binary -> the batch's other configs of it, timed once it is compiled
        for index, binary in enumerate(binaries):
            if (special, binary) in self.compiled:
                if deadline is not None and time.monotonic() > deadline:
                    return
                yield index, self._time(configs[index], shape, self.compiled[(special, binary)], repeats)
            elif binary in waiting:
                waiting[binary].append(index)
            else:
                waiting[binary] = []
                to_compile.append((index, (dict(configs[index]), shape)))
        compiling = self.compile_pool.compile(to_compile)
        try:
            for index, outcome in compiling:
                binary = binaries[index]
                if (special, binary) in self.known_compile_s:
                    outcome = dataclasses.replace(outcome, compile_s=self.known_compile_s[(special, binary)])
                elif self.on_compile is not None:
                    self.on_compile(special, keys[index], outcome.compile_s)
                self.compiled[(special, binary)] = outcome
                for member in (index, *waiting[binary]):
                    yield member, self._time(configs[member], shape, outcome, repeats)
                    if deadline is not None and time.monotonic() > deadline:
                        return
        finally:
            compiling.close()

    def _time(self, config: Mapping[str, Any], shape: Shape, outcome: CompileOutcome,
              repeats: int | None = None) -> Result:
        if outcome.status is not Status.OK:
            return Result(dict(config), outcome.status, compile_s=outcome.compile_s, error=outcome.error)
        request = ("config", shape, dict(config)) if repeats is None else ("config", shape, dict(config), repeats)
        answer = self._call_timer(request)
        return _result_from_answer(dict(config), answer, outcome.compile_s)

    def prepare(self, shape: Shape) -> None:
        """Have the timing worker make the shape's inputs and reference (starting CUDA first, if it has not) while
        this process goes on: the first compiles then overlap them. A failure there is met again, and reported, by the
        shape's first timing. One at a time: while one is in flight, another shape's is not sent (its first timing
        makes its inputs)."""
        shape = self.kernel.check_shape(shape)
        if not self._preparing:
            self.timer.submit(("prepare", shape, None))
            self._preparing = True

    def measure_vendor(self, shape: Shape) -> Result:
        """The vendor library's latency for the shape, measured and checked the same way."""
        shape = self.kernel.check_shape(shape)
        return _result_from_answer({}, self._call_timer(("vendor", shape, None)), 0.0)

    def _finish_prepare(self) -> None:
        """Wait for a `prepare` in flight. Whatever went wrong in it, the next request meets again, on a fresh worker
        where the error was fatal (`receive` restarts one that hung or died)."""
        if not self._preparing:
            return
        self._preparing = False
        try:
            answer = self.timer.receive(timeout_s=self.bench_timeout_s)
        except (WorkerTimedOut, WorkerDied):
            return
        if answer.get("fatal"):
            self.timer.restart()

    def _call_timer(self, request: tuple) -> dict[str, Any]:
        self._finish_prepare()
        start = time.perf_counter()
        try:
            answer = self.timer.call(request, timeout_s=self.bench_timeout_s)
        except WorkerTimedOut as error:
            return {"status": Status.TIMEOUT.value, "bench_s": time.perf_counter() - start, "error": str(error)}
        except WorkerDied as error:
            return {"status": Status.CRASH.value, "bench_s": time.perf_counter() - start, "error": str(error)}
        if answer.get("fatal"):
            self.timer.restart()  # the CUDA context is poisoned: later configs get a fresh one
        return answer

    def provenance(self, command: Sequence[str] = ()) -> dict[str, Any]:
        """Where and how this bench measures: GPU, driver, software versions, timing method, date."""
        import torch
        import triton

        try:
            driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                    capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            driver = "unknown"
        properties = torch.cuda.get_device_properties(0)
        return {
            "gpu_name": properties.name, "gpu_uuid": str(getattr(properties, "uuid", "unknown")),
            "sm_count": properties.multi_processor_count,
            "compute_capability": f"{properties.major}.{properties.minor}",
            "memory_gib": round(properties.total_memory / 2**30, 1), "driver": driver, "cuda": torch.version.cuda,
            "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
            "kernel_source_sha256": kernel_source_sha256(self.kernel),
            "host_cpus": os.cpu_count(), "compile_workers": self.compile_workers, "worker_start": START_METHOD,
            "compile_target": str(self.target),
            "timing_core": sorted(self.cores.timing) if self.cores.timing else "shared", "timing": self.timing.describe(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(command),
        }

    def close(self) -> None:
        close_all([*self.compile_pool.workers, self.timer])
        os.sched_setaffinity(0, self._affinity)

    def __enter__(self) -> "GpuBench":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _result_from_answer(config: dict, answer: Mapping[str, Any], compile_s: float) -> Result:
    status = Status(answer["status"])
    repeats = tuple(float(x) for x in answer.get("repeats_ms", ()))
    latency = statistics.median(repeats) if status is Status.OK else None
    return Result(config, status, latency_ms=latency, repeats_ms=repeats, compile_s=compile_s,
                  bench_s=float(answer["bench_s"]), error=answer.get("error", ""))


class LiveEvaluator:
    """The Evaluator protocol over a GpuBench for one shape; the clock is the wall clock. `measured` keeps each
    evaluated config with the clock's reading when its result came and the result, in that order: when each compile
    and timing ended, which a trace's one reading per batch does not show."""

    def __init__(self, bench: GpuBench, shape: Shape) -> None:
        self.bench = bench
        self.shape = bench.kernel.check_shape(shape)
        self.space = bench.space
        self.measured: list[tuple[dict[str, Any], float, Result]] = []
        bench.prepare(self.shape)
        self._start = time.monotonic()

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Result]:
        results = {}
        for index, result in self.bench.measure_iter(configs, self.shape):
            results[index] = result
            self.measured.append((dict(configs[index]), self.elapsed_s, result))
        return [results[index] for index in range(len(configs))]

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._start

    def charge(self, seconds: float) -> None:
        """The wall clock already contains the strategy's own time."""
