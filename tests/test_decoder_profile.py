"""benchmarks/decoder_profile.py: its summary of ncu's raw pages, its errors, and what the recorded H200 profiles of
the stream decoder show (stop 74)."""

import csv
import importlib.util
import json
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
RECORDED = REPOSITORY / "results" / "compressed_pipelines"
PROFILES = RECORDED / "ncu"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("decoder_profile", REPOSITORY / "benchmarks" / "decoder_profile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def counters(script, name, outputs):
    return {row["output"]: row for row in script.read_profile(PROFILES / f"h200_{name}.csv", outputs)}


def test_the_summary_file_is_what_the_recorded_profiles_give(script):
    recorded = json.loads((RECORDED / "decoder_ncu_h200.json").read_text())["rows"]
    labels = {"128 steps, 12 bits": "128_steps_12_bits", "64 steps, 8 bits (default)": "64_steps_8_bits"}
    for row in recorded:
        if row["profile"] in labels:
            outputs = ["codes", "exponents", "bfloat16"]
            assert counters(script, labels[row["profile"]], outputs)[row["output"]] == {
                key: value for key, value in row.items() if key != "profile"}


def test_the_recorded_profiles_show_what_bounded_the_decoder(script):
    """Before: the 8 KiB table's gathers kept L1's global-load output 82 % busy and long-scoreboard stalls dominated.
    With an 8-bit table 4x fewer wavefronts; with 64 steps and 3,584 programs the codes are ALU-bound (over 80 % of
    the ALU pipe) and BF16 still waits on loads (long scoreboard its largest stall)."""
    outputs = ["codes", "exponents", "bfloat16"]
    before = counters(script, "128_steps_12_bits", outputs)
    short = counters(script, "128_steps_8_bits", ["codes", "bfloat16"])
    now = counters(script, "64_steps_8_bits", outputs)
    wavefronts, stalls = "L1 global-load wavefronts", "long-scoreboard stall cycles an issue"
    assert before["codes"]["L1 global-load wavefronts % of peak"] > 80
    assert before["codes"][wavefronts] / short["codes"][wavefronts] > 3.5
    assert before["codes"][stalls] > 7 and short["codes"][stalls] < 2.5
    assert now["codes"]["ALU pipe %"] > 80 and now["exponents"]["ALU pipe %"] > 80
    other = ("math-pipe-throttle stall cycles an issue", "not-selected stall cycles an issue")
    assert all(now["bfloat16"][stalls] > 3 * now["bfloat16"][name] for name in other)
    assert [now[output]["duration us"] < before[output]["duration us"] / 1.15 for output in outputs] == [True] * 3


def test_a_profile_with_missing_launches_or_other_units_is_refused(script, tmp_path):
    source = PROFILES / "h200_128_steps_8_bits.csv"
    with pytest.raises(SystemExit, match="4 profiled launches, expected 2 for each of codes, exponents, bfloat16"):
        script.read_profile(source, ["codes", "exponents", "bfloat16"])
    rows = list(csv.reader(source.open(newline="")))
    rows[1][rows[0].index("gpu__time_duration.sum")] = "ms"
    scaled = tmp_path / "scaled.csv"
    with scaled.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    with pytest.raises(SystemExit, match="gpu__time_duration.sum is in 'ms'; this summary reads 'us'"):
        script.read_profile(scaled, ["codes", "bfloat16"])


def test_an_unknown_output_stops_before_any_gpu_work(script):
    with pytest.raises(SystemExit, match="unknown output 'fp8'; allowed: codes, exponents, bfloat16"):
        script.main(["launch", "--outputs", "codes,fp8"])
