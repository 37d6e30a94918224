"""benchmarks/worker_startup.py refuses bad input by name before it starts any process (its timings need a GPU)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import worker_startup  # noqa: E402


@pytest.mark.parametrize("arguments, message", [
    (["--shape", "4096x4096"], "--shape: bad shape '4096x4096': expected 3 positive integers"),
    (["--shape", "8x8x8,16x16x16"], "--shape takes one MxNxK, got 2"),
    (["--repeats", "0"], "--batch and --repeats must be >= 1, got 28 and 0"),
    (["--baseline", "/nonexistent"], "--baseline /nonexistent holds no tunebench package"),
])
def test_bad_arguments_are_refused_by_name(arguments, message, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["worker_startup.py", *arguments])
    with pytest.raises(SystemExit):
        worker_startup.main()
    assert message in capsys.readouterr().err
