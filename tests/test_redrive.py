"""Re-driving a strategy through a recorded trace (tunebench.redrive) and the restart-patience benchmark built on it:
the recorded run followed to its end, a stopping rule stopped where driving it directly stops, a different search
flagged as diverged, trace keys read back as configs, and the benchmark's errors."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tunebench.kernels import get_kernel
from tunebench.measure.result import Result, Status
from tunebench.redrive import config_of_key_text, redrive
from tunebench.search.warm_start import warm_start
from tunebench.space import ConfigError, IntRange, PowerOfTwo, Space
from tunebench.study import key_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import restart_patience_live  # noqa: E402

SPACE = Space([PowerOfTwo("BLOCK_M", 16, 256), PowerOfTwo("BLOCK_N", 16, 256), IntRange("stages", 1, 4)], name="bowl")
SEEDS = [{"BLOCK_M": 64, "BLOCK_N": 64, "stages": 3}, {"BLOCK_M": 128, "BLOCK_N": 32, "stages": 2}]


def measure(config) -> Result:
    """A bowl with its floor at 64 x 32, 3 stages; 4 stages fail to compile."""
    if config["stages"] == 4:
        return Result(dict(config), Status.COMPILE_ERROR)
    latency = 1.0 + (math.log2(config["BLOCK_M"]) - 6) ** 2 + (math.log2(config["BLOCK_N"]) - 5) ** 2 \
        + 0.3 * abs(config["stages"] - 3)
    return Result(dict(config), Status.OK, latency_ms=latency, repeats_ms=(latency,))


def restarting(space: Space = SPACE, seed: int = 3, patience: int = 0, seeds=SEEDS):
    return warm_start("pattern", space, seeds, seed=seed, restart=True, restart_patience=patience,
                      initial_population=8)


def record(strategy, measure=measure, limit: int = 10_000) -> pd.DataFrame:
    """A live-like trace of `strategy` driven to its end (or `limit` evaluations): 0.1 s per evaluation."""
    rows = []
    for batch_index in range(1, 10_000):
        batch = strategy.ask()
        if not batch or len(rows) >= limit:
            break
        results = [measure(config) for config in batch]
        strategy.tell(results)
        for config, result in zip(batch, results):
            rows.append({"strategy": "warm:pattern:restart", "eval_index": len(rows) + 1, "batch": batch_index,
                         "config_key": key_text(strategy.space.key(config)), "status": result.status.value,
                         "latency_ms": result.latency_ms if result.ok else math.nan, "time_s": 0.1 * (len(rows) + 1)})
    trace = pd.DataFrame(rows)
    trace["best_ms"] = trace.latency_ms.cummin()
    trace["vendor_ms"] = 1.0
    return trace


def test_the_recorded_run_is_followed_to_its_end_and_a_cut_trace_to_its_cut():
    trace = record(restarting())
    whole = redrive(restarting(), trace)
    assert (whole.outcome, whole.evaluations, whole.batches) == ("stopped", len(trace), trace.batch.max())
    assert whole.best_ms == trace.latency_ms.min() == 1.0 and whole.seconds == pytest.approx(trace.time_s.max())
    cut = trace[trace.batch <= 3]
    assert redrive(restarting(), cut).outcome == "trace ended"


def test_a_stopping_rule_stops_where_driving_it_directly_stops_and_another_search_diverges():
    trace = record(restarting())
    direct = record(restarting(patience=1))
    assert len(direct) < len(trace), "the patience must stop before the unlimited restart for this test to mean much"
    patient = redrive(restarting(patience=1), trace)
    assert (patient.outcome, patient.evaluations) == ("stopped", len(direct))
    assert patient.seconds == pytest.approx(trace.time_s.iloc[len(direct) - 1])
    other = redrive(restarting(seed=4), trace)
    assert other.outcome == "diverged" and len(SEEDS) <= other.evaluations < len(trace)


def test_trace_keys_read_back_as_configs_and_bad_ones_are_named():
    gemm = get_kernel("matmul").config_space()
    for config in SEEDS:
        assert config_of_key_text(SPACE, key_text(SPACE.key(config))) == config
    config = gemm.sample(np.random.default_rng(0), 1)[0]
    assert config_of_key_text(gemm, key_text(gemm.key(config))) == config
    with pytest.raises(ConfigError, match="config key '64,64' has 2 values; space 'bowl' has 3 parameters"):
        config_of_key_text(SPACE, "64,64")
    with pytest.raises(ConfigError, match=r"'48' is not a value of BLOCK_M \(16, 32, 64, 128, 256\)"):
        config_of_key_text(SPACE, "48,64,3")


def test_the_benchmark_re_drives_each_trace_and_refuses_bad_input(tmp_path, capsys):
    gemm = get_kernel("matmul").config_space()
    seeds = gemm.sample(np.random.default_rng(1), 4, unique=True)

    def gemm_measure(config) -> Result:
        latency = 1.0 + abs(math.log2(config["BLOCK_M"]) - 7) + abs(math.log2(config["BLOCK_N"]) - 7)
        return Result(dict(config), Status.OK, latency_ms=latency, repeats_ms=(latency,))

    trace = record(warm_start("pattern", gemm, seeds, seed=0, restart=True), gemm_measure, limit=400)
    path = tmp_path / "h200_bfloat16_8x64x64.parquet"
    trace.to_parquet(path)
    out = tmp_path / "patience.md"
    assert restart_patience_live.main([str(path), "--strategy", "warm:pattern:restart", "--patience", "1",
                                       "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# Restart patience, re-driven on 1 recorded live runs") and "| 8x64x64 |" in text
    row = restart_patience_live.patience_rows(path, "warm:pattern:restart", [1], "matmul", 0)[0]
    assert row["outcome"] == "stopped" and row["evaluations"] < len(trace) and row["best kept"] <= 1
    assert f"| 1 | {row['outcome']} | {row['evaluations']} |" in text
    with pytest.raises(ValueError, match="holds no 'warm:lfbo:restart' run; it holds warm:pattern:restart"):
        restart_patience_live.patience_rows(path, "warm:lfbo:restart", [1], "matmul", 0)
    for argv, message in (([str(tmp_path / "none.parquet")], "no such trace"),
                          ([str(path), "--patience", "0"], "--patience 0: a patience counts fresh runs"),
                          ([str(path), "--strategy", "warm:lfbo"], "give the recorded run that restarts without")):
        with pytest.raises(SystemExit):
            restart_patience_live.main(argv)
        assert message in capsys.readouterr().err
