"""The draw of the 96 prediction shapes aimed at the hinted regime, reproduced: prints them and checks that they are
the 96 of `matmul.PREDICTION_SHAPES` ending with LAST, measured in
results/datasets/matmul_bfloat16_h100_prediction.parquet.

Run: `.venv/bin/python benchmarks/hinted_shapes.py` (well under a second; exits 1 if the draw and the list disagree).
"""

from __future__ import annotations

import argparse
import random
from typing import Callable, Mapping, Sequence

from tunebench.kernels import matmul

SEED = 2029
COUNT = 96
MAX_FLOP = 0.25e12
REAL_MODEL_SIZES = (768, 1024, 1536, 2048, 2304, 3072, 4096, 5120, 6144, 8192, 11008, 13824, 14336)
LAST = (983, 1068, 8472)  # the draw's last shape in matmul.PREDICTION_SHAPES
PATTERN = (("hinted", "aligned"), ("aligned", "hinted"), ("hinted", "hinted"))  # (N, K), cycled


def aligned_size(rng: random.Random) -> int:
    """With even odds a real-model size, or the multiple of 16 nearest 2 ** uniform(9, 14)."""
    if rng.random() < 0.5:
        return rng.choice(REAL_MODEL_SIZES)
    return max(16, round(2 ** rng.uniform(9, 14) / 16) * 16)


def hinted_size(rng: random.Random) -> int:
    """An odd multiple of a width drawn from 2, 4 and 8 (so its gcd with 16 is that width), near 2 ** uniform(9, 14)."""
    width = rng.choice((2, 4, 8))
    return max(width, round(2 ** rng.uniform(9, 14) / (2 * width) - 0.5) * 2 * width + width)


SIZES = {"aligned": aligned_size, "hinted": hinted_size}


def draw_shapes(seed: int, count: int, pattern: Sequence[tuple[str, str]],
                sizes: Mapping[str, Callable[[random.Random], int]],
                taken: set[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """`count` new shapes of at most MAX_FLOP, none in `taken`, with a fresh random.Random(seed): M log-uniform in
    [1, 8192], N and K drawn by `sizes` of the kinds `pattern` cycles through."""
    rng = random.Random(seed)
    shapes: list[tuple[int, int, int]] = []
    while len(shapes) < count:
        n_kind, k_kind = pattern[len(shapes) % len(pattern)]
        m = round(2 ** rng.uniform(0, 13))
        n = sizes[n_kind](rng)
        k = sizes[k_kind](rng)
        if 2 * m * n * k <= MAX_FLOP and (m, n, k) not in taken and (m, n, k) not in shapes:
            shapes.append((m, n, k))
    return shapes


def later_draw_main(description: str, draw: Callable[[set[tuple[int, int, int]]], list[tuple[int, int, int]]],
                    start: int, batch: int) -> int:
    """The command line of a draw that follows matmul.PREDICTION_SHAPES[:start]: prints `draw` (given those and the
    dataset shapes as taken) in batches of `batch`, one per line; with --check, exits 1 unless the shapes listed
    from `start` on are the draw's first whole batches (all of it once it is measured)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="check the list in matmul.PREDICTION_SHAPES")
    args = parser.parse_args()
    shapes = list(matmul.PREDICTION_SHAPES)
    drawn = draw(set(shapes[:start]) | set(matmul.DATASET_SHAPES))
    for first in range(0, len(drawn), batch):
        print(",".join(f"{m}x{n}x{k}" for m, n, k in drawn[first:first + batch]))
    if not args.check:
        return 0
    listed = shapes[start:start + len(drawn)]
    if len(listed) % batch or listed != drawn[:len(listed)]:
        print(f"matmul.PREDICTION_SHAPES[{start}:{start + len(listed)}] is not whole batches of this draw")
        return 1
    print(f"matmul.PREDICTION_SHAPES[{start}:{start + len(listed)}] is this draw's first {len(listed) // batch} of "
          f"{len(drawn) // batch} batches")
    return 0


def draw(taken: set[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """This draw: COUNT shapes with random.Random(SEED), cycling PATTERN."""
    return draw_shapes(SEED, COUNT, PATTERN, SIZES, taken)


def hinted_draw_end() -> int:
    """The index in matmul.PREDICTION_SHAPES just past this draw's shapes (later draws follow them)."""
    return list(matmul.PREDICTION_SHAPES).index(LAST) + 1


def main() -> int:
    end = hinted_draw_end()
    earlier = set(matmul.PREDICTION_SHAPES[:end - COUNT]) | set(matmul.DATASET_SHAPES)
    first_pass = draw(earlier)  # kept by the first pass, never measured: the measured draw counts them as taken
    measured = draw(earlier | set(first_pass))
    print(",".join(f"{m}x{n}x{k}" for m, n, k in measured))
    if measured != list(matmul.PREDICTION_SHAPES[end - COUNT:end]):
        print(f"the draw differs from matmul.PREDICTION_SHAPES[{end - COUNT}:{end}]")
        return 1
    print(f"the draw equals matmul.PREDICTION_SHAPES[{end - COUNT}:{end}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
