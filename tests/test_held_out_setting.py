"""Choosing a strategy setting on some kernels' tasks and reporting it on others (benchmarks/held_out_setting.py): the
rule and its tie-breaks, a tiny choice that the report tasks cannot change, and bad command lines refused before any
replay (CPU, seconds)."""

import re
import sys
from pathlib import Path

import pandas as pd
import pytest

from command_line import refusal

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import held_out_setting  # noqa: E402
from held_out_setting import choose  # noqa: E402


def summary(rows: list[tuple[str, str, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["strategy", "task", "evals_to_0.99", "mean_score"])


def test_the_lowest_median_of_evaluations_wins_whatever_the_score():
    frame = summary([("p=10", "a", 40, 0.9), ("p=10", "b", 60, 0.9), ("p=10", "c", float("inf"), 0.9),
                     ("p=100", "a", 45, 0.1), ("p=100", "b", 55, 0.1), ("p=100", "c", 70, 0.1)])
    assert choose(frame, default="p=10") == "p=100"  # medians 60 and 55
    assert choose(frame[frame.task != "c"], default="p=100") == "p=10"  # medians 50 and 50: the score decides


def test_a_tie_goes_to_the_higher_score_then_to_the_default_then_to_the_first_value():
    tied = summary([("p=10", "a", 50, 0.5), ("p=20", "a", 50, 0.6), ("p=100", "a", 50, 0.6)])
    assert choose(tied, default="p=100") == "p=100"
    assert choose(tied, default="p=10") == "p=20"
    assert choose(tied.assign(mean_score=0.5), default="p=30") == "p=10"


def test_by_seconds_or_expected_seconds_the_rule_ranks_by_those_not_by_evaluations():
    frame = summary([("p=0.05", "a", 40, 0.5), ("p=0.05", "b", 50, 0.5),
                     ("p=0.1", "a", 60, 0.5), ("p=0.1", "b", 70, 0.5)])
    frame["seconds_to_0.99_pipelined"] = [9.0, 11.0, 6.0, 7.0]
    assert choose(frame, default="p=0.1") == "p=0.05"
    assert choose(frame, default="p=0.05", by="seconds") == "p=0.1"
    frame["ert_seconds_to_0.99_pipelined"] = [12.0, 13.0, 15.0, 20.0]  # p=0.1 more often stops short
    assert choose(frame, default="p=0.1", by="expected_seconds") == "p=0.05"


def run(arguments: list[str], out: Path, monkeypatch) -> str:
    monkeypatch.setattr(sys, "argv", ["held_out_setting.py", *arguments, "--out", str(out)])
    assert held_out_setting.main() == 0
    return (out / "summary.md").read_text()


def test_a_tiny_choice_follows_the_rule_on_the_choice_tasks_alone(tmp_path, monkeypatch):
    judged = []  # the tasks of every summary the rule is applied to

    def recording_choose(frame: pd.DataFrame, *args, **kwargs) -> str:
        judged.append(set(frame["task"]))
        return choose(frame, *args, **kwargs)

    monkeypatch.setattr(held_out_setting, "choose", recording_choose)
    common = ["--strategy", "pattern", "--values", "20", "--seeds", "1", "--budget", "30", "--workers", "1",
              "--choose-on", "softmax"]
    text = run([*common, "--report-on", "layernorm"], tmp_path / "one", monkeypatch)
    by_task = pd.read_csv(tmp_path / "one" / "summary_by_task.csv")
    assert set(by_task.strategy) == {"initial_population=20", "initial_population=100"}, "the default is added"
    softmax = by_task[by_task.task.str.startswith("softmax")]
    assert judged == [set(softmax.task)] and len(softmax.task.unique()) == 9, "the rule sees the choice tasks alone"
    chosen = choose(softmax, default="initial_population=100")
    assert f"## The choice: {chosen}" in text
    assert "## Reported on the 9 tasks of layernorm" in text
    assert re.search(r"\| initial_population=100 \((chosen, the )?default\) \| 9 \|", text)
    other = run([*common, "--report-on", "kerneltuner/convolution_kernel"], tmp_path / "two", monkeypatch)
    assert f"## The choice: {chosen}" in other, "the report tasks play no part in the choice"
    assert "## Reported on the 2 tasks of kerneltuner/convolution_kernel" in other
    assert judged[1] == judged[0]


@pytest.mark.parametrize("arguments, message", [
    (["--choose-on", "gemm"], "--choose-on names unknown kernels ['gemm']; the tasks' kernels are: matmul, "),
    (["--choose-on", "matmul"], "kernels ['matmul'] are both in --choose-on and --report-on"),
    (["--setting", "initial_pop"], "unknown setting 'initial_pop' for strategy 'lfbo'"),
    (["--values", '"20"'], "'initial_population' of strategy 'lfbo' must be int, got '20'"),
    (["--values", "100"], "leave nothing to choose between beside the default 100"),
    (["--values", "{20"], "'{20' is not JSON"),
    (["--strategy", "lbfo"], "unknown strategies ['lbfo']"),
    (["--seeds", "0"], "--seeds must be at least 1, got 0"),
    (["--by", "score"], "argument --by: invalid choice: 'score'"),
    (["--kernel-tuner-dir", "nowhere"], "no such file: nowhere/convolution_A100.json.gz"),
])
def test_bad_command_lines_are_refused_before_replaying(arguments, message, tmp_path, monkeypatch, capsys):
    argv = ["held_out_setting.py", "--out", str(tmp_path / "out"), *arguments]
    assert message in refusal(held_out_setting.main, argv, monkeypatch, capsys)
    assert not (tmp_path / "out").exists(), "nothing written"
