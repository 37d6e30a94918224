"""benchmarks/rerecord_batches.py: the batches cover every shape not recorded already, once; the first is a seeded
draw and the rest come grouped by binary, most shapes first; another seed changes the order; a size below one is
refused by name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import rerecord_batches  # noqa: E402

SHAPES = [(m, 64, 64) for m in range(1, 24)]


def parity(shape: tuple[int, ...]) -> int:
    """A stand-in binary: 12 odd M, 11 even."""
    return shape[0] % 2


def test_the_batches_hold_every_shape_not_done_once_in_batches_of_the_size():
    drawn = rerecord_batches.batches(SHAPES, skip={(1, 64, 64), (2, 64, 64)}, size=5, seed=0, binary=parity)
    assert [len(batch) for batch in drawn] == [5, 5, 5, 5, 1]
    assert sorted(shape for batch in drawn for shape in batch) == SHAPES[2:]


def test_after_the_pilot_the_shapes_come_grouped_by_binary_the_larger_group_first():
    drawn = rerecord_batches.batches(SHAPES, set(), 4, seed=0, binary=parity)
    rest = [parity(shape) for batch in drawn[1:] for shape in batch]
    changes = sum(a != b for a, b in zip(rest, rest[1:]))
    assert changes == 1, "one binary's shapes, then the other's"
    assert rest.count(rest[0]) >= rest.count(rest[-1])
    assert drawn[0] == rerecord_batches.batches(SHAPES, set(), 4, seed=0, binary=lambda shape: 0)[0], \
        "the pilot is the seeded draw, whatever the binaries"


def test_the_order_is_seeded():
    first = rerecord_batches.batches(SHAPES, set(), 4, seed=0, binary=parity)
    assert first == rerecord_batches.batches(list(reversed(SHAPES)), set(), 4, seed=0, binary=parity)
    assert first != rerecord_batches.batches(SHAPES, set(), 4, seed=1, binary=parity)


def test_a_size_below_one_is_refused_by_name():
    with pytest.raises(ValueError, match="size=0"):
        rerecord_batches.batches(SHAPES, set(), 0, seed=0, binary=parity)
