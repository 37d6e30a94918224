"""Fitted HistGradientBoosting models' trees as flat numpy arrays, for predicting a few rows fast.

sklearn's predict pays about 10-20 us per tree per call whatever the number of rows; the dispatcher scores a couple of
dozen rows per call, so it bins them by the models' thresholds and walks the trees itself, in loops compiled by numba:
tree by tree, each level over every row; an average of models is one such walk, which a few threads can share
(the trees in PARTS parts, whose sums are added in one order whatever the threads).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba
import numpy as np

MAX_TREE_NODES = 2 ** 15  # a node's left child index in its tree takes 16 bits of an int32
# The trees are summed in this many contiguous parts, each walked whole by one thread, and the parts' sums added in
# order: the same floating-point sums whatever the number of threads.
PARTS = 4
# For each number of threads, the parts each walks: the calling thread the first group, a pool thread each other
PART_GROUPS = {threads: [np.arange(first, PARTS, threads) for first in range(threads)]
               for threads in range(1, PARTS + 1)}
EVERY_PART = PART_GROUPS[1][0]
# `load_predictor`'s default walks in PARTS threads on a host with at least this many usable cores, else in one: on
# the H100 machine's 16-core VM four threads left 6 of 1,513 shapes over 1 ms, one thread 147 to 628; on a smaller
# host the pool would take cores from the application that asks (docs/config_prediction.md, "Dispatcher")
MANY_CORES = 8
_pool: ThreadPoolExecutor | None = None
_pool_pid = 0


def _walk_threads() -> ThreadPoolExecutor:
    """The module's threads for parts of a walk (PARTS - 1, the calling thread walks the rest), made again in a forked
    child, which has none of its parent's threads."""
    global _pool, _pool_pid
    if _pool is None or _pool_pid != os.getpid():
        _pool, _pool_pid = ThreadPoolExecutor(PARTS - 1, thread_name_prefix="compiled-forest"), os.getpid()
    return _pool


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the OS tells it, else the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_threads() -> int:
    """PARTS threads on a host with MANY_CORES or more usable cores, else one."""
    return PARTS if usable_cores() >= MANY_CORES else 1


def check_threads(threads: Any) -> int:
    """`threads` as an int from 1 to PARTS; a clear error for anything else."""
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or not 1 <= threads <= PARTS:
        raise ValueError(f"threads must be an integer from 1 to {PARTS}, got {threads!r}")
    return int(threads)


def _sibling_order(nodes: np.ndarray) -> np.ndarray:
    """A tree's node indices in breadth-first order, so that every split node's two children sit side by side (left
    first): in that order a node's right child is its left child's position plus one."""
    order = [0]
    for node in order:  # grows while it is walked
        if not nodes["is_leaf"][node]:
            order += [int(nodes["left"][node]), int(nodes["right"][node])]
    return np.array(order, dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def _bin(matrix: np.ndarray, used: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """(rows, len(used)): each used feature's value binned as its model's bin mapper bins it, the number of the
    feature's thresholds below the value (`thresholds` (used, 256), each row sorted and padded with inf), so that
    value <= threshold b exactly when bin <= b. A binary search of fixed steps without branches: its steps' outcomes
    are too random for a branch predictor, and about a thousand values are binned per dispatcher call."""
    rows, width = matrix.shape[0], used.shape[0]
    binned = np.empty((rows, width), dtype=np.uint8)
    for row in range(rows):
        for feature in range(width):
            value, below = matrix[row, used[feature]], 0
            for step in (128, 64, 32, 16, 8, 4, 2, 1):
                below += step * (thresholds[feature, below + step - 1] < value)
            binned[row, feature] = below
    return binned


@numba.njit(cache=True, nogil=True)
def _walk(binned: np.ndarray, roots: np.ndarray, bounds: np.ndarray, parts: np.ndarray, links: np.ndarray,
          value: np.ndarray, depth: int) -> np.ndarray:
    """(len(parts), rows): for each listed part (trees bounds[part] to bounds[part + 1]), the sum over its trees of
    each row's leaf value. Tree by tree, one level at a time over all rows: a tree's nodes stay in cache, and the
    rows' walks are independent, so the processor overlaps their loads. A node is one int32: (left child's index in
    its tree << 16) | (binned column << 8) | bin threshold, so a step is one 4-byte read."""
    rows = binned.shape[0]
    total = np.zeros((parts.shape[0], rows))
    node = np.empty(rows, dtype=np.int64)
    for index in range(parts.shape[0]):
        for tree in range(bounds[parts[index]], bounds[parts[index] + 1]):
            base = roots[tree]
            node[:] = 0
            for _ in range(depth):
                for row in range(rows):
                    link = links[base + node[row]]
                    node[row] = (link >> 16) + (binned[row, (link >> 8) & 0xFF] > (link & 0xFF))
            for row in range(rows):
                total[index, row] += value[base + node[row]]
    return total


@numba.njit(cache=True, nogil=True)
def _predict(matrix: np.ndarray, used: np.ndarray, thresholds: np.ndarray, roots: np.ndarray, bounds: np.ndarray,
             links: np.ndarray, value: np.ndarray, depth: int, baseline: float) -> np.ndarray:
    """One thread's whole prediction in one compiled call: bin, walk every part, add the parts' sums in order and the
    baseline, as `CompiledForest.predict` does in any number of threads (the same additions, so the same bits)."""
    sums = _walk(_bin(matrix, used, thresholds), roots, bounds, EVERY_PART, links, value, depth)
    total = sums[0].copy()
    for part in range(1, sums.shape[0]):
        total += sums[part]
    return total + baseline


class CompiledForest:
    """The trees of fitted HistGradientBoostingRegressors (or binary classifiers) as flat arrays, walked by loops that
    numba compiles (`_bin`, `_walk`). Given one model, exactly its predictions (a classifier's `decision_function`)
    for inputs without NaN; given several, the mean of theirs, to rounding (tests check). Reads sklearn's private
    `_predictors`, `_bin_mapper` and `_baseline_prediction`: the equality tests guard a change of version.

    A row's features that some split reads are first binned by each model's own thresholds (a split sends value <= its
    threshold left exactly when the value's bin is <= the split's bin threshold), so a node needs 4 bytes instead of a
    float64 threshold and a link: a forest of 1000 trees of 127 leaves is 1 MB, not 4, and the walk about a quarter
    faster. Nodes are stored breadth first per tree, children side by side, so a step is `node = left[node] +
    go_right`; a leaf is its own left child with the largest bin threshold, so rows that reached one stay there.
    Several models (an average: leaf values divided by their count) are one walk over one binned matrix, whose
    columns are (model, feature) pairs, since each model bins by its own thresholds."""

    def __init__(self, *models: Any) -> None:
        if not models:
            raise ValueError("a compiled forest needs at least one model")
        widths = sorted({int(model.n_features_in_) for model in models})
        if len(widths) > 1:
            raise ValueError(f"the models read different numbers of features: {widths}")
        links, values, roots, used, bin_thresholds, depths = [], [], [], [], [], []
        start = 0
        for model in models:
            trees = [predictors[0].nodes for predictors in model._predictors]
            split_on = [nodes["feature_idx"][~nodes["is_leaf"].astype(bool)] for nodes in trees]
            model_used = np.unique(np.concatenate([np.zeros(1, np.int64), *split_on]))  # 0 at least: leaves read it
            column = np.zeros(widths[0], dtype=np.int64)
            column[model_used] = len(used) + np.arange(len(model_used))
            used += model_used.tolist()
            bin_thresholds += [model._bin_mapper.bin_thresholds_[feature] for feature in model_used]
            depths += [int(nodes["depth"].max()) for nodes in trees]
            for nodes in trees:
                if nodes["is_categorical"].any():
                    raise ValueError("categorical splits are not supported by the compiled forest")
                order = _sibling_order(nodes)
                if len(order) > MAX_TREE_NODES:
                    raise ValueError(f"a tree of {len(order)} nodes: the compiled forest holds at most "
                                     f"{MAX_TREE_NODES}")
                position = np.empty(len(nodes), dtype=np.int64)
                position[order] = np.arange(len(order))
                tree = nodes[order]
                leaf = tree["is_leaf"].astype(bool)
                left = np.where(leaf, np.arange(len(order)), position[np.where(leaf, 0, tree["left"])])
                feature = np.where(leaf, 0, column[tree["feature_idx"]])
                threshold = np.where(leaf, 255, tree["bin_threshold"]).astype(np.int64)
                links.append((left << 16) | (feature << 8) | threshold)
                values.append(tree["value"] / len(models))
                roots.append(start)
                start += len(order)
        if len(used) > 256:
            raise ValueError(f"{len(used)} (model, feature) pairs split on: the compiled forest's nodes hold at most "
                             "256")
        self.used = np.array(used, dtype=np.int64)
        self.n_features = widths[0]
        self.roots = np.array(roots, dtype=np.int64)
        self.links = np.concatenate(links).astype(np.int32)
        self.value = np.concatenate(values).astype(np.float64)
        self.depth = max(depths)
        self.baseline = float(np.mean([np.asarray(model._baseline_prediction).ravel()[0] for model in models]))
        if max(len(edges) for edges in bin_thresholds) > 255:
            raise ValueError("a feature with over 255 bin thresholds: the compiled forest's bins are one byte")
        self.thresholds = np.full((len(self.used), 256), np.inf)
        for position, edges in enumerate(bin_thresholds):
            self.thresholds[position, :len(edges)] = edges
        self.bounds = np.linspace(0, len(self.roots), PARTS + 1).round().astype(np.int64)

    def predict(self, matrix: np.ndarray, threads: int = 1) -> np.ndarray:
        """The rows' predictions; with threads > 1 the walk's PARTS parts are shared out among that many threads
        (the calling one and the module's pool: the walk releases the GIL). The same sums for any `threads`."""
        threads = check_threads(threads)
        matrix = np.ascontiguousarray(matrix, dtype=np.float64)
        if matrix.ndim != 2 or matrix.shape[1] != self.n_features:
            raise ValueError(f"expected rows of {self.n_features} features, got an array of shape {matrix.shape}")
        if threads == 1:  # the dispatcher's usual call: one compiled call, no per-call numpy work
            return _predict(matrix, self.used, self.thresholds, self.roots, self.bounds, self.links, self.value,
                            self.depth, self.baseline)
        binned = _bin(matrix, self.used, self.thresholds)
        groups = PART_GROUPS[threads]
        arguments = (binned, self.roots, self.bounds)
        pending = [_walk_threads().submit(_walk, *arguments, group, self.links, self.value, self.depth)
                   for group in groups[1:]]
        sums = np.empty((PARTS, len(matrix)))
        sums[groups[0]] = _walk(*arguments, groups[0], self.links, self.value, self.depth)
        for group, future in zip(groups[1:], pending):
            sums[group] = future.result()
        total = sums[0]
        for part in range(1, PARTS):
            total = total + sums[part]
        return total + self.baseline
