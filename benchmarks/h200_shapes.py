"""The H100 prediction shapes chosen for the H200 transfer set: the 22 aligned ones first measured there, then a seeded
draw balanced over alignment class (aligned / hinted / odd N or K) and M family, in batches of BATCH.

Run: `.venv/bin/python benchmarks/h200_shapes.py` (well under a second) prints the drawn batches, one per line, in the
order the device sittings measure them; `--check` exits 1 unless the H200 dataset's shapes are the first 22 plus whole
batches of the draw, in that order of batches.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from odd_shapes import odd_draw_end
from tunebench.kernels import matmul
from tunebench.predict.evaluation import FAMILIES, alignment, family

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "results" / "datasets" / "matmul_bfloat16_h200_prediction.parquet"
FIRST = ((1, 768, 3072), (2, 3072, 3072), (3, 8192, 1024), (6, 4096, 11008), (8, 3072, 3072), (12, 11008, 4096),
         (24, 6144, 4096), (32, 1024, 8192), (48, 768, 3072), (64, 4608, 1536), (96, 6144, 4096), (128, 8192, 1024),
         (256, 1024, 8192), (384, 2304, 768), (512, 4096, 11008), (768, 4096, 14336), (1024, 4608, 1536),
         (1536, 768, 3072), (2048, 5120, 13824), (3072, 2304, 768), (4096, 4096, 14336), (6144, 4096, 4096))
SEED = 2032
BATCH = 16
# Per batch: shapes of each alignment class, spread over the M families in turn (the first sitting was all aligned).
PER_BATCH = {"hinted": 7, "odd": 7, "aligned": 2}
BATCHES = 4


def draw() -> list[tuple[int, int, int]]:
    """BATCHES batches of BATCH H100 prediction shapes not in FIRST, from those listed when this draw was made (up to
    the odd draw's end), with random.Random(SEED): per batch PER_BATCH shapes of each class, their M families cycling,
    none drawn twice."""
    rng = random.Random(SEED)
    pools: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
    for shape in matmul.PREDICTION_SHAPES[:odd_draw_end()]:
        if shape not in FIRST:
            pools.setdefault((alignment(shape[1], shape[2]), family(shape[0])), []).append(shape)
    for pool in pools.values():
        rng.shuffle(pool)
    families = [name for name, _, _ in FAMILIES]
    drawn: list[tuple[int, int, int]] = []
    turn = {kind: 0 for kind in PER_BATCH}
    for _ in range(BATCHES):
        for kind, count in PER_BATCH.items():
            for _ in range(count):
                for attempt in range(len(families)):
                    pool = pools.get((kind, families[(turn[kind] + attempt) % len(families)]), [])
                    if pool:
                        drawn.append(pool.pop())
                        break
                turn[kind] += 1
    return drawn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="check the H200 dataset's shapes against the draw")
    args = parser.parse_args()
    shapes = draw()
    for start in range(0, len(shapes), BATCH):
        print(",".join(f"{m}x{n}x{k}" for m, n, k in shapes[start:start + BATCH]))
    if not args.check:
        return 0
    from tunebench.measure.dataset import load_dataset

    measured = set(load_dataset(DATASET).shapes())
    batches = (len(measured) - len(FIRST)) // BATCH
    expected = set(FIRST) | set(shapes[:batches * BATCH])
    if measured != expected:
        print(f"the H200 dataset's {len(measured)} shapes are not the first {len(FIRST)} plus {batches} whole batches")
        return 1
    print(f"the H200 dataset holds the first {len(FIRST)} shapes and the draw's first {batches} batches")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
