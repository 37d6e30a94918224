"""The pipeline-selection cost benchmark on the synthetic compressed_matmul dataset of test_pipeline_selection: its
settings parse with clear errors, a run counts picks against the recording's best, and a second call resumes."""

import argparse
import importlib
import json
from pathlib import Path

import pandas as pd
import pytest

from test_pipeline_selection import synthetic_dataset
from tunebench.kernels.compressed_matmul.autotune import AutotuneSettings
from tunebench.measure.dataset import save_dataset

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def module(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # it imports compressed_mlp_chain beside it
    return importlib.import_module("pipeline_selection_cost")  # by name: its worker processes unpickle run_one


def test_settings_parse_and_bad_ones_are_named(module):
    assert module.parse_setting("lfbo_quick:64") == ("lfbo_quick", 64, 0, 0, False, False)
    assert module.parse_setting("lfbo_quick:128:30:2") == ("lfbo_quick", 128, 30, 2, False, False)
    assert module.parse_setting("pattern:128:transfer") == ("pattern", 128, 0, 0, True, False)
    assert module.parse_setting("pattern:128:30:1:transfer") == ("pattern", 128, 30, 1, True, False)
    assert module.parse_setting("lfbo_quick:128:30:2:neighbours") == ("lfbo_quick", 128, 30, 2, True, True)
    for bad in ("lfbo_quik:64", "pattern:0", "pattern", "pattern:x", "pattern:64:30", "pattern:64:0:1",
                "pattern:transfer", "pattern:64:transfer:30:1", "pattern:64:transfer:neighbours"):
        with pytest.raises(argparse.ArgumentTypeError, match=f"'{bad}' is not STRATEGY:EVALUATIONS"):
            module.parse_setting(bad)


def test_the_first_setting_is_the_autotuners_default(module):
    # the script's comment and docs/compressed_matmul.md call SETTINGS[0] the default; one leader since stop 100
    d = AutotuneSettings()
    default = (d.strategy, d.evaluations_per_pipeline, d.probe, d.leaders, d.transfer, d.neighbours)
    assert module.SETTINGS[0] == default == ("lfbo_quick", 128, 30, 1, True, True)
    assert ("lfbo_quick", 128, 30, 2, True, True) in module.SETTINGS[1:]  # the default before stop 100


def test_the_summary_takes_medians_and_the_worst_seed(module):
    runs = pd.DataFrame([{"strategy": "pattern", "per_pipeline": 8, "probe": 4, "leaders": 1, "transfer": True,
                          "neighbours": False, "seed": seed,
                          "evaluations": evaluations,
                          "search_s": 10.0 * seed, "picks": 9, "picks_at_best": at_best, "worst_step_ratio": ratio}
                         for seed, (evaluations, at_best, ratio) in enumerate([(100, 9, 1.0), (300, 7, 1.2),
                                                                               (200, 9, 1.0)])])
    row = module.summary(runs).iloc[0]
    assert row["evaluations (median)"] == "200" and row["simulated s (median)"] == "10"
    assert row["race"] == "probe 4, 1 go on" and row["transfer"] == "yes"
    assert row["picks at the recorded best (median, worst seed)"] == "9, 7 of 9"
    assert row["seeds with every pick at the best"] == "2 of 3"
    assert row["worst MLP step / best (worst seed)"] == "1.2000"
    assert module.summary(runs.assign(neighbours=True)).iloc[0]["transfer"] == "yes, + neighbours"


def test_exhaustive_runs_pick_every_best_and_a_second_call_resumes(module, tmp_path):
    dataset = tmp_path / "synthetic.parquet"
    save_dataset(synthetic_dataset(), dataset)
    out = tmp_path / "cost.md"
    arguments = ["--dataset", str(dataset), "--settings", "exhaustive:4000", "pattern:8", "--seeds", "2",
                 "--workers", "1", "--out", str(out)]
    module.main(arguments)
    runs = pd.read_csv(out.with_suffix(".csv"))
    exhaustive = runs[runs.strategy == "exhaustive"]
    assert (exhaustive.picks_at_best == exhaustive.picks).all() and (exhaustive.worst_step_ratio == 1.0).all()
    assert (runs[runs.strategy == "pattern"].evaluations < exhaustive.evaluations.min()).all()
    cached = out.with_suffix(".runs") / "pattern__8__seed1.json"
    edited = {**json.loads(cached.read_text()), "evaluations": 7}
    cached.write_text(json.dumps(edited))
    module.main(arguments)  # nothing is replayed again: the edited run is read back as it is
    assert pd.read_csv(out.with_suffix(".csv")).evaluations.tolist()[-1] == 7
    assert "| exhaustive | 4000 | none | no | 2 |" in out.read_text()
