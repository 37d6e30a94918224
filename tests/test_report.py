"""Headless notebook reports: parameter checks, the search-space notebook rendered to HTML, the index, summaries.

Four kernels are started in all (the search-space notebook ok and failing, a cell timeout, the kernel's sockets): each
costs seconds.
"""

from __future__ import annotations

import dataclasses
import html
import math
import re
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from papermill.exceptions import PapermillExecutionError

from tunebench import report
from tunebench.kernels import get_kernel, kernel_source_sha256
from tunebench.dataset_summary import (best_per_shape, first_shapes, provenance_line, shape_label, sittings_table,
                                      status_shares)
from tunebench.measure.dataset import SITTING, Dataset, load_dataset, save_dataset
from tunebench.space_plots import plot_best_vs_vendor, plot_latency_distributions
from tunebench.space import Ordinal, PowerOfTwo

NOTEBOOK = report.NOTEBOOK_DIR / "search_space.py"
SHAPES = [(16, 1024, 1024), (128, 2048, 1024), (4096, 4096, 4096)]
GPU = "Test GPU 80GB"
EMBEDDED_PNG = "data:image/png;base64,"


def small_dataset() -> Dataset:
    """Three shapes x eight configs with every kind of status, and a vendor row per shape."""
    rows = []
    for shape_index, shape in enumerate(SHAPES):
        for config_index, (block_m, block_n, group_m) in enumerate(
                (m, n, g) for m in (32, 64) for n in (64, 128) for g in (1, 8)):
            status = ("ok", "ok", "ok", "ok", "compile_error", "out_of_resources", "timeout", "ok")[config_index]
            # Every shape's best config is the last, (64, 128, 8); the vendor is 4/3 slower.
            latency = (1 + shape_index) * (1.0 + 0.5 * config_index) if config_index < 7 else 0.9 * (1 + shape_index)
            ok = status == "ok"
            rows.append({"M": shape[0], "N": shape[1], "K": shape[2], "BLOCK_M": block_m, "BLOCK_N": block_n,
                         "GROUP_M": group_m, "status": status, "latency_ms": latency if ok else math.nan,
                         "repeats_ms": [latency, latency * 1.01] if ok else [], "compile_s": 1.5, "bench_s": 0.2,
                         "error": "" if ok else status})
    vendor = pd.DataFrame([{"M": m, "N": n, "K": k, "library": "torch.matmul (cuBLAS)", "latency_ms": 1.2 * (1 + i),
                            "repeats_ms": [1.2 * (1 + i)]} for i, (m, n, k) in enumerate(SHAPES)])
    parameters = (PowerOfTwo("BLOCK_M", 16, 256), PowerOfTwo("BLOCK_N", 32, 256), Ordinal("GROUP_M", (1, 8)))
    return Dataset(kernel="matmul", dtype="bfloat16", gpu=GPU, shape_names=("M", "N", "K"), parameters=parameters,
                   measurements=pd.DataFrame(rows), vendor=vendor,
                   provenance={"gpu_name": GPU, "driver": "999.1", "timing": "cuda events, median of 2"})


@pytest.fixture(scope="module")
def dataset_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("datasets") / "matmul_test.parquet"
    save_dataset(small_dataset(), path)
    return path


@pytest.fixture(scope="module")
def ok_run(dataset_file: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    """The real notebook on the small dataset, limited to two shapes, through build_reports."""
    out_dir = tmp_path_factory.mktemp("reports")
    failures = report.build_reports([NOTEBOOK], out_dir, {"dataset": str(dataset_file), "max_shapes": 2})
    return failures, out_dir


def write_notebook(path: Path, parameters_source: str) -> Path:
    path.write_text(f'# %%\nimport math\n\n# %% tags=["parameters"]\n{parameters_source}\n\n# %%\nprint(rate)\n')
    return path


# -- parameters ------------------------------------------------------------------------------------

def test_read_parameters_of_the_search_space_notebook() -> None:
    assert report.read_parameters(NOTEBOOK) == {"dataset": "results/datasets/matmul_bfloat16_h100.parquet",
                                                "max_shapes": 0}


def test_misspelled_parameter_is_an_error_naming_it_and_the_allowed_names() -> None:
    with pytest.raises(report.ParameterError, match=r"unknown parameter 'datset' \(did you mean 'dataset'\?\)"
                                                     r".*allowed: dataset, max_shapes"):
        report.check_parameters(NOTEBOOK, {"datset": "x.parquet"})


def test_mistyped_parameter_is_an_error_naming_it_and_both_types() -> None:
    with pytest.raises(report.ParameterError, match=r"'max_shapes'.*expects int.*got str '3'"):
        report.check_parameters(NOTEBOOK, {"max_shapes": "3"})
    with pytest.raises(report.ParameterError, match=r"'max_shapes'.*expects int.*got bool"):
        report.check_parameters(NOTEBOOK, {"max_shapes": True})


def test_int_is_a_float_and_a_none_default_takes_anything(tmp_path: Path) -> None:
    notebook = write_notebook(tmp_path / "n.py", "rate = 0.5  # a share\nlabel: str = None")
    assert report.check_parameters(notebook, {"rate": 1, "label": [1, 2]}) == {"rate": 1, "label": [1, 2]}
    with pytest.raises(report.ParameterError, match="'rate'.*expects float.*got str"):
        report.check_parameters(notebook, {"rate": "fast"})


@pytest.mark.parametrize("source, message", [
    ("rate = math.pi", r"'rate' must default to a literal, not 'math.pi'"),
    ("rate = 0.5\nprint(rate)", r"only `name = literal` lines, not 'print\(rate\)'"),
    ("rate, other = 1, 2", r"only `name = literal` lines"),
])
def test_parameters_cell_holds_only_literal_assignments(tmp_path: Path, source: str, message: str) -> None:
    with pytest.raises(report.ParameterError, match=message):
        report.read_parameters(write_notebook(tmp_path / "n.py", source))


def test_exactly_one_parameters_cell(tmp_path: Path) -> None:
    path = tmp_path / "two.py"
    path.write_text('# %% tags=["parameters"]\na = 1\n\n# %% tags=["parameters"]\nb = 2\n')
    with pytest.raises(report.ParameterError, match="exactly one cell tagged 'parameters', found 2"):
        report.read_parameters(path)


def test_run_notebook_rejects_a_misspelled_parameter_before_running(tmp_path: Path) -> None:
    with pytest.raises(report.ParameterError, match="max_shape"):
        report.run_notebook(NOTEBOOK, tmp_path, {"max_shape": 1})
    assert not list(tmp_path.iterdir())


# -- the rendered search-space report ----------------------------------------------------------------------

def test_report_renders_figures_header_and_no_code(ok_run: tuple[int, Path], dataset_file: Path) -> None:
    failures, out_dir = ok_run
    assert failures == 0
    text = (out_dir / "search_space.html").read_text()
    assert text.count(EMBEDDED_PNG) >= 2
    assert not re.search(r"<img[^>]+src=['\"](?!data:)", text), "every image is embedded"
    header = text[text.index("tunebench-run-header"):]
    assert "Parameters" in header and "max_shapes" in header and html.escape(str(dataset_file)) in header
    assert "Data provenance" in header and GPU in header and "999.1" in header
    assert "hl-ipython3" not in text and "load_dataset" not in text, "code input is hidden"
    assert "vendor library on 2 of 2 shapes" in text, "max_shapes=2 was applied"
    assert (out_dir / "search_space.ipynb").exists()


def test_index_links_each_report_with_status_and_parameters(ok_run: tuple[int, Path], dataset_file: Path) -> None:
    _, out_dir = ok_run
    index = (out_dir / "index.html").read_text()
    assert "href='search_space.html'" in index
    assert ">ok<" in index and "max_shapes = 2" in index and html.escape(repr(str(dataset_file))) in index
    assert "Search space: what an exhaustive sweep recorded" in index, "each report's title, from its first heading"
    assert not [path.name for path in out_dir.iterdir() if path.name.startswith(".")], "no temporary files left"


def test_failing_notebook_still_renders_its_error_and_raises(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_dataset.parquet"
    with pytest.raises(PapermillExecutionError, match="FileNotFoundError"):
        report.run_notebook(NOTEBOOK, tmp_path / "out", {"dataset": str(missing)})
    text = (tmp_path / "out" / "search_space.html").read_text()
    assert "FileNotFoundError" in text and html.escape(f"no dataset file at {missing}") in text


def test_cell_timeout_is_reported_in_the_html_and_raised(tmp_path: Path) -> None:
    notebook = tmp_path / "slow.py"
    notebook.write_text('# %% tags=["parameters"]\nseconds = 30\n\n# %%\nimport time\ntime.sleep(seconds)\n')
    with pytest.raises(TimeoutError):
        report.run_notebook(notebook, tmp_path / "out", timeout_s=1)
    assert "This run failed:</b> CellTimeoutError" in (tmp_path / "out" / "slow.html").read_text()


def test_the_kernel_talks_over_private_unix_sockets_that_go_with_the_run(tmp_path: Path) -> None:
    notebook = tmp_path / "transport.py"
    notebook.write_text('# %% tags=["parameters"]\nunused = 0\n\n# %%\nfrom ipykernel.kernelapp import IPKernelApp\n'
                        'print(IPKernelApp.instance().transport, IPKernelApp.instance().ip)\n')
    report.run_notebook(notebook, tmp_path / "out")
    executed = nbformat.read(tmp_path / "out" / "transport.ipynb", as_version=4)
    transport, address = executed.cells[-1].outputs[0]["text"].split()
    sockets = Path(address).parent
    assert transport == "ipc" and sockets.name.startswith("tunebench-kernel-") and Path(address).is_absolute()
    assert not sockets.exists(), "the sockets' folder is removed with the run"


# -- build_reports bookkeeping and the CLI (no kernel started) --------------------------------------

def test_build_reports_goes_on_after_a_failure_and_counts_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = write_notebook(tmp_path / "first.py", "rate = 0.5")
    second = write_notebook(tmp_path / "second.py", "rate = 0.25")
    out_dir = tmp_path / "reports"
    out_dir.mkdir()
    (out_dir / "first.html").write_text("a stale report from an earlier run")

    def fake_run(source: Path, out: Path, parameters: dict, **_: object) -> Path:
        if source.stem == "first":
            raise RuntimeError("kernel died\nmore detail")
        (out / "second.html").write_text("report")
        return out / "second.html"

    monkeypatch.setattr(report, "run_notebook", fake_run)
    assert report.build_reports([first, second], out_dir, {"rate": 1}) == 1
    index = (out_dir / "index.html").read_text()
    assert "failed: RuntimeError: kernel died<" in index and "href='first.html'" not in index
    assert "href='second.html'" in index and ">ok<" in index and "rate = 1" in index


def test_build_reports_checks_every_notebook_before_running_any(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "run_notebook", lambda *args, **kwargs: pytest.fail("ran a notebook"))
    with pytest.raises(report.ParameterError, match="'rates'"):
        report.build_reports([write_notebook(tmp_path / "a.py", "rate = 0.5")], tmp_path / "out", {"rates": 1})


def test_cli_parses_parameters_as_literals_else_strings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls = []
    monkeypatch.setattr(report, "build_reports", lambda *args, **kwargs: calls.append(args) or 1)
    status = report.main(["notebooks/search_space.py", "--out", str(tmp_path), "-p", "max_shapes", "2",
                          "-p", "dataset", "results/datasets/other.parquet"])
    assert status == 1, "a failed notebook makes the exit status non-zero"
    notebooks, out_dir, overrides = calls[0]
    assert notebooks == [Path("notebooks/search_space.py")] and out_dir == tmp_path
    assert overrides == {"max_shapes": 2, "dataset": "results/datasets/other.parquet"}


def test_cli_reports_a_bad_parameter_as_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        report.main(["--out", str(tmp_path), "-p", "max_shapes", "'two'"])
    assert exit_info.value.code == 2 and "'max_shapes'" in capsys.readouterr().err


def test_default_notebooks_exist() -> None:
    assert report.DEFAULT_NOTEBOOKS and all((report.NOTEBOOK_DIR / name).is_file() for name in report.DEFAULT_NOTEBOOKS)


def test_run_header_escapes_values() -> None:
    text = report.run_header_html({"dataset": "<x>.parquet"}, {"gpu_name": "A&B"})
    assert "&lt;x&gt;.parquet" in text and "A&amp;B" in text and "<x>" not in text


def test_set_style_sets_the_shared_look() -> None:
    import matplotlib.pyplot as plt

    report.set_style()
    assert plt.rcParams["figure.dpi"] == report.FIGURE_DPI and plt.rcParams["axes.grid"]


# -- dataset summaries -----------------------------------------------------------------------------

def test_status_shares_counts_and_shares_per_shape() -> None:
    table = status_shares(small_dataset())
    assert list(table[["M", "N", "K"]].itertuples(index=False, name=None)) == SHAPES
    assert (table["configs"] == 8).all() and (table["valid"] == 5).all()
    assert table.loc[0, "ok"] == pytest.approx(5 / 8) and table.loc[0, "timeout"] == pytest.approx(1 / 8)
    assert table.loc[0, "crash"] == 0


def test_best_per_shape_picks_the_fastest_ok_config_and_compares_with_vendor() -> None:
    dataset = small_dataset()
    dataset.measurements.loc[dataset.measurements["M"] == 16, ["status", "latency_ms"]] = ["crash", math.nan]
    best = best_per_shape(dataset)
    assert math.isnan(best.loc[0, "latency_ms"]) and math.isnan(best.loc[0, "speedup"]), "no ok config: NaN row"
    row = best.loc[2]
    assert (row["BLOCK_M"], row["BLOCK_N"], row["GROUP_M"]) == (64, 128, 8)
    assert row["latency_ms"] == pytest.approx(2.7) and row["vendor_ms"] == pytest.approx(3.6)
    assert row["speedup"] == pytest.approx(3.6 / 2.7)
    assert row["tflops"] == pytest.approx(2 * 4096**3 / 2.7e-3 / 1e12)


def test_first_shapes_keeps_the_first_n_shapes() -> None:
    kept = first_shapes(small_dataset(), 2)
    assert kept.shapes() == SHAPES[:2] and len(kept.vendor) == 2
    assert first_shapes(small_dataset(), 0).shapes() == SHAPES


def test_plots_have_labelled_axes_and_one_entry_per_shape() -> None:
    import matplotlib.pyplot as plt

    dataset = small_dataset()
    spread = plot_latency_distributions(dataset).axes[0]
    assert spread.get_xscale() == "log" and "log scale" in spread.get_xlabel()
    assert [label.get_text() for label in spread.get_yticklabels()] == [shape_label(s) for s in SHAPES]
    bars = plot_best_vs_vendor(dataset).axes[0]
    assert bars.get_xlabel().startswith("speedup over torch.matmul (cuBLAS)")
    assert [label.get_text() for label in bars.get_yticklabels()] == [shape_label(s) for s in SHAPES]
    assert [patch.get_width() for patch in bars.patches] == pytest.approx([1.2 / 0.9] * len(SHAPES))
    flop = 2 * 4096**3
    assert bars.texts[-1].get_text() == f"{1.2 / 0.9:.2f}× ({flop / 2.7e9:.3g} vs {flop / 3.6e9:.3g} TFLOP/s)"
    plt.close("all")


def test_provenance_line_counts_the_sittings_and_the_rows_that_say_which_timed_them() -> None:
    datasets = report.REPO_ROOT / "results" / "datasets"
    assert "sittings" not in provenance_line(small_dataset())
    line = provenance_line(load_dataset(datasets / "matmul_tma_bfloat16_h200_default_widened.parquet"))
    assert "5 sittings, the first's shown; 15,760 of 47,280 rows name theirs;" in line  # its 8192 rows only
    line = provenance_line(load_dataset(datasets / "matmul_tma_bfloat16_h200.parquet"))
    assert "6 sittings, the first's shown; driver" in line
    line = provenance_line(load_dataset(report.REPO_ROOT / "results" / "dataset_sittings_check" / "h200" /
                                        "sittings.parquet"))
    assert "2 sittings, the first's shown; each row names its own;" in line
    screened = small_dataset()
    screened.provenance["screen"] = {"runs": 3, "margin": 0.2}
    assert ("a two-pass sweep: every config screened with 3 runs, those within 20% of the screened best timed in "
            "full") in provenance_line(screened)


def test_a_sweep_of_several_sittings_lists_each_with_the_rows_it_timed() -> None:
    dataset = small_dataset()
    assert sittings_table(dataset).empty
    dataset.provenance.update(date="2026-11-22", command="first")
    dataset.provenance["sittings"] = [{"measured_before": 0, "date": "2026-11-22"},
                                      {"measured_before": 0, "date": "2026-12-05", "command": "again",
                                       "kernel_source_sha256": "ab12"}]
    table = sittings_table(dataset)
    assert table[["date", "command", "kernel source", "rows"]].values.tolist() == [
        ["2026-11-22", "first", "not recorded", ""], ["2026-12-05", "again", "ab12", ""]]
    dataset.measurements[SITTING] = [0] * 16 + [1] * 8
    assert sittings_table(dataset)["rows"].tolist() == ["16", "8"]


def test_provenance_line_names_the_kernel_source_measured_beside_the_current_codes() -> None:
    current = kernel_source_sha256(get_kernel("matmul"))
    dataset = small_dataset()
    assert provenance_line(dataset).endswith(f"kernel source not recorded (the current code's: {current})")
    dataset.provenance["kernel_source_sha256"] = current
    assert f"kernel source {current}, the current code's" in provenance_line(dataset)
    dataset.provenance["sittings"] = [{"measured_before": 0}, {"measured_before": 5, "kernel_source_sha256": "ab12"}]
    assert f"kernel source {current}, ab12 (the current code's: {current})" in provenance_line(dataset)
    dataset.provenance.pop("kernel_source_sha256")  # a sweep from before the hash, with a later sitting that has it
    dataset.provenance["sittings"] = [{"measured_before": 0}, {"measured_before": 5, "kernel_source_sha256": current}]
    assert (f"kernel source {current}, not recorded by 1 of 2 sittings (the current code's: {current})"
            in provenance_line(dataset))
    kerneltuner = dataclasses.replace(small_dataset(), kernel="convolution")
    assert "kernel source" not in provenance_line(kerneltuner)
