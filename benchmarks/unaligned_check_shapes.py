"""The draw of prediction shapes with N or K off multiples of 16, for held-out checks of the unaligned classes decided
before they are measured: prints them in draw order, in batches of BATCH (the order the sittings measure them in).

Run: `.venv/bin/python benchmarks/unaligned_check_shapes.py` (well under a second). `--check` exits 1 unless the
shapes of `matmul.PREDICTION_SHAPES` after the model-projection draw are the first whole batches of this draw.
"""

from __future__ import annotations

from hinted_shapes import draw_shapes, later_draw_main
from model_projection_shapes import COUNT as MODEL_PROJECTION_COUNT, narrow_hinted_draw_end
from odd_shapes import SIZES

SEED = 2040
COUNT = 192  # 96 per check: the first check (stop 37) measured the first 96, the second (stops 38-39) the next 96
BATCH = 16
# (N, K), cycled: every pair of the three classes (aligned, hinted: an odd multiple of 2, 4 or 8, odd) but
# (aligned, aligned), the hinted and odd classes scoring 1.5 points under the aligned one in stop 36's cross-validation
PATTERN = (("aligned", "odd"), ("odd", "aligned"), ("odd", "odd"), ("hinted", "aligned"), ("aligned", "hinted"),
           ("hinted", "hinted"), ("hinted", "odd"), ("odd", "hinted"))


def draw(taken: set[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """This draw: COUNT shapes with random.Random(SEED), cycling PATTERN (`hinted_shapes.draw_shapes`: M and the limits
    as in the hinted draw)."""
    return draw_shapes(SEED, COUNT, PATTERN, SIZES, taken)


def model_projection_draw_end() -> int:
    """The index in matmul.PREDICTION_SHAPES just past the model-projection draw (this draw follows it)."""
    return narrow_hinted_draw_end() + MODEL_PROJECTION_COUNT


def main() -> int:
    return later_draw_main(__doc__.split("\n\n")[0], draw, model_projection_draw_end(), BATCH)


if __name__ == "__main__":
    raise SystemExit(main())
