"""A pairwise re-ranker of the first stage's top candidates for a shape (the head of its list), trained on the
training shapes' out-of-fold lists.

The first stage (the model plus the neighbour correction) finds the set well and the order within it poorly: the best
config is in its top 10 on nearly every shape, first on a third. For each pair of the top `size`, a gradient-boosted
classifier reads the difference of their features, first-stage scores and neighbour evidence (`predict.evidence`: how
they ran on the nearest training shapes) and predicts which is faster; a candidate's head score is its summed win
probability. `select_head` sizes and fits it on the training shapes only.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, replace
from typing import Any, Sequence

import numba
import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier

from tunebench.predict.forest import CompiledForest
from tunebench.predict.model import inner_partition

HEAD_SIZE = 10  # the first stage's top candidates the head re-orders (the dispatcher's timed top k is the same 10)
# The classifier: few, shallow trees, because the dispatcher evaluates it on the 45 pairs of every query (0.12 ms
# here); on the 569 shapes' folds (one-off script), 200 trees of depth 8 took 0.42 ms and 100 of depth 5 0.17 ms for
# 97.17 and 97.08 % mean efficiency, against 97.08 % for these.
LEAF_CHOICES = (15, 31)  # tried in this order; ties go to the first tried
ITERATIONS = 50
LEARNING_RATE = 0.2
MAX_DEPTH = 5


@dataclass(frozen=True)
class HeadSettings:
    """size: how many of the first stage's top candidates it re-orders; max_leaf_nodes: the classifier's trees."""

    max_leaf_nodes: int = 31
    size: int = HEAD_SIZE

    def __post_init__(self) -> None:
        if self.size < 2 or self.max_leaf_nodes < 2:
            raise ValueError(f"size and max_leaf_nodes must be >= 2, got {self}")


@dataclass(frozen=True)
class HeadLists:
    """Per shape, the first stage's top candidates best first: their feature rows (shapes, k, features), first-stage
    scores (shapes, k), relative speeds (latency of the shape's best candidate / theirs; the training target),
    latencies, training weights (0 for rows disturbed while timed) and candidate indices."""

    rows: np.ndarray
    scores: np.ndarray
    relative: np.ndarray
    latency_ms: np.ndarray
    weight: np.ndarray
    best_ms: np.ndarray  # (shapes,) the best latency over every candidate of the shape
    candidates: np.ndarray  # (shapes, k) the listed candidates' indices

    def take(self, shapes: np.ndarray) -> HeadLists:
        return HeadLists(*(getattr(self, name)[shapes] for name in self.__dataclass_fields__))

    def with_columns(self, columns: np.ndarray) -> HeadLists:
        """The same lists with (shapes, k, c) more columns after each listed candidate's feature row."""
        return replace(self, rows=np.concatenate([self.rows, columns], axis=-1))


def head_lists(scores: np.ndarray, features: np.ndarray, latency_ms: np.ndarray, weight: np.ndarray,
               size: int = HEAD_SIZE) -> HeadLists:
    """The top `size` of each shape's `scores` (shapes, candidates; -inf never listed first) with their (shapes,
    candidates, features) feature rows, latencies and weights."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, :size]
    rows = np.take_along_axis(features, order[..., None], axis=1)
    best = latency_ms.min(axis=1)
    latency = np.take_along_axis(latency_ms, order, axis=1)
    with np.errstate(invalid="ignore"):
        relative = np.where(np.isfinite(latency), best[:, None] / latency, 0.0)
    return HeadLists(rows, np.take_along_axis(scores, order, axis=1), relative, latency,
                     np.take_along_axis(weight, order, axis=1), best, order)


@functools.lru_cache(maxsize=64)
def _pairs(size: int) -> tuple[np.ndarray, np.ndarray]:
    """The positions i and j of every pair i < j of `size` listed candidates (read-only: they are shared)."""
    first, second = np.triu_indices(size, 1)
    first.setflags(write=False)
    second.setflags(write=False)
    return first, second


def pair_features(rows: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(shapes, pairs, features + 1): for each pair (i < j) of a shape's listed candidates, row i minus row j, with
    the first-stage score appended; and the pairs' i and j."""
    listed = np.concatenate([rows, scores[..., None]], axis=-1)
    first, second = _pairs(listed.shape[1])
    return _differences(listed, first, second), first, second


@numba.njit(cache=True, nogil=True)
def _differences(listed: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """listed[:, first] - listed[:, second] in one compiled loop (the dispatcher's 45 pairs cost a few numpy calls
    more than their arithmetic)."""
    out = np.empty((listed.shape[0], first.shape[0], listed.shape[2]))
    for shape in range(listed.shape[0]):
        for pair in range(first.shape[0]):
            for column in range(listed.shape[2]):
                out[shape, pair, column] = listed[shape, first[pair], column] - listed[shape, second[pair], column]
    return out


class PairwiseHead:
    """A fitted pairwise classifier; `wins` scores a shape's listed candidates by their summed win probabilities."""

    def __init__(self, model: HistGradientBoostingClassifier, settings: HeadSettings) -> None:
        self.model = model
        self.settings = settings
        self.forest = CompiledForest(model)

    def __getstate__(self) -> dict[str, Any]:
        return {"model": self.model, "settings": self.settings}  # the compiled trees are rebuilt, never stored

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["model"], state["settings"])

    def wins(self, rows: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """(shapes, k) summed probabilities of beating each other listed candidate; rows (shapes, k, features) and
        first-stage scores (shapes, k) of any k >= 1."""
        differences, first, second = pair_features(rows, scores)
        shapes, pairs, width = differences.shape
        won = 1.0 / (1.0 + np.exp(-self.forest.predict(differences.reshape(-1, width)))).reshape(shapes, pairs)
        return summed_wins(won, first, second, scores.shape[1])


def summed_wins(won: np.ndarray, first: np.ndarray, second: np.ndarray, size: int) -> np.ndarray:
    """(shapes, size): each listed candidate's summed probability of beating the others, from (shapes, pairs)
    probabilities that pair i < j's first is faster."""
    return _summed(np.ascontiguousarray(won, dtype=np.float64), first, second, size)


@numba.njit(cache=True, nogil=True)
def _summed(won: np.ndarray, first: np.ndarray, second: np.ndarray, size: int) -> np.ndarray:
    """`summed_wins`' sums, added in pair order, every first's before any second's."""
    wins = np.zeros((won.shape[0], size))
    for shape in range(won.shape[0]):
        for pair in range(first.shape[0]):
            wins[shape, first[pair]] += won[shape, pair]
        for pair in range(first.shape[0]):
            wins[shape, second[pair]] += 1.0 - won[shape, pair]
    return wins


def pair_targets(lists: HeadLists, first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(shapes, pairs) labels "the first is faster" and training weights: the difference of their relative speeds (a
    near tie teaches little) times both rows' training weights."""
    faster = lists.relative[:, first] > lists.relative[:, second]
    weight = (np.abs(lists.relative[:, first] - lists.relative[:, second]) * lists.weight[:, first]
              * lists.weight[:, second])
    return faster, weight


def fit_head(lists: HeadLists, settings: HeadSettings = HeadSettings(), seed: int = 0) -> PairwiseHead:
    """Trained on both orders of every pair whose candidates both ran, labelled and weighted by `pair_targets`."""
    differences, first, second = pair_features(lists.rows[:, :settings.size], lists.scores[:, :settings.size])
    faster, weight = pair_targets(lists, first, second)
    width = differences.shape[-1]
    matrix = np.concatenate([differences, -differences]).reshape(-1, width)
    model = HistGradientBoostingClassifier(max_iter=ITERATIONS, learning_rate=LEARNING_RATE,
                                           max_leaf_nodes=settings.max_leaf_nodes, max_depth=MAX_DEPTH,
                                           early_stopping=False, random_state=seed)
    model.fit(matrix, np.concatenate([faster, ~faster]).ravel(), sample_weight=np.concatenate([weight, weight]).ravel())
    return PairwiseHead(model, settings)


def head_efficiency(lists: HeadLists, head: PairwiseHead | None) -> np.ndarray:
    """Per shape, the best latency over its candidates / the latency of the pick: the head's most winning listed
    candidate, or the first stage's first without a head."""
    if head is None:
        picks = np.zeros(len(lists.best_ms), dtype=np.int64)
    else:
        size = head.settings.size
        picks = np.argmax(head.wins(lists.rows[:, :size], lists.scores[:, :size]), axis=1)
    return lists.best_ms / lists.latency_ms[np.arange(len(picks)), picks]


def select_head(lists: HeadLists, seed: int = 0, leaf_choices: Sequence[int] = LEAF_CHOICES
                ) -> tuple[PairwiseHead, list[dict[str, Any]]]:
    """The head's tree size, by the mean efficiency of its picks over a seeded partition of the training shapes
    (`model.inner_partition`: each part picked by a head fitted on the others; ties: the fewer leaves), fitted on
    every shape. The head is always on: on these inner parts its gain is within noise either way, while on held-out
    shapes it gained in every fold it was tried on (results/config_prediction/HISTORY.md). Returns it and what was
    tried, "off" included for reference."""
    shapes = np.arange(len(lists.best_ms))
    tried = [{"head": "off", "inner_mean_efficiency": float(head_efficiency(lists, None).mean())}]
    parts = inner_partition(shapes, seed)
    for leaves in leaf_choices:
        settings = HeadSettings(max_leaf_nodes=leaves)
        efficiency = np.zeros(len(shapes))
        for fit_part, validation in parts:
            head = fit_head(lists.take(fit_part), settings, seed)
            efficiency[validation] = head_efficiency(lists.take(validation), head)
        tried.append({"head": asdict(settings), "inner_mean_efficiency": float(efficiency.mean())})
    best = max(range(1, len(tried)), key=lambda index: tried[index]["inner_mean_efficiency"])
    return fit_head(lists, HeadSettings(**tried[best]["head"]), seed), tried
