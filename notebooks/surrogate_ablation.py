# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: tunebench
#     language: python
#     name: tunebench
# ---

# %% [markdown]
# # Surrogate ablation: how much of the next batch's improvement a surrogate keeps when it may measure x % of the candidates
#
# A model-pruned search (LFBO pattern search) generates many candidate moves and measures only the few its surrogate
# ranks first. From recorded states of real searches, this notebook asks how much each surrogate gains over picking
# at random, as the share of candidates it may measure shrinks. Run with other parameters:
# `.venv/bin/python -m tunebench.report notebooks/surrogate_ablation.py -p seeds 20 -p shapes_per_dataset 0
# -p percents "[1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100]"`.

# %%
import time

from tunebench.dataset_summary import provenance_line
from tunebench.notebook_tables import table_style
from tunebench.report import set_style, show_run_header
from tunebench.study import open_dataset
from tunebench.surrogates import (FAILURE_PENALTY, ablation, ablation_tasks, plot_ablation, summarize_ablation,
                                  summary_table)

set_style()

# %% tags=["parameters"]
datasets = ["results/datasets/matmul_bfloat16_h100.parquet",
            "../shared/datasets/kerneltuner/convolution_A100.json.gz",
            "../shared/datasets/kerneltuner/convolution_A4000.json.gz"]  # recorded datasets, relative to the repository root
shapes_per_dataset = 4  # shapes taken from each dataset, spread over its sorted shapes, for GEMM over M; 0 = all
seeds = 5  # states per task, seeds 0..seeds-1
training_size = 100  # n: the first n unique evaluations of the replayed trace form the training set
trace_strategy = "lfbo"  # the strategy whose replayed trace gives the training set (tunebench.search.STRATEGIES)
pool = "neighbourhood"  # candidates: "neighbourhood" (LFBO's generator around the 5 best) or "uniform" (unevaluated)
pool_size = 300  # m: candidates per state at most (drawn uniformly when the generator proposes more)
percents = [1, 2, 5, 10, 20, 50, 100]  # x: % of the pool a surrogate may measure, each in (0, 100]
surrogates = ["random", "random_forest", "gradient_boosting", "mlp", "lfbo",
              "lfbo_diverse"]  # names in tunebench.surrogates.SURROGATES
table_percents = [5, 10, 20]  # the columns of the summary table; each must be in percents

# %%
tasks = ablation_tasks(datasets, shapes_per_dataset)
show_run_header({"datasets": datasets, "shapes_per_dataset": shapes_per_dataset, "seeds": seeds,
                 "training_size": training_size, "trace_strategy": trace_strategy, "pool": pool,
                 "pool_size": pool_size, "percents": percents, "surrogates": surrogates,
                 "table_percents": table_percents},
                {"tasks": ", ".join(task.name for task in tasks),
                 **{task.name.split(":")[0]: provenance_line(open_dataset(task.dataset)) for task in tasks}})

# %% [markdown]
# ## What is measured, exactly
#
# 1. **State.** For a task (one shape of a recorded dataset) and a seed, the training set D is the first
#    n = `training_size` unique evaluations of `trace_strategy` replayed deterministically on the task with that
#    seed (`tunebench.study.replay_run`): recorded median latencies, failures as ∞. The incumbent f\* is the best
#    finite latency in D. With LFBO and n = 100, D is LFBO's uniformly drawn initial population: the state in which
#    LFBO first consults its classifier. A larger n gives later states, D then holding the classifier's own picks.
# 2. **Pool.** `neighbourhood`: the unevaluated candidates LFBO's generator (`LFBOPatternSearch.candidates`: every
#    single-parameter neighbour and 300 random moves of up to 4 parameters) proposes around each of the 5 best configs
#    of D, where LFBO's search copies stand, deduplicated; at most m = `pool_size` of them, drawn uniformly.
#    `uniform`: m unevaluated configs drawn uniformly. The pool is put in a random order, so ties in a surrogate's
#    scores are broken at random.
# 3. **Picks.** Each surrogate is fitted on D and orders the pool; with a budget of x %, it measures its first
#    k = max(1, ⌈x·m / 100⌉) candidates. b(x) is the best recorded latency among them (∞ if all of them fail).
# 4. **Outcomes.** The **improvement** I(x) = max(0, f\* − b(x)) / f\*, the relative reduction of the best latency
#    that the next batch brings (0 when no pick beats the incumbent), and the **fraction of the pool's best**
#    F(x) = min(pool) / b(x), 1 when the pool's best config is among the picks, 0 when only failures are (regret
#    1 − F). At x = 100 % every surrogate measures the whole pool: I(100) = max(0, f\* − min(pool)) / f\*, the most
#    this pool holds, and F(100) = 1.
# 5. **Random selection** is not simulated: its expectation over the C(m, k) equally likely picks is computed
#    exactly from the order statistics of the pool (`tunebench.metrics.random_search_expected_best` and
#    `random_search_expected_fraction`).
# 6. **Summary.** The mean of I(x) and F(x) over every task × seed state (tasks weigh equally: each has the same
#    seeds), with a 95 % percentile interval of a two-level bootstrap: tasks drawn with replacement, then seeds with
#    replacement within each drawn task (2,000 resamples; all surrogates share the resamples). A dataset with one
#    task (each Kernel Tuner cache) gets a bootstrap over its seeds.
#
# The surrogates, all seeded: random forest, gradient boosting (scikit-learn's `HistGradientBoostingRegressor`) and an
# MLP (two hidden layers of 64, inputs and target standardized) regress log latency on `Space.encode` features, a
# failed training config counting as log of FAILURE_PENALTY × the slowest finite training latency; the **LFBO
# classifier** is LFBO's own random forest of the top 10 % of D (failures labelled bad), ranking by P(good); **+
# diversity penalty** is LFBO's greedy pick, P(good) minus the mean leaf-similarity to the candidates picked before.
# Both LFBO variants call `LFBOPatternSearch.fit` and `.select` unchanged.

# %%
print(f"FAILURE_PENALTY = {FAILURE_PENALTY:g}")
started = time.perf_counter()
results = ablation(tasks, range(seeds), surrogates=surrogates, percents=percents, training_size=training_size,
                   pool_size=pool_size, pool=pool, trace_strategy=trace_strategy)
summary = summarize_ablation(results)
states = results.groupby(["task", "seed"])
print(f"{states.ngroups} states ({len(tasks)} tasks × {seeds} seeds) × {len(surrogates)} surrogates in "
      f"{time.perf_counter() - started:.1f} s; pool sizes {states['pool_size'].first().min()} to "
      f"{states['pool_size'].first().max()} candidates")

# %% [markdown]
# ## Expected improvement of the next batch
# Per dataset, and over all tasks on the right. The y value at 100 % is what the whole pool holds; a surrogate that
# reaches it at a small x has found the pool's improving configs cheaply. Dashed: random selection, exact.

# %%
plot_ablation(summary, "improvement");

# %% [markdown]
# ## Fraction of the pool's best
# Whether the picks contain the pool's best config, whether or not it beats the incumbent: ranking quality on its own.

# %%
plot_ablation(summary, "fraction_of_pool_best");

# %% [markdown]
# ## Over all tasks
# Mean over task × seed states [95 % two-level bootstrap interval], and the paired difference to random selection at
# the same x (the same resamples for both, so the interval of the difference is much narrower than either one's).
# Improvement, in % of the incumbent latency:

# %%
table_style(summary_table(summary, "improvement", table_percents, surrogates=surrogates))

# %% [markdown]
# Fraction of the pool's best (1 = the pool's best config picked):

# %%
table_style(summary_table(summary, "fraction_of_pool_best", table_percents, surrogates=surrogates))
