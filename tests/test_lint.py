"""Checks of every Python source the project holds, run or not by other tests: pyflakes finds names used but never
defined (a crash on a path the tests do not run) and imports never used, a line marked `# noqa` exempt as flake8 would
have it; and every benchmark script imports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pyflakes import messages
from pyflakes.api import checkPath
from pyflakes.reporter import Reporter

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("lib", "benchmarks", "tests", "notebooks", "examples")


class _Collected(Reporter):
    """Pyflakes' findings as (path, line, message), with syntax errors among them."""

    def __init__(self) -> None:
        self.found: list[tuple[str, list[int], str]] = []  # (path, the lines a `# noqa` exempts it on, message)

    def flake(self, message) -> None:  # type: ignore[no-untyped-def]
        # A redefinition or a shadowing of an import is exempt where the import's own line is marked: a test module
        # imports another's pytest fixtures, which its tests then take as arguments of the same names.
        redefined = isinstance(message, (messages.RedefinedWhileUnused, messages.ImportShadowedByLoopVar))
        lines = [message.lineno, *([message.message_args[1]] if redefined else [])]
        self.found.append((message.filename, lines, message.message % message.message_args))

    def syntaxError(self, filename, msg, lineno, offset, text) -> None:  # type: ignore[no-untyped-def]  # noqa: N802
        self.found.append((filename, [lineno or 0], f"syntax error: {msg}"))

    def unexpectedError(self, filename, msg) -> None:  # type: ignore[no-untyped-def]  # noqa: N802
        self.found.append((filename, [0], f"unreadable: {msg}"))


def findings(paths: list[Path], root: Path = REPO) -> list[str]:
    """`path:line: message` (the path relative to `root`) for each pyflakes finding on a line without `# noqa`."""
    reporter = _Collected()
    for path in paths:
        checkPath(str(path), reporter)
    lines = {path: Path(path).read_text().splitlines() for path, _, _ in reporter.found}
    return [f"{Path(path).relative_to(root)}:{marks[0]}: {message}" for path, marks, message in reporter.found
            if not any(0 < line <= len(lines[path]) and "# noqa" in lines[path][line - 1] for line in marks)]


def test_no_source_uses_an_undefined_name_or_imports_what_it_never_uses() -> None:
    sources = sorted(path for folder in FOLDERS for path in (REPO / folder).rglob("*.py"))
    assert len(sources) > 100
    assert findings(sources) == []


def test_the_check_finds_an_undefined_name_and_honours_noqa(tmp_path: Path) -> None:
    source = tmp_path / "bad.py"
    source.write_text("import os\nimport sys  # noqa: F401\nimport json  # noqa: F401  (a fixture)\n\n\n"
                      "def f(json):\n    return settings\n\n\ndef g(os):\n    return os\n")
    # `json` taken as an argument is exempt by its import's mark; `os` is not marked.
    assert findings([source], tmp_path) == ["bad.py:1: 'os' imported but unused", "bad.py:7: undefined name 'settings'",
                                            "bad.py:10: redefinition of unused 'os' from line 1"]


def test_every_benchmark_script_imports() -> None:
    """A script's import of a name that moved or was renamed fails only when the script runs, which for most is on a
    GPU or for hours: all are imported in one fresh process (Helion, a GPU machine's optional peer, may be absent)."""
    scripts = sorted(path.stem for path in (REPO / "benchmarks").glob("*.py"))
    probe = ("import importlib, sys\n"
             "for name in sys.argv[1:]:\n"
             "    try:\n"
             "        importlib.import_module(name)\n"
             "    except ModuleNotFoundError as error:\n"
             "        if error.name != 'helion':\n"
             "            print(f'{name}: {error!r}')\n"
             "    except Exception as error:\n"
             "        print(f'{name}: {error!r}')\n")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "lib"), str(REPO / "benchmarks")])}
    done = subprocess.run([sys.executable, "-c", probe, *scripts], cwd=REPO / "benchmarks", env=environment,
                          capture_output=True, text=True, timeout=600)
    assert len(scripts) > 50 and done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == ""


def test_every_command_line_describes_itself_with_its_docstrings_first_paragraph() -> None:
    """`--help` shows the module docstring's first paragraph: its first line alone cut most of them mid-sentence."""
    sources = sorted(path for folder in ("lib", "benchmarks") for path in (REPO / folder).rglob("*.py"))
    described = [path for path in sources if "ArgumentParser(" in path.read_text()]
    assert len(described) > 50
    assert [str(path.relative_to(REPO)) for path in described if "__doc__.splitlines()[0]" in path.read_text()] == []
