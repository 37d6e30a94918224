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
# # Strategy comparison: which search finds a fast config with the fewest, cheapest measurements
#
# Every strategy searches every task (a shape of a recorded dataset) once per seed, replayed from the record on a
# simulated clock: a batch costs its compile makespan on the recorded compile workers plus its benchmark times, plus
# the strategy's own CPU time. Budgets count unique evaluations. The study is cached under `study_dir` and resumes
# where it stopped. The default datasets span two regimes: the compute-bound GEMM, the memory-bound layer norm and
# softmax (all swept exhaustively on an H100), and a Kernel Tuner convolution on two GPUs. Run with other parameters:
# `.venv/bin/python -m tunebench.report notebooks/strategy_comparison.py -p seeds 20 -p shapes_per_dataset 0`.

# %%
from tunebench.dataset_summary import provenance_line
from tunebench.metrics import summarize
from tunebench.notebook_tables import methodology_table, overhead_table, overview_table, table_style
from tunebench.plots import (plot_failure_share, plot_fraction_aggregated, plot_fraction_per_task, plot_search_ends,
                             search_ends)
from tunebench.report import set_style, show_run_header
from tunebench.study import open_dataset, task_references, tasks_by_kernel
from tunebench.study_plan import StudyPlan

set_style()

# %% tags=["parameters"]
# datasets: recorded datasets, relative to the repository root
datasets = ["results/datasets/matmul_bfloat16_h100.parquet",
            "results/datasets/layernorm_bfloat16_h100.parquet",
            "results/datasets/softmax_bfloat16_h100.parquet",
            "../shared/datasets/kerneltuner/convolution_A100.json.gz",
            "../shared/datasets/kerneltuner/convolution_A4000.json.gz"]
# shapes_per_dataset: shapes taken from each dataset, evenly through its sorted shapes, for a GEMM over M; 0 takes all
shapes_per_dataset = 2
# strategies: names in tunebench.search.NAMES, or the import path of a Strategy subclass of your own
# ("my_module.MySearch", its module on PYTHONPATH; docs/strategies.md, "Your own strategy")
strategies = ["random", "pattern", "lfbo", "de", "optuna_tpe", "optuna_cmaes"]
seeds = 10  # runs per (strategy, task), seeds 0..seeds-1; 10 or more for the confidence intervals
budget = 200  # unique evaluations per run
backend = "replay"  # replay answers from the recorded dataset; live, on a GPU, is not run from a notebook
# mode: deterministic replays the recorded median; noisy a seeded bootstrap median of the repeats, and judges each run by
# the recorded median of the config it would deploy
mode = "deterministic"
study_dir = "results/studies"  # where the trace table is cached, relative to the repository root

# %%
plan = StudyPlan(tuple(datasets), shapes_per_dataset, tuple(strategies), seeds, budget, mode, backend)
tasks = plan.tasks()
show_run_header({"datasets": datasets, "shapes_per_dataset": shapes_per_dataset, "strategies": strategies,
                 "seeds": seeds, "budget": budget, "backend": backend, "mode": mode, "study_dir": study_dir},
                {"tasks": ", ".join(task.name for task in tasks),
                 **{task.name.split(":")[0]: provenance_line(open_dataset(task.dataset)) for task in tasks}})

# %%
trace = plan.run(study_dir)
optima, latencies, seconds_per_evaluation = task_references(tasks)
by_kernel = tasks_by_kernel(tasks)

# %% [markdown]
# ## Best so far against unique evaluations
# The fraction of optimum is the optimum latency divided by the best latency found so far (1 = the optimum). Solid
# lines: the median over seeds; shaded: the 95 % confidence interval of that median (order statistics); dashed:
# what random search is expected to hold after as many evaluations, computed exactly from the recorded latencies.
# The y axis starts where the curves start to climb.

# %%
plot_fraction_per_task(trace, optima, latencies, over="evaluations");

# %% [markdown]
# ## Best so far against simulated time
# The same traces on the simulated clock: a strategy that picks configs that compile slowly, or thinks long
# between batches, falls behind here: a strategy has nothing until its first batch returns. Random search is placed
# at the task's mean seconds per evaluation (compile time shared by the recorded compile workers, plus benchmark).

# %%
plot_fraction_per_task(trace, optima, latencies, over="seconds", seconds_per_evaluation=seconds_per_evaluation);

# %% [markdown]
# ## Over all tasks
# The median over tasks of each task's median over seeds; the band spans the middle half of the tasks. On the
# right, time is divided by each task's mean seconds per evaluation, since the tasks differ about a hundredfold
# in what one evaluation costs (Kernel Tuner compiles one config at a time; the H100 sweeps used 14 or 15 workers).

# %%
plot_fraction_aggregated(trace, optima, latencies, seconds_per_evaluation);

# %% [markdown]
# ## Per kernel
# The same, over each kernel's tasks alone: does the ranking of the strategies hold for compute-bound and
# memory-bound kernels alike?

# %%
plot_fraction_aggregated(trace, optima, latencies, seconds_per_evaluation, by_kernel);

# %% [markdown]
# ## Methodology tables
# The score against random search is 0 for random search and 1 for the optimum, averaged over evaluations
# 1..budget, or over a uniform time grid up to the time random search needs for the budget (Willemsen et al.,
# FGCS 2024). Over time it is unbounded below: where random search holds nearly the optimum within seconds (the
# H100 tasks, whose 14 or 15 compile workers make an evaluation cost 0.03 to 0.09 s), a strategy that waits for a
# first batch of 80 to 100 configs (DE, PatternSearch, LFBO) scores far below 0 for that wait.
#
# Over all tasks: medians over tasks of the per-task medians over seeds (∞: not reached on half the tasks). "Restarted
# when it stops" is the expected seconds to the target if every run that stops short of it is followed by a fresh one,
# its seconds charged (COCO's average runtime, `metrics.expected_running_time`); "runs reaching" is the share of all
# runs that get there within the budget.

# %%
summary = summarize(trace, optima, latencies, budgets=sorted({b for b in (50, 100, budget) if b <= budget}),
                    seconds_per_evaluation=seconds_per_evaluation)
table_style(overview_table(summary))

# %% [markdown]
# Per kernel: the same medians over each kernel's tasks alone.

# %%
table_style(overview_table(summary, by_kernel))

# %% [markdown]
# Per task: medians over seeds, their 95 % confidence interval in brackets (order statistics; ∞: fewer than half
# the seeds, or fewer than the interval's rank, reached the target within the budget).

# %%
table_style(methodology_table(summary, kind="evals", tasks=[task.name for task in tasks], strategies=strategies))

# %%
table_style(methodology_table(summary, kind="seconds", tasks=[task.name for task in tasks], strategies=strategies))

# %% [markdown]
# ## How long a search runs, and what it ends with
# An autotuner that stops by itself is judged by its own length and by what it ends with, as Helion judges its LFBO
# pattern search against its pattern search (autotuning time and the final kernel's latency). Strategies that never
# stop (random, Optuna's samplers, the restarted presets) run to the budget, which then sets their length (hollow).
# Seconds are divided by each task's mean seconds per evaluation, as in "Over all tasks". docs/strategies.md, "How
# long a search runs", has the full study's figures.

# %%
plot_search_ends(summary, seconds_per_evaluation);

# %%
table_style(search_ends(summary, seconds_per_evaluation),
            {"ended on its own": "{:.0%}", "evaluations at the end": "{:.0f}",
             "seconds at the end, in evaluations": "{:.0f}", "runs ending at >= 0.99": "{:.0%}"})

# %% [markdown]
# ## Failures
# Dashed: the share of the whole space that fails, which random search is expected to hit.

# %%
plot_failure_share(trace, latencies);

# %% [markdown]
# ## What a strategy costs per ask
# CPU time of the strategy itself (ask and tell), charged to the simulated clock.

# %%
table_style(overhead_table(trace), {"asks per run": "{:.0f}", "configs per ask": "{:.1f}", "CPU ms per ask": "{:.2f}",
                                    "share of simulated time": "{:.1%}"})
