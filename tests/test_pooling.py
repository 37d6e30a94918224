"""Training data pooled from two GPUs' datasets: rows appended in order, each shape's source kept, folds drawn over the
primary's shapes alone with a held-out shape's other-GPU rows out of its fold, and clear errors for data that differ."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tunebench.predict.evaluation import grouped_folds
from tunebench.predict.features import Hardware
from tunebench.predict.model import TrainingData
from tunebench.predict.pooling import pool, pooled_folds

CANDIDATES = np.array([[64, 64], [128, 64], [128, 128]])


def dataset(gpu: str, shapes: list[tuple[int, int, int]], offset: float) -> TrainingData:
    """A tiny TrainingData: 3 candidates per shape, features and latencies that say which dataset a row is from."""
    rows = len(shapes) * len(CANDIDATES)
    return TrainingData("matmul", "bfloat16", gpu, None, Hardware(), None, np.array(shapes), CANDIDATES,
                        np.full((rows, 2), offset), offset + np.arange(rows, dtype=float), np.zeros(rows),
                        np.repeat(np.arange(len(shapes)), len(CANDIDATES)), {"gpu": gpu})


H100 = dataset("H100", [(1, 512, 512), (8, 768, 512), (64, 512, 1024), (256, 1024, 768), (1024, 512, 512),
                        (2048, 768, 768)], 0.0)
H200 = dataset("H200", [(8, 768, 512), (3, 1000, 1000), (2048, 768, 768), (77, 900, 700)], 100.0)


def test_pooled_rows_follow_the_primary_in_order_with_their_source():
    pooled, source = pool(H100, [H200])
    assert source.tolist() == [0] * 6 + [1] * 4
    assert (pooled.shapes == np.vstack([H100.shapes, H200.shapes])).all()
    assert (pooled.latency_ms[pooled.rows_of([6])] == H200.latency_ms[:3]).all()
    assert (pooled.features[pooled.rows_of([9])] == 100.0).all()
    assert pooled.group.tolist() == np.repeat(np.arange(10), 3).tolist()
    assert pooled.gpu == "H100" and pooled.provenance["pooled_with"][0]["gpu"] == "H200"


def test_folds_test_primary_shapes_once_and_train_on_other_gpus_shapes_except_the_held_out_ones():
    pooled, source = pool(H100, [H200])
    folds = pooled_folds(pooled, source, 3)
    tested = np.concatenate([test for _, test in folds])
    assert sorted(tested.tolist()) == list(range(6))
    for (train, test), (primary_train, primary_test) in zip(folds, grouped_folds(np.arange(6), 3)):
        assert (test == primary_test).all() and set(primary_train) <= set(train)
        held_out = {tuple(shape) for shape in pooled.shapes[test].tolist()}
        extra = {index for index in train if source[index] == 1}
        assert extra == {index for index in range(6, 10) if tuple(pooled.shapes[index].tolist()) not in held_out}
    assert any(len(train) < 4 + 4 for train, _ in folds)  # some fold held out a shape both GPUs measured


@pytest.mark.parametrize("change, named", [({"dtype": "float16"}, "dtype"),
                                           ({"hardware": Hardware(sm_count=114)}, "hardware"),
                                           ({"candidates": CANDIDATES[::-1]}, "candidate configs")])
def test_data_that_differ_from_the_primary_are_an_error(change, named):
    with pytest.raises(ValueError, match=named):
        pool(H100, [replace(H200, **change)])
