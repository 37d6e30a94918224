"""What the split sum in the kernel costs the compressed matmul in registers: every split tile config of the recorded
sweep compiled on this GPU summed by launches and in the kernel, with and without `register_cap`, and (`--summarize`,
no GPU) the sweep's two ways side by side, by whether the uncapped in-kernel binary fits fewer programs on an SM.

    PYTHONPATH=lib python3 benchmarks/compressed_split_registers.py --out results/compressed_split_k/registers_h100.csv
    .venv/bin/python benchmarks/compressed_split_registers.py --summarize \
        --out results/compressed_split_k/registers_h100.csv

Every shape of the sweep (Llama-3.1-8B's MLP) has N and K multiples of 2,048, so each config has one binary for all.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import multiprocessing
import os
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.kernels import occupancy
from tunebench.kernels.compressed_matmul.pipelines import get_pipeline
from tunebench.kernels.compressed_matmul.reconstruct import MATMUL_PARAMETERS
from tunebench.tables import markdown_table

DATASET = Path("results/datasets/compressed_matmul_bfloat16_h100.parquet")
SHAPE = (1, 14336, 4096)
TILE = list(MATMUL_PARAMETERS)


def split_tiles(dataset: pd.DataFrame) -> pd.DataFrame:
    """The (source, tile config) pairs of the sweep's split configs, once each."""
    split = dataset[dataset.SPLIT_K > 1]
    sources = split.pipeline.map(lambda name: get_pipeline(name).matmul_source)
    tiles = split.assign(matmul_source=sources)[["matmul_source", *TILE]].drop_duplicates().reset_index(drop=True)
    return tiles.astype({name: int for name in TILE})


def compile_both_ways(job: dict[str, Any]) -> dict[str, Any]:
    """One tile config compiled for SHAPE summed by launches, and in the kernel with `register_cap` "as_by_launches"
    ("in_kernel") and "none" ("in_kernel_uncapped", as stop 92's sweep timed it): registers, spills, shared memory."""
    from tunebench.kernels.compressed_matmul import reconstruct

    source, row = job["matmul_source"], dict(job)
    tile = {name: job[name] for name in TILE}
    for name, way, cap in (("separate_launches", "separate_launches", "none"),
                           ("in_kernel", "in_kernel", "as_by_launches"), ("in_kernel_uncapped", "in_kernel", "none")):
        kernel = reconstruct.compile_matmul({**tile, "split_reduction": way, "register_cap": cap}, source, SHAPE)
        kernel._init_handles()  # loads the binary, which sets n_regs and n_spills
        row.update({f"registers_{name}": kernel.n_regs, f"spilled_{name}": kernel.n_spills,
                    f"shared_bytes_{name}": kernel.metadata.shared,
                    f"cubin_{name}": hashlib.sha256(kernel.asm["cubin"]).hexdigest()[:16]})
    row["cap_changed_binary"] = row["cubin_in_kernel"] != row["cubin_in_kernel_uncapped"]
    return row


def compile_all(tiles: pd.DataFrame, workers: int) -> pd.DataFrame:
    """`compile_both_ways` for every row of `tiles`, in `workers` processes, with progress."""
    rows = []
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        futures = [pool.submit(compile_both_ways, job) for job in tiles.to_dict("records")]
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            rows.append(future.result())
            if done % 20 == 0 or done == len(futures):
                print(f"compiled {done} of {len(futures)} tile configs both ways", flush=True)
    import torch
    import triton

    table = pd.DataFrame(rows).sort_values(["matmul_source", *TILE]).reset_index(drop=True)
    return table.assign(gpu=torch.cuda.get_device_name(0), triton=triton.__version__)


def summarize(registers: pd.DataFrame, dataset: pd.DataFrame, command: str) -> str:
    """Markdown: how many tiles the in-kernel sum costs registers and programs an SM at the compiler's choice, what
    the cap leaves, and the sweep's in-kernel / by-launches latency (median over configs and shapes) for tiles that
    keep and that lose a program uncapped."""
    def programs(column: str) -> list[int]:
        return [occupancy.programs_per_sm(r, 0, w) for r, w in zip(registers[column], registers.num_warps)]

    separate = programs("registers_separate_launches")
    registers = registers.assign(loses_programs=[a < b for a, b in zip(programs("registers_in_kernel_uncapped"),
                                                                       separate)],
                                 capped_loses_programs=[a < b for a, b in zip(programs("registers_in_kernel"),
                                                                              separate)],
                                 more_registers=registers.registers_in_kernel_uncapped
                                 > registers.registers_separate_launches,
                                 fewer_registers_capped=registers.registers_in_kernel
                                 < registers.registers_in_kernel_uncapped,
                                 capped_spills=registers.spilled_in_kernel > 0)
    counts = registers.groupby("matmul_source").agg(
        tiles=("loses_programs", "size"), more_registers_uncapped=("more_registers", "sum"),
        fewer_programs_an_sm_uncapped=("loses_programs", "sum"),
        fewer_registers_capped=("fewer_registers_capped", "sum"),
        cap_changed_binary=("cap_changed_binary", "sum"),
        fewer_programs_an_sm_capped=("capped_loses_programs", "sum"),
        spills_capped=("capped_spills", "sum")).reset_index()
    ok = dataset[(dataset.status == "ok") & (dataset.SPLIT_K > 1)]
    if "register_cap" in ok:  # the compiler's choice only (a sweep before stop 93 records no cap)
        ok = ok[ok.register_cap == "none"]
    keys = ["pipeline", *TILE, "decode_sm_percent", "decode_schedule", "M", "N", "K"]
    ways = ok.pivot_table(index=keys, columns="split_reduction", values="latency_ms").dropna().reset_index()
    ways = ways.assign(matmul_source=ways.pipeline.map(lambda name: get_pipeline(name).matmul_source))
    ways = ways.merge(registers[["matmul_source", *TILE, "loses_programs"]], on=["matmul_source", *TILE])
    ways["ratio"] = ways.in_kernel / ways.separate_launches
    ways["batch"] = ways.M.map(lambda m: "M <= 16" if m <= 16 else "M >= 64")
    latency = ways.groupby(["batch", "loses_programs"]).agg(
        configs_x_shapes=("ratio", "size"), median_in_kernel_over_launches=("ratio", "median"),
        in_kernel_faster=("ratio", lambda r: f"{(r < 1).mean():.0%}")).reset_index()
    return "\n\n".join([
        "# Registers the split sum in the kernel costs the compressed matmul",
        f"Command: `{command}`. Registers as Triton {registers.triton.iloc[0]} compiled each split tile config on "
        f"{registers.gpu.iloc[0]} (`PYTHONPATH=lib python3 benchmarks/compressed_split_registers.py --out CSV`); "
        f"programs an SM by registers alone ({occupancy.HOPPER.registers_per_sm} a Hopper SM, "
        f"{occupancy.HOPPER.register_allocation_unit // 32} a thread at a time, at most {occupancy.HOPPER.warps_per_sm} warps).",
        markdown_table(counts),
        f"Latencies: `{DATASET}` (both ways of every split config at 12 shapes; its in-kernel rows uncapped), "
        "in-kernel / by launches per config and shape, by whether the uncapped in-kernel binary fits fewer programs "
        "an SM; below 1 the in-kernel sum is faster.",
        markdown_table(latency, "{:.3f}"),
    ]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="CSV of registers per tile config; .md beside it")
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--summarize", action="store_true", help="only write the summary from --out (no GPU)")
    parser.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1))
    args = parser.parse_args(argv)
    dataset = pd.read_parquet(args.dataset)
    if args.summarize:
        registers = pd.read_csv(args.out)
    else:
        registers = compile_all(split_tiles(dataset), args.workers)
        write_text_atomically(args.out, registers.to_csv(index=False))
    command = "python benchmarks/compressed_split_registers.py " + " ".join(sys.argv[1:] if argv is None else argv)
    write_text_atomically(args.out.with_suffix(".md"), summarize(registers, dataset, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
