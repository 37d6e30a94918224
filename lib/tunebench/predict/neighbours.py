"""Correcting the model's scores for a shape with the errors it made on the nearest training shapes.

A training shape's residuals are its targets (one per candidate) minus the scores of an inner model that never saw it;
a query's correction is `strength` times the mean residual of its k nearest training shapes, where distance is
Euclidean in (log2 M, log2 N, log2 K), M's axis scaled, plus a penalty per octave of alignment (gcd with 16) that N
and K differ by. The settings are chosen by leave-one-shape-out over the training shapes, never on scored shapes.
"""

from __future__ import annotations

import itertools
import math
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


def one_shape_coordinates(shape: Sequence[int]) -> np.ndarray:
    """(5,): `shape_coordinates` of one shape, the same bits (numpy's log2 of the same float64s) without the batch's
    array building: the dispatcher's query, for `NeighbourCorrection.for_coordinates` and
    `NeighbourEvidence.for_coordinates`."""
    m, n, k = (int(size) for size in shape)
    return np.log2(np.array([m, n, k, math.gcd(n, 16), math.gcd(k, 16)], dtype=np.float64))


@numba.njit(cache=True, nogil=True)
def fill_nearest(query: np.ndarray, reference: np.ndarray, m_scale: float, class_penalty: float, skip: int,
                 nearest: np.ndarray, distance: np.ndarray) -> None:
    """One query's len(`nearest`) nearest references (all but index `skip`; -1: none skipped) into `nearest`, nearest
    first, and their distances into `distance`, kept sorted while the references are read in order: a reference
    replaces or passes only a strictly farther one, so ties go to the lower index."""
    count = len(nearest)
    kept = 0
    for other in range(reference.shape[0]):
        if other == skip:
            continue
        m = (query[0] - reference[other, 0]) * m_scale
        n = query[1] - reference[other, 1]
        k = query[2] - reference[other, 2]
        apart = np.sqrt(m * m + n * n + k * k) + class_penalty * (
            abs(query[3] - reference[other, 3]) + abs(query[4] - reference[other, 4]))
        if kept < count:
            place, kept = kept, kept + 1
        elif apart < distance[count - 1]:
            place = count - 1
        else:
            continue
        while place > 0 and distance[place - 1] > apart:
            nearest[place], distance[place] = nearest[place - 1], distance[place - 1]
            place -= 1
        nearest[place], distance[place] = other, apart


@numba.njit(cache=True, nogil=True)
def _nearest(query: np.ndarray, reference: np.ndarray, m_scale: float, class_penalty: float, count: int,
             leave_one_out: bool) -> tuple[np.ndarray, np.ndarray]:
    """`fill_nearest` of every query (with `leave_one_out`, query i skips reference i)."""
    nearest = np.empty((query.shape[0], count), dtype=np.int64)
    distance = np.empty((query.shape[0], count))
    for row in range(query.shape[0]):
        fill_nearest(query[row], reference, m_scale, class_penalty, row if leave_one_out else -1, nearest[row],
                     distance[row])
    return nearest, distance


def nearest_shapes(query: np.ndarray, reference: np.ndarray, settings: CorrectionSettings, count: int,
                   leave_one_out: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(queries, k) indices of each query's k = min(count, references available) nearest reference shapes, nearest
    first, ties to the lower index, and (queries, k) their distances: the scaled Euclidean distance in log2 (M, N, K)
    plus the class penalty per octave of alignment apart (coordinates from `shape_coordinates`). With
    `leave_one_out` the queries are the references themselves and none is its own neighbour. One compiled loop
    (`fill_nearest`, which the single-shape paths call themselves) for one shape and the training set's thousands."""
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
    those neighbours' rows and those columns are read)."""
    columns = _columns_of(candidates, residuals.shape[1])
    return _neighbour_means(np.ascontiguousarray(nearest[:, :settings.neighbours]),
                            np.ascontiguousarray(distance[:, :settings.neighbours]), residuals, columns,
                            settings.distance_weighted)


def _columns_of(candidates: np.ndarray | None, count: int) -> np.ndarray:
    """Candidate indices as int64 from 0 to `count` - 1, every one for None, negative ones counted from the end as
    numpy counts them; numpy's IndexError for one out of range."""
    if candidates is None:
        return np.arange(count)
    return _wrapped(np.asarray(candidates, dtype=np.int64), count)


@numba.njit(cache=True, nogil=True)
def _wrapped(candidates: np.ndarray, count: int) -> np.ndarray:
    """`_columns_of` of an index array, compiled: the dispatcher's call checks a couple of dozen."""
    columns = np.empty_like(candidates)
    for position in range(len(candidates)):
        if not -count <= candidates[position] < count:
            raise IndexError("a candidate index is out of range of the residuals' columns")
        columns[position] = candidates[position] + count if candidates[position] < 0 else candidates[position]
    return columns


@numba.njit(cache=True, nogil=True)
def _neighbour_means(nearest: np.ndarray, distance: np.ndarray, residuals: np.ndarray, columns: np.ndarray,
                     distance_weighted: bool) -> np.ndarray:
    """(queries, columns): each query's mean of its neighbours' residuals in the given columns, equally or by the
    weights 1 / (distance + DISTANCE_OFFSET) normalised; sums in nearest-first order. The one code path of the
    training set's batch and the dispatcher's one shape (`_one_shape_mean`)."""
    count = nearest.shape[1]
    means = np.empty((nearest.shape[0], len(columns)))
    weight = np.empty(count)
    for query in range(nearest.shape[0]):
        if distance_weighted:
            total = 0.0
            for rank in range(count):
                weight[rank] = 1.0 / (distance[query, rank] + DISTANCE_OFFSET)
                total += weight[rank]
            for rank in range(count):
                weight[rank] /= total
        else:
            weight[:] = 1.0 / count
        for column in range(len(columns)):
            mean = 0.0
            for rank in range(count):
                mean += weight[rank] * np.float64(residuals[nearest[query, rank], columns[column]])
            means[query, column] = mean
    return means


@numba.njit(cache=True, nogil=True)
def _one_shape_mean(query: np.ndarray, reference: np.ndarray, residuals: np.ndarray, columns: np.ndarray,
                    m_scale: float, class_penalty: float, count: int, distance_weighted: bool) -> np.ndarray:
    """(columns,): `_neighbour_means` of one query's `count` nearest shapes, found by `fill_nearest`: the batch's
    arithmetic in one compiled call."""
    nearest, distance = np.empty((1, count), dtype=np.int64), np.empty((1, count))
    fill_nearest(query, reference, m_scale, class_penalty, -1, nearest[0], distance[0])
    return _neighbour_means(nearest, distance, residuals, columns, distance_weighted)[0]


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
        return self._for_queries(shape_coordinates(shapes), candidates)

    def for_shape(self, shape: Sequence[int], candidates: np.ndarray | None = None) -> np.ndarray:
        return self.for_coordinates(one_shape_coordinates(shape), candidates)

    def for_coordinates(self, coordinates: np.ndarray, candidates: np.ndarray | None = None) -> np.ndarray:
        """`for_shape` of the shape whose coordinates these are ((5,), `one_shape_coordinates`) in one compiled call,
        for the dispatcher, which computes the coordinates once for this and the neighbour evidence."""
        if self.settings.strength == 0 or not len(self.coordinates):  # the batch's zeros, or its error
            return self._for_queries(coordinates[None], candidates)[0]
        return self.settings.strength * _one_shape_mean(
            coordinates, self.coordinates, self.residuals, _columns_of(candidates, self.residuals.shape[1]),
            float(self.settings.m_scale), float(self.settings.class_penalty),
            min(self.settings.neighbours, len(self.coordinates)), self.settings.distance_weighted)

    def _for_queries(self, query: np.ndarray, candidates: np.ndarray | None) -> np.ndarray:
        """`for_shapes` from the shapes' coordinates."""
        if self.settings.strength == 0:
            return np.zeros((len(query), self.residuals.shape[1] if candidates is None else len(candidates)))
        nearest, distance = nearest_shapes(query, self.coordinates, self.settings, self.settings.neighbours)
        return self.settings.strength * _mean_residual(nearest, distance, self.residuals, self.settings, candidates)

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
