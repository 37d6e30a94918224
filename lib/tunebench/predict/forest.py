"""A fitted HistGradientBoosting model's trees as flat numpy arrays, for predicting a few rows fast.

sklearn's predict pays about 10-20 us per tree per call whatever the number of rows; the dispatcher scores a couple of
dozen rows per call, so it walks the trees itself, in a loop compiled by numba: tree by tree, each level over every row.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np


def _sibling_order(nodes: np.ndarray) -> np.ndarray:
    """A tree's node indices in breadth-first order, so that every split node's two children sit side by side (left
    first): in that order a node's right child is its left child's position plus one."""
    order = [0]
    for node in order:  # grows while it is walked
        if not nodes["is_leaf"][node]:
            order += [int(nodes["left"][node]), int(nodes["right"][node])]
    return np.array(order, dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def _walk(matrix: np.ndarray, roots: np.ndarray, nodes: np.ndarray, value: np.ndarray, depth: int) -> np.ndarray:
    """Sum over the trees of each row's leaf value. Tree by tree, one level at a time over all rows: a tree's nodes
    stay in cache, and the rows' walks are independent, so the processor overlaps their loads. `nodes` (nodes, 2)
    float64: a split's threshold, then the bits of (left child << 32 | feature): one 16-byte read per step."""
    links = nodes.view(np.int64)
    rows = matrix.shape[0]
    total = np.zeros(rows)
    node = np.empty(rows, dtype=np.int64)
    for tree in range(roots.shape[0]):
        node[:] = roots[tree]
        for _ in range(depth):
            for row in range(rows):
                at = node[row]
                link = links[at, 1]
                node[row] = (link >> 32) + (matrix[row, link & 0xFFFFFFFF] > nodes[at, 0])
        for row in range(rows):
            total[row] += value[node[row]]
    return total


class CompiledForest:
    """The trees of a fitted HistGradientBoostingRegressor (or binary classifier) as flat arrays, walked by a loop that
    numba compiles (`_walk`). Exactly the regressor's predictions (the classifier's
    `decision_function`) for inputs without NaN (tests check). Reads sklearn's private `_predictors` and
    `_baseline_prediction`: the equality tests guard a change of version.

    Nodes are stored breadth first per tree, children side by side, so a step is `node = left[node] + go_right`;
    a leaf is its own left child with an infinite threshold, so rows that reached one stay there."""

    def __init__(self, model: Any) -> None:
        features, thresholds, lefts, values, roots = [], [], [], [], []
        start = 0
        for predictors in model._predictors:
            nodes = predictors[0].nodes
            if nodes["is_categorical"].any():
                raise ValueError("categorical splits are not supported by the compiled forest")
            order = _sibling_order(nodes)
            position = np.empty(len(nodes), dtype=np.int64)
            position[order] = start + np.arange(len(order))
            tree = nodes[order]
            leaf = tree["is_leaf"].astype(bool)
            features.append(np.where(leaf, 0, tree["feature_idx"]))
            thresholds.append(np.where(leaf, np.inf, tree["num_threshold"]))
            lefts.append(np.where(leaf, position[order], position[np.where(leaf, 0, tree["left"])]))
            values.append(tree["value"])
            roots.append(start)
            start += len(order)
        self.roots = np.array(roots, dtype=np.int64)
        feature, left = np.concatenate(features).astype(np.int64), np.concatenate(lefts).astype(np.int64)
        if start >= 2 ** 31 or feature.max(initial=0) >= 2 ** 31:
            raise ValueError(f"{start} nodes: too many for the compiled forest's 32-bit links")
        self.nodes = np.empty((start, 2))
        self.nodes[:, 0] = np.concatenate(thresholds)
        self.nodes.view(np.int64)[:, 1] = (left << 32) | feature
        self.value = np.concatenate(values).astype(np.float64)
        self.depth = int(max(predictors[0].nodes["depth"].max() for predictors in model._predictors))
        self.baseline = float(np.asarray(model._baseline_prediction).ravel()[0])
        self.n_features = int(model.n_features_in_)

    def predict(self, matrix: np.ndarray) -> np.ndarray:
        matrix = np.ascontiguousarray(matrix, dtype=np.float64)
        if matrix.ndim != 2 or matrix.shape[1] != self.n_features:
            raise ValueError(f"expected rows of {self.n_features} features, got an array of shape {matrix.shape}")
        return _walk(matrix, self.roots, self.nodes, self.value, self.depth) + self.baseline
