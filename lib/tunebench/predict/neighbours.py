"""Correcting the model's scores for a shape with the errors it made on the nearest training shapes.

A training shape's residuals are its targets (one per candidate) minus the scores of an inner model that never saw it;
a query's correction is `strength` times the mean residual of its k nearest training shapes, where distance is
Euclidean in (log2 M, log2 N, log2 K), M's axis scaled, plus a penalty per octave of alignment (gcd with 16) that N
and K differ by. The settings are chosen by leave-one-shape-out over the training shapes, never on scored shapes.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numba
import numpy as np

from tunebench.predict.evaluation import shape_efficiency
from tunebench.predict.model import restrict

# Tried in this order, after the correction off (strength 0); ties go to the first tried, so with no gain it stays off.
CORRECTION_GRID: dict[str, tuple[Any, ...]] = {
    "strength": (0.25, 0.5, 0.75, 1.0),
    "neighbours": (3, 5, 8, 12),
    "class_penalty": (1.0, 3.0, 10.0),
    "m_scale": (0.5, 1.0),
    "distance_weighted": (False, True),
}
DISTANCE_OFFSET = 0.25  # inverse-distance weights are 1 / (distance + this), so an exact match does not dominate


@dataclass(frozen=True)
class CorrectionSettings:
    """strength: the residual mean's weight (0: no correction); neighbours: k; class_penalty: added distance per
    octave of gcd(N, 16) and gcd(K, 16) apart; m_scale: the weight of log2 M's axis; distance_weighted: weight
    neighbours by 1 / (distance + DISTANCE_OFFSET) instead of equally."""

    strength: float = 0.0
    neighbours: int = 5
    class_penalty: float = 3.0
    m_scale: float = 1.0
    distance_weighted: bool = False

    def __post_init__(self) -> None:
        if self.neighbours < 1:
            raise ValueError(f"neighbours must be >= 1, got {self.neighbours}")
        if self.strength < 0 or self.class_penalty < 0 or self.m_scale < 0:
            raise ValueError(f"strength, class_penalty and m_scale must be >= 0, got {self}")


def shape_coordinates(shapes: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
    """(shapes, 5): log2 M, log2 N, log2 K, log2 gcd(N, 16), log2 gcd(K, 16)."""
    shapes = np.asarray(shapes, dtype=np.int64).reshape(-1, 3)
    return np.log2(np.column_stack([shapes, np.gcd(shapes[:, 1:], 16)]).astype(np.float64))


@numba.njit(cache=True)
def _nearest(query: np.ndarray, reference: np.ndarray, m_scale: float, class_penalty: float, count: int,
             leave_one_out: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each query's `count` nearest references, nearest first, and their distances, kept sorted while the references
    are read in order: a reference replaces or passes only a strictly farther one, so ties go to the lower index."""
    nearest = np.empty((query.shape[0], count), dtype=np.int64)
    distance = np.empty((query.shape[0], count))
    for row in range(query.shape[0]):
        kept = 0
        for other in range(reference.shape[0]):
            if leave_one_out and other == row:
                continue
            m = (query[row, 0] - reference[other, 0]) * m_scale
            n = query[row, 1] - reference[other, 1]
            k = query[row, 2] - reference[other, 2]
            apart = np.sqrt(m * m + n * n + k * k) + class_penalty * (
                abs(query[row, 3] - reference[other, 3]) + abs(query[row, 4] - reference[other, 4]))
            if kept < count:
                place, kept = kept, kept + 1
            elif apart < distance[row, count - 1]:
                place = count - 1
            else:
                continue
            while place > 0 and distance[row, place - 1] > apart:
                nearest[row, place], distance[row, place] = nearest[row, place - 1], distance[row, place - 1]
                place -= 1
            nearest[row, place], distance[row, place] = other, apart
    return nearest, distance


def nearest_shapes(query: np.ndarray, reference: np.ndarray, settings: CorrectionSettings, count: int,
                   leave_one_out: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(queries, k) indices of each query's k = min(count, references available) nearest reference shapes, nearest
    first, ties to the lower index, and (queries, k) their distances: the scaled Euclidean distance in log2 (M, N, K)
    plus the class penalty per octave of alignment apart (coordinates from `shape_coordinates`). With
    `leave_one_out` the queries are the references themselves and none is its own neighbour. One compiled loop for
    the dispatcher's single shape and the training set's thousands."""
    available = len(reference) - (1 if leave_one_out else 0)
    if leave_one_out and len(query) != len(reference):
        raise ValueError(f"leave-one-out needs the references as queries: {len(query)} queries, {len(reference)} "
                         "references")
    if count < 1 or available < 1:
        raise ValueError(f"nearest shapes need count >= 1 and a reference to choose, got count {count} and "
                         f"{available} references")
    return _nearest(np.ascontiguousarray(query, dtype=np.float64), np.ascontiguousarray(reference, dtype=np.float64),
                    float(settings.m_scale), float(settings.class_penalty), min(count, available), leave_one_out)


def _mean_residual(nearest: np.ndarray, distance: np.ndarray, residuals: np.ndarray, settings: CorrectionSettings,
                   candidates: np.ndarray | None = None) -> np.ndarray:
    """(queries, candidates): each query's mean residual over its `settings.neighbours` nearest shapes (`nearest` and
    `distance` from `nearest_shapes`, at least that many), of every candidate or of the given candidate indices (only
    those neighbours' rows and those columns are read: the dispatcher's few)."""
    nearest = nearest[:, :settings.neighbours]
    near = residuals[nearest] if candidates is None else residuals[nearest[:, :, None], candidates]
    if not settings.distance_weighted:
        return near.mean(axis=1)
    weight = 1.0 / (distance[:, :nearest.shape[1]] + DISTANCE_OFFSET)
    weight /= weight.sum(axis=1, keepdims=True)
    return np.einsum("qk,qkc->qc", weight, near)


class NeighbourCorrection:
    """The training shapes' coordinates and residuals, and the settings that turn them into a query's correction."""

    def __init__(self, shapes: np.ndarray, residuals: np.ndarray, settings: CorrectionSettings) -> None:
        self.coordinates = shape_coordinates(shapes)
        self.residuals = np.asarray(residuals, dtype=np.float32)
        self.settings = settings
        if self.residuals.shape[0] != len(self.coordinates):
            raise ValueError(f"{len(self.coordinates)} shapes but {self.residuals.shape[0]} rows of residuals")

    def for_shapes(self, shapes: np.ndarray | Sequence[Sequence[int]],
                   candidates: np.ndarray | None = None) -> np.ndarray:
        """(shapes, candidates): the correction to add to the model's scores of each shape, of every candidate or
        only of the given candidate indices (in their order)."""
        query = shape_coordinates(shapes)
        if self.settings.strength == 0:
            return np.zeros((len(query), self.residuals.shape[1] if candidates is None else len(candidates)))
        nearest, distance = nearest_shapes(query, self.coordinates, self.settings, self.settings.neighbours)
        return self.settings.strength * _mean_residual(nearest, distance, self.residuals, self.settings, candidates)

    def for_shape(self, shape: Sequence[int], candidates: np.ndarray | None = None) -> np.ndarray:
        return self.for_shapes([shape], candidates)[0]

    def leave_one_out(self, out_of_fold_scores: np.ndarray) -> np.ndarray:
        """The training shapes' out-of-fold scores (shapes, candidates) corrected as a new shape's are, each from the
        other training shapes' residuals (what `select_correction` scored)."""
        if self.settings.strength == 0:
            return out_of_fold_scores
        nearest, distance = nearest_shapes(self.coordinates, self.coordinates, self.settings,
                                           self.settings.neighbours, leave_one_out=True)  # never itself
        return out_of_fold_scores + self.settings.strength * _mean_residual(nearest, distance, self.residuals,
                                                                            self.settings)


def select_correction(shapes: np.ndarray, targets: np.ndarray, out_of_fold_scores: np.ndarray,
                      latency_ms: np.ndarray, allowed: np.ndarray,
                      grid: dict[str, Sequence[Any]] = CORRECTION_GRID) -> tuple[NeighbourCorrection, list[dict]]:
    """Settings by leave-one-shape-out over the training shapes: each shape's out-of-fold scores (shapes, candidates)
    plus the correction from the other shapes' residuals (targets - out_of_fold_scores), scored by the mean
    efficiency of the pick among `allowed` candidates against `latency_ms`. Returns the correction with the best
    settings (ties: the first in grid order) and every setting's mean efficiency."""
    residuals = targets - out_of_fold_scores
    coordinates = shape_coordinates(shapes)
    tried, neighbourhoods = [], {}
    candidates = [CorrectionSettings()] + [CorrectionSettings(**dict(zip(grid, values)))
                                           for values in itertools.product(*grid.values())]
    most_neighbours = max(settings.neighbours for settings in candidates)  # fewer are the first of these
    for settings in candidates:
        if settings.strength == 0:
            corrected = out_of_fold_scores
        else:
            key = (settings.class_penalty, settings.m_scale)
            if key not in neighbourhoods:  # a shape never corrects itself
                neighbourhoods[key] = nearest_shapes(coordinates, coordinates, settings, most_neighbours,
                                                     leave_one_out=True)
            corrected = out_of_fold_scores + settings.strength * _mean_residual(*neighbourhoods[key], residuals,
                                                                                settings)
        efficiency = float(shape_efficiency(restrict(corrected, allowed), latency_ms).mean())
        tried.append({**asdict(settings), "leave_one_out_efficiency": efficiency})
    best = max(range(len(tried)), key=lambda index: tried[index]["leave_one_out_efficiency"])
    return NeighbourCorrection(shapes, residuals, candidates[best]), tried
