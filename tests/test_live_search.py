"""Live searches without a GPU: benchmarks/live_search.py's strategy names, warm start's first batch and the times
each result came, its refusal to overwrite a recorded trace, its race of the two GEMM families on a stand-in bench,
and tunebench.live_traces' summary of one shape's traces and medians over shapes."""

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tunebench.kernels import get_kernel
from tunebench.live_traces import across_shapes, summary_rows
from tunebench.measure.result import Result, Status
from tunebench.study import key_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import live_search  # noqa: E402
import stand_in_bench  # noqa: E402


def test_strategy_names_are_registered_and_a_warm_start_needs_a_predictor():
    live_search.check_strategy_names(["lfbo", "warm:pattern", "warm:lfbo:restart", "warm:lfbo:restart2"],
                                     Path("model.predictor"))
    for bad in ("warm:lfbo:restart0", "warm:lfbo:restarts", "warm:lfbo:restart:1", "warm:"):
        with pytest.raises(ValueError, match=f"unknown strategy '{bad}'.*:restart<n> \\(n >= 1\\)"):
            live_search.check_strategy_names([bad], Path("model.predictor"))
    with pytest.raises(ValueError, match="unknown strategy 'warm:nope:restart'"):
        live_search.check_strategy_names(["warm:nope:restart"], Path("model.predictor"))
    with pytest.raises(ValueError, match="unknown strategy 'lfbo:restart'"):
        live_search.check_strategy_names(["lfbo:restart"], Path("model.predictor"))
    with pytest.raises(ValueError, match="unknown strategy 'warm:nope'; known: .*lfbo"):
        live_search.check_strategy_names(["warm:nope"], Path("model.predictor"))
    with pytest.raises(ValueError, match="strategy 'warm:lfbo' is warm-started by a predictor: give --predictor"):
        live_search.check_strategy_names(["lfbo", "warm:lfbo"], None)


def test_a_strategy_of_ones_own_runs_live_by_its_import_path_cold_or_warm(monkeypatch):
    monkeypatch.setattr(sys, "path", [str(Path(__file__).resolve().parents[1] / "examples"), *sys.path])
    own = "iterated_local_search.IteratedLocalSearch"
    live_search.check_strategy_names([own, f"warm:{own}", f"warm:{own}:restart1"], Path("model.predictor"))
    assert live_search.parse_strategy_name(f"warm:{own}:restart") == (own, {"restart": True, "restart_patience": 0})
    with pytest.raises(ValueError, match="strategy 'no_such_module.Search': cannot import module 'no_such_module'"):
        live_search.check_strategy_names(["warm:no_such_module.Search"], Path("model.predictor"))
    space = get_kernel("matmul").config_space()
    seeds = space.sample(np.random.default_rng(3), 4, unique=True)
    warm = live_search.live_strategy(f"warm:{own}", space, 0, seeds)
    assert [space.key(config) for config in warm.ask()[:4]] == [space.key(config) for config in seeds]


def test_a_warm_start_measures_the_predictors_configs_first_and_a_cold_one_does_not():
    space = get_kernel("matmul").config_space()
    seeds = space.sample(np.random.default_rng(3), 4, unique=True)
    warm = live_search.live_strategy("warm:lfbo", space, 0, seeds)
    assert warm.ask() == seeds and not warm.settings.restart
    restarting = live_search.live_strategy("warm:lfbo:restart", space, 0, seeds)
    assert restarting.ask() == seeds and restarting.settings.restart and restarting.settings.restart_patience == 0
    patient = live_search.live_strategy("warm:lfbo:restart12", space, 0, seeds)
    assert patient.settings.restart and patient.settings.restart_patience == 12 and patient.settings.inner == "lfbo"
    cold = live_search.live_strategy("lfbo", space, 0, seeds)
    assert cold.ask() != seeds


def _traces():
    return pd.DataFrame({"strategy": ["cold"] * 4 + ["warm"] * 3, "vendor_ms": 1.0,
                         "setup_s": [5.0] * 4 + [6.0] * 3, "time_s": [1.0, 2.0, 3.0, 4.0, 1.5, 2.5, 3.5],
                         "batch": [1, 1, 2, 2, 1, 1, 2],
                         "best_ms": [4.0, 2.0, 1.25, 1.0, 1.1, 1.01, 1.01]})


def test_the_summary_counts_evaluations_and_seconds_to_each_fraction():
    trace = _traces()
    rows = summary_rows(trace).set_index("strategy")
    assert rows.loc["cold", "evals to 0.99 of run's best"] == 4 and rows.loc["warm", "evals to 0.99 of run's best"] == 2
    assert rows.loc["warm", "s to 0.99 of run's best"] == 2.5 and rows.loc["warm", "best vs run's best"] == 0.99
    assert rows.loc["cold", "s to 0.5x"] == 2.0 and rows.loc["warm", "s to 0.5x"] == 1.5
    assert rows.loc["cold", "s to 0.95x"] == 4.0 and rows.loc["warm", "s to 0.95x"] == 2.5
    assert rows.loc["warm", "evaluations"] == 3 and rows.loc["warm", "setup_s"] == 6.0
    first_evaluation, first_batch = "first evaluation vs run's best", "first batch vs run's best"
    assert rows.loc["cold", first_evaluation] == 0.25 and rows.loc["cold", first_batch] == 0.5
    assert rows.loc["warm", first_evaluation] == 0.909 and rows.loc["warm", first_batch] == 0.99
    assert rows.loc["cold", "first batch s"] == 2.0 and rows.loc["warm", "first batch s"] == 2.5
    # cold ends at 1.0, reached at 4.0 s; warm at 1.01, reached at 2.5 s (its first 1.1 is more than 1 % slower)
    assert rows.loc["cold", "s to 0.99 of its own best"] == 4.0 and rows.loc["warm", "s to 0.99 of its own best"] == 2.5

    slower = trace.assign(best_ms=trace.best_ms.where(trace.strategy == "cold", 1.02)).drop(columns="setup_s")
    rows = summary_rows(slower).set_index("strategy")
    assert np.isnan(rows.loc["warm", "evals to 0.99 of run's best"]) and rows.loc["warm", "best vs run's best"] == 0.98
    assert np.isnan(rows.loc["warm", "setup_s"]), "a trace recorded without setup_s says so"


def test_the_medians_over_shapes_count_a_shape_never_reached_as_the_slowest(tmp_path):
    first, second = _traces(), _traces()
    second.loc[second.strategy == "warm", "best_ms"] = 1.02  # warm never reaches 0.99 of cold's 1.0 here
    third = _traces().assign(best_ms=lambda frame: frame.best_ms.where(frame.strategy == "warm", 9.0))
    paths = []
    for index, frame in enumerate((first, second, third)):
        paths.append(tmp_path / f"shape{index}.parquet")
        frame.to_parquet(paths[-1])
    text = live_search.summarize(paths, tmp_path / "summary.md", "the command")
    rows = across_shapes([summary_rows(pd.read_parquet(path)) for path in paths])
    rows = rows.set_index("strategy")
    assert rows.loc["warm", "median evals to 0.99 of run's best"] == 2  # 2, never, 2
    assert rows.loc["cold", "median evals to 0.99 of run's best"] == 4  # 4, 4, never
    assert rows.loc["warm", "shapes within 20 evals"] == 2 and rows.loc["warm", "shapes never"] == 1
    assert rows.loc["cold", "shapes never"] == 1 and rows.loc["cold", "shapes"] == 3
    assert rows.loc["cold", "median s to 0.99 of its own best"] == 4.0  # 4.0, 4.0, 1.0 (9.0 all along)
    assert rows.loc["warm", "median s to 0.99 of its own best"] == 2.5  # 2.5, 1.5 (1.02 all along), 2.5
    assert rows.loc["warm", "median search_s"] == 3.5
    # the warm start's first pick: 1.0 / 1.1, 1.0 / 1.02 (cold's best), 1.01 / 1.1 (its own best, cold at 9.0)
    assert rows.loc["warm", "mean first evaluation vs run's best"] == round((0.909 + 0.98 + 0.918) / 3, 3)
    assert rows.loc["warm", "min first evaluation vs run's best"] == 0.909
    assert "Command: `the command`" in text and f"## {tmp_path.name}/shape2" in text
    assert text.startswith("# Live search: 3 traces of 3 shape(s)") and (tmp_path / "summary.md").read_text() == text
    (tmp_path / "seed1").mkdir()
    first.to_parquet(tmp_path / "seed1" / "shape0.parquet")  # another seed's trace of the first shape
    repeated = live_search.summarize([paths[0], tmp_path / "seed1" / "shape0.parquet"], tmp_path / "two.md", "x")
    assert repeated.startswith("# Live search: 2 traces of 1 shape(s)") and "## seed1/shape0" in repeated


def test_the_trace_gets_when_each_result_came_and_its_compile_and_benchmark_seconds():
    space = get_kernel("matmul").config_space()
    configs = space.sample(np.random.default_rng(0), 3, unique=True)
    keys = [key_text(space.key(config)) for config in configs]
    trace = pd.DataFrame({"eval_index": [1, 2, 3], "batch": [1, 1, 2], "time_s": [2.0, 2.0, 3.0], "config_key": keys})
    measured = [(configs[1], 1.5, Result(configs[1], Status.OK, latency_ms=1.0, compile_s=1.2, bench_s=0.1)),
                (configs[0], 1.9, Result(configs[0], Status.COMPILE_ERROR, compile_s=0.4)),
                (configs[2], 2.8, Result(configs[2], Status.OK, latency_ms=2.0, compile_s=0.9, bench_s=0.2))]
    timed = live_search.with_result_times(trace, measured, space)
    assert list(timed.config_key) == keys and list(timed.time_s) == [2.0, 2.0, 3.0]  # the trace as it was
    assert list(timed.result_s) == [1.9, 1.5, 2.8]
    assert list(timed.compile_s) == [0.4, 1.2, 0.9] and list(timed.bench_s) == [0.0, 0.1, 0.2]


def test_a_run_refuses_an_out_folder_that_holds_a_trace_it_would_overwrite(tmp_path, monkeypatch, capsys):
    (tmp_path / "h200_matmul_tma_bfloat16_768x4096x14336.parquet").write_bytes(b"")
    (tmp_path / "h200_bfloat16_256x4096x4096.parquet").write_bytes(b"")
    live_search.check_no_trace_yet(tmp_path, "matmul", "bfloat16", [(768, 4096, 14336)])  # the pointer GEMM's: none
    live_search.check_no_trace_yet(tmp_path / "seed1", "matmul_tma", "bfloat16", [(768, 4096, 14336)])
    monkeypatch.setattr(sys, "argv", ["live_search.py", "--kernel", "matmul_tma", "--shapes", "768x4096x14336",
                                      "--seconds", "1", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        live_search.main()
    error = capsys.readouterr().err
    assert "already holds" in error and "h200_matmul_tma_bfloat16_768x4096x14336.parquet" in error
    assert "h200_bfloat16_256x4096x4096" not in error


class RaceBench(stand_in_bench.StandInBench):
    """Either GEMM family on the stand-in: the TMA GEMM's configs twice as fast as the pointer GEMM's."""

    def __init__(self, kernel_name, dtype, **kwargs):
        super().__init__(kernel_name, dtype, **kwargs)
        self.kernel = get_kernel(kernel_name)
        self.base_ms = 0.5 if kernel_name == "matmul_tma" else 1.0

    def prepare(self, shape):
        return None

    def latency_ms(self, config, shape):
        return self.base_ms * (1 + sum(self.space.key(config)) % 7 / 100)


def test_a_live_race_probes_both_families_then_searches_the_faster_one_alone():
    # 2 s: the TMA GEMM's first ask enumerates its 11,092 configs (about 0.7 s on a 2-core CI machine)
    trace, vendor_ms, setup_s, provenance = live_search.race_live("random", (64, 256, 512), "bfloat16", 2.0, 0, 1,
                                                                  0.10, make_bench=RaceBench)
    families = trace.drop_duplicates("batch")["family"].tolist()
    assert families[:2] == ["pointer", "TMA"] and set(families[2:]) == {"TMA"} and len(families) > 2
    assert trace["batch"].is_monotonic_increasing and trace["time_s"].is_monotonic_increasing
    assert trace["best_ms"].iloc[-1] < 0.54 and vendor_ms == 1.0 and setup_s >= 0
    assert provenance["gpu_name"] == "stand-in" and set(trace["status"]) == {"ok"} and trace["config_key"].notna().all()


@pytest.mark.parametrize("arguments, message", [
    (["--shapes", "4x4100x4096"], "N=4100 must be a multiple of 8"),
    (["--race-margin", "-0.1"], "--race-margin >= 0, got 1 and -0.1"),
    (["--probe-batches", "0"], "--probe-batches must be >= 1"),
    (["--strategies", "warm:lfbo", "--predictor", "m.predictor"], "--kernel both races two"),
])
def test_a_race_run_refuses_bad_arguments_before_any_gpu_work(arguments, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["live_search.py", "--kernel", "both", "--out", str(tmp_path), *arguments])
    with pytest.raises(SystemExit):
        live_search.main()
    assert message in capsys.readouterr().err


def test_a_race_refuses_warm_starts_and_shapes_the_tma_gemm_cannot_run():
    with pytest.raises(ValueError, match="predictor of one kernel family; --kernel both races two"):
        live_search.check_strategy_names(["lfbo", "warm:lfbo"], Path("model.predictor"), "both")
    live_search.check_strategy_names(["lfbo", "pattern"], None, "both")
    assert live_search.check_shape("both", (4, 4096, 4096)) == (4, 4096, 4096)
    with pytest.raises(ValueError, match="N=4100 must be a multiple of 8"):
        live_search.check_shape("both", (4, 4100, 4096))
    assert live_search.check_shape("matmul", (4, 4100, 4096)) == (4, 4100, 4096)


def test_a_race_writes_one_trace_and_table_per_shape(tmp_path, monkeypatch):
    def race_live(name, shape, dtype, seconds, seed, probe_batches, margin):
        trace = pd.DataFrame({"family": ["pointer", "TMA", "TMA"], "eval_index": [1, 2, 3], "batch": [1, 2, 3],
                              "time_s": [1.0, 2.0, 3.0], "latency_ms": [2.0, 1.0, 0.8], "best_ms": [2.0, 1.0, 0.8]})
        return trace, 0.9, 0.5, {"gpu_name": "NVIDIA H100 80GB HBM3", "command": "the command", "date": "today",
                                 "torch": "2.11", "triton": "3.6"}

    monkeypatch.setattr(live_search, "race_live", race_live)
    arguments = live_search.argparse.Namespace(strategies=["lfbo", "pattern"], dtype="bfloat16", seconds=10.0, seed=0,
                                                probe_batches=1, race_margin=0.1, out=tmp_path)
    live_search.race_shape(arguments, (64, 256, 512))
    frame = pd.read_parquet(tmp_path / "h100_both_bfloat16_64x256x512.parquet")
    assert list(frame["strategy"].unique()) == ["race:lfbo", "race:pattern"] and len(frame) == 6
    text = (tmp_path / "h100_both_bfloat16_64x256x512.md").read_text()
    assert "| race:lfbo |" in text and "TMA 2, pointer 1" in text and "within 10% of the leader" in text
