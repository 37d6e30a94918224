"""A fitted HistGradientBoosting model's trees as flat numpy arrays, for predicting a few rows fast.

sklearn's predict pays about 10-20 us per tree per call whatever the number of rows; the dispatcher scores a couple of
dozen rows per call, so it bins them by the model's thresholds and walks the trees itself, in loops compiled by numba:
tree by tree, each level over every row.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

MAX_TREE_NODES = 2 ** 15  # a node's left child index in its tree takes 16 bits of an int32


def _sibling_order(nodes: np.ndarray) -> np.ndarray:
    """A tree's node indices in breadth-first order, so that every split node's two children sit side by side (left
    first): in that order a node's right child is its left child's position plus one."""
    order = [0]
    for node in order:  # grows while it is walked
        if not nodes["is_leaf"][node]:
            order += [int(nodes["left"][node]), int(nodes["right"][node])]
    return np.array(order, dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def _bin(matrix: np.ndarray, used: np.ndarray, thresholds: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(rows, len(used)): each used feature's value binned as the model's bin mapper bins it, the number of the
    feature's thresholds below the value (`thresholds` (used, 256), each row sorted, `counts` of them), so that
    value <= threshold b exactly when bin <= b."""
    rows, width = matrix.shape[0], used.shape[0]
    binned = np.empty((rows, width), dtype=np.uint8)
    for row in range(rows):
        for feature in range(width):
            value, low, high = matrix[row, used[feature]], 0, counts[feature]
            while low < high:
                middle = (low + high) >> 1
                if thresholds[feature, middle] < value:
                    low = middle + 1
                else:
                    high = middle
            binned[row, feature] = low
    return binned


@numba.njit(cache=True, nogil=True)
def _walk(binned: np.ndarray, roots: np.ndarray, links: np.ndarray, value: np.ndarray, depth: int) -> np.ndarray:
    """Sum over the trees of each row's leaf value. Tree by tree, one level at a time over all rows: a tree's nodes
    stay in cache, and the rows' walks are independent, so the processor overlaps their loads. A node is one int32:
    (left child's index in its tree << 16) | (binned column << 8) | bin threshold, so a step is one 4-byte read."""
    rows = binned.shape[0]
    total = np.zeros(rows)
    node = np.empty(rows, dtype=np.int64)
    for tree in range(roots.shape[0]):
        base = roots[tree]
        node[:] = 0
        for _ in range(depth):
            for row in range(rows):
                link = links[base + node[row]]
                node[row] = (link >> 16) + (binned[row, (link >> 8) & 0xFF] > (link & 0xFF))
        for row in range(rows):
            total[row] += value[base + node[row]]
    return total


class CompiledForest:
    """The trees of a fitted HistGradientBoostingRegressor (or binary classifier) as flat arrays, walked by loops that
    numba compiles (`_bin`, `_walk`). Exactly the regressor's predictions (the classifier's `decision_function`) for
    inputs without NaN (tests check). Reads sklearn's private `_predictors`, `_bin_mapper` and
    `_baseline_prediction`: the equality tests guard a change of version.

    A row's features that some split reads are first binned by the model's own thresholds (a split sends value <= its
    threshold left exactly when the value's bin is <= the split's bin threshold), so a node needs 4 bytes instead of a
    float64 threshold and a link: a forest of 1000 trees of 127 leaves is 1 MB, not 4, and the walk about a quarter
    faster. Nodes are stored breadth first per tree, children side by side, so a step is `node = left[node] +
    go_right`; a leaf is its own left child with the largest bin threshold, so rows that reached one stay there."""

    def __init__(self, model: Any) -> None:
        links, values, roots = [], [], []
        start = 0
        trees = [predictors[0].nodes for predictors in model._predictors]
        split_on = [nodes["feature_idx"][~nodes["is_leaf"].astype(bool)] for nodes in trees]
        self.used = np.unique(np.concatenate([np.zeros(1, np.int64), *split_on]))  # 0 at least: leaves point there
        if len(self.used) > 256:
            raise ValueError(f"{len(self.used)} features split on: the compiled forest's nodes hold fewer than 256")
        column = np.zeros(int(model.n_features_in_), dtype=np.int64)
        column[self.used] = np.arange(len(self.used))
        for nodes in trees:
            if nodes["is_categorical"].any():
                raise ValueError("categorical splits are not supported by the compiled forest")
            order = _sibling_order(nodes)
            if len(order) > MAX_TREE_NODES:
                raise ValueError(f"a tree of {len(order)} nodes: the compiled forest holds at most {MAX_TREE_NODES}")
            position = np.empty(len(nodes), dtype=np.int64)
            position[order] = np.arange(len(order))
            tree = nodes[order]
            leaf = tree["is_leaf"].astype(bool)
            left = np.where(leaf, np.arange(len(order)), position[np.where(leaf, 0, tree["left"])])
            feature = np.where(leaf, 0, column[tree["feature_idx"]])
            threshold = np.where(leaf, 255, tree["bin_threshold"]).astype(np.int64)
            links.append((left << 16) | (feature << 8) | threshold)
            values.append(tree["value"])
            roots.append(start)
            start += len(order)
        self.n_features = int(model.n_features_in_)
        self.roots = np.array(roots, dtype=np.int64)
        self.links = np.concatenate(links).astype(np.int32)
        self.value = np.concatenate(values).astype(np.float64)
        self.depth = int(max(nodes["depth"].max() for nodes in trees))
        self.baseline = float(np.asarray(model._baseline_prediction).ravel()[0])
        bin_thresholds = [model._bin_mapper.bin_thresholds_[feature] for feature in self.used]
        self.thresholds = np.full((len(self.used), 256), np.inf)
        self.counts = np.array([len(edges) for edges in bin_thresholds], dtype=np.int64)
        for position, edges in enumerate(bin_thresholds):
            self.thresholds[position, :len(edges)] = edges

    def predict(self, matrix: np.ndarray) -> np.ndarray:
        matrix = np.ascontiguousarray(matrix, dtype=np.float64)
        if matrix.ndim != 2 or matrix.shape[1] != self.n_features:
            raise ValueError(f"expected rows of {self.n_features} features, got an array of shape {matrix.shape}")
        binned = _bin(matrix, self.used, self.thresholds, self.counts)
        return _walk(binned, self.roots, self.links, self.value, self.depth) + self.baseline
