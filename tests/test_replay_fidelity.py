"""Replay against live (`replay_fidelity`): the recorded live runs of the TMA GEMM found and replayed batch for batch
on the bundled sweep, the start-up calibrated from their first batches, the errors and the figure, and the live runs on
the widened space on its sweep (CPU, seconds)."""

import sys
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

from tunebench import replay_fidelity as fidelity
from tunebench.gemm_kernels import DATASET, LIVE, OVERLAPPED
from tunebench.live_traces import summary_rows
from tunebench.measure.replay import ReplayEvaluator
from tunebench.study import open_dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import replay_fidelity_widened as widened  # noqa: E402

matplotlib.use("Agg")

SITTING_4096 = LIVE / "overlapped" / "h200_matmul_tma_bfloat16_4096x4096x4096.parquet"


@pytest.fixture(scope="module")
def sweep():
    return open_dataset(DATASET)


@pytest.fixture(scope="module")
def sitting_4096(sweep):
    return fidelity.batch_table(OVERLAPPED, "4096x4096x4096", SITTING_4096, sweep)


def test_live_runs_lists_every_tma_trace_once():
    runs = fidelity.live_runs(LIVE)
    paths = [path for _, _, path in runs]
    assert len(paths) == len(set(paths)) == len(list(LIVE.rglob("h200_matmul_tma_*.parquet")))
    assert {setup for setup, _, _ in runs} == {"set-up first", OVERLAPPED, "set-up overlapped, 2-GPU host",
                                               "workers forked", "set-up overlapped, beside the forked runs"}
    assert all(path.name.endswith(f"{shape}.parquet") for _, shape, path in runs)


def test_a_batch_is_its_wall_seconds_less_the_strategys_and_replays_the_same_configs(sitting_4096, sweep):
    trace = pd.read_parquet(SITTING_4096)
    quick = trace[trace.strategy == "lfbo_quick"].groupby("batch").agg(time_s=("time_s", "first"),
                                                                       strategy_s=("strategy_s", "first"),
                                                                       configs=("config_key", "size"))
    rows = sitting_4096[sitting_4096.strategy == "lfbo_quick"]
    assert list(rows.configs) == list(quick.configs)
    live = np.diff(quick.time_s, prepend=0.0) - np.diff(quick.strategy_s, prepend=0.0)
    assert rows["live s"].to_numpy() == pytest.approx(live)
    assert set(rows["compile workers"]) == {14}
    # The sequential clock's batches add up to one evaluator asked the same configs in the same batches.
    evaluator = ReplayEvaluator(sweep, (4096, 4096, 4096), compile_workers=14)
    configs = {",".join(map(str, sweep.space((4096, 4096, 4096)).key(c))): c for c in sweep.configs((4096,) * 3)}
    for _, batch in trace[trace.strategy == "lfbo_quick"].groupby("batch"):
        evaluator.evaluate([configs[key] for key in batch.config_key])
    assert rows["sequential s"].sum() == pytest.approx(evaluator.elapsed_s)
    # Overlapping compiles with timing never takes longer than doing one after the other.
    assert (rows["pipelined s"] <= rows["sequential s"] + 1e-9).all()


def test_the_start_up_is_the_sittings_median_first_batch_residual(sitting_4096):
    residuals = fidelity.first_batch_residuals(sitting_4096)
    assert list(residuals.strategy) == ["lfbo", "lfbo_quick"]
    assert (residuals["live - pipelined s"] == residuals["live s"] - residuals["pipelined s"]).all()
    assert fidelity.calibrated_startup_s(residuals) == pytest.approx(residuals["live - pipelined s"].median())
    with pytest.raises(ValueError, match="no first batches of the sitting of set-up 'set-up first'"):
        fidelity.calibrated_startup_s(residuals, "set-up first")
    summary = fidelity.residuals_summary(residuals, 10.0)
    error = summary.filter(like="median absolute error").iloc[0, 0]
    assert float(error) == pytest.approx((residuals["live - pipelined s"] - 10.0).abs().median(), abs=0.005)


def test_later_batches_are_grouped_by_the_host_of_their_sweep_rows(sitting_4096, sweep):
    other = fidelity.recorded_on_another_host(sweep, DATASET)
    assert other == {"4096x4096x14336", "8192x4096x4096", "8192x8192x8192"}  # the extension swept on a 2 x H200 host
    summary = fidelity.later_batches_summary(sitting_4096, other)
    later = sitting_4096[sitting_4096.batch > 1]
    assert list(summary["sweep rows recorded on"].unique()) == ["every shape", "the base file's host",
                                                                "the base file's host, set-up overlapped"]
    pipelined = summary[(summary["sweep rows recorded on"] == "every shape") & (summary.clock == "pipelined")].iloc[0]
    assert pipelined.batches == len(later)
    assert pipelined["median live / replay"] == pytest.approx((later["live s"] / later["pipelined s"]).median(),
                                                              abs=1e-3)


def test_a_trace_the_sweep_cannot_answer_is_an_error(tmp_path, sweep):
    trace = pd.read_parquet(SITTING_4096)
    trace.loc[0, "config_key"] = "1,2,3"
    bad = tmp_path / SITTING_4096.name
    trace.to_parquet(bad)
    bad.with_suffix(".md").write_text(SITTING_4096.with_suffix(".md").read_text())
    with pytest.raises(ValueError, match=r"configs \['1,2,3'\] were not recorded in the sweep of 4096x4096x4096"):
        fidelity.batch_table(OVERLAPPED, "4096x4096x4096", bad, sweep)
    bad.with_suffix(".md").write_text("# a live search\n")
    with pytest.raises(ValueError, match="does not say how many compile workers the run had"):
        fidelity.batch_table(OVERLAPPED, "4096x4096x4096", bad, sweep)


def test_the_figure_has_a_panel_per_clock(sitting_4096):
    figure = fidelity.plot_replay_against_live(sitting_4096, set())
    assert [ax.get_title() for ax in figure.axes] == ["sequential clock", "pipelined clock"]
    assert len(figure.axes[1].collections) == 5  # later batches of two hosts, first batches of three kinds of set-up


def test_the_widened_live_runs_replay_on_the_widened_sweep_alone_and_their_live_medians_include_the_set_up():
    runs = widened.widened_runs(widened.WIDENED_LIVE)
    assert [path.parent.name for _, _, path in runs] == [
        *(f"lfbo_quick_seed{seed}" for seed in range(4)), *(f"lfbo_seed{seed}" for seed in range(3))]
    batches = fidelity.fidelity_table(runs, open_dataset(widened.WIDENED_DATASET))
    assert len(batches) == 38 and (batches["live s"] > 0).all() and (batches["pipelined s"] > 0).all()
    with pytest.raises(ValueError, match="were not recorded in the sweep"):  # the space before WIDEN lacks them
        fidelity.fidelity_table(runs[4:5], open_dataset(DATASET))
    medians = widened.live_medians(runs).set_index("strategy")
    assert list(medians.seeds) == [4, 3]
    lfbo = [summary_rows(pd.read_parquet(path)).iloc[0] for _, _, path in runs[4:]]
    assert medians.loc["lfbo", "s to 0.99x"] == pytest.approx(
        np.median([row["setup_s"] + row["s to 0.99x"] for row in lfbo]))
