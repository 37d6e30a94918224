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
# # Two GEMM kernels against cuBLAS: the TMA GEMM and the pointer GEMM on an H200 and an H100
#
# `matmul_tma` moves A, B and C through TMA descriptors made on the host, with persistent programs, warp
# specialization, loop flattening and a split epilogue in its space; `matmul` is the pointer GEMM. This report shows
# the TMA kernel's recorded sweep, strategies replayed on it, and the live searches of both kernels on the GPU,
# beside the two points the tunebench team measured for Helion 1.0.0 at bf16 4096^3 on an H200, and Helion 1.0.0
# itself run side by side with our LFBO there; and, on an H100, both kernels side by side at the pointer GEMM's slowest
# shapes.
# `benchmarks/tma_kernel.py` writes the same tables, with 20 replay seeds, to `results/matmul_tma/summary.md`. Run
# with other parameters:
# `.venv/bin/python -m tunebench.report notebooks/gemm_kernels.py -p replay_seeds 10`.

# %%
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from tunebench.dataset_summary import provenance_line
from tunebench.gemm_kernels import (
    live_table, plot_live_against_vendor, plot_repeats_against_vendor, plot_replay_against_vendor, plot_side_by_side,
    families_table, plot_family_gaps, plot_sweep_against_vendor, race_table, read_families, repeats_table,
    replay_by_seed, replay_summary, rounds_tables, side_by_side_table, sweep_table,
)
from tunebench.notebook_tables import table_style
from tunebench.replay_fidelity import (
    calibrated_startup_s, fidelity_table, first_batch_residuals, later_batches_summary, live_runs,
    plot_replay_against_live, recorded_on_another_host, residuals_summary,
)
from tunebench.report import repo_path, resolve_dataset, set_style, show_run_header
from tunebench.split_k_rounds import family_table
from tunebench.study import Budget, open_dataset, run_study, tasks_of

set_style()

# %% tags=["parameters"]
dataset = "results/datasets/matmul_tma_bfloat16_h200.parquet"  # the TMA kernel's recorded sweep
live = "results/live_search/matmul_tma"  # the live traces (benchmarks/live_search.py), laid out as in gemm_kernels.RUNS
strategies = ["random", "pattern", "lfbo", "lfbo_quick", "de", "optuna_tpe"]  # replayed on every shape of the sweep
replay_seeds = 5
replay_seconds = 60.0  # simulated seconds per replayed run
replay_workers = 2
replay_clock = "sequential"  # or "pipelined": compiles overlap timing, as the live bench does ("Replay against live")
replay_startup_s = 0.0  # seconds before the first batch a live run pays (H200: 10.86 s spawned, about 2 s forked)
rounds = "results/matmul_tma/rounds_h200.csv"  # benchmarks/tma_rounds.py's re-timing of the sweep's top configs
families = "results/gemm_families"  # benchmarks/gemm_families_rounds.py's timings of both families, side by side
families_gaps = "results/gemm_families/h100_gaps"  # the same at the pointer GEMM's gaps, after the planned TMA sweeps
split_k_rounds = "results/split_k_epilogue/rounds_h100.csv"  # benchmarks/split_k_epilogue.py: one launch against three
gaps = "results/gemm_families/pointer_gaps_h100.csv"  # benchmarks/family_gaps.py: each shape's best against cuBLAS
race = "results/family_race"  # benchmarks/family_race.py's runs: both families searched, replayed
helion = ["results/helion_side_by_side/4096x4096x4096", "results/helion_side_by_side/256x11008x4096",
          "results/helion_side_by_side/32x28672x8192"]  # benchmarks/helion_side_by_side.py's runs, a folder per shape

# %%
path = resolve_dataset(dataset)
recorded = open_dataset(path)
live_dir = repo_path(live)
show_run_header({"dataset": dataset, "live": live, "strategies": strategies, "replay_seeds": replay_seeds,
                 "replay_seconds": replay_seconds, "replay_workers": replay_workers, "replay_clock": replay_clock,
                 "replay_startup_s": replay_startup_s, "rounds": rounds, "families": families,
                 "families_gaps": families_gaps, "split_k_rounds": split_k_rounds, "gaps": gaps,
                 "race": race, "helion": helion},
                {"dataset": provenance_line(recorded)})

# %% [markdown]
# ## The recorded sweep
# Every config of the space per shape, cuBLAS measured the same way when the collector began the shape (a shape whose
# configs span two sittings is compared with the first's); then how many configs reach each speed against cuBLAS.

# %%
sweep, failures, same_failures = sweep_table(path)
display(table_style(sweep, wrap=["best config"]))
display(table_style(failures if not same_failures else failures[failures["shape"] == failures["shape"].iloc[0]]))
plot_sweep_against_vendor(recorded);

# %% [markdown]
# One sitting's figures move by about 1 %. `benchmarks/tma_rounds.py` timed each shape's fastest configs of the sweep
# again in shuffled rounds with cuBLAS in every round: per shape, the config with the fastest median over rounds, and
# the median over rounds of cuBLAS's time / its time in the same round.

# %%
display(table_style(rounds_tables(pd.read_csv(repo_path(rounds)))[0]))

# %% [markdown]
# ## Shapes off multiples of 16, on an H100: which family to search
# The pointer GEMM's slowest shapes against cuBLAS have N and K that are multiples of 8 but not of 16, which the TMA
# GEMM takes too. `benchmarks/gemm_families_rounds.py` timed both families' 8 fastest recorded configs per shape on
# one H100 in shuffled rounds, cuBLAS in every round ("Shapes off multiples of 16" in docs/tma_gemm.md).

# %%
display(table_style(families_table(read_families(repo_path(families)))))

# %% [markdown]
# Where the pointer GEMM falls short of cuBLAS, over the H100 prediction dataset's shapes (600 candidates each, cuBLAS
# timed in the same sitting; `benchmarks/family_gaps.py`, which also fixes the next TMA sweeps): where N or K is off
# multiples of 8 the TMA GEMM cannot run and the pointer GEMM mostly beats cuBLAS; elsewhere it falls further behind as
# M grows.

# %%
plot_family_gaps(pd.read_csv(repo_path(gaps)));

# %% [markdown]
# The TMA sweeps that `family_gaps.py` planned, one shape per class and family of M, swept two-pass and timed side by
# side with the pointer GEMM's 8 fastest candidates as above: the TMA GEMM is faster from M = 341 up; at M = 2 to 36,
# where the pointer GEMM's fastest configs split K, the pointer GEMM is ("The pointer GEMM's gaps" in docs/tma_gemm.md).

# %%
display(table_style(families_table(read_families(repo_path(families_gaps)))))

# %% [markdown]
# Split-K ran as three launches then: the workspace zeroed, the GEMM, a cast into C. Since stop 91 the tile's last split
# stores C in the GEMM's own launch (`tunebench.kernels.split_k`). Both ways side by side on one H100 in shuffled rounds
# with cuBLAS (`benchmarks/split_k_epilogue.py`, each family's 3 fastest recorded split configs and its fastest unsplit
# one): each family's fastest against cuBLAS, by the median over rounds ("Split-K in one launch" in docs/tma_gemm.md).
# The last four shapes are decode-sized layers swept with the pointer GEMM alone.

# %%
display(table_style(family_table(pd.read_csv(repo_path(split_k_rounds)))))

# %% [markdown]
# When which family is faster is not known, a search can take both: in turn, or as a race that probes each family's
# first batch and goes on with the leader (while the other is within a margin). `benchmarks/family_race.py` replayed
# them at the fourteen shapes swept with both families (by the sweeps, the pointer GEMM is faster at two): per arm and
# strategy, the paired median of the extra seconds to 0.99 of the faster family's best over searching that family
# alone, and (in brackets) the runs that end on the faster family's config ("Searching both families" in
# docs/tma_gemm.md).

# %%
display(table_style(race_table(repo_path(race))))

# %% [markdown]
# ## Replayed searches
# Each strategy replayed on the sweep on a simulated clock: compiles on the sweep's compile workers (a binary once),
# the recorded benchmark times and the strategy's own CPU time, on the clock `replay_clock` names, after
# `replay_startup_s` of start-up. With `-p replay_clock pipelined -p replay_startup_s 10.86` the replays are on the
# clock that matches the live runs below ("Replay against live"). Medians over seeds; a seed that never reached a
# target counts as never (∞).

# %%
with tempfile.TemporaryDirectory() as scratch:
    trace = run_study(strategies, tasks_of(path), range(replay_seeds), Budget(seconds=replay_seconds),
                      Path(scratch) / "replay.parquet", workers=replay_workers, clock=replay_clock,
                      startup_s=replay_startup_s, progress=False)
display(table_style(replay_summary(replay_by_seed(trace, path))))
plot_replay_against_vendor(trace, recorded);

# %% [markdown]
# ## Live on the GPU, both kernels
# Both kernels in one sitting on one H200, from a cold Triton cache, on the wall clock from starting the workers
# (their start-up overlaps the first compiles; cuBLAS is measured after each search): LFBO on each kernel, and on the
# TMA kernel also LFBO at Helion's quick effort (`lfbo_quick`: 30 initial configs, 2 search copies, 5 generations). At
# 4096^3 the markers are Helion 1.0.0's points, measured by the team on the same problem and GPU model: its quick
# effort (0.71x cuBLAS at 20 s) and its LFBO search (matching cuBLAS after about 180 s). The runs' traces lie under
# `live`; `results/matmul_tma/summary.md` names each run's file. A blank: the run never got there.

# %%
display(table_style(live_table(live_dir).drop(columns="trace")))
plot_live_against_vendor(live_dir);

# %% [markdown]
# ## Every live run of the TMA kernel at 4096^3
# With the set-up first (stop 49): LFBO on five seeds, and pattern and random search, each after its worker start-up
# and cuBLAS measurement. With the set-up overlapped (stop 50): the sitting above and quick LFBO on four more seeds,
# and LFBO on five seeds on a two-H200 host. With the workers forked from a server started before the clock (stop
# 52): quick LFBO on four seeds, each run in turn with the spawned workers of before, and LFBO on three. A row per
# set-up and strategy gives the medians over its seeds (∞: half of them or more never got there; a blank in a run's
# row: that run never did); the figure counts the set-up in every run's seconds.

# %%
display(table_style(repeats_table(live_dir).drop(columns="trace")))
plot_repeats_against_vendor(live_dir);

# %% [markdown]
# ## Helion 1.0.0 side by side
# Helion 1.0.0 itself on H200s (stops 65 to 68, `benchmarks/helion_side_by_side.py`), a shape per folder: its quick
# and full efforts with LFBOPatternSearch (and at 4096^3 LFBOTreeSearch, 1.0.0's default) on Helion's own GEMM, each
# from empty caches, beside quick LFBO and LFBO on the TMA GEMM (`tunebench_*`) or, at the decode-sized 32 x 28672 x
# 8192, on the pointer GEMM (`tunebench_matmul_*`). Each system is judged by its own timer in the figures; the last
# column times every finished run's final config again beside cuBLAS in shuffled rounds by one timer (Helion's, the
# folder's latest sitting; it counts the host's launch, which docs/tma_gemm.md's 256 x 11008 x 4096 section shows).
# Runs stopped by a time limit count as not reaching what they had not reached, and have no final config to time.

# %%
for folder in map(repo_path, helion):
    display(Markdown(f"### {folder.name}"))
    display(table_style(side_by_side_table(folder)))
    figure = plot_side_by_side(folder)
    display(figure)  # here, beside its table, rather than with the others when the cell ends
    plt.close(figure)

# %% [markdown]
# ## Replay against live
# Every live run of the TMA kernel above, replayed batch for batch: the configs each batch asked, in its order, on the
# sweep with the run's compile workers, under both replay clocks. `sequential` compiles a batch, then times it (the
# clock of the replays above, as in Kernel Tuner's simulation); `pipelined` times each binary's configs as its compile
# ends while the other workers compile on, as the live bench does. A batch's live seconds leave out the strategy's own
# CPU time, which replay charges as measured. The first batch of a run whose clock starts with its workers holds their
# start-up; the start-up below is the median of the overlapped sitting's first batches less their pipelined seconds.
# `benchmarks/replay_fidelity.py` writes the same tables, and replays LFBO at both efforts with that start-up.

# %%
batches = fidelity_table(live_runs(live_dir), recorded)
elsewhere = recorded_on_another_host(recorded, path)
residuals = first_batch_residuals(batches)
startup_s = calibrated_startup_s(residuals)
display(table_style(later_batches_summary(batches, elsewhere),
                    {"median live / replay": "{:.3f}", "sum live / sum replay": "{:.3f}"}))
display(table_style(residuals_summary(residuals, startup_s), {"median live - pipelined s": "{:.2f}"}))
plot_replay_against_live(batches, elsewhere);
