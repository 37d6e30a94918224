"""Live search on a GPU: a strategy tunes the GEMM for one shape against the real device, on the wall clock,
from a cold Triton cache; the trace records when each fraction of cuBLAS speed was first reached.

Run on a GPU machine: `PYTHONPATH=lib python3 benchmarks/live_search.py --strategies lfbo pattern random --seconds 120`
(writes results/live_search/<gpu>_<shape>.parquet and .md).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from tunebench.collect import parse_shapes
from tunebench.measure.dataset import PARQUET_OPTIONS
from tunebench.tables import markdown_table

FRACTIONS_OF_VENDOR = (0.5, 0.71, 0.8, 0.9, 0.95)


def first_time_reaching(trace: pd.DataFrame, vendor_ms: float, fraction: float) -> float:
    """Wall seconds at which best-so-far first reached `fraction` of the vendor's speed (NaN if never)."""
    reached = trace[vendor_ms / trace.best_ms >= fraction]
    return float(reached.time_s.iloc[0]) if len(reached) else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategies", nargs="+", default=["lfbo", "pattern", "random"])
    parser.add_argument("--shape", default="4096x4096x4096")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--seconds", type=float, default=120.0, help="wall-clock budget per strategy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/live_search"))
    args = parser.parse_args()
    shape = parse_shapes(args.shape, 3)[0]

    from tunebench.measure.live import GpuBench, LiveEvaluator
    from tunebench.search import make_strategy
    from tunebench.study import Budget, run_search

    traces, rows = [], []
    for name in args.strategies:
        # Every strategy starts from a cold compile cache, as a user tuning a new kernel would.
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"triton-{name}-")
        started = time.monotonic()
        with GpuBench("matmul", args.dtype, seed=args.seed) as bench:
            vendor_ms = bench.measure_vendor(shape).latency_ms
            setup_s = time.monotonic() - started
            evaluator = LiveEvaluator(bench, shape)
            strategy = make_strategy(name, bench.space, seed=args.seed)
            trace = run_search(strategy, evaluator, Budget(seconds=args.seconds))
            provenance = bench.provenance(["python", *sys.argv])
        trace.insert(0, "strategy", name)
        trace["vendor_ms"] = vendor_ms
        traces.append(trace)
        best = trace.best_ms.min()
        row = {"strategy": name, "evaluations": len(trace), "search_s": round(float(trace.time_s.max()), 1),
               "setup_s": round(setup_s, 1), "best_ms": round(best, 4), "cuBLAS_ms": round(vendor_ms, 4),
               "best vs cuBLAS": round(vendor_ms / best, 3)}
        for fraction in FRACTIONS_OF_VENDOR:
            row[f"s to {fraction}x"] = round(first_time_reaching(trace, vendor_ms, fraction), 1)
        rows.append(row)
        print(row, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"{provenance['gpu_name'].split()[1].lower()}_{args.dtype}_{'x'.join(map(str, shape))}"
    pd.concat(traces, ignore_index=True).to_parquet(args.out / f"{stem}.parquet", index=False, **PARQUET_OPTIONS)
    text = (f"# Live search, {args.dtype} GEMM {'x'.join(map(str, shape))} on {provenance['gpu_name']}\n\n"
            f"Command: `{provenance['command']}` ({provenance['date']}, torch {provenance['torch']}, "
            f"Triton {provenance['triton']}, {provenance['compile_workers']} compile workers)\n\n"
            "Wall-clock seconds from the first ask, cold Triton cache; setup_s = worker start-up and the cuBLAS "
            "measurement, before the search.\n\n" + markdown_table(pd.DataFrame(rows)) + "\n")
    (args.out / f"{stem}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
