"""GpuBench's bookkeeping without a GPU: a binary is compiled once, however many configs of it are asked, and when."""

import pytest

from tunebench.kernels import matmul, matmul_tma
from tunebench.measure import live
from tunebench.measure.result import Status

SHAPE = (256, 512, 512)
BASE = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "PROGRAMS_PER_SM": 0, "WARP_SPECIALIZE": False,
        "FLATTEN": False, "EPILOGUE_SPLIT": 1, "num_warps": 8, "num_stages": 3}


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
    def __init__(self, *args, **kwargs):
        pass

    def call(self, request, timeout_s=None):
        kind, shape, config = request
        return {"status": "ok", "bench_s": 0.01, "repeats_ms": [1.0 + config.get("PROGRAMS_PER_SM", 0)]}


@pytest.fixture
def bench(monkeypatch):
    RecordingPool.requests = []
    monkeypatch.setattr(live, "CompilePool", RecordingPool)
    monkeypatch.setattr(live, "Worker", AnsweringTimer)
    monkeypatch.setattr(live, "close_all", lambda workers: None)
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
