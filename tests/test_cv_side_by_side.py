"""benchmarks/cv_side_by_side.py: the paired difference, the class-weighted means, and the refusal of mismatched
shapes."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # the scripts import their siblings
import cv_side_by_side  # noqa: E402


def per_shape(path, efficiencies, alignments=("aligned", "aligned", "odd")):
    pd.DataFrame({"M": [1, 2, 3][:len(efficiencies)], "N": 16, "K": 16, "alignment": alignments[:len(efficiencies)],
                  "dispatcher_efficiency": efficiencies}).to_csv(path, index=False)
    return path


def test_it_reports_the_paired_difference_and_the_weighted_means(tmp_path, monkeypatch):
    first = per_shape(tmp_path / "a.csv", [0.9, 1.0, 0.8])
    second = per_shape(tmp_path / "b.csv", [1.0, 1.0, 0.8])
    weights = per_shape(tmp_path / "w.csv", [1.0, 1.0, 1.0], ("aligned", "odd", "odd"))
    out = tmp_path / "out.md"
    monkeypatch.setattr(sys, "argv", ["cv_side_by_side.py", "--first", str(first), "--second", str(second),
                                      "--weights-from", str(weights), "--out", str(out)])
    assert cv_side_by_side.main() == 0
    text = out.read_text()
    assert "| all (3) |" in text and "| 1 / 0 |" in text
    # class means: first aligned 95 %, odd 80 %; second 100 % and 80 %; weights 1 aligned, 2 odd
    assert "first 85.00 %, second 86.67 %" in text


def test_it_refuses_runs_of_different_shapes(tmp_path, monkeypatch):
    first = per_shape(tmp_path / "a.csv", [0.9, 1.0, 0.8])
    second = per_shape(tmp_path / "b.csv", [0.9, 1.0])
    monkeypatch.setattr(sys, "argv", ["cv_side_by_side.py", "--first", str(first), "--second", str(second),
                                      "--out", str(tmp_path / "out.md")])
    with pytest.raises(SystemExit, match="different shapes"):
        cv_side_by_side.main()


def test_it_refuses_weights_of_a_class_the_runs_lack(tmp_path, monkeypatch):
    first = per_shape(tmp_path / "a.csv", [0.9, 1.0], ("aligned", "aligned"))
    second = per_shape(tmp_path / "b.csv", [1.0, 1.0], ("aligned", "aligned"))
    weights = per_shape(tmp_path / "w.csv", [1.0, 1.0], ("aligned", "odd"))
    monkeypatch.setattr(sys, "argv", ["cv_side_by_side.py", "--first", str(first), "--second", str(second),
                                      "--weights-from", str(weights), "--out", str(tmp_path / "out.md")])
    with pytest.raises(SystemExit, match=r"weights classes \['odd'\]"):
        cv_side_by_side.main()
