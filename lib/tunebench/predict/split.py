"""A first-stage model split by alignment class: one regressor per group of (N, K) alignment classes, each fitted on
its group's rows only; a row goes to its shape's group, read from its divisibility features.

Stop 38's one-off runs (HISTORY.md) found the unaligned classes a different problem from the aligned one: a model of
the unaligned training shapes alone predicted them better than one model of every shape, and the aligned class lost
nothing by the split.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np

from tunebench.predict.evaluation import ALIGNMENTS, alignment
from tunebench.predict.features import PROBLEM_FEATURES

# Named partitions of ALIGNMENTS into groups, one regressor each: "none" keeps one model of every shape
ALIGNMENT_SPLITS: dict[str, tuple[tuple[str, ...], ...]] = {
    "none": (ALIGNMENTS,),
    "aligned": (("aligned",), ("hinted", "odd")),
    "class": (("aligned",), ("hinted",), ("odd",)),
}
_N_DIVISIBILITY = PROBLEM_FEATURES.index("log2_N_divisibility")
_K_DIVISIBILITY = PROBLEM_FEATURES.index("log2_K_divisibility")
_ALIGNED_LOG2 = 4.0  # log2 of the divisibility 16 that Triton specializes on


def check_split(split: str) -> tuple[tuple[str, ...], ...]:
    """The groups of a named split; a clear error for an unknown name."""
    if split not in ALIGNMENT_SPLITS:
        raise ValueError(f"unknown alignment_split {split!r}; allowed: {', '.join(ALIGNMENT_SPLITS)}")
    return ALIGNMENT_SPLITS[split]


def row_alignments(matrix: np.ndarray) -> np.ndarray:
    """Per feature row, the index into ALIGNMENTS of its shape's class (`evaluation.alignment`), from the
    log2_N_divisibility and log2_K_divisibility columns: odd when either is 0, aligned when both are 4."""
    n, k = matrix[:, _N_DIVISIBILITY], matrix[:, _K_DIVISIBILITY]
    return np.where((n == 0) | (k == 0), ALIGNMENTS.index("odd"),
                    np.where((n == _ALIGNED_LOG2) & (k == _ALIGNED_LOG2), ALIGNMENTS.index("aligned"),
                             ALIGNMENTS.index("hinted")))


def row_groups(split: str, matrix: np.ndarray) -> np.ndarray:
    """Per feature row, the index of its group in the split."""
    lookup = np.array([next(index for index, group in enumerate(check_split(split)) if name in group)
                       for name in ALIGNMENTS])
    return lookup[row_alignments(matrix)]


def shape_group(split: str, shape: Sequence[int]) -> int:
    """The index of the group of an (M, N, K) shape in the split."""
    name = alignment(int(shape[1]), int(shape[2]))
    return next(index for index, group in enumerate(check_split(split)) if name in group)


class SplitModel:
    """One member of a split ranker: a fitted regressor per group of the split, with the regressors' predict and
    staged_predict over rows of any group (each row predicted by its group's regressor)."""

    def __init__(self, split: str, models: Sequence[Any]) -> None:
        groups = check_split(split)
        if len(models) != len(groups):
            raise ValueError(f"split {split!r} has {len(groups)} groups, got {len(models)} models")
        self.split = split
        self.models = list(models)

    @property
    def n_features_in_(self) -> int:
        return int(self.models[0].n_features_in_)

    def _rows(self, matrix: np.ndarray) -> list[np.ndarray]:
        groups = row_groups(self.split, matrix)
        return [np.flatnonzero(groups == index) for index in range(len(self.models))]

    def predict(self, matrix: np.ndarray) -> np.ndarray:
        scores = np.empty(len(matrix))
        for model, rows in zip(self.models, self._rows(matrix)):
            if len(rows):
                scores[rows] = model.predict(matrix[rows])
        return scores

    def staged_predict(self, matrix: np.ndarray) -> Iterator[np.ndarray]:
        """Every group's regressors' scores after each boosting iteration (they have the same count)."""
        parts = [(rows, model.staged_predict(matrix[rows])) for model, rows in zip(self.models, self._rows(matrix))
                 if len(rows)]
        for stages in zip(*(stage for _, stage in parts)):
            scores = np.empty(len(matrix))
            for (rows, _), stage in zip(parts, stages):
                scores[rows] = stage
            yield scores
