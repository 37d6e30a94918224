"""GpuBench's bookkeeping without a GPU: a binary is compiled once, however many configs of it are asked, and when;
and two benches, one per GEMM family, raced in one process (benchmarks/live_search.py --kernel both)."""

import os
import sys
from pathlib import Path

import pytest
import torch

from tunebench.kernels import matmul, matmul_tma
from tunebench.measure import live
from tunebench.measure.result import Status
from tunebench.space import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # the scripts import their siblings
import live_search  # noqa: E402

SHAPE = (256, 512, 512)
BASE = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "PROGRAMS_PER_SM": 0, "WARP_SPECIALIZE": False,
        "FLATTEN": False, "EPILOGUE_SPLIT": 1, "WIDEN": False, "TALL": False, "SPLIT_K": 1, "num_warps": 8,
        "num_stages": 3}


class RecordingPool:
    """Compiles nothing: records each request and answers ok in 1.5 s."""

    requests: list = []

    def __init__(self, *args, **kwargs):
        self.workers = []

    def compile(self, requests):
        for tag, (config, shape) in requests:
            RecordingPool.requests.append(config)
            yield tag, live.CompileOutcome(Status.OK, 1.5)


class AnsweringTimer:
    """Answers a timing at once (1 ms more per PROGRAMS_PER_SM); a submitted request waits for `receive`."""

    log: list = []
    prepare_fails = False

    def __init__(self, *args, **kwargs):
        self.pending = None

    def submit(self, request):
        AnsweringTimer.log.append(("submit", request[0]))
        self.pending = request

    def receive(self, timeout_s=None):
        AnsweringTimer.log.append(("receive", self.pending[0]))
        if AnsweringTimer.prepare_fails:
            raise live.WorkerDied("timing exited (exit code -9) while serving a request")
        return {"status": "ok", "bench_s": 0.01}

    def call(self, request, timeout_s=None):
        kind, shape, config, *screen_runs = request
        AnsweringTimer.log.append(("call", kind, *screen_runs))
        return {"status": "ok", "bench_s": 0.01, "repeats_ms": [1.0 + (config or {}).get("PROGRAMS_PER_SM", 0)]}


@pytest.fixture
def bench(monkeypatch):
    RecordingPool.requests, AnsweringTimer.log, AnsweringTimer.prepare_fails = [], [], False
    monkeypatch.setattr(live, "CompilePool", RecordingPool)
    monkeypatch.setattr(live, "Worker", AnsweringTimer)
    monkeypatch.setattr(live, "close_all", lambda workers: None)
    monkeypatch.setattr(live, "start_worker_server", lambda modules: 0.0)
    monkeypatch.setattr(live, "device_target", lambda: "sm_90 stand-in")
    compiles = []

    def make(kernel, **kwargs):
        return live.GpuBench(kernel, "bfloat16", compile_workers=2,
                             on_compile=lambda special, key, seconds: compiles.append(key), **kwargs)
    yield make, compiles


def test_configs_of_one_binary_compile_once_in_a_batch_and_after(bench):
    make, compiles = bench
    with make("matmul_tma") as gpu:
        grid_only = [dict(BASE, PROGRAMS_PER_SM=programs) for programs in (0, 1, 2)]
        other = dict(BASE, BLOCK_K=32)
        results = gpu.measure([*grid_only, other], SHAPE)
        assert [result.latency_ms for result in results] == [1.0, 2.0, 3.0, 1.0]  # each timed as itself
        assert all(result.compile_s == 1.5 and result.status is Status.OK for result in results)
        assert RecordingPool.requests == [grid_only[0], other]
        assert len(compiles) == 2
        gpu.measure([dict(other, PROGRAMS_PER_SM=2), grid_only[1]], SHAPE)  # both binaries are compiled already
        assert len(RecordingPool.requests) == 2
        gpu.measure([grid_only[0]], (256, 512, 520))  # another specialization (K off multiples of 16)
        assert len(RecordingPool.requests) == 3


def test_a_config_recorded_before_a_parameter_joined_the_space_is_measured_as_it_was_then(bench):
    make, _ = bench
    recorded = {name: value for name, value in BASE.items()
                if name not in ("WIDEN", "TALL", "SPLIT_K")}  # as stop 56's plans
    widened = dict(BASE, WIDEN=True, EPILOGUE_SPLIT=2)
    widened_recorded = {name: value for name, value in widened.items()
                        if name not in ("TALL", "SPLIT_K")}  # as stop 58's to 62's
    tall = dict(BASE, TALL=True, EPILOGUE_SPLIT=2)
    with make("matmul_tma") as gpu:
        results = gpu.measure([recorded, BASE, widened, widened_recorded, tall], SHAPE)
        assert all(result.ok for result in results)
        assert RecordingPool.requests == [BASE, widened, tall]  # a recorded config is the binary it meant then
        with pytest.raises(ConfigError, match=r"WIDEN.*'yes'"):
            gpu.measure([dict(recorded, WIDEN="yes")], SHAPE)


def test_a_family_without_launch_parameters_compiles_every_config(bench):
    make, _ = bench
    configs = matmul.config_space().enumerate()[:3]
    with make("matmul") as gpu:
        gpu.measure(configs, SHAPE)
    assert RecordingPool.requests == configs


def test_compile_times_from_an_earlier_sitting_are_per_binary(bench):
    make, compiles = bench
    space = matmul_tma.config_space()
    special = matmul_tma.specialization(SHAPE)
    known = {(special, space.key(dict(BASE, PROGRAMS_PER_SM=1))): 4.0,
             (special, space.key(dict(BASE, PROGRAMS_PER_SM=2))): 0.01}  # that sitting's cache hit
    with make("matmul_tma", known_compile_s=known) as gpu:
        results = gpu.measure([BASE, dict(BASE, BLOCK_K=32)], SHAPE)
    assert [result.compile_s for result in results] == [4.0, 1.5]
    assert compiles == [space.key(dict(BASE, BLOCK_K=32))]  # only a compile not known before is reported


def test_a_live_evaluator_has_the_timer_prepare_its_shape_while_the_first_compiles_run(bench):
    make, _ = bench
    with make("matmul_tma") as gpu:
        evaluator = live.LiveEvaluator(gpu, SHAPE)
        assert AnsweringTimer.log == [("submit", "prepare")]  # sent, not waited for
        live.LiveEvaluator(gpu, SHAPE)  # one in flight already: not sent twice
        results = evaluator.evaluate([BASE])
        assert gpu.measure_vendor(SHAPE).ok and results[0].ok
    assert AnsweringTimer.log == [("submit", "prepare"), ("receive", "prepare"), ("call", "config"), ("call", "vendor")]


def test_a_live_evaluator_keeps_when_each_result_came(bench):
    make, _ = bench
    with make("matmul_tma") as gpu:
        evaluator = live.LiveEvaluator(gpu, SHAPE)
        first = evaluator.evaluate([BASE, dict(BASE, BLOCK_K=32)])
        again = evaluator.evaluate([dict(BASE, PROGRAMS_PER_SM=1)])  # its binary is compiled already
    configs = [config for config, _, _ in evaluator.measured]
    assert configs == [BASE, dict(BASE, BLOCK_K=32), dict(BASE, PROGRAMS_PER_SM=1)]
    assert [result for _, _, result in evaluator.measured] == [*first, *again]
    readings = [seconds for _, seconds, _ in evaluator.measured]
    assert readings == sorted(readings) and 0 <= readings[0] and readings[-1] <= evaluator.elapsed_s


def test_a_prepare_that_kills_the_timer_leaves_the_shapes_timings_to_report(bench):
    make, _ = bench
    AnsweringTimer.prepare_fails = True
    with make("matmul_tma") as gpu:
        gpu.prepare(SHAPE)
        result = gpu.measure([BASE], SHAPE)[0]
    assert result.ok and result.latency_ms == 1.0
    assert AnsweringTimer.log == [("submit", "prepare"), ("receive", "prepare"), ("call", "config")]


def test_prepare_checks_the_shape(bench):
    make, _ = bench
    with make("matmul_tma") as gpu, pytest.raises(ValueError, match="M=0 must be a positive int"):
        gpu.prepare((0, 512, 512))
    assert AnsweringTimer.log == []


def test_a_screen_asks_the_timer_for_its_count_of_runs(bench):
    make, _ = bench
    with make("matmul_tma") as gpu:
        screened = dict(gpu.measure_iter([BASE], SHAPE, repeats=2))
        full = gpu.measure([dict(BASE, BLOCK_K=32)], SHAPE)
    assert screened[0].ok and full[0].ok
    assert AnsweringTimer.log == [("call", "config", 2), ("call", "config")]


@pytest.mark.gpu
def test_a_screen_times_its_count_of_runs_and_a_full_timing_the_policys():
    config = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8, "SPLIT_K": 1, "num_warps": 4,
              "num_stages": 3}
    with live.GpuBench("matmul", "bfloat16", compile_workers=1) as gpu:
        screened = dict(gpu.measure_iter([config], (256, 256, 256), repeats=2))[0]
        full = gpu.measure([config], (256, 256, 256))[0]
    assert screened.ok and len(screened.repeats_ms) == 2
    assert full.ok and len(full.repeats_ms) >= gpu.timing.min_repeats


@pytest.mark.gpu
def test_the_timing_worker_prepares_a_shape_and_then_times_it():
    with live.GpuBench("matmul", "bfloat16", compile_workers=1) as gpu:
        gpu.prepare((256, 256, 256))
        vendor = gpu.measure_vendor((256, 256, 256))
    assert vendor.ok and vendor.latency_ms > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_a_bench_without_a_gpu_says_so_and_leaves_no_worker_running():
    import multiprocessing

    with pytest.raises(RuntimeError, match="GpuBench needs a CUDA GPU"):
        live.GpuBench("matmul", "bfloat16", compile_workers=1)
    assert not [child for child in multiprocessing.active_children() if child.name == "timing"]


def test_a_live_race_runs_two_benches_in_one_process_and_gives_back_the_cores(bench, monkeypatch):
    make, _ = bench
    monkeypatch.setattr(live.GpuBench, "provenance", lambda self, command: {"kernel": self.kernel.NAME})
    affinity = os.sched_getaffinity(0)
    trace, vendor_ms, _, provenance = live_search.race_live(
        "random", SHAPE, "bfloat16", 0.5, 0, 1, 0.10, make_bench=lambda kernel, dtype, seed: make(kernel, seed=seed))
    assert trace.drop_duplicates("batch")["family"].tolist()[:2] == ["pointer", "TMA"]
    assert set(trace["status"]) == {"ok"} and vendor_ms == 1.0 and provenance["kernel"] == "matmul"
    assert os.sched_getaffinity(0) == affinity


@pytest.mark.gpu
def test_a_live_race_on_the_gpu_probes_both_families():
    trace, vendor_ms, setup_s, _ = live_search.race_live("random", SHAPE, "bfloat16", 20.0, 0, 1, 0.10)
    assert trace.drop_duplicates("batch")["family"].tolist()[:2] == ["pointer", "TMA"]
    assert (trace["status"] == "ok").any() and vendor_ms > 0 and setup_s > 0
