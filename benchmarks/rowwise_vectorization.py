"""Why the 5000-wide row-wise shapes stayed far from copy bandwidth, and what the alignment hint changes: compile each
kernel's recorded best config for 8192 rows of 5000 and of 5120 columns to PTX for sm_90 (no GPU needed), without
the hint (ALIGN 1) and as launched, and count global loads and stores by width.

    .venv/bin/python benchmarks/rowwise_vectorization.py    # ~1 minute on a CPU; writes results/bandwidth/vectorization.md

Triton specializes an integer argument on divisibility by 16; a row stride of 5000 elements is not, so without the
hint the compiler cannot prove 16-byte alignment of a row and falls back to 2-byte accesses.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tunebench.files import write_text_atomically
from tunebench.kernels import layernorm, rowwise, softmax
from tunebench.tables import markdown_table

HOPPER = GPUTarget("cuda", 90, 32)
ROWS, WIDTHS = 8192, (5000, 5120)
POINTERS = {layernorm.NAME: 4, softmax.NAME: 2}  # leading pointer arguments of each kernel


def global_accesses(kernel: Any, config: Mapping[str, Any], cols: int, pointers: int,
                    hinted: bool) -> collections.Counter:
    """PTX global load/store instructions of `kernel` compiled for `config`, with the launch's specialization:
    16-byte-aligned pointers, the column count and row strides marked divisible by 16 only where they are, and
    with `hinted` the launch's ALIGN (else 1)."""
    arguments = rowwise.compile_arguments(config, cols)
    constexprs = {name: value for name, value in arguments.items() if name in kernel.arg_names}
    if not hinted:
        constexprs["ALIGN"] = 1
    signature, attributes = {}, {}
    for index, name in enumerate(kernel.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
        elif index < pointers:
            signature[name], attributes[(index,)] = "*bf16", [["tt.divisibility", 16]]
        elif name == "eps":
            signature[name] = "fp32"
        else:
            signature[name] = "i32"
            if name != "n_rows" and cols % 16 == 0:
                attributes[(index,)] = [["tt.divisibility", 16]]
    compiled = triton.compile(ASTSource(kernel, signature, constexprs, attributes), target=HOPPER,
                              options={"num_warps": arguments["num_warps"], "num_stages": arguments["num_stages"]})
    return collections.Counter(re.findall(r"\b((?:ld|st)\.global[.:\w]*|cp\.async\.c[ag]\.shared\.global[.:\w]*)",
                                          compiled.asm["ptx"]))


def recorded_best(dataset: pd.DataFrame, parameters: list[str], cols: int) -> dict[str, Any]:
    """The fastest recorded config of (ROWS, cols)."""
    task = dataset[(dataset.status == "ok") & dataset.BLOCK_SIZE.notna() & (dataset.rows == ROWS) & (dataset.cols == cols)]
    best = task.loc[task.latency_ms.idxmin()]
    return {name: int(best[name]) if isinstance(best[name], float) else best[name] for name in parameters}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/bandwidth/vectorization.md"))
    args = parser.parse_args()
    rows = []
    for module in (layernorm, softmax):
        dataset = pd.read_parquet(f"results/datasets/{module.NAME}_bfloat16_h100.parquet")
        parameters = [parameter.name for parameter in module.config_space().parameters]
        for cols in WIDTHS:
            config = recorded_best(dataset, parameters, cols)
            kernel = getattr(module, f"{module.NAME}_kernel")
            row = {"kernel": module.NAME, "shape": f"{ROWS} x {cols}",
                   "recorded best config": ", ".join(f"{k}={v}" for k, v in config.items())}
            row["ALIGN"] = rowwise.compile_arguments(config, cols)["ALIGN"]
            for hinted, column in ((False, "without the hint (ALIGN 1)"), (True, "as launched")):
                accesses = global_accesses(kernel, config, cols, POINTERS[module.NAME], hinted)
                row[column] = ", ".join(f"{n} {op}" for op, n in sorted(accesses.items()))
            rows.append(row)
    text = (f"# Global memory accesses of the recorded best configs (PTX for sm_90, Triton {triton.__version__})\n\n"
            f"Command: `.venv/bin/python {' '.join(sys.argv)}`\n\n{markdown_table(pd.DataFrame(rows))}\n")
    write_text_atomically(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
