"""benchmarks/rerecord_batches.py: the batches cover every shape not recorded already, once, in a seeded order that
another seed changes, and a size below one is refused by name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import rerecord_batches  # noqa: E402

SHAPES = [(m, 64, 64) for m in range(1, 24)]


def test_the_batches_hold_every_shape_not_done_once_in_batches_of_the_size():
    drawn = rerecord_batches.batches(SHAPES, skip={(1, 64, 64), (2, 64, 64)}, size=5, seed=0)
    assert [len(batch) for batch in drawn] == [5, 5, 5, 5, 1]
    flat = [shape for batch in drawn for shape in batch]
    assert sorted(flat) == SHAPES[2:]


def test_the_order_is_seeded():
    first = rerecord_batches.batches(SHAPES, set(), 4, seed=0)
    assert first == rerecord_batches.batches(list(reversed(SHAPES)), set(), 4, seed=0)
    assert first != rerecord_batches.batches(SHAPES, set(), 4, seed=1)


def test_a_size_below_one_is_refused_by_name():
    with pytest.raises(ValueError, match="size=0"):
        rerecord_batches.batches(SHAPES, set(), 0, seed=0)
