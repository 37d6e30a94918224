"""The stratified strategy (one inner run per value of a parameter) on the recorded compressed_matmul sweep: each
pipeline's run spends its own budget, in turn or interleaved, exactly as separate runs would, and bad settings fail
clearly."""

import re
from pathlib import Path

import pytest

from tunebench.kernels.compressed_matmul.pipelines import PIPELINES
from tunebench.measure.dataset import load_dataset
from tunebench.measure.replay import ReplayEvaluator
from tunebench.search import make_strategy
from tunebench.search.stratified import Stratified
from tunebench.study import Budget, key_text, run_search

DATASET = Path(__file__).resolve().parents[1] / "results/datasets/compressed_matmul_bfloat16_h100.parquet"
SHAPE = (1, 4096, 14336)  # Llama-3.1-8B's down projection at batch 1: direct_palette, the last pipeline, wins
STRATIFIED = "tunebench.search.stratified.Stratified"


@pytest.fixture(scope="module")
def dataset():
    return load_dataset(DATASET)


def pipelines_of(trace) -> list[str]:
    return [key.split(",")[0] for key in trace.config_key]


def stratified_trace(dataset, seed=0, **settings):
    evaluator = ReplayEvaluator(dataset, SHAPE)
    return run_search(make_strategy(STRATIFIED, evaluator.space, seed=seed, **settings), evaluator, Budget(10_000))


def test_each_pipeline_runs_in_turn_within_its_budget(dataset):
    trace = stratified_trace(dataset, evaluations_per_stratum=20)
    order = [PIPELINES.index(pipeline) for pipeline in pipelines_of(trace)]
    assert order == sorted(order) and set(order) == set(range(len(PIPELINES)))
    counts = {pipeline: pipelines_of(trace).count(pipeline) for pipeline in PIPELINES}
    assert all(count <= 20 for count in counts.values()) and counts["direct_palette"] == 20


@pytest.mark.parametrize("inner, per_stratum", [("pattern", 20), ("pattern", 128), ("lfbo_quick", 50)])
def test_a_stratum_measures_what_a_separate_run_on_its_part_of_the_space_measures(dataset, inner, per_stratum):
    """The reference is the loop the autotuner ran before it used Stratified: one run_search per pipeline, each over
    the space restricted to that pipeline, under a budget of `per_stratum` unique evaluations, same seed."""
    space = ReplayEvaluator(dataset, SHAPE).space
    configs = space.enumerate()
    expected = []
    for pipeline in PIPELINES:
        evaluator = ReplayEvaluator(dataset, SHAPE)
        part = space.restrict([space.key(c) for c in configs if c["pipeline"] == pipeline], pipeline)
        expected += run_search(make_strategy(inner, part, seed=3), evaluator, Budget(per_stratum)).config_key.tolist()
    trace = stratified_trace(dataset, seed=3, inner=inner, evaluations_per_stratum=per_stratum)
    assert trace.config_key.tolist() == expected


def test_interleaved_runs_measure_the_same_configs_and_reach_every_pipeline_sooner(dataset):
    in_turn = stratified_trace(dataset, evaluations_per_stratum=128)
    interleaved = stratified_trace(dataset, evaluations_per_stratum=128, interleave=True)
    assert sorted(interleaved.config_key) == sorted(in_turn.config_key)
    # decode_then_cublas has 3 configs here; each other pipeline's first batch is pattern search's 100 random ones
    assert pipelines_of(interleaved).index("direct_palette") == 3 + 100 + 100
    assert pipelines_of(in_turn).index("direct_palette") == 3 + 128 + 128
    assert interleaved.best_ms.min() == in_turn.best_ms.min()


def test_a_race_probes_every_pipeline_then_lets_only_the_leaders_go_on(dataset):
    trace = stratified_trace(dataset, inner="lfbo_quick", evaluations_per_stratum=128, probe=30, leaders=1)
    counts = {pipeline: pipelines_of(trace).count(pipeline) for pipeline in PIPELINES}
    probed = trace.iloc[:3 + 3 * 30]  # decode_then_cublas's 3 configs, then each other pipeline's first 30
    assert counts["decode_then_cublas"] == 3 and sorted(counts.values())[1:3] == [30, 30]
    leader = max(counts, key=counts.get)
    assert 30 < counts[leader] <= 128 and set(pipelines_of(trace)[3 + 3 * 30:]) == {leader}
    fastest = {pipeline: probed.latency_ms[[key.startswith(pipeline + ",") for key in probed.config_key]].min()
               for pipeline in PIPELINES[1:]}
    assert leader == min(fastest, key=fastest.get)


def test_strata_follow_the_parameters_values_and_skip_empty_ones(dataset):
    space = ReplayEvaluator(dataset, SHAPE).space
    strategy = Stratified(space)
    assert list(strategy.strata) == list(PIPELINES)
    only_two = space.restrict([space.key(c) for c in space.enumerate() if c["pipeline"] in PIPELINES[2:]], "two")
    assert list(Stratified(only_two).strata) == list(PIPELINES[2:])


@pytest.mark.parametrize("settings, message", [
    ({"parameter": "pipelines"}, "parameter='pipelines' is not a parameter of this space; allowed: pipeline"),
    ({"evaluations_per_stratum": 0}, "evaluations_per_stratum=0; allowed: >= 1"),
    ({"inner": "patern"}, "unknown strategy 'patern'"),
    ({"leaders": 1}, "leaders=1, probe=0; allowed: leaders 0 (no race), or leaders >= 1 with probe >= 1"),
])
def test_bad_settings_are_named(dataset, settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make_strategy(STRATIFIED, ReplayEvaluator(dataset, SHAPE).space, **settings)


def test_seeds_are_measured_first_in_their_own_stratum_and_invalid_ones_are_skipped(dataset):
    """Two direct_palette seeds and one decode_exponents seed: each stratum's run measures its own seeds before anything
    else; a seed the recording does not hold at this shape (an unrecorded tile) is left out, not an error."""
    evaluator = ReplayEvaluator(dataset, SHAPE)
    configs = evaluator.space.enumerate()
    palette = [c for c in configs if c["pipeline"] == "direct_palette"][-2:]
    exponents = [c for c in configs if c["pipeline"] == "decode_exponents"][:1]
    unrecorded = {**palette[0], "BLOCK_N": 12345}
    strategy = Stratified(evaluator.space, 0, Stratified.Settings(evaluations_per_stratum=20),
                          seeds=[*palette, unrecorded, *exponents])
    keys = run_search(strategy, evaluator, Budget(10_000)).config_key.tolist()
    by_pipeline = {pipeline: [key for key in keys if key.split(",")[0] == pipeline] for pipeline in PIPELINES}
    assert by_pipeline["direct_palette"][:2] == [key_text(evaluator.space.key(c)) for c in palette]
    assert by_pipeline["decode_exponents"][0] == key_text(evaluator.space.key(exponents[0]))
    assert all(len(keys) <= 20 for keys in by_pipeline.values())
