"""What the palette matmul's split sum in the kernel waits on: one split config at one shape, launched in one way of
summing, for Nsight Compute to read; `--summarize` puts two ways' profiles side by side.

    SECTIONS="--section WarpStateStats --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters"
    PYTHONPATH=lib ncu --clock-control none --kernel-name regex:reconstruct --launch-skip 20 --launch-count 3 \
        $SECTIONS --export in_kernel python3 benchmarks/compressed_split_profile.py --way in_kernel
    PYTHONPATH=lib ncu --clock-control none --launch-skip 90 --launch-count 9 \
        $SECTIONS --export separate_launches python3 benchmarks/compressed_split_profile.py --way separate_launches
    ncu --import in_kernel.ncu-rep --page raw --csv > in_kernel_raw.csv  # and the same for separate_launches
    .venv/bin/python benchmarks/compressed_split_profile.py --summarize in_kernel_raw.csv separate_launches_raw.csv \
        --gpu "NVIDIA H100 80GB HBM3" --out results/compressed_split_k/profile_h100.md

The first call is checked against the fp32 product before the profiled ones. By launches, a call is three
kernels (the matmul, the copy into the output, the fill); `--launch-skip` and `--launch-count` count them all.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.tables import markdown_table

SHAPE = (1, 14336, 4096)  # Llama-3.1-8B's gate projection at batch 1, where the in-kernel sum was 1.08x slower
TILE = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT_K": 4, "num_warps": 4, "num_stages": 3}
WAYS = ("in_kernel", "separate_launches")
# Nsight Compute's names for what the summary shows (WarpStateStats' stall reasons are found by their prefix)
SHOWN = {"gpu__time_duration.sum": "duration",
         "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy",
         "smsp__inst_executed.sum": "warp instructions executed",
         "smsp__average_warp_latency_per_inst_issued.ratio": "warp cycles per issued instruction",
         "dram__bytes.sum": "DRAM bytes", "launch__registers_per_thread": "registers a thread",
         "launch__grid_size": "programs", "launch__occupancy_limit_registers": "programs an SM, registers' limit",
         "launch__occupancy_limit_shared_mem": "programs an SM, shared memory's limit",
         "launch__waves_per_multiprocessor": "waves"}
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"


def launch(way: str, calls: int) -> None:
    """Check one call of TILE summed `way` at SHAPE, then make `calls` more (for the profiler to pick from)."""
    import torch

    from tunebench.kernels import matmul
    from tunebench.kernels.compressed_matmul import family, reconstruct

    if way not in WAYS:
        raise ValueError(f"way {way!r}; allowed: {', '.join(WAYS)}")
    inputs = family.make_inputs(SHAPE, "bfloat16")
    config = {**TILE, "split_reduction": way}
    reconstruct.multiply(inputs.x, "palette", config, inputs.out, inputs.split, inputs.weight)
    error = matmul.relative_error(inputs.out, family.reference(inputs))
    if error > matmul.TOLERANCE["bfloat16"]:
        raise SystemExit(f"{way}: relative error {error:.3g} against the fp32 product")
    for _ in range(calls):
        reconstruct.multiply(inputs.x, "palette", config, inputs.out, inputs.split, inputs.weight)
    torch.cuda.synchronize()


def read_raw(path: Path) -> tuple[pd.DataFrame, dict[str, str]]:
    """Nsight Compute's `--page raw --csv` output (anything the program printed before it is skipped): one row per
    profiled kernel, one column per metric, numbers as floats where they parse; and each metric's unit."""
    text = path.read_text()
    if '"ID"' not in text:
        raise ValueError(f"{path}: no Nsight Compute raw page (a header row starting with \"ID\")")
    table = pd.read_csv(io.StringIO(text[text.index('"ID"'):]), thousands=",", dtype=str, keep_default_na=False)
    units = {column: unit for column, unit in table.iloc[0].items() if unit}
    table = table.iloc[1:]
    for column in table.columns:
        numbers = pd.to_numeric(table[column], errors="coerce")
        if numbers.notna().all():
            table[column] = numbers
    return table, units


def summarize(profiles: dict[str, Path], gpu: str) -> str:
    """A markdown table: per way, each kernel's duration and SHOWN metrics (median over its profiled launches), and
    the stall reasons of the matmul kernel, largest first."""
    lines = [f"# The palette matmul's split sum, profiled: {SHAPE[0]} x {SHAPE[1]} x {SHAPE[2]}, "
             + " ".join(f"{key} {value}" for key, value in TILE.items()), "",
             f"Nsight Compute on {gpu}, `--clock-control none`; medians over the profiled launches of each kernel. "
             "Commands: the module docstring of `benchmarks/compressed_split_profile.py`.", ""]
    kernels, stalls = [], {}
    for way, path in profiles.items():
        raw, units = read_raw(path)
        for name, launches in raw.groupby("Kernel Name", sort=False):
            row = {"way": way, "kernel": str(name)[:60], "launches": len(launches)}
            row.update({label + (f" ({units[metric]})" if metric in units else ""): launches[metric].median()
                        for metric, label in SHOWN.items() if metric in launches})
            kernels.append(row)
            if "reconstruct" in str(name):
                columns = [c for c in launches.columns if c.startswith(STALL_PREFIX) and c.endswith(STALL_SUFFIX)
                           and "_not_issued" not in c]
                stalls[way] = {c[len(STALL_PREFIX):-len(STALL_SUFFIX)]: launches[c].median() for c in columns}
    lines += [markdown_table(pd.DataFrame(kernels)), "",
              "Stall reasons of the matmul kernel: warps stalled for each reason per issued instruction (cycles).", ""]
    table = pd.DataFrame(stalls).fillna(0.0)
    table = table.loc[table.max(axis=1).sort_values(ascending=False).index]
    shown = table[table.max(axis=1) >= 0.01].rename_axis("stall reason").reset_index()
    lines += [markdown_table(shown, "{:.3f}"), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--way", choices=WAYS, help="launch the config summed this way (on the GPU)")
    parser.add_argument("--calls", type=int, default=40, help="calls after the checked one")
    parser.add_argument("--summarize", nargs=2, type=Path, metavar=("IN_KERNEL_CSV", "SEPARATE_LAUNCHES_CSV"),
                        help="Nsight Compute raw CSVs of the two ways, to put side by side")
    parser.add_argument("--out", type=Path, help="where --summarize writes its markdown")
    parser.add_argument("--gpu", default="the GPU", help="the profiled GPU's name, for --summarize's text")
    args = parser.parse_args(argv)
    if args.summarize:
        if args.out is None:
            parser.error("--summarize needs --out")
        write_text_atomically(args.out, summarize(dict(zip(WAYS, args.summarize)), args.gpu))
        return 0
    if args.way is None:
        parser.error("give --way (profile it) or --summarize")
    launch(args.way, args.calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
