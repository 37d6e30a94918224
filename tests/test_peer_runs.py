"""Helion's autotune logs and our live traces read back (`peer_runs`), on stand-in logs and on the recorded
side-by-side runs, and benchmarks/helion_side_by_side.py's summary and refusals, without a GPU."""

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from tunebench import peer_runs
from tunebench.gemm_kernels import SIDE_BY_SIDE, side_by_side_table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import helion_side_by_side as side  # noqa: E402

# Helion's log format (helion/autotuner/logger.py, AutotuneLogSink): a config is logged as it starts and with its
# result; a failed config has no perf_ms; the last config here never ended.
HELION_LOG = """timestamp_s,config_index,generation,status,perf_ms,compile_time_s,config
0.10,1,0,started,,,Config(a=1)
1.50,1,0,ok,0.400000,1.20,Config(a=1)
2.00,2,0,error,,0.50,Config(a=2)
3.25,3,1,ok,0.190000,1.00,Config(a=3)
4.00,4,1,ok,0.176000,1.00,Config(a=4)
4.20,5,1,started,,,Config(a=5)
"""


def write_helion_run(folder: Path, name: str, *, finished: bool) -> None:
    (folder / f"{name}.csv").write_text(HELION_LOG)
    record = {"run": name, "shape": [64, 64, 64], "cublas_ms": 0.18, "finished": finished}
    if finished:
        record.update(log_start_s=0.5, wall_s=5.0, relative_error=0.0, config="{}")
    (folder / f"{name}.json").write_text(json.dumps(record))


def test_helion_trace_is_offset_by_the_log_start_and_skips_failures(tmp_path):
    write_helion_run(tmp_path, "helion_quick_LFBOPatternSearch_seed0", finished=True)
    (run,) = peer_runs.helion_runs(tmp_path)
    assert run["configs"] == 4 and run["last_s"] == pytest.approx(4.5)
    assert run["trace"].time_s.tolist() == pytest.approx([2.0, 3.75, 4.5])
    row = peer_runs.reach_row(run)
    # 0.18 / 0.19 = 0.947x at 3.75 s (rounded to 3.8); 0.18 / 0.176 = 1.023x at 4.5 s.
    assert row["s to 0.9x"] == 3.8 and row["s to 0.95x"] == 4.5 and row["s to 1.0x"] == 4.5
    assert row["best vs cuBLAS (own timer)"] == pytest.approx(1.023, abs=1e-3)


def test_arms_pool_seeds_and_a_never_reached_median_is_never():
    reach = pd.DataFrame([
        {"run": "helion_full_X_seed0", "last result (s)": 300.0, "s to 0.99x": 68.5, "s to 1.0x": "never"},
        {"run": "helion_full_X_seed1", "last result (s)": 250.0, "s to 0.99x": "never", "s to 1.0x": "never"},
        {"run": "helion_full_X_seed2", "last result (s)": 200.0, "s to 0.99x": 70.0, "s to 1.0x": 190.0},
        {"run": "tunebench_lfbo_seed0", "last result (s)": 20.0, "s to 0.99x": 13.0, "s to 1.0x": "never"}])
    rounds = pd.DataFrame({"run": ["cublas", "helion_full_X_seed0", "cublas", "helion_full_X_seed0"],
                           "ms": [1.0, 2.0, 1.0, 2.0]})
    table = peer_runs.arms_table(reach, rounds).set_index("arm")
    assert table.loc["helion_full_X", "runs"] == 3
    assert table.loc["helion_full_X", "median s to 0.99x"] == 70.0
    assert table.loc["helion_full_X", "median s to 1.0x"] == "never"
    assert table.loc["helion_full_X", "rounds: final vs cuBLAS (median)"] == "0.500 (1 of 3)"
    assert table.loc["tunebench_lfbo", "rounds: final vs cuBLAS (median)"] == "not timed"


def test_rounds_files_in_the_order_timed(tmp_path):
    for number in (10, 2, 1):
        (tmp_path / f"rounds_{number}.csv").write_text("run,ms\n")
    assert [path.name for path in peer_runs.rounds_files(tmp_path)] == ["rounds_1.csv", "rounds_2.csv", "rounds_10.csv"]


def test_summary_says_which_helion_runs_did_not_finish(tmp_path):
    write_helion_run(tmp_path, "helion_full_LFBOTreeSearch_seed0", finished=False)
    text = side.summarize(tmp_path, [], "cmd")
    assert ("did not finish: stopped by the command's time limit; its last result at 4.0 s of its log's clock"
            in text)
    assert (tmp_path / "summary.md").read_text() == text


def test_refusals_name_the_bad_value(tmp_path):
    with pytest.raises(ValueError, match="autotuner 'PatternSearch' is not one of LFBOPatternSearch, LFBOTreeSearch"):
        side.check_choice("autotuner", "PatternSearch", side.AUTOTUNERS)
    with pytest.raises(ValueError, match="no Helion run"):
        side.summarize(tmp_path, [], "cmd")


def test_recorded_side_by_side_runs():
    table = side_by_side_table(SIDE_BY_SIDE).set_index("arm")
    assert list(table.index) == ["helion_full_LFBOPatternSearch", "helion_full_LFBOTreeSearch",
                                 "helion_quick_LFBOPatternSearch", "helion_quick_LFBOTreeSearch",
                                 "tunebench_lfbo_quick", "tunebench_lfbo"]
    assert table.loc["tunebench_lfbo", "runs"] == 3 and table.loc["tunebench_lfbo", "median s to 0.99x"] == 13.7
    assert table.loc["helion_full_LFBOPatternSearch", "median s to 0.99x"] == 311.3
    assert table.loc["helion_full_LFBOPatternSearch", "rounds: final vs cuBLAS (median)"] == "0.945 (2 of 3)"
    assert table.loc["tunebench_lfbo", "rounds: final vs cuBLAS (median)"] == "0.998 (3 of 3)"
    finished = {run["run"]: run["finished"] for run in peer_runs.helion_runs(SIDE_BY_SIDE)}
    assert finished == {"helion_full_LFBOPatternSearch_seed0": True, "helion_full_LFBOPatternSearch_seed1": False,
                        "helion_full_LFBOPatternSearch_seed2": True,
                        "helion_full_LFBOTreeSearch_seed0": False, "helion_quick_LFBOPatternSearch_seed0": True,
                        "helion_quick_LFBOPatternSearch_seed1": True, "helion_quick_LFBOPatternSearch_seed2": True,
                        "helion_quick_LFBOTreeSearch_seed0": True}


def test_recorded_runs_at_a_second_shape():
    """At 256 x 11008 x 4096 our LFBO leads by its own timer. In Helion's rounds it trailed while `matmul_tma.run`
    built its launch on every call (rounds_1) and leads since its launches are bound (rounds_2); the README's
    finding. Helion's two full runs were cut by the time limit."""
    folder = SIDE_BY_SIDE.parent / "256x11008x4096"
    table = side_by_side_table(folder).set_index("arm")
    assert list(table.index) == ["helion_full_LFBOPatternSearch", "helion_quick_LFBOPatternSearch",
                                 "tunebench_lfbo_quick", "tunebench_lfbo"]
    assert table.loc["tunebench_lfbo", "median s to 0.99x"] == 8.2
    assert table.loc["helion_quick_LFBOPatternSearch", "median s to 0.99x"] == "never"
    assert table.loc["helion_full_LFBOPatternSearch", "median s to 0.99x"] == "never"
    assert table.loc["tunebench_lfbo", "rounds: final vs cuBLAS (median)"] == "0.979 (3 of 3)"
    assert not any(run["finished"] for run in peer_runs.helion_runs(folder) if "_full_" in run["run"])
    before = peer_runs.rounds_table(pd.read_csv(folder / "rounds_1.csv")).set_index("run")["vs cuBLAS"]
    assert before[[f"tunebench_lfbo_seed{seed}" for seed in range(3)]].median() == 0.514


def test_recorded_runs_at_a_decode_shape():
    """At 32 x 28672 x 8192 our pointer GEMM's finals run above cuBLAS by Helion's timer in all three rounds, and lead
    every finished Helion run; Helion's finished full run ended short of cuBLAS by its own timer, the other was cut."""
    folder = SIDE_BY_SIDE.parent / "32x28672x8192"
    table = side_by_side_table(folder).set_index("arm")
    assert list(table.index) == ["helion_full_LFBOPatternSearch", "helion_quick_LFBOPatternSearch",
                                 "tunebench_matmul_lfbo_quick", "tunebench_matmul_lfbo"]
    assert table.loc["tunebench_matmul_lfbo", "median s to 1.0x"] == 8.5
    assert table.loc["helion_full_LFBOPatternSearch", "median s to 1.0x"] == "never"
    assert table.loc["helion_full_LFBOPatternSearch", "runs"] == 2
    finished = {run["run"]: run["finished"] for run in peer_runs.helion_runs(folder) if "_full_" in run["run"]}
    assert finished == {"helion_full_LFBOPatternSearch_seed0": True, "helion_full_LFBOPatternSearch_seed1": False}
    for rounds in peer_runs.rounds_files(folder):
        speed = peer_runs.rounds_table(pd.read_csv(rounds)).set_index("run")["vs cuBLAS"]
        ours = speed[speed.index.str.startswith("tunebench_matmul_")]
        theirs = speed[speed.index.str.startswith("helion_")]
        assert len(ours) == 6 and ours.min() > 1.0 and ours.min() > theirs.max()
    assert len(peer_runs.rounds_files(folder)) == 3


def write_trace(path: Path, strategy: str, latencies: list[float]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"strategy": strategy, "time_s": [1.0 + index for index in range(len(latencies))],
                  "setup_s": 0.5, "status": "ok", "latency_ms": latencies, "vendor_ms": 0.2,
                  "config_key": [f"key{index}" for index in range(len(latencies))]}).to_parquet(path)


def test_our_runs_name_the_kernel_their_trace_searched(tmp_path):
    """A trace's kernel comes from its file name; the pointer GEMM's runs say so, so they never share a TMA run's name
    in one seed's folder."""
    write_trace(tmp_path / "seed0" / "h200_matmul_tma_bfloat16_32x4096x4096.parquet", "lfbo", [0.3, 0.25])
    write_trace(tmp_path / "seed0" / "h200_bfloat16_32x4096x4096.parquet", "lfbo", [0.4, 0.5])
    tma, pointer = peer_runs.our_runs(sorted(tmp_path.glob("seed0/*.parquet"), reverse=True))
    assert (tma["run"], tma["kernel"], tma["config_key"]) == ("tunebench_lfbo_seed0", "matmul_tma", "key1")
    assert (pointer["run"], pointer["kernel"]) == ("tunebench_matmul_lfbo_seed0", "matmul")
    assert pointer["config_key"] == "key0"
    assert pointer["trace"].time_s.tolist() == [1.5, 2.5]
