"""Batches of the prediction shapes for re-recording them with today's kernel and the read flush, a batch a sitting:
a seeded representative draw first, then the rest grouped by compiled binary (a sitting compiles few); done skipped.

CPU, once: .venv/bin/python benchmarks/rerecord_batches.py [--size 100] [--seed 0]
  writes results/config_prediction/rerecord/batch_NN.txt
GPU, batch NN (resumable; a sitting's journal comes back as NN.journal.jsonl.gz):
  python -m tunebench.collect --kernel matmul --dtype bfloat16 --shapes @results/config_prediction/rerecord/batch_NN.txt
      --configs results/datasets/matmul_prediction_configs.json --out D.parquet --flush read --screen-runs 3
      --screen-margin 0.2 [--resume-from NN.journal.jsonl.gz] [--stop-after-s S]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable, Hashable, Sequence

import numpy as np

from tunebench.collect import shapes_argument
from tunebench.files import write_text_atomically
from tunebench.kernels import get_kernel

PREDICTION = Path("results/datasets/matmul_bfloat16_h100_prediction.parquet")
ALREADY_READ = Path("results/datasets/matmul_bfloat16_h100_flush_read_1.parquet")  # stop 99: today's kernel, read
OUT = Path("results/config_prediction/rerecord")
Shape = tuple[int, ...]


def batches(shapes: Sequence[Shape], skip: set[Shape], size: int, seed: int,
            binary: Callable[[Shape], Hashable]) -> list[list[Shape]]:
    """The shapes not in `skip` in batches of `size` (the last may be shorter), in a seeded random order: the first
    batch a representative draw (a pilot), the others the rest grouped by the compiled binary that times them
    (`binary`, most shapes first), since a fresh machine compiles every candidate once per binary it meets."""
    if size < 1:
        raise ValueError(f"size={size} is not allowed; allowed: a positive number of shapes")
    todo = sorted(set(shapes) - skip)
    drawn = [todo[i] for i in np.random.default_rng(seed).permutation(len(todo))]
    pilot, rest = drawn[:size], drawn[size:]
    groups: dict[Hashable, list[Shape]] = {}
    for shape in rest:
        groups.setdefault(binary(shape), []).append(shape)
    grouped = [shape for group in sorted(groups.values(), key=len, reverse=True) for shape in group]
    return [pilot] + [grouped[start:start + size] for start in range(0, len(grouped), size)] if pilot else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    kernel = get_kernel("matmul")
    every = shapes_argument(f"@{PREDICTION}", "matmul", kernel.SHAPE_SETS, len(kernel.SHAPE_NAMES))
    skip = set(shapes_argument(f"@{ALREADY_READ}", "matmul", kernel.SHAPE_SETS, len(kernel.SHAPE_NAMES)))
    OUT.mkdir(parents=True, exist_ok=True)
    drawn = batches(every, skip, args.size, args.seed, kernel.specialization)
    for number, batch in enumerate(drawn, 1):
        write_text_atomically(OUT / f"batch_{number:02d}.txt", "\n".join("x".join(map(str, s)) for s in batch) + "\n")
    print(f"{len(every)} shapes, {len(skip)} recorded already: {len(drawn)} batches of up to {args.size} in {OUT}")


if __name__ == "__main__":
    main()
