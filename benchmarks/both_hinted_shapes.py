"""The draw of the prediction shapes with N and K both hinted (the class predicted worst once the odd shapes were in):
prints them in draw order, in batches of BATCH (the order the device sittings measure them in).

Run: `.venv/bin/python benchmarks/both_hinted_shapes.py` (well under a second). `--check` exits 1 unless the COUNT
shapes of `matmul.PREDICTION_SHAPES` after the odd draw are this draw.
"""

from __future__ import annotations

import argparse
import random

from hinted_shapes import SIZES, draw_shapes
from odd_shapes import odd_draw_end
from tunebench.kernels import matmul

SEED = 2033
COUNT = 64
BATCH = 16
PATTERN = (("hinted", "hinted"),)  # (N, K): each an odd multiple of 2, 4 or 8


def draw(taken: set[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """This draw: COUNT shapes with random.Random(SEED), N and K both hinted (`hinted_shapes.draw_shapes`)."""
    return draw_shapes(SEED, COUNT, PATTERN, SIZES, taken)


def both_hinted_draw_end() -> int:
    """The index in matmul.PREDICTION_SHAPES just past this draw's shapes (later draws follow them)."""
    return odd_draw_end() + COUNT


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="check the list in matmul.PREDICTION_SHAPES")
    args = parser.parse_args()
    shapes, end = list(matmul.PREDICTION_SHAPES), odd_draw_end()
    drawn = draw(set(shapes[:end]) | set(matmul.DATASET_SHAPES))
    for start in range(0, COUNT, BATCH):
        print(",".join(f"{m}x{n}x{k}" for m, n, k in drawn[start:start + BATCH]))
    if not args.check:
        return 0
    if shapes[end:both_hinted_draw_end()] != drawn:
        print(f"matmul.PREDICTION_SHAPES[{end}:{both_hinted_draw_end()}] is not this draw")
        return 1
    print(f"matmul.PREDICTION_SHAPES[{end}:{both_hinted_draw_end()}] is this draw")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
