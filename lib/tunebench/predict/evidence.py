"""Neighbour evidence for the pairwise head: how fast each listed candidate ran on the training shapes nearest the
query, as measured (its relative speed there), beside the features the head compares.

The neighbour correction adds the mean of the nearest shapes' model errors to every score at one strength; the head
gets the measurements themselves and learns when they carry over: on the nearest shape, the mean of the nearest 3 and
of the nearest NEIGHBOURS (of every training shape, when there are fewer), and the worst of those. Distance is the
correction's (`neighbours.nearest_shapes`).
"""

from __future__ import annotations

import numba
import numpy as np

from tunebench.predict.neighbours import CorrectionSettings, fill_nearest, nearest_shapes, shape_coordinates

NEIGHBOURS = 8
# The distance's settings: the correction's defaults (a class penalty of 3 per octave of alignment apart, M's axis
# unscaled). Fixed, not tuned: on the 1,417 shapes' cached folds a penalty of 1 or 10 and 3 or 16 neighbours moved
# the head's mean efficiency by under 0.1 points (results/config_prediction/HISTORY.md).
DISTANCE = CorrectionSettings(class_penalty=3.0)
COLUMNS = ("nearest_relative_speed", "nearest_3_mean_relative_speed", f"nearest_{NEIGHBOURS}_mean_relative_speed",
           f"nearest_{NEIGHBOURS}_min_relative_speed")


class NeighbourEvidence:
    """The training shapes' coordinates and measured relative speeds (shapes, candidates: the shape's best latency
    over the candidate's, 0 where it did not run)."""

    def __init__(self, shapes: np.ndarray, relative: np.ndarray) -> None:
        self.coordinates = shape_coordinates(shapes)
        self.relative = np.asarray(relative, dtype=np.float32)
        if self.relative.shape[0] != len(self.coordinates):
            raise ValueError(f"{len(self.coordinates)} shapes but {self.relative.shape[0]} rows of relative speeds")
        if len(self.coordinates) < 2:
            raise ValueError(f"neighbour evidence needs at least 2 training shapes, got {len(self.coordinates)}")

    def for_shapes(self, shapes: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """(queries, listed, len(COLUMNS)): the evidence on each query shape's listed candidates (indices, (queries,
        listed))."""
        nearest, _ = nearest_shapes(shape_coordinates(shapes), self.coordinates, DISTANCE, NEIGHBOURS)
        return self._evidence(nearest, candidates)

    def for_coordinates(self, coordinates: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """(listed, len(COLUMNS)): `for_shapes` of the one shape whose coordinates these are ((5,),
        `neighbours.one_shape_coordinates`), on its listed candidates (indices, (listed,)): the same bits from one
        compiled call, for the dispatcher."""
        return _evidence_of_one(coordinates, self.coordinates, self.relative, np.asarray(candidates, np.int64),
                                float(DISTANCE.m_scale), float(DISTANCE.class_penalty),
                                min(NEIGHBOURS, len(self.coordinates)))

    def leave_one_out(self, candidates: np.ndarray) -> np.ndarray:
        """`for_shapes` of the training shapes themselves, each from the others (what a new shape's lists get)."""
        nearest, _ = nearest_shapes(self.coordinates, self.coordinates, DISTANCE, NEIGHBOURS, leave_one_out=True)
        return self._evidence(nearest, candidates)

    def _evidence(self, nearest: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """The columns from each query's nearest shapes (NEIGHBOURS, or every one there is when fewer; nearest
        first)."""
        candidates = np.ascontiguousarray(candidates, dtype=np.int64)
        if candidates.ndim != 2 or len(candidates) != len(nearest):
            raise ValueError(f"candidates must be (queries, listed) for {len(nearest)} queries, got an array of shape "
                             f"{candidates.shape}")
        if candidates.size and not 0 <= candidates.min() <= candidates.max() < self.relative.shape[1]:
            raise ValueError(f"candidate indices must be from 0 to {self.relative.shape[1] - 1}, got "
                             f"{candidates.min()} to {candidates.max()}")
        return _columns(self.relative, nearest, candidates)


@numba.njit(cache=True, nogil=True)
def _columns(relative: np.ndarray, nearest: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """(queries, listed, 4): `_fill_columns` of every query."""
    columns = np.empty((candidates.shape[0], candidates.shape[1], 4))
    for query in range(candidates.shape[0]):
        _fill_columns(relative, nearest[query], candidates[query], columns[query])
    return columns


@numba.njit(cache=True, nogil=True)
def _fill_columns(relative: np.ndarray, nearest: np.ndarray, candidates: np.ndarray, columns: np.ndarray) -> None:
    """One query's (listed, 4) `columns`: per listed candidate, its relative speed on the nearest shape, the mean
    over the nearest 3 and over all given, and the lowest of those (float64 sums in nearest-first order)."""
    count = len(nearest)
    for listed in range(len(candidates)):
        candidate = candidates[listed]
        total, lowest, first_three = 0.0, np.inf, 0.0
        for rank in range(count):
            speed = np.float64(relative[nearest[rank], candidate])
            total += speed
            lowest = min(lowest, speed)
            if rank == 2 or rank == count - 1 and count < 3:
                first_three = total / (rank + 1)
        columns[listed, 0] = relative[nearest[0], candidate]
        columns[listed, 1] = first_three
        columns[listed, 2] = total / count
        columns[listed, 3] = lowest


@numba.njit(cache=True, nogil=True)
def _evidence_of_one(query: np.ndarray, reference: np.ndarray, relative: np.ndarray, candidates: np.ndarray,
                     m_scale: float, class_penalty: float, count: int) -> np.ndarray:
    """(listed, 4): `_fill_columns` of one query's `count` nearest shapes, after `_evidence`'s check of the
    indices."""
    for candidate in candidates:
        if not 0 <= candidate < relative.shape[1]:
            raise ValueError("candidate indices must be from 0 to the candidates' count - 1")
    nearest, distance = np.empty(count, dtype=np.int64), np.empty(count)
    fill_nearest(query, reference, m_scale, class_penalty, -1, nearest, distance)
    columns = np.empty((len(candidates), 4))
    _fill_columns(relative, nearest, candidates, columns)
    return columns
