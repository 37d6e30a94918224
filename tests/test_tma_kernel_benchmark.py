"""benchmarks/tma_kernel.py on the recorded TMA sweep and live traces: the sweep's table, the replay's per-run targets
and their medians, and the live table of both kernels (CPU, seconds)."""

import math
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import tma_kernel  # noqa: E402

from tunebench.study import Budget, Run, open_dataset, replay_run, tasks_of  # noqa: E402


def test_sweep_table_counts_every_config_and_compares_with_cublas():
    sweep, failures, same_failures = tma_kernel.sweep_table(tma_kernel.DATASET)
    square = sweep.set_index("shape").loc["4096x4096x4096"]
    assert square.configs == 5440 == square.ok + square.compile_error + square.wrong_result + square.out_of_resources
    assert square["best vs cuBLAS"] == pytest.approx(square.cuBLAS_ms / square.best_ms, abs=2e-3)
    assert 0.9 < square["best vs cuBLAS"] < 1.0  # the recorded space's best at 4096^3 stays under cuBLAS
    assert set(failures.status) == {"compile_error", "out_of_resources"}
    assert same_failures  # the three recorded shapes fail the same 464 configs the same way
    assert failures.groupby("shape").configs.sum().tolist() == [464, 464, 464]


def test_replay_targets_per_run_and_their_medians():
    task = next(t for t in tasks_of(tma_kernel.DATASET) if t.shape == (4096, 4096, 4096))
    trace = replay_run(Run("random", task, 0), Budget(seconds=20))
    by_seed = tma_kernel.replay_by_seed(trace, tma_kernel.DATASET)
    row = by_seed.iloc[0]
    assert row["evaluations"] == len(trace) and row["shape"] == "4096x4096x4096"
    vendor_ms = open_dataset(tma_kernel.DATASET).vendor_ms(task.shape)
    assert row["best vs cuBLAS"] == pytest.approx(vendor_ms / trace.best_ms.min())
    # deterministic replay: 20 simulated seconds of random search reach 0.95x cuBLAS but not 0.99 of the best
    assert row["s to 0.71x"] <= row["s to 0.9x"] <= row["s to 0.95x"] <= 20
    assert math.isnan(row["s to 0.99 of best"]) and math.isnan(row["evals to 0.99 of best"])
    reached = row.to_dict() | {"seed": 1, "s to 0.95x": 5.0, "evals to 0.99 of best": 50.0}
    never = row.to_dict() | {"seed": 2, "s to 0.95x": math.nan}
    summary = tma_kernel.replay_summary(pd.DataFrame([row.to_dict(), reached, never]))
    assert row["s to 0.95x"] < 5.0
    assert summary.loc[0, "median s to 0.95x"] == 5.0  # the middle of this seed's, 5.0 and never (inf)
    assert summary.loc[0, "median evals to 0.99 of best"] == math.inf  # two of three seeds never got there
    assert summary.loc[0, "seeds to 0.99 of best"] == "33%"


def test_live_table_pairs_the_kernels_per_shape():
    live = tma_kernel.live_table(tma_kernel.LIVE)
    assert list(live.kernel) == ["matmul", "matmul_tma"] * len(tma_kernel.LIVE_SHAPES)
    square = live[live["shape"] == "4096x4096x4096"].set_index("kernel")["best vs cuBLAS"]
    assert square["matmul_tma"] > square["matmul"]


def test_repeats_table_lists_every_seed_and_the_median_of_lfbo():
    repeats = tma_kernel.repeats_table(tma_kernel.LIVE)
    lfbo = repeats[repeats.strategy == "lfbo"]
    assert lfbo.seed.tolist() == [0, 1, 2, 3, 4]
    assert set(repeats.strategy) == {"lfbo", "pattern", "random", "lfbo, median of 5 seeds"}
    median = repeats.iloc[-1]
    assert median["best vs cuBLAS"] == lfbo["best vs cuBLAS"].median()
    # 1.0x cuBLAS was reached by 2 of the 5 seeds: the median seed never got there
    assert lfbo["s to 1.0x"].notna().sum() == 2 and median["s to 1.0x"] == math.inf
    assert median["s to 0.99x"] == lfbo["s to 0.99x"].median()
