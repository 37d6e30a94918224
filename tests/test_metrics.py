"""The comparison methodology on hand-computed cases, and the closed-form random baseline against enumeration."""

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from tunebench import metrics

INF = math.inf


def test_fraction_of_optimum_and_best_so_far():
    # 1/2, 1/4; no valid result (inf, NaN) scores 0
    np.testing.assert_array_equal(metrics.fraction_of_optimum([2.0, 4.0, INF, np.nan], 1.0), [0.5, 0.25, 0.0, 0.0])
    np.testing.assert_array_equal(metrics.fraction_of_optimum([2.0, 4.0], [[1.0], [2.0]]), [[0.5, 0.25], [1.0, 0.5]])
    assert metrics.fraction_of_optimum(1.6, 0.8) == 0.5
    np.testing.assert_array_equal(metrics.best_so_far([3.0, np.nan, 2.0, INF, 5.0, 1.0]), [3, 3, 2, 2, 2, 1])
    np.testing.assert_array_equal(metrics.best_so_far([[np.nan, 2.0], [1.0, 3.0]]), [[INF, 2.0], [1.0, 1.0]])


def test_evaluations_and_seconds_to_reach_on_a_hand_trace():
    best = [INF, 1.25, 1.05, 1.02, 1.0]  # fractions 0, 0.8, 0.952, 0.980 (1/1.02), 1.0
    times = [1.0, 2.5, 4.0, 7.0, 8.0]
    assert [metrics.evaluations_to_reach(best, 1.0, target) for target in metrics.TARGETS] == [3, 4, 5]
    assert [metrics.seconds_to_reach(best, times, 1.0, target) for target in metrics.TARGETS] == [4.0, 7.0, 8.0]
    assert math.isnan(metrics.evaluations_to_reach(best, 1.0, 1.01))
    assert math.isnan(metrics.seconds_to_reach(best, times, 1.0, 1.01))
    assert math.isnan(metrics.evaluations_to_reach([], 1.0, 0.5))
    # one row per seed: the second seed never gets past 1/2
    np.testing.assert_array_equal(metrics.evaluations_to_reach([best, [2.0] * 5], 1.0, 0.95), [3, np.nan])


def test_random_search_expected_best_by_hand():
    # k=2 of [1,2,3,4]: 6 equally likely pairs with minima 1,1,1,2,2,3 -> 10/6
    assert metrics.random_search_expected_best([4.0, 2.0, 1.0, 3.0], 2) == pytest.approx(10 / 6, rel=1e-12)
    # k=1: mean 2.5; k=3: triples' minima 1,1,1,2 -> 5/4; k=4: 1
    np.testing.assert_allclose(metrics.random_search_expected_best([1.0, 2.0, 3.0, 4.0]), [2.5, 10 / 6, 1.25, 1.0])
    # [1, 2, failure]: one draw may fail -> inf; pairs' minima 1,1,2 -> 4/3; all three -> 1
    np.testing.assert_allclose(metrics.random_search_expected_best([1.0, 2.0, INF]), [INF, 4 / 3, 1.0])
    assert metrics.random_search_expected_best([5.0, 5.0, 5.0], 0) == INF


def test_random_search_expected_fraction_by_hand():
    # k=1 of [1, 2, failure]: fractions 1, 1/2, 0 -> 1.5/3
    assert metrics.random_search_expected_fraction([1.0, 2.0, INF], 1.0, 1) == pytest.approx(0.5, rel=1e-12)
    # k=2: pairs {1,2}->1, {1,f}->1, {2,f}->1/2 -> 2.5/3; k=0 (nothing drawn) -> 0
    np.testing.assert_allclose(metrics.random_search_expected_fraction([1.0, np.nan, 2.0], 1.0, [2, 0, 3]),
                               [2.5 / 3, 0.0, 1.0])
    with pytest.raises(ValueError, match="0..3"):
        metrics.random_search_expected_fraction([1.0, 2.0, INF], 1.0, 4)
    with pytest.raises(ValueError, match="integers"):
        metrics.random_search_expected_fraction([1.0, 2.0, INF], 1.0, 1.5)


def test_closed_form_matches_enumeration_of_all_subsets():
    rng = np.random.default_rng(2024)
    for _ in range(40):
        n = int(rng.integers(1, 9))
        latencies = rng.choice([1.0, 1.5, 2.0, 3.0, 5.0], size=n)  # ties on purpose
        latencies[rng.random(n) < 0.3] = INF
        finite = latencies[np.isfinite(latencies)]
        optimum = float(finite.min()) if finite.size else 1.0
        fraction = metrics.random_search_expected_fraction(latencies, optimum)
        best = metrics.random_search_expected_best(latencies)
        for k in range(1, n + 1):
            minima = np.array([min(subset) for subset in itertools.combinations(latencies, k)])
            by_enumeration = np.mean(np.where(np.isfinite(minima), optimum / minima, 0.0))
            assert fraction[k - 1] == pytest.approx(by_enumeration, rel=1e-10, abs=1e-14)
            assert best[k - 1] == pytest.approx(np.mean(minima), rel=1e-10)  # inf == inf when a draw can fail


def test_mean_seconds_per_evaluation():
    # compile mean 3 s, bench mean 1 s -> 4 s; two compile workers halve the compile share -> 2.5 s
    assert metrics.mean_seconds_per_evaluation([2.0, 4.0], [0.5, 1.5]) == 4.0
    assert metrics.mean_seconds_per_evaluation([2.0, 4.0], [0.5, 1.5], compile_workers=2) == 2.5


def test_score_vs_random_by_hand():
    # (0.9 - 0.6) / (1 - 0.6) = 0.75; (0.3 - 0.6) / 0.4 = -0.75; random itself 0; the optimum 1
    np.testing.assert_allclose(metrics.score_vs_random([0.9, 0.3, 0.6, 1.0], 0.6), [0.75, -0.75, 0.0, 1.0])
    # random search certain to hold the optimum: 1 only for a strategy at the optimum
    np.testing.assert_array_equal(metrics.score_vs_random([1.0, 0.9], 1.0), [1.0, 0.0])
    # latency scale: found 3 ms, random 5 ms, optimum 1 ms -> (3 - 5) / (1 - 5) = 0.5
    assert metrics.score_vs_random(3.0, 5.0, 1.0) == 0.5


def test_fraction_curves_carry_forward():
    # after k = 1..5 evaluations of a 3-evaluation trace: 1/4, 1/2, 1, then 1 carried forward
    np.testing.assert_array_equal(metrics.fraction_curve_over_evaluations([4.0, 2.0, 1.0], 1.0, 5), [.25, .5, 1, 1, 1])
    np.testing.assert_array_equal(metrics.fraction_curve_over_evaluations([4.0, 2.0, 1.0], 1.0, 2), [0.25, 0.5])
    np.testing.assert_array_equal(metrics.fraction_curve_over_evaluations([], 1.0, 2), [0.0, 0.0])
    # results known at 1 s (failure), 2 s (2 ms), 4 s (1 ms)
    curve = metrics.fraction_curve_over_time([INF, 2.0, 1.0], [1.0, 2.0, 4.0], 1.0, [0.5, 1, 1.5, 2, 3.9, 4, 10])
    np.testing.assert_array_equal(curve, [0, 0, 0, 0.5, 0.5, 1, 1])
    with pytest.raises(ValueError, match="non-decreasing"):
        metrics.fraction_curve_over_time([2.0, 1.0], [2.0, 1.0], 1.0, [3.0])


def test_random_baseline_over_time_maps_seconds_to_draws():
    latencies = [1.0, 2.0, 3.0, 4.0]
    one = (1 + 1 / 2 + 1 / 3 + 1 / 4) / 4  # 25/48
    two = (3 * 1 + 2 * (1 / 2) + 1 / 3) / 6  # pairs' minima 1,1,1,2,2,3 -> 13/18
    # 2 s per evaluation: k = floor(t / 2) = 0, 1, 1, 2, then capped at 4 (the whole space: fraction 1)
    np.testing.assert_allclose(metrics.random_fraction_over_time(latencies, 1.0, [1, 2, 3, 4, 100], 2.0),
                               [0.0, one, one, two, 1.0])
    # 0.3 / 0.1 = 2.9999999999999996 in floating point, still three draws: minima 1,1,1,2 -> 3.5/4
    assert metrics.random_fraction_over_time(latencies, 1.0, [0.3], 0.1)[0] == pytest.approx(3.5 / 4)
    np.testing.assert_allclose(metrics.random_fraction_over_evaluations(latencies, 1.0, 6), [one, two, 7 / 8, 1, 1, 1])


def test_score_is_zero_on_the_baseline_and_one_at_the_optimum():
    latencies = [1.0, 1.5, 2.0, 3.0, INF, 6.0]
    baseline = metrics.random_fraction_over_evaluations(latencies, 1.0, 5)
    on_baseline = metrics.score_curve_over_evaluations(1.0 / baseline, 1.0, baseline)  # fraction == baseline
    np.testing.assert_allclose(on_baseline, 0.0, atol=1e-12)
    assert metrics.mean_score(on_baseline) == pytest.approx(0.0, abs=1e-12)
    at_optimum = metrics.score_curve_over_evaluations(np.ones(5), 1.0, baseline)
    np.testing.assert_allclose(at_optimum, 1.0)
    # budget 8 > 6 configs: random search holds the optimum from k = 6 on (the degenerate case)
    baseline = metrics.random_fraction_over_evaluations(latencies, 1.0, 8)
    np.testing.assert_array_equal(metrics.score_curve_over_evaluations([2.0] * 8, 1.0, baseline)[5:], [0, 0, 0])
    np.testing.assert_array_equal(metrics.score_curve_over_evaluations([1.0] * 8, 1.0, baseline)[5:], [1, 1, 1])
    # a curve 0.5 above a constant baseline of 0: mean 0.5; scores 0 and 1 over two steps average to 0.5
    assert metrics.mean_score([0.5, 0.5]) == 0.5
    np.testing.assert_array_equal(metrics.mean_score([[0.0, 1.0], [1.0, 1.0]]), [0.5, 1.0])


def test_score_curve_over_time_by_hand():
    latencies = [1.0, 2.0, 4.0, INF]
    grid = metrics.uniform_time_grid(3.0, 12)  # 0.25, 0.5, ..., 3.0
    np.testing.assert_allclose(grid[[0, -1]], [0.25, 3.0])
    baseline = metrics.random_fraction_over_time(latencies, 1.0, grid, 1.0)
    # k = floor(t): 0 before 1 s, then 7/16 (k=1), 17/24 (k=2), 7/8 (k=3 at t = 3)
    # found: 1/2 from 0.5 s, 1 from 1.5 s. Scores: t=.25: 0; .5, .75: (.5-0)/1 = .5;
    # 1, 1.25: (1/2 - 7/16) / (9/16) = 1/9; 1.5 .. 3 (7 points): 1 -> mean (1 + 2/9 + 7) / 12 = 74/108
    score = metrics.score_curve_over_time([2.0, 1.0], [0.5, 1.5], 1.0, grid, baseline)
    np.testing.assert_allclose(score, [0, .5, .5, 1 / 9, 1 / 9, 1, 1, 1, 1, 1, 1, 1])
    assert metrics.mean_score(score) == pytest.approx(74 / 108)


def test_success_rate():
    # 3 and 5 are within 5; 10 is not; NaN never reached -> 2 of 4
    assert metrics.success_rate([3.0, np.nan, 10.0, 5.0], 5.0) == 0.5
    assert math.isnan(metrics.success_rate([], 5.0))


def _binomial_coverage(n: int, low: int, high: int) -> float:
    """P(low <= B <= high - 1), B ~ Binomial(n, 1/2): the coverage of [x_(low), x_(high)] for the median."""
    return sum(math.comb(n, j) for j in range(low, high)) / 2**n


def test_median_ci_ranks_are_the_tightest_with_enough_coverage():
    # n=10: ranks 2..9 cover with 1 - 2 * 11/1024 = 0.9785; ranks 3..8 only 1 - 2 * 56/1024 = 0.8906
    assert metrics.median_ci_ranks(10) == (2, 9, pytest.approx(1002 / 1024))
    assert _binomial_coverage(10, 2, 9) == pytest.approx(0.978515625)
    assert _binomial_coverage(10, 3, 8) < 0.95
    for n in range(6, 60):
        low, high, coverage = metrics.median_ci_ranks(n)
        assert high == n + 1 - low and coverage == pytest.approx(_binomial_coverage(n, low, high), rel=1e-12)
        assert coverage >= 0.95 and (low + 1 > high - 1 or _binomial_coverage(n, low + 1, high - 1) < 0.95)
    assert metrics.median_ci_ranks(20)[:2] == (6, 15)  # the textbook value for 20 observations


def test_median_with_ci():
    values = np.random.default_rng(0).permutation(np.arange(10.0, 101.0, 10.0))  # 10, 20, ..., 100
    assert metrics.median_with_ci(values) == (55.0, 20.0, 90.0)  # ranks 2 and 9
    with pytest.warns(UserWarning, match="0.938 coverage"):  # n=5: even (min, max) covers only 1 - 2/32
        assert metrics.median_with_ci([5.0, 1.0, 4.0, 2.0, 3.0]) == (3.0, 1.0, 5.0)
    # never reached sorts last: 3 of 5 seeds never got there -> median inf, not nanmedian's flattering 1.5
    with pytest.warns(UserWarning):
        assert metrics.median_with_ci([1.0, 2.0, np.nan, np.nan, np.nan])[0] == INF
    with pytest.warns(UserWarning):
        assert metrics.median_with_ci([1.0, 2.0, 3.0, 4.0, np.nan])[0] == 3.0
    assert all(math.isnan(value) for value in metrics.median_with_ci([]))


def test_expected_running_time_charges_the_runs_that_miss_and_is_inf_when_none_gets_there():
    assert metrics.expected_running_time([10.0, np.nan, 30.0], [50.0, 40.0, 60.0]) == (10 + 40 + 30) / 2
    assert metrics.expected_running_time([10.0, 20.0], [99.0, 99.0]) == 15.0  # no misses: the mean
    assert metrics.expected_running_time([np.nan, np.nan], [5.0, 7.0]) == INF


def _tiny_trace() -> pd.DataFrame:
    runs = {  # (strategy, seed): (latencies in evaluation order, seconds when each was known)
        ("a", 0): ([2.0, 1.0], [0.5, 1.5]),  # short trace: carried forward past evaluation 2
        ("a", 1): ([4.0, INF, 2.0, 1.0], [1.0, 2.0, 3.0, 4.0]),
        ("a", 2): ([INF, 4.0, 2.0], [2.0, 4.0, 6.0]),  # never reaches 0.95
        ("b", 0): ([1.0], [0.5]),
    }
    rows = []
    for (strategy, seed), (latencies, times) in runs.items():
        for index, (latency, time_s, best) in enumerate(zip(latencies, times, metrics.best_so_far(latencies)), 1):
            rows.append({"strategy": strategy, "task": "t", "seed": seed, "eval_index": index, "time_s": time_s,
                         "config_key": (index,), "status": "ok" if latency < INF else "crash",
                         "latency_ms": latency if latency < INF else np.nan, "best_ms": best})
    frame = pd.DataFrame(rows)
    return frame.iloc[np.random.default_rng(1).permutation(len(frame))]  # row order must not matter


def test_summarize_on_a_tiny_trace():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = metrics.summarize(_tiny_trace(), {"t": 1.0}, {"t": [1.0, 2.0, 4.0, INF]}, budgets=(1, 3),
                                    targets=(0.95,), seconds_per_evaluation={"t": 1.0}, time_grid_points=12)
    a, b = (summary.set_index("strategy").loc[name] for name in ("a", "b"))
    assert list(summary["strategy"]) == ["a", "b"] and a["seeds"] == 3 and b["seeds"] == 1
    assert a["ci_coverage"] == 0.75  # 3 seeds: (min, max) covers 1 - 2/8
    # evaluations to 0.95 per seed: 2, 4, never -> median 4, interval (2, inf); within 3 evaluations: 1 of 3
    assert (a["evals_to_0.95"], a["evals_to_0.95_low"], a["evals_to_0.95_high"]) == (4, 2, INF)
    assert (a["seconds_to_0.95"], a["seconds_to_0.95_low"], a["seconds_to_0.95_high"]) == (4.0, 1.5, INF)
    assert a["success_0.95"] == pytest.approx(1 / 3)
    # restarted until a run gets there: all runs' cost (seed 2 charged its 3 evaluations, 6 s) over the 2 that did
    assert (a["ert_evals_to_0.95"], a["ert_seconds_to_0.95"]) == ((2 + 4 + 3) / 2, (1.5 + 4.0 + 6.0) / 2)
    # fractions after 1 evaluation: 1/2, 1/4, 0; after 3: 1 (carried), 1/2, 1/2
    assert (a["fraction_at_1"], a["fraction_at_3"]) == (0.25, 0.5)
    # baseline for k = 1, 2, 3 over [1, 2, 4, fail]: 1.75/4 = 7/16; pairs 4.25/6 = 17/24; triples 3.5/4 = 7/8.
    # seed 0 [1/2, 1, 1]: 1/9, 1, 1 -> 19/27; seed 1 [1/4, 1/4, 1/2]: -1/3, -11/7, -3 -> -103/63;
    # seed 2 [0, 1/4, 1/2]: -7/9, -11/7, -3 -> the lowest. Median: seed 1.
    assert a["mean_score"] == pytest.approx(-103 / 63)
    assert a["mean_score_low"] == pytest.approx(-(7 / 9 + 11 / 7 + 3) / 3)
    assert a["mean_score_high"] == pytest.approx(19 / 27)
    # over time (1 s per evaluation, grid 0.25..3 s), seed 1: 0 x3, -1/3 x4, -11/7 x4, -3 at 3 s; the median seed
    assert a["mean_score_time"] == pytest.approx((-4 / 3 - 44 / 7 - 3) / 12)
    # b finds the optimum with its first evaluation, known at 0.5 s: score 0 at 0.25 s (both 0), then 1
    assert (b["evals_to_0.95"], b["seconds_to_0.95"], b["success_0.95"], b["ci_coverage"]) == (1, 0.5, 1.0, 0.0)
    assert (b["fraction_at_1"], b["fraction_at_3"], b["mean_score"]) == (1.0, 1.0, 1.0)
    assert b["mean_score_time"] == pytest.approx(11 / 12)
    # how the runs end: lengths 2, 4, 3 evaluations (1.5, 4, 6 s), ending at 1, 1, 1/2 of optimum; only seed 0 ended
    # before the largest budget (3) on its own
    assert (a["run_evals"], a["run_seconds"], a["final_fraction"]) == (3, 4.0, 1.0)
    assert a["ended_on_its_own"] == pytest.approx(1 / 3)
    assert (b["run_evals"], b["run_seconds"], b["final_fraction"], b["ended_on_its_own"]) == (1, 0.5, 1.0, 1.0)


def test_summarize_columns_and_missing_inputs():
    trace = _tiny_trace()
    summary = metrics.summarize(trace, {"t": 1.0}, {"t": [1.0, 2.0, 4.0, INF]}, budgets=(2,))
    assert {f"evals_to_{t:g}_high" for t in metrics.TARGETS} | {"fraction_at_2", "success_0.99"} <= set(summary)
    assert "mean_score_time" not in summary
    with pytest.raises(ValueError, match="optima lacks tasks"):
        metrics.summarize(trace, {}, {"t": [1.0]})
    with pytest.raises(ValueError, match="seconds_per_evaluation lacks"):
        metrics.summarize(trace, {"t": 1.0}, {"t": [1.0]}, seconds_per_evaluation={})
