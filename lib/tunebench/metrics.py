"""How search strategies are compared: fraction of optimum, time-to-target, score against random search.
Pure functions over numpy arrays and the study's trace table (after Willemsen et al. 2024; Schoonhoven et al. 2022).
"""

from __future__ import annotations

import math
import warnings
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

TARGETS: tuple[float, ...] = (0.95, 0.98, 0.99)
"""Fractions of optimum whose evaluations- and seconds-to-reach are reported."""

TIME_GRID_POINTS = 200
"""Points of the uniform grid on which score curves over time are sampled and averaged."""

_DEGENERATE_SPAN = 1e-9  # relative: |optimum - random| below this means random search is sure to be at the optimum
_CHUNK_ELEMENTS = 1 << 20  # bounds the (draw counts x configs) probability block held in memory at once
_TRACE_COLUMNS = ("strategy", "task", "seed", "eval_index", "time_s", "best_ms")


def fraction_of_optimum(best_ms: ArrayLike, optimum_ms: ArrayLike) -> float | np.ndarray:
    """Fraction of optimum `optimum_ms / best_ms`, elementwise (broadcasting); 0 where `best_ms` is not finite.

    1 means the optimum was found, 0.5 a config twice as slow; a search with no valid result yet (best
    inf) scores 0. Not clipped: a value above 1 means `best_ms` and `optimum_ms` come from different
    measurements (e.g. a noisy replay draw against the recorded median), which callers should see.
    Schoonhoven et al., "Benchmarking optimization algorithms for auto-tuning GPU kernels", IEEE TEVC 2022.
    """
    best = np.asarray(best_ms, dtype=float)
    optimum = np.asarray(optimum_ms, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        fraction = optimum / best
    return np.where(np.isfinite(best), fraction, 0.0)[()]


def best_so_far(latencies: ArrayLike) -> np.ndarray:
    """Running minimum along the last axis, failures (NaN or inf) counting as inf: inf until the first success."""
    values = np.asarray(latencies, dtype=float)
    return np.minimum.accumulate(np.where(np.isnan(values), np.inf, values), axis=-1)


def evaluations_to_reach(best_ms_by_eval: ArrayLike, optimum_ms: ArrayLike, fraction: float) -> float | np.ndarray:
    """First 1-based evaluation index k with `optimum_ms / best_ms_by_eval[k-1] >= fraction`; NaN if never.

    `best_ms_by_eval[..., j]` is the best latency after j + 1 unique evaluations; leading axes (e.g.
    seeds) give an array of answers.
    """
    reached = fraction_of_optimum(best_ms_by_eval, optimum_ms) >= fraction
    return _at_first(reached, np.arange(1, reached.shape[-1] + 1, dtype=float))


def seconds_to_reach(best_ms: ArrayLike, time_s: ArrayLike, optimum_ms: ArrayLike,
                     fraction: float) -> float | np.ndarray:
    """`time_s` of the first evaluation with `optimum_ms / best_ms >= fraction`; NaN if never.

    `time_s[..., j]` is when the result of evaluation j + 1 was known (simulated or wall seconds).
    """
    reached = fraction_of_optimum(best_ms, optimum_ms) >= fraction
    return _at_first(reached, np.asarray(time_s, dtype=float))


def random_search_expected_fraction(latencies: ArrayLike, optimum_ms: float,
                                    k: int | ArrayLike | None = None) -> float | np.ndarray:
    """Expected fraction of optimum, E[optimum_ms / min of k draws], of random search without replacement.

    `latencies` are all configs of the space (the brute-forced data), failures as inf or NaN; a failed
    draw can be drawn and contributes nothing (fraction 0 if every draw failed). With the n latencies
    sorted ascending, x_(1) <= ... <= x_(n), the best of k uniform draws without replacement is x_(i)
    with probability C(n - i, k - 1) / C(n, k) (x_(i) drawn, the other k - 1 among the n - i above it),
    so E = sum_i (optimum / x_(i)) C(n - i, k - 1) / C(n, k), evaluated through log-gamma; exact up
    to rounding, unlike a simulation. `k` may be an int or an array of ints in 0..n (k = 0 gives 0);
    None means every k = 1..n. This is the random-search baseline of Willemsen et al., "A methodology
    for comparing optimization algorithms for auto-tuning", FGCS 2024, taken on the fraction-of-optimum
    scale, where failures stay finite.
    """
    ordered, failures = _sorted_latencies(latencies)
    draws = _draw_counts(k, ordered.size)
    gains = fraction_of_optimum(ordered[: ordered.size - failures], optimum_ms)
    unique, inverse = np.unique(draws, return_inverse=True)
    return _expected_over_minimum(gains, ordered.size, unique)[inverse].reshape(draws.shape)[()]


def random_search_expected_best(latencies: ArrayLike, k: int | ArrayLike | None = None) -> float | np.ndarray:
    """Expected best latency E[min of k draws] of random search without replacement; inf where not finite.

    Same order statistics as `random_search_expected_fraction`: E = sum_i x_(i) C(n - i, k - 1) / C(n, k).
    With m failed configs (inf), every draw fails with positive probability while k <= m, so the
    expectation is inf there; for k > m it is finite. Prefer the fraction, which is finite for every k.
    """
    ordered, failures = _sorted_latencies(latencies)
    draws = _draw_counts(k, ordered.size)
    unique, inverse = np.unique(draws, return_inverse=True)
    expected = _expected_over_minimum(ordered[: ordered.size - failures], ordered.size, unique)
    expected = np.where(unique > failures, expected, np.inf)
    return expected[inverse].reshape(draws.shape)[()]


def mean_seconds_per_evaluation(compile_s: ArrayLike, bench_s: ArrayLike, compile_workers: int = 1) -> float:
    """Seconds random search spends per evaluation: mean(compile_s) / compile_workers + mean(bench_s).

    Averaged over every recorded config of the task, failures included (a uniform draw hits them and
    pays their compile time). Random search's own CPU time is taken as zero. With W parallel compile
    workers the compile share is divided by W; a real batch waits for its slowest compile, so this
    slightly flatters the baseline, which makes scores over time conservative for the strategies. We
    take the dataset's cost rather than a trace's own seconds per evaluation, which would cancel the
    very overhead a time budget is meant to charge.
    """
    if compile_workers < 1:
        raise ValueError(f"compile_workers must be >= 1, got {compile_workers}")
    compile_mean = float(np.mean(np.asarray(compile_s, dtype=float)))
    return compile_mean / compile_workers + float(np.mean(np.asarray(bench_s, dtype=float)))


def score_vs_random(fraction_found: ArrayLike, fraction_random: ArrayLike,
                    fraction_optimum: ArrayLike = 1.0) -> float | np.ndarray:
    """Score (found - random) / (optimum - random), elementwise: 0 = random search, 1 = the optimum.

    Negative where a strategy does worse than random search, without a lower bound: as random search
    nears certainty of holding the optimum (budgets close to the space size) a small shortfall weighs
    heavily, so keep budgets well below the space size. Where random search is certain to be at the
    optimum (|optimum - random| <= 1e-9 |optimum|) the score is 1 if found equals the optimum (within
    the same relative tolerance) and 0 otherwise. On the fraction scale the optimum is 1; passing best
    latencies, the expected random best latency and optimum_ms gives the latency-scale score of
    Willemsen et al., FGCS 2024.
    """
    found, random, optimum = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in
                                                   (fraction_found, fraction_random, fraction_optimum)))
    span = optimum - random
    degenerate = np.abs(span) <= _DEGENERATE_SPAN * np.abs(optimum)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = (found - random) / span
    at_optimum = np.isclose(found, optimum, rtol=_DEGENERATE_SPAN, atol=0.0)
    return np.where(degenerate, at_optimum.astype(float), score)[()]


def fraction_curve_over_evaluations(best_ms_by_eval: ArrayLike, optimum_ms: ArrayLike, budget: int) -> np.ndarray:
    """Fraction of optimum after k = 1..budget unique evaluations, along the last axis.

    A trace shorter than the budget (the space was exhausted, or the search stopped) carries its last
    value forward; an empty trace is 0 throughout.
    """
    best = np.asarray(best_ms_by_eval, dtype=float)
    if best.shape[-1] == 0:
        return np.zeros(best.shape[:-1] + (budget,))
    positions = np.minimum(np.arange(budget), best.shape[-1] - 1)
    return fraction_of_optimum(best[..., positions], optimum_ms)


def fraction_curve_over_time(best_ms: ArrayLike, time_s: ArrayLike, optimum_ms: float,
                             time_grid: ArrayLike) -> np.ndarray:
    """Fraction of optimum known at each time of `time_grid`: from the last evaluation with time_s <= t.

    0 before the first result; after the trace's last evaluation its value is carried forward.
    `time_s` must be non-decreasing (it is a clock).
    """
    best = np.asarray(best_ms, dtype=float)
    times = np.asarray(time_s, dtype=float)
    grid = np.asarray(time_grid, dtype=float)
    if best.shape != times.shape or best.ndim != 1:
        raise ValueError(f"best_ms and time_s must be 1-D of one length, got {best.shape} and {times.shape}")
    if np.any(np.diff(times) < 0):
        raise ValueError("time_s must be non-decreasing")
    if best.size == 0:
        return np.zeros(grid.shape)
    position = np.searchsorted(times, grid, side="right") - 1
    best_at = np.where(position >= 0, best[np.maximum(position, 0)], np.inf)
    return fraction_of_optimum(best_at, optimum_ms)


def random_fraction_over_evaluations(latencies: ArrayLike, optimum_ms: float, budget: int) -> np.ndarray:
    """Random search's expected fraction of optimum after k = 1..budget evaluations (k capped at the space size)."""
    size = np.asarray(latencies).size
    return random_search_expected_fraction(latencies, optimum_ms, np.minimum(np.arange(1, budget + 1), size))


def random_fraction_over_time(latencies: ArrayLike, optimum_ms: float, time_grid: ArrayLike,
                              seconds_per_evaluation: float) -> np.ndarray:
    """Random search's expected fraction of optimum at each time t of `time_grid`.

    Random search completes its k-th evaluation at k * seconds_per_evaluation (see
    `mean_seconds_per_evaluation`), so at time t it holds k = floor(t / seconds_per_evaluation) results,
    capped at the space size; a 1e-9 slack keeps exact multiples from rounding down.
    """
    if not seconds_per_evaluation > 0:
        raise ValueError(f"seconds_per_evaluation must be positive, got {seconds_per_evaluation}")
    grid = np.asarray(time_grid, dtype=float)
    size = np.asarray(latencies).size
    draws = np.clip(np.floor(grid / seconds_per_evaluation + 1e-9), 0, size).astype(int)
    return random_search_expected_fraction(latencies, optimum_ms, draws)


def score_curve_over_evaluations(best_ms_by_eval: ArrayLike, optimum_ms: ArrayLike,
                                 random_fraction: ArrayLike) -> np.ndarray:
    """Score against random search after k = 1..budget evaluations, budget = len(random_fraction).

    `random_fraction` is `random_fraction_over_evaluations` of the task, computed once and shared by
    every strategy and seed.
    """
    baseline = np.asarray(random_fraction, dtype=float)
    found = fraction_curve_over_evaluations(best_ms_by_eval, optimum_ms, baseline.shape[-1])
    return score_vs_random(found, baseline)


def score_curve_over_time(best_ms: ArrayLike, time_s: ArrayLike, optimum_ms: float, time_grid: ArrayLike,
                          random_fraction: ArrayLike) -> np.ndarray:
    """Score against random search at each time of `time_grid`, given `random_fraction_over_time` on the same grid."""
    found = fraction_curve_over_time(best_ms, time_s, optimum_ms, time_grid)
    return score_vs_random(found, random_fraction)


def uniform_time_grid(horizon_s: float, points: int = TIME_GRID_POINTS) -> np.ndarray:
    """The times horizon_s * j / points for j = 1..points: a common grid on which to compare traces."""
    return horizon_s * np.arange(1, points + 1) / points


def mean_score(score_curve: ArrayLike) -> float | np.ndarray:
    """Mean of a score curve over its budget (last axis): its area divided by the budget.

    Over evaluations k = 1..budget, or over a uniform time grid, this is the normalized area under the
    curve that Willemsen et al., FGCS 2024, aggregate a strategy's performance over a budget into.
    """
    return np.mean(np.asarray(score_curve, dtype=float), axis=-1)[()]


def success_rate(values: ArrayLike, threshold: float) -> float:
    """Share of `values` (evaluations or seconds to reach a target, one per seed) that are <= threshold.

    NaN ("never reached") counts as a failure; NaN for no values.
    """
    cost = np.asarray(values, dtype=float)
    return float(np.mean(cost <= threshold)) if cost.size else math.nan


def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int, float]:
    """1-based ranks (l, n + 1 - l) of the distribution-free confidence interval for a median of n values.

    The sorted sample brackets the population median with [x_(l), x_(n+1-l)] with probability
    1 - 2 P(B <= l - 1), B ~ Binomial(n, 1/2), whatever the distribution; l is the largest rank
    whose coverage is at least `confidence`. Returns (l, n + 1 - l, exact coverage). When even the
    full range (l = 1) falls short (n <= 5 at 95 %), returns it with its lower coverage.
    """
    if n < 1:
        raise ValueError(f"need at least one value, got n={n}")
    coefficient, cumulative, coverages = 1, 0, []
    for j in range((n + 1) // 2):  # rank l = j + 1 covers with 1 - 2 P(B <= j); exact integer counts of 2**n
        cumulative += coefficient
        coverages.append(1.0 - 2.0 * (cumulative / 2**n))
        coefficient = coefficient * (n - j) // (j + 1)
    low = max((rank for rank in range(1, len(coverages) + 1) if coverages[rank - 1] >= confidence), default=1)
    return low, n + 1 - low, coverages[low - 1]


def median_with_ci(values: ArrayLike, confidence: float = 0.95) -> tuple[float, float, float]:
    """(median, low, high) with the order-statistic confidence interval of `median_ci_ranks`.

    NaN means "never reached" and sorts as +inf, so the median of times-to-target is inf when fewer
    than half the seeds got there, rather than the flattering median of the seeds that did. Warns
    when n is too small for the requested confidence (the full range is returned). NaNs for no values.
    """
    ordered = _sorted_never_last(values)
    if ordered.size == 0:
        return math.nan, math.nan, math.nan
    low, high, coverage = median_ci_ranks(ordered.size, confidence)
    if coverage < confidence:
        warnings.warn(f"{ordered.size} values give at most {coverage:.3f} coverage for a median, "
                      f"below {confidence}; returning the full range", stacklevel=2)
    return _median_and_interval(ordered, low, high)


def summarize(trace: pd.DataFrame, optima: Mapping[str, float], latencies_by_task: Mapping[str, ArrayLike],
              budgets: Sequence[int] = (50, 100, 200, 400), targets: Sequence[float] = TARGETS,
              seconds_per_evaluation: Mapping[str, float] | None = None, confidence: float = 0.95,
              time_grid_points: int = TIME_GRID_POINTS) -> pd.DataFrame:
    """One row per (strategy, task): the study's headline numbers, medians over seeds.

    Columns: `seeds`; `ci_coverage` (exact coverage of every interval in the row, below `confidence`
    when there are too few seeds); per target t, `evals_to_{t}` and `seconds_to_{t}` with `_low` and
    `_high` (order-statistic interval; inf when not reached, see `median_with_ci`) over the whole trace,
    and `success_{t}`, the share of seeds reaching t within max(budgets) evaluations, and `ert_evals_to_{t}` and
    `ert_seconds_to_{t}`, the expected cost to reach t with restarts (`expected_running_time`); per budget b,
    `fraction_at_{b}`, the median fraction of optimum after b evaluations; `mean_score` with `_low` and
    `_high`, the score against random search averaged over k = 1..max(budgets); how a run ends, medians over seeds:
    `run_evals` and `run_seconds` (its length: unique evaluations, and seconds at its last one) and `final_fraction`
    (the fraction of optimum it ends with), and `ended_on_its_own`, the share of seeds whose run ended before
    max(budgets) evaluations (the strategy stopped, or the space ran out: an autotuner's own length). Given
    `seconds_per_evaluation` per task (`mean_seconds_per_evaluation`), also `mean_score_time` with
    `_low` and `_high`: averaged over a uniform grid of `time_grid_points` times up to the time random
    search needs for max(budgets) evaluations. A seed whose trace is shorter than a budget (exhausted
    space) carries its last value forward, in time as well.
    """
    missing = [column for column in _TRACE_COLUMNS if column not in trace.columns]
    if missing:
        raise ValueError(f"trace lacks columns {missing}")
    if trace.empty:
        raise ValueError("trace is empty")
    per_task = {"optima": optima, "latencies_by_task": latencies_by_task}
    if seconds_per_evaluation is not None:
        per_task["seconds_per_evaluation"] = seconds_per_evaluation
    for name, mapping in per_task.items():
        lacking = set(trace["task"]) - set(mapping)
        if lacking:
            raise ValueError(f"{name} lacks tasks {sorted(lacking)}")
    horizon = max(budgets)
    keys = ["strategy", "task", "seed"]
    frame = trace.sort_values(keys + ["eval_index"], kind="stable").reset_index(drop=True)
    codes = frame.groupby(keys, sort=True).ngroup().to_numpy()
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    ends = np.r_[starts[1:], len(codes)]
    eval_index = frame["eval_index"].to_numpy(dtype=float)
    time_s = frame["time_s"].to_numpy(dtype=float)
    best = frame["best_ms"].to_numpy(dtype=float)
    optimum = frame["task"].map(optima).to_numpy(dtype=float)
    fraction = fraction_of_optimum(best, optimum)
    rows = np.arange(len(frame))
    seeds = frame.loc[starts, keys].reset_index(drop=True)
    seeds["run_evals"], seeds["run_seconds"] = eval_index[ends - 1], time_s[ends - 1]
    seeds["final_fraction"] = fraction[ends - 1]

    for target in targets:
        first = np.minimum.reduceat(np.where(fraction >= target, rows, len(frame)), starts)
        hit = first < len(frame)
        first = np.minimum(first, len(frame) - 1)
        seeds[f"evals_to_{target:g}"] = np.where(hit, eval_index[first], np.nan)
        seeds[f"seconds_to_{target:g}"] = np.where(hit, time_s[first], np.nan)
    for budget in budgets:
        last = np.maximum.reduceat(np.where(eval_index <= budget, rows, -1), starts)
        seeds[f"fraction_at_{budget}"] = np.where(last >= 0, fraction[np.maximum(last, 0)], 0.0)

    seeds["mean_score"] = np.nan
    if seconds_per_evaluation is not None:
        seeds["mean_score_time"] = np.nan
    for task, members in seeds.groupby("task", sort=False).groups.items():
        members = np.asarray(members)
        task_optimum = float(optima[task])
        by_eval = _curves_by_evaluation(fraction, eval_index, starts[members], ends[members], horizon)
        baseline = random_fraction_over_evaluations(latencies_by_task[task], task_optimum, horizon)
        seeds.loc[members, "mean_score"] = mean_score(score_vs_random(by_eval, baseline))
        if seconds_per_evaluation is not None:
            cost = float(seconds_per_evaluation[task])
            grid = uniform_time_grid(horizon * cost, time_grid_points)
            baseline = random_fraction_over_time(latencies_by_task[task], task_optimum, grid, cost)
            seeds.loc[members, "mean_score_time"] = [
                mean_score(score_curve_over_time(best[start:end], time_s[start:end], task_optimum, grid, baseline))
                for start, end in zip(starts[members], ends[members])]

    summary = []
    for (strategy, task), group in seeds.groupby(["strategy", "task"], sort=True):
        low, high, coverage = median_ci_ranks(len(group), confidence)
        row: dict[str, object] = {"strategy": strategy, "task": task, "seeds": len(group), "ci_coverage": coverage}
        interval_columns = [f"{kind}_to_{target:g}" for target in targets for kind in ("evals", "seconds")]
        interval_columns += [c for c in ("mean_score", "mean_score_time") if c in group]
        for column in interval_columns:
            ordered = _sorted_never_last(group[column])
            row[column], row[f"{column}_low"], row[f"{column}_high"] = _median_and_interval(ordered, low, high)
        for target in targets:
            row[f"success_{target:g}"] = success_rate(group[f"evals_to_{target:g}"], horizon)
            for kind in ("evals", "seconds"):
                row[f"ert_{kind}_to_{target:g}"] = expected_running_time(group[f"{kind}_to_{target:g}"],
                                                                         group[f"run_{kind}"])
        for budget in budgets:
            row[f"fraction_at_{budget}"] = float(np.median(group[f"fraction_at_{budget}"]))
        for column in ("run_evals", "run_seconds", "final_fraction"):
            row[column] = float(np.median(group[column]))
        row["ended_on_its_own"] = float(np.mean(group["run_evals"] < horizon))
        summary.append(row)
    return pd.DataFrame(summary)


def expected_running_time(to_target: ArrayLike, run_cost: ArrayLike) -> float:
    """Expected cost to reach a target when runs that miss it are restarted with fresh seeds: COCO's average runtime
    (aRT, earlier called the expected running time; Hansen, Auger, Brockhoff, Tusar and Tusar, "COCO: Performance
    Assessment", arXiv:1605.03560, 2016). The cost of all runs, each charged `to_target` where it got there (not NaN)
    and its whole `run_cost` where it did not, divided by the runs that got there; inf when none did."""
    reached = np.asarray(to_target, dtype=float)
    spent = np.where(np.isnan(reached), np.asarray(run_cost, dtype=float), reached)
    hits = int(np.sum(~np.isnan(reached)))
    return float(spent.sum() / hits) if hits else math.inf


def _at_first(reached: np.ndarray, values: np.ndarray) -> float | np.ndarray:
    """values[..., j] at the first j where reached[..., j] is True along the last axis; NaN where none is."""
    if reached.shape[-1] == 0:
        return np.full(reached.shape[:-1], np.nan)[()]
    values = np.broadcast_to(values, reached.shape)
    first = np.argmax(reached, axis=-1)[..., None]
    picked = np.take_along_axis(values, first, axis=-1)[..., 0]
    return np.where(reached.any(axis=-1), picked, np.nan)[()]


def _sorted_latencies(latencies: ArrayLike) -> tuple[np.ndarray, int]:
    """All latencies ascending, failures (NaN, inf) as inf at the end, and how many failed."""
    values = np.asarray(latencies, dtype=float).ravel()
    if values.size == 0:
        raise ValueError("need the latencies of at least one config")
    values = np.sort(np.where(np.isnan(values), np.inf, values))
    return values, int(np.sum(~np.isfinite(values)))


def _draw_counts(k: int | ArrayLike | None, size: int) -> np.ndarray:
    """The draw counts as an int array, checked to lie in 0..size; None means 1..size."""
    if k is None:
        return np.arange(1, size + 1)
    draws = np.asarray(k)
    if not np.issubdtype(draws.dtype, np.integer) or np.any(draws < 0) or np.any(draws > size):
        raise ValueError(f"k must be integers in 0..{size} (the number of configs), got {k!r}")
    return draws


def _expected_over_minimum(values: np.ndarray, size: int, draws: np.ndarray) -> np.ndarray:
    """sum_i values[i-1] C(size - i, k - 1) / C(size, k) for each k in `draws`.

    values are the first len(values) order statistics of `size` configs (the rest contribute 0). In
    logs, with r = size - i configs above position i: log k + lg(r) - lg(r - k + 1) + lg(size - k) -
    lg(size), lg(m) = log m!; zero where r < k - 1 or k = 0.
    """
    log_factorial = np.array([math.lgamma(m + 1.0) for m in range(size + 1)])
    above = (size - 1 - np.arange(values.size))[None, :]
    expected = np.zeros(draws.size)
    chunk = max(1, _CHUNK_ELEMENTS // max(1, values.size))
    for start in range(0, draws.size, chunk):
        k = draws[start:start + chunk, None]
        possible = (above >= k - 1) & (k >= 1)
        log_p = (np.log(np.maximum(k, 1)) + log_factorial[above] - log_factorial[np.clip(above - k + 1, 0, size)]
                 + log_factorial[size - k] - log_factorial[size])
        expected[start:start + chunk] = np.where(possible, np.exp(log_p), 0.0) @ values
    return expected


def _curves_by_evaluation(fraction: np.ndarray, eval_index: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                          budget: int) -> np.ndarray:
    """(seeds, budget) fraction of optimum after k = 1..budget evaluations, last value carried forward."""
    lengths = ends - starts
    seed_of_row = np.repeat(np.arange(starts.size), lengths)
    rows = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
    index = eval_index[rows].astype(int)
    within = (index >= 1) & (index <= budget)
    curves = np.full((starts.size, budget), np.nan)
    curves[seed_of_row[within], index[within] - 1] = fraction[rows[within]]
    filled = np.where(np.isnan(curves), -1, np.arange(budget))
    last = np.maximum.accumulate(filled, axis=1)
    return np.where(last >= 0, np.take_along_axis(curves, np.maximum(last, 0), axis=1), 0.0)


def _sorted_never_last(values: ArrayLike) -> np.ndarray:
    """Values sorted ascending as a flat array, NaN ("never reached") as +inf."""
    flat = np.asarray(values, dtype=float).ravel()
    return np.sort(np.where(np.isnan(flat), np.inf, flat))


def _median_and_interval(ordered: np.ndarray, low: int, high: int) -> tuple[float, float, float]:
    """Median of sorted values (mean of the middle two for even n; inf if either is) and the values at 1-based ranks."""
    n = ordered.size
    median = 0.5 * (ordered[(n - 1) // 2] + ordered[n // 2])
    return float(median), float(ordered[low - 1]), float(ordered[high - 1])
