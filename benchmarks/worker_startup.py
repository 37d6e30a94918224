"""Start-up of a live bench on a GPU: seconds from making a GpuBench to its first result and to a first batch's last,
for the first bench of a Python process and for a later one, each from a cold Triton cache.

Run on a GPU machine: `PYTHONPATH=lib python3 benchmarks/worker_startup.py --repeats 5` (writes
results/worker_startup/<gpu>.csv and .md). Each repeat is a fresh Python process. `--baseline DIR` times another copy
of the library (a `lib` folder of an earlier commit, named by `--baseline-label`) in alternate processes of the same
run, so that the two are compared side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from tunebench.collect import parse_shapes
from tunebench.files import write_text_atomically
from tunebench.tables import markdown_table

BENCHES = ("first in its process", "later in its process")


def child(kernel: str, shape: tuple[int, ...], batch: int, seed: int) -> list[dict[str, Any]]:
    """In a fresh process: each bench of `BENCHES` in turn, from a cold Triton cache, measuring the same first batch;
    seconds from making the bench."""
    import numpy as np

    from tunebench.measure.live import GpuBench

    rows = []
    for bench_name in BENCHES:
        os.environ["TRITON_CACHE_DIR"] = cache = tempfile.mkdtemp(prefix="triton-startup-")
        started = time.monotonic()
        with GpuBench(kernel, "bfloat16", seed=seed) as bench:
            made_s = time.monotonic() - started
            configs = bench.space.sample(np.random.default_rng(seed), batch, unique=True)
            bench.prepare(shape)
            times, results = [], []
            for _, result in bench.measure_iter(configs, shape):
                times.append(time.monotonic() - started)
                results.append(result)
            provenance = bench.provenance(["python", *sys.argv])
        binaries = {bench.binary(bench.space.key(result.config)) for result in results if result.ok}
        rows.append({
            "bench": bench_name, "made_s": made_s, "first_result_s": times[0], "batch_s": times[-1],
            "ok": sum(result.ok for result in results), "configs": len(results),
            "first_compiles_s": statistics.median(r.compile_s for r in results[:bench.compile_workers]),
            "median_compile_s": statistics.median(r.compile_s for r in results),
            "first_bench_s": results[0].bench_s, "binaries_ok": len(binaries),
            "cubins": sum(1 for _ in Path(cache).rglob("*.cubin")),
            "worker_start": provenance.get("worker_start", "spawn"), "gpu": provenance["gpu_name"],
            "compile_workers": provenance["compile_workers"], "torch": provenance["torch"],
            "triton": provenance["triton"],
        })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", default="matmul_tma", choices=["matmul", "matmul_tma"])
    parser.add_argument("--shape", default="4096x4096x4096", help="MxNxK")
    parser.add_argument("--batch", type=int, default=28, help="configs in the first batch (distinct, sampled)")
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per library")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", type=Path, default=None, help="another library's `lib` folder, timed alongside")
    parser.add_argument("--baseline-label", default="baseline")
    parser.add_argument("--out", type=Path, default=Path("results/worker_startup"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        shapes = parse_shapes(args.shape, 3)
    except ValueError as error:
        parser.error(f"--shape: {error}")
    if len(shapes) != 1:
        parser.error(f"--shape takes one MxNxK, got {len(shapes)}: {args.shape}")
    shape = shapes[0]
    if args.batch < 1 or args.repeats < 1:
        parser.error(f"--batch and --repeats must be >= 1, got {args.batch} and {args.repeats}")
    if args.child:
        print(json.dumps(child(args.kernel, shape, args.batch, args.seed)))
        return 0
    libraries = {"this commit": Path(__file__).resolve().parents[1] / "lib"}
    if args.baseline is not None:
        if not (args.baseline / "tunebench").is_dir():
            parser.error(f"--baseline {args.baseline} holds no tunebench package")
        libraries[args.baseline_label] = args.baseline.resolve()
    command = ["python3", *sys.argv]
    rows = []
    for repeat in range(args.repeats):
        order = list(libraries.items()) if repeat % 2 == 0 else list(libraries.items())[::-1]
        for label, library in order:
            environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(library), os.environ.get("PYTHONPATH", "")]))
            completed = subprocess.run([sys.executable, __file__, "--child", "--kernel", args.kernel, "--shape",
                                        args.shape, "--batch", str(args.batch), "--seed", str(args.seed)],
                                       env=environment, capture_output=True, text=True, timeout=600)
            if completed.returncode != 0:
                print(completed.stderr[-3000:], file=sys.stderr)
                return 1
            for row in json.loads(completed.stdout.strip().splitlines()[-1]):
                rows.append({"library": label, "repeat": repeat, **row})
                print(f"[{repeat + 1}/{args.repeats}] {label}, {row['bench']}: first result "
                      f"{row['first_result_s']:.2f} s, batch {row['batch_s']:.2f} s", flush=True)
    frame = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = frame.gpu.iloc[0].split()[-1].lower()
    write_text_atomically(args.out / f"{stem}.csv", frame.to_csv(index=False))
    medians = (frame.groupby(["library", "bench"], sort=False)
               [["made_s", "first_result_s", "batch_s", "first_compiles_s", "median_compile_s", "first_bench_s"]]
               .median().round(2).reset_index())
    text = (f"# Live bench start-up, {args.kernel} {args.shape} on {frame.gpu.iloc[0]}\n\n"
            f"Command: `{' '.join(command)}` (torch {frame.torch.iloc[0]}, Triton {frame.triton.iloc[0]}, "
            f"{frame.compile_workers.iloc[0]} compile workers, {args.repeats} fresh processes per library, alternating)"
            f"\n\nSeconds from making the bench; a first batch of {args.batch} distinct configs, each bench from a "
            "cold Triton cache; first_compiles_s: the median compile seconds of the first "
            f"{frame.compile_workers.iloc[0]} results (one per worker, its first compile); medians over the "
            "processes:\n\n" + markdown_table(medians) + "\n")
    write_text_atomically(args.out / f"{stem}.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
