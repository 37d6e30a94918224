"""The neighbour evidence the pairwise head reads (predict/evidence.py): its columns by hand, that a training shape is
never its own evidence, fewer training shapes than neighbours, and its errors."""

import numpy as np
import pytest

from tunebench.predict.evidence import COLUMNS, NEIGHBOURS, NeighbourEvidence
from tunebench.predict.neighbours import one_shape_coordinates

# Shapes along M only (same N, K and alignment), so the nearest are the nearest in log2 M.
SHAPES = np.array([[2 ** power, 4096, 4096] for power in range(12)])
RELATIVE = np.arange(12 * 3, dtype=float).reshape(12, 3) / 36  # shape i, candidate c: (3i + c) / 36


def test_the_columns_are_the_nearest_shapes_relative_speeds():
    evidence = NeighbourEvidence(SHAPES, RELATIVE)
    query = np.array([[2 ** 5, 4096, 4096]])  # shape 5 itself: distance 0, then 4 and 6, 3 and 7, ...
    got = evidence.for_shapes(query, np.array([[2, 0]]))
    assert got.shape == (1, 2, len(COLUMNS)) and NEIGHBOURS == 8
    nearest = [5, 4, 6, 3, 7, 2, 8, 1]  # ties (4 and 6, ...) in either order give the same means
    for position, candidate in enumerate((2, 0)):
        speeds = RELATIVE[nearest, candidate]
        np.testing.assert_allclose(got[0, position], [speeds[0], speeds[:3].mean(), speeds.mean(), speeds.min()],
                                   rtol=1e-6)


def test_a_training_shape_is_never_its_own_evidence():
    evidence = NeighbourEvidence(SHAPES, RELATIVE)
    candidates = np.zeros((12, 1), dtype=np.int64)
    own = evidence.leave_one_out(candidates)
    assert own[0, 0, 0] == pytest.approx(RELATIVE[1, 0])  # shape 0's nearest other is shape 1
    assert own[11, 0, 0] == pytest.approx(RELATIVE[10, 0])
    assert own[0, 0, 3] == pytest.approx(RELATIVE[1, 0])  # its nearest 8 are shapes 1 to 8; the slowest there: 1
    assert own[11, 0, 3] == pytest.approx(RELATIVE[3, 0])  # 3 to 10 for shape 11
    np.testing.assert_allclose(own[5, 0, 2], RELATIVE[[4, 6, 3, 7, 2, 8, 1, 9], 0].mean(), rtol=1e-6)


def test_fewer_training_shapes_than_neighbours_use_every_one():
    evidence = NeighbourEvidence(SHAPES[:3], RELATIVE[:3])
    got = evidence.leave_one_out(np.array([[1], [1], [1]]))
    np.testing.assert_allclose(got[1, 0, 2], RELATIVE[[0, 2], 1].mean(), rtol=1e-6)
    np.testing.assert_allclose(evidence.for_shapes(SHAPES[:1], np.array([[1]]))[0, 0, 2], RELATIVE[:3, 1].mean(),
                               rtol=1e-6)


@pytest.mark.parametrize("training", [400, 3])  # the second: fewer training shapes than NEIGHBOURS
def test_one_shapes_evidence_is_the_batchs_bit_for_bit(training):
    rng = np.random.default_rng(training)
    shapes = np.column_stack([rng.integers(1, 2 ** rng.integers(1, 15, 550)), rng.integers(1, 2 ** 15, (550, 2))])
    shapes[::2, 1:] = 16 * (shapes[::2, 1:] // 16 + 1)  # half of them aligned: one alignment class holds many
    shapes[100:150] = shapes[:50]  # equal shapes: tied distances
    evidence = NeighbourEvidence(shapes[:training], rng.uniform(0, 1, (training, 30)).astype(np.float32))
    for shape in shapes[::3]:
        for candidates in (rng.integers(0, 30, 10), np.arange(0), np.array([29])):
            np.testing.assert_array_equal(evidence.for_coordinates(one_shape_coordinates(shape), candidates),
                                          evidence.for_shapes(np.array([shape]), candidates[None])[0], strict=True)


def test_bad_evidence_is_an_error():
    with pytest.raises(ValueError, match="12 shapes but 11 rows of relative speeds"):
        NeighbourEvidence(SHAPES, RELATIVE[:11])
    with pytest.raises(ValueError, match="at least 2 training shapes, got 1"):
        NeighbourEvidence(SHAPES[:1], RELATIVE[:1])
    evidence = NeighbourEvidence(SHAPES, RELATIVE)
    with pytest.raises(ValueError, match=f"from 0 to {RELATIVE.shape[1] - 1}, got 0 to {RELATIVE.shape[1]}"):
        evidence.for_shapes(SHAPES[:1], np.array([[0, RELATIVE.shape[1]]]))
    with pytest.raises(ValueError, match=r"\(queries, listed\) for 2 queries, got an array of shape \(3,\)"):
        evidence.for_shapes(SHAPES[:2], np.array([0, 1, 2]))
    for candidates in ([0, RELATIVE.shape[1]], [-1]):
        with pytest.raises(ValueError, match="candidate indices must be from 0"):
            evidence.for_coordinates(one_shape_coordinates(SHAPES[0]), np.array(candidates))
