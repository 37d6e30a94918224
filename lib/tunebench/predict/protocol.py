"""The scoring protocol: grouped cross-validation by shape, with every choice (hyperparameters, iteration count,
objective) made on an inner split of the training shapes of each fold, never on the shapes being scored.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from tunebench.predict.dispatch import Predictor, fit_predictor
from tunebench.predict.evaluation import grouped_folds
from tunebench.predict.model import OBJECTIVES, TUNING_GRID, RankerSettings, TrainingData, restrict, select_ranker

N_SPLITS = 5
DISPATCH_REPEATS = 21  # calls of best_config per held-out shape; the median is its latency
SELECTED = "selected"  # the pipeline that picks the objective per fold by inner validation efficiency


@dataclass
class FoldOutcome:
    """One outer fold, for one objective: what was chosen on the inner split, and what it did on the test shapes."""

    fold: int
    objective: str
    train_shapes: np.ndarray
    test_shapes: np.ndarray
    settings: RankerSettings
    inner_efficiency: float
    tried: list[dict[str, Any]]
    scores: np.ndarray  # (test shapes, candidates), sklearn's predict over every candidate, corrected, head re-ordered
    corrected_scores: np.ndarray  # (test shapes, candidates), the model plus the correction, without the head
    model_scores: np.ndarray  # (test shapes, candidates), the model alone
    first_model_scores: np.ndarray  # (test shapes, candidates), `scores` with the ranker's first model only
    first_model_alone: np.ndarray  # (test shapes, candidates), `model_scores` of the first model only
    dispatched: np.ndarray  # (test shapes,) the candidate best_config returned
    rank_ms: np.ndarray  # (test shapes,) features + sklearn predict over every candidate
    dispatch_ms: np.ndarray  # (test shapes,) median of DISPATCH_REPEATS best_config calls
    fit_s: float
    correction: dict[str, Any] | None  # the neighbour correction's chosen settings
    head: dict[str, Any] | None  # the pairwise head's chosen settings (None: off)


@dataclass
class CrossValidation:
    """Out-of-fold results per pipeline (each objective, and SELECTED), indexed by shape."""

    data: TrainingData
    folds: list[tuple[np.ndarray, np.ndarray]]
    outcomes: dict[str, list[FoldOutcome]] = field(default_factory=dict)

    def scores(self, pipeline: str) -> np.ndarray:
        """(shapes, candidates) out-of-fold scores."""
        return self._gather(pipeline, "scores")

    def corrected_scores(self, pipeline: str) -> np.ndarray:
        """(shapes, candidates) out-of-fold scores of the model and the neighbour correction, without the head."""
        return self._gather(pipeline, "corrected_scores")

    def model_scores(self, pipeline: str) -> np.ndarray:
        """(shapes, candidates) out-of-fold scores of the model alone, without the neighbour correction."""
        return self._gather(pipeline, "model_scores")

    def first_model_scores(self, pipeline: str) -> np.ndarray:
        """(shapes, candidates) out-of-fold scores of the whole pipeline with the ranker's first model only."""
        return self._gather(pipeline, "first_model_scores")

    def first_model_alone(self, pipeline: str) -> np.ndarray:
        """(shapes, candidates) out-of-fold scores of the ranker's first model alone."""
        return self._gather(pipeline, "first_model_alone")

    def dispatched(self, pipeline: str) -> np.ndarray:
        return self._gather(pipeline, "dispatched")

    def rank_ms(self, pipeline: str) -> np.ndarray:
        return self._gather(pipeline, "rank_ms")

    def dispatch_ms(self, pipeline: str) -> np.ndarray:
        return self._gather(pipeline, "dispatch_ms")

    def _gather(self, pipeline: str, name: str) -> np.ndarray:
        outcomes = self.outcomes[pipeline]
        first = getattr(outcomes[0], name)
        result = np.zeros((len(self.data.shapes), *first.shape[1:]), dtype=first.dtype)
        for outcome in outcomes:
            result[outcome.test_shapes] = getattr(outcome, name)
        return result


def _shape(data: TrainingData, index: int) -> tuple[int, int, int]:
    return tuple(int(size) for size in data.shapes[index])


def score_fold(data: TrainingData, fold: int, train: np.ndarray, test: np.ndarray, objective: str,
               seed: int = 0, grid: Mapping[str, Sequence[Any]] = TUNING_GRID) -> FoldOutcome:
    """Tune on inner splits of `train` (the ranker over `grid`, then the neighbour correction and the head on the
    inner splits' out-of-fold scores), fit on all of `train`, and score every shape of `test`."""
    started = time.perf_counter()
    with threadpool_limits(1):
        settings, tuning = select_ranker(data, train, objective, seed=seed + fold, grid=grid)
        predictor = fit_predictor(data, settings, train, shortlist_shapes=data.shapes[test],
                                  out_of_fold_scores=tuning["out_of_fold_scores"])
    fit_s = time.perf_counter() - started
    inner = max(trial["inner_mean_efficiency"] for trial in tuning["tried"])
    scores, corrected_scores, model_scores, dispatched, rank_ms, dispatch_ms = [], [], [], [], [], []
    first_model, first_alone = [], []
    single = predictor.with_models(1)
    with threadpool_limits(1):
        for index in test:
            shape = _shape(data, index)
            begin = time.perf_counter()
            scores.append(predictor.scores(shape))
            rank_ms.append(1e3 * (time.perf_counter() - begin))
            corrected_scores.append(restrict(predictor.corrected_scores(shape), predictor.portfolio))
            model_scores.append(restrict(predictor.model_scores(shape), predictor.portfolio))
            first_model.append(single.scores(shape))
            first_alone.append(restrict(single.model_scores(shape), predictor.portfolio))
            dispatched.append(_dispatch_index(predictor, shape))
            dispatch_ms.append(dispatch_latency_ms(predictor, shape))
    correction = None if predictor.correction is None else asdict(predictor.correction.settings)
    head = None if predictor.head is None else asdict(predictor.head.settings)
    return FoldOutcome(fold, objective, train, test, settings, inner, tuning["tried"], np.array(scores),
                       np.array(corrected_scores), np.array(model_scores), np.array(first_model),
                       np.array(first_alone), np.array(dispatched), np.array(rank_ms),
                       np.array(dispatch_ms), fit_s, correction, head)


def _dispatch_index(predictor: Predictor, shape: tuple[int, int, int]) -> int:
    config = predictor.best_config(shape)
    key = np.array([config[name] for name in predictor.space.names])
    return int(np.flatnonzero((predictor.candidates == key).all(axis=1))[0])


def dispatch_latency_ms(predictor: Predictor, shape: Sequence[int], repeats: int = DISPATCH_REPEATS) -> float:
    """Median wall time of `best_config(shape)` over `repeats` calls, in ms."""
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        predictor.best_config(shape)
        times.append(time.perf_counter() - begin)
    return 1e3 * statistics.median(times)


def cross_validate(data: TrainingData, objectives: Sequence[str] = OBJECTIVES, n_splits: int = N_SPLITS,
                   seed: int = 0, workers: int = 1, progress: bool = True,
                   grid: Mapping[str, Sequence[Any]] = TUNING_GRID) -> CrossValidation:
    """Every objective on every outer fold, tuned over `grid` (`select_ranker`'s) on the fold's inner splits (in
    `workers` processes, one thread each; a progress bar counts the finished fits unless `progress` is False), plus
    SELECTED: per fold, the objective whose tuned settings scored the
    higher mean efficiency on the inner validation shapes."""
    folds = grouped_folds(data.group, n_splits)
    jobs = [(data, fold, train, test, objective, seed, grid) for objective in objectives
            for fold, (train, test) in enumerate(folds)]
    bar = {"total": len(jobs), "desc": "outer folds x objectives", "unit": "fit", "disable": not progress}
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = list(tqdm(pool.map(score_fold, *zip(*jobs)), **bar))
    else:
        results = [score_fold(*job) for job in tqdm(jobs, **bar)]
    result = CrossValidation(data, folds)
    for objective in objectives:
        result.outcomes[objective] = [outcome for outcome in results if outcome.objective == objective]
    result.outcomes[SELECTED] = [
        max((result.outcomes[objective][fold] for objective in objectives), key=lambda o: o.inner_efficiency)
        for fold in range(len(folds))]
    return result
