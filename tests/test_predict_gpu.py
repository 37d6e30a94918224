"""The dispatcher's measured mode on a real GPU: the deployed predictor's top k timed live for an unseen shape.

Apart from tests/test_predict.py because that file imports the search strategies (and with them optuna), which the
GPU image lacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunebench.predict import load_predictor

DEPLOYED = Path(__file__).resolve().parent.parent / "results" / "config_prediction" / "matmul_bfloat16_h100.predictor"


@pytest.mark.gpu
def test_timed_best_config_measures_the_deployed_predictors_top_k_on_the_gpu():
    from tunebench.measure.live import GpuBench, LiveEvaluator

    predictor = load_predictor(DEPLOYED)
    shape = (24, 3072, 1000)  # in no dataset
    with GpuBench("matmul", "bfloat16", compile_workers=4) as bench:
        pick = predictor.timed_best_config(shape, LiveEvaluator(bench, shape), k=4)
    assert [dict(result.config) for result in pick.results] == predictor.top_configs(shape, 4)
    assert all(result.ok for result in pick.results)  # ok: ran and matched the reference
    assert pick.latency_ms == min(result.latency_ms for result in pick.results)
