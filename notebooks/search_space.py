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
# # Search space: what an exhaustive sweep recorded
#
# Every valid config of one kernel, measured on each shape of one GPU: how the latencies spread, what each
# parameter does, where configs fail, and how the best config compares with the vendor library and the hardware.
# Run with other parameters: `.venv/bin/python -m tunebench.report notebooks/search_space.py -p dataset PATH`
# (a tunebench parquet dataset or a Kernel Tuner cache, e.g. `../shared/datasets/kerneltuner/convolution_A100.json.gz`).

# %%
from tunebench.dataset_summary import (STATUSES, best_per_shape, failure_count, first_shapes, speedup_summary,
                                       status_shares, timing_spread)
from tunebench.report import resolve_dataset, set_style, show_run_header
from tunebench.space_plots import (plot_best_vs_vendor, plot_failures_by_parameter, plot_latency_distributions,
                                   plot_parameter_effects, plot_roofline)
from tunebench.study import open_dataset

set_style()

# %% tags=["parameters"]
dataset = "results/datasets/matmul_bfloat16_h100.parquet"  # the recorded dataset, relative to the repository root
max_shapes = 0  # keep only the first N shapes in sorted order; 0 keeps all

# %%
data = first_shapes(open_dataset(resolve_dataset(dataset)), max_shapes)
show_run_header({"dataset": dataset, "max_shapes": max_shapes},
                {"kernel": data.kernel, "dtype": data.dtype, "gpu": data.gpu, **data.provenance})

# %% [markdown]
# ## Configs per shape
# `valid` counts the configs that compiled, ran and matched the reference; the other columns are shares of all configs.

# %%
status_shares(data).style.format("{:.0%}", subset=list(STATUSES)).hide(axis="index")

# %% [markdown]
# ## Latency spread
# How much slower than the best config the other valid configs are: the cost of a bad pick.

# %%
plot_latency_distributions(data);

# %% [markdown]
# ## How repeatable the timings are
# Each row's latency is the median of its repeats. A row whose repeats spread over more than half their median was
# disturbed while it was timed: 8.5 % of the first GEMM recordings, 0.03 % since the timed runs wait behind a GPU spin
# on a core of their own (`docs/measuring.md`).

# %%
print(timing_spread(data))

# %% [markdown]
# ## What each parameter does
# Boxes: every valid config with the value, relative to its shape's best, pooled over shapes. Red diamonds: the best
# latency reachable with the value fixed (median over shapes); at 1× the value is part of an optimum, and a value
# whose diamond sits high can be pruned from the search with little loss.

# %%
plot_parameter_effects(data);

# %% [markdown]
# ## Where configs fail

# %%
if failure_count(data):
    plot_failures_by_parameter(data)
else:
    print(f"No failures recorded: all {len(data.measurements):,} configs over {len(data.shapes())} shapes ran ok "
          "(the resource model pruned every config that could not run).")

# %% [markdown]
# ## Best config vs the vendor library

# %%
best = best_per_shape(data)
if data.vendor.empty:
    print("This dataset records no vendor library.")
else:
    print(speedup_summary(best))
    plot_best_vs_vendor(data)

# %% [markdown]
# ## Roofline
# Achieved TFLOP/s of the best Triton config and of the vendor library against the arithmetic intensity of each
# shape. The compute roof is the best vendor throughput measured in this dataset, not the datasheet peak; the
# legend says where the memory roof comes from. Grey lines join the two points of one shape.

# %%
if tuple(data.shape_names) == ("M", "N", "K") and not data.vendor.empty:
    plot_roofline(data)
else:
    print("A roofline is drawn for GEMM datasets with vendor rows only.")

# %% [markdown]
# ## The best config per shape

# %%
best.style.format("{:.4g}", subset=list(best.select_dtypes("float").columns)).hide(axis="index")
