"""New GEMM shapes measured on the H200 only, as extra training data for the H100 predictor: a seeded draw of hinted
and odd N or K with M >= 8, the classes and M range where the re-timed picks trail the best (stop 43), none of them a
shape measured on either GPU before.

Run: `.venv/bin/python benchmarks/h200_training_shapes.py` (well under a second) prints the draw in batches of BATCH,
one per line, in the order the device sittings measure them; `--remaining` prints only the shapes the dataset lacks,
in that order and batch size; `--check` exits 1 unless every shape of the dataset (its extensions included) is a
drawn one, and says how much of each batch it holds; `--replay PREDICTOR` judges a predictor's `best_config` and its
full ranking's top 10 on the measured shapes by their recorded sitting (seconds) and writes
results/config_prediction/h200_training_replay.md (or `--replay-out`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

import pandas as pd

from config_prediction import mean_p10_min
from h200_held_out import recorded_speed
from hinted_shapes import draw_shapes
from odd_shapes import SIZES
from preregistered_picks import TOP_K, config_text
from tunebench.files import write_text_atomically
from tunebench.kernels import matmul
from tunebench.measure.dataset import Dataset, load_dataset
from tunebench.predict import ALIGNMENTS, FAMILIES, Predictor, alignment, family, load_predictor
from tunebench.tables import markdown_table
from unaligned_check_shapes import PATTERN  # (N, K) kinds, cycled: every pair with a hinted or odd member

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "results" / "datasets" / "matmul_bfloat16_h200_training.parquet"
REPLAY = REPO / "results" / "config_prediction" / "h200_training_replay.md"
SEED = 2044
COUNT = 256
BATCH = 16
MIN_M = 8  # under M = 8 the re-timed picks were as fast as the re-timed recorded best (stop 43): the judge's misses


def draw() -> list[tuple[int, int, int]]:
    """COUNT shapes with M >= MIN_M, in the order of `hinted_shapes.draw_shapes` with random.Random(SEED) cycling
    PATTERN (drawing 4 COUNT and keeping those with M >= MIN_M), none a prediction or dataset shape."""
    taken = set(matmul.PREDICTION_SHAPES) | set(matmul.DATASET_SHAPES)
    drawn = [shape for shape in draw_shapes(SEED, 4 * COUNT, PATTERN, SIZES, taken) if shape[0] >= MIN_M]
    if len(drawn) < COUNT:
        raise AssertionError(f"only {len(drawn)} of {4 * COUNT} drawn shapes have M >= {MIN_M}; draw more")
    return drawn[:COUNT]


def replay(predictor: Predictor, dataset: Dataset) -> pd.DataFrame:
    """Per measured shape: its class and family, and the efficiency in the recorded sitting
    (`h200_held_out.recorded_speed`) of `best_config` and of the fastest of the predictor's `top_configs`."""
    rows = []
    for shape in dataset.shapes():
        speed = recorded_speed(dataset, shape)
        top = [config_text(config) for config in predictor.top_configs(shape, TOP_K)]
        pick = predictor.best_config(shape)
        rows.append({"M": shape[0], "N": shape[1], "K": shape[2], "alignment": alignment(shape[1], shape[2]),
                     "family": family(shape[0]), "split_k": pick["SPLIT_K"], "best_config": speed[config_text(pick)],
                     f"top {TOP_K} timed": speed[top].max()})
    return pd.DataFrame(rows)


def replay_report(table: pd.DataFrame, command: str, predictor_path: Path) -> str:
    """The replay's mean / P10 / min, over all shapes, per alignment class, per M family and per SPLIT_K of the
    pick; the predictor file's sha256 beside its name."""
    groups = [("all", table), *((name, table[table["alignment"] == name]) for name in ALIGNMENTS),
              *((name, table[table["family"] == name]) for name, _, _ in FAMILIES),
              *((f"picks of SPLIT_K {value}", table[table["split_k"] == value])
                for value in sorted(table["split_k"].unique()))]
    summary = pd.DataFrame([{"shapes": name, "count": len(part), "`best_config`": mean_p10_min(part["best_config"]),
                             f"top {TOP_K} timed": mean_p10_min(part[f"top {TOP_K} timed"])}
                            for name, part in groups if len(part)])
    return "\n\n".join([
        "# A predictor on the H200 training shapes, replayed",
        f"Command: `{command}`. Predictor: `{os.path.relpath(predictor_path, REPO)}` (sha256 "
        f"{hashlib.sha256(predictor_path.read_bytes()).hexdigest()[:8]}); data: `{DATASET.name}` "
        f"({len(table)} shapes, new on both GPUs), each pick judged by that shape's recorded H200 sitting. Mean / P10 "
        "/ min efficiency:",
        markdown_table(summary)]) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help=f"check the shapes of {DATASET.name}")
    parser.add_argument("--remaining", action="store_true", help=f"list only the shapes {DATASET.name} lacks")
    parser.add_argument("--replay", type=Path, default=None, help="a predictor file to judge on the measured shapes")
    parser.add_argument("--replay-out", type=Path, default=REPLAY, help="where --replay writes its report")
    args = parser.parse_args()
    if args.replay is not None:
        table = replay(load_predictor(args.replay), load_dataset(DATASET, kernel="matmul"))
        command = f".venv/bin/python benchmarks/h200_training_shapes.py --replay {os.path.relpath(args.replay, REPO)}"
        if args.replay_out != REPLAY:
            command += f" --replay-out {os.path.relpath(args.replay_out, REPO)}"
        write_text_atomically(args.replay_out, text := replay_report(table, command, args.replay))
        print(text)
        return 0
    drawn = draw()
    measured = ({tuple(int(size) for size in shape) for shape in load_dataset(DATASET, kernel="matmul").shapes()}
                if args.check or args.remaining else set())
    listed = [shape for shape in drawn if shape not in measured] if args.remaining else drawn
    for first in range(0, len(listed), BATCH):
        print(",".join(f"{m}x{n}x{k}" for m, n, k in listed[first:first + BATCH]))
    if not args.check:
        return 0
    if measured - set(drawn):
        print(f"{DATASET.name} holds shapes this draw lacks: {sorted(measured - set(drawn))}")
        return 1
    print(f"{DATASET.name} holds {len(measured)} of the {COUNT} drawn shapes; per batch: " + ", ".join(
        f"{sum(shape in measured for shape in drawn[first:first + BATCH])}"
        for first in range(0, COUNT, BATCH)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
