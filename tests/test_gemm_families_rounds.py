"""benchmarks/gemm_families_rounds.py: the plan keeps each family's fastest recorded configs on the shapes both
datasets hold, the timing covers both families with cuBLAS in every round, and the table compares them (CPU, stand-in
bench)."""

import sys
from pathlib import Path

import pandas as pd
import pytest

from tunebench import gemm_kernels

import stand_in_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import gemm_families_rounds as families  # noqa: E402

DATASETS = Path(__file__).resolve().parents[1] / "results" / "datasets"
POINTER = DATASETS / "matmul_bfloat16_h100.parquet"
TMA = DATASETS / "matmul_tma_bfloat16_h100_hinted.parquet"


class FamilyBench(stand_in_bench.StandInBench):
    """cuBLAS answers 1.0 ms; a TMA config (it has WIDEN) 0.5 ms, a pointer config 2.0 ms + BLOCK_K / 1000."""

    def latency_ms(self, config, shape):
        return 0.5 if "WIDEN" in config else 2.0 + config["BLOCK_K"] / 1000


def test_the_plan_holds_each_familys_fastest_configs_on_the_shared_shapes_only():
    plans = families.plan(POINTER, TMA)
    for family, frame in plans.items():
        assert set(frame[families.SHAPE].itertuples(index=False, name=None)) == {(200, 3000, 5000), (1000, 5000, 3000)}
        assert (frame.groupby(families.SHAPE).recorded_rank.agg(list) == [list(range(families.TOP))] * 2).all()
        assert frame.groupby(families.SHAPE).recorded_ms.is_monotonic_increasing.all()
    assert "WIDEN" in plans["matmul_tma"] and "SPLIT_K" in plans["matmul"]


def test_datasets_without_a_shared_shape_are_refused():
    with pytest.raises(ValueError, match="share no shape"):
        families.plan(POINTER, DATASETS / "matmul_tma_bfloat16_h200_mid.parquet")


def test_both_families_are_timed_with_cublas_in_every_round_and_compared(tmp_path, monkeypatch):
    from tunebench.measure import live

    monkeypatch.setattr(live, "GpuBench", FamilyBench)
    families.main(["--write-plan", str(tmp_path / "plan"), "--pointer", str(POINTER), "--tma", str(TMA)])
    families.main(["--plan", str(tmp_path / "plan"), "--out", str(tmp_path / "out")])
    for family in gemm_kernels.FAMILIES:
        timings = pd.read_csv(tmp_path / "out" / f"{family}.csv")
        assert timings.groupby("kind").size().to_dict() == {"config": 2 * families.TOP * families.ROUNDS,
                                                            "vendor": 2 * families.ROUNDS}
    table = gemm_kernels.families_table(gemm_kernels.read_families(tmp_path / "out")).set_index(["shape", "family"])
    pointer = pd.read_csv(tmp_path / "plan" / "matmul.csv").query("M == 1000")
    assert table.loc[("1000x5000x3000", "matmul_tma"), "vs the pointer GEMM's fastest"] == pytest.approx(
        (2.0 + pointer.BLOCK_K.min() / 1000) / 0.5, abs=1e-3)
    assert table.loc[("1000x5000x3000", "matmul"), "vs the pointer GEMM's fastest"] == 1.0
    assert table.loc[("200x3000x5000", "matmul_tma"), "vs cuBLAS, median of rounds"] == 2.0
    families.main(["--summarize", "--out", str(tmp_path / "out")])
    assert "stand-in" in (tmp_path / "out" / "summary.md").read_text()
