"""The deployed dispatcher's cost per call: `best_config(shape)` of the saved predictor, timed on every shape it was
trained on, in several passes, alone in its process; writes results/config_prediction/dispatch_latency.md.

Each shape's latency is the median of `protocol.DISPATCH_REPEATS` calls; a pass reports the median, 90th percentile
and max over the shapes. The long benchmark (`config_prediction.py`) times the dispatcher once, in the middle of a run
that may share the machine; this script is the quiet measurement that docs/config_prediction.md quotes.

`--threads N` walks the trees in N threads (`Predictor.threads`; numpy and BLAS stay on one), after checking that
every shape gets the same pick as with one; by default as many as `load_predictor` chooses for this host
(`forest.default_threads`). `--models K` times only the first K of the averaged models
(`Predictor.with_models`: the benchmark's "first model" ablation for K = 1), for hosts too slow for all of them.

Run: `.venv/bin/python benchmarks/dispatch_latency.py` (about a minute here; `--passes`, `--threads`, `--models`,
`--predictor`, `--out`).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from tunebench.files import write_text_atomically
from tunebench.predict import load_predictor
from tunebench.predict.forest import PARTS, default_threads
from tunebench.predict.protocol import DISPATCH_REPEATS, dispatch_latency_ms
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
PREDICTOR = REPO / "results" / "config_prediction" / "matmul_bfloat16_h100.predictor"
OUT = REPO / "results" / "config_prediction" / "dispatch_latency.md"
TARGET_MS = 1.0  # the bound on best_config


def commit() -> str:
    """The repository's HEAD commit, with "+changes" when the working tree differs from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()
    return git("rev-parse", "--short", "HEAD") + ("+changes" if git("status", "--porcelain", "--untracked-files=no")
                                                  else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--predictor", type=Path, default=PREDICTOR)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--threads", type=int, default=default_threads(),
                        help=f"threads the trees are walked in, 1 to {PARTS} (default here: {default_threads()})")
    parser.add_argument("--models", type=int, default=None, help="time only the first K models (default: all)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.passes < 1:
        parser.error(f"--passes must be at least 1, got {args.passes}")
    if not 1 <= args.threads <= PARTS:
        parser.error(f"--threads must be from 1 to {PARTS}, got {args.threads}")
    predictor = load_predictor(args.predictor, threads=args.threads)
    models = len(predictor.ranker.models_)
    if args.models is not None and not 1 <= args.models <= models:
        parser.error(f"--models must be from 1 to {models} (the predictor's models), got {args.models}")
    if args.models is not None:
        predictor = predictor.with_models(args.models)
    shapes = [tuple(shape) for shape in predictor.header["training"]["shapes"]]
    rows = []
    with threadpool_limits(1):
        sizes = np.array([len(predictor.shortlist.for_shape(shape)) for shape in shapes])
        if args.threads > 1:
            single = load_predictor(args.predictor, threads=1).with_models(len(predictor.ranker.models_))
            differing = [shape for shape in shapes if predictor.best_config(shape) != single.best_config(shape)]
            if differing:
                raise SystemExit(f"{len(differing)} shapes get another pick in {args.threads} threads than in one, "
                                 f"first {differing[0]}")
        for shape in shapes[:50]:  # warm-up: first calls pay for imports and caches
            predictor.best_config(shape)
        for number in range(1, args.passes + 1):
            latency = np.array([dispatch_latency_ms(predictor, shape)
                                for shape in tqdm(shapes, desc=f"pass {number}", leave=False)])
            rows.append({"pass": number, "median_ms": np.median(latency), "p90_ms": np.percentile(latency, 90),
                         "max_ms": latency.max(), f"shapes_over_{TARGET_MS:g}_ms": int((latency > TARGET_MS).sum())})
    table = markdown_table(pd.DataFrame(rows), "{:.3f}")
    command = "$ .venv/bin/python benchmarks/dispatch_latency.py " + " ".join(sys.argv[1:])
    text = (f"# Dispatcher latency: `best_config` of the deployed predictor\n\n"
            f"{command}\n\n"
            f"Predictor `{args.predictor.name}`, {len(shapes)} shapes (its training shapes), each the median of "
            f"{DISPATCH_REPEATS} calls, {len(predictor.ranker.models_)} of its {models} model(s) averaged, the trees "
            f"walked in {args.threads} thread(s)"
            f"{' (the same pick as in one on every shape)' if args.threads > 1 else ''}; "
            f"shortlist of {np.median(sizes):.0f} candidates at the median, "
            f"{sizes.max()} at most. Commit {commit()}, {platform.processor() or platform.machine()} "
            f"({os.cpu_count()} cores), Python {platform.python_version()}, numpy {np.__version__}, "
            f"{datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}.\n\n{table}\n")
    write_text_atomically(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
