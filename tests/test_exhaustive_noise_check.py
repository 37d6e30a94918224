"""benchmarks/exhaustive_noise_check.py on hand-made sittings: identical sittings agree everywhere, a noisy row that
moved is counted as moved, a swapped fastest config costs what the second sitting says, and no shared shape is an
error."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import exhaustive_noise_check as check  # noqa: E402

NAMES = ["BLOCK_M"]


def sitting(latencies: list[float], shape: tuple[int, int, int] = (1, 64, 64),
            spread: list[float] | None = None) -> pd.DataFrame:
    """Rows of one shape, config BLOCK_M = 16, 32, ..., with these medians and (max - min) / median spreads."""
    spread = spread or [0.0] * len(latencies)
    return pd.DataFrame({"M": shape[0], "N": shape[1], "K": shape[2], "BLOCK_M": [16 * (i + 1) for i in
                                                                                   range(len(latencies))],
                         "latency_ms": latencies, "spread": spread})


def test_identical_sittings_agree_everywhere() -> None:
    latencies = list(np.linspace(1.0, 3.0, 12))
    row = check.compare(sitting(latencies), sitting(latencies), NAMES).iloc[0]
    assert row["configs"] == 12 and row["noisy rows"] == 0
    assert row["median ratio first / second"] == pytest.approx(1.0)
    assert row["Spearman"] == pytest.approx(1.0)
    assert row["first's fastest, in the second"] == pytest.approx(1.0)
    assert row[f"top {check.TOP} shared"] == check.TOP
    assert np.isnan(row[f"moved > {check.MOVED:.0%}, noisy rows"])


def test_a_noisy_fastest_row_that_moved_is_counted_and_costs_its_second_timing() -> None:
    first = [1.0, 1.1, 1.2, 1.3]
    second = [1.25, 1.1, 1.2, 1.3]  # the first sitting's fastest runs 25 % slower in the second
    row = check.compare(sitting(first, spread=[0.9, 0.0, 0.0, 0.0]), sitting(second), NAMES).iloc[0]
    assert row["noisy rows"] == pytest.approx(0.25)
    assert row[f"moved > {check.MOVED:.0%}, noisy rows"] == 1.0
    assert row[f"moved > {check.MOVED:.0%}, other rows"] == 0.0
    assert row["first's fastest, in the second"] == pytest.approx(1.1 / 1.25)


def test_sittings_without_a_shared_shape_are_refused() -> None:
    with pytest.raises(ValueError, match="share no shape"):
        check.compare(sitting([1.0, 2.0]), sitting([1.0, 2.0], shape=(2, 64, 64)), NAMES)


def test_medians_name_the_worst_shape() -> None:
    table = pd.concat([check.compare(sitting([1.0, 1.1]), sitting([1.0, 1.1]), NAMES),
                       check.compare(sitting([1.0, 1.1], shape=(2, 64, 64)), sitting([1.2, 1.1], shape=(2, 64, 64)),
                                     NAMES)], ignore_index=True)
    row = check.medians(table, "two")
    assert row["shapes"] == 2
    assert row["first's fastest, worst shape"] == pytest.approx(1.1 / 1.2)


def test_the_study_splits_by_the_shapes_noise() -> None:
    noise = pd.DataFrame({"shape": ["1x64x64", "2x64x64", "3x64x64"], "noisy rows": [0.4, 0.01, 0.0]})
    study = pd.DataFrame({"strategy": ["a"] * 4, "task": ["k:1x64x64", "k:2x64x64", "k:3x64x64", "other:1x64x64"],
                          "evals_to_0.99": [10.0, 20.0, 40.0, 99.0], "mean_score": [0.5, 0.6, 0.8, 0.0]})
    row = check.study_by_noise(study, noise, "k:").iloc[0]
    assert row["evals to 0.99, noisy shapes (1)"] == 10.0
    assert row["evals to 0.99, other shapes (2)"] == 30.0
    assert row["mean score, other shapes (2)"] == pytest.approx(0.7)
