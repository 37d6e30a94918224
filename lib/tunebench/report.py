"""Headless notebook runs and shareable HTML reports: jupytext source -> papermill -> nbconvert HTML.

Also the two helpers every notebook calls first, `set_style()` and `show_run_header(parameters, provenance)`, and the
paths relative to the repository root that notebooks take and print (`repo_path`, `resolve_dataset`, `shown_path`).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import difflib
import html
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from tunebench.files import write_text_atomically

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
# The notebooks that `make report` renders, by file name in notebooks/.
# sampled_configs reuses the study that strategy_comparison writes, so it comes after it.
DEFAULT_NOTEBOOKS = ("search_space.py", "strategy_comparison.py", "sampled_configs.py", "surrogate_ablation.py",
                     "config_prediction.py", "pipeline_selection.py", "gemm_kernels.py")
FIGURE_DPI = 110
# Kernelspecs tried in order: the one `make` registers inside the venv, then ipykernel's own.
KERNEL_CANDIDATES = ("tunebench", "python3")


class ParameterError(ValueError):
    """A notebook's parameters cell is malformed, or an override is misspelled or of the wrong type."""


def repo_path(path: str | os.PathLike) -> Path:
    """A path relative to the repository root (absolute paths unchanged), whatever the working directory."""
    return REPO_ROOT / path


def resolve_dataset(path: str | os.PathLike[str]) -> Path:
    """A dataset path as the notebooks take it: relative to the repository root (`../shared/...` reaches the
    shared folder beside it), or absolute."""
    return repo_path(path).resolve()


def shown_path(path: Path) -> str:
    """A path relative to the repository root where it lies inside it."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def set_style() -> None:
    """One look for every notebook's figures: seaborn whitegrid, notebook context, colour-blind palette."""
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook", palette="colorblind", rc={"figure.dpi": FIGURE_DPI})


def run_header_html(parameters: Mapping[str, object], provenance: Mapping[str, object]) -> str:
    """Two small tables, the run's parameters and the data's provenance, as an HTML fragment."""

    def table(caption: str, rows: Mapping[str, object], show: Callable[[object], str]) -> str:
        cells = "".join(f"<tr><th style='text-align:left'>{html.escape(str(key))}</th><td style='text-align:left'>"
                        f"{html.escape(show(value))}</td></tr>" for key, value in rows.items())
        return (f"<table class='tunebench-{caption.split()[0].lower()}' style='display:inline-block;"
                f"vertical-align:top;margin-right:2em'><caption style='text-align:left'><b>{caption}</b></caption>"
                f"{cells}</table>")

    executed = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    # Parameters as the literals one would pass with -p; provenance as plain text.
    return (f"<div class='tunebench-run-header'>{table('Parameters', parameters, repr)}"
            f"{table('Data provenance', provenance, str)}"
            f"<p>Executed {executed} with {html.escape(sys.executable)}</p></div>")


def show_run_header(parameters: Mapping[str, object], provenance: Mapping[str, object]) -> None:
    """Display the parameters and provenance tables in the running notebook."""
    from IPython.display import HTML, display

    display(HTML(run_header_html(parameters, provenance)))


def read_parameters(notebook_path: str | os.PathLike) -> dict[str, object]:
    """The literal defaults of the notebook's single cell tagged `parameters`, in source order."""
    import jupytext

    path = Path(notebook_path)
    cells = [cell for cell in jupytext.read(path).cells if "parameters" in cell.metadata.get("tags", ())]
    if len(cells) != 1:
        raise ParameterError(f"{path}: expected exactly one cell tagged 'parameters', found {len(cells)}")
    defaults: dict[str, object] = {}
    for statement in ast.parse(cells[0].source).body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target, value = statement.target, statement.value
        else:
            target = value = None
        if not isinstance(target, ast.Name):
            raise ParameterError(f"{path}: the parameters cell may hold only `name = literal` lines, "
                                 f"not {ast.unparse(statement)!r}")
        try:
            defaults[target.id] = ast.literal_eval(value)
        except ValueError:
            raise ParameterError(f"{path}: parameter {target.id!r} must default to a literal, "
                                 f"not {ast.unparse(value)!r}") from None
    return defaults


def check_parameters(notebook_path: str | os.PathLike, overrides: Mapping[str, object]) -> dict[str, object]:
    """The notebook's defaults updated by `overrides`; unknown names and mistyped values are errors."""
    name_of_notebook = Path(notebook_path).name
    defaults = read_parameters(notebook_path)
    unknown = [name for name in overrides if name not in defaults]
    if unknown:
        hints = [f"{name!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(name, defaults, 1))
                 else repr(name) for name in unknown]
        raise ParameterError(f"unknown parameter {', '.join(hints)} for {name_of_notebook}; "
                             f"allowed: {', '.join(defaults) or 'none'}")
    for name, value in overrides.items():
        default = defaults[name]
        # bool is an int subclass, so the types are compared exactly; an int is a fine float.
        if default is None or type(value) is type(default) or (type(default) is float and type(value) is int):
            continue
        raise ParameterError(f"parameter {name!r} of {name_of_notebook} expects {type(default).__name__} "
                             f"(default {default!r}), got {type(value).__name__} {value!r}")
    return {**defaults, **overrides}


def _kernel_for_this_interpreter() -> str:
    """A kernelspec that runs sys.executable, so a notebook sees the same installed tunebench as its caller."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    manager = KernelSpecManager()
    # jupyter_client itself runs a bare `python`/`python3` argv[0] with sys.executable.
    this_interpreter = {"python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}",
                        os.path.abspath(sys.executable)}
    for name in KERNEL_CANDIDATES:
        try:
            program = manager.get_kernel_spec(name).argv[0]
        except NoSuchKernel:
            continue
        if program in this_interpreter or os.path.abspath(program) in this_interpreter:
            return name
    raise RuntimeError(f"no Jupyter kernel runs {sys.executable}; register one with "
                       f"`{sys.executable} -m ipykernel install --sys-prefix --name tunebench`")


def _render_html(notebook, title: str) -> str:
    """The executed notebook as one HTML file: outputs only, figures embedded as base64 PNGs."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(notebook, resources={"metadata": {"name": title}})
    return body


def _kernel_manager_on_local_sockets(folder: Path) -> type:
    """A kernel manager whose kernel talks over Unix sockets in `folder` (IPC), not TCP ports on localhost: only this
    user can open them (a temporary folder is private), and ipykernel has no plain-TCP warning to print on every run.
    Their paths are absolute, where jupyter_client's IPC default ("kernel-ipc-N") would lie in each process's working
    directory, which the kernel (started in the notebook's folder) and this process do not share."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class LocalSocketKernelManager(AsyncKernelManager):
        @default("transport")
        def _transport_default(self) -> str:
            return "ipc"

        @default("ip")
        def _ip_default(self) -> str:
            return str(folder / "kernel")

    return LocalSocketKernelManager


def run_notebook(source: Path, out_dir: Path, parameters: Mapping[str, object] | None = None, *,
                 kernel_name: str | None = None, timeout_s: int = 600) -> Path:
    """Execute a jupytext notebook headless and write `<name>.html` (and the executed `<name>.ipynb`).

    A failing notebook still gets its report, error output included, and then its exception is re-raised
    (PapermillExecutionError for an error in a cell). `timeout_s` bounds each cell.
    """
    import jupytext
    import nbformat
    import papermill
    from papermill.exceptions import PapermillExecutionError

    source, out_dir = Path(source), Path(out_dir)
    overrides = dict(parameters or {})
    check_parameters(source, overrides)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = source.stem
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=f".{name}.") as scratch:
        input_path, executed_path = Path(scratch) / f"{name}.input.ipynb", Path(scratch) / f"{name}.ipynb"
        nbformat.write(jupytext.read(source), input_path)
        failure: Exception | None = None
        try:
            # The sockets' folder is short and outside the output folder: a Unix socket's path holds 107 bytes at most.
            with tempfile.TemporaryDirectory(prefix="tunebench-kernel-") as sockets:
                papermill.execute_notebook(input_path, executed_path, parameters=overrides, language="python",
                                           kernel_name=kernel_name or _kernel_for_this_interpreter(),
                                           cwd=source.resolve().parent, execution_timeout=timeout_s,
                                           progress_bar=False,
                                           kernel_manager_class=_kernel_manager_on_local_sockets(Path(sockets)))
        except Exception as error:  # papermill saves the notebook as far as it ran; report it, then raise
            failure = error
        html_path = out_dir / f"{name}.html"
        if executed_path.exists():
            executed = nbformat.read(executed_path, as_version=4)
            if failure is not None and not isinstance(failure, PapermillExecutionError):
                # A cell error shows in its own output; a timeout or a dead kernel shows nowhere else.
                executed.cells.insert(0, nbformat.v4.new_markdown_cell(
                    f"<p style='color:#cf222e'><b>This run failed:</b> {html.escape(_describe(failure))}</p>"))
            write_text_atomically(html_path, _render_html(executed, title=name))
            os.replace(executed_path, out_dir / f"{name}.ipynb")
    if failure is not None:
        raise failure
    return html_path


@dataclass
class ReportRun:
    """What the index says about one notebook's run."""

    notebook: Path
    parameters: dict[str, object]
    started: datetime.datetime
    elapsed_s: float = 0.0
    html: Path | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def _notebook_title(source: Path) -> str:
    """The first level-1 heading of a jupytext `py:percent` notebook (its first markdown cell's `# # Title`); empty
    if it has none or cannot be read."""
    try:
        lines = Path(source).read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    return next((line[len("# # "):].strip() for line in lines if line.startswith("# # ")), "")


def _index_html(runs: Sequence[ReportRun], out_dir: Path) -> str:
    rows = []
    for run in runs:
        name = html.escape(run.notebook.stem)
        link = f"<a href='{html.escape(run.html.relative_to(out_dir).as_posix())}'>{name}</a>" if run.html else name
        title = _notebook_title(run.notebook)
        if title:
            link += f"<br><span style='color:#57606a'>{html.escape(title)}</span>"
        status = "ok" if run.ok else f"failed: {html.escape(run.error)}"
        colour = "#1a7f37" if run.ok else "#cf222e"
        parameters = "<br>".join(f"{html.escape(key)} = {html.escape(repr(value))}"
                                 for key, value in run.parameters.items())
        rows.append(f"<tr><td>{link}</td><td style='color:{colour}'>{status}</td>"
                    f"<td>{run.started.isoformat(timespec='seconds')}</td><td>{run.elapsed_s:.1f} s</td>"
                    f"<td><code>{parameters}</code></td></tr>")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>tunebench reports</title><style>"
            "body{font-family:sans-serif;margin:2em}td,th{padding:.3em .8em;text-align:left;vertical-align:top;"
            "border-bottom:1px solid #ddd}</style></head><body><h1>tunebench reports</h1><table>"
            "<tr><th>report</th><th>status</th><th>date</th><th>elapsed</th><th>parameters</th></tr>"
            f"{''.join(rows)}</table></body></html>")


def build_reports(notebooks: Sequence[Path], out_dir: Path, parameters: Mapping[str, object] | None = None, *,
                  kernel_name: str | None = None, timeout_s: int = 600) -> int:
    """Run every notebook (one failure does not stop the others), write `index.html`; the number of failures.

    Parameters are checked against every notebook before anything runs.
    """
    out_dir = Path(out_dir)
    overrides = dict(parameters or {})
    effective = {Path(notebook): check_parameters(notebook, overrides) for notebook in notebooks}
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    for index, (notebook, notebook_parameters) in enumerate(effective.items(), start=1):
        run = ReportRun(notebook, notebook_parameters, started=datetime.datetime.now().astimezone())
        rendered = out_dir / f"{notebook.stem}.html"
        rendered.unlink(missing_ok=True)  # so that a run that dies before rendering never links a stale report
        clock = time.perf_counter()
        try:
            run.html = run_notebook(notebook, out_dir, overrides, kernel_name=kernel_name, timeout_s=timeout_s)
        except Exception as error:  # a failed notebook is reported, and the next one still runs
            run.error = _describe(error)
            run.html = rendered if rendered.exists() else None
        run.elapsed_s = time.perf_counter() - clock
        outcome = "ok" if run.ok else "FAILED"
        print(f"[{index}/{len(effective)}] {notebook.name}: {outcome} in {run.elapsed_s:.1f} s -> "
              f"{run.html or 'no report'}", flush=True)
        runs.append(run)
    write_text_atomically(out_dir / "index.html", _index_html(runs, out_dir))
    return sum(not run.ok for run in runs)


def _describe(error: Exception) -> str:
    """One line: a notebook's own exception (papermill keeps its name and message) or the runner's."""
    name, message = getattr(error, "ename", type(error).__name__), getattr(error, "evalue", str(error))
    first_line = next((line for line in str(message).splitlines() if line.strip()), "")
    return f"{name}: {first_line}"


def _parse_value(text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError):
        return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tunebench.report", description="Execute notebooks headless and render HTML reports.",
        epilog="example: python -m tunebench.report notebooks/search_space.py "
               "-p dataset results/datasets/other.parquet")
    parser.add_argument("notebooks", nargs="*", type=Path, metavar="NOTEBOOK",
                        help=f"jupytext notebooks to run (default: {', '.join(DEFAULT_NOTEBOOKS)} in notebooks/)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "results" / "reports", help="report folder")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="override a parameter for every notebook; VALUE is a Python literal, else a string")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed per cell (default 600)")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or [NOTEBOOK_DIR / name for name in DEFAULT_NOTEBOOKS]
    overrides = {name: _parse_value(value) for name, value in args.parameter}
    try:
        failures = build_reports(notebooks, args.out, overrides, timeout_s=args.timeout)
    except (ParameterError, FileNotFoundError) as error:
        parser.error(str(error))
    print(f"{len(notebooks) - failures} of {len(notebooks)} reports ok; index: {args.out / 'index.html'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
