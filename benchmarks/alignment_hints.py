"""What the GEMM's alignment hints bought: the shapes whose N or K is even but off multiples of 16, measured before
the hints and again with them, each sitting against cuBLAS timed in the same sitting.

Run: `.venv/bin/python benchmarks/alignment_hints.py` (seconds; writes `results/alignment_hints/summary.md` and
`per_shape.csv`, and prints the summary).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from tunebench.dataset_summary import best_per_shape
from tunebench.files import write_text_atomically
from tunebench.kernels import matmul
from tunebench.measure.dataset import load_dataset
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parent.parent
DATASETS = REPO / "results" / "datasets"
SHAPE = ["M", "N", "K"]


def per_shape(hinted: pd.DataFrame, unhinted: pd.DataFrame, hinted_best: pd.DataFrame,
              unhinted_best: pd.DataFrame, parameters: list[str]) -> pd.DataFrame:
    """One row per shape: each sitting's best Triton and cuBLAS latency, and the median over the candidates of each
    config's latency before / after."""
    before = unhinted_best.set_index(SHAPE)[["latency_ms", "vendor_ms"]].add_prefix("unhinted_")
    after = hinted_best.set_index(SHAPE)[["latency_ms", "vendor_ms"]].add_prefix("hinted_")
    table = before.join(after, how="inner").reset_index()
    joined = unhinted.merge(hinted, on=[*SHAPE, *parameters], suffixes=("_unhinted", "_hinted"))
    ratio = (joined["latency_ms_unhinted"] / joined["latency_ms_hinted"]).groupby([joined[name] for name in SHAPE])
    table = table.merge(ratio.median().rename("median_config_speedup").reset_index(), on=SHAPE)
    table["best_speedup"] = table["unhinted_latency_ms"] / table["hinted_latency_ms"]
    table["unhinted_vs_cublas"] = table["unhinted_vendor_ms"] / table["unhinted_latency_ms"]
    table["hinted_vs_cublas"] = table["hinted_vendor_ms"] / table["hinted_latency_ms"]
    table["class"] = [f"N {math.gcd(int(n), 16)}, K {math.gcd(int(k), 16)}" for n, k in zip(table["N"], table["K"])]
    return table.sort_values(SHAPE).reset_index(drop=True)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Medians and counts per alignment class (gcd of N and of K with 16) and over all shapes."""
    def describe(group: pd.DataFrame) -> dict:
        return {"shapes": len(group),
                "median best speedup": np.median(group["best_speedup"]),
                "median per-config speedup": np.median(group["median_config_speedup"]),
                "best vs cuBLAS before (median)": np.median(group["unhinted_vs_cublas"]),
                "best vs cuBLAS after (median)": np.median(group["hinted_vs_cublas"]),
                "beats cuBLAS before": int((group["unhinted_vs_cublas"] > 1).sum()),
                "beats cuBLAS after": int((group["hinted_vs_cublas"] > 1).sum())}
    rows = [{"class": name, **describe(group)} for name, group in table.groupby("class")]
    rows.append({"class": "all", **describe(table)})
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hinted", type=Path, default=DATASETS / "matmul_bfloat16_h100_prediction.parquet")
    parser.add_argument("--unhinted", type=Path, default=DATASETS / "matmul_bfloat16_h100_prediction_unhinted.parquet")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "alignment_hints")
    args = parser.parse_args()
    hinted, unhinted = load_dataset(args.hinted, kernel="matmul"), load_dataset(args.unhinted, kernel="matmul")
    shapes = {tuple(map(int, row)) for row in unhinted.measurements[SHAPE].drop_duplicates().to_numpy()}
    if not all(matmul.hinted(shape) for shape in shapes):
        raise ValueError(f"{args.unhinted} holds shapes the hints do not change; expected only hinted shapes")
    in_both = hinted.measurements[[tuple(map(int, row)) in shapes for row in hinted.measurements[SHAPE].to_numpy()]]
    parameters = list(hinted.parameter_names)
    table = per_shape(in_both, unhinted.measurements, best_per_shape(hinted), best_per_shape(unhinted), parameters)
    args.out.mkdir(parents=True, exist_ok=True)
    write_text_atomically(args.out / "per_shape.csv", table.to_csv(index=False))
    worst = table.nsmallest(5, "hinted_vs_cublas")[[*SHAPE, "class", "unhinted_vs_cublas", "hinted_vs_cublas"]]
    command = " ".join([".venv/bin/python", os.path.relpath(sys.argv[0], REPO), *sys.argv[1:]])
    text = f"""# GEMM alignment hints: before and after

Command: `{command}`

Shapes: the {len(table)} shapes of `{os.path.relpath(args.hinted, REPO)}` whose N or K is even but off multiples of 16.
Before: `{os.path.relpath(args.unhinted, REPO)}` (the same 600 candidates, measured
{unhinted.provenance.get('date', '?')} without hints). After: the dataset's re-measurement with the hints ({hinted.gpu}). Each sitting timed cuBLAS beside
its own configs, so "vs cuBLAS" (cuBLAS latency / best Triton latency; above 1 is faster than cuBLAS) compares within a
sitting; "best speedup" (best before / best after) and "per-config speedup" (per shape, the median over the candidates
of the same config's latency before / after) compare across sittings.

{markdown_table(summary(table), "{:.2f}")}

Lowest against cuBLAS after the hints:

{markdown_table(worst, "{:.2f}")}
"""
    write_text_atomically(args.out / "summary.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
