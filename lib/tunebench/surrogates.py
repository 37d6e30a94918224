"""Surrogates that rank candidate configs, and the surrogate ablation: how much of the next batch's improvement a
surrogate keeps when it may measure only x % of the candidates.

The ablation, exactly (`ablation`):

1. State. For a task (one shape of a recorded dataset) and a seed, the training set D is the first n unique
   evaluations of `trace_strategy` (default "lfbo": Helion's LFBO pattern search) replayed deterministically on the
   task with that seed (`study.replay_run`): recorded median latencies, failures as inf. The incumbent f* is the best
   finite latency in D. With the default n = 100, D is LFBO's uniformly drawn initial population: the state in
   which LFBO first consults its classifier; a larger n gives later states, D then holding the classifier's picks.
2. Pool. "neighbourhood" (default): the unevaluated candidates that LFBO's generator (`LFBOPatternSearch.candidates`:
   every single-parameter neighbour and 300 random moves of up to 4 parameters) proposes around each of the 5 best
   configs of D, where LFBO's search copies stand; deduplicated, then at most `pool_size` of them drawn uniformly
   without replacement. "uniform": `pool_size` unevaluated configs drawn uniformly from the space. Either way the
   pool, of m configs, is put in a random order, so that ties in a surrogate's scores are broken at random.
3. Picks. Each surrogate is fitted on D and orders the pool; with a budget of x %, it measures its first
   k = max(1, ceil(x m / 100)) candidates. b(x) is the best recorded latency among them (inf if all fail).
4. Outcomes. The improvement I(x) = max(0, f* - b(x)) / f*: the relative reduction of the best latency that the next
   batch brings, 0 when no pick beats the incumbent. The fraction of the pool's best F(x) = min(pool) / b(x): 1 when
   the pool's best config is among the picks, 0 when only failures are (its regret is 1 - F). At x = 100 % every
   surrogate measures the whole pool: I(100) = max(0, f* - min(pool)) / f*, the most the pool holds, and F(100) = 1.
5. Random selection is not simulated: its expectation over the C(m, k) equally likely picks is exact, from the order
   statistics of the pool (`metrics.random_search_expected_best` on min(latency, f*) / f*, whose expected minimum is
   1 - E[I]; `metrics.random_search_expected_fraction` for F).
6. Summary (`summarize_ablation`): the mean of I(x) and F(x) over all task x seed states (every task has the same
   seeds, so tasks weigh equally) with a 95 % percentile interval of a two-level bootstrap: tasks drawn with
   replacement, then seeds with replacement within each drawn task, 2,000 resamples. A panel of one task (a Kernel
   Tuner cache) is a bootstrap over seeds.

Surrogates (`SURROGATES`), each seeded: random selection; a random forest, gradient boosting and an MLP (inputs and
target standardized) regressing log latency, a failed training config counting as FAILURE_PENALTY x the slowest
finite training latency; LFBO's classifier of the top 10 % (failures labelled bad) ranking by P(good); and the same
classifier with LFBO's greedy leaf-similarity diversity penalty. The LFBO pair reuses `LFBOPatternSearch.fit` and
`.select` unchanged.
"""

from __future__ import annotations

import math
import time
import warnings
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure
from sklearn.compose import TransformedTargetRegressor
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from tunebench.dataset_summary import spread_shapes
from tunebench.metrics import random_search_expected_best, random_search_expected_fraction
from tunebench.search.base import Config, Key, sample_new
from tunebench.search.lfbo import LFBOPatternSearch, LFBOPatternSearchSettings
from tunebench.space import Space
from tunebench.study import Budget, Run, Task, cached_dataset, replay_run, tasks_of

FAILURE_PENALTY = 10.0  # a failed training config counts as this many times the slowest finite training latency
PERCENTS = (1, 2, 5, 10, 20, 50, 100)  # the default grid of x, % of the pool a surrogate may measure
TRAINING_SIZE = 100  # n: LFBO's initial population, so the default state is the first one its classifier sees
POOL_SIZE = 300  # m at most: about what LFBO's generator proposes around 5 copies of a Kernel Tuner convolution
POOLS = ("neighbourhood", "uniform")
METRICS = {"improvement": "improvement of the best latency\n(% of the incumbent latency)",
           "fraction_of_pool_best": "pool's best / best picked\n(1 = the pool's best picked)"}
BOOTSTRAP_RESAMPLES = 2000
ALL_TASKS = "all tasks"


# -- the surrogates ---------------------------------------------------------------------------------------------------

class Surrogate:
    """Fitted on measured configs, orders candidates best first; its k picks are the first k of the order.

    `fit(configs, latency_ms)` takes latencies with failures as inf (or NaN) and returns self; `order(configs)`
    returns the candidates' indices, each once. The order must not depend on k, so one call serves every budget.
    """

    def __init__(self, space: Space, seed: int) -> None:
        self.space = space
        self.seed = seed

    def fit(self, configs: Sequence[Config], latency_ms: np.ndarray) -> Surrogate:
        raise NotImplementedError

    def order(self, configs: Sequence[Config]) -> np.ndarray:
        raise NotImplementedError


class RandomSelection(Surrogate):
    """Uniform picks: a seeded permutation. The ablation uses its exact expectation instead (`random_outcomes`)."""

    def fit(self, configs: Sequence[Config], latency_ms: np.ndarray) -> RandomSelection:
        return self

    def order(self, configs: Sequence[Config]) -> np.ndarray:
        return np.random.default_rng(self.seed).permutation(len(configs))


def log_latency_targets(latency_ms: np.ndarray) -> np.ndarray:
    """Regression targets: log latency, a failure (inf or NaN) imputed as log(FAILURE_PENALTY x slowest finite)."""
    latency = np.asarray(latency_ms, dtype=float)
    finite = np.isfinite(latency)
    if not finite.any():
        raise ValueError("cannot fit a regressor on a training set in which every config failed")
    return np.log(np.where(finite, latency, FAILURE_PENALTY * latency[finite].max()))


class LogLatencyRegressor(Surrogate):
    """A scikit-learn regressor of log latency on `Space.encode` features; ranks by predicted latency, lowest first."""

    def __init__(self, space: Space, seed: int, make_model: Callable[[int], object]) -> None:
        super().__init__(space, seed)
        self.make_model = make_model

    def fit(self, configs: Sequence[Config], latency_ms: np.ndarray) -> LogLatencyRegressor:
        self.model_ = self.make_model(self.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # lbfgs's iteration cap on an easy fit
            self.model_.fit(self.space.encode(list(configs)), log_latency_targets(latency_ms))
        return self

    def order(self, configs: Sequence[Config]) -> np.ndarray:
        return np.argsort(self.model_.predict(self.space.encode(list(configs))), kind="stable")


def random_forest(seed: int) -> RandomForestRegressor:
    """The forest LFBO uses (100 trees), as a regressor."""
    return RandomForestRegressor(n_estimators=100, random_state=seed, n_jobs=1)


def gradient_boosting(seed: int) -> HistGradientBoostingRegressor:
    """scikit-learn's defaults (100 iterations, learning rate 0.1, no early stopping below 10,000 samples)."""
    return HistGradientBoostingRegressor(random_state=seed)


def mlp(seed: int) -> TransformedTargetRegressor:
    """Two hidden layers of 64, L-BFGS (scikit-learn's advice for small data), inputs and target standardized."""
    network = MLPRegressor(hidden_layer_sizes=(64, 64), solver="lbfgs", alpha=1e-3, max_iter=500, random_state=seed)
    return TransformedTargetRegressor(regressor=make_pipeline(StandardScaler(), network), transformer=StandardScaler())


class LFBOClassifier(Surrogate):
    """LFBO's random-forest classifier of the top `quantile` (failures bad), through `LFBOPatternSearch.fit` and
    `.select`: with similarity_penalty 0 the order is by P(good); with LFBO's default 1.0 it is LFBO's greedy pick,
    P(good) minus the mean leaf-similarity to the candidates picked before."""

    def __init__(self, space: Space, seed: int, similarity_penalty: float) -> None:
        super().__init__(space, seed)
        self.similarity_penalty = similarity_penalty

    def fit(self, configs: Sequence[Config], latency_ms: np.ndarray) -> LFBOClassifier:
        settings = LFBOPatternSearchSettings(similarity_penalty=self.similarity_penalty)
        self.search_ = LFBOPatternSearch(self.space, self.seed, settings)
        latency = np.where(np.isnan(latency_ms), np.inf, np.asarray(latency_ms, dtype=float))
        self.search_.observed = {self.space.key(config): float(value) for config, value in zip(configs, latency)}
        self.forest_ = self.search_.fit()
        return self

    def order(self, configs: Sequence[Config]) -> np.ndarray:
        position = {self.space.key(config): index for index, config in enumerate(configs)}
        picked = self.search_.select(self.forest_, list(configs), len(configs))
        return np.array([position[self.space.key(config)] for config in picked], dtype=int)


SURROGATES: dict[str, Callable[[Space, int], Surrogate]] = {
    "random": RandomSelection,
    "random_forest": lambda space, seed: LogLatencyRegressor(space, seed, random_forest),
    "gradient_boosting": lambda space, seed: LogLatencyRegressor(space, seed, gradient_boosting),
    "mlp": lambda space, seed: LogLatencyRegressor(space, seed, mlp),
    "lfbo": lambda space, seed: LFBOClassifier(space, seed, similarity_penalty=0.0),
    "lfbo_diverse": lambda space, seed: LFBOClassifier(space, seed,
                                                       LFBOPatternSearchSettings().similarity_penalty),
}
LABELS = {"random": "random selection (exact)", "random_forest": "random forest, log latency",
          "gradient_boosting": "gradient boosting, log latency", "mlp": "MLP, log latency",
          "lfbo": "LFBO classifier, P(top 10 %)", "lfbo_diverse": "LFBO classifier + diversity penalty"}


def make_surrogate(name: str, space: Space, seed: int) -> Surrogate:
    """The surrogate registered as `name`."""
    if name not in SURROGATES:
        raise ValueError(f"unknown surrogate {name!r}; known: {', '.join(SURROGATES)}")
    return SURROGATES[name](space, seed)


# -- a search state and what a surrogate makes of it ------------------------------------------------------------------

@dataclass(frozen=True)
class State:
    """A point of a search: the measured training set, the candidate pool, and the pool's recorded latencies."""

    task: str
    seed: int
    space: Space
    training: list[Config]
    training_ms: np.ndarray
    pool: list[Config]
    pool_ms: np.ndarray

    @property
    def incumbent_ms(self) -> float:
        return float(np.min(self.training_ms))


def picks(percent: float, pool_size: int) -> int:
    """k = max(1, ceil(percent x pool_size / 100)): how many candidates a budget of `percent` % measures."""
    if not 0 < percent <= 100:
        raise ValueError(f"percent must be in (0, 100], got {percent}")
    return max(1, math.ceil(percent * pool_size / 100 - 1e-9))


def outcomes(pool_ms: np.ndarray, incumbent_ms: float, order: np.ndarray,
             counts: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Best picked latency, improvement and fraction of the pool's best when the first k of `order` are measured,
    for each k of `counts`."""
    best = np.minimum.accumulate(np.asarray(pool_ms, dtype=float)[order])[np.asarray(counts) - 1]
    return best, _improvement(best, incumbent_ms), _fraction(best, np.min(pool_ms))


def random_outcomes(pool_ms: np.ndarray, incumbent_ms: float,
                    counts: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """As `outcomes`, in expectation over uniform picks of k candidates without replacement, in closed form."""
    pool = np.where(np.isnan(pool_ms), np.inf, np.asarray(pool_ms, dtype=float))
    counts = np.asarray(counts)
    capped = np.minimum(pool, incumbent_ms) / incumbent_ms  # monotone, so min of capped = capped of min; finite
    improvement = np.maximum(0.0, 1.0 - random_search_expected_best(capped, counts))  # no rounding below 0
    pool_best = np.min(pool)
    fraction = (random_search_expected_fraction(pool, pool_best, counts) if np.isfinite(pool_best)
                else np.full(counts.shape, np.nan))
    return random_search_expected_best(pool, counts), improvement, fraction


def _improvement(best_ms: np.ndarray, incumbent_ms: float) -> np.ndarray:
    return np.maximum(0.0, incumbent_ms - best_ms) / incumbent_ms


def _fraction(best_ms: np.ndarray, pool_best_ms: float) -> np.ndarray:
    if not np.isfinite(pool_best_ms):
        return np.full(np.shape(best_ms), np.nan)
    return np.where(np.isfinite(best_ms), pool_best_ms / best_ms, 0.0)


def score_state(state: State, surrogate: Surrogate | str, percents: Sequence[float] = PERCENTS) -> pd.DataFrame:
    """One row per percent: what `surrogate` (an instance, or a registered name seeded from the state) picks from
    the state's pool. A RandomSelection is scored by its exact expectation."""
    name = surrogate if isinstance(surrogate, str) else type(surrogate).__name__
    if isinstance(surrogate, str):
        surrogate = make_surrogate(surrogate, state.space, _stream_seed(state.seed, state.task, name))
    counts = [picks(percent, len(state.pool)) for percent in percents]
    if isinstance(surrogate, RandomSelection):
        best, improvement, fraction = random_outcomes(state.pool_ms, state.incumbent_ms, counts)
    else:
        # One thread: these fits are small, and OpenMP/BLAS threads on busy cores made them 20-50x slower.
        with threadpool_limits(limits=1):
            order = surrogate.fit(state.training, state.training_ms).order(state.pool)
        if sorted(order.tolist()) != list(range(len(state.pool))):
            raise ValueError(f"{name}.order must return every candidate index once")
        best, improvement, fraction = outcomes(state.pool_ms, state.incumbent_ms, order, counts)
    return pd.DataFrame({"surrogate": name, "task": state.task, "seed": state.seed, "percent": list(percents),
                         "picks": counts, "pool_size": len(state.pool), "incumbent_ms": state.incumbent_ms,
                         "best_picked_ms": best, "improvement": improvement, "fraction_of_pool_best": fraction})


def _stream_seed(seed: int, *labels: str) -> int:
    """A seed for one named use (pool, surrogate) of one (task, seed): independent of the others and of the order."""
    words = [seed, *(zlib.crc32(label.encode()) for label in labels)]
    return int(np.random.default_rng(words).integers(2**31))


@lru_cache(maxsize=16)
def _recorded(task: Task) -> tuple[Space, dict[str, Key], dict[Key, float]]:
    """The task's space, its config keys by trace text, and every recorded latency (failures inf)."""
    dataset = cached_dataset(task.dataset)
    rows = dataset.task(task.shape)
    names = list(dataset.parameter_names)
    keys = [tuple(values) for values in rows[names].itertuples(index=False, name=None)]
    space = dataset.space(task.shape)
    keys = [space.key(dict(zip(names, key))) for key in keys]  # numpy scalars to Python values
    latency = np.nan_to_num(rows["latency_ms"].to_numpy(dtype=float), nan=np.inf)
    return space, {",".join(map(str, key)): key for key in keys}, dict(zip(keys, latency.tolist()))


def ablation_tasks(datasets: Sequence[str], shapes_per_dataset: int) -> list[Task]:
    """`shapes_per_dataset` shapes of each dataset (spread over its sorted shapes; 0 = all) as tasks; dataset paths
    relative to the repository root, as the notebooks take them."""
    from tunebench.report import resolve_dataset

    chosen = []
    for path in map(resolve_dataset, datasets):
        every = [task.shape for task in tasks_of(path)]
        chosen += tasks_of(path, spread_shapes(every, shapes_per_dataset))
    return chosen


def make_state(task: Task, seed: int, *, training_size: int = TRAINING_SIZE, pool_size: int = POOL_SIZE,
               pool: str = "neighbourhood", trace_strategy: str = "lfbo") -> State:
    """The state of step 1 and 2 of the module's definition, for one task and seed."""
    if pool not in POOLS:
        raise ValueError(f"unknown pool {pool!r}; allowed: {', '.join(POOLS)}")
    space, key_of_text, latency_of = _recorded(task)
    trace = replay_run(Run(trace_strategy, task, seed), Budget(evaluations=training_size))
    measured = [key_of_text[text] for text in trace["config_key"]]
    training = [space.config(key) for key in measured]
    training_ms = np.array([latency_of[key] for key in measured])
    if not np.isfinite(training_ms).any():
        raise ValueError(f"{task.name} seed {seed}: every one of the {len(measured)} training configs failed")
    rng = np.random.default_rng(_stream_seed(seed, task.name, "pool"))
    if pool == "neighbourhood":
        generator = LFBOPatternSearch(space, _stream_seed(seed, task.name, "candidates"))
        generator.visited = set(measured)
        ranked = np.argsort(training_ms, kind="stable")[: generator.settings.copies]
        found: dict[Key, Config] = {}
        for index in ranked:
            if np.isfinite(training_ms[index]):
                found.update((space.key(config), config) for config in generator.candidates(training[index]))
        candidates = list(found.values())
        if len(candidates) > pool_size:
            candidates = [candidates[i] for i in sorted(rng.choice(len(candidates), pool_size, replace=False))]
    else:
        candidates = sample_new(space, rng, pool_size, exclude=measured)
    if not candidates:
        raise ValueError(f"{task.name} seed {seed}: the {pool} pool is empty")
    candidates = [candidates[i] for i in rng.permutation(len(candidates))]
    pool_ms = np.array([latency_of[space.key(config)] for config in candidates])
    return State(task.name, seed, space, training, training_ms, candidates, pool_ms)


def ablation(tasks: Sequence[Task], seeds: Sequence[int], *, surrogates: Sequence[str] = tuple(SURROGATES),
             percents: Sequence[float] = PERCENTS, training_size: int = TRAINING_SIZE, pool_size: int = POOL_SIZE,
             pool: str = "neighbourhood", trace_strategy: str = "lfbo") -> pd.DataFrame:
    """The tidy ablation: a row per (surrogate, task, seed, percent), as the module docstring defines it.

    Columns: dataset, task, seed, surrogate, percent, picks, pool_size, incumbent_ms, best_picked_ms (expected, for
    random), improvement, fraction_of_pool_best, fit_s (seconds to fit and order, shared by the state's percents).
    """
    unknown = [name for name in surrogates if name not in SURROGATES]
    if unknown:
        raise ValueError(f"unknown surrogates {unknown}; known: {', '.join(SURROGATES)}")
    for percent in percents:
        picks(percent, 1)  # checks the range
    frames = []
    for task in tasks:
        for seed in seeds:
            state = make_state(task, int(seed), training_size=training_size, pool_size=pool_size, pool=pool,
                               trace_strategy=trace_strategy)
            for name in surrogates:
                started = time.process_time()
                frame = score_state(state, name, percents)
                frames.append(frame.assign(fit_s=time.process_time() - started))
    results = pd.concat(frames, ignore_index=True)
    results.insert(0, "dataset", results["task"].str.split(":").str[0])
    return results


# -- mean and confidence interval -------------------------------------------------------------------------------------

def summarize_ablation(results: pd.DataFrame, *, confidence: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = 0) -> pd.DataFrame:
    """Mean and bootstrap interval of each metric per (scope, metric, surrogate, percent); scope is each dataset, then
    ALL_TASKS. The interval is the percentile interval of a two-level bootstrap: tasks drawn with replacement, then
    seeds with replacement within each drawn task. Every surrogate and percent shares the same resamples, so
    `minus_random` (with `_low`, `_high`), the paired difference to random selection at the same percent, gets a
    paired interval (NaN without random in `results`)."""
    rows = []
    tail = (1 - confidence) / 2
    scopes = [(name, results[results["dataset"] == name]) for name in dict.fromkeys(results["dataset"])]
    for scope, frame in [*scopes, (ALL_TASKS, results)]:
        for metric in METRICS:
            table = frame.pivot_table(index=["task", "seed"], columns=["surrogate", "percent"], values=metric,
                                      aggfunc="first", dropna=False, sort=False)
            tasks = table.index.get_level_values("task")
            weights = _cluster_bootstrap_weights(tasks, resamples, seed)
            values = table.to_numpy(dtype=float)
            replicates = (weights @ values) / weights.sum(axis=1, keepdims=True)
            columns = list(table.columns)
            for column, (surrogate, percent) in enumerate(columns):
                row = {"scope": scope, "metric": metric, "surrogate": surrogate, "percent": percent,
                       "mean": values[:, column].mean(), "confidence": confidence, "tasks": tasks.nunique(),
                       "states": len(values)}
                row["low"], row["high"] = np.quantile(replicates[:, column], [tail, 1 - tail])
                row["minus_random"] = row["minus_random_low"] = row["minus_random_high"] = np.nan
                if ("random", percent) in columns:
                    baseline = columns.index(("random", percent))
                    row["minus_random"] = row["mean"] - values[:, baseline].mean()
                    row["minus_random_low"], row["minus_random_high"] = np.quantile(
                        replicates[:, column] - replicates[:, baseline], [tail, 1 - tail])
                rows.append(row)
    return pd.DataFrame(rows)


def _cluster_bootstrap_weights(tasks: Sequence[str], resamples: int, seed: int) -> np.ndarray:
    """(resamples, states) counts of how often each state is drawn: tasks with replacement, then states (seeds) of
    each drawn task with replacement."""
    tasks = np.asarray(tasks)
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(tasks == task) for task in dict.fromkeys(tasks.tolist())]
    weights = np.zeros((resamples, tasks.size))
    drawn_tasks = rng.integers(len(members), size=(resamples, len(members)))
    rows = np.arange(resamples)
    for slot in range(len(members)):
        chosen = drawn_tasks[:, slot]
        for index, states in enumerate(members):
            hit = rows[chosen == index]
            draws = states[rng.integers(states.size, size=(hit.size, states.size))]
            np.add.at(weights, (np.repeat(hit, states.size), draws.ravel()), 1.0)
    return weights


# -- figures and tables -----------------------------------------------------------------------------------------------

def plot_ablation(summary: pd.DataFrame, metric: str = "improvement", *, col_wrap: int = 4) -> Figure:
    """The ablation curve of `metric`: one panel per dataset and one over all tasks; a line per surrogate with its
    bootstrap interval shaded; x on a log axis."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from matplotlib.ticker import FixedLocator, NullLocator

    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; allowed: {', '.join(METRICS)}")
    data = summary[summary["metric"] == metric]
    scopes = list(dict.fromkeys(data["scope"]))
    surrogates = list(dict.fromkeys(data["surrogate"]))
    learned = [surrogate for surrogate in surrogates if surrogate != "random"]  # random is drawn dashed black
    colors = dict(zip(learned, sns.color_palette("colorblind", max(len(learned), 1))))
    scale = 100.0 if metric == "improvement" else 1.0
    ticks = sorted(data["percent"].unique())
    cols = max(1, min(col_wrap, len(scopes)))
    rows = math.ceil(len(scopes) / cols)
    figure, axes = plt.subplots(rows, cols, figsize=(4.3 * cols, 3.2 * rows + 0.8), squeeze=False,
                                layout="constrained")
    for ax in axes.ravel()[len(scopes):]:
        ax.remove()
    for index, (ax, scope) in enumerate(zip(axes.ravel(), scopes)):
        for surrogate in surrogates:
            line = data[(data["scope"] == scope) & (data["surrogate"] == surrogate)].sort_values("percent")
            style = {"color": "0.15", "linestyle": "--"} if surrogate == "random" else {"color": colors[surrogate]}
            ax.plot(line["percent"], scale * line["mean"], marker="o", markersize=3, linewidth=1.6,
                    label=LABELS.get(surrogate, surrogate), **style)
            ax.fill_between(line["percent"], scale * line["low"], scale * line["high"], alpha=0.08,
                            color=style["color"], linewidth=0)
        first = data[data["scope"] == scope].iloc[0]
        tasks = int(first["tasks"])
        ax.set_title(f"{scope} ({tasks} task{'s' if tasks > 1 else ''}, {int(first['states'])} states)", fontsize=10)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([f"{tick:g}" for tick in ticks])
        ax.set_xlabel("candidates measured (% of the pool)")
        if index % cols == 0:
            ax.set_ylabel(METRICS[metric])
        if metric == "fraction_of_pool_best":
            ax.set_ylim(top=1.02)
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=min(3, len(labels)), frameon=False,
                  title=f"shaded: {data['confidence'].iloc[0]:.0%} bootstrap interval of the mean "
                        "(tasks, then seeds within them)")
    return figure


def summary_table(summary: pd.DataFrame, metric: str = "improvement", percents: Sequence[float] = (5, 10, 20), *,
                  scope: str = ALL_TASKS, surrogates: Sequence[str] | None = None) -> pd.DataFrame:
    """Over `scope`, per surrogate and for each of `percents`: the mean of `metric` and its paired difference to
    random selection, each as "mean [low, high]" text (improvement in % of the incumbent latency)."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; allowed: {', '.join(METRICS)}")
    data = summary[(summary["scope"] == scope) & (summary["metric"] == metric)]
    missing = [percent for percent in percents if percent not in set(data["percent"])]
    if missing:
        raise ValueError(f"percents {missing} are not in the ablation's grid {sorted(set(data['percent']))}")
    scale, digits = (100.0, 2) if metric == "improvement" else (1.0, 3)

    def text(mean: float, low: float, high: float) -> str:
        if np.isnan(mean):
            return ""
        return f"{scale * mean:+.{digits}f} [{scale * low:+.{digits}f}, {scale * high:+.{digits}f}]"

    rows = []
    for surrogate in surrogates or list(dict.fromkeys(data["surrogate"])):
        row: dict[str, object] = {"surrogate": LABELS.get(surrogate, surrogate)}
        for percent in percents:
            cell = data[(data["surrogate"] == surrogate) & (data["percent"] == percent)].iloc[0]
            row[f"x = {percent:g} %"] = text(cell["mean"], cell["low"], cell["high"]).replace("+", "")
            if surrogate != "random":
                row[f"x = {percent:g} %, minus random"] = text(cell["minus_random"], cell["minus_random_low"],
                                                           cell["minus_random_high"])
            else:
                row[f"x = {percent:g} %, minus random"] = ""
        rows.append(row)
    return pd.DataFrame(rows)
