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
# # Sampled configs: where in the space each strategy looks
#
# The configs each strategy evaluated, on a 2-D PCA of the task's whole valid space (each parameter's encoding
# standardized; the PCA is fitted on every valid config, so all panels share the axes), and how many of its
# evaluations each strategy spent on configs that fail. Reads a study written by the strategy_comparison notebook.

# %%
from tunebench.dataset_summary import provenance_line
from tunebench.plots import plot_failure_share, plot_pca_by_latency, plot_pca_by_strategy
from tunebench.report import set_style, show_run_header
from tunebench.study import open_dataset, task_references
from tunebench.study_plan import open_study

set_style()

# %% tags=["parameters"]
study = ""  # a trace table written by strategy_comparison; empty means the one its defaults write, run here if missing
task = "matmul_bfloat16_h100:8192x4096x4096"  # the task whose sampled configs are drawn, as named in the trace
strategies = []  # strategies to draw, in panel order; empty means every strategy in the study
seed = 0  # the seed whose configs are drawn; -1 pools every seed

# %%
plan, trace, study_path = open_study(study)
tasks = {item.name: item for item in plan.tasks()}
if task not in tasks:
    raise ValueError(f"task {task!r} is not in the study {study_path.name}; its tasks: {', '.join(tasks)}")
data = open_dataset(tasks[task].dataset)
show_run_header({"study": study, "task": task, "strategies": strategies, "seed": seed},
                {"trace table": study_path, "study": str(plan), "dataset of the task": provenance_line(data)})

# %% [markdown]
# ## Coloured by strategy
# Light grey: every valid config of the task; red star: the optimum.

# %%
plot_pca_by_strategy(trace, tasks[task], data, strategies=strategies, seed=seed);

# %% [markdown]
# ## Coloured by latency
# The same configs coloured by how much slower than the optimum they are (log scale); crosses failed.

# %%
plot_pca_by_latency(trace, tasks[task], data, strategies=strategies, seed=seed);

# %% [markdown]
# ## Evaluations spent on failing configs
# Over every task and seed of the study, per dataset. Dashed: the share of the whole space that fails, which
# random search is expected to hit.

# %%
_, latencies, _ = task_references(list(tasks.values()))
chosen = trace[trace["strategy"].isin(strategies)] if strategies else trace
plot_failure_share(chosen, latencies);
