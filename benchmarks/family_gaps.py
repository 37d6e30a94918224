"""Where the pointer GEMM falls short of cuBLAS in a recorded dataset, by whether the TMA GEMM can take the shape, and
the shapes to sweep the TMA GEMM on next, chosen by a fixed rule before anything is measured.

`.venv/bin/python benchmarks/family_gaps.py` reads the H100 prediction dataset (1,897 shapes x 600 candidates, each
shape's cuBLAS timed in the same sitting) and writes results/gemm_families/pointer_gaps_h100.md, and the per-shape
table beside it as .csv (the `gemm_kernels` report plots it). The ratio of a shape
is cuBLAS's latency / the fastest candidate's (above 1: the Triton kernel is faster). The rule: among shapes the TMA
GEMM takes (N and K multiples of 8) and no TMA dataset given by --swept holds, the one with the lowest ratio in each
(N, K class, family of M) cell, if under --below; ordered by ratio.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.kernels.matmul_tma import TMA_ALIGNMENT
from tunebench.measure.dataset import load_dataset
from tunebench.predict.evaluation import FAMILIES, family
from tunebench.report import shown_path
from tunebench.tables import markdown_table

SHAPE = ["M", "N", "K"]
DATASET = Path("results/datasets/matmul_bfloat16_h100_prediction.parquet")
SWEPT = (Path("results/datasets/matmul_tma_bfloat16_h100_hinted.parquet"),)
OUT = Path("results/gemm_families/pointer_gaps_h100.md")
# Classes of (N, K) by what each GEMM family can do with them, in table order.
ALIGNED = "N, K multiples of 16"
EIGHT = f"N, K multiples of {TMA_ALIGNMENT}, not both of 16"
POINTER_ONLY = f"N or K off multiples of {TMA_ALIGNMENT} (no TMA)"
CLASSES = (ALIGNED, EIGHT, POINTER_ONLY)


def operand_class(n: int, k: int) -> str:
    """The (N, K) class of a shape: both multiples of 16, both of 8 (the TMA GEMM takes those too), or not."""
    if n % 16 == 0 and k % 16 == 0:
        return ALIGNED
    return EIGHT if n % TMA_ALIGNMENT == 0 and k % TMA_ALIGNMENT == 0 else POINTER_ONLY


def shape_ratios(measurements: pd.DataFrame, vendor: pd.DataFrame) -> pd.DataFrame:
    """Per shape with a vendor timing: the fastest ok candidate's latency, cuBLAS's, their ratio, class and family;
    sorted by class (in CLASSES order), then shape."""
    ok = measurements[measurements["status"] == "ok"]
    best = ok.groupby(SHAPE)["latency_ms"].min().rename("best_ms")
    vendor_ms = vendor.groupby(SHAPE)["latency_ms"].min().rename("vendor_ms")
    table = pd.concat([best, vendor_ms], axis=1, join="inner").reset_index()
    if table.empty:
        raise ValueError("no shape has both an ok candidate and a vendor timing")
    table["ratio"] = table["vendor_ms"] / table["best_ms"]
    table["class"] = [operand_class(n, k) for n, k in zip(table["N"], table["K"])]
    table["family"] = table["M"].map(family)
    order = {name: position for position, name in enumerate(CLASSES)}
    return table.sort_values(["class", *SHAPE], key=lambda c: c.map(order) if c.name == "class" else c,
                             ignore_index=True)


def gap_table(ratios: pd.DataFrame) -> pd.DataFrame:
    """Per (class, family of M): shapes, median and 10th-percentile ratio, shares under 0.8x and over 1x (text)."""
    rows = []
    for name in CLASSES:
        for family_name, _, _ in FAMILIES:
            cell = ratios[(ratios["class"] == name) & (ratios["family"] == family_name)]["ratio"]
            if len(cell):
                rows.append({"N, K": name, "M": family_name, "shapes": len(cell), "median ratio": cell.median(),
                             "P10 ratio": cell.quantile(0.1), "under 0.8x": f"{(cell < 0.8).mean():.0%}",
                             "faster than cuBLAS": f"{(cell > 1.0).mean():.0%}"})
    return pd.DataFrame(rows)


def sweep_plan(ratios: pd.DataFrame, swept: set[tuple[int, int, int]], below: float) -> pd.DataFrame:
    """The rule of the module docstring: per TMA-eligible (class, family) cell, its lowest-ratio shape not yet swept,
    if under `below`; ordered by ratio."""
    if not below > 0:
        raise ValueError(f"below must be a positive ratio, got {below!r}")
    unswept = [shape not in swept for shape in ratios[SHAPE].itertuples(index=False, name=None)]
    eligible = ratios[(ratios["class"] != POINTER_ONLY).to_numpy() & np.array(unswept, dtype=bool)]
    lowest = eligible.sort_values(["ratio", *SHAPE]).groupby(["class", "family"], sort=False).head(1)
    return lowest[lowest["ratio"] < below].sort_values("ratio").reset_index(drop=True)


def swept_shapes(paths: Sequence[Path]) -> set[tuple[int, int, int]]:
    """Every shape some TMA dataset among `paths` holds."""
    return {shape for path in paths
            for shape in load_dataset(path).measurements[SHAPE].drop_duplicates().itertuples(index=False, name=None)}


def report(dataset_path: Path, swept_paths: Sequence[Path], below: float, command: str) -> tuple[str, pd.DataFrame]:
    """The Markdown page (the gap table and the sweep plan) and the per-shape table it summarizes."""
    dataset = load_dataset(dataset_path)
    ratios = shape_ratios(dataset.measurements, dataset.vendor)
    gaps = gap_table(ratios)
    plan = sweep_plan(ratios, swept_shapes(swept_paths), below)
    gpu = dataset.provenance.get("gpu_name", dataset.gpu)
    plan_rows = plan.assign(shape=["x".join(map(str, s)) for s in plan[SHAPE].itertuples(index=False, name=None)])
    shapes = ",".join(plan_rows["shape"])
    return "\n".join([
        "# Where the pointer GEMM falls short of cuBLAS, and where the TMA GEMM is to be swept next", "",
        f"Command: `{command}`. Data: `{shown_path(dataset_path.resolve())}` ({len(ratios):,} shapes, {gpu}); "
        "the ratio of a shape is cuBLAS's latency / the fastest of its recorded candidates, both timed in the "
        "same sitting (above 1: the Triton kernel is faster). The TMA GEMM takes N and K that are multiples of "
        f"{TMA_ALIGNMENT}; the pointer GEMM takes any.", "",
        markdown_table(gaps, "{:.3g}"), "",
        "## The next TMA sweeps (fixed before any of them is measured)", "",
        f"Per cell of the table that the TMA GEMM can take, the shape with the lowest ratio, if under {below:g}x, "
        "leaving out shapes that these TMA datasets of the GPU already hold "
        f"({', '.join(f'`{shown_path(Path(p).resolve())}`' for p in swept_paths) or 'none given'}); "
        "sweep them in this order:", "",
        markdown_table(plan_rows[["shape", "class", "family", "best_ms", "vendor_ms", "ratio"]], "{:.4g}"), "",
        f"`python -m tunebench.collect --kernel matmul_tma --dtype bfloat16 --shapes {shapes} --out ...`", ""]), ratios


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET, help="a pointer-GEMM dataset with vendor timings")
    parser.add_argument("--swept", type=Path, nargs="*", default=list(SWEPT),
                        help="TMA datasets whose shapes are left out of the plan")
    parser.add_argument("--below", type=float, default=0.9, help="plan only shapes under this ratio to cuBLAS")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if not args.below > 0:
        parser.error(f"--below must be a positive ratio to cuBLAS, got {args.below!r}")
    missing = [str(path) for path in (args.dataset, *args.swept) if not path.is_file()]
    if missing:
        parser.error(f"no such dataset: {', '.join(missing)}")
    command = " ".join([".venv/bin/python benchmarks/family_gaps.py", *(sys.argv[1:] if argv is None else argv)])
    try:
        text, ratios = report(args.dataset, args.swept, args.below, command)
    except ValueError as error:  # a dataset without vendor timings, or of another kernel's shapes
        parser.error(str(error))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(args.out, text)
    write_text_atomically(args.out.with_suffix(".csv"), ratios.to_csv(index=False, float_format="%.6g"))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
