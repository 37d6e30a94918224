"""The draw of the prediction shapes with N and K both odd multiples of 2 or 4 (where the 569-shape model missed
worst): prints them in draw order, in batches of BATCH (the order the device sittings measure them in).

Run: `.venv/bin/python benchmarks/narrow_hinted_shapes.py` (well under a second). `--check` exits 1 unless the shapes
of `matmul.PREDICTION_SHAPES` after the both-hinted draw are the first whole batches of this draw.
"""

from __future__ import annotations

import argparse
import random

from both_hinted_shapes import both_hinted_draw_end
from hinted_shapes import draw_shapes
from tunebench.kernels import matmul

SEED = 2034
COUNT = 64
BATCH = 16
PATTERN = (("narrow", "narrow"),)  # (N, K)


def narrow_hinted_size(rng: random.Random) -> int:
    """An odd multiple of 2 or 4 (even odds), near 2 ** uniform(9, 14)."""
    width = rng.choice((2, 4))
    return round(2 ** rng.uniform(9, 14) / (2 * width) - 0.5) * 2 * width + width


def draw(taken: set[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """This draw: COUNT shapes with random.Random(SEED) (`hinted_shapes.draw_shapes`, M and the limits as there)."""
    return draw_shapes(SEED, COUNT, PATTERN, {"narrow": narrow_hinted_size}, taken)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="check the list in matmul.PREDICTION_SHAPES")
    args = parser.parse_args()
    shapes, end = list(matmul.PREDICTION_SHAPES), both_hinted_draw_end()
    drawn = draw(set(shapes[:end]) | set(matmul.DATASET_SHAPES))
    for start in range(0, COUNT, BATCH):
        print(",".join(f"{m}x{n}x{k}" for m, n, k in drawn[start:start + BATCH]))
    if not args.check:
        return 0
    listed = shapes[end:]
    if len(listed) % BATCH or listed != drawn[:len(listed)]:
        print(f"the {len(listed)} shapes after the both-hinted draw are not whole batches of this draw")
        return 1
    print(f"the last {len(listed)} of matmul.PREDICTION_SHAPES are the draw's first {len(listed) // BATCH} batches")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
