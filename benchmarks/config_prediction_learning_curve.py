"""How prediction efficiency grows with the number of training shapes: GroupKFold(5) over the recorded shapes, each
fold's model trained on a seeded draw of n of its training shapes, scored on the fold's held-out shapes.

Run: `.venv/bin/python benchmarks/config_prediction_learning_curve.py` (about 5 minutes on 2 cores); writes
results/config_prediction/learning_curve.md.
"""

from __future__ import annotations

import argparse
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
from tunebench.predict.evaluation import shape_efficiency
from tunebench.predict.protocol import N_SPLITS
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "results" / "datasets" / "matmul_bfloat16_h100_prediction.parquet"
COMPILED_RESOURCES = REPO / "results" / "datasets" / "matmul_bfloat16_sm90_compiled.csv"
OUT = REPO / "results" / "config_prediction" / "learning_curve.md"
SIZES = (25, 50, 100, 150)  # training shapes drawn per fold; every fold's full training set is added
# Fixed: the settings the inner split chose in most folds of benchmarks/config_prediction.py (no tuning per size).
SETTINGS = RankerSettings(objective="relative", max_iter=1000, max_leaf_nodes=127)
SEED = 0

_DATA = None


def _fit_and_score(job: tuple[int, int]) -> tuple[int, int, np.ndarray]:
    """(fold, training shapes drawn: 0 for all) -> the fold's held-out efficiencies."""
    fold, size = job
    train, test = grouped_folds(_DATA.group, N_SPLITS)[fold]
    if size:
        train = np.sort(np.random.default_rng([SEED, fold, size]).choice(train, size=size, replace=False))
    with threadpool_limits(1):
        ranker = ConfigRanker(SETTINGS).fit(_DATA, _DATA.rows_of(train))
        scores = ranker.score(_DATA.features[_DATA.rows_of(test)]).reshape(len(test), -1)
    latency = _DATA.latency_ms[_DATA.rows_of(test)].reshape(len(test), -1)
    return fold, size, shape_efficiency(scores, latency)


def _load(dataset: Path, compiled: Path) -> None:
    global _DATA
    recorded = load_dataset(dataset)
    _DATA = training_data(recorded, load_table(compiled, recorded.parameter_names))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--compiled-resources", type=Path, default=COMPILED_RESOURCES)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    started = time.monotonic()
    _load(args.dataset, args.compiled_resources)
    shapes = len(_DATA.shapes)
    smallest_fold = min(len(train) for train, _ in grouped_folds(_DATA.group, N_SPLITS))
    sizes = [size for size in SIZES if size < smallest_fold] + [0]
    jobs = [(fold, size) for size in sizes for fold in range(N_SPLITS)]
    efficiency: dict[int, list[np.ndarray]] = {size: [] for size in sizes}
    with ProcessPoolExecutor(args.workers, initializer=_load,
                             initargs=(args.dataset, args.compiled_resources)) as pool:
        for fold, size, values in tqdm(pool.map(_fit_and_score, jobs), total=len(jobs), desc="fits", unit="fit"):
            efficiency[size].append(values)
    rows = []
    for size in sizes:
        values = np.concatenate(efficiency[size])
        largest_fold = shapes - shapes // N_SPLITS
        every = f"all ({smallest_fold})" if smallest_fold == largest_fold else f"all ({smallest_fold} to {largest_fold})"
        rows.append({"training shapes per fold": size or every,
                     "held-out shapes": len(values), "mean": f"{values.mean():.2%}",
                     "P10": f"{np.percentile(values, 10):.2%}", "min": f"{values.min():.2%}",
                     "median": f"{np.median(values):.2%}"})
    text = f"""# Config prediction: efficiency against the number of training shapes

Command: `.venv/bin/python benchmarks/config_prediction_learning_curve.py` ({time.monotonic() - started:.0f} s on this
machine, {args.workers} worker processes). Data: `{args.dataset.name}`, {shapes} shapes x {len(_DATA.candidates)}
candidates. GroupKFold({N_SPLITS}) by shape; in each fold the model is trained on a seeded draw
(numpy default_rng([{SEED}, fold, n])) of n of the fold's training shapes, or on all of them, and scored on the fold's
held-out shapes, the same ones at every n. Settings fixed at {SETTINGS.objective}, max_leaf_nodes
{SETTINGS.max_leaf_nodes}, {SETTINGS.max_iter} iterations, every candidate (what the inner split chose in most folds
of benchmarks/config_prediction.py); the full run's inner-split selection and portfolio are not repeated per n.

{markdown_table(pd.DataFrame(rows))}
"""
    write_text_atomically(args.out, text)
    print(text)


if __name__ == "__main__":
    main()
