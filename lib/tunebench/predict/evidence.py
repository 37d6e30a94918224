"""Neighbour evidence for the pairwise head: how fast each listed candidate ran on the training shapes nearest the
query, as measured (its relative speed there), beside the features the head compares.

The neighbour correction adds the mean of the nearest shapes' model errors to every score at one strength; the head
gets the measurements themselves and learns when they carry over: on the nearest shape, the mean of the nearest 3 and
of the nearest NEIGHBOURS (of every training shape, when there are fewer), and the worst of those. Distance is the
correction's (`neighbours.shape_distances`).
"""

from __future__ import annotations

import numpy as np

from tunebench.predict.neighbours import CorrectionSettings, shape_coordinates, shape_distances

NEIGHBOURS = 8
# The distance's settings: the correction's defaults (a class penalty of 3 per octave of alignment apart, M's axis
# unscaled). Fixed, not tuned: on the 1,417 shapes' cached folds a penalty of 1 or 10 and 3 or 16 neighbours moved
# the head's mean efficiency by under 0.1 points (README).
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
        distance = shape_distances(shape_coordinates(shapes), self.coordinates, DISTANCE)
        return self._evidence(distance, candidates, min(NEIGHBOURS, len(self.coordinates)))

    def leave_one_out(self, candidates: np.ndarray) -> np.ndarray:
        """`for_shapes` of the training shapes themselves, each from the others (what a new shape's lists get)."""
        distance = shape_distances(self.coordinates, self.coordinates, DISTANCE)
        np.fill_diagonal(distance, np.inf)  # a shape is never its own evidence
        return self._evidence(distance, candidates, min(NEIGHBOURS, len(self.coordinates) - 1))

    def _evidence(self, distance: np.ndarray, candidates: np.ndarray, count: int) -> np.ndarray:
        """The columns from each query's `count` nearest (NEIGHBOURS, or every shape there is when fewer)."""
        nearest = np.argpartition(distance, count - 1, axis=1)[:, :count]
        order = np.argsort(np.take_along_axis(distance, nearest, axis=1), axis=1, kind="stable")
        nearest = np.take_along_axis(nearest, order, axis=1)  # nearest first
        speeds = self.relative[nearest[:, :, None], np.asarray(candidates)[:, None, :]].astype(np.float64)
        return np.stack([speeds[:, 0], speeds[:, :3].mean(axis=1), speeds.mean(axis=1), speeds.min(axis=1)], axis=-1)
