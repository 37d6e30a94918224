"""The pipeline-selection figures and tables (tunebench.selection_plots) on hand-made latencies: what each draws, in
which units. No notebook kernel is started here (tests/test_notebooks.py runs the notebook)."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402

from tunebench import selection_plots  # noqa: E402
from tunebench.kernels.compressed_matmul.pipelines import PIPELINES  # noqa: E402
from tunebench.kernels.compressed_matmul.selection_study import mlp_steps, winners  # noqa: E402

BATCHES = (1, 64, 1024)
PROJECTIONS = ("gate", "up", "down")
# Step latencies (ms) per batch: direct_palette wins at 1 and 64, decode_exponents at 1024.
STEPS_MS = {1: (0.6, 0.3, 0.32, 0.15), 64: (1.2, 0.31, 0.35, 0.19), 1024: (0.96, 0.84, 1.8, 1.3)}


def latencies() -> pd.DataFrame:
    """selection_study.projection_latencies' layout; the dispatch picks direct_palette everywhere, so it misses the
    winner at batch 1024."""
    rows = []
    for batch, steps in STEPS_MS.items():
        for scale, name in zip((1.0, 1.0, 1.2), PROJECTIONS):
            fixed = {pipeline: ms * scale for pipeline, ms in zip(PIPELINES, steps)}
            rows.append({"batch": batch, "projection": name, **fixed, "dispatch": fixed["direct_palette"],
                         "config": {"pipeline": "direct_palette"}, "vendor": 0.05 * scale})
    return pd.DataFrame(rows)


def split() -> pd.DataFrame:
    """selection_study.MeasuredSplit.table's layout: preprocess 0.3, 0.2, 0.1, 0 ms; matmul 0.1 ms x batch / 64."""
    rows = [{"projection": name, "batch": batch, "pipeline": pipeline, "preprocess_ms": preprocess,
             "matmul_ms": 0.1 * batch / 64, "serial_ms": preprocess + 0.1 * batch / 64, "overlapped_ms": 1.0,
             "overlapped_sm_percent": 100, "cublas_ms": 0.05}
            for name in PROJECTIONS for batch in BATCHES
            for pipeline, preprocess in zip(PIPELINES, (0.3, 0.2, 0.1, 0.0))]
    return pd.DataFrame(rows)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_pipelines_keep_one_distinct_colour_in_every_figure() -> None:
    colors = selection_plots.pipeline_colors()
    assert list(colors) == list(PIPELINES) and len(set(colors.values())) == len(PIPELINES)


def test_winners_map_colours_each_cell_by_its_winner_and_labels_the_margin() -> None:
    figure = selection_plots.plot_winners(winners(latencies()))
    ax = figure.axes[0]
    index = ax.images[0].get_array()
    assert index.shape == (len(PROJECTIONS), len(BATCHES))
    assert [PIPELINES[i] for i in index[:, 0]] == ["direct_palette"] * 3
    assert [PIPELINES[i] for i in index[:, 2]] == ["decode_exponents"] * 3
    texts = [text.get_text() for text in ax.texts]
    assert len(texts) == len(PROJECTIONS) * len(BATCHES)
    assert texts[0] == f"direct_palette\n{0.3 / 0.15:.2f}× over\ndecode_exponents"
    assert texts[2] == f"decode_exponents\n{0.96 / 0.84:.2f}× over\ndecode_then_cublas\n(dispatch: direct_palette)"
    assert [label.get_text() for label in ax.get_xticklabels()] == ["1", "64", "1024"]
    assert [label.get_text() for label in ax.get_yticklabels()] == list(PROJECTIONS)
    assert ax.get_xlabel() == "batch size (rows of x)" and "margin" in ax.get_title()
    assert [text.get_text() for text in figure.legends[0].get_texts()] == ["decode_exponents", "direct_palette"]


def test_split_stacks_matmul_on_preprocess_in_microseconds_with_cublas_marked() -> None:
    figure = selection_plots.plot_split(split(), PROJECTIONS)
    assert len(figure.axes) == len(PROJECTIONS)
    for ax, name in zip(figure.axes, PROJECTIONS):
        assert ax.get_title().startswith(f"{name}: ") and ax.get_ylabel() == "time (µs)"
        bars = ax.patches
        assert len(bars) == 2 * len(PIPELINES) * len(BATCHES)
        # Per pipeline: its preprocess bars (one per batch), then its matmul bars on top of them.
        preprocess, matmul = bars[:len(BATCHES)], bars[len(BATCHES):2 * len(BATCHES)]
        assert [bar.get_height() for bar in preprocess] == pytest.approx([300.0] * len(BATCHES))
        assert [bar.get_height() for bar in matmul] == pytest.approx([100 * b / 64 for b in BATCHES])
        assert [bar.get_y() for bar in matmul] == pytest.approx([300.0] * len(BATCHES))
        direct_preprocess = bars[6 * len(BATCHES):7 * len(BATCHES)]
        assert [bar.get_height() for bar in direct_preprocess] == [0.0] * len(BATCHES)
        cublas = [c for c in ax.collections if isinstance(c, LineCollection)][0]
        assert [segment[0][1] for segment in cublas.get_segments()] == pytest.approx([50.0] * len(BATCHES))
    assert figure.axes[-1].get_xlabel() == "batch size (rows of x)"
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert legend[:len(PIPELINES)] == list(PIPELINES) and "uncompressed cuBLAS" in legend


def test_mlp_steps_figure_draws_steps_in_microseconds_and_gains_over_the_dispatch() -> None:
    steps = mlp_steps(latencies())
    figure = selection_plots.plot_mlp_steps(steps)
    left, right = figure.axes
    lines = {line.get_label(): line for line in left.get_lines()}
    assert list(lines) == [*(f"always {p}" for p in PIPELINES), "autotuned dispatch",
                           "uncompressed torch.matmul (cuBLAS)"]
    assert list(lines["always decode_exponents"].get_xdata()) == list(BATCHES)
    assert lines["always decode_exponents"].get_ydata() == pytest.approx(steps["decode_exponents"] * 1000)
    assert lines["autotuned dispatch"].get_ydata() == pytest.approx(steps["dispatch"] * 1000)
    gains = {line.get_label(): line.get_ydata() for line in right.get_lines() if not line.get_label().startswith("_")}
    assert gains["always direct_palette"] == pytest.approx([1.0, 1.0, 1.0])
    assert gains["always decode_exponents"][-1] == pytest.approx(1 / 1.3 * 0.84)
    assert gains["uncompressed torch.matmul (cuBLAS)"] == pytest.approx(steps["vendor"] / steps["dispatch"])
    assert "µs" in left.get_ylabel() and left.get_yscale() == right.get_yscale() == "log"
    assert left.get_xscale() == "log" and left.get_xlabel() == right.get_xlabel() == "batch size (rows of x)"
    assert "dispatch" in right.get_title()


def test_tables_show_the_steps_in_microseconds_and_the_gains() -> None:
    steps = mlp_steps(latencies())
    table = selection_plots.steps_table(steps)
    assert list(table.columns) == ["batch", *PIPELINES, "autotuned dispatch", "torch.matmul (uncompressed)",
                                   "fastest fixed"]
    assert table["decode_then_cublas"].tolist() == pytest.approx([0.6 * 3.2 * 1000, 1.2 * 3.2 * 1000,
                                                                   0.96 * 3.2 * 1000])
    assert table["fastest fixed"].tolist() == ["direct_palette", "direct_palette", "decode_exponents"]
    gains = selection_plots.gains_table(steps)
    assert list(gains.columns) == ["batch", *PIPELINES, "torch.matmul (uncompressed)"]
    assert gains["direct_palette"].tolist() == pytest.approx([1.0, 1.0, 1.0])
    html = selection_plots.style_table(gains, "a caption", "{:.2f}×").to_html()
    assert "a caption" in html and "1.00×" in html and np.isfinite(gains.iloc[:, 1:].to_numpy()).all()
