"""The dispatcher's shortlist: the model's own top candidates on a fixed grid of GEMM shapes, computed at fit time.

A query scores only the candidates the model ranks highest at the grid points around it (in log2 M, N and K, at the
query's alignment class of N and K), so the compiled forest evaluates a couple of dozen rows instead of every candidate.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Sequence

import numba
import numpy as np
from tqdm import tqdm

from tunebench.predict.compiled import DIVISOR, divisibility

M_STEP = 0.5  # spacing of the grid in log2 M (octaves): M decides the tile more than N and K do
NK_STEP = 1.0  # spacing in log2 N and log2 K
PER_POINT = 8  # candidates kept per grid point, best first
SIZE = 24  # candidates in a shortlist at most: the corners' lists merged rank by rank, then cut
CLASSES = (1, 2, 4, 8, 16)  # gcd(N or K, 16): every alignment class the compiler tells apart
CHUNK = 64  # grid points scored per batch while building
NOT_COMPUTED = -1


def grid_axes(shapes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log2 values of the grid in M, N and K: the training shapes' range, widened to whole steps."""
    logs = np.log2(np.asarray(shapes, dtype=np.float64))
    axes = []
    for column, step in zip(logs.T, (M_STEP, NK_STEP, NK_STEP)):
        low, high = np.floor(column.min() / step), np.ceil(column.max() / step)
        axes.append(np.arange(low, high + 1) * step)
    return tuple(axes)


def point_shape(log2_shape: Sequence[float], n_class: int, k_class: int) -> tuple[int, int, int]:
    """A concrete GEMM shape at a grid point: M = 2 ** log2 M rounded; N and K the multiple of 16 nearest their
    power of two, plus their class when it is below 16 (so gcd(N, 16) is the class)."""
    m, n, k = (2.0 ** value for value in log2_shape)

    def sized(value: float, alignment: int) -> int:
        multiple = int(DIVISOR * round(value / DIVISOR))
        return max(DIVISOR, multiple) if alignment == DIVISOR else multiple + alignment

    return max(1, int(round(m))), sized(n, n_class), sized(k, k_class)


@dataclass
class GridShortlist:
    """Per grid point (M, N, K index, N class, K class), the model's top candidates; NOT_COMPUTED where a predictor
    fitted for given shapes only (cross-validation) skipped the point."""

    axes: tuple[np.ndarray, np.ndarray, np.ndarray]
    top: np.ndarray  # (len(M axis), len(N axis), len(K axis), len(CLASSES), len(CLASSES), per point), int16

    def corners(self, shape: Sequence[int]) -> np.ndarray:
        """(corners, 5) indices into `top` of the grid points around `shape`: per axis the nearest value below and
        above (one where the shape is on the grid; the edge outside it), at the shape's classes of N and K."""
        log2_shape = np.log2(np.asarray(shape, dtype=np.float64))
        per_axis = []
        for axis, value in zip(self.axes, log2_shape.tolist()):
            last = len(axis) - 1
            below = min(max(int(axis.searchsorted(value, side="right")) - 1, 0), last)
            above = min(int(axis.searchsorted(value, side="left")), last)
            per_axis.append(sorted({below, above}))
        classes = [CLASSES.index(int(value)) for value in divisibility(np.asarray(shape[1:]))]
        return np.array([(*point, *classes) for point in itertools.product(*per_axis)], dtype=np.int64)

    def for_shape(self, shape: Sequence[int]) -> np.ndarray:
        """Candidate indices: the corners' top lists merged rank by rank (every corner's first, then every second...),
        without repeats, at most SIZE. Compiled (`_merged_corner_lists`): the dispatcher asks once per query."""
        m, n, k = shape
        shortlist, computed = _merged_corner_lists(m, n, k, *self.axes, self.top)
        if not computed:
            raise ValueError(f"the shortlist grid has no top list around shape {tuple(shape)}: this predictor was "
                             f"fitted to serve other shapes only (fit it with shortlist_shapes=None to serve any)")
        return shortlist


@numba.njit(cache=True, nogil=True)
def _bracket(axis: np.ndarray, size: int) -> tuple[int, int]:
    """`GridShortlist.corners` on one axis: the indices of the nearest grid values below and above log2 `size`
    (equal where it is on the grid; the edge outside it)."""
    value = np.log2(float(size))
    last = len(axis) - 1
    below = min(max(np.searchsorted(axis, value, side="right") - 1, 0), last)
    return below, min(np.searchsorted(axis, value, side="left"), last)


@numba.njit(cache=True, nogil=True)
def _class_index(size: int) -> int:
    """The position in CLASSES of gcd(size, 16) (`divisibility`): CLASSES are the successive powers of two."""
    index = 0
    while index + 1 < len(CLASSES) and int(size) % CLASSES[index + 1] == 0:
        index += 1
    return index


@numba.njit(cache=True, nogil=True)
def _merged_corner_lists(m: int, n: int, k: int, m_axis: np.ndarray, n_axis: np.ndarray, k_axis: np.ndarray,
                         top: np.ndarray) -> tuple[np.ndarray, bool]:
    """`GridShortlist.for_shape` of (m, n, k), and whether every corner's list was computed (False: the shortlist
    is not to be used). The corners are `corners`' in its order: a bracket's above is its below or the next index."""
    m_below, m_above = _bracket(m_axis, m)
    n_below, n_above = _bracket(n_axis, n)
    k_below, k_above = _bracket(k_axis, k)
    n_class, k_class = _class_index(n), _class_index(k)
    corners = np.empty((8, 3), dtype=np.int64)
    count = 0
    for m_index in range(m_below, m_above + 1):
        for n_index in range(n_below, n_above + 1):
            for k_index in range(k_below, k_above + 1):
                corners[count, 0], corners[count, 1], corners[count, 2] = m_index, n_index, k_index
                count += 1
    per_point = top.shape[-1]
    shortlist = np.empty(SIZE, dtype=np.int64)
    for corner in range(count):
        for rank in range(per_point):
            if top[corners[corner, 0], corners[corner, 1], corners[corner, 2], n_class, k_class, rank] == NOT_COMPUTED:
                return shortlist[:0], False
    size = 0
    for rank in range(per_point):
        for corner in range(count):
            candidate = top[corners[corner, 0], corners[corner, 1], corners[corner, 2], n_class, k_class, rank]
            if candidate not in shortlist[:size]:
                shortlist[size] = candidate
                size += 1
                if size == SIZE:
                    return shortlist, True
    return shortlist[:size], True


def build_shortlist(score: Callable[[np.ndarray], np.ndarray], axes: tuple[np.ndarray, np.ndarray, np.ndarray],
                    allowed: np.ndarray, shapes: Sequence[Sequence[int]] | None = None) -> GridShortlist:
    """The model's PER_POINT best of the `allowed` candidate indices at every grid point, or only at the points
    around `shapes` (what cross-validation needs). `score(shapes)` gives the (len(shapes), len(allowed)) scores of
    the allowed candidates."""
    allowed = np.asarray(allowed, dtype=np.int64)
    sizes = [len(axis) for axis in axes] + [len(CLASSES)] * 2
    top = np.full((*sizes, min(PER_POINT, len(allowed))), NOT_COMPUTED, dtype=np.int16)
    grid = GridShortlist(axes, top)
    if shapes is None:
        points = np.array(list(itertools.product(*(range(size) for size in sizes))), dtype=np.int64)
    else:
        points = np.unique(np.concatenate([grid.corners(shape) for shape in shapes] or [np.empty((0, 5), np.int64)]),
                           axis=0)
    chunks = range(0, len(points), CHUNK)
    for start in tqdm(chunks, desc="shortlist grid", unit="chunk", mininterval=5.0, disable=len(chunks) < 20):
        chunk = points[start:start + CHUNK]
        concrete = np.array([point_shape([axes[axis][point[axis]] for axis in range(3)], CLASSES[point[3]],
                                         CLASSES[point[4]]) for point in chunk], dtype=np.int64)
        order = np.argsort(-score(concrete), axis=1, kind="stable")[:, :top.shape[-1]]
        top[tuple(chunk.T)] = allowed[order]
    return grid
