"""The draw of the prediction shapes with N and K both odd multiples of 2 or 4 (where the 569-shape model missed
worst): prints them in draw order, in batches of BATCH (the order the device sittings measure them in).

Run: `.venv/bin/python benchmarks/narrow_hinted_shapes.py` (well under a second). `--check` exits 1 unless the shapes
of `matmul.PREDICTION_SHAPES` after the both-hinted draw are the first whole batches of this draw.
"""

from __future__ import annotations

import random

from both_hinted_shapes import both_hinted_draw_end
from hinted_shapes import draw_shapes, later_draw_main

SEED = 2034
COUNT = 128  # the first 64 measured in stop 20, the other 64 (the same stream, continued) in stop 21
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
    return later_draw_main(__doc__.split("\n\n")[0], draw, both_hinted_draw_end(), BATCH)


if __name__ == "__main__":
    raise SystemExit(main())
