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
# # Pipeline selection: which compressed-weight pipeline to run for each projection and batch size
#
# Four pipelines compute x @ W from a losslessly compressed BF16 weight: decode it back to BF16 and call cuBLAS
# (`decode_then_cublas`), decode only the exponents (`decode_exponents`) or transcode to 4-bit palette codes
# (`transcode_palette`) for a matmul that rebuilds the weight tiles, or rebuild them from the resident palette form
# with no preprocessing (`direct_palette`). The coordinate-descent autotuner picks one per projection and batch size;
# here it runs in replay on the recorded dataset, exactly as `benchmarks/pipeline_selection.py` does (whose tables are
# in `results/pipeline_selection/`). The preprocess/matmul split comes from `benchmarks/compressed_pipelines.py`:
# the dataset records whole steps only. Run with other parameters:
# `.venv/bin/python -m tunebench.report notebooks/pipeline_selection.py -p autotune_settings "{'strategy': 'random'}"`.

# %%
import pandas as pd
from IPython.display import Markdown, display

from tunebench.dataset_summary import provenance_line
from tunebench.kernels.compressed_matmul.autotune import AutotuneSettings
from tunebench.kernels.compressed_matmul.dispatch import Dispatcher
from tunebench.kernels.compressed_matmul.family import NAME
from tunebench.kernels.compressed_matmul.mlp import MODELS
from tunebench.kernels.compressed_matmul.selection_file import SelectionFile
from tunebench.kernels.compressed_matmul.selection_study import (
    VENDOR, chain_table, gain_summary, mlp_steps, projection_latencies, read_split, replay_selection, split_summary,
    winner_summary, winners,
)
from tunebench.measure.dataset import load_dataset
from tunebench.report import repo_path, resolve_dataset, set_style, show_run_header
from tunebench.selection_plots import gains_table, plot_mlp_steps, plot_split, plot_winners, steps_table, style_table

set_style()

# %% tags=["parameters"]
dataset = "results/datasets/compressed_matmul_bfloat16_h100.parquet"  # recorded, relative to the repository root
split = "results/compressed_pipelines/h100.json"  # benchmarks/compressed_pipelines.py's timings on the same GPU
chain = "results/compressed_chain/h100.csv"  # benchmarks/compressed_mlp_chain.py's rounds on the same GPU; "": none
model = "Llama-3.1-8B"  # an MLP of tunebench.kernels.compressed_matmul.mlp.MODELS
autotune_settings = {}  # overrides of AutotuneSettings: strategy, evaluations_per_pipeline, seed, probe, leaders, ...
replay_mode = "deterministic"  # "deterministic" (recorded medians) or "noisy" (seeded draws from the repeats)

# %%
recorded = load_dataset(resolve_dataset(dataset), kernel=NAME)
mlp = MODELS[model]
settings = AutotuneSettings(**autotune_settings)
tuning = replay_selection(recorded, mlp, settings, mode=replay_mode)
batches = [bucket.batch for bucket in tuning.buckets]
latencies = projection_latencies(recorded, mlp, batches, Dispatcher(SelectionFile(recorded.gpu, tuning, {})))
measured = read_split(repo_path(split), gpu=recorded.gpu)
show_run_header({"dataset": dataset, "split": split, "chain": chain, "model": model,
                 "autotune_settings": autotune_settings, "replay_mode": replay_mode},
                {"dataset": provenance_line(recorded), "split": f"{measured.gpu}, {measured.date}: {measured.command}",
                 "autotuner": f"{settings}; {tuning.evaluations:,} evaluations, "
                              f"{tuning.search_s:.0f} simulated seconds, rounds per batch size "
                              f"{[len(bucket.round_totals_ms) for bucket in tuning.buckets]}"})

# %% [markdown]
# ## Which pipeline wins where
# Per projection and batch size, the pipeline with the fastest recorded step (each at its fastest recorded config,
# exhaustive over the recording) and how much slower the runner-up is. gate and up have the same weight shape, so
# they share their recorded steps.

# %%
table = winners(latencies)
plot_winners(table)
display(Markdown(winner_summary(table)))

# %% [markdown]
# ## Preprocess and matmul, measured apart
# Each pipeline's preprocessing (decoding the whole weight at 100 % of the SMs) and matmul (the best of a short list
# of tile configs, not the dataset's exhaustive sweep), run one after the other, in µs; the black line is cuBLAS on
# the uncompressed weight. The dataset's overlapped steps decode the next weight during the current matmul, and its
# serial steps decode at 100 % and multiply in turn, as here; but the map above takes each pipeline at its best tile
# of the exhaustive sweep, so its winner need not be the fastest sum here.

# %%
plot_split(measured.table, [projection.name for projection in mlp.projections])
display(Markdown(split_summary(measured.table)))

# %% [markdown]
# ## What the autotuned dispatch gains
# The MLP step (gate + up + down, recorded steps) of always running one pipeline, each projection at that pipeline's
# fastest recorded config, against the dispatch's pick at each batch size, and against torch.matmul on the
# uncompressed BF16 weight: the cost of compression.

# %%
steps = mlp_steps(latencies)
plot_mlp_steps(steps)
display(Markdown(gain_summary(steps)))

# %%
display(style_table(steps_table(steps), "MLP step (µs)", "{:.1f}"),
        style_table(gains_table(steps), "Step over the autotuned dispatch's step (above 1×: the dispatch is faster)",
                    "{:.2f}×"))

# %% [markdown]
# ## The pass timed whole
# The steps above are timed one at a time. `benchmarks/compressed_mlp_chain.py` timed the MLP's forward pass whole on
# the GPU (`chain.GatedMlpChain`: gate, up, SiLU, down through the dispatch's picks, an overlapped pick's weight decoded
# on a side stream while the projection before it multiplies), with every decode serial instead, and uncompressed,
# beside the same steps timed alone in that sitting; µs, medians over its rounds. The replayed step is this notebook's.

# %%
if chain:
    whole = chain_table(pd.read_csv(repo_path(chain)))
    whole.insert(0, "replayed dispatch step", 1000 * steps["dispatch"].reindex(whole.index))
    ratios = pd.DataFrame({
        "pass / uncompressed pass": whole["pass as dispatched"] / whole["uncompressed pass"],
        "replayed step / replayed cuBLAS step": (steps["dispatch"] / steps[VENDOR]).reindex(whole.index),
        "pass / (steps + activation)": whole["pass as dispatched"] / (whole["steps alone, summed"]
                                                                      + whole["activation alone"])})
    display(style_table(whole.rename_axis("batch").reset_index(), "MLP pass timed whole (µs)", "{:.1f}"),
            style_table(ratios.rename_axis("batch").reset_index(), "Ratios", "{:.3f}"))
else:
    display(Markdown("No timing of the whole pass on this GPU (`chain` is empty)."))

