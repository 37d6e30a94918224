"""The pointer GEMM (`matmul`) and the TMA GEMM (`matmul_tma`) on the shapes both have swept: each family's fastest
recorded configs timed again in shuffled rounds on one GPU, with cuBLAS in every round, so that which family wins a
shape, and by how much, rests on one sitting's medians over rounds rather than on two sweeps' sittings.

First, anywhere: `.venv/bin/python benchmarks/gemm_families_rounds.py --write-plan PLAN_DIR --pointer P.parquet --tma
T.parquet` (a CSV per family). Then on a GPU: `PYTHONPATH=lib python3 benchmarks/gemm_families_rounds.py --plan
PLAN_DIR --out OUT_DIR` (a CSV of timings per family; a killed run resumes by round). Then anywhere: `.venv/bin/python
benchmarks/gemm_families_rounds.py --summarize --out OUT_DIR` writes OUT_DIR/summary.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

import pandas as pd

from tma_rounds import ROUNDS, SHAPE, TOP, plan as family_plan
from tunebench.files import write_text_atomically
from tunebench.gemm_kernels import FAMILIES, families_table, read_families
from tunebench.measure.rounds import time_in_rounds
from tunebench.measure.timing import TimingPolicy
from tunebench.tables import markdown_table

PLAN_COLUMNS = (*SHAPE, "recorded_rank", "recorded_ms", "recorded_vendor_ms")


def plan(pointer: Path, tma: Path) -> dict[str, pd.DataFrame]:
    """Per family, its TOP fastest recorded configs on each shape that both datasets hold (a clear error if none)."""
    plans = dict(zip(FAMILIES, (family_plan(pointer), family_plan(tma))))
    shared = set.intersection(*(set(p[SHAPE].itertuples(index=False, name=None)) for p in plans.values()))
    if not shared:
        raise ValueError(f"{pointer} and {tma} share no shape; nothing to time side by side")
    return {family: p[[shape in shared for shape in p[SHAPE].itertuples(index=False, name=None)]]
            .reset_index(drop=True) for family, p in plans.items()}


def time_plans(out_dir: Path, plans: dict[str, pd.DataFrame], seed: int) -> None:
    """Time each family's plan and cuBLAS in ROUNDS rounds on this machine's GPU, into OUT_DIR/<family>.csv."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for family, configs in plans.items():
        names = [name for name in configs.columns if name not in PLAN_COLUMNS]
        time_in_rounds(out_dir / f"{family}.csv", configs, SHAPE, names, {"default": TimingPolicy()}, ROUNDS, seed,
                       kernel=family, vendor=True)


def summarize(out_dir: Path, command: str) -> str:
    timings = read_families(out_dir)
    gpu = timings[FAMILIES[0]].gpu.iloc[0]
    return "\n\n".join([
        "# The pointer GEMM and the TMA GEMM side by side, in rounds", f"Command: `{command}`",
        f"On {gpu}, one sitting: each family's {TOP} fastest recorded configs per shape and cuBLAS, {ROUNDS} rounds "
        "per family (the pointer GEMM's rounds first, then the TMA GEMM's), each round every config once in a seeded "
        "shuffled order (the default timing policy) and cuBLAS once, before the configs in even rounds and after "
        "them in odd ones. Speeds against cuBLAS are medians over rounds of cuBLAS ms / the config's ms in the same "
        "round; \"vs the pointer GEMM's fastest\" is the ratio of the two families' fastest medians.",
        markdown_table(families_table(timings)),
    ]) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-plan", type=Path, help="write each family's configs to time into this folder")
    parser.add_argument("--pointer", type=Path, help="the pointer GEMM's recorded dataset (with --write-plan)")
    parser.add_argument("--tma", type=Path, help="the TMA GEMM's recorded dataset (with --write-plan)")
    parser.add_argument("--plan", type=Path, help="the folder --write-plan wrote")
    parser.add_argument("--out", type=Path, help="the folder of the timings (resumed where they exist)")
    parser.add_argument("--summarize", action="store_true", help="write OUT/summary.md (no GPU)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.write_plan:
        if args.pointer is None or args.tma is None:
            parser.error("--write-plan needs --pointer and --tma datasets")
        args.write_plan.mkdir(parents=True, exist_ok=True)
        for family, configs in plan(args.pointer, args.tma).items():
            write_text_atomically(args.write_plan / f"{family}.csv", configs.to_csv(index=False))
    elif args.out is None:
        parser.error("--out is required to time or to summarize")
    elif args.summarize:
        command = " ".join([".venv/bin/python benchmarks/gemm_families_rounds.py", *(sys.argv[1:] if argv is None
                                                                                      else argv)])
        text = summarize(args.out, command)
        write_text_atomically(args.out / "summary.md", text)
        print(text)
    elif args.plan is None:
        parser.error("--plan is required to time (write one with --write-plan)")
    else:
        time_plans(args.out, {family: pd.read_csv(args.plan / f"{family}.csv") for family in FAMILIES}, args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
