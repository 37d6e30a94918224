"""benchmarks/family_gaps.py: the (N, K) classes, the ratio to cuBLAS per shape and the fixed rule that picks the next
TMA sweeps, on hand-made measurements."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import family_gaps  # noqa: E402


def test_classes_follow_what_each_gemm_family_can_load() -> None:
    assert family_gaps.operand_class(4096, 4096) == family_gaps.ALIGNED
    assert family_gaps.operand_class(5000, 3000) == family_gaps.EIGHT  # 5000 = 8 x 625
    assert family_gaps.operand_class(4096, 3004) == family_gaps.POINTER_ONLY  # 3004 = 4 x 751
    assert family_gaps.operand_class(4097, 4096) == family_gaps.POINTER_ONLY


def measured(rows: list[tuple[int, int, int, float, float]]) -> pd.DataFrame:
    """Per (M, N, K, best ms, cuBLAS ms): two ok candidates (the best and a slower one), one failure, and cuBLAS."""
    measurements, vendor = [], []
    for m, n, k, best, cublas in rows:
        for latency, status in ((best, "ok"), (2 * best, "ok"), (float("nan"), "compile_error")):
            measurements.append({"M": m, "N": n, "K": k, "latency_ms": latency, "status": status})
        vendor.append({"M": m, "N": n, "K": k, "latency_ms": cublas})
    return family_gaps.shape_ratios(pd.DataFrame(measurements), pd.DataFrame(vendor))


def test_ratio_is_cublas_over_the_fastest_ok_candidate() -> None:
    table = measured([(1, 4096, 4096, 0.02, 0.01), (2048, 5000, 3000, 0.1, 0.12)]).set_index("M")
    assert table.loc[1, "ratio"] == pytest.approx(0.5)
    assert table.loc[2048, "ratio"] == pytest.approx(1.2)
    assert table.loc[1, "family"] == "M < 8" and table.loc[2048, "class"] == family_gaps.EIGHT


def test_plan_takes_each_cells_lowest_ratio_under_the_threshold_unswept_and_tma_eligible() -> None:
    table = measured([
        (4096, 4096, 4096, 0.10, 0.07),   # aligned, M >= 1024: ratio 0.7
        (2048, 4096, 4096, 0.10, 0.06),   # same cell, lower: 0.6, but already swept
        (1024, 2048, 2048, 0.10, 0.08),   # same cell: 0.8, the lowest once the swept one is left out
        (4096, 4096, 3004, 0.10, 0.01),   # no TMA: never planned, however low
        (200, 5000, 3000, 0.10, 0.05),    # multiples of 8, 128 <= M < 1024: 0.5
        (16, 4096, 4096, 0.10, 0.095),    # aligned, 8 <= M < 128: 0.95, over the threshold
    ])
    plan = family_gaps.sweep_plan(table, swept={(2048, 4096, 4096)}, below=0.9)
    assert list(plan[["M", "N", "K"]].itertuples(index=False, name=None)) == [(200, 5000, 3000), (4096, 4096, 4096)]
    with pytest.raises(ValueError, match="below must be a positive ratio, got 0"):
        family_gaps.sweep_plan(table, swept=set(), below=0)


def test_gap_table_counts_every_shape_once_in_class_and_family_order() -> None:
    table = measured([(1, 4096, 4096, 0.02, 0.01), (2048, 5000, 3000, 0.1, 0.12), (2, 4096, 4096, 0.02, 0.03)])
    gaps = family_gaps.gap_table(table)
    assert gaps["shapes"].sum() == 3
    assert list(gaps["N, K"]) == [family_gaps.ALIGNED, family_gaps.EIGHT]
    assert gaps.iloc[0]["faster than cuBLAS"] == "50%" and gaps.iloc[0]["under 0.8x"] == "50%"


def test_a_dataset_without_vendor_timings_is_an_error() -> None:
    with pytest.raises(ValueError, match="no shape has both"):
        family_gaps.shape_ratios(pd.DataFrame({"M": [1], "N": [8], "K": [8], "latency_ms": [1.0], "status": ["ok"]}),
                                 pd.DataFrame({"M": [2], "N": [8], "K": [8], "latency_ms": [1.0]}))


@pytest.mark.parametrize("arguments, message", [
    (["--below", "0"], "--below must be a positive ratio to cuBLAS, got 0.0"),
    (["--dataset", "no/such.parquet"], "no such dataset: no/such.parquet"),
])
def test_the_script_refuses_bad_arguments(arguments, message, capsys, tmp_path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        family_gaps.main([*arguments, "--out", str(tmp_path / "gaps.md")])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
