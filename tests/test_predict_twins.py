"""Schedule-identical twins: the launch-order rule against the kernel's own index arithmetic, and the twin pairs,
floor, spread and compiled agreement on small hand-made measurements."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from tunebench.kernels import matmul
from tunebench.predict.twins import compiled_agreement, pair_spread, twin_floor, twin_pairs

NAMES = ("BLOCK_M", "BLOCK_N", "GROUP_M", "num_warps")


def tile_order(rows: int, columns: int, group_m: int) -> list[tuple[int, int]]:
    """(pid_m, pid_n) per program id, as `matmul_kernel` computes them."""
    order = []
    for pid in range(rows * columns):
        in_group = group_m * columns
        first = pid // in_group * group_m
        size = min(rows - first, group_m)
        order.append((first + pid % in_group % size, pid % in_group // size))
    return order


@pytest.mark.parametrize("rows, columns", list(itertools.product(range(1, 11), range(1, 7))))
def test_equal_launch_group_m_means_the_same_tile_order(rows, columns):
    block_m, block_n = 16, 32
    shape = (rows * block_m - 3, columns * block_n - 5)
    assert matmul.grid({"BLOCK_M": block_m, "BLOCK_N": block_n, "SPLIT_K": 1}, (*shape, 64))[0] == rows * columns
    for first, second in itertools.combinations(range(1, 12), 2):
        configs = [{"BLOCK_M": block_m, "BLOCK_N": block_n, "GROUP_M": group} for group in (first, second)]
        same_key = int(matmul.launch_group_m(configs[0], shape)) == int(matmul.launch_group_m(configs[1], shape))
        assert same_key == (tile_order(rows, columns, first) == tile_order(rows, columns, second)), (first, second)


def test_launch_group_m_works_on_columns():
    frame = pd.DataFrame({"M": [1, 100, 100], "N": [4096, 4096, 64], "BLOCK_M": [16, 16, 16],
                          "BLOCK_N": [64, 64, 64], "GROUP_M": [8, 8, 8]})
    assert list(matmul.launch_group_m(frame, (frame["M"], frame["N"]))) == [1, 7, 1]


def measurements(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["M", "N", "K", *NAMES, "status", "latency_ms"])


def test_twins_pair_only_the_same_launch_order_and_the_floor_reads_the_best_against_its_twin():
    frame = measurements([
        # one tile row (M <= BLOCK_M): GROUP_M 1 and 8 are twins
        (8, 4096, 512, 16, 64, 1, 4, "ok", 0.010), (8, 4096, 512, 16, 64, 8, 4, "ok", 0.0125),
        (8, 4096, 512, 16, 64, 1, 8, "ok", 0.020),  # no twin recorded
        # many tile rows and columns: GROUP_M changes the order, so no twins and no floor for this shape
        (1024, 4096, 512, 16, 64, 1, 4, "ok", 0.10), (1024, 4096, 512, 16, 64, 8, 4, "ok", 0.11),
        # the best's twin failed: no pair
        (8, 8192, 512, 16, 64, 1, 4, "ok", 0.03), (8, 8192, 512, 16, 64, 8, 4, "crash", np.nan),
    ])
    pairs = twin_pairs(frame, NAMES)
    assert pairs[["M", "N", "GROUP_M_a", "GROUP_M_b", "latency_ms_a", "latency_ms_b"]].values.tolist() == [
        [8, 4096, 1, 8, 0.010, 0.0125]]
    floor = twin_floor(frame, NAMES)
    assert floor[["M", "N", "K"]].values.tolist() == [[8, 4096, 512]]
    assert floor["twin_efficiency"].tolist() == pytest.approx([0.8])
    # the best on the other side of the pair
    swapped = frame.assign(latency_ms=frame["latency_ms"].where(frame.index != 1, 0.005))
    assert twin_floor(swapped, NAMES)["twin_efficiency"].tolist() == pytest.approx([0.5])


def test_twins_need_group_m_and_the_columns():
    frame = measurements([(8, 4096, 512, 16, 64, 1, 4, "ok", 0.01)])
    with pytest.raises(ValueError, match="GROUP_M"):
        twin_pairs(frame, ("BLOCK_M", "BLOCK_N", "num_warps"))
    with pytest.raises(ValueError, match="latency_ms"):
        twin_pairs(frame.drop(columns="latency_ms"), NAMES)


def test_pair_spread_bins_by_the_faster_latency():
    pairs = pd.DataFrame({"latency_ms_a": [0.010, 0.011, 0.5], "latency_ms_b": [0.011, 0.010, 0.5]})
    spread = pair_spread(pairs, (0.0, 0.1, 1.0))
    assert spread["pairs"].tolist() == [2, 1]
    assert spread["median"].tolist() == pytest.approx([0.1, 0.0])


def test_compiled_agreement_counts_pairs_per_class_with_equal_facts():
    base = {"BLOCK_M": 16, "BLOCK_N": 64, "num_warps": 4, "shared_memory_bytes": 1024, "registers": 40,
            "local_memory_bytes": 0, "wgmma": 0, "mma_sync": 4, "cp_async": 2, "scalar_global_loads": 0}
    table = pd.DataFrame([
        {**base, "GROUP_M": 1, "N_divisibility": 16, "K_divisibility": 16},
        {**base, "GROUP_M": 8, "N_divisibility": 16, "K_divisibility": 16},
        {**base, "GROUP_M": 1, "N_divisibility": 1, "K_divisibility": 16},
        {**base, "GROUP_M": 8, "N_divisibility": 1, "K_divisibility": 16, "registers": 48},
    ])
    assert compiled_agreement(table, NAMES) == (2, 1)
