"""New GEMM shapes measured on the H200 only, as extra training data for the H100 predictor: a seeded draw of hinted
and odd N or K with M >= 8, the classes and M range where the re-timed picks trail the best (stop 43), none of them a
shape measured on either GPU before.

Run: `.venv/bin/python benchmarks/h200_training_shapes.py` (well under a second) prints the draw in batches of BATCH, one
per line, in the order the device sittings measure them; `--check` exits 1 unless the dataset's shapes are whole
batches from the start of the draw.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hinted_shapes import draw_shapes
from odd_shapes import SIZES
from tunebench.kernels import matmul
from tunebench.measure.dataset import load_dataset

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "results" / "datasets" / "matmul_bfloat16_h200_training.parquet"
SEED = 2044
COUNT = 128
BATCH = 16
MIN_M = 8  # under M = 8 the re-timed picks were as fast as the re-timed recorded best (stop 43): the judge's misses
# (N, K) kinds, cycled: every pair with a hinted or odd member, as `unaligned_check_shapes.PATTERN`
PATTERN = (("aligned", "odd"), ("odd", "aligned"), ("odd", "odd"), ("hinted", "aligned"), ("aligned", "hinted"),
           ("hinted", "hinted"), ("hinted", "odd"), ("odd", "hinted"))


def draw() -> list[tuple[int, int, int]]:
    """COUNT shapes with M >= MIN_M, in the order of `hinted_shapes.draw_shapes` with random.Random(SEED) cycling
    PATTERN (drawing 4 COUNT and keeping those with M >= MIN_M), none a prediction or dataset shape."""
    taken = set(matmul.PREDICTION_SHAPES) | set(matmul.DATASET_SHAPES)
    drawn = [shape for shape in draw_shapes(SEED, 4 * COUNT, PATTERN, SIZES, taken) if shape[0] >= MIN_M]
    if len(drawn) < COUNT:
        raise AssertionError(f"only {len(drawn)} of {4 * COUNT} drawn shapes have M >= {MIN_M}; draw more")
    return drawn[:COUNT]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help=f"check the shapes of {DATASET.name}")
    args = parser.parse_args()
    drawn = draw()
    for first in range(0, len(drawn), BATCH):
        print(",".join(f"{m}x{n}x{k}" for m, n, k in drawn[first:first + BATCH]))
    if not args.check:
        return 0
    measured = {tuple(int(size) for size in shape) for shape in load_dataset(DATASET, kernel="matmul").shapes()}
    whole = len(measured) // BATCH * BATCH
    if len(measured) % BATCH or measured != set(drawn[:whole]):
        print(f"{DATASET.name}'s {len(measured)} shapes are not whole batches from the start of this draw")
        return 1
    print(f"{DATASET.name} holds this draw's first {whole // BATCH} of {COUNT // BATCH} batches")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
