"""benchmarks/screening_sweep.py on hand-made rows: a screen's latency is the median of a row's first runs, a screen
misled by a slow first run loses the best and says what it costs, the cost counts both passes, and a missing dataset
is named."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import screening_sweep as screening  # noqa: E402


def rows(repeats: list[list[float]], shape: tuple[int, int, int] = (1, 64, 64)) -> pd.DataFrame:
    """One shape's rows that ran, config BLOCK_M = 16, 32, ..., a second of bench time per row."""
    return pd.DataFrame({"M": shape[0], "N": shape[1], "K": shape[2],
                         "BLOCK_M": [16 * (i + 1) for i in range(len(repeats))], "status": "ok",
                         "repeats_ms": repeats, "latency_ms": [float(np.median(r)) for r in repeats],
                         "bench_s": 1.0})


def test_a_screen_is_the_median_of_the_first_runs_or_of_all_a_short_row_has() -> None:
    screened = screening.screen_latencies([[3.0, 1.0, 2.0, 9.0], [5.0]], 3)
    assert screened.tolist() == [2.0, 5.0]
    with pytest.raises(ValueError, match="at least 1 run, got 0"):
        screening.screen_latencies([[1.0]], 0)


def test_a_slow_first_run_hides_the_best_config_from_a_one_run_screen_and_costs_its_efficiency() -> None:
    task = rows([[2.0, 1.0, 1.0, 1.0, 1.0], [1.2, 1.2, 1.2, 1.2, 1.2], [3.0] * 5])
    one = screening.screen_shape(task.assign(screened_ms=screening.screen_latencies(task["repeats_ms"], 1)), 1, 0.10)
    assert one["kept"] == 1 and one["efficiency"] == pytest.approx(1.0 / 1.2)
    three = screening.screen_shape(task.assign(screened_ms=screening.screen_latencies(task["repeats_ms"], 3)), 3, 0.10)
    assert three["efficiency"] == 1.0


def test_the_cost_counts_the_screen_of_every_config_and_the_full_timing_of_the_kept() -> None:
    task = rows([[1.0] * 30, [2.0] * 30])
    cost = screening.screen_shape(task.assign(screened_ms=screening.screen_latencies(task["repeats_ms"], 3)), 3, 0.10)
    untimed = screening.UNTIMED_RUNS
    assert cost["full_runs"] == 2 * (untimed + 30)
    assert cost["runs"] == 2 * (untimed + 3) + (untimed + 30)
    assert cost["bench_s"] == pytest.approx(2 * (untimed + 3) / (untimed + 30) + 1.0)


def test_study_and_summary_cover_every_shape_and_screen() -> None:
    frame = pd.concat([rows([[1.0] * 5, [1.5] * 5]), rows([[2.0] * 5, [1.0, 9.0, 9.0, 1.0, 1.0]], (2, 64, 64))])
    dataset = SimpleNamespace(measurements=frame, shape_names=("M", "N", "K"))
    per_shape = screening.study(dataset, repeats=(1, 3), margins=(0.1,)).assign(dataset="toy")
    assert len(per_shape) == 4
    table = screening.summarize(per_shape).set_index("runs_per_config")
    assert table.loc[1, "best kept"] == "2/2" and table.loc[3, "best kept"] == "1/2"
    assert table.loc[3, "min efficiency"] == "50.00%"


def test_a_missing_dataset_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        screening.main(["--datasets", str(tmp_path / "nowhere.parquet"), "--out", str(tmp_path)])
    assert "nowhere.parquet" in capsys.readouterr().err


def test_a_screened_copy_cuts_only_the_rows_the_screen_drops_and_says_so() -> None:
    from tunebench.measure.dataset import Dataset
    from tunebench.measure.screen import Screen
    from tunebench.space import Choice

    frame = pd.concat([rows([[1.0, 1.0, 1.0, 1.1], [1.1, 1.1, 1.1, 1.1], [2.0, 3.0, 2.0, 2.0]]),
                       rows([[5.0] * 4, [4.0] * 4, [9.0, 1.0, 9.0, 1.0]], (2, 64, 64))]).drop(columns="status")
    frame = frame.assign(status="ok", compile_s=0.1, error="")
    vendor = pd.DataFrame({"M": [1, 2], "N": 64, "K": 64, "library": "cuBLAS", "latency_ms": 1.0,
                           "repeats_ms": [[1.0]] * 2})
    dataset = Dataset("matmul", "bfloat16", "toy", ("M", "N", "K"), (Choice("BLOCK_M", (16, 32, 48)),), frame, vendor,
                      {"gpu_name": "toy"})
    screened = screening.as_screened(dataset, Screen(runs=2, margin=0.2))
    lengths = screened.measurements["repeats_ms"].map(len).tolist()
    assert lengths == [4, 4, 2, 2, 4, 2]  # kept: 1.0 and 1.1 (within 20 %) and 4.0; (9.0, 1.0) screens at 5.0
    assert screened.measurements["latency_ms"].tolist()[2:] == [2.5, 5.0, 4.0, 5.0]
    assert screened.provenance["screen"] == {"runs": 2, "margin": 0.2}
    assert screened.optimum_ms((1, 64, 64)) == dataset.optimum_ms((1, 64, 64))
