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
# # GEMM dataset: what an exhaustive sweep recorded
#
# Every valid Triton config of the GEMM kernel, measured on each shape of one GPU, against the vendor library.
# Run with other parameters: `.venv/bin/python -m tunebench.report notebooks/gemm_dataset.py -p dataset PATH`.

# %%
from tunebench.dataset_summary import (STATUSES, best_per_shape, first_shapes, plot_best_vs_vendor,
                                       plot_latency_distributions, speedup_summary, status_shares)
from tunebench.measure.dataset import load_dataset
from tunebench.report import repo_path, set_style, show_run_header

set_style()

# %% tags=["parameters"]
dataset = "results/datasets/matmul_bfloat16_h100.parquet"  # the recorded dataset, relative to the repository root
max_shapes = 0  # keep only the first N shapes in sorted order; 0 keeps all

# %%
data = first_shapes(load_dataset(repo_path(dataset)), max_shapes)
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
# ## Best Triton config vs the vendor library

# %%
best = best_per_shape(data)
print(speedup_summary(best))
plot_best_vs_vendor(data);

# %% [markdown]
# ## The best config per shape

# %%
best.style.format("{:.4g}", subset=list(best.select_dtypes("float").columns)).hide(axis="index")
