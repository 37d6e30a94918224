"""One sweep over several GPUs: the deal of shapes and cores, one child process per GPU that sees that GPU alone and
runs on its own cores, resumption per GPU, and the merged dataset. The measuring back end is the CPU stand-in."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tunebench.collect import Journal, JournalBusy, journal_of
from tunebench.collect_gpus import deal_shapes, gpu_out, parse_gpus, split_cores, sweep_on_gpus
from tunebench.kernels import matmul
from tunebench.measure.dataset import load_dataset

import stand_in_bench

SHAPES = [(3, 32, 48), (5, 64, 32), (7, 48, 64), (9, 40, 24), (2, 16, 16)]


class VisibleGpuBench(stand_in_bench.StandInBench):
    """Latencies from the config; its provenance says which GPU the process sees, on which cores it runs and the
    seed of its inputs."""

    def __init__(self, *args, seed=0, **kwargs):
        super().__init__(*args, seed=seed, **kwargs)
        self.seed = seed

    def latency_ms(self, config, shape):
        return config["BLOCK_M"] * 0.001 + shape[0] * 0.1

    def provenance(self, command=()):
        return {**super().provenance(command), "visible_gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "cores": sorted(os.sched_getaffinity(0)), "seed": self.seed, "pid": os.getpid()}


class FailsOnGpuOne(VisibleGpuBench):
    def __init__(self, *args, **kwargs):
        if os.environ.get("CUDA_VISIBLE_DEVICES") == "1":
            raise RuntimeError("stand-in: no such device")
        super().__init__(*args, **kwargs)


def test_gpu_lists_and_the_deal_of_shapes_and_cores():
    assert parse_gpus("0,1") == [0, 1] and parse_gpus("3") == [3]
    for bad in ("", "0,0", "-1", "a,b"):
        with pytest.raises(ValueError, match=f"bad GPU list {bad!r}"):
            parse_gpus(bad)
    shares = deal_shapes("matmul", SHAPES, 2)
    assert sorted(shares[0] + shares[1]) == sorted(SHAPES) and [len(share) for share in shares] == [3, 2]
    assert shares == deal_shapes("matmul", list(reversed(SHAPES)), 2), "the same deal whatever the order given"
    order = sorted(SHAPES, key=lambda shape: (matmul.specialization(shape), shape))
    assert shares[0] == order[0::2]
    assert split_cores(range(5), 2) == [[0, 1, 2], [3, 4]] and split_cores([7, 6], 2) == [[6], [7]]
    with pytest.raises(ValueError, match="1 CPU cores cannot be shared by 2 GPUs"):
        split_cores([0], 2)


def test_a_sweep_over_two_gpus_resumes_per_gpu_and_merges_every_shape(tmp_path):
    out = tmp_path / "two.parquet"
    cores = split_cores(sorted(os.sched_getaffinity(0)), 2)
    assert not sweep_on_gpus("matmul", "bfloat16", SHAPES, out, [0, 1], limit_configs=6, seed=7, stop_after_s=0.0,
                             make_bench=VisibleGpuBench)
    assert not out.exists()
    assert sweep_on_gpus("matmul", "bfloat16", SHAPES, out, [0, 1], limit_configs=6, seed=7,
                         make_bench=VisibleGpuBench)
    dataset = load_dataset(out)
    assert sorted(dataset.shapes()) == sorted(SHAPES) and len(dataset.measurements) == 6 * len(SHAPES)
    shares = deal_shapes("matmul", SHAPES, 2)
    for gpu, share, own_cores in zip((0, 1), shares, cores):
        records = Journal(gpu_out(out, gpu).with_suffix(".journal") / "journal.jsonl").read()
        assert {tuple(r["shape"]) for r in records if r["kind"] == "config"} == set(share)
        sittings = [r["provenance"] for r in records if r["kind"] == "provenance"]
        assert len(sittings) == 2 and all(s["visible_gpus"] == str(gpu) and s["cores"] == own_cores and s["seed"] == 7
                                          for s in sittings)
        assert not gpu_out(out, gpu).exists(), "only the merged dataset is written"
    assert len(dataset.provenance["sittings"]) == 4
    # Each row names the sitting that timed it: its GPU's second (the first stopped before measuring anything).
    visible = [sitting.get("visible_gpus", dataset.provenance["visible_gpus"])
               for sitting in dataset.provenance["sittings"]]
    for gpu, share, sitting in zip(("0", "1"), shares, (1, 3)):
        rows = dataset.measurements[dataset.measurements[["M", "N", "K"]].apply(tuple, axis=1).isin(set(share))]
        assert set(rows["sitting"]) == {sitting} and visible[sitting] == gpu


def test_a_gpu_whose_collector_fails_is_named(tmp_path):
    with pytest.raises(RuntimeError, match=r"failed on GPU 1 \(exit status 1\)"):
        sweep_on_gpus("matmul", "bfloat16", SHAPES, tmp_path / "failing.parquet", [0, 1], limit_configs=2,
                      make_bench=FailsOnGpuOne)


def test_a_gpu_journal_another_collector_holds_is_refused_before_any_collector_starts(tmp_path):
    out = tmp_path / "held.parquet"
    with journal_of(gpu_out(out, 1)).hold():
        with pytest.raises(JournalBusy, match=r"held.gpu1.journal/journal.jsonl is being written by another"):
            sweep_on_gpus("matmul", "bfloat16", SHAPES, out, [0, 1], limit_configs=2, make_bench=VisibleGpuBench)
    assert not journal_of(gpu_out(out, 0)).read(), "GPU 0's collector never started"


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_the_gpu_collectors_end_when_the_parent_is_killed(tmp_path):
    """A parent killed outright (SIGKILL: no handler runs) leaves no collector measuring on its own, and the rerun
    finds the journals free and finishes."""
    out = tmp_path / "killed.parquet"
    child = f"""
import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from pathlib import Path
from test_collect_gpus import SHAPES, VisibleGpuBench
from tunebench.collect_gpus import sweep_on_gpus
sweep_on_gpus("matmul", "bfloat16", SHAPES, Path({str(out)!r}), [0, 1], limit_configs=200, make_bench=VisibleGpuBench)
"""
    log = tmp_path / "parent.log"
    with log.open("w") as stderr:
        parent = subprocess.Popen([sys.executable, "-c", child], env={**os.environ, "STAND_IN_DELAY_S": "0.05"},
                                  stdout=subprocess.DEVNULL, stderr=stderr)
    journals = [journal_of(gpu_out(out, gpu)) for gpu in (0, 1)]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all(
            sum(r["kind"] == "config" for r in journal.read()) >= 5 for journal in journals):
        time.sleep(0.1)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    pids = [r["provenance"]["pid"] for journal in journals for r in journal.read() if r["kind"] == "provenance"]
    assert len(pids) == 2, log.read_text()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(map(_alive, pids)):
        time.sleep(0.1)
    assert not any(map(_alive, pids)), "a GPU's collector went on after its parent was killed"
    measured = [len(journal.read()) for journal in journals]
    time.sleep(0.5)
    assert [len(journal.read()) for journal in journals] == measured
    assert sweep_on_gpus("matmul", "bfloat16", SHAPES, out, [0, 1], limit_configs=200, make_bench=VisibleGpuBench)
    assert len(load_dataset(out).measurements) == 200 * len(SHAPES)


def test_the_command_line_refuses_one_journal_for_several_gpus_and_a_bad_gpu_list(tmp_path, capsys):
    from tunebench.collect import main

    for arguments, message in ((["--gpus", "0,1", "--resume-from", "j.jsonl.gz"], "each GPU resumes its own journal"),
                               (["--gpus", "0,0"], "bad GPU list '0,0'")):
        with pytest.raises(SystemExit):
            main(["--shapes", "3x32x48", "--out", str(tmp_path / "x.parquet"), "--limit-configs", "2", *arguments])
        assert message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU, where every collector fails")
def test_the_command_line_names_the_gpu_whose_collector_died(tmp_path, capsys):
    """No GPU here: every child's GpuBench fails, and the command says which GPUs, with exit status 1."""
    from tunebench.collect import main

    status = main(["--shapes", "3x32x48,5x64x32", "--out", str(tmp_path / "x.parquet"), "--limit-configs", "2",
                   "--gpus", "0,1"])
    assert status == 1
    assert "error: the collector failed on GPU 0 (exit status 1), GPU 1 (exit status 1)" in capsys.readouterr().err
