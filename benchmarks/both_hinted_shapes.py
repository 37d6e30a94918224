"""The draw of the prediction shapes with N and K both hinted (the class predicted worst once the odd shapes were in):
prints them in draw order, in batches of BATCH (the order the device sittings measure them in).

Run: `.venv/bin/python benchmarks/both_hinted_shapes.py` (well under a second). `--check` exits 1 unless the
shapes of `matmul.PREDICTION_SHAPES` after the odd draw are whole batches of this draw (all 4 are measured).
"""

from __future__ import annotations

from hinted_shapes import SIZES, draw_shapes, later_draw_main
from odd_shapes import odd_draw_end

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
    return later_draw_main(__doc__.split("\n\n")[0], draw, odd_draw_end(), BATCH)


if __name__ == "__main__":
    raise SystemExit(main())
