"""The surrogate ablation: its definitions on hand-made pools (oracle, exact random baseline, the whole pool, the
diversity penalty, failure imputation, the paired bootstrap), seeded determinism on a recorded task, the notebook."""

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tunebench import report
from tunebench.space import IntRange, Space
from tunebench.study import tasks_of
from tunebench.surrogates import (ALL_TASKS, FAILURE_PENALTY, SURROGATES, RandomSelection, State, Surrogate,
                                  ablation, log_latency_targets, make_state, make_surrogate, picks, random_outcomes,
                                  score_state, summarize_ablation)

GEMM = "results/datasets/matmul_bfloat16_h100.parquet"
KERNEL_TUNER_A100 = "../shared/datasets/kerneltuner/convolution_A100.json.gz"
FIGURE = re.compile(r"<img[^>]*src=\"data:image/png;base64,")  # an output image (the page's CSS holds another PNG)
DATA_TABLE = re.compile(r"<table id=\"T_")


# -- a hand-made task -------------------------------------------------------------------------------------------------

def bowl_space() -> Space:
    """16 x 16 x 10 configs; `noise` does not change the latency, so configs differing in it are near duplicates."""
    return Space([IntRange("x", 0, 15), IntRange("y", 0, 15), IntRange("noise", 0, 9)], name="bowl")


def bowl_latency(config: dict) -> float:
    """A bowl around x = y = 3, noise = 0; the corner x, y >= 13 fails."""
    if config["x"] >= 13 and config["y"] >= 13:
        return math.inf
    return 1.0 + 0.1 * ((config["x"] - 3) ** 2 + (config["y"] - 3) ** 2) + 0.001 * config["noise"]


def bowl_state(pool: list[dict] | None = None, training_size: int = 60, pool_size: int = 80, seed: int = 0) -> State:
    """A training set drawn uniformly (failures included) and a pool of other configs, by default with the optimum."""
    space = bowl_space()
    drawn = space.sample(np.random.default_rng(seed), training_size + pool_size, unique=True)
    training = drawn[:training_size]
    if pool is None:
        pool = [{"x": 3, "y": 3, "noise": 0}] + [config for config in drawn[training_size:] if config["x"] != 3]
    taken = {space.key(config) for config in training}
    pool = [config for config in pool if space.key(config) not in taken]
    return State("bowl:1", seed, space, training, np.array([bowl_latency(c) for c in training]), pool,
                 np.array([bowl_latency(c) for c in pool]))


class Oracle(Surrogate):
    """Knows every latency: orders the pool fastest first (or slowest first, `reverse`)."""

    def __init__(self, space: Space, seed: int, reverse: bool = False) -> None:
        super().__init__(space, seed)
        self.reverse = reverse

    def fit(self, configs, latency_ms):
        return self

    def order(self, configs):
        latency = np.array([bowl_latency(config) for config in configs])
        latency = np.where(np.isfinite(latency), latency, 1e9)
        return np.argsort(-latency if self.reverse else latency, kind="stable")


# -- the definitions --------------------------------------------------------------------------------------------------

def test_picks_are_the_ceiling_of_the_percent_of_the_pool_and_at_least_one() -> None:
    assert [picks(1, 300), picks(0.1, 300), picks(10, 250), picks(33, 200), picks(100, 7)] == [3, 1, 25, 66, 7]
    assert picks(1, 301) == 4
    for percent in (0, -5, 100.5):
        with pytest.raises(ValueError, match="percent"):
            picks(percent, 10)


def test_an_oracle_reaches_the_pools_best_at_the_smallest_budget_and_its_reverse_does_not() -> None:
    state = bowl_state()
    pool_best = state.pool_ms.min()
    ceiling = max(0.0, state.incumbent_ms - pool_best) / state.incumbent_ms
    assert ceiling > 0, "the hand-made pool holds an improvement"
    oracle = score_state(state, Oracle(state.space, 0), percents=(0.5, 1, 100))
    assert oracle["picks"].tolist() == [1, 1, len(state.pool)]
    assert np.allclose(oracle["fraction_of_pool_best"], 1.0)
    assert np.allclose(oracle["improvement"], ceiling)
    assert np.allclose(oracle["best_picked_ms"], pool_best)
    worst = score_state(state, Oracle(state.space, 0, reverse=True), percents=(0.5, 100))
    assert worst["fraction_of_pool_best"].iloc[0] == 0.0, "the slowest first: a failure, fraction 0"
    assert worst["improvement"].iloc[0] == 0.0 and worst["improvement"].iloc[1] == pytest.approx(ceiling)


def test_random_selections_closed_form_is_the_average_over_every_subset() -> None:
    incumbent = 2.0
    pool = np.array([3.0, 1.5, np.inf, 1.5, 2.5, 0.5, np.inf, 1.0])  # ties, failures, better and worse than f*
    best, improvement, fraction = random_outcomes(pool, incumbent, range(1, pool.size + 1))
    for k in range(1, pool.size + 1):
        minima = np.array([pool[list(subset)].min() for subset in itertools.combinations(range(pool.size), k)])
        assert improvement[k - 1] == pytest.approx(np.mean(np.maximum(0, incumbent - minima) / incumbent), abs=1e-12)
        gains = np.where(np.isfinite(minima), pool.min() / minima, 0.0)
        assert fraction[k - 1] == pytest.approx(gains.mean(), abs=1e-12)
        assert best[k - 1] == (pytest.approx(minima.mean(), abs=1e-12) if k > 2 else math.inf)


def test_random_selection_scores_its_exact_expectation_which_its_permutations_average_to() -> None:
    state = bowl_state()
    exact = score_state(state, RandomSelection(state.space, 0), percents=(2, 10))
    pool_best = state.pool_ms.min()
    sampled = np.mean([[pool_best / state.pool_ms[RandomSelection(state.space, seed).order(state.pool)[:count]].min()
                        for count in exact["picks"]] for seed in range(3000)], axis=0)
    assert (exact["fraction_of_pool_best"] < 0.95).all(), "far enough from 1 for the comparison to mean something"
    assert np.allclose(exact["fraction_of_pool_best"], sampled, atol=0.01), (exact["fraction_of_pool_best"], sampled)


@pytest.mark.parametrize("name", list(SURROGATES))
def test_every_surrogate_gets_the_pools_best_from_the_whole_pool(name: str) -> None:
    state = bowl_state()
    assert not np.isfinite(state.training_ms).all(), "failures in the training set"
    frame = score_state(state, name, percents=(1, 100))
    whole = frame.iloc[-1]
    assert whole["picks"] == len(state.pool)
    assert whole["fraction_of_pool_best"] == pytest.approx(1.0, abs=1e-9)  # random's closed form rounds
    assert whole["improvement"] == pytest.approx(max(0.0, state.incumbent_ms - state.pool_ms.min())
                                                 / state.incumbent_ms)


@pytest.mark.parametrize("name", [name for name in SURROGATES if name != "random"])
def test_the_learned_surrogates_beat_random_selection_on_a_smooth_bowl(name: str) -> None:
    state = bowl_state()
    learned = score_state(state, name, percents=(5,))["fraction_of_pool_best"].iloc[0]
    exact_random = score_state(state, "random", percents=(5,))["fraction_of_pool_best"].iloc[0]
    assert learned > exact_random, f"{name} should rank a smooth bowl better than chance"


def test_the_diversity_penalty_moves_a_distinct_candidate_ahead_of_near_duplicates() -> None:
    duplicates = [{"x": 3, "y": 3, "noise": noise} for noise in range(10)]  # the optimum, ten times over
    distinct = [{"x": x, "y": y, "noise": 0} for x, y in [(2, 4), (4, 2), (1, 1), (5, 5), (8, 8), (12, 3), (3, 12)]]
    state = bowl_state(pool=duplicates + distinct, pool_size=0)
    is_duplicate = np.array([config["x"] == 3 and config["y"] == 3 for config in state.pool])

    def first_distinct(name: str) -> int:
        surrogate = make_surrogate(name, state.space, 1).fit(state.training, state.training_ms)
        return int(np.argmax(~is_duplicate[surrogate.order(state.pool)]))

    plain, diverse = first_distinct("lfbo"), first_distinct("lfbo_diverse")
    assert plain == is_duplicate.sum(), "by P(good) alone, every near duplicate of the optimum comes first"
    assert diverse < plain


def test_failed_training_configs_count_as_ten_times_the_slowest() -> None:
    assert FAILURE_PENALTY == 10.0
    assert np.allclose(log_latency_targets(np.array([1.0, 2.0, np.inf, np.nan])), np.log([1.0, 2.0, 20.0, 20.0]))
    with pytest.raises(ValueError, match="every config failed"):
        log_latency_targets(np.array([np.inf, np.nan]))


def test_the_summary_is_the_mean_with_a_paired_two_level_bootstrap_interval() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for task, level in (("a:1", 0.1), ("a:2", 0.5), ("b:1", 0.3)):
        for seed in range(4):
            value = level + 0.05 * rng.standard_normal()
            for surrogate, shift in (("random", 0.0), ("better", 0.02)):
                rows.append({"dataset": task.split(":")[0], "task": task, "seed": seed, "surrogate": surrogate,
                             "percent": 10, "improvement": value + shift, "fraction_of_pool_best": 0.9})
    summary = summarize_ablation(pd.DataFrame(rows), resamples=500)
    overall = summary[(summary["scope"] == ALL_TASKS) & (summary["metric"] == "improvement")].set_index("surrogate")
    values = pd.DataFrame(rows).query("surrogate == 'better'")["improvement"]
    assert overall.loc["better", "mean"] == pytest.approx(values.mean())
    assert overall.loc["better", "low"] < values.mean() < overall.loc["better", "high"]
    assert overall.loc["better", "high"] - overall.loc["better", "low"] > 0.1, "tasks differ: a wide interval"
    # every state gains exactly 0.02 over random: the paired interval collapses where an unpaired one could not
    assert overall.loc["better", ["minus_random", "minus_random_low", "minus_random_high"]].tolist() == \
        pytest.approx([0.02, 0.02, 0.02])
    assert overall.loc["random", "minus_random"] == 0
    constant = summary[summary["metric"] == "fraction_of_pool_best"]
    assert np.allclose(constant[["mean", "low", "high"]], 0.9)
    per_dataset = summary[(summary["scope"] == "b") & (summary["metric"] == "improvement")]
    assert set(per_dataset["tasks"]) == {1} and set(per_dataset["states"]) == {4}


# -- recorded tasks ---------------------------------------------------------------------------------------------------

def gemm_task():
    return tasks_of(report.repo_path(GEMM), [(1, 4096, 4096)])[0]


def test_states_and_scores_are_seeded() -> None:
    task = gemm_task()
    first = make_state(task, 3, training_size=100, pool_size=40)
    again = make_state(task, 3, training_size=100, pool_size=40)
    other = make_state(task, 4, training_size=100, pool_size=40)
    assert len(first.training) == 100 and len(first.pool) == 40
    assert first.pool == again.pool and first.training == again.training
    assert first.pool != other.pool and first.training != other.training
    training_keys = {first.space.key(config) for config in first.training}
    assert not training_keys & {first.space.key(config) for config in first.pool}, "the pool is unevaluated"
    for name in ("random_forest", "mlp", "lfbo_diverse"):
        pd.testing.assert_frame_equal(score_state(first, name), score_state(again, name))


def test_the_ablation_is_tidy_and_checks_its_arguments() -> None:
    results = ablation([gemm_task()], [0], surrogates=["random", "gradient_boosting"], percents=[10, 100],
                       pool_size=30, pool="uniform")
    assert len(results) == 2 * 2 and set(results["dataset"]) == {"matmul_bfloat16_h100"}
    assert set(results["pool_size"]) == {30} and results.query("percent == 10")["picks"].eq(3).all()
    with pytest.raises(ValueError, match="unknown surrogates"):
        ablation([gemm_task()], [0], surrogates=["gaussian_process"])
    with pytest.raises(ValueError, match="percent"):
        ablation([gemm_task()], [0], percents=[0])
    with pytest.raises(ValueError, match="unknown pool"):
        make_state(gemm_task(), 0, pool="everything")


def test_the_notebook_draws_both_curves_and_the_tables(tmp_path: Path) -> None:
    if not (report.REPO_ROOT.parent / "shared" / "datasets" / "kerneltuner" / "convolution_A100.json.gz").is_file():
        pytest.skip("the shared Kernel Tuner cache is not there")
    parameters = {"datasets": [GEMM, KERNEL_TUNER_A100], "shapes_per_dataset": 1, "seeds": 2, "pool_size": 40,
                  "percents": [5, 50, 100], "table_percents": [5, 50],
                  "surrogates": ["random", "random_forest", "lfbo_diverse"]}
    html = report.run_notebook(report.NOTEBOOK_DIR / "surrogate_ablation.py", tmp_path, parameters).read_text()
    assert len(FIGURE.findall(html)) == 2, "the improvement and fraction-of-pool-best curves"
    assert len(DATA_TABLE.findall(html)) == 2, "improvement and fraction of the pool's best over all tasks"
    assert "What is measured, exactly" in html and "4 states (2 tasks × 2 seeds) × 3 surrogates" in html
    assert "NVIDIA A100-PCIE-40GB" in html and "NVIDIA H100 80GB HBM3" in html, "provenance of each dataset"
    assert "Traceback" not in html
