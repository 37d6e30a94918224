"""How prediction efficiency grows with the number of training shapes: GroupKFold(5) over the recorded shapes, each
fold's model trained on a seeded draw of n of its training shapes, scored on the fold's held-out shapes.

Run: `.venv/bin/python benchmarks/config_prediction_learning_curve.py` (about 5 minutes on 2 cores); writes
results/config_prediction/learning_curve.md. With `--vary unaligned`, every aligned training shape is kept and only
the hinted and odd ones (N or K off multiples of 16) are drawn; the held-out scores are given per alignment class
(about 30 minutes on 2 cores; results/config_prediction/learning_curve_unaligned.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from tunebench.files import write_text_atomically
from tunebench.measure.dataset import load_dataset
from tunebench.predict import ConfigRanker, RankerSettings, grouped_folds, training_data
from tunebench.predict.compiled import load_table
from tunebench.predict.evaluation import alignment, percent_summary, shape_efficiency
from tunebench.predict.protocol import N_SPLITS
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "results" / "datasets" / "matmul_bfloat16_h100_prediction.parquet"
COMPILED_RESOURCES = REPO / "results" / "datasets" / "matmul_bfloat16_sm90_compiled.csv"
OUT = {"all": REPO / "results" / "config_prediction" / "learning_curve.md",
       "unaligned": REPO / "results" / "config_prediction" / "learning_curve_unaligned.md"}
SIZES = {"all": (25, 50, 100, 150),  # training shapes drawn per fold; every fold's full training set is added
         "unaligned": (0, 100, 200, 350)}  # unaligned training shapes drawn per fold, beside every aligned one
CLASSES = ("aligned", "hinted", "odd")
# Fixed: the settings the inner split chose in most folds of benchmarks/config_prediction.py (no tuning per size).
SETTINGS = RankerSettings(objective="relative", max_iter=1000, max_leaf_nodes=127)
SEED = 0

_DATA = None
_CLASSES = None  # the alignment class of every shape of _DATA


def shape_classes(shapes: np.ndarray) -> np.ndarray:
    """The alignment class of every (M, N, K)."""
    return np.array([alignment(int(n), int(k)) for _, n, k in shapes])


def training_draw(train: np.ndarray, classes: np.ndarray, fold: int, size: int | None, vary: str) -> np.ndarray:
    """The fold's training shapes the model of `size` sees: all (None), a seeded draw of `size` of them, or with
    vary "unaligned", every aligned one and a seeded draw of `size` of the others (`classes`: every shape's)."""
    if size is None:
        return train
    rng = np.random.default_rng([SEED, fold, size])
    if vary == "all":
        return np.sort(rng.choice(train, size=size, replace=False))
    unaligned = classes[train] != "aligned"
    drawn = rng.choice(train[unaligned], size=size, replace=False)
    return np.sort(np.concatenate([train[~unaligned], drawn]))


def _fit_and_score(job: tuple[int, int | None, str]) -> tuple[int, int | None, np.ndarray]:
    """(fold, training shapes drawn: None for all, what is drawn) -> the fold's held-out efficiencies."""
    fold, size, vary = job
    train, test = grouped_folds(_DATA.group, N_SPLITS)[fold]
    train = training_draw(train, _CLASSES, fold, size, vary)
    with threadpool_limits(1):
        ranker = ConfigRanker(SETTINGS).fit(_DATA, _DATA.rows_of(train))
        scores = ranker.score(ranker.data_matrix(_DATA, _DATA.rows_of(test))).reshape(len(test), -1)
    latency = _DATA.latency_ms[_DATA.rows_of(test)].reshape(len(test), -1)
    return fold, size, shape_efficiency(scores, latency)


def _load(dataset: Path, compiled: Path) -> None:
    global _DATA, _CLASSES
    recorded = load_dataset(dataset)
    _DATA = training_data(recorded, load_table(compiled, recorded.parameter_names))
    _CLASSES = shape_classes(_DATA.shapes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--compiled-resources", type=Path, default=COMPILED_RESOURCES)
    parser.add_argument("--vary", choices=tuple(SIZES), default="all",
                        help="draw from every training shape, or only from the unaligned ones (keeping every aligned)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out or OUT[args.vary]
    started = time.monotonic()
    _load(args.dataset, args.compiled_resources)
    shapes = len(_DATA.shapes)
    folds = grouped_folds(_DATA.group, N_SPLITS)
    classes = _CLASSES
    counts = [len(train) if args.vary == "all" else int((classes[train] != "aligned").sum()) for train, _ in folds]
    sizes: list[int | None] = [size for size in SIZES[args.vary] if size < min(counts)] + [None]
    jobs = [(fold, size, args.vary) for size in sizes for fold in range(N_SPLITS)]
    efficiency: dict[int | None, np.ndarray] = {size: np.zeros(shapes) for size in sizes}
    with ProcessPoolExecutor(args.workers, initializer=_load,
                             initargs=(args.dataset, args.compiled_resources)) as pool:
        for fold, size, values in tqdm(pool.map(_fit_and_score, jobs), total=len(jobs), desc="fits", unit="fit"):
            efficiency[size][folds[fold][1]] = values
    drawn = "training shapes per fold" if args.vary == "all" else "unaligned training shapes per fold"
    every = f"all ({min(counts)})" if min(counts) == max(counts) else f"all ({min(counts)} to {max(counts)})"
    rows = []
    for size in sizes:
        values = efficiency[size]
        row = {drawn: every if size is None else size, "held-out shapes": shapes, "mean": f"{values.mean():.2%}",
               "P10": f"{np.percentile(values, 10):.2%}", "min": f"{values.min():.2%}",
               "median": f"{np.median(values):.2%}"}
        if args.vary == "unaligned":
            row = {drawn: row[drawn], "all held-out shapes": percent_summary(values),
                   **{f"{name} ({int((classes == name).sum())})": percent_summary(values[classes == name])
                      for name in CLASSES}}
        rows.append(row)
    command = f"`.venv/bin/python {' '.join(sys.argv)}`"
    how = ("a seeded draw (numpy default_rng([{SEED}, fold, n])) of n of the fold's training shapes, or on all of them"
           if args.vary == "all" else
           "every aligned training shape of the fold and a seeded draw (numpy default_rng([{SEED}, fold, n])) of n of "
           "its unaligned ones (hinted or odd: N or K off multiples of 16), or all of them").format(SEED=SEED)
    columns = "" if args.vary == "all" else " Each cell: mean / P10 / min efficiency of the held-out shapes named."
    text = f"""# Config prediction: efficiency against the number of training shapes

Command: {command} ({time.monotonic() - started:.0f} s on this
machine, {args.workers} worker processes). Data: `{args.dataset.name}` with its extensions, {shapes} shapes x
{len(_DATA.candidates)} candidates. GroupKFold({N_SPLITS}) by shape; in each fold the model is trained on {how}, and
scored on the fold's held-out shapes, the same ones at every n. Settings fixed at {SETTINGS.objective}, max_leaf_nodes
{SETTINGS.max_leaf_nodes}, {SETTINGS.max_iter} iterations, one model, every candidate, no neighbour correction or
head (the model alone); the full run's inner-split selection and portfolio are not repeated per n.{columns}

{markdown_table(pd.DataFrame(rows))}
"""
    write_text_atomically(out, text)
    print(text)


if __name__ == "__main__":
    main()
