"""The dispatcher's shortlist grid: its points keep each alignment class, a query reads the grid points around it,
the corners' top lists merge rank by rank, and a grid built for some shapes refuses the others."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tunebench.predict.compiled import divisibility
from tunebench.predict.shortlist import (CLASSES, PER_POINT, SIZE, GridShortlist, build_shortlist, grid_axes,
                                         point_shape)

TRAINING = np.array([(1, 600, 520), (8192, 50000, 16000), (100, 4096, 4096)])
CANDIDATES = 40


def preference(shapes: np.ndarray) -> np.ndarray:
    """A made-up model: the candidate nearest 2 * log2 M, then its neighbours, is best; odd K shifts it by 7."""
    shapes = np.asarray(shapes, dtype=np.float64)
    favourite = 2 * np.log2(shapes[:, 0]) + 7 * (shapes[:, 2] % 2)
    return -np.abs(np.arange(CANDIDATES)[None, :] - favourite[:, None])


@pytest.fixture(scope="module")
def grid():
    return build_shortlist(preference, grid_axes(TRAINING), np.arange(CANDIDATES))


def test_axes_cover_the_training_range_in_whole_steps():
    m_axis, n_axis, k_axis = grid_axes(TRAINING)
    assert m_axis[0] == 0 and m_axis[-1] == 13 and np.allclose(np.diff(m_axis), 0.5)
    assert (n_axis[0], n_axis[-1]) == (9, 16) and (k_axis[0], k_axis[-1]) == (9, 14)


@pytest.mark.parametrize("n_class", CLASSES)
@pytest.mark.parametrize("k_class", CLASSES)
def test_grid_points_have_the_alignment_class_they_stand_for(n_class, k_class):
    for log2_shape in [(0.0, 9.0, 9.0), (6.5, 12.0, 14.0), (13.0, 16.0, 10.0)]:
        m, n, k = point_shape(log2_shape, n_class, k_class)
        assert (divisibility(np.array([n, k])) == (n_class, k_class)).all()
        assert m == max(1, round(2 ** log2_shape[0]))
        assert abs(math.log2(n) - log2_shape[1]) < 0.03 and abs(math.log2(k) - log2_shape[2]) < 0.03


def test_corners_bracket_the_shape_at_its_classes(grid):
    between = grid.corners((100, 3000, 5001))  # log2: 6.64, 11.55, 12.29; N class 8, K class 1
    m_axis, n_axis, k_axis = grid.axes
    assert len(between) == 8
    assert sorted({m_axis[i] for i in between[:, 0]}) == [6.5, 7.0]
    assert sorted({n_axis[i] for i in between[:, 1]}) == [11.0, 12.0]
    assert sorted({k_axis[i] for i in between[:, 2]}) == [12.0, 13.0]
    assert {CLASSES[i] for i in between[:, 3]} == {8} and {CLASSES[i] for i in between[:, 4]} == {1}
    assert len(grid.corners((64, 4096, 4096))) == 1  # on the grid
    outside = grid.corners((2 ** 20, 100, 4096))  # beyond the largest M, below the smallest N: the edges
    assert len(outside) == 1 and m_axis[outside[0, 0]] == 13.0 and n_axis[outside[0, 1]] == 9.0


def test_a_shortlist_merges_the_corners_lists_rank_by_rank(grid):
    shape = (100, 3000, 5001)
    lists = [grid.top[tuple(corner)] for corner in grid.corners(shape)]
    assert all(len(top) == PER_POINT for top in lists)
    shortlist = grid.for_shape(shape)
    firsts = {int(top[0]) for top in lists}
    assert set(shortlist[:len(firsts)].tolist()) == firsts
    assert len(set(shortlist.tolist())) == len(shortlist) <= SIZE
    on_grid = (64, 4096, 4096)
    assert grid.for_shape(on_grid).tolist() == grid.top[tuple(grid.corners(on_grid)[0])].tolist()


def merged_rank_by_rank(grid: GridShortlist, shape) -> list[int]:
    """The shortlist as its definition reads: the corners' lists, every first, then every second..., without
    repeats, cut at SIZE."""
    lists = [grid.top[tuple(corner)].tolist() for corner in grid.corners(shape)]
    merged = []
    for rank in range(grid.top.shape[-1]):
        for top in lists:
            if top[rank] not in merged:
                merged.append(top[rank])
    return merged[:SIZE]


def probe_shapes(axes) -> np.ndarray:
    """Shapes on grid values, one off them, below and beyond the grid, in every class of N and K, and at random."""
    rng = np.random.default_rng(0)
    per_axis = []
    for axis in axes:
        powers = [round(2 ** value) for value in (axis[0] - 1, *axis, axis[-1] + 1)]
        per_axis.append(sorted({1, 2, 3, 2 ** 30, *(max(1, power + offset) for power in powers
                                                     for offset in (-1, 0, 1))}))
    picked = np.column_stack([rng.choice(values, 1500) for values in per_axis])
    random = np.exp2(rng.uniform(-1, [axis[-1] + 2 for axis in axes], (1500, 3))).round().clip(1)
    aligned = random * rng.choice(CLASSES, (1500, 3))
    return np.concatenate([picked, random, aligned]).astype(np.int64)


@pytest.mark.parametrize("random_lists", [False, True])
def test_a_shortlist_is_the_rank_by_rank_merge_on_any_shape(grid, random_lists):
    """`for_shape`'s compiled corner search and merge give the plain merge of `corners`' lists, on the grid and off
    it; random lists repeat across corners and overflow SIZE."""
    if random_lists:
        rng = np.random.default_rng(1)
        top = np.argsort(rng.random((*grid.top.shape[:-1], 3 * PER_POINT)), axis=-1)[..., :PER_POINT]
        grid = GridShortlist(grid.axes, top.astype(np.int16))
    lengths = set()
    for shape in probe_shapes(grid.axes):
        shortlist = grid.for_shape(tuple(int(size) for size in shape))
        assert shortlist.dtype == np.int64
        assert shortlist.tolist() == merged_rank_by_rank(grid, shape), tuple(shape)
        lengths.add(len(shortlist))
    assert (SIZE in lengths) == random_lists and len(lengths) > 1


def test_the_top_lists_are_the_models_best_allowed_candidates():
    allowed = np.arange(0, CANDIDATES, 3)
    grid = build_shortlist(lambda shapes: preference(shapes)[:, allowed], grid_axes(TRAINING), allowed)
    point = (4.0, 12.0, 12.0)
    corner = grid.corners(point_shape(point, 16, 1))[0]
    scores = preference(np.array([point_shape(point, 16, 1)]))[0, allowed]
    assert grid.top[tuple(corner)].tolist() == allowed[np.argsort(-scores, kind="stable")[:PER_POINT]].tolist()


def test_a_grid_built_for_some_shapes_holds_the_full_grids_lists_there(grid):
    served = np.array([(100, 3000, 5001), (7, 1000, 4096)])
    partial = build_shortlist(preference, grid_axes(TRAINING), np.arange(CANDIDATES), served)
    for shape in served:
        assert partial.for_shape(shape).tolist() == grid.for_shape(shape).tolist()
    computed = partial.top[..., 0] >= 0
    assert computed.sum() == len(np.unique(np.concatenate([grid.corners(shape) for shape in served]), axis=0))
    assert (partial.top[computed] == grid.top[computed]).all()


def test_a_grid_built_for_some_shapes_refuses_others():
    served = np.array([(100, 3000, 5001)])
    grid = build_shortlist(preference, grid_axes(TRAINING), np.arange(CANDIDATES), served)
    assert len(grid.for_shape((100, 3000, 5001))) > 0
    with pytest.raises(ValueError, match=r"no top list around shape \(5000, 3000, 5001\).*shortlist_shapes=None"):
        grid.for_shape((5000, 3000, 5001))
