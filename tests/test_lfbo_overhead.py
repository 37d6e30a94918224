"""benchmarks/lfbo_overhead.py: its two arms ask the same configs, its timing leaves LFBO as it found it, a rerun
measures only what is missing, and the table's ratios are the arms' medians."""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tunebench.search import make_strategy
from tunebench.search.lfbo import LFBOPatternSearch
from tunebench.study import Run, open_dataset, replay_environment, tasks_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # the scripts import their siblings
import lfbo_overhead  # noqa: E402

GEMM = Path(__file__).resolve().parents[1] / "results" / "datasets" / "matmul_bfloat16_h100.parquet"


def test_both_arms_ask_the_same_configs_and_a_rerun_measures_nothing(tmp_path, monkeypatch):
    methods = (LFBOPatternSearch.fit, LFBOPatternSearch.select, LFBOPatternSearch.candidates)
    run = Run("lfbo_quick", tasks_of(GEMM)[0], 0)
    per_run_csv = tmp_path / "per_run.csv"

    first = lfbo_overhead.measure([run], {}, per_run_csv)

    assert list(first["arm"]) == ["reference", "library"]
    assert first["arms_agree"].all() and first["matches_study"].isna().all()
    assert (first["replayed_with"] == replay_environment()).all()
    assert (first[[f"{part}_s" for part in lfbo_overhead.PARTS]] > 0).all().all()
    assert (first["strategy_s"] >= first[[f"{part}_s" for part in lfbo_overhead.PARTS]].sum(axis=1)).all()
    assert (LFBOPatternSearch.fit, LFBOPatternSearch.select, LFBOPatternSearch.candidates) == methods
    monkeypatch.setattr(lfbo_overhead, "replay", lambda *args: pytest.fail("a finished run was measured again"))
    again = lfbo_overhead.measure([run], {}, per_run_csv)
    assert again[["strategy", "task", "seed", "arm"]].equals(first[["strategy", "task", "seed", "arm"]])


def test_without_a_forest_the_reference_arm_picks_at_random_as_the_library_does():
    space = open_dataset(GEMM).space(tasks_of(GEMM)[0].shape)
    candidates = space.sample(np.random.default_rng(0), 12)
    picks = []
    for reference in (True, False):
        strategy = make_strategy("lfbo", space, seed=5)
        seconds = defaultdict(float)
        with lfbo_overhead.instrumented(reference, seconds):
            picks.append(strategy.select(None, candidates, 4))
        assert seconds["select_calls"] == 1
    assert picks[0] == picks[1] and len(picks[0]) == 4


def test_summary_table_gives_the_medians_of_each_arm_and_their_ratio():
    rows = [{"strategy": "lfbo", "task": f"t{i}", "seed": 0, "arm": arm, "strategy_s": seconds,
             "fit_s": seconds / 2, "select_s": seconds / 4, "candidates_s": seconds / 8}
            for i, (reference, library) in enumerate([(1.0, 0.5), (2.0, 1.5), (3.0, 2.0)])
            for arm, seconds in (("reference", reference), ("library", library))]
    per_run = pd.DataFrame(rows).assign(asks=5, fits=4, arms_agree=True, matches_study=None, replayed_with="here")
    table = lfbo_overhead.summary_table(per_run)
    assert table.loc[0, "runs"] == 3
    assert table.loc[0, "whole run: reference / library (ms)"] == "2000 / 1500"
    assert table.loc[0, "whole run: ratio"] == "0.75"
    assert table.loc[0, "fit: reference / library (ms)"] == "1000 / 750"
    text = lfbo_overhead.report(per_run, "python benchmarks/lfbo_overhead.py", tasks=3, seeds=1)
    assert "same configs in the same batches in 3 of 3 runs" in text and "0 of 0 runs it holds" in text
    assert "Replayed with (`study.replay_environment`): here (3 runs)." in text
    assert "Median asks and forest fits per run: lfbo 5 and 4." in text
