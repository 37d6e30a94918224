"""The draw of the prediction shapes with an odd N or K (the regime predicted worst once the hinted shapes were in):
prints them in draw order, in batches of BATCH (the order the device sittings measure them in).

Run: `.venv/bin/python benchmarks/odd_shapes.py` (well under a second). `--check` exits 1 unless the shapes of
`matmul.PREDICTION_SHAPES` after the hinted draw are whole batches of this draw (all 10 are measured).
"""

from __future__ import annotations

import random

from hinted_shapes import SIZES as HINTED_SIZES, draw_shapes, hinted_draw_end, later_draw_main

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
    return later_draw_main(__doc__.split("\n\n")[0], draw, hinted_draw_end(), BATCH)


if __name__ == "__main__":
    raise SystemExit(main())
