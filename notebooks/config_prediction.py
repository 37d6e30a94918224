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
# # Config prediction: picking a config for a shape no one has measured
#
# A gradient-boosted ranker scores the recorded candidate configs of a GEMM shape from problem, config and
# interaction features, corrected by the errors it made on the nearest training shapes. Every number here is out of
# fold (GroupKFold by shape): the model that scores a shape never saw it. The current cross-validation comes from
# `benchmarks/config_prediction_cv.py` (`cv_per_shape`); the last full run of `benchmarks/config_prediction.py`
# (`results_dir`, on fewer shapes) adds the objectives compared and the warm-start replays. This notebook reads them,
# and fits one fold itself for the feature importances and the traces.
# Run with other parameters: `.venv/bin/python -m tunebench.report notebooks/config_prediction.py -p fold 2`.

# %%
from dataclasses import replace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display
from threadpoolctl import threadpool_limits

from tunebench.live_traces import across_shapes, summary_rows
from tunebench.measure.replay import ReplayEvaluator
from tunebench.notebook_tables import table_style
from tunebench.plots import plot_efficiency_cdf, plot_live_traces
from tunebench.predict import by_alignment, by_family, fit_predictor, grouped_folds, read_header, summarize_efficiency, training_data
from tunebench.predict.compiled import load_table
from tunebench.predict.evaluation import retimed_efficiency, shape_efficiency, thin_shapes
from tunebench.predict.model import RankerSettings
from tunebench.report import repo_path, resolve_dataset, set_style, show_run_header
from tunebench.search import make_strategy
from tunebench.search.warm_start import warm_start
from tunebench.study import Budget, open_dataset, run_search

set_style()

# %% tags=["parameters"]
dataset = "results/datasets/matmul_bfloat16_h100_rerecorded.parquet"  # the recorded dataset (the re-recording: today's kernel, read flush), relative to the repository root
compiled_resources = "results/datasets/matmul_bfloat16_sm90_compiled.csv"  # its candidates as compiled (tunebench.predict.compiled)
results_dir = "results/config_prediction"  # what benchmarks/config_prediction.py wrote (its last full run)
cv_per_shape = "results/config_prediction/rerecord/cv1897_rerecorded_per_shape.csv"  # the current cross-validation (of the re-recording), shape by shape
fold = 0  # the outer fold (of 5) fitted here for importances and traces
fold_fraction = 0.4  # share of the fold's training and held-out shapes used there (seeded; below 1 is quicker, noisier)
permutation_repeats = 2  # shuffles per feature for the permutation importance
importance_models = 1  # models averaged in the fit for importances and traces (the deployed predictor averages more)
importance_trees = 0  # boosting iterations of that fit (0: the deployed model's; fewer is quicker and rougher)
trace_shapes = 3  # held-out shapes of the fold whose cold and warm searches are traced
trace_strategy = "lfbo"  # the inner strategy of the traced searches
seeds_k = 10  # the model's top configs the warm start measures first
budget = 150  # unique evaluations per traced search
cdf_from = 0.6  # left end of the efficiency axis
retime_journal = "results/config_prediction/retime_h100_preregistered.csv"  # side-by-side re-timing (picks beside it, .picks.csv)
live_traces = {  # live searches (benchmarks/live_search.py) by group: its title, the traces' glob relative to the repository root; those with a warm start are shown
    "hinted or odd shapes, H200, 2026-11-29": "results/live_search/*.parquet",
    "hinted or odd shapes, restart against the default, H200, 2026-12-02": "results/live_search/warm_restart/*.parquet",
    "real-model layers no dataset held, H200, 2026-12-02": "results/live_search/real_model_check/*.parquet",
}

# %%
recorded = open_dataset(resolve_dataset(dataset))
data = training_data(recorded, load_table(repo_path(compiled_resources), recorded.parameter_names))
results = repo_path(results_dir)
per_shape = pd.read_csv(results / "per_shape.csv")
current = pd.read_csv(repo_path(cv_per_shape))
header = read_header(next(results.glob("*.predictor")))
show_run_header({"dataset": dataset, "compiled_resources": compiled_resources, "results_dir": results_dir, "fold": fold,
                 "cv_per_shape": cv_per_shape, "fold_fraction": fold_fraction, "permutation_repeats": permutation_repeats,
                 "importance_models": importance_models, "importance_trees": importance_trees,
                 "trace_shapes": trace_shapes, "trace_strategy": trace_strategy, "seeds_k": seeds_k, "budget": budget,
                 "cdf_from": cdf_from, "retime_journal": retime_journal, "live_traces": live_traces},
                {"kernel": data.kernel, "dtype": data.dtype, "gpu": data.gpu, "shapes": len(data.shapes),
                 "candidates": len(data.candidates), "deployed model": str(header["settings"]),
                 "measured": recorded.provenance.get("date", "?")})

# %% [markdown]
# ## Efficiency over held-out shapes
# Efficiency = the measured best latency of the shape's candidates / the measured latency of the predicted config.
# A curve further right is better; CK Tile's published P10 and min (fp16, gfx950, their protocol) are marked. The
# last curve of each is not pure prediction: it times the model's top 10 configs for the shape and keeps the fastest.
# Left, the current cross-validation, each stage of the pipeline; right, the last full run, on fewer shapes, which
# also scored the log1p(TFLOPS) regression that CK Tile uses and the relative-speed regression against it.

# %%
stages = {"model_alone": "the models alone", "without_head": "with the neighbour correction",
          "selected": "the same, its top 10 re-ordered by the pairwise head", "dispatcher": "dispatcher (shortlist)",
          "top10_timed": "its top 10 timed, fastest kept (10 measurements)"}
objectives = {"throughput": "log1p(TFLOPS) regression", "relative": "relative-speed regression",
              "selected": "objective chosen on the inner splits, corrected, head",
              "selected_top10_timed": "its top 10 timed, fastest kept"}
figure, axes = plt.subplots(1, 2, figsize=(15, 4.5), sharey=True)
plot_efficiency_cdf(axes[0], {label: current[f"{column}_efficiency"] for column, label in stages.items()}, cdf_from)
axes[0].set_title(f"current cross-validation, {len(current):,} shapes; " + axes[0].get_title())
plot_efficiency_cdf(axes[1], {label: per_shape[f"{column}_efficiency"] for column, label in objectives.items()},
                    cdf_from)
axes[1].set_title(f"last full run, {len(per_shape):,} shapes: objectives; " + axes[1].get_title());

# %% [markdown]
# ## Side by side on the GPU
# The replay above judges a pick against the minimum of 600 timings from one sitting. Here each shape's picks and its
# recorded 20 fastest candidates were timed again together on the GPU, in interleaved rounds
# (`benchmarks/config_prediction_retime.py`): "top 10 timed" keeps its fastest in round 0, and every pick is judged on
# the median of the later rounds against the fastest of the set. The picks are those frozen with the timings: by
# default the 697-shape predictor's, frozen before the 96 real-model projection shapes were measured
# (`benchmarks/preregistered_picks.py`); `retime_h100_preregistered793.csv` holds the 793-shape predictor's, frozen
# before the next 48 were measured. Other journals hold out-of-fold picks of earlier runs on the shapes each added:
# `retime_h100_odd96.csv` the 441-shape model's on its 96 odd shapes, `retime_h100_hinted96.csv` the 345-shape
# model's on its 96 hinted ones, `retime_h100_narrow64.csv` the 633-shape pipeline's; `retime_h100_new96.csv` and
# `retime_h100.csv` earlier models' picks, timed before the kernel had alignment hints.

# %%
retimed = retimed_efficiency(pd.read_csv(repo_path(retime_journal)),
                             pd.read_csv(repo_path(retime_journal).with_suffix(".picks.csv")), 10)
judged = {"prediction": "prediction", "dispatcher": "dispatcher (shortlist)",
          "top 10 timed": "its top 10 timed in round 0, fastest kept", "recorded best": "the replay's measured best"}
figure, axis = plt.subplots(figsize=(8, 4.5))
plot_efficiency_cdf(axis, {label: retimed[column] for column, label in judged.items()}, cdf_from)
axis.set_title(f"{len(retimed)} shapes re-timed; " + axis.get_title());

# %% [markdown]
# ## Per family and per alignment class
# The current cross-validation's `best_config` (the dispatcher), by family of M
# (`tunebench.predict.evaluation.FAMILIES`) and by alignment class of N and K: aligned (multiples of 16), hinted
# (even, off multiples of 16: the kernel's alignment hints apply) and odd. The targets are 99 / 97 / 90 %.

# %%
table = current.rename(columns={"dispatcher_efficiency": "efficiency"})
summary = pd.concat([by_family(table).rename(columns={"family": "shapes of"}),
                     by_alignment(table).rename(columns={"alignment": "shapes of"}),
                     pd.DataFrame([{"shapes of": "all", **summarize_efficiency(table)}])])
summary.style.format({"mean": "{:.2%}", "p10": "{:.2%}", "min": "{:.2%}", "median": "{:.2%}"}).hide(axis="index")

# %% [markdown]
# ## What the model looks at
# Permutation importance on the held-out shapes of one fold: how much the mean efficiency of the picks drops when
# one column is shuffled across the fold's rows: a feature, or a column of the config profile when the model reads
# one. The model was trained on the other folds, with the deployed model's settings, but averaging
# `importance_models` models: one by default, to keep the notebook quick (`importance_trees` can shorten them too).
# The rows are scored by the fold predictor's compiled trees (`predict.forest`: sklearn's predictions to rounding,
# about 1.6 times as fast on a fold's rows).

# %%
train, test = (thin_shapes(shapes, fold_fraction) for shapes in grouped_folds(data.group, 5)[fold])
settings = replace(RankerSettings(**header["settings"]), models=importance_models,
                   max_iter=importance_trees or header["settings"]["max_iter"])
with threadpool_limits(1):
    predictor = fit_predictor(data, settings, train, shortlist_shapes=())  # no dispatcher grid: ranks only
rows = data.rows_of(test)
latency = data.latency_ms[rows].reshape(len(test), -1)


def mean_efficiency(matrix: np.ndarray) -> float:
    return float(shape_efficiency(predictor.compiled_scores(matrix).reshape(latency.shape), latency).mean())


rng = np.random.default_rng(0)
ranked = predictor.ranker.data_matrix(data, rows)  # the features, then the config profile's columns if it has one
names = data.feature_names + ([] if predictor.ranker.profile_ is None else predictor.ranker.profile_.names)
baseline = mean_efficiency(ranked)
drops = {}
for column, name in enumerate(names):
    shuffled = []
    for _ in range(permutation_repeats):
        matrix = ranked.copy()
        matrix[:, column] = rng.permutation(matrix[:, column])
        shuffled.append(baseline - mean_efficiency(matrix))
    drops[name] = np.mean(shuffled)
importance = pd.Series(drops).sort_values()
figure, axis = plt.subplots(figsize=(7, max(6.0, 0.22 * len(importance))))  # a legible row per column
importance.plot.barh(ax=axis, color="C0")
axis.set(xlabel=f"drop in mean efficiency when shuffled (fold {fold}: {baseline:.1%} unshuffled)", ylabel="");

# %% [markdown]
# ## Warm start against a cold start
# Best-so-far fraction of the recorded optimum on held-out shapes of the fold: the cold search, and the same
# strategy seeded with the fold model's top configs (measured first). Dotted: 0.99.

# %%
chosen = test[np.linspace(0, len(test) - 1, trace_shapes).round().astype(int)]
figure, axes = plt.subplots(1, len(chosen), figsize=(4.5 * len(chosen), 3.5), sharey=True, squeeze=False)
for axis, index in zip(axes[0], chosen):
    shape = tuple(int(size) for size in data.shapes[index])
    top = predictor.top_configs(shape, seeds_k)
    for label, build in (("cold", lambda space: make_strategy(trace_strategy, space, seed=0)),
                         (f"warm (top {seeds_k})", lambda space: warm_start(trace_strategy, space, top, seed=0))):
        evaluator = ReplayEvaluator(recorded, shape)
        with threadpool_limits(1):
            trace = run_search(build(evaluator.space), evaluator, Budget(evaluations=budget))
        axis.step(trace["eval_index"], evaluator.optimum_ms / trace["best_ms"], where="post", label=label)
    axis.axhline(0.99, color="grey", linestyle=":")
    axis.set(title="x".join(map(str, shape)), xlabel="unique evaluations", xscale="log")
axes[0][0].set(ylabel="fraction of optimum (optimum / best so far)")
figure.legend(*axes[0][0].get_legend_handles_labels(), loc="center left", bbox_to_anchor=(1.0, 0.5));

# %% [markdown]
# ## Warm start live, on the GPU
# Recorded live searches (`benchmarks/live_search.py`, over the whole config space, on the wall clock from a cold
# Triton cache, compiles included) whose strategies include a warm start, group by group: per shape, each strategy's
# best so far as a fraction of the run's best (the fastest config any of its searches found). Dotted: 0.99. Each
# group's table gives the medians over its shapes (a shape never reached counts as the slowest).

# %%
for group, pattern in live_traces.items():
    live = {path.stem: pd.read_parquet(path) for path in sorted(repo_path(".").glob(pattern))}
    live = {name: trace for name, trace in live.items() if trace["strategy"].str.startswith("warm:").any()}
    if not live:
        print(f"{group}: no live traces with a warm start match {pattern}")
        continue
    display(Markdown(f"**{group}**: {len(live)} shapes (`{pattern}`)"))
    display(table_style(across_shapes([summary_rows(trace) for trace in live.values()])))
    plot_live_traces(live)
    plt.show()

