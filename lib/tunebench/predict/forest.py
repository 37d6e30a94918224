"""A fitted HistGradientBoosting model's trees as flat numpy arrays, for predicting a few rows fast.

sklearn's predict pays about 10-20 us per tree per call whatever the number of rows; the dispatcher scores a couple of
dozen rows per call, so it walks the trees itself, level by level, over every (row, tree) pair at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class CompiledForest:
    """The trees of a fitted HistGradientBoostingRegressor (or binary classifier) as flat arrays, evaluated level by
    level with numpy over every (row, tree) pair at once. Exactly the regressor's predictions (the classifier's
    `decision_function`) for inputs without NaN (tests check). Reads sklearn's private `_predictors` and
    `_baseline_prediction`: the equality tests guard a change of version."""

    def __init__(self, model: Any) -> None:
        trees = [predictors[0].nodes for predictors in model._predictors]
        sizes = np.array([len(nodes) for nodes in trees])
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        nodes = np.concatenate(trees)
        base = np.repeat(offsets, sizes)
        leaf = nodes["is_leaf"].astype(bool)
        if nodes["is_categorical"].any():
            raise ValueError("categorical splits are not supported by the compiled forest")
        index = np.arange(len(nodes))
        left = np.where(leaf, index, nodes["left"].astype(np.int64) + base)
        right = np.where(leaf, index, nodes["right"].astype(np.int64) + base)
        self.roots = offsets.astype(np.int64)
        self.feature = nodes["feature_idx"].astype(np.int64)
        self.threshold = np.where(leaf, np.inf, nodes["num_threshold"])
        self.children = np.column_stack([left, right]).ravel()  # 2 * node + (go right)
        self.value = nodes["value"].astype(np.float64)
        self.depth = int(nodes["depth"].max())
        self.baseline = float(np.asarray(model._baseline_prediction).ravel()[0])
        self.n_features = int(model.n_features_in_)

    def predict(self, matrix: np.ndarray) -> np.ndarray:
        matrix = np.ascontiguousarray(matrix, dtype=np.float64)
        rows = matrix.shape[0]
        flat = matrix.ravel()
        row_start = np.repeat(np.arange(rows) * self.n_features, len(self.roots))
        node = np.tile(self.roots, rows)
        for _ in range(self.depth):
            go_right = flat[row_start + self.feature[node]] > self.threshold[node]
            node = self.children[2 * node + go_right]
        return self.value[node].reshape(rows, len(self.roots)).sum(axis=1) + self.baseline
