"""A stand-in for the collector's GPU back end (GpuBench) in tests: it answers like the GPU would, with latencies
computed from the config and failures a test chooses, so sweeps, journals, replay and search run on a CPU."""

import os
import time

from tunebench.kernels import get_kernel
from tunebench.measure.result import Result, Status


class StandInBench:
    """Answers like GpuBench. A test's subclass gives `latency_ms(config, shape)` and may make some configs fail to
    compile (`fails_to_compile`); STAND_IN_DELAY_S slows each measurement, so that a sweep can be killed mid-way."""

    def __init__(self, kernel_name, dtype, *, compile_workers=None, timing=None, seed=0, known_compile_s=None,
                 on_compile=None):
        self.space = get_kernel(kernel_name).config_space()
        self.on_compile = on_compile
        self.delay_s = float(os.environ.get("STAND_IN_DELAY_S", "0"))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def latency_ms(self, config, shape) -> float:
        raise NotImplementedError

    def fails_to_compile(self, config) -> bool:
        return False

    def provenance(self, command=()):
        return {"gpu_name": "stand-in", "command": " ".join(command), "date": time.time(), "compile_workers": 2,
                "timing": {"delay_s": self.delay_s}}

    def measure_vendor(self, shape):
        return Result({}, Status.OK, latency_ms=1.0, repeats_ms=(1.0, 1.0, 1.0), bench_s=0.01)

    def measure(self, configs, shape):
        return [result for _, result in self.measure_iter(configs, shape)]

    def measure_iter(self, configs, shape, deadline=None, repeats=None):
        for index, config in enumerate(configs):
            if deadline is not None and time.monotonic() > deadline:  # as GpuBench: stop within a shape
                return
            time.sleep(self.delay_s)
            if self.on_compile is not None:
                self.on_compile((True,), self.space.key(config), 0.5)
            if self.fails_to_compile(config):
                yield index, Result(dict(config), Status.COMPILE_ERROR, compile_s=0.5, error="stand-in failure")
                continue
            latency = self.latency_ms(config, shape)
            yield index, Result(dict(config), Status.OK, latency_ms=latency, repeats_ms=(latency,) * (repeats or 3),
                                compile_s=0.5, bench_s=0.02)
