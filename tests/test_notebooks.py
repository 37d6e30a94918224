"""The search-space and strategy notebooks run headless through papermill with tiny parameters and render their
figures and tables.

The strategy_comparison run writes a tiny study (2 strategies x 3 tasks x 2 seeds, budget 20) into a temporary
folder; sampled_configs then reads it, as `make report` does with the default study.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from papermill.exceptions import PapermillExecutionError

from tunebench import report
from tunebench.study_plan import StudyPlan

GEMM = "results/datasets/matmul_bfloat16_h100.parquet"
SOFTMAX = "results/datasets/softmax_bfloat16_h100.parquet"
KERNEL_TUNER_A100 = "../shared/datasets/kerneltuner/convolution_A100.json.gz"
TINY_STUDY = {"datasets": [GEMM, SOFTMAX, KERNEL_TUNER_A100], "shapes_per_dataset": 1, "strategies": ["random", "pattern"],
              "seeds": 2, "budget": 20}
FIGURE = re.compile(r"<img[^>]*src=\"data:image/png;base64,")  # an embedded figure (the page's CSS has a PNG too)
DATA_TABLE = re.compile(r"<table id=\"T_")  # a pandas Styler table (the run header's tables are not)


def kernel_tuner_cache() -> Path:
    path = report.REPO_ROOT.parent / "shared" / "datasets" / "kerneltuner" / "convolution_A100.json.gz"
    if not path.is_file():
        pytest.skip(f"the shared Kernel Tuner cache is not at {path}")
    return path


def render(name: str, out_dir: Path, parameters: dict) -> str:
    return report.run_notebook(report.NOTEBOOK_DIR / name, out_dir, parameters).read_text()


def test_the_default_reports_include_these_notebooks_study_first() -> None:
    order = list(report.DEFAULT_NOTEBOOKS)
    assert {"search_space.py", "strategy_comparison.py", "sampled_configs.py"} <= set(order)
    assert order.index("strategy_comparison.py") < order.index("sampled_configs.py"), "the study is written first"
    assert not (report.NOTEBOOK_DIR / "gemm_dataset.py").exists(), "search_space replaces it"
    assert sorted(path.name for path in report.NOTEBOOK_DIR.glob("*.py")) == sorted(order), "every notebook is a report"


def test_search_space_on_the_gemm_dataset(tmp_path: Path) -> None:
    text = render("search_space.py", tmp_path, {"max_shapes": 2})
    # latency spread, parameter effects, best vs vendor, roofline
    assert len(FIGURE.findall(text)) == 4
    assert len(DATA_TABLE.findall(text)) == 2, "status table and best config per shape"
    assert "No failures recorded" in text and "vendor library on 1 of 2 shapes" in text
    assert "Timing spread ((max - min) / median of a row" in text and "above 50 %: " in text


def test_search_space_on_a_kernel_tuner_cache_shows_where_failures_lie(tmp_path: Path) -> None:
    text = render("search_space.py", tmp_path, {"dataset": str(kernel_tuner_cache())})
    # latency spread, parameter effects, failures by parameter; no vendor, no roofline
    assert len(FIGURE.findall(text)) == 3
    assert "No failures recorded" not in text and "records no vendor library" in text
    assert "A roofline is drawn for GEMM datasets" in text


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Path]:
    kernel_tuner_cache()
    study_dir = tmp_path_factory.mktemp("studies")
    out_dir = tmp_path_factory.mktemp("reports")
    text = render("strategy_comparison.py", out_dir, {**TINY_STUDY, "study_dir": str(study_dir)})
    plan = StudyPlan.from_parameters({**report.read_parameters(report.NOTEBOOK_DIR / "strategy_comparison.py"),
                                      **TINY_STUDY})
    return text, study_dir, plan.path(study_dir)


def test_strategy_comparison_writes_its_study_and_renders_traces_and_tables(tiny_study) -> None:
    text, study_dir, trace_path = tiny_study
    assert trace_path.parent == study_dir and trace_path.is_file() and trace_path.with_suffix(".json").is_file()
    trace = pd.read_parquet(trace_path)
    assert set(trace["strategy"]) == {"random", "pattern"} and trace["task"].nunique() == 3
    assert trace.groupby(["strategy", "task", "seed"])["eval_index"].max().eq(20).all()
    # per task vs evaluations, per task vs seconds, aggregated, aggregated per kernel, how searches end, failure shares
    assert len(FIGURE.findall(text)) == 6
    assert len(DATA_TABLE.findall(text)) == 6, ("overview, per kernel, per-task evaluations, per-task seconds, how "
                                                "searches end, overhead")
    assert "How long a search runs, and what it ends with" in text
    assert "12 runs (2 strategies × 3 tasks × 2 seeds)" in text
    assert ">softmax</td>" in text and ">matmul</td>" in text, "the per-kernel table names each kernel"
    assert "NVIDIA A100-PCIE-40GB" in text and "NVIDIA H100 80GB HBM3" in text, "provenance of each dataset"
    assert "Traceback" not in text


def test_strategy_comparison_refuses_a_live_backend_with_directions(tmp_path: Path) -> None:
    with pytest.raises(PapermillExecutionError, match="NotImplementedError"):
        render("strategy_comparison.py", tmp_path, {**TINY_STUDY, "backend": "live", "study_dir": str(tmp_path)})
    text = (tmp_path / "strategy_comparison.html").read_text()
    assert "tunebench.measure.live.LiveEvaluator" in text and "tunebench.study.run_search" in text
    assert not list(tmp_path.glob("*.parquet")), "nothing was run"


def test_sampled_configs_reads_the_study_and_draws_pca_and_failures(tiny_study, tmp_path: Path) -> None:
    _, _, trace_path = tiny_study
    text = render("sampled_configs.py", tmp_path, {"study": str(trace_path), "task": "convolution_A100:4096x4096",
                                                   "seed": -1})
    # PCA coloured by strategy, PCA coloured by latency, failure shares
    assert len(FIGURE.findall(text)) == 3
    assert "is not there yet" not in text, "the given study was read, not run"
    with pytest.raises(PapermillExecutionError, match="ValueError"):
        render("sampled_configs.py", tmp_path, {"study": str(trace_path), "task": "no_such:1x1"})


def test_config_prediction_draws_efficiency_families_importances_and_traces(tmp_path: Path) -> None:
    text = render("config_prediction.py", tmp_path, {"fold_fraction": 0.1, "permutation_repeats": 1, "trace_shapes": 1,
                                                     "budget": 20, "importance_trees": 100})
    # efficiency CDFs (replay, re-timed side by side), permutation importances, warm vs cold traces, live traces
    assert len(FIGURE.findall(text)) == 7  # the live traces: one figure per group of the three
    assert len(DATA_TABLE.findall(text)) == 4, "the per-family and per-alignment table, a table per live group"
    assert "M &lt; 8" in text or "M < 8" in text
    assert ">hinted<" in text and ">odd<" in text, "the alignment classes"
    assert "median evals to 0.99 of run&#x27;s best" in text or "median evals to 0.99 of run's best" in text
    assert "warm:lfbo" in text, "the recorded live searches with a warm start"
    assert "real-model layers no dataset held" in text and "warm:lfbo:restart1" in text, "each group of live searches"
    assert "Traceback" not in text


def test_pipeline_selection_draws_winners_split_and_gains(tmp_path: Path) -> None:
    # A short pattern search per pipeline keeps the replay quick (the default's LFBO takes a minute here); the
    # headlines are computed whatever it finds.
    settings = {"strategy": "pattern", "evaluations_per_pipeline": 32, "leaders": 0, "transfer": False}
    text = render("pipeline_selection.py", tmp_path, {"autotune_settings": settings})
    # winners' map, preprocess/matmul split, MLP steps and gains
    assert len(FIGURE.findall(text)) == 3
    assert len(DATA_TABLE.findall(text)) == 4, "MLP steps and gains over the dispatch, the pass timed whole, ratios"
    assert "Fastest pipeline: " in text and "Preprocessing's share of the serial time" in text
    assert "MLP pass timed whole" in text and "pass / uncompressed pass" in text
    assert "The autotuned dispatch is " in text and "NVIDIA H100 80GB HBM3" in text
    assert "Traceback" not in text and "IProgress" not in text


def test_gemm_kernels_renders_the_sweep_replays_and_live_runs(tmp_path: Path) -> None:
    text = render("gemm_kernels.py", tmp_path, {"strategies": ["random", "pattern"], "replay_seeds": 1,
                                                 "replay_seconds": 20.0, "replay_workers": 1,
                                                 "replay_clock": "pipelined", "replay_startup_s": 10.0})
    # the sweep, the replays, the live runs of both kernels, the repeats at 4096^3, Helion side by side at three
    # shapes, replay against live; the pointer GEMM against cuBLAS per class of N and K (H100)
    assert len(FIGURE.findall(text)) == 9
    assert len(DATA_TABLE.findall(text)) == 15, ("sweep, failures, rounds, families (twice), split-K in one launch, the "
                                                 "race, replay summary, live table, repeats, Helion side by side (3), "
                                                 "later batches, first batches")
    assert "split, one launch vs cuBLAS" in text and "16x1024x8192" in text, "split-K in one launch against three"
    assert "vs the pointer GEMM&#x27;s fastest" in text or "vs the pointer GEMM's fastest" in text
    assert "36x616x13192" in text and "8192x5000x3000" in text, "the families side by side at the pointer GEMM's gaps"
    assert "pointer_gaps_h100.csv" in text and "race, on while within 10 %" in text
    assert "helion_full_LFBOTreeSearch" in text and "tunebench_matmul_lfbo" in text and "32x28672x8192" in text
    assert "lfbo, median of 5 seeds" in text and "4096x14336x4096" in text
    assert "median live / replay" in text and "host" in text and "median live - pipelined s" in text
    assert "replay_startup_s" in text and "Traceback" not in text
