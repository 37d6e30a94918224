"""The notebooks' figures and tables (tunebench.plots, space_plots, notebook_tables) and the replay study they share
(study_plan) on a small hand-made dataset and trace: what each draws, with units.

No notebook kernel is started here (tests/test_notebooks.py runs the notebooks).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tunebench import metrics, notebook_tables, plots, report, space_plots, study_plan  # noqa: E402
from tunebench.dataset_summary import best_with_value_fixed, spread_shapes  # noqa: E402
from tunebench.measure.dataset import Dataset  # noqa: E402
from tunebench.space import Ordinal, PowerOfTwo  # noqa: E402
from tunebench.study import TRACE_COLUMNS, Task, open_dataset  # noqa: E402

SHAPES = [(16, 64, 64), (64, 64, 128), (256, 128, 128)]
OPTIMUM_MS = (0.02, 0.05, 0.3)  # per shape
FASTEST_BLOCK_N = (64, 32, 128)  # per shape: the tasks differ, not only in scale
H100 = "NVIDIA H100 80GB HBM3"
STRATEGIES = ["alpha", "beta"]
SEEDS = 10


def small_dataset(gpu: str = H100, failures: bool = True, provenance: dict | None = None) -> Dataset:
    """18 configs per shape; with `failures`, BLOCK_M=64 with BLOCK_N=128 fails to compile (2 per shape).
    The fastest config has BLOCK_M=32, GROUP_M=1 and the shape's FASTEST_BLOCK_N; the vendor takes 0.9 of it."""
    rows = []
    for shape_index, shape in enumerate(SHAPES):
        for block_m in (16, 32, 64):
            for block_n in (32, 64, 128):
                for group_m in (1, 8):
                    failed = failures and block_m == 64 and block_n == 128
                    latency = OPTIMUM_MS[shape_index] * (1.0 + abs(block_m - 32) / 16 + (group_m == 8) * 0.25
                                                         + abs(block_n - FASTEST_BLOCK_N[shape_index]) / 32)
                    rows.append({"M": shape[0], "N": shape[1], "K": shape[2], "BLOCK_M": block_m,
                                 "BLOCK_N": block_n, "GROUP_M": group_m,
                                 "status": "compile_error" if failed else "ok",
                                 "latency_ms": math.nan if failed else latency,
                                 "repeats_ms": [] if failed else [latency], "compile_s": 1.0, "bench_s": 0.1,
                                 "error": "failed" if failed else ""})
    vendor = pd.DataFrame([{"M": m, "N": n, "K": k, "library": "torch.matmul (cuBLAS)", "latency_ms": 0.9 * best,
                            "repeats_ms": [0.9 * best]} for (m, n, k), best in zip(SHAPES, OPTIMUM_MS)])
    parameters = (PowerOfTwo("BLOCK_M", 16, 64), PowerOfTwo("BLOCK_N", 32, 128), Ordinal("GROUP_M", (1, 8)))
    return Dataset(kernel="matmul", dtype="bfloat16", gpu=gpu, shape_names=("M", "N", "K"), parameters=parameters,
                   measurements=pd.DataFrame(rows), vendor=vendor,
                   provenance={"gpu_name": gpu, "compile_workers": 1, **(provenance or {})})


DATASET = small_dataset()
TASKS = [Task("somewhere/small.parquet", shape) for shape in SHAPES]


def small_trace(dataset: Dataset = DATASET, budget: int = 12) -> pd.DataFrame:
    """Each strategy evaluates a seeded permutation of each task's configs; "alpha" starts at the fast end."""
    rows = []
    for task in TASKS:
        records = dataset.task(task.shape)
        keys = [plots.config_key_text(key) for key in
                records[list(dataset.parameter_names)].itertuples(index=False, name=None)]
        latency = records["latency_ms"].to_numpy()
        for strategy in STRATEGIES:
            for seed in range(SEEDS):
                order = np.random.default_rng([seed, STRATEGIES.index(strategy)]).permutation(len(keys))
                if strategy == "alpha":
                    order = np.r_[order[order == np.nanargmin(latency)], order[order != np.nanargmin(latency)]]
                best = math.inf
                for index, row in enumerate(order[:budget], start=1):
                    value = latency[row]
                    best = min(best, value) if np.isfinite(value) else best
                    rows.append({"strategy": strategy, "task": task.name, "seed": seed, "eval_index": index,
                                 "batch": index, "time_s": 1.1 * index, "strategy_s": 0.01 * index,
                                 "config_key": keys[row], "status": "ok" if np.isfinite(value) else "compile_error",
                                 "latency_ms": value, "best_ms": best})
    return pd.DataFrame(rows, columns=list(TRACE_COLUMNS))


def references(dataset: Dataset = DATASET) -> tuple[dict, dict, dict]:
    optima = {task.name: dataset.optimum_ms(task.shape) for task in TASKS}
    latencies = {task.name: np.nan_to_num(dataset.task(task.shape)["latency_ms"].to_numpy(), nan=np.inf)
                 for task in TASKS}
    return optima, latencies, {task.name: 1.1 for task in TASKS}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def strategy_lines(ax) -> dict[str, list]:
    return {name: [line for line in ax.lines if line.get_label() == name] for name in STRATEGIES}


def dashed_lines(ax) -> list:
    return [line for line in ax.lines if line.get_linestyle() == "--"]


# -- traces -------------------------------------------------------------------------------------------------------

def test_fraction_curves_are_the_median_over_seeds_with_the_order_statistic_interval() -> None:
    trace = small_trace()
    optima, _, _ = references()
    curves = plots.fraction_curves(trace, optima)
    task = TASKS[1].name
    at_five = trace[(trace["task"] == task) & (trace["strategy"] == "beta") & (trace["eval_index"] == 5)]
    expected = metrics.median_with_ci(optima[task] / at_five["best_ms"].to_numpy())
    row = curves[(curves["task"] == task) & (curves["strategy"] == "beta") & (curves["x"] == 5)].iloc[0]
    assert (row["median"], row["low"], row["high"]) == pytest.approx(expected)
    assert row["seeds"] == SEEDS and row["coverage"] == pytest.approx(metrics.median_ci_ranks(SEEDS)[2])
    alpha = curves[(curves["task"] == task) & (curves["strategy"] == "alpha")]
    assert np.allclose(alpha["median"], 1.0), "alpha evaluates the optimum first"


def test_per_task_figure_has_one_line_per_strategy_the_random_baseline_and_labelled_axes() -> None:
    trace = small_trace()
    optima, latencies, seconds = references()
    figure = plots.plot_fraction_per_task(trace, optima, latencies)
    assert len(figure.axes) == len(TASKS)
    for ax, task in zip(figure.axes, TASKS):
        assert ax.get_title() == task.name
        assert all(len(lines) == 1 for lines in strategy_lines(ax).values())
        assert ax.get_xlabel() == "unique evaluations (count, log scale)"
        (baseline,) = dashed_lines(ax)
        expected = metrics.random_fraction_over_evaluations(latencies[task.name], optima[task.name], 12)
        assert np.allclose(baseline.get_ydata(), expected)
    assert "fraction of optimum" in figure.axes[0].get_ylabel()
    legend_texts = [text.get_text() for text in figure.legends[0].get_texts()]
    assert plots.RANDOM_LABEL in legend_texts and any("95% CI of the median over 10 seeds" in text
                                                      for text in legend_texts)

    timed = plots.plot_fraction_per_task(trace, optima, latencies, over="seconds", seconds_per_evaluation=seconds)
    ax = timed.axes[0]
    assert ax.get_xlabel() == "simulated time (s, log scale)" and ax.get_xscale() == "log"
    (baseline,) = dashed_lines(ax)
    draws = np.minimum(np.floor(baseline.get_xdata() / 1.1 + 1e-9).astype(int), 12)
    assert np.allclose(baseline.get_ydata(), metrics.random_search_expected_fraction(
        latencies[TASKS[0].name], optima[TASKS[0].name], draws)), "random search on the clock, capped at the budget"


def test_seconds_view_needs_the_cost_of_an_evaluation() -> None:
    optima, latencies, _ = references()
    with pytest.raises(ValueError, match="seconds_per_evaluation"):
        plots.plot_fraction_per_task(small_trace(), optima, latencies, over="seconds")


def test_aggregated_figure_is_the_median_over_tasks_of_the_per_task_medians() -> None:
    trace = small_trace()
    optima, latencies, seconds = references()
    figure = plots.plot_fraction_aggregated(trace, optima, latencies, seconds)
    by_evaluations, by_time = figure.axes
    per_task = plots.fraction_curves(trace, optima)
    expected = per_task[per_task["strategy"] == "beta"].groupby("x")["median"].median().to_numpy()
    (beta,) = strategy_lines(by_evaluations)["beta"]
    assert np.allclose(beta.get_ydata(), expected)
    assert all(len(lines) == 1 for lines in strategy_lines(by_time).values())
    assert "evaluations' worth of time" in by_time.get_xlabel()
    assert any("25–75 % of the 3 tasks' medians" in text.get_text() for text in figure.legends[0].get_texts())


def test_aggregated_figure_per_kernel_pools_each_kernels_tasks_alone() -> None:
    trace = small_trace()
    optima, latencies, seconds = references()
    by_kernel = {"small": [TASKS[0].name], "large": [TASKS[1].name, TASKS[2].name]}
    figure = plots.plot_fraction_aggregated(trace, optima, latencies, seconds, by_kernel)
    assert len(figure.axes) == 4, "a row of (evaluations, time) per kernel"
    small, _, large, _ = figure.axes  # a row per kernel in the given order, axes listed row by row
    assert small.get_title() == "small (1 task)\nagainst unique evaluations"
    assert large.get_title() == "large (2 tasks)\nagainst unique evaluations"
    per_task = plots.fraction_curves(trace, optima)
    beta = per_task[(per_task["strategy"] == "beta") & per_task["task"].isin(by_kernel["large"])]
    (line,) = strategy_lines(large)["beta"]
    assert np.allclose(line.get_ydata(), beta.groupby("x")["median"].median().to_numpy())
    with pytest.raises(ValueError, match="no_such:1x1"):
        plots.plot_fraction_aggregated(trace, optima, latencies, seconds, {"small": ["no_such:1x1"]})


# -- PCA ----------------------------------------------------------------------------------------------------------

def test_pca_is_fitted_on_the_whole_space_and_sampled_configs_are_placed_in_that_fit() -> None:
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler

    trace = small_trace(budget=5)
    space = DATASET.space(TASKS[0].shape)
    pca = plots.config_pca(space)
    encoded = space.encode(space.enumerate())
    reference = PCA(2, random_state=0).fit_transform(StandardScaler().fit_transform(encoded))
    assert len(pca.keys) == len(space.enumerate()) == 18
    assert np.allclose(np.abs(pca.coordinates), np.abs(reference))

    figure = plots.plot_pca_by_strategy(trace, TASKS[0], DATASET, seed=3)
    assert len(figure.axes) == len(STRATEGIES)
    ax = figure.axes[1]
    background, _, sampled = ax.collections
    assert len(background.get_offsets()) == 18, "the whole valid space in the background"
    keys = trace[(trace["task"] == TASKS[0].name) & (trace["strategy"] == "beta")
                 & (trace["seed"] == 3)]["config_key"].tolist()
    assert np.allclose(sampled.get_offsets(), pca.coordinates[pca.locate(keys)])
    sampled_configs = [dict(zip(space.names, map(int, key.split(",")))) for key in keys]
    refit = PCA(2, random_state=0).fit_transform(StandardScaler().fit_transform(space.encode(sampled_configs)))
    assert not np.allclose(np.abs(sampled.get_offsets()), np.abs(refit)), "not refitted on the sample"
    assert "PC 1" in ax.get_xlabel() and "% of variance" in ax.get_xlabel()
    assert ax.get_title() == "beta (5 configs)"


def test_pca_by_latency_colours_relative_to_the_optimum_on_a_log_scale_and_marks_failures() -> None:
    trace = small_trace(budget=18)
    figure = plots.plot_pca_by_latency(trace, TASKS[0], DATASET, seed=0)
    panel, colorbar = figure.axes[0], figure.axes[-1]
    coloured = panel.collections[2]
    assert isinstance(coloured.norm, matplotlib.colors.LogNorm) and coloured.norm.vmin == 1.0
    assert coloured.get_array().min() == pytest.approx(1.0), "every config evaluated: the optimum is 1×"
    crosses = panel.collections[3]
    assert len(crosses.get_offsets()) == 2, "the two failing configs"
    assert "latency / optimum" in colorbar.get_ylabel()


def test_pca_rejects_a_task_or_strategy_missing_from_the_trace() -> None:
    trace = small_trace()
    with pytest.raises(ValueError, match="not in the trace"):
        plots.plot_pca_by_strategy(trace, Task("x/other.parquet", SHAPES[0]), DATASET)
    with pytest.raises(ValueError, match=r"\['gamma'\] have no runs"):
        plots.plot_pca_by_strategy(trace, TASKS[0], DATASET, strategies=["gamma"])


# -- failures -----------------------------------------------------------------------------------------------------

def test_failure_share_counts_failed_evaluations_per_dataset_and_strategy() -> None:
    trace = small_trace(budget=18)  # every config: 2 of 18 fail
    table = plots.failure_shares(trace)
    assert set(table["dataset"]) == {"small"}
    assert table["share"].tolist() == pytest.approx([2 / 18, 2 / 18])
    _, latencies, _ = references()
    ax = plots.plot_failure_share(trace, latencies).axes[0]
    assert [patch.get_height() for patch in ax.patches] == pytest.approx([2 / 18, 2 / 18])
    (space_share,) = [collection for collection in ax.collections
                      if isinstance(collection, matplotlib.collections.LineCollection)]
    assert space_share.get_segments()[0][0][1] == pytest.approx(2 / 18)
    assert ax.get_ylabel() == "evaluations on failing configs (%)"


# -- search-space views -------------------------------------------------------------------------------------------

def test_parameter_effects_show_every_varying_parameter_and_the_best_with_each_value_fixed() -> None:
    best = best_with_value_fixed(DATASET, "BLOCK_M")
    # Per shape, the best with BLOCK_M=16 is 1 + |16 - 32| / 16 times the best, with 64: 1 + |64 - 32| / 16 (and
    # 5 on the shape whose fastest BLOCK_N, 128, fails with BLOCK_M=64; the median over shapes is 3).
    assert best.set_index("BLOCK_M")["relative_best"].to_dict() == pytest.approx({16: 2.0, 32: 1.0, 64: 3.0})
    figure = space_plots.plot_parameter_effects(DATASET)
    assert [ax.get_title() for ax in figure.axes] == ["BLOCK_M", "BLOCK_N", "GROUP_M"]
    ax = figure.axes[0]
    assert ax.get_yscale() == "log" and ax.get_xlabel() == "BLOCK_M (value)" and "log scale" in ax.get_ylabel()
    (diamonds,) = [line for line in ax.lines if line.get_marker() == "D"]
    assert diamonds.get_ydata().tolist() == pytest.approx([2.0, 1.0, 3.0])


def test_failures_by_parameter_stack_the_failing_share_of_each_value() -> None:
    figure = space_plots.plot_failures_by_parameter(DATASET)
    block_m = figure.axes[0]
    assert [patch.get_height() for patch in block_m.patches] == pytest.approx([0, 0, 4 / 12])
    assert block_m.get_ylabel() == "recorded configs failing (%)"
    with pytest.raises(ValueError, match="no failures"):
        space_plots.plot_failures_by_parameter(small_dataset(failures=False))


def test_roofline_uses_gemm_flops_and_bytes_the_measured_vendor_peak_and_a_labelled_bandwidth() -> None:
    points = space_plots.roofline_points(DATASET)
    m, n, k = SHAPES[2]
    assert points.loc[2, "intensity"] == pytest.approx(2 * m * n * k / (2 * (m * k + k * n + m * n)))
    assert points.loc[2, "vendor_tflops"] == pytest.approx(2 * m * n * k / (0.9 * 0.3e-3) / 1e12)
    ax = space_plots.plot_roofline(DATASET).axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlabel().startswith("arithmetic intensity (FLOP/byte") and ax.get_ylabel() == "throughput (TFLOP/s)"
    labels = [text.get_text() for text in ax.figure.legends[0].get_texts()]
    peak = points["vendor_tflops"].max()
    assert any(f"{peak:.0f} TFLOP/s" in label and "measured vendor peak" in label for label in labels)
    assert any("3.35 TB/s: H100 SXM datasheet HBM3 bandwidth" in label for label in labels)
    assert {text.get_text() for text in ax.texts} == {"16×64×64", "64×64×128", "256×128×128"}

    unknown = space_plots.plot_roofline(small_dataset(gpu="Some GPU")).legends[0]
    assert not any("memory roof" in text.get_text() for text in unknown.get_texts())
    measured = small_dataset(gpu="Some GPU", provenance={space_plots.MEASURED_BANDWIDTH_KEY: 2.0e12})
    texts = [text.get_text() for text in space_plots.plot_roofline(measured).legends[0].get_texts()]
    assert any("2.00 TB/s: measured bandwidth" in text for text in texts)


# -- tables -------------------------------------------------------------------------------------------------------

def test_methodology_tables_show_medians_with_intervals_and_never_reached_as_infinity() -> None:
    trace = small_trace()
    optima, latencies, seconds = references()
    summary = metrics.summarize(trace, optima, latencies, budgets=(5, 12), seconds_per_evaluation=seconds)
    order = [TASKS[2].name, TASKS[0].name, TASKS[1].name]
    evals = notebook_tables.methodology_table(summary, kind="evals", tasks=order, strategies=["beta", "alpha"])
    assert evals[["task", "strategy"]].values.tolist()[:3] == [[order[0], "beta"], [order[0], "alpha"],
                                                               [order[1], "beta"]]
    alpha = evals[(evals["strategy"] == "alpha")].iloc[0]
    assert alpha["evals to 0.99"] == "1 [1, 1]" and alpha["fraction at 5"] == "1.000"
    assert "∞" in " ".join(evals.loc[evals["strategy"] == "beta", "evals to 0.99"])
    seconds_table = notebook_tables.methodology_table(summary, kind="seconds")
    assert seconds_table.loc[seconds_table["strategy"] == "alpha", "seconds to 0.99"].iloc[0] == "1.1 [1.1, 1.1]"
    overview = notebook_tables.overview_table(summary)
    assert overview["strategy"].tolist() == ["alpha", "beta"], "best mean score first"
    beta = overview.set_index("strategy").loc["beta"]
    # beta's median seed never gets there, but restarting its runs that stop short does, at a cost
    assert (beta["s to 0.99"], beta["runs reaching 0.99"]) == ("∞", "47%")
    expected = summary.loc[summary["strategy"] == "beta", "ert_seconds_to_0.99"].median()
    assert beta["s to 0.99, restarted when it stops"] == f"{expected:.1f}" and math.isfinite(expected)


def test_overview_per_kernel_is_the_overview_of_each_kernels_tasks() -> None:
    trace = small_trace()
    optima, latencies, seconds = references()
    summary = metrics.summarize(trace, optima, latencies, budgets=(5, 12), seconds_per_evaluation=seconds)
    by_kernel = {"small": [TASKS[0].name], "large": [TASKS[1].name, TASKS[2].name]}
    table = notebook_tables.overview_table(summary, by_kernel)
    assert table.columns[0] == "kernel" and table["kernel"].tolist() == ["small", "small", "large", "large"]
    large = notebook_tables.overview_table(summary[summary["task"].isin(by_kernel["large"])])
    pd.testing.assert_frame_equal(table[table["kernel"] == "large"].drop(columns="kernel").reset_index(drop=True),
                                  large)
    assert (table.loc[table["kernel"] == "large", "tasks"] == 2).all()


def test_overhead_table_is_cpu_time_per_ask() -> None:
    table = notebook_tables.overhead_table(small_trace()).set_index("strategy")
    assert table.loc["alpha", "CPU ms per ask"] == pytest.approx(10.0)
    assert table.loc["alpha", "share of simulated time"] == pytest.approx(0.12 / 13.2)


def _ends_summary() -> pd.DataFrame:
    """Two tasks, one ten times dearer per evaluation; `stops` ends on its own, `budget` runs to the budget."""
    return pd.DataFrame({"strategy": ["stops", "stops", "budget", "budget"], "task": ["cheap", "dear"] * 2,
                         "ended_on_its_own": [1.0, 0.8, 0.0, 0.0], "run_evals": [100.0, 300.0, 400.0, 400.0],
                         "run_seconds": [2.0, 40.0, 4.0, 50.0], "success_0.99": [1.0, 0.5, 0.2, 0.4]})


def test_search_ends_are_medians_over_tasks_with_seconds_in_evaluations() -> None:
    table = plots.search_ends(_ends_summary(), {"cheap": 0.01, "dear": 0.1}).set_index("strategy")
    assert table.loc["stops"].tolist() == pytest.approx([0.9, 200.0, 300.0, 0.75])  # 200 and 400 evaluations' worth
    assert table.loc["budget"].tolist() == pytest.approx([0.0, 400.0, 450.0, 0.3])
    with pytest.raises(ValueError, match=r"seconds_per_evaluation lacks tasks \['dear'\]"):
        plots.search_ends(_ends_summary(), {"cheap": 0.01})


def test_search_ends_plot_fills_the_strategies_that_stop_on_their_own() -> None:
    figure = plots.plot_search_ends(_ends_summary(), {"cheap": 0.01, "dear": 0.1})
    for ax in figure.axes:
        filled = [len(collection.get_facecolors()) and collection.get_facecolors()[0][3] > 0
                  for collection in ax.collections]
        assert filled == [True, False], "stops (ended on its own) filled, budget (cut by it) hollow"
        assert {text.get_text() for text in ax.texts} >= {"stops", "budget"}
    plt.close(figure)


# -- the study two notebooks share --------------------------------------------------------------------------------

def test_spread_shapes_takes_first_last_and_evenly_between() -> None:
    shapes = [(m, 4096, 4096) for m in (1, 8, 16, 64, 128, 1024, 8192)]
    assert spread_shapes(shapes, 3) == [(1, 4096, 4096), (64, 4096, 4096), (8192, 4096, 4096)]
    assert spread_shapes(shapes, 0) == shapes and spread_shapes(list(reversed(shapes)), 9) == shapes


def test_study_plan_name_follows_every_parameter_that_changes_the_traces() -> None:
    plan = study_plan.StudyPlan(("results/datasets/a.parquet",), 3, ("random", "lfbo"), 10, 200)
    assert plan.name == study_plan.StudyPlan(("elsewhere/a.parquet",), 3, ("random", "lfbo"), 10, 200).name
    for changed in (dict(budget=100), dict(seeds=5), dict(shapes_per_dataset=0), dict(mode="noisy"),
                    dict(strategies=("random",)), dict(datasets=("b.parquet",))):
        other = study_plan.StudyPlan(**{**plan.__dict__, **changed})
        assert other.name != plan.name, changed
    assert plan.path("results/studies") == report.REPO_ROOT / "results" / "studies" / f"{plan.name}.parquet"


def test_a_noisy_study_is_judged_by_the_recorded_medians_of_what_each_run_would_deploy(tmp_path) -> None:
    dataset = "../shared/datasets/kerneltuner/convolution_A4000.json.gz"
    if not report.resolve_dataset(dataset).is_file():
        pytest.skip(f"Kernel Tuner cache not found at {dataset}")
    plan = study_plan.StudyPlan((dataset,), 1, ("random",), 4, 60, mode="noisy")
    judged = plan.run(tmp_path, workers=1)
    drawn = pd.read_parquet(plan.path(tmp_path))  # the trace table keeps what each run was told
    optimum = open_dataset(report.resolve_dataset(dataset)).optimum_ms(plan.tasks()[0].shape)
    assert (judged.best_ms >= optimum).all() and (judged.best_ms != drawn.best_ms).any()
    pd.testing.assert_frame_equal(judged.drop(columns="best_ms"), drawn.drop(columns="best_ms"))


def test_sampled_configs_default_study_is_strategy_comparisons_default() -> None:
    defaults = report.read_parameters(report.NOTEBOOK_DIR / "strategy_comparison.py")
    plan, study_dir = study_plan.default_study_plan()
    assert plan == study_plan.StudyPlan.from_parameters(defaults) and study_dir == defaults["study_dir"]
    assert "optuna_gp" not in plan.strategies and plan.seeds >= 10


def test_live_backend_points_at_the_live_evaluator_and_bad_settings_are_errors() -> None:
    with pytest.raises(NotImplementedError, match=r"LiveEvaluator.*run_search"):
        study_plan.StudyPlan(("a.parquet",), 1, ("random",), 2, 20, backend="live")
    with pytest.raises(ValueError, match="unknown mode 'loud'"):
        study_plan.StudyPlan(("a.parquet",), 1, ("random",), 2, 20, mode="loud")


def test_resolve_dataset_reaches_the_shared_folder_beside_the_repository() -> None:
    shared = report.REPO_ROOT.parent / "shared"
    assert report.resolve_dataset("../shared/datasets/x.json.gz") == (shared / "datasets" / "x.json.gz").resolve()
    assert report.resolve_dataset("/abs/y.parquet") == Path("/abs/y.parquet")


def test_efficiency_cdf_draws_one_curve_per_picker_and_counts_shapes_left_of_the_axis():
    figure, axis = plt.subplots()
    plots.plot_efficiency_cdf(axis, {"a": [0.5, 0.9, 1.0], "b": [0.95, 1.0]}, 0.6)
    assert [line.get_label() for line in axis.get_lines() if not line.get_label().startswith("_")] == ["a", "b"]
    assert axis.get_title() == "shapes below 60% (left of the axis): a 1"
    with pytest.raises(ValueError, match="left must lie in \\(0, 1\\), got 1.2"):
        plots.plot_efficiency_cdf(axis, {}, 1.2)
    plt.close(figure)


def test_live_traces_draw_each_strategys_fraction_of_the_runs_best_against_wall_seconds() -> None:
    trace = pd.DataFrame({"strategy": ["cold", "cold", "warm:cold"], "time_s": [1.0, 2.0, 0.5],
                          "best_ms": [2.0, 1.0, 1.25]})
    figure = plots.plot_live_traces({"a": trace, "b": trace.assign(best_ms=[4.0, 4.0, 1.0])})
    first, second = figure.axes
    assert [ax.get_title() for ax in figure.axes] == ["a", "b"] and "seconds" in first.get_xlabel()
    cold, warm = first.lines[:2]
    assert list(cold.get_ydata()) == [0.5, 1.0] and list(warm.get_ydata()) == [0.8]
    assert list(second.lines[0].get_ydata()) == [0.25, 0.25] and list(second.lines[1].get_ydata()) == [1.0]
    assert first.lines[2].get_ydata()[0] == 0.99, "the mark"
    plt.close(figure)


def test_tables_show_floats_to_four_digits_never_as_infinity_and_wrap_only_the_columns_asked() -> None:
    table = pd.DataFrame({"ratio": [0.978, 1.0, np.inf], "seconds": [184.0, np.nan, 0.02761],
                          "config": ["BLOCK_M=64, BLOCK_N=128", "x", "y"], "runs": [3, 4, 5], "share": [0.5, 0.25, 1.0]})
    html = notebook_tables.table_style(table, {"share": "{:.0%}"}, wrap=["config"]).to_html()
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", html)
    assert cells == ["0.978", "184", "BLOCK_M=64, BLOCK_N=128", "3", "50%",
                     "1", "", "x", "4", "25%",
                     "∞", "0.02761", "y", "5", "100%"]
    assert html.count("white-space: normal !important") == 1, "one rule for the config column's cells"
    assert "white-space: nowrap" in html
    assert "!important" not in notebook_tables.table_style(table).to_html()
