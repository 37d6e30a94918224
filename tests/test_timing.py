"""The timing method: the policy's arithmetic on a CPU; on a GPU, that queuing runs behind a spin keeps host
delays out of the measured times, and that the timing worker gets a core of its own."""

import os
import time

import pytest
import torch

from tunebench.measure.live import CorePlan
from tunebench.measure.timing import Timer, TimingPolicy, evict
from tunebench.measure.workers import Worker


def test_repeats_and_hold_follow_the_policy():
    policy = TimingPolicy(target_ms=10.0, min_repeats=3, max_repeats=30, hold_base_ms=0.5, hold_per_run_ms=0.1,
                          hold_margin=2.0)
    assert [policy.repeats_for(ms) for ms in (0.01, 1.0, 4.0, 100.0)] == [30, 10, 3, 3]
    assert policy.hold_ms(10) == pytest.approx(1.5)
    assert policy.hold_ms(10, host_ms_per_run=0.2) == pytest.approx(0.5 + 10 * 0.4), "the measured host time, with margin"
    assert policy.hold_ms(10, host_ms_per_run=0.2, gpu_ms_per_run=0.1) == pytest.approx(0.5 + 10 * 0.3), "less the GPU time"
    assert policy.hold_ms(10, host_ms_per_run=0.2, gpu_ms_per_run=5.0) == pytest.approx(1.5), "at least hold_per_run_ms"
    assert TimingPolicy(hold_base_ms=0.0).hold_ms(10) == 0.0
    assert "GPU spin" in policy.describe()["method"] and "GPU spin" not in TimingPolicy(hold_base_ms=0).describe()["method"]


@pytest.mark.parametrize("bad", [{"min_repeats": 0}, {"hold_per_run_ms": -1.0}, {"hold_margin": 0.5}, {"hold_retry_factor": 0.5}])
def test_bad_policy_is_an_error(bad):
    with pytest.raises(ValueError):
        TimingPolicy(**bad)


def test_the_flush_is_a_write_unless_asked_to_read():
    assert TimingPolicy().flush == "zero" and "(read)" in TimingPolicy(flush="read").describe()["method"]
    assert TimingPolicy().describe()["method"].startswith("CUDA events around each run, L2 flushed before each run,")
    with pytest.raises(ValueError, match="flush='clean' is not allowed; allowed: zero, read"):
        TimingPolicy(flush="clean")


def _affinity_handler():
    return lambda request: sorted(os.sched_getaffinity(0))


def test_a_worker_runs_on_the_cores_it_is_given():
    core = min(os.sched_getaffinity(0))
    worker = Worker(_affinity_handler, name="pinned", cpus={core})
    try:
        assert worker.call("cores?", timeout_s=60) == [core]
    finally:
        worker.close()


def test_the_core_plan_reserves_one_core_for_timing():
    cores = sorted(os.sched_getaffinity(0))
    plan = CorePlan.for_this_machine(min_cores=1)
    assert plan.timing == {cores[0]} and plan.shared == set(cores[1:])
    assert not plan.timing & (plan.shared or set())
    unpinned = CorePlan.for_this_machine(min_cores=len(cores) + 1)
    assert unpinned.timing is None and unpinned.shared is None


@pytest.mark.gpu
def test_the_hold_keeps_host_delays_out_of_the_measured_times():
    x = torch.zeros(1024, device="cuda")

    def slow_host_fast_kernel():
        time.sleep(0.001)  # a host that takes 1 ms to launch a kernel of a few microseconds
        x.add_(1.0)

    held = Timer(TimingPolicy(min_repeats=10, max_repeats=10))  # the spin adapts to the host's measured pace
    unheld = Timer(TimingPolicy(min_repeats=10, max_repeats=10, hold_base_ms=0.0))
    held_ms, unheld_ms = sorted(held.time(slow_host_fast_kernel)), sorted(unheld.time(slow_host_fast_kernel))
    assert held_ms[5] < 0.2, held_ms
    assert unheld_ms[5] > 0.8, unheld_ms


@pytest.mark.gpu
def test_a_spin_too_short_for_the_host_is_timed_again():
    x = torch.zeros(1024, device="cuda")
    calls = []

    def slower_after_the_estimate():
        calls.append(1)
        if len(calls) > 2:  # the warm-up and the estimate run fast; the timed runs take the host 2 ms each
            time.sleep(0.002)
        x.add_(1.0)

    timer = Timer(TimingPolicy(min_repeats=5, max_repeats=5, hold_base_ms=0.05, hold_per_run_ms=0.01))
    assert sorted(timer.time(slower_after_the_estimate))[2] < 0.2
    assert timer.retries == 1


@pytest.mark.gpu
def test_a_spin_that_ends_while_the_gpu_is_still_busy_is_not_a_drain():
    """A quick host queuing GPU-bound runs outruns the GPU: the spin may end long before the last run is queued, yet
    the GPU never waits for the host, so the round stands (the timer before stop 101 timed such rounds again)."""
    x = torch.zeros(64 * 2**20, device="cuda")  # 256 MiB: each add takes the GPU about 0.2 ms, the host some us
    timer = Timer(TimingPolicy(min_repeats=30, max_repeats=30, hold_per_run_ms=0.001, flush_bytes=0))
    for _ in range(3):
        assert len(timer.time(lambda: x.add_(1.0))) == 30
        assert len(timer.time(lambda: x.add_(1.0), repeats=3)) == 3
    assert timer.retries == 0


def test_the_read_flush_reads_the_whole_buffer_and_writes_nothing():
    """Under the Triton interpreter (CPU): the read kernel leaves the buffer as it was; the zero flush zeroes it."""
    buffer = torch.arange(3 * 4096 + 5, dtype=torch.int32)
    evict(buffer, "read")
    assert torch.equal(buffer, torch.arange(3 * 4096 + 5, dtype=torch.int32))
    evict(buffer, "zero")
    assert not buffer.any()
    evict(None, "read")
