"""Why the 5000-wide row-wise shapes stayed far from copy bandwidth, and what the alignment hint changes: compile each
kernel's recorded best config for 8192 rows of 5000 and of 5120 columns for sm_90 (no GPU needed), without the hint
(ALIGN 1) and as launched, and count global loads and stores by width in the PTX; then, over a seeded sample of each
space's configs at 5000 columns, the registers and stack (spilled registers) the cubins ask for both ways.

    .venv/bin/python benchmarks/rowwise_vectorization.py    # ~1 minute on a CPU; writes results/bandwidth/vectorization.md

Triton specializes an integer argument on divisibility by 16; a row stride of 5000 elements is not, so without the
hint the compiler cannot prove 16-byte alignment of a row and falls back to 2-byte accesses.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tunebench.files import write_text_atomically
from tunebench.kernels import layernorm, rowwise, softmax
from tunebench.tables import markdown_table

HOPPER = GPUTarget("cuda", 90, 32)
ROWS, WIDTHS = 8192, (5000, 5120)
HINTED_WIDTH = 5000  # a multiple of 8 but not of 16: the hint is 8
POINTERS = {layernorm.NAME: 4, softmax.NAME: 2}  # leading pointer arguments of each kernel
TOOLS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"  # the CUDA tools that come with Triton


def compile_rowwise(kernel: Any, config: Mapping[str, Any], cols: int, pointers: int, hinted: bool) -> Any:
    """`kernel` compiled for `config` with the launch's specialization: 16-byte-aligned pointers, the column count and
    row strides marked divisible by 16 only where they are, and with `hinted` the launch's ALIGN (else 1)."""
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
    return triton.compile(ASTSource(kernel, signature, constexprs, attributes), target=HOPPER,
                          options={"num_warps": arguments["num_warps"], "num_stages": arguments["num_stages"]})


def global_accesses(compiled: Any) -> collections.Counter:
    """The PTX's global load and store instructions, and its asynchronous global-to-shared copies, by kind."""
    return collections.Counter(re.findall(r"\b((?:ld|st)\.global[.:\w]*|cp\.async\.c[ag]\.shared\.global[.:\w]*)",
                                          compiled.asm["ptx"]))


def registers_and_stack(compiled: Any) -> tuple[int, int]:
    """Registers per thread and stack bytes per thread (where ptxas spills registers) of the cubin, as cuobjdump
    reads them."""
    with tempfile.TemporaryDirectory() as folder:
        cubin = Path(folder) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        usage = subprocess.run([str(TOOLS / "cuobjdump"), "-res-usage", str(cubin)], check=True, capture_output=True,
                               text=True).stdout
    return int(re.search(r"REG:(\d+)", usage).group(1)), int(re.search(r"STACK:(\d+)", usage).group(1))


def recorded_best(dataset: pd.DataFrame, parameters: list[str], cols: int) -> dict[str, Any]:
    """The fastest recorded config of (ROWS, cols)."""
    task = dataset[(dataset.status == "ok") & dataset.BLOCK_SIZE.notna() & (dataset.rows == ROWS)
                   & (dataset.cols == cols)]
    best = task.loc[task.latency_ms.idxmin()]
    return {name: int(best[name]) if isinstance(best[name], float) else best[name] for name in parameters}


def accesses_table() -> pd.DataFrame:
    """Per kernel and width, the recorded best config's global accesses without the hint and as launched."""
    rows = []
    for module in (layernorm, softmax):
        dataset = pd.read_parquet(f"results/datasets/{module.NAME}_bfloat16_h100.parquet")
        parameters = [parameter.name for parameter in module.config_space().parameters]
        kernel = getattr(module, f"{module.NAME}_kernel")
        for cols in WIDTHS:
            config = recorded_best(dataset, parameters, cols)
            row = {"kernel": module.NAME, "shape": f"{ROWS} x {cols}",
                   "recorded best config": ", ".join(f"{k}={v}" for k, v in config.items()),
                   "ALIGN": rowwise.compile_arguments(config, cols)["ALIGN"]}
            for hinted, column in ((False, "without the hint (ALIGN 1)"), (True, "as launched")):
                accesses = global_accesses(compile_rowwise(kernel, config, cols, POINTERS[module.NAME], hinted))
                row[column] = ", ".join(f"{n} {op}" for op, n in sorted(accesses.items()))
            rows.append(row)
    return pd.DataFrame(rows)


def registers_table(sample: int, seed: int) -> pd.DataFrame:
    """Per kernel, over `sample` configs drawn from its space (seeded) and compiled for HINTED_WIDTH columns both
    ways: the median registers, how many configs take more or fewer with the hint, and how many use stack."""
    rng = np.random.default_rng(seed)
    rows = []
    for module in (layernorm, softmax):
        kernel = getattr(module, f"{module.NAME}_kernel")
        usage = [[registers_and_stack(compile_rowwise(kernel, config, HINTED_WIDTH, POINTERS[module.NAME], hinted))
                  for hinted in (False, True)] for config in module.config_space().sample(rng, sample, unique=True)]
        (without, with_hint) = (np.array([pair[index] for pair in usage]) for index in (0, 1))
        rows.append({"kernel": module.NAME, "configs": len(usage),
                     "registers without the hint (median)": float(np.median(without[:, 0])),
                     "registers with it (median)": float(np.median(with_hint[:, 0])),
                     "configs taking more registers with it": int((with_hint[:, 0] > without[:, 0]).sum()),
                     "configs taking fewer": int((with_hint[:, 0] < without[:, 0]).sum()),
                     "configs using stack without the hint": int((without[:, 1] > 0).sum()),
                     "configs using stack with it": int((with_hint[:, 1] > 0).sum())})
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("results/bandwidth/vectorization.md"))
    parser.add_argument("--sample", type=int, default=40, help="configs drawn per kernel for the register table")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.sample < 1:
        parser.error(f"--sample must be at least 1, got {args.sample}")
    path = os.environ.get("PYTHONPATH")
    command = f"{f'PYTHONPATH={path} ' if path else ''}.venv/bin/python {' '.join(sys.argv)}"
    text = (f"# Global memory accesses and registers of the row-wise kernels with and without the alignment hint "
            f"(sm_90, Triton {triton.__version__})\n\nCommand: `{command}`\n\n"
            f"{markdown_table(accesses_table())}\n\n"
            f"Registers and stack per thread (cuobjdump -res-usage of the cubin Triton built) of {args.sample} configs "
            f"per kernel drawn from its space (seed {args.seed}), at {ROWS} x {HINTED_WIDTH}:\n\n"
            f"{markdown_table(registers_table(args.sample, args.seed))}\n")
    write_text_atomically(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
