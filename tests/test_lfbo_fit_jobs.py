"""LFBO's forest fit at several n_jobs (benchmarks/lfbo_fit_jobs.py): the training sets it keeps are the ones LFBO's
fits see, and its summary's medians and speed-ups (a few seconds: one short replay)."""

import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from lfbo_fit_jobs import DATASET, measure, summary, training_sets  # noqa: E402
from tunebench.search.lfbo import LFBOPatternSearch  # noqa: E402


def test_the_kept_training_sets_grow_through_a_run_and_score_the_same_at_two_n_jobs():
    library_fit = LFBOPatternSearch.fit
    sets = training_sets(DATASET, tasks=1, seeds=1, presets=("lfbo_quick",))
    assert LFBOPatternSearch.fit is library_fit  # the replay's wrapper is taken off again
    rows = [len(one.labels) for one in sets]
    assert len(sets) >= 2 and rows[0] == 30 and rows == sorted(rows)  # lfbo_quick fits first on its 30 configs
    assert all(one.run == "lfbo_quick/" + sets[0].run.split("/")[1] + "/0" and one.n_trees == 100 for one in sets)
    assert all(0 < one.labels.sum() < len(one.labels) for one in sets)
    per_fit, same = measure(sets[:2], jobs=[1, 2], rounds=1)
    assert same == 2
    assert sorted(per_fit["n_jobs"].unique()) == [1, 2] and len(per_fit) == 4
    assert (per_fit["wall_s"] > 0).all() and (per_fit["cpu_s"] > 0).all()


def test_the_summary_gives_medians_per_n_jobs_speed_ups_over_one_job_and_a_run_s_summed_fits():
    per_fit = pd.DataFrame({"run": ["a", "a", "b", "a", "a", "b"], "rows": 0,
                            "n_jobs": [1, 1, 1, 4, 4, 4],
                            "wall_s": [0.1, 0.3, 0.2, 0.05, 0.15, 0.1], "cpu_s": [0.1, 0.3, 0.2, 0.4, 0.4, 0.4]})
    table = summary(per_fit).set_index("n_jobs")
    assert table.loc[1, "fit wall (ms, median)"] == 200 and table.loc[4, "fit wall (ms, median)"] == 100
    assert table.loc[4, "fit CPU (ms, median)"] == 400
    assert table.loc[1, "wall speed-up over n_jobs 1"] == 1 and table.loc[4, "wall speed-up over n_jobs 1"] == 2
    assert np.isclose(table.loc[1, "a run's fits, wall (ms, median over runs)"], 300)  # runs: a 400, b 200
