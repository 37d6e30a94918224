"""The draw of the prediction shapes with an odd N or K (the regime predicted worst once the hinted shapes were in):
prints them in draw order, in batches of BATCH (the order the device sittings measure them in).

Run: `.venv/bin/python benchmarks/odd_shapes.py` (well under a second). `--check` exits 1 unless the COUNT shapes of
`matmul.PREDICTION_SHAPES` after the hinted draw are this draw (measured whole, in 10 batches).
"""

from __future__ import annotations

import argparse
import random

from hinted_shapes import SIZES as HINTED_SIZES, draw_shapes, hinted_draw_end
from tunebench.kernels import matmul

SEED = 2031
COUNT = 160
BATCH = 16
PATTERN = (("aligned", "odd"), ("hinted", "odd"), ("odd", "aligned"), ("odd", "hinted"), ("odd", "odd"),
           ("aligned", "odd"), ("hinted", "hinted"), ("odd", "odd"))  # (N, K), cycled


def odd_size(rng: random.Random) -> int:
    """An odd size near 2 ** uniform(9, 14)."""
    return round(2 ** rng.uniform(9, 14) / 2 - 0.5) * 2 + 1


SIZES = {**HINTED_SIZES, "odd": odd_size}


def draw(taken: set[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """This draw: COUNT shapes with random.Random(SEED), cycling PATTERN (`hinted_shapes.draw_shapes`)."""
    return draw_shapes(SEED, COUNT, PATTERN, SIZES, taken)


def odd_draw_end() -> int:
    """The index in matmul.PREDICTION_SHAPES just past this draw's shapes (later draws follow them)."""
    return hinted_draw_end() + COUNT


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="check the list in matmul.PREDICTION_SHAPES")
    args = parser.parse_args()
    listed, first = list(matmul.PREDICTION_SHAPES), hinted_draw_end()
    shapes = draw(set(listed[:first]) | set(matmul.DATASET_SHAPES))
    for start in range(0, COUNT, BATCH):
        print(",".join(f"{m}x{n}x{k}" for m, n, k in shapes[start:start + BATCH]))
    if not args.check:
        return 0
    if listed[first:odd_draw_end()] != shapes:
        print(f"matmul.PREDICTION_SHAPES[{first}:{odd_draw_end()}] is not this draw")
        return 1
    print(f"matmul.PREDICTION_SHAPES[{first}:{odd_draw_end()}] is this draw")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
