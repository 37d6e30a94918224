"""Replay of a recorded dataset: the answers, the two modes, the simulated clock and bad configs."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pandas as pd
import pytest

from tunebench.measure.dataset import Dataset
from tunebench.measure.kerneltuner import load_kerneltuner_cache
from tunebench.measure.replay import ReplayEvaluator, compile_makespan, pipelined_makespan
from tunebench.measure.result import Status
from tunebench.space import ConfigError, Ordinal, PowerOfTwo

SHAPE = (128,)


def make_dataset(compile_s=(3.0, 1.0, 2.0, 2.0), provenance=None) -> Dataset:
    """Test data: four configs of one shape, three ok with distinct repeats and one crash."""
    repeats = [[5.0, 1.0, 2.0, 9.0, 3.0], [4.0, 4.5, 4.2], [], [7.0, 6.0, 8.0, 6.5]]
    statuses = ["ok", "ok", "crash", "ok"]
    rows = []
    for index, (block, warps) in enumerate([(32, 4), (64, 4), (64, 8), (32, 8)]):
        rows.append({"N": SHAPE[0], "BLOCK": block, "warps": warps, "status": statuses[index],
                     "latency_ms": statistics.median(repeats[index]) if repeats[index] else math.nan,
                     "repeats_ms": repeats[index], "compile_s": compile_s[index], "bench_s": 0.5 + index / 10,
                     "error": "" if repeats[index] else "illegal memory access"})
    return Dataset(kernel="toy", dtype="float32", gpu="Test GPU", shape_names=("N",),
                   parameters=(PowerOfTwo("BLOCK", 32, 128), Ordinal("warps", (4, 8))),
                   measurements=pd.DataFrame(rows),
                   vendor=pd.DataFrame([{"N": 128, "library": "cuBLAS", "latency_ms": 2.5, "repeats_ms": [2.5]}]),
                   provenance={"compile_workers": 2} if provenance is None else provenance)


CONFIGS = [{"BLOCK": 32, "warps": 4}, {"BLOCK": 64, "warps": 4}, {"BLOCK": 64, "warps": 8}, {"BLOCK": 32, "warps": 8}]


def test_deterministic_results_equal_the_records():
    dataset = make_dataset()
    results = ReplayEvaluator(dataset, SHAPE).evaluate(CONFIGS)
    task = dataset.task(SHAPE)
    assert [r.config for r in results] == CONFIGS
    assert [r.status for r in results] == [Status.OK, Status.OK, Status.CRASH, Status.OK]
    assert [r.latency_ms for r in results] == [3.0, 4.2, None, 6.75]
    assert [list(r.repeats_ms) for r in results] == list(task["repeats_ms"])
    assert [r.compile_s for r in results] == [3.0, 1.0, 2.0, 2.0]
    assert [r.bench_s for r in results] == pytest.approx([0.5, 0.6, 0.7, 0.8])
    assert results[2].error == "illegal memory access" and results[0].error == ""


def test_noisy_mode_is_seeded_bootstrap_of_the_repeats():
    def draws(seed):
        evaluator = ReplayEvaluator(make_dataset(), SHAPE, mode="noisy", seed=seed)
        return [r.latency_ms for _ in range(20) for r in evaluator.evaluate(CONFIGS)]

    first = draws(0)
    assert first == draws(0)
    assert first != draws(1)
    assert first[2::4] == [None] * 20  # the crash stays a crash
    assert set(first[0::4]) <= {1.0, 2.0, 3.0, 5.0, 9.0}  # medians of 5 resampled repeats are repeats
    assert len(set(first[0::4])) > 1
    assert all(4.0 <= latency <= 4.5 for latency in first[1::4])


def test_clock_greedy_compile_schedule_plus_bench():
    # Batch order on 2 workers: 3 -> A (0-3), 1 -> B (0-1), 2 -> B (1-3), 2 -> A or B (3-5): makespan 5.
    # (The best packing, {3, 1} and {2, 2}, would take 4; a worker pool draining a queue does not find it.)
    assert compile_makespan([3, 1, 2, 2], 2) == 5
    assert compile_makespan([3, 1, 2, 1], 2) == 4
    assert compile_makespan([3, 1, 2, 2], 1) == 8
    assert compile_makespan([3, 1, 2, 2], 8) == 3
    assert compile_makespan([], 2) == 0
    evaluator = ReplayEvaluator(make_dataset(), SHAPE)  # 2 workers from the provenance
    assert evaluator.compile_workers == 2
    evaluator.evaluate(CONFIGS)
    assert evaluator.elapsed_s == pytest.approx(5 + 0.5 + 0.6 + 0.7 + 0.8)


def test_clock_two_batches_and_compile_once():
    evaluator = ReplayEvaluator(make_dataset(), SHAPE, compile_workers=3)
    evaluator.evaluate(CONFIGS[:2])
    assert evaluator.elapsed_s == pytest.approx(3 + 0.5 + 0.6)
    evaluator.evaluate(CONFIGS[1:])  # CONFIGS[1] is compiled already: its benchmark is charged, not its compile
    assert evaluator.elapsed_s == pytest.approx(3 + 0.5 + 0.6 + 2 + 0.6 + 0.7 + 0.8)
    assert evaluator.evaluate([]) == []
    assert evaluator.elapsed_s == pytest.approx(3 + 0.5 + 0.6 + 2 + 0.6 + 0.7 + 0.8)


def test_configs_that_differ_only_in_launch_parameters_share_a_compile(monkeypatch):
    # With warps a launch parameter, (32, 4) and (32, 8) share one binary, recorded 3.0 s and, as the sweep's cache hit,
    # 0.01 s: it costs 3.0; (64, 4) and (64, 8) recorded 1.0 s and 2.0 s: it costs 2.0.
    recorded = (3.0, 1.0, 2.0, 0.01)
    monkeypatch.setattr("tunebench.measure.replay.launch_parameters", lambda kernel: ("warps",))
    evaluator = ReplayEvaluator(make_dataset(recorded), SHAPE)
    evaluator.evaluate([CONFIGS[0]])
    assert evaluator.elapsed_s == pytest.approx(3.0 + 0.5)
    evaluator.evaluate([CONFIGS[3], CONFIGS[1]])  # the first is a cache hit: only the second's binary compiles
    assert evaluator.elapsed_s == pytest.approx(3.5 + 2.0 + 0.8 + 0.6)
    evaluator.evaluate([CONFIGS[2]])  # a cache hit too
    assert evaluator.elapsed_s == pytest.approx(6.9 + 0.7)
    # new in the same batch, the binary is compiled once, as GpuBench does
    together = ReplayEvaluator(make_dataset(recorded), SHAPE, compile_workers=1)
    together.evaluate([CONFIGS[1], CONFIGS[2]])
    assert together.elapsed_s == pytest.approx(2.0 + 0.6 + 0.7)
    monkeypatch.undo()
    unshared = ReplayEvaluator(make_dataset(recorded), SHAPE)  # the toy kernel declares none: per config, as recorded
    unshared.evaluate([CONFIGS[0]])
    unshared.evaluate([CONFIGS[3]])
    assert unshared.elapsed_s == pytest.approx(3.0 + 0.5 + 0.01 + 0.8)


def test_charge_adds_strategy_time():
    evaluator = ReplayEvaluator(make_dataset(), SHAPE)
    evaluator.charge(1.25)
    evaluator.charge(0)
    assert evaluator.elapsed_s == 1.25
    with pytest.raises(ValueError, match="seconds >= 0"):
        evaluator.charge(-0.1)
    assert evaluator.elapsed_s == 1.25


def test_pipelined_clock_times_each_binary_as_its_compile_ends():
    # Configs of binaries compiled before are timed first (1 + 0.5). Then on 2 workers: A (compile 3) from 1.5 to 4.5
    # and B (compile 1) from 1.5 to 2.5. B's two configs are timed 2.5-3.5 while A compiles on, and the idle worker
    # only then takes C (compile 2), 3.5-5.5. A ended at 4.5 with the timer idle: timed 4.5-6.5. C waited for the
    # timer: timed 6.5-6.7.
    assert pipelined_makespan([1.0, 0.5], [(3.0, [2.0]), (1.0, [0.4, 0.6]), (2.0, [0.2])], 2) == pytest.approx(6.7)
    # One worker: compile, time, compile, time; nothing overlaps.
    assert pipelined_makespan([], [(3.0, [2.0]), (1.0, [1.0])], 1) == pytest.approx(7.0)
    # Compiles that end together are timed one after another.
    assert pipelined_makespan([], [(1.0, [1.0]), (1.0, [1.0]), (1.0, [1.0])], 4) == pytest.approx(4.0)
    assert pipelined_makespan([0.3], [], 2) == pytest.approx(0.3)
    assert pipelined_makespan([], [], 2) == 0

    evaluator = ReplayEvaluator(make_dataset(), SHAPE, clock="pipelined")  # 2 workers from the provenance
    evaluator.evaluate(CONFIGS)
    # compiles 3 (A), 1 (B) at 0; B timed 1-1.6; B's worker takes 2 (C) at 1.6-3.6; A timed 3-3.5; A's worker takes 2
    # (D) at 3.5-5.5; C timed 3.6-4.3; D timed 5.5-6.3.
    assert evaluator.elapsed_s == pytest.approx(6.3)
    sequential = ReplayEvaluator(make_dataset(), SHAPE)
    sequential.evaluate(CONFIGS)
    assert sequential.elapsed_s == pytest.approx(5 + 0.5 + 0.6 + 0.7 + 0.8)
    evaluator.evaluate(CONFIGS[:2])  # compiled already: timed only
    assert evaluator.elapsed_s == pytest.approx(6.3 + 0.5 + 0.6)


def test_startup_delays_the_first_batch_once():
    evaluator = ReplayEvaluator(make_dataset(), SHAPE, clock="pipelined", startup_s=10.0)
    evaluator.evaluate([])
    assert evaluator.elapsed_s == 0  # nothing asked, nothing started
    evaluator.charge(4.0)  # the strategy's first ask runs while the workers start
    evaluator.evaluate(CONFIGS[:1])
    assert evaluator.elapsed_s == pytest.approx(10 + 3 + 0.5)
    evaluator.evaluate(CONFIGS[1:2])
    assert evaluator.elapsed_s == pytest.approx(13.5 + 1 + 0.6)
    late = ReplayEvaluator(make_dataset(), SHAPE, startup_s=2.0)
    late.charge(5.0)  # an ask longer than the start-up hides it
    late.evaluate(CONFIGS[:1])
    assert late.elapsed_s == pytest.approx(5 + 3 + 0.5)


def test_compile_workers_default_and_validation():
    assert ReplayEvaluator(make_dataset(provenance={}), SHAPE).compile_workers == 1
    with pytest.raises(ValueError, match=r"provenance\['compile_workers'\] must be an integer >= 1, got 0"):
        ReplayEvaluator(make_dataset(provenance={"compile_workers": 0}), SHAPE)
    with pytest.raises(ValueError, match="compile_workers must be an integer >= 1, got -2"):
        ReplayEvaluator(make_dataset(), SHAPE, compile_workers=-2)
    with pytest.raises(ValueError, match="unknown replay mode 'random'; allowed: deterministic, noisy"):
        ReplayEvaluator(make_dataset(), SHAPE, mode="random")
    with pytest.raises(ValueError, match="unknown replay clock 'overlapped'; allowed: sequential, pipelined"):
        ReplayEvaluator(make_dataset(), SHAPE, clock="overlapped")
    for bad in (-1.0, math.nan, math.inf, "10"):
        with pytest.raises(ValueError, match=f"startup_s must be a finite number of seconds >= 0, got {bad!r}"):
            ReplayEvaluator(make_dataset(), SHAPE, startup_s=bad)


def test_optimum_vendor_and_space():
    evaluator = ReplayEvaluator(make_dataset(), SHAPE)
    assert evaluator.optimum_ms == 3.0
    assert evaluator.vendor_ms == 2.5
    assert evaluator.space.is_valid(CONFIGS[0])
    assert not evaluator.space.is_valid({"BLOCK": 128, "warps": 4})  # allowed by BLOCK, never recorded


def test_configs_outside_the_space_are_errors_not_results():
    evaluator = ReplayEvaluator(make_dataset(), SHAPE)
    with pytest.raises(ConfigError, match=r"\{'BLOCK': 32, 'warps': 4, 'stages': 3\}"):
        evaluator.evaluate([{"BLOCK": 32, "warps": 4, "stages": 3}])  # unknown parameter
    with pytest.raises(ConfigError, match=r"\{'BLOCK': 48, 'warps': 4\}"):
        evaluator.evaluate([{"BLOCK": 48, "warps": 4}])  # a value BLOCK does not allow
    with pytest.raises(ConfigError, match=r"\{'BLOCK': 128, 'warps': 8\}"):
        evaluator.evaluate([CONFIGS[0], {"BLOCK": 128, "warps": 8}])  # allowed values, never recorded
    with pytest.raises(ConfigError, match=r"\{'BLOCK': 32\}"):
        evaluator.evaluate([{"BLOCK": 32}])
    assert evaluator.elapsed_s == 0  # a rejected batch costs nothing


def test_unknown_shape():
    with pytest.raises(ValueError, match=r"shape \(256,\).*recorded shapes: \[\(128,\)\]"):
        ReplayEvaluator(make_dataset(), (256,))


KERNEL_TUNER_A100 = (Path(__file__).resolve().parents[2] / "shared" / "datasets" / "kerneltuner"
                     / "convolution_A100.json.gz")


@pytest.mark.skipif(not KERNEL_TUNER_A100.exists(),
                    reason=f"the real Kernel Tuner cache is not at {KERNEL_TUNER_A100} (../shared beside the repo)")
def test_replay_of_a_kernel_tuner_cache_answers_every_recorded_config():
    dataset = load_kerneltuner_cache(KERNEL_TUNER_A100)
    shape = dataset.shapes()[0]
    evaluator = ReplayEvaluator(dataset, shape)
    assert evaluator.compile_workers == 1  # Kernel Tuner's brute force compiles one config at a time
    configs = dataset.configs(shape)
    results = evaluator.evaluate(configs)
    task = dataset.task(shape)
    assert len(results) == len(task) == 4362
    assert [r.status.value for r in results] == list(task["status"])
    ok = task["status"] == "ok"
    assert [r.latency_ms for r in results if r.ok] == list(task.loc[ok, "latency_ms"])
    assert min(r.objective for r in results) == evaluator.optimum_ms == dataset.optimum_ms(shape)
    assert evaluator.elapsed_s == pytest.approx(task["compile_s"].sum() + task["bench_s"].sum())
    assert evaluator.vendor_ms is None
    with pytest.raises(ConfigError, match="112"):
        evaluator.evaluate([dict(zip(evaluator.space.names, (112, 1, 1, 1, 0, 1, 0, 1, 15, 15)))])
