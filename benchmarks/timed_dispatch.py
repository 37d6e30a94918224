"""The dispatcher's measured mode live on a GPU: for shapes in no dataset, the deployed predictor's top k timed and
the fastest kept (`Predictor.timed_best_config`), beside cuBLAS on the same bench, with the wall time the mode took.

GPU: PYTHONPATH=lib python3 benchmarks/timed_dispatch.py --out results/config_prediction/timed_dispatch_h100.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from tunebench.collect import parse_shapes
from tunebench.files import write_text_atomically
from tunebench.predict import load_predictor
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
PREDICTOR = REPO / "results" / "config_prediction" / "matmul_bfloat16_h100.predictor"
# Decode, small and square batches, with N or K off multiples of 16 in two of them; none is in a recorded dataset.
SHAPES = "24x3072x1000,333x5000x4096,2048x2048x2048,7x14336x4096"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--predictor", type=Path, default=PREDICTOR)
    parser.add_argument("--shapes", default=SHAPES, help="comma-separated MxNxK")
    parser.add_argument("--k", type=int, default=10, help="configs timed per shape")
    parser.add_argument("--out", type=Path, required=True, help="Markdown file to write")
    args = parser.parse_args()
    from tunebench.measure.live import GpuBench, LiveEvaluator

    predictor = load_predictor(args.predictor)
    rows = []
    with GpuBench(predictor.kernel, predictor.dtype) as bench:
        provenance = bench.provenance(["python3", *sys.argv])
        for shape in parse_shapes(args.shapes, 3):
            started = time.monotonic()
            pick = predictor.timed_best_config(shape, LiveEvaluator(bench, shape), k=args.k)
            seconds = time.monotonic() - started
            vendor = bench.measure_vendor(shape)
            vendor_ms = vendor.latency_ms if vendor.ok else float("nan")
            rows.append({"M": shape[0], "N": shape[1], "K": shape[2],
                         "pick": ",".join(str(value) for value in pick.config.values()),
                         "ran": f"{sum(result.ok for result in pick.results)} of {len(pick.results)}",
                         "pick ms": pick.latency_ms, "cuBLAS ms": vendor_ms,
                         "cuBLAS / pick": vendor_ms / pick.latency_ms, "wall s": seconds})
            print(rows[-1], flush=True)
    text = f"""# Prediction plus {args.k} measurements, live

Command: `{provenance['command']}` on {provenance['gpu_name']} (Triton {provenance['triton']}, torch
{provenance['torch']}, {provenance['date']}). Predictor: `{args.predictor.name}`, trained on
{len(predictor.header['training']['shapes'])} shapes. Per shape, `Predictor.timed_best_config` compiles and times the
model's top {args.k} candidates (each checked against the reference) and keeps the fastest; "wall s" is that call's
wall time, compilation included (the first shape also starts the bench's workers on a cold Triton cache). cuBLAS
(`torch.matmul`) is timed on the same bench. Pick: {", ".join(predictor.space.names)}.

{markdown_table(pd.DataFrame(rows))}
"""
    write_text_atomically(args.out, text)
    print(text)


if __name__ == "__main__":
    main()
