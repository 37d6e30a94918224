"""How closely replay's simulated clock follows live searches: every recorded live run of the TMA GEMM replayed batch
for batch (the same configs, on the sweep of that kernel and GPU) under each replay clock, and the start-up left over.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter

from tunebench.gemm_kernels import FORKED, LIVE_SHAPES, OVERLAPPED, RUNS, SECONDS_TICKS, repeat_traces
from tunebench.measure.dataset import Dataset, extension_files, load_dataset
from tunebench.measure.replay import CLOCKS
from tunebench.reclock import batch_seconds, configs_by_key
from tunebench.report import shown_path

MODELLED = [f"{clock} s" for clock in CLOCKS]  # a batch's seconds on each replay clock
REPEATED = "/repeats/|two_gpu_host"  # in a trace's path: a run repeated after its sitting (`gemm_kernels.RUNS`)


def live_runs(live: Path) -> list[tuple[str, str, Path]]:
    """(set-up, shape, trace) of every recorded live run of the TMA GEMM: each set-up's sitting over the shapes, then
    its repeated runs (`gemm_kernels.RUNS`)."""
    runs = []
    for setup, (sitting, _) in RUNS.items():
        if sitting is not None:
            runs += [(setup, shape, live / sitting / f"h200_matmul_tma_bfloat16_{shape}.parquet")
                     for shape in LIVE_SHAPES]
    runs += [(setup, "4096x4096x4096", path) for setup, _, path in repeat_traces(live)]
    seen: set[Path] = set()
    unique = []
    for setup, shape, path in runs:
        if path.is_file() and path not in seen:
            seen.add(path)
            unique.append((setup, shape, path))
    return unique


def compile_workers_of(trace_path: Path) -> int:
    """The compile workers the live run had, from the line its .md records ("..., N compile workers)")."""
    text = trace_path.with_suffix(".md").read_text()
    marker = " compile workers"
    if marker not in text:
        raise ValueError(f"{trace_path.with_suffix('.md')} does not say how many compile workers the run had")
    return int(text.split(marker)[0].split()[-1])


def batch_table(setup: str, shape: str, trace_path: Path, dataset: Dataset) -> pd.DataFrame:
    """A row per batch of each strategy in the live trace: its configs, its live seconds (the wall seconds between the
    batch's clock readings less the strategy's own CPU time, which replay charges as measured) and its seconds on each
    replay clock, the configs asked in the same order on the same number of compile workers."""
    sizes = tuple(int(size) for size in shape.split("x"))
    workers = compile_workers_of(trace_path)
    configs = configs_by_key(dataset, sizes)
    rows = []
    for strategy, trace in pd.read_parquet(trace_path).groupby("strategy", sort=False):
        missing = [key for key in trace.config_key if key not in configs]
        if missing:
            raise ValueError(f"{trace_path}: configs {missing[:3]} were not recorded in the sweep of {shape}")
        batches = trace.groupby("batch", sort=True).agg(time_s=("time_s", "first"), strategy_s=("strategy_s", "first"),
                                                        keys=("config_key", list))
        asked = [[configs[key] for key in keys] for keys in batches["keys"]]
        seconds = {clock: batch_seconds(dataset, sizes, asked, clock, workers) for clock in CLOCKS}
        live = np.diff(batches.time_s, prepend=0.0) - np.diff(batches.strategy_s, prepend=0.0)
        for position, batch in enumerate(batches.index):
            rows.append({"set-up": setup, "shape": shape, "strategy": strategy, "trace": shown_path(trace_path),
                         "compile workers": workers, "batch": int(batch), "configs": len(asked[position]),
                         "live s": live[position], **{f"{clock} s": seconds[clock][position] for clock in CLOCKS}})
    return pd.DataFrame(rows)


def fidelity_table(runs: Sequence[tuple[str, str, Path]], dataset: Dataset) -> pd.DataFrame:
    """`batch_table` of every run, one after another."""
    return pd.concat([batch_table(setup, shape, path, dataset) for setup, shape, path in runs], ignore_index=True)


def recorded_on_another_host(dataset: Dataset, dataset_path: Path) -> set[str]:
    """The shapes of the dataset's extension files (`dataset` is the one loaded from `dataset_path`) that were recorded
    on a host with another number of CPU cores than its base file's (their compile and benchmark seconds are that
    host's)."""
    host_cpus = dataset.provenance.get("host_cpus")
    shapes = set()
    for path in extension_files(dataset_path):
        extension = load_dataset(path)
        if extension.provenance.get("host_cpus") != host_cpus:
            shapes |= {"x".join(map(str, shape)) for shape in extension.shapes()}
    return shapes


def later_batches_summary(batches: pd.DataFrame, other_host: set[str]) -> pd.DataFrame:
    """Batches after the first (no start-up in them), grouped by where the sweep's rows were recorded, and those of
    the base file's host by the live runs' set-up: the median and quartiles of live seconds / each clock's seconds
    per batch, and the ratio of the sums."""
    later = batches[batches.batch > 1].assign(
        rows=lambda frame: np.where(frame["shape"].isin(other_host), "the extension's host", "the base file's host"))
    groups = [("every shape", later), *later.groupby("rows", sort=False)]
    base = later[later.rows == "the base file's host"]
    groups += [(f"the base file's host, {setup}", part) for setup, part in base.groupby("set-up", sort=False)]
    rows = []
    for rows_from, part in groups:
        for column in MODELLED:
            ratio = part["live s"] / part[column]
            rows.append({"sweep rows recorded on": rows_from, "clock": column.removesuffix(" s"),
                         "batches": len(part), "runs": part.trace.nunique(),
                         "median live / replay": round(float(ratio.median()), 3),
                         "quartiles": f"{ratio.quantile(0.25):.3f} to {ratio.quantile(0.75):.3f}",
                         "sum live / sum replay": round(float(part["live s"].sum() / part[column].sum()), 3)})
    return pd.DataFrame(rows)


def first_batch_residuals(batches: pd.DataFrame) -> pd.DataFrame:
    """Per run: the first batch's live seconds less its seconds on the pipelined clock, the start-up the clock leaves
    out (the workers' start before it, where the set-up is overlapped)."""
    first = batches[batches.batch == 1].copy()
    first["live - pipelined s"] = first["live s"] - first["pipelined s"]
    return first[["set-up", "shape", "strategy", "trace", "configs", "live s", *MODELLED, "live - pipelined s"]]


def sitting_first_batches(residuals: pd.DataFrame, setup: str = OVERLAPPED) -> pd.DataFrame:
    """The `first_batch_residuals` of the runs in `setup`'s sitting (not its repeated runs)."""
    return residuals[(residuals["set-up"] == setup) & ~residuals.trace.str.contains(REPEATED)]


def calibrated_startup_s(residuals: pd.DataFrame, setup: str = OVERLAPPED) -> float:
    """The median first-batch residual of the runs in `setup`'s sitting: the start-up a replay of such a run adds."""
    sitting = sitting_first_batches(residuals, setup)
    if sitting.empty:
        raise ValueError(f"no first batches of the sitting of set-up {setup!r} to calibrate on")
    return float(sitting["live - pipelined s"].median())


def residuals_summary(residuals: pd.DataFrame, startup_s: float) -> pd.DataFrame:
    """Per set-up, the first batches' residual on the pipelined clock (median and range), and, where the clock starts
    with the workers (the overlapped set-ups), what is left of it once `startup_s` is charged (median absolute error;
    blank for the others); the sitting the start-up was calibrated on apart from the runs repeated after it."""
    rows = []
    labelled = residuals.assign(runs=np.where(residuals.trace.str.contains(REPEATED),
                                              "repeated runs", "the sitting"))
    for (setup, runs), part in labelled.groupby(["set-up", "runs"], sort=False):
        residual = part["live - pipelined s"]
        error = f"{(residual - startup_s).abs().median():.2f}" if setup.startswith(OVERLAPPED) else ""
        rows.append({"set-up": setup, "runs": runs, "first batches": len(part),
                     "median live - pipelined s": round(float(residual.median()), 2),
                     "range s": f"{residual.min():.1f} to {residual.max():.1f}",
                     f"median absolute error with {startup_s:.1f} s start-up": error})
    return pd.DataFrame(rows)


def plot_replay_against_live(batches: pd.DataFrame, other_host: set[str]) -> Figure:
    """Per replay clock, each batch's live seconds against its replayed seconds (log-log, the diagonal where they
    agree): first batches apart, as they hold the start-up where the clock starts with the workers (spawned, or forked
    from a server started before it), and later batches by the host their sweep rows were recorded on."""
    figure, axes = plt.subplots(1, len(CLOCKS), figsize=(10, 4.4), layout="constrained", sharex=True, sharey=True)
    first = batches.batch == 1
    overlapped = batches["set-up"].str.startswith(OVERLAPPED)
    forked = batches["set-up"] == FORKED
    elsewhere = batches["shape"].isin(other_host)
    groups = [("later batches, sweep rows from the base file's host", ~first & ~elsewhere, "o", "tab:blue"),
              ("later batches, sweep rows from another host (an extension)", ~first & elsewhere, "o", "tab:orange"),
              ("first batches, set-up first", first & ~overlapped & ~forked, "^", "tab:green"),
              ("first batches, clock starts with spawned workers", first & overlapped, "s", "tab:red"),
              ("first batches, clock starts with forked workers", first & forked, "D", "tab:purple")]
    for ax, clock in zip(axes, CLOCKS):
        for label, rows, marker, color in groups:
            ax.scatter(batches.loc[rows, f"{clock} s"], batches.loc[rows, "live s"], s=14, marker=marker,
                       color=color, alpha=0.7, label=label)
        ax.plot([0.1, 100], [0.1, 100], color="0.3", linestyle=":", linewidth=0.9)
        ax.set(title=f"{clock} clock", xscale="log", yscale="log", xlim=(0.3, 30), ylim=(0.3, 30),
               xlabel="replayed seconds of the batch")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(FixedLocator(SECONDS_TICKS))
            axis.set_major_formatter(FormatStrFormatter("%g"))
            axis.set_minor_formatter(NullFormatter())
    axes[0].set_ylabel("live seconds of the batch")
    figure.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=2, frameon=False)
    return figure
