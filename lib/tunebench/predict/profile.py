"""Config profiles: how each candidate config fared across the training shapes, summarized as columns the ranker reads
beside a row's features, so that its trees can group configs that behave alike instead of splitting on raw parameters.

A profile is fitted on the training shapes' relative speeds alone (shapes x candidates): per candidate, the mean of
their logarithm, and its loadings on their first principal components (a truncated SVD of the centred matrix).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Relative speeds below this count as this (a failure too): a config 20x slower than the best and one that fails
# differ little to a pick, and without a floor the few failures would take over the first components.
RELATIVE_SPEED_FLOOR = 0.05


@dataclass(frozen=True)
class ConfigProfile:
    """Per candidate (row), its mean log relative speed over the training shapes and its first component loadings,
    each scaled by its singular value."""

    columns: np.ndarray  # (candidates, 1 + factors)

    @classmethod
    def fit(cls, relative_speed: np.ndarray, factors: int) -> ConfigProfile:
        """The profile of (shapes, candidates) relative speeds (the shape's best latency / the row's, 0 for a
        failure) with `factors` components (at most min(shapes, candidates))."""
        relative_speed = np.asarray(relative_speed, dtype=np.float64)
        if relative_speed.ndim != 2 or min(relative_speed.shape) < 1:
            raise ValueError(f"relative_speed must be a (shapes, candidates) array, got shape {relative_speed.shape}")
        if isinstance(factors, bool) or not isinstance(factors, (int, np.integer)) or \
                not 1 <= factors <= min(relative_speed.shape):
            raise ValueError(f"factors must be an integer from 1 to {min(relative_speed.shape)} (the fewer of shapes "
                             f"and candidates), got {factors!r}")
        logarithm = np.log(np.maximum(np.nan_to_num(relative_speed, nan=0.0), RELATIVE_SPEED_FLOOR))
        mean = logarithm.mean(axis=0)
        _, singular, components = np.linalg.svd(logarithm - mean, full_matrices=False)
        loadings = components[:factors].T * singular[:factors]
        return cls(np.column_stack([mean, loadings]))

    @property
    def names(self) -> list[str]:
        return ["profile_mean_log_speed", *(f"profile_component_{i}" for i in range(1, self.columns.shape[1]))]

    def append(self, matrix: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """`matrix` (rows, features) with each row's candidate's profile columns after its features; `candidates` are
        the rows' candidate indices."""
        candidates = np.asarray(candidates)
        if candidates.shape != (len(matrix),):
            raise ValueError(f"need one candidate index per row: {len(matrix)} rows, candidates of shape "
                             f"{candidates.shape}")
        return np.hstack([matrix, self.columns[candidates]])
