"""Variants of the pairwise head compared on cached first-stage lists, out of fold: per outer fold of the benchmark's
GroupKFold, what the head trains on (the training shapes' corrected out-of-fold top lists) and what it re-orders.

Caching the folds fits the deployed predictor's ranker settings (one model, not re-chosen per fold), resumably (a
fold per file): about 35 minutes on 2 cores for 1,417 shapes (three rounds of two folds at about 11.5 minutes each,
by the progress bar); then each variant takes about a minute.
Run: `.venv/bin/python benchmarks/head_ablation.py` (writes results/config_prediction/head_ablation.md).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from config_prediction import COMPILED_RESOURCES, DATASET
from tunebench.files import write_text_atomically
from tunebench.measure.dataset import load_dataset
from tunebench.predict import grouped_folds, read_header, training_data
from tunebench.predict.compiled import load_table
from tunebench.predict.dispatch import corrected_lists
from tunebench.predict.evidence import COLUMNS as EVIDENCE_COLUMNS
from tunebench.predict.features import PROBLEM_FEATURES
from tunebench.predict.head import (HEAD_SIZE, HeadLists, head_efficiency, head_lists, pair_features, pair_targets,
                                    summed_wins)
from tunebench.predict.model import ConfigRanker, RankerSettings, TrainingData, select_ranker
from tunebench.predict.protocol import N_SPLITS
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
PREDICTOR = REPO / "results" / "config_prediction" / "matmul_bfloat16_h100.predictor"
CACHE = REPO / "results" / "config_prediction" / "head_ablation.cache"
OUT = REPO / "results" / "config_prediction" / "head_ablation.md"
LIST_SIZE = 20  # candidates cached per list: room for heads that re-order more than HEAD_SIZE
FIELDS = tuple(HeadLists.__dataclass_fields__)
DEPLOYED = "deployed head: top 10, 31 leaves, 50 trees of depth <= 5, with the neighbour evidence"
CACHE_VERSION = 2  # 2: lists hold candidate indices and the neighbour evidence


def cache_fold(data: TrainingData, settings: RankerSettings, fold: int, train: np.ndarray, test: np.ndarray,
               path: Path) -> Path:
    """Fit the fold's inner parts (for the training shapes' out-of-fold scores) and its ranker, and save both sides'
    corrected top lists to `path` (atomically; a fold already cached is kept)."""
    if path.exists():
        return path
    with threadpool_limits(1):
        _, tuning = select_ranker(data, train, settings.objective, seed=fold,
                                  grid={"max_leaf_nodes": (settings.max_leaf_nodes,)},
                                  iterations=(settings.max_iter,), portfolio_sizes=(settings.portfolio_size,))
        ranker = ConfigRanker(replace(settings, models=1)).fit(data, data.rows_of(train))
        allowed = np.arange(len(data.candidates))
        correction, _, evidence, train_lists = corrected_lists(data, ranker, train, tuning["out_of_fold_scores"],
                                                               allowed, LIST_SIZE)
        rows = data.rows_of(test)
        shaped = (len(test), len(data.candidates))
        scores = ranker.score(ranker.data_matrix(data, rows)).reshape(shaped) + correction.for_shapes(data.shapes[test])
        test_lists = head_lists(scores, data.features[rows].reshape(*shaped, -1),
                                data.latency_ms[rows].reshape(shaped), np.ones(shaped), LIST_SIZE)
        test_lists = test_lists.with_columns(evidence.for_shapes(data.shapes[test], test_lists.candidates))
    arrays = {f"train_{name}": getattr(train_lists, name) for name in FIELDS}
    arrays |= {f"test_{name}": getattr(test_lists, name) for name in FIELDS}
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".npz.tmp")
    with os.fdopen(handle, "wb") as out:
        np.savez(out, train=train, test=test, **arrays)
    os.replace(temporary, path)
    return path


def load_fold(path: Path) -> tuple[np.ndarray, HeadLists, HeadLists]:
    """The fold's held-out shape indices, its training lists and its held-out lists."""
    with np.load(path) as saved:
        return (saved["test"], HeadLists(*(saved[f"train_{name}"] for name in FIELDS)),
                HeadLists(*(saved[f"test_{name}"] for name in FIELDS)))


def picked(test: HeadLists, preference: np.ndarray) -> np.ndarray:
    """Per shape, the best latency / the latency of the listed candidate with the highest preference."""
    return test.best_ms / test.latency_ms[np.arange(len(preference)), np.argmax(preference, axis=1)]


def contextual_pairs(rows: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`pair_features` with the shape's problem features appended (the same for every pair of a shape: differences
    cancel them, so the deployed head cannot tell which shape it is ordering for)."""
    differences, first, second = pair_features(rows, scores)
    problem = np.broadcast_to(rows[:, :1, :len(PROBLEM_FEATURES)], (*differences.shape[:2], len(PROBLEM_FEATURES)))
    return np.concatenate([differences, problem], axis=-1), first, second


def pairwise(size: int = HEAD_SIZE, context: bool = False, iterations: int = 50, leaves: int = 31, depth: int = 5,
             learning_rate: float = 0.2) -> Callable[[HeadLists, HeadLists], np.ndarray]:
    """A pairwise head trained as `head.fit_head` trains the deployed one (both orders of every pair, weighted by how
    far apart the two run; the reversed order negates the differences, not the context), on the top `size`, with or
    without the shape's context, of the given capacity."""
    def build(rows: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (contextual_pairs if context else pair_features)(rows[:, :size], scores[:, :size])

    def run(train: HeadLists, test: HeadLists) -> np.ndarray:
        forward, first, second = build(train.rows, train.scores)
        reverse = np.concatenate([-forward[..., :-len(PROBLEM_FEATURES)], forward[..., -len(PROBLEM_FEATURES):]],
                                 axis=-1) if context else -forward
        faster, weight = pair_targets(train, first, second)
        width = forward.shape[-1]
        model = HistGradientBoostingClassifier(max_iter=iterations, learning_rate=learning_rate, max_leaf_nodes=leaves,
                                               max_depth=depth, early_stopping=False, random_state=0)
        model.fit(np.concatenate([forward, reverse]).reshape(-1, width), np.concatenate([faster, ~faster]).ravel(),
                  sample_weight=np.concatenate([weight, weight]).ravel())
        pairs, first, second = build(test.rows, test.scores)
        won = model.predict_proba(pairs.reshape(-1, width))[:, 1].reshape(pairs.shape[:2])
        return picked(test, summed_wins(won, first, second, size))
    return run


def without_evidence(variant: Callable[[HeadLists, HeadLists], np.ndarray]
                     ) -> Callable[[HeadLists, HeadLists], np.ndarray]:
    """The variant on lists stripped of the neighbour evidence's columns (the head as it was before stop 33)."""
    def strip(lists: HeadLists) -> HeadLists:
        return replace(lists, rows=lists.rows[..., :-len(EVIDENCE_COLUMNS)])
    return lambda train, test: variant(strip(train), strip(test))


def pointwise(train: HeadLists, test: HeadLists, size: int = HEAD_SIZE) -> np.ndarray:
    """A regression of each listed candidate's relative speed on its features, its first-stage score, the score's gap
    to the list's first and its place in the list; the highest predicted is picked."""
    def matrix(lists: HeadLists) -> np.ndarray:
        scores = lists.scores[:, :size]
        extra = np.stack([scores, scores - scores[:, :1], np.broadcast_to(np.arange(size), scores.shape)], axis=-1)
        listed = np.concatenate([lists.rows[:, :size], extra], axis=-1)
        return listed.reshape(-1, listed.shape[-1])

    model = HistGradientBoostingRegressor(max_iter=200, learning_rate=0.1, max_leaf_nodes=31, early_stopping=False,
                                          random_state=0)
    model.fit(matrix(train), train.relative[:, :size].ravel(), sample_weight=train.weight[:, :size].ravel())
    return picked(test, model.predict(matrix(test)).reshape(-1, size))


VARIANTS: dict[str, Callable[[HeadLists, HeadLists], np.ndarray]] = {
    "first stage alone (model + correction)": lambda train, test: head_efficiency(test, None),
    DEPLOYED: pairwise(),
    "the same without the neighbour evidence": without_evidence(pairwise()),
    "the same, re-ordering the top 5": pairwise(size=5),
    "the same, re-ordering the top 20": pairwise(size=LIST_SIZE),
    "the same, with the shape's problem features beside the differences": pairwise(context=True),
    "with them, 200 trees of 63 leaves, depth <= 8": pairwise(context=True, iterations=200, leaves=63, depth=8,
                                                             learning_rate=0.1),
    "pointwise: relative speed regressed per listed candidate": pointwise,
    "not pure prediction: the top 10 timed, fastest kept":
        lambda train, test: picked(test, -test.latency_ms[:, :HEAD_SIZE]),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--predictor", type=Path, default=PREDICTOR, help="whose ranker settings the folds fit")
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--workers", type=int, default=2, help="processes caching folds (each single-threaded)")
    args = parser.parse_args()
    command = " ".join([".venv/bin/python", os.path.relpath(os.path.abspath(sys.argv[0]), REPO), *sys.argv[1:]])
    started = time.perf_counter()
    dataset = load_dataset(args.dataset, kernel="matmul")
    data = training_data(dataset, load_table(COMPILED_RESOURCES, dataset.parameter_names))
    settings = RankerSettings(**read_header(args.predictor)["settings"])
    folds = grouped_folds(data.group, N_SPLITS)
    args.cache.mkdir(parents=True, exist_ok=True)
    # a cached fold is reused only for the same shapes and ranker settings
    key = hashlib.sha256(data.shapes.tobytes() + repr((settings, CACHE_VERSION)).encode()).hexdigest()[:12]
    paths = [args.cache / f"fold{fold}_{len(data.shapes)}shapes_{key}.npz" for fold in range(len(folds))]
    jobs = [(data, settings, fold, train, test, path)
            for fold, ((train, test), path) in enumerate(zip(folds, paths)) if not path.exists()]
    if jobs:
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            list(tqdm(pool.map(cache_fold, *zip(*jobs)), total=len(jobs), desc="caching folds", unit="fold"))
    cached = [load_fold(path) for path in paths]
    efficiencies = {}
    for name, variant in tqdm(VARIANTS.items(), desc="variants", unit="variant"):
        efficiencies[name] = np.zeros(len(data.shapes))
        for test, train_lists, test_lists in cached:
            efficiencies[name][test] = variant(train_lists, test_lists)
    deployed = efficiencies[DEPLOYED]
    rows = []
    for name, efficiency in efficiencies.items():
        folds_ahead = sum(efficiency[test].mean() > deployed[test].mean() for test, _, _ in cached)
        rows.append({"head": name, "mean": f"{efficiency.mean():.2%}", "P10": f"{np.percentile(efficiency, 10):.2%}",
                     "min": f"{efficiency.min():.2%}", "picks the measured best": f"{np.mean(efficiency == 1):.2f}",
                     "folds whose mean beats the deployed head's": f"{folds_ahead} of {len(cached)}"})
    text = (f"# Pairwise-head variants on cached first-stage lists\n\nCommand: `{command}` "
            f"({time.perf_counter() - started:.0f} s). {len(data.shapes)} shapes, GroupKFold({N_SPLITS}) by shape, "
            f"every variant trained on each fold's training lists and scored on its held-out shapes; the ranker's "
            f"settings are the predictor's ({settings.objective}, {settings.max_leaf_nodes} leaves, "
            f"{settings.max_iter} trees, one model), fixed, not chosen per fold, so the first rows sit a little below "
            f"the benchmark's.\n\n" + markdown_table(pd.DataFrame(rows)))
    write_text_atomically(args.out, text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
