"""Which kernels cuBLAS launches for a bf16 GEMM shape, as the CUDA profiler names them (tile size, cluster shape and
K-splitting scheme are in the names), with their mean GPU time; so that a gap to cuBLAS can be read against its kernel.

On a GPU: `PYTHONPATH=lib python3 benchmarks/vendor_kernels.py --out results/matmul_tma/cublas_kernels_h200.csv`
(a CSV, and a markdown table beside it); `--shapes` names other shapes. cuBLAS is column-major, so a name's tile reads
columns x rows of torch's row-major C (`results/matmul_tma/cublas_orientation_h200.md`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import torch
from torch.profiler import ProfilerActivity, profile

from tunebench.collect import parse_shapes
from tunebench.files import write_text_atomically
from tunebench.kernels import matmul
from tunebench.tables import markdown_table

SHAPES = ((256, 11008, 4096), (512, 4096, 11008), (768, 4096, 14336), (1024, 6144, 4096), (4096, 4096, 4096))
RUNS = 20


def vendor_kernels(shape: tuple[int, int, int], runs: int = RUNS) -> pd.DataFrame:
    """Per kernel cuBLAS launched over `runs` products at `shape` (after a warm-up): its launches per product and
    mean GPU time in microseconds."""
    inputs = matmul.make_inputs(shape, "bfloat16", "cuda", split_k_workspace=False)
    matmul.run_vendor(inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as profiled:
        for _ in range(runs):
            matmul.run_vendor(inputs)
        torch.cuda.synchronize()
    rows = [{"kernel": event.key, "launches_per_product": event.count / runs,
             "mean_us": event.device_time_total / event.count}
            for event in profiled.key_averages()
            if event.device_type == torch.autograd.DeviceType.CUDA and event.device_time_total > 0]
    return pd.DataFrame(rows).assign(shape="x".join(map(str, shape)))


def _shapes(text: str) -> list[tuple[int, ...]]:
    try:
        return parse_shapes(text, 3)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="CSV of the kernels; a .md table goes beside it")
    parser.add_argument("--shapes", type=_shapes, default=list(SHAPES),
                        help="comma-separated MxNxK (default: the four prefill-sized layers and 4096^3)")
    args = parser.parse_args(argv)
    found = pd.concat([vendor_kernels(shape) for shape in args.shapes], ignore_index=True)
    found["gpu"] = torch.cuda.get_device_name(0)
    found = found[["shape", "kernel", "launches_per_product", "mean_us", "gpu"]]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(args.out, found.to_csv(index=False))
    command = "PYTHONPATH=lib python3 benchmarks/vendor_kernels.py " + " ".join(sys.argv[1:] if argv is None else argv)
    write_text_atomically(args.out.with_suffix(".md"), "\n\n".join([
        "# The kernels cuBLAS launches", f"Command: `{command}`, on {found.gpu.iloc[0]} (torch {torch.__version__}).",
        markdown_table(found.drop(columns="gpu").round({"mean_us": 1}))]) + "\n")
    print(found.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
