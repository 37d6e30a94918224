"""Registers, spills and shared memory of a grid of compiled layer-norm and softmax binaries: the calibration data of
the row-wise resource model (tunebench.kernels.rowwise), checked on the CPU by tests/test_rowwise_calibration.py.

Run on a GPU: `PYTHONPATH=lib python3 benchmarks/rowwise_calibration.py` (writes
results/rowwise_calibration/binaries.jsonl, one JSON line per (kernel, config), and provenance.json beside it).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from tunebench.files import write_text_atomically

KERNELS = ("layernorm", "softmax")
# Wider than the kernels' config spaces (num_stages to 3, LOOP_UNROLL to 4), so that the data reaches past the
# model's bounds on every side. FIXED holds the rest: PERSISTENT and PROGRAMS_PER_SM only size the grid (one binary
# serves them all), and the eviction policy only sets cache hints. LOOP_UNROLL unrolls only the streamed loops, so
# it is 1 with ROW_IN_REGISTERS.
GRID = {
    "BLOCK_SIZE": (1024, 2048, 4096, 8192, 16384),
    "ROW_IN_REGISTERS": (False, True),
    "ROWS_PER_PROGRAM": (1, 2, 4),
    "num_warps": (4, 8, 16),
    "num_stages": (1, 2, 3),
    "LOOP_UNROLL": (1, 2, 4),
}
FIXED = {"EVICTION_POLICY": "", "PERSISTENT": False, "PROGRAMS_PER_SM": 1}
SHAPE = (4096, 4096)  # cols a multiple of 16: the vectorized specialization, as for most dataset shapes
DTYPE = "bfloat16"
ERROR_CHARACTERS = 300


def grid_configs() -> list[dict[str, Any]]:
    """The configs of GRID, in GRID's order (540 per kernel)."""
    configs = []
    for values in itertools.product(*GRID.values()):
        config = dict(zip(GRID, values), **FIXED)
        if not config["ROW_IN_REGISTERS"] or config["LOOP_UNROLL"] == 1:
            configs.append(config)
    return configs


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--out-dir", type=Path, default=Path("results/rowwise_calibration"))
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1),
                        help="compile processes (default: one per core but one)")
    parser.add_argument("--timeout-s", type=float, default=600.0,
                        help="a compile running longer is killed and recorded as an error (default 600)")
    arguments = parser.parse_args(argv)
    if arguments.workers < 1 or arguments.timeout_s <= 0:
        parser.error(f"--workers must be >= 1 and --timeout-s > 0, got {arguments.workers} and {arguments.timeout_s}")
    return arguments


# --------------------------------------------------------------------------------------------
# Worker side (module-level, so that it pickles)
# --------------------------------------------------------------------------------------------

def _calibration_handler() -> Callable[[tuple[str, dict[str, Any]]], dict[str, Any]]:
    from tunebench.kernels import get_kernel

    def handle(request: tuple[str, dict[str, Any]]) -> dict[str, Any]:
        """Compile one (kernel, config) for SHAPE with the kernel's compile_only. The record: kernel, shape, config,
        compile_s, and either Triton's figures for the loaded binary (n_regs: registers per thread; n_spills: local
        memory bytes per thread / 4; shared: shared memory bytes per program) or why it did not compile (error)."""
        kernel_name, config = request
        record: dict[str, Any] = {"kernel": kernel_name, "shape": list(SHAPE), "config": config}
        start = time.perf_counter()
        try:
            compiled = get_kernel(kernel_name).compile_only(config, SHAPE, DTYPE)
            record["compile_s"] = time.perf_counter() - start
            # warmup compiles without loading; Triton reads n_regs and n_spills from the loaded module.
            compiled._init_handles()
            record.update(n_regs=compiled.n_regs, n_spills=compiled.n_spills, shared=compiled.metadata.shared)
        except Exception as error:  # a failure is data: out of shared memory is what the model must predict
            record["compile_s"] = time.perf_counter() - start
            record["error"] = f"{type(error).__name__}: {error}"[:ERROR_CHARACTERS]
        return record

    return handle


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------

def compile_all(jobs: list[tuple[str, dict[str, Any]]], workers: int, timeout_s: float,
                progress: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    """One record per job, in the jobs' order; each record is passed to `progress` as it arrives."""
    from tunebench.measure.workers import Worker, WorkerDied, WorkerTimedOut, wait_any

    pool = [Worker(_calibration_handler, name=f"calibrate-{i}") for i in range(min(workers, len(jobs)))]
    records: dict[int, dict[str, Any]] = {}
    pending = list(enumerate(jobs))[::-1]
    running: dict[Worker, int] = {}

    def failed(index: int, seconds: float, error: str) -> dict[str, Any]:
        kernel_name, config = jobs[index]
        return {"kernel": kernel_name, "shape": list(SHAPE), "config": config, "compile_s": seconds, "error": error}

    try:
        while pending or running:
            for worker in pool:
                if worker not in running and pending:
                    index, job = pending.pop()
                    worker.submit(job)
                    running[worker] = index
            arrived = []
            for worker in wait_any(list(running), timeout_s=1.0):
                index = running.pop(worker)
                started = worker.busy_since or time.monotonic()
                try:
                    arrived.append((index, worker.receive(timeout_s=0)))
                except (WorkerDied, WorkerTimedOut) as error:
                    arrived.append((index, failed(index, time.monotonic() - started, str(error))))
            now = time.monotonic()
            for worker in [w for w in running if now - (w.busy_since or now) > timeout_s and not w.connection.poll()]:
                index = running.pop(worker)
                worker.restart()
                arrived.append((index, failed(index, timeout_s, f"compile exceeded {timeout_s:.0f} s")))
            for index, record in arrived:
                records[index] = record
                progress(record)
    finally:
        for worker in pool:
            worker.close()
    return [records[index] for index in range(len(jobs))]


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    import torch

    if not torch.cuda.is_available():
        print("benchmarks/rowwise_calibration.py needs a CUDA GPU: torch.cuda.is_available() is False on this machine",
              file=sys.stderr)
        return 2
    import triton

    from tunebench.kernels import get_kernel, rowwise

    command = " ".join(["PYTHONPATH=lib python3 benchmarks/rowwise_calibration.py",
                        *(argv if argv is not None else sys.argv[1:])])
    jobs = [(kernel, config) for kernel in KERNELS for config in grid_configs()]
    # The largest tiles compile longest (ptxas fights for registers): started first, they do not form the tail.
    column_vectors = {kernel: get_kernel(kernel).COLUMN_VECTORS for kernel in KERNELS}
    order = sorted(range(len(jobs)), key=lambda i: -rowwise.resource_usage(jobs[i][1], column_vectors[jobs[i][0]])
                   .row_values_per_thread)
    counts = {"done": 0, "errors": 0}
    start = time.monotonic()

    def progress(record: dict[str, Any]) -> None:
        counts["done"] += 1
        counts["errors"] += "error" in record
        if counts["done"] % 50 == 0 or counts["done"] == len(jobs):
            print(f"{counts['done']}/{len(jobs)} compiled, {counts['errors']} errors, "
                  f"{time.monotonic() - start:.0f} s", flush=True)

    print(f"{len(jobs)} compiles on {arguments.workers} workers", flush=True)
    with tempfile.TemporaryDirectory(prefix="triton-cache-") as cache:
        os.environ["TRITON_CACHE_DIR"] = cache  # workers made from now on run with it: every compile is a real one
        compiled = compile_all([jobs[i] for i in order], arguments.workers, arguments.timeout_s, progress)
    by_job = dict(zip(order, compiled))
    records = [by_job[i] for i in range(len(jobs))]
    errors = [record for record in records if "error" in record]
    provenance = {
        "command": command, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
        "kernels": list(KERNELS), "dtype": DTYPE, "shape": list(SHAPE), "grid": GRID, "fixed": FIXED,
        "workers": arguments.workers, "timeout_s": arguments.timeout_s, "wall_s": round(time.monotonic() - start, 1),
        "compiles": len(records), "binaries": len(records) - len(errors), "errors": len(errors),
    }
    out = arguments.out_dir
    write_text_atomically(out / "binaries.jsonl", "".join(json.dumps(record) + "\n" for record in records))
    write_text_atomically(out / "provenance.json", json.dumps(provenance, indent=1) + "\n")
    print(f"wrote {out / 'binaries.jsonl'} ({provenance['binaries']} binaries, {len(errors)} errors) and "
          f"provenance.json in {provenance['wall_s']:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
