"""Search strategies: one conformance battery run over every registered strategy and the example of a strategy
written outside tunebench, a planted-optimum check, and unit tests of the LFBO fixes and the registry. Run as a
script, it prints traces for the hash-seed test."""

import itertools
import json
import math
import os
import re
import subprocess
import sys
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from tunebench.measure.result import Result, Status
from tunebench.search import STRATEGIES, Strategy, check_strategy_names, make_strategy
from tunebench.search.base import StrategySettings
from tunebench.search.lfbo import LFBOPatternSearch, forest_scores, training_set
from tunebench.space import Choice, Constraint, Flag, IntRange, Ordinal, PowerOfTwo, Space

try:
    import cmaes  # noqa: F401

    HAS_CMAES = True
except ImportError:
    HAS_CMAES = False

NEEDS_CMAES = pytest.mark.skipif(not HAS_CMAES, reason="optuna_cmaes needs the cmaes package, not installed")


REPO = Path(__file__).resolve().parents[1]
# The example of a strategy written outside tunebench (examples/), named by its import path as a user names theirs.
sys.path.insert(0, str(REPO / "examples"))
EXAMPLE = "iterated_local_search.IteratedLocalSearch"
TESTED = (*STRATEGIES, EXAMPLE)


def strategy_params(names=TESTED):
    return [pytest.param(name, marks=NEEDS_CMAES) if name == "optuna_cmaes" else name for name in names]


# ---------------------------------------------------------------------------------------------
# Two synthetic tasks and a minimal study runner
# ---------------------------------------------------------------------------------------------

def conformance_space() -> Space:
    """384 valid configs of all five parameter kinds; a constraint removes 48 of 432."""
    return Space(
        [
            PowerOfTwo("BLOCK_M", 16, 128),
            PowerOfTwo("BLOCK_N", 32, 128),
            Ordinal("num_warps", (2, 4, 8)),
            IntRange("num_stages", 1, 3),
            Choice("layout", ("row", "col")),
            Flag("unroll"),
        ],
        [Constraint("tile", lambda c: c["BLOCK_M"] * c["BLOCK_N"] * c["num_stages"] <= 16384, "tile x stages <= 16K")],
        name="conformance",
    )


def conformance_latency(config: dict) -> Result:
    """A bowl around (64, 64, 4 warps, 2 stages, col, unroll). Two failing regions: 8 warps on a tile of
    <= 1024 elements, and a row layout without unrolling (a quarter of the space, met by every strategy)."""
    if config["num_warps"] == 8 and config["BLOCK_M"] * config["BLOCK_N"] <= 1024:
        return Result(config, Status.COMPILE_ERROR, error="too few elements per thread")
    if config["layout"] == "row" and not config["unroll"]:
        return Result(config, Status.COMPILE_ERROR, error="row layout needs unrolling")
    distance = (
        (math.log2(config["BLOCK_M"]) - 6) ** 2
        + (math.log2(config["BLOCK_N"]) - 6) ** 2
        + (math.log2(config["num_warps"]) - 2) ** 2
        + (config["num_stages"] - 2) ** 2
    )
    latency = 1.0 + 0.25 * distance + 0.3 * (config["layout"] == "row") + 0.1 * (not config["unroll"])
    return Result(config, Status.OK, latency_ms=latency, repeats_ms=(latency,))


def bowl_space() -> Space:
    """198 valid configs: three block sizes and num_warps, with a tile-volume constraint."""
    return Space(
        [
            PowerOfTwo("BLOCK_M", 16, 256),
            PowerOfTwo("BLOCK_N", 16, 256),
            PowerOfTwo("BLOCK_K", 16, 128),
            Ordinal("num_warps", (2, 4, 8)),
        ],
        [Constraint("tile", lambda c: c["BLOCK_M"] * c["BLOCK_N"] * c["BLOCK_K"] <= 2**18, "tile volume <= 256K")],
        name="bowl",
    )


BOWL_OPTIMUM = {"BLOCK_M": 128, "BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 8}  # off the centre of the box


def bowl_latency(config: dict) -> Result:
    """A smooth bowl in log2 space with its unique minimum at BOWL_OPTIMUM; 8 warps on tiny tiles fail."""
    if config["num_warps"] == 8 and config["BLOCK_M"] * config["BLOCK_N"] <= 1024:
        return Result(config, Status.COMPILE_ERROR)
    weights = {"BLOCK_M": 0.3, "BLOCK_N": 0.2, "BLOCK_K": 0.15, "num_warps": 0.25}
    exponent = sum(
        weight * (math.log2(config[name]) - math.log2(BOWL_OPTIMUM[name])) ** 2 for name, weight in weights.items()
    )
    return Result(config, Status.OK, latency_ms=math.exp(exponent))


@dataclass
class Run:
    """What a study saw: unique evaluations in order, revisits served from the cache, configs per ask."""

    told: int = 0
    trace: list[tuple] = field(default_factory=list)
    revisits: int = 0
    batches: list[list[tuple]] = field(default_factory=list)
    results: dict[tuple, Result] = field(default_factory=dict)


def run(strategy: Strategy, evaluate, budget: int, stop_at: dict | None = None, asks: int | None = None) -> Run:
    """A minimal study runner: checks every batch, serves revisits free, stops when `budget` unique
    evaluations are spent (mid-batch too: the study then ends without telling), when `stop_at` is found,
    or after `asks` asks."""
    space = strategy.space
    seen = Run()
    target = None if stop_at is None else space.key(stop_at)
    for count in itertools.count():
        assert count < 100_000, "the strategy never ends"
        if len(seen.results) >= budget or count == asks:
            break
        batch = strategy.ask()
        if not batch:
            assert strategy.done, "an empty batch before the strategy is done"
            break
        assert not strategy.done
        keys = [space.key(config) for config in batch]
        assert len(set(keys)) == len(keys), f"a batch repeats configs: {keys}"
        assert all(space.is_valid(config) for config in batch), "an invalid config was asked for"
        seen.batches.append(keys)
        results = []
        for config, key in zip(batch, keys):
            if key in seen.results:
                seen.revisits += 1
            elif len(seen.results) < budget:
                seen.results[key] = evaluate(config)
                seen.trace.append(key)
            else:
                break
            results.append(seen.results[key])
        if len(results) < len(batch):
            break
        strategy.tell(results)
        seen.told += len(results)
        if target is not None and target in seen.results:
            break
    return seen


# Small batches and populations, so a short run tells results and reaches every phase of every strategy.
QUICK = {
    "exhaustive": {"batch_size": 16},
    "pattern": {"initial_population": 20, "copies": 2},
    "lfbo": {"initial_population": 20, "copies": 2, "num_neighbors": 50},
    "de": {"population_size": 10},
}
CONFORMANCE_BUDGET = 60


def quick_run(name: str, seed: int, budget: int = CONFORMANCE_BUDGET) -> Run:
    space = conformance_space()
    return run(make_strategy(name, space, seed, **QUICK.get(name, {})), conformance_latency, budget)


# ---------------------------------------------------------------------------------------------
# Conformance: every registered strategy, and the example
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", strategy_params())
def test_conformance(name):
    space = conformance_space()
    strategy = make_strategy(name, space, 0, **QUICK.get(name, {}))
    assert isinstance(strategy, Strategy) and isinstance(strategy.settings, StrategySettings)
    first = run(strategy, conformance_latency, CONFORMANCE_BUDGET)  # the runner checks validity and uniqueness

    # The budget is respected, and reached unless the strategy ended by itself; nothing is asked twice.
    assert len(first.trace) == CONFORMANCE_BUDGET or (strategy.done and len(first.trace) < CONFORMANCE_BUDGET)
    assert first.revisits == 0
    # Failures were met and tolerated, and are in the history with the rest.
    told = strategy.history
    assert len(told) == first.told >= CONFORMANCE_BUDGET // 2
    assert any(not result.ok for result in first.results.values()), "the task's failing region was never met"
    assert all(math.isinf(result.objective) for result in told if not result.ok)
    best_ok = min((result for result in told if result.ok), key=lambda result: result.objective)
    assert strategy.best is not None and strategy.best.objective == best_ok.objective

    # Same seed, same trace; another seed, another trace.
    assert quick_run(name, 0).trace == first.trace
    assert quick_run(name, 1).trace != first.trace


@pytest.mark.parametrize("name", strategy_params(name for name in TESTED if name != "optuna_gp"))
def test_runs_to_done(name):
    """Without a budget every strategy ends by itself; those that end only by exhausting the space
    (random, exhaustive, the Optuna samplers, the example) evaluate every valid config exactly once."""
    space = conformance_space()
    seen = run(make_strategy(name, space, 0, **QUICK.get(name, {})), conformance_latency, budget=10**6)
    assert seen.revisits == 0
    if name in ("random", "exhaustive", EXAMPLE) or name.startswith("optuna_"):
        assert sorted(seen.trace) == sorted(space.key(config) for config in space.enumerate())


def test_exhaustive_is_done_after_one_pass_and_then_asks_nothing():
    space = conformance_space()
    strategy = make_strategy("exhaustive", space, 3, batch_size=50)
    seen = run(strategy, conformance_latency, budget=10**6)
    assert strategy.done and strategy.ask() == []
    assert len(seen.trace) == len(space) == 384
    assert [len(batch) for batch in seen.batches] == [50] * 7 + [34]


def test_pattern_restart_continues_from_fresh_populations_until_the_space_is_exhausted():
    space = conformance_space()
    small = {"initial_population": 10, "copies": 1}
    once = run(make_strategy("pattern", space, 0, **small), conformance_latency, 10**6)
    again = run(make_strategy("pattern", space, 0, **small, restart=True), conformance_latency, 10**6)
    assert len(once.trace) < len(space)
    assert again.trace[: len(once.trace)] == once.trace
    assert sorted(again.trace) == sorted(space.key(config) for config in space.enumerate())


# ---------------------------------------------------------------------------------------------
# Each strategy finds a planted optimum
# ---------------------------------------------------------------------------------------------

SEEDS = range(5)
# Uniform and space-filling samplers have no model to exploit: they get the whole space as budget, which
# checks that they reach every valid config. Model-guided strategies get 150 of the 198 configs.
BLIND = {"random", "exhaustive", "optuna_random", "optuna_qmc"}
GUIDED_BUDGET = 150


@pytest.mark.parametrize("name", strategy_params())
def test_finds_planted_optimum(name):
    """Asserted: for at least 4 of seeds 0..4 the optimum is among the first `budget` unique evaluations
    (150 for guided strategies; 198, the whole space, for blind ones, which must then find it every time)."""
    space = bowl_space()
    assert len(space) == 198
    budget = len(space) if name in BLIND else GUIDED_BUDGET
    found = []
    for seed in SEEDS:
        seen = run(make_strategy(name, space, seed), bowl_latency, budget, stop_at=BOWL_OPTIMUM)
        found.append(space.key(BOWL_OPTIMUM) in seen.results)
    assert sum(found) >= (len(SEEDS) if name in BLIND else len(SEEDS) - 1), f"found per seed: {found}"


# ---------------------------------------------------------------------------------------------
# Determinism does not depend on Python's string hashing (sets of keys must never order a trace)
# ---------------------------------------------------------------------------------------------

def traces() -> dict[str, list]:
    return {name: quick_run(name, 7, budget=30).trace for name in TESTED if name != "optuna_cmaes" or HAS_CMAES}


def test_traces_do_not_depend_on_hash_seed():
    """Each hash seed orders str sets differently, so a trace that iterates one differs between some of them."""
    processes = [
        subprocess.Popen(
            [sys.executable, __file__],
            env={**os.environ, "PYTHONHASHSEED": hash_seed, "OMP_NUM_THREADS": "1"},  # 3 processes share the cores
            stdout=subprocess.PIPE,
            text=True,
        )
        for hash_seed in ("1", "2", "3")
    ]
    outputs = [process.communicate(timeout=120)[0] for process in processes]
    assert all(process.returncode == 0 for process in processes)
    first, *others = (json.loads(output) for output in outputs)
    assert set(first) >= {name for name in TESTED if name != "optuna_cmaes"}
    assert all(other == first for other in others)


# ---------------------------------------------------------------------------------------------
# LFBO: the defects reported against Helion's version stay fixed
# ---------------------------------------------------------------------------------------------

def rugged_latency(config: dict) -> Result:
    """A deterministic but unstructured landscape with failures: most candidates are worse than their copy."""
    noise = zlib.crc32(json.dumps(config, sort_keys=True).encode()) % 1000 / 1000
    if noise > 0.9:
        return Result(config, Status.OUT_OF_RESOURCES)
    return Result(config, Status.OK, latency_ms=1.0 + noise)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lfbo_forest_scores_equal_sklearns_to_the_last_bit(seed):
    rng = np.random.default_rng(seed)
    features = rng.integers(0, 5, size=(120, 7)).astype(float)
    labels = (features[:, 0] + rng.random(120) < 1.5).astype(int)
    forest = RandomForestClassifier(n_estimators=30, criterion="log_loss", random_state=seed, n_jobs=1)
    forest.fit(features, labels, sample_weight=rng.random(120) + 0.5)
    candidates = rng.integers(0, 5, size=(200, 7)).astype(float)

    probability, leaves = forest_scores(forest, candidates)

    assert np.array_equal(probability, forest.predict_proba(candidates)[:, 1])
    assert np.array_equal(leaves, forest.apply(candidates))


def test_lfbo_copy_never_moves_to_a_worse_point():
    space = conformance_space()
    strategy = make_strategy("lfbo", space, 0, initial_population=20, patience=5)
    cache: dict[tuple, Result] = {}
    positions: dict[int, list[float]] = {}
    while len(cache) < 300 and (batch := strategy.ask()):
        for index, copy in enumerate(strategy.copies):
            positions.setdefault(index, []).append(strategy.observed[space.key(copy.current)])
        results = [cache.setdefault(space.key(config), rugged_latency(config)) for config in batch]
        strategy.tell(results)
    assert strategy.copies and max(len(path) for path in positions.values()) > 3
    for index, copy in enumerate(strategy.copies):
        walked = positions[index]
        assert all(later <= earlier for earlier, later in zip(walked, walked[1:])), walked
        on_path = [strategy.observed[space.key(config)] for config in copy.path]
        assert all(later < earlier * (1 - 0.001) for earlier, later in zip(on_path, on_path[1:])), on_path


def test_lfbo_fits_a_forest_only_for_a_generation_it_asks():
    space = conformance_space()
    strategy = make_strategy("lfbo", space, 0, initial_population=20)
    fits = []
    fit = strategy.fit
    strategy.fit = lambda: fits.append(1) or fit()
    asks = 0
    while batch := strategy.ask():
        asks += 1
        strategy.tell([rugged_latency(config) for config in batch])
    assert all(copy.stopped for copy in strategy.copies)
    assert len(fits) == asks - 1  # one forest a generation; the initial population needs none


def test_lfbo_quota_that_rounds_to_zero_still_measures_one_per_copy():
    space = conformance_space()
    strategy = make_strategy("lfbo", space, 0, initial_population=20, frac_selected=0.01, num_neighbors=30)
    seen = run(strategy, conformance_latency, budget=60)
    copies = len(strategy.copies)
    assert copies >= 2
    generation_sizes = [len(batch) for batch in seen.batches[1:]]
    assert len(generation_sizes) >= 3, "a copy ended after its first generation"
    assert generation_sizes[0] == copies
    assert all(1 <= size <= copies for size in generation_sizes)


def test_lfbo_candidates_not_selected_are_not_blacklisted():
    space = conformance_space()
    strategy = make_strategy("lfbo", space, 0, initial_population=20)
    seen = run(strategy, conformance_latency, budget=10**6, asks=3)
    assert strategy.visited == set(seen.trace), "only measured configs may enter the visited set"
    unmeasured_neighbours = 0
    for copy in strategy.copies:
        candidates = {space.key(config) for config in strategy.candidates(copy.current)}
        for neighbour in space.neighbours(copy.current):
            if space.key(neighbour) not in seen.results:
                unmeasured_neighbours += 1
                assert space.key(neighbour) in candidates
    assert unmeasured_neighbours > 0


class RemeasuringLFBO(LFBOPatternSearch):
    """LFBO whose search measures 20 configs, then the first of them again, as a strategy may."""

    def search(self):
        configs = self.space.enumerate()[:20]
        yield configs
        yield configs[:1]


def test_lfbo_labels_use_the_best_of_remeasured_timings():
    space = conformance_space()
    strategy = RemeasuringLFBO(space)
    configs = strategy.ask()
    # First timing of configs[0]: 10 ms, the slowest of all; its re-measurement: 1 ms, the fastest.
    strategy.tell([Result(config, Status.OK, latency_ms=10.0 if index == 0 else 5.0 + index / 10)
                   for index, config in enumerate(configs)])
    assert strategy.ask() == configs[:1]
    strategy.tell([Result(configs[0], Status.OK, latency_ms=1.0)])
    features, labels, weights = strategy.training_set()
    assert features.shape[0] == 20, "one row per config, not per measurement"
    assert labels[0] == 1 and weights[0] > 1.0
    assert labels.sum() == 2 and labels[1] == 1 and labels[2:].sum() == 0


def test_lfbo_labels_failures_as_bad():
    space = conformance_space()
    configs = space.enumerate()[:30]
    observed = {space.key(config): (math.inf if index % 2 else 1.0 + index) for index, config in enumerate(configs)}
    _, labels, weights = training_set(space, observed, quantile=0.1)
    failed = [index for index, value in enumerate(observed.values()) if math.isinf(value)]
    assert all(labels[index] == 0 and weights[index] == 1.0 for index in failed)
    assert 1 <= labels.sum() <= 3


# ---------------------------------------------------------------------------------------------
# Registry and protocol misuse
# ---------------------------------------------------------------------------------------------

def test_registry_names():
    assert list(STRATEGIES) == [
        "random", "exhaustive", "pattern", "lfbo", "de",
        "optuna_tpe", "optuna_gp", "optuna_cmaes", "optuna_qmc", "optuna_random",
    ]


def test_unknown_strategy_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown strategy 'anneal'.*random, exhaustive, pattern.*lfbo_quick"):
        make_strategy("anneal", conformance_space())


def test_a_strategy_is_also_named_by_its_import_path_with_its_settings_checked():
    strategy = make_strategy(EXAMPLE, conformance_space(), 2, batch=4)
    assert type(strategy).__name__ == "IteratedLocalSearch" and strategy.settings.batch == 4
    with pytest.raises(ValueError, match=f"unknown setting 'batch_size' for strategy '{EXAMPLE}'.*has: initial_pop"):
        make_strategy(EXAMPLE, conformance_space(), batch_size=4)
    check_strategy_names(["lfbo", "lfbo_quick", EXAMPLE])


@pytest.mark.parametrize(("name", "message"), [
    ("no_such_module.Search", "strategy 'no_such_module.Search': cannot import module 'no_such_module' .*PYTHONPATH"),
    ("iterated_local_search.Nothing", "module 'iterated_local_search' has nothing by the name 'Nothing'; allowed: a "
                                      "subclass of tunebench.search.Strategy"),
    ("iterated_local_search.IteratedLocalSearchSettings", "has class IteratedLocalSearchSettings by the name"),
    ("math.pi", "module 'math' has float 3.14"),
    ("IteratedLocalSearch.", "strategy 'IteratedLocalSearch.' is not an import path; allowed: 'package.module.Class"),
    (".IteratedLocalSearch", "is not an import path"),
    ("iterated_local_search..IteratedLocalSearch", "is not an import path"),
])
def test_an_import_path_that_names_no_strategy_is_refused(name, message):
    with pytest.raises(ValueError, match=message):
        make_strategy(name, conformance_space())
    with pytest.raises(ValueError, match=message):
        check_strategy_names(["random", name])


def test_unknown_names_are_listed_together_before_any_import():
    with pytest.raises(ValueError, match=r"unknown strategies \['anneal', 'tabu'\]; known: random, .*lfbo_quick.*, "
                                         "or a Strategy subclass's import path"):
        check_strategy_names(["anneal", "no_such_module.Search", "tabu"])


def test_a_quick_preset_is_its_strategy_with_helions_quick_settings_which_settings_override():
    quick = make_strategy("lfbo_quick", conformance_space(), seed=3)
    assert type(quick) is STRATEGIES["lfbo"]
    assert (quick.settings.initial_population, quick.settings.copies, quick.settings.max_generations) == (30, 2, 5)
    assert make_strategy("lfbo_quick", conformance_space(), copies=3).settings.copies == 3
    assert make_strategy("de_quick", conformance_space()).settings.population_size == 20
    with pytest.raises(ValueError, match="unknown setting 'copies' for strategy 'de'"):
        make_strategy("de_quick", conformance_space(), copies=3)


@pytest.mark.parametrize("name, strategy", [("lfbo_start30", "lfbo"), ("pattern_start30", "pattern")])
def test_a_start30_preset_is_the_full_search_from_the_start_its_held_out_choice_chose(name, strategy):
    preset = make_strategy(name, conformance_space())
    full = make_strategy(strategy, conformance_space())
    assert type(preset) is type(full)
    assert preset.settings == replace(full.settings, initial_population=30)
    # the run that registered the preset, kept as written; the latest run of its command may choose otherwise on
    # sweeps made since (20 in stop 84), and the preset stays while that choice's median lies inside the preset's 95 %
    # interval on the choice tasks (the policy of docs/strategies.md): beyond it, the preset must be registered anew
    study = REPO / "results" / "held_out_setting" / f"{strategy}_initial_population"
    assert "## The choice: initial_population=30\n" in (study / "registered.md").read_text()
    latest = (study / "summary.md").read_text()
    chosen = int(re.search(r"^## The choice: initial_population=(\d+)$", latest, re.M)[1])
    first_table = latest.split("evals to 0.99 (median over tasks", 1)[1].split("\n\n", 1)[0]
    rows = {int(value): (float(median), float(low), float(high)) for value, median, low, high in re.findall(
        r"^\| initial_population=(\d+)[^|]*\| \d+ \| ([\d.]+) \[([\d.]+), ([\d.]+|inf)\] \|", first_table, re.M)}
    assert set(rows) == {10, 20, 30, 50, 100}
    assert chosen == 30 or rows[30][1] <= rows[chosen][0] <= rows[30][2]


def test_the_restarts_presets_restart_lfbo_start30_at_its_held_out_share_and_quick_lfbo():
    from tunebench.search.warm_start import WarmStart

    preset = make_strategy("lfbo_restarts", conformance_space(), seed=2)
    assert type(preset) is WarmStart and preset.settings.restart and preset.settings.restart_patience == 0
    assert preset.inner.settings == replace(make_strategy("lfbo_start30", conformance_space()).settings,
                                            frac_selected=0.05)
    quick = make_strategy("lfbo_quick_restarts", conformance_space(), seed=2)
    assert type(quick) is WarmStart and quick.settings.restart
    assert quick.inner.settings == make_strategy("lfbo_quick", conformance_space()).settings
    for criterion in ("seconds", "expected_seconds"):
        choice = REPO / "results" / "held_out_setting" / f"lfbo_start30_frac_selected_by_{criterion}" / "summary.md"
        assert "## The choice: frac_selected=0.05\n" in choice.read_text()


def test_unknown_setting_is_named_with_the_strategy_settings():
    with pytest.raises(ValueError, match="unknown setting 'copiess'.*initial_population, copies, max_generations"):
        make_strategy("pattern", conformance_space(), copiess=3)


def test_setting_of_the_wrong_type_is_refused():
    with pytest.raises(TypeError, match="batch_size"):
        make_strategy("random", conformance_space(), batch_size="16")


@pytest.mark.skipif(HAS_CMAES, reason="cmaes is installed")
def test_cmaes_without_cmaes_says_what_is_missing():
    with pytest.raises(ImportError, match="cmaes"):
        make_strategy("optuna_cmaes", conformance_space())


def test_protocol_misuse_raises():
    space = conformance_space()
    strategy = make_strategy("random", space, batch_size=4)
    with pytest.raises(RuntimeError, match="without a pending ask"):
        strategy.tell([])
    batch = strategy.ask()
    with pytest.raises(RuntimeError, match="tell the results"):
        strategy.ask()
    with pytest.raises(ValueError, match="asked for 4"):
        strategy.tell([conformance_latency(batch[0])])
    with pytest.raises(ValueError, match="out of order"):
        strategy.tell([conformance_latency(config) for config in reversed(batch)])


if __name__ == "__main__":
    print(json.dumps({name: [list(key) for key in trace] for name, trace in traces().items()}))


def test_a_list_stands_for_a_tuple_setting_as_json_gives_it():
    restarted = make_strategy("tunebench.search.warm_start.WarmStart", conformance_space(), inner="lfbo_start30",
                              inner_settings=[["frac_selected", 0.05]], restart=True)
    assert restarted.settings.inner_settings == (("frac_selected", 0.05),)
    assert restarted.inner.settings.frac_selected == 0.05 and restarted.inner.settings.initial_population == 30
    with pytest.raises(TypeError, match="setting 'inner_settings' of strategy 'tunebench.search.warm_start.WarmStart' "
                                        "must be tuple, got 'frac_selected'"):
        make_strategy("tunebench.search.warm_start.WarmStart", conformance_space(), inner_settings="frac_selected")
