"""The real-model layers of a live check decided before it was run: the `n` shapes that follow the COUNT of
`model_projection_shapes.py`'s draw in its stream, so no dataset and no predictor has seen them.

Run: `.venv/bin/python benchmarks/live_check_shapes.py --first 0 --count 12` (about 5 s: it reads the datasets) prints
them as `live_search.py --shapes` takes them; it exits 1 if any of them is in a recorded dataset under
results/datasets/.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow.parquet as pq

from model_projection_shapes import COUNT, draw, narrow_hinted_draw_end
from tunebench.kernels import matmul

DATASETS = Path(__file__).resolve().parents[1] / "results" / "datasets"


def recorded_shapes(folder: Path = DATASETS) -> set[tuple[int, int, int]]:
    """Every (M, N, K) of the GEMM datasets in `folder` (the files whose schema has those columns)."""
    shapes: set[tuple[int, int, int]] = set()
    for path in sorted(folder.glob("*.parquet")):
        if {"M", "N", "K"} <= set(pq.read_schema(path).names):
            table = pq.read_table(path, columns=["M", "N", "K"]).to_pandas().drop_duplicates()
            shapes |= set(map(tuple, table.to_numpy().tolist()))
    return shapes


def shapes_after_draw(first: int, count: int) -> list[tuple[int, int, int]]:
    """Shapes first .. first + count - 1 past the draw's COUNT, taken as the draw itself takes them."""
    taken = set(matmul.PREDICTION_SHAPES[:narrow_hinted_draw_end()]) | set(matmul.DATASET_SHAPES)
    return draw(taken, COUNT + first + count)[COUNT + first:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--first", type=int, default=0, help="shapes of the continued draw to skip")
    parser.add_argument("--count", type=int, default=12)
    args = parser.parse_args(argv)
    if args.first < 0 or args.count < 1:
        parser.error(f"--first {args.first} --count {args.count}: give --first >= 0 and --count >= 1")
    shapes = shapes_after_draw(args.first, args.count)
    print(",".join(f"{m}x{n}x{k}" for m, n, k in shapes))
    seen = sorted(set(shapes) & recorded_shapes())
    if seen:
        print(f"already recorded under {DATASETS}: {seen}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
