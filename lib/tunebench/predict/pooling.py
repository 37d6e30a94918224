"""Training data pooled from several datasets of one kernel, one per GPU: one `TrainingData` of all their rows, with
the dataset each shape came from, and folds drawn over the first dataset's shapes that the others only train.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from tunebench.predict.evaluation import grouped_folds
from tunebench.predict.model import TrainingData


def check_comparable(primary: TrainingData, extra: TrainingData, index: int = 1) -> None:
    """A clear error unless `extra` (the `index`-th extra dataset) has the primary's kernel, dtype, hardware and
    candidates, in the same order: only then does a row of one stand for the same (shape, config) row of the other."""
    for name in ("kernel", "dtype", "hardware"):
        if getattr(extra, name) != getattr(primary, name):
            raise ValueError(f"extra dataset {index} ({extra.gpu}) has {name} {getattr(extra, name)!r}, the "
                             f"primary ({primary.gpu}) {getattr(primary, name)!r}; pooled data must agree")
    if extra.candidates.shape != primary.candidates.shape or (extra.candidates != primary.candidates).any():
        raise ValueError(f"extra dataset {index} ({extra.gpu}) has other candidate configs than the primary "
                         f"({primary.gpu}); pooled data must share one candidate set")


def pool(primary: TrainingData, extras: Sequence[TrainingData]) -> tuple[TrainingData, np.ndarray]:
    """`primary` with every row of `extras` appended, their shapes after its shapes; and per shape of the result, the
    index of its dataset (0: `primary`, i: `extras[i - 1]`). Every dataset must have the primary's kernel, dtype,
    candidates and hardware: the features carry no column that tells GPUs apart."""
    for index, extra in enumerate(extras, start=1):
        check_comparable(primary, extra, index)
    parts = [primary, *extras]
    offsets = np.cumsum([0] + [len(part.shapes) for part in parts])
    pooled = replace(
        primary, shapes=np.vstack([part.shapes for part in parts]),
        features=np.vstack([part.features for part in parts]),
        latency_ms=np.concatenate([part.latency_ms for part in parts]),
        spread=np.concatenate([part.spread for part in parts]),
        group=np.concatenate([part.group + offset for part, offset in zip(parts, offsets)]),
        provenance={**primary.provenance, "pooled_with": [{"gpu": extra.gpu, "shapes": len(extra.shapes),
                                                           "provenance": extra.provenance} for extra in extras]})
    source = np.repeat(np.arange(len(parts)), [len(part.shapes) for part in parts])
    return pooled, source


def pooled_folds(data: TrainingData, source: np.ndarray, n_splits: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """GroupKFold over the primary dataset's shapes (`source` 0), as `grouped_folds` draws them over the primary
    alone; each fold's training shapes add every other dataset's shape whose (M, N, K) is none of the fold's test
    shapes, so a held-out shape is unseen on every GPU."""
    primary = np.flatnonzero(source == 0)
    others = np.flatnonzero(source != 0)
    folds = []
    for train, test in grouped_folds(primary, n_splits):
        held_out = {tuple(shape) for shape in data.shapes[test].tolist()}
        extra = [index for index in others if tuple(data.shapes[index].tolist()) not in held_out]
        folds.append((np.concatenate([train, np.array(extra, dtype=train.dtype)]), test))
    return folds
