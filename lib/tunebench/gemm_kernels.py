"""The TMA GEMM (`matmul_tma`) beside the pointer GEMM (`matmul`) and cuBLAS: tables of its recorded sweep, of its
best configs re-timed in rounds, of the strategies replayed on it, of the live searches of both kernels, of where
the pointer GEMM falls short of cuBLAS and of searching both families, and their plots (`benchmarks/tma_kernel.py`,
`benchmarks/tma_rounds.py`, `benchmarks/family_gaps.py`, `benchmarks/family_race.py`, the `gemm_kernels` notebook).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FormatStrFormatter, NullFormatter

from tunebench.live_traces import FRACTIONS_OF_VENDOR, summary_rows
from tunebench.measure.dataset import SITTING, Dataset, has_sittings
from tunebench.metrics import evaluations_to_reach, fraction_curve_over_time, seconds_to_reach
from tunebench.peer_runs import arm_of, arms_table, helion_runs, our_runs, reach_row, rounds_files
from tunebench.plots import strategy_colors
from tunebench.report import REPO_ROOT, shown_path
from tunebench.study import open_dataset

DATASET = REPO_ROOT / "results" / "datasets" / "matmul_tma_bfloat16_h200.parquet"
LIVE = REPO_ROOT / "results" / "live_search" / "matmul_tma"  # the live runs, laid out as `RUNS` says
# benchmarks/helion_side_by_side.py's runs: Helion 1.0.0 and our LFBO at bf16 4096^3 on an H200 (stop 65)
SIDE_BY_SIDE = REPO_ROOT / "results" / "helion_side_by_side" / "4096x4096x4096"
LIVE_SHAPES = ("2048x2048x2048", "4096x4096x4096", "8192x8192x8192", "4096x14336x4096", "4096x4096x14336",
               "8192x4096x4096")
STRATEGIES = ("random", "pattern", "lfbo", "lfbo_quick", "de", "optuna_tpe")
FRACTIONS = (0.71, 0.9, 0.95, 0.99)  # of cuBLAS's speed: Helion's quick effort reached 0.71x
FRACTION_OF_BEST = 0.99  # of the sweep's best config
KERNELS = {"matmul": "pointer GEMM", "matmul_tma": "TMA GEMM"}
# Helion 1.0.0 on an H200 at bf16 4096^3, measured by the tunebench team (the project brief): its quick effort reached
# 0.71x cuBLAS in 20 s; its LFBO pattern search matched cuBLAS after about 180 s.
HELION_4096 = {"Helion quick effort": (20.0, 0.71), "Helion LFBO": (180.0, 1.0)}
BEFORE = "set-up first"  # stop 49, one H200: worker start-up and the cuBLAS measurement, then the search
OVERLAPPED = "set-up overlapped"  # stop 50, one H200: the workers start as the search does, cuBLAS after it
OVERLAPPED_TWO_GPU = "set-up overlapped, 2-GPU host"  # the same, on GPU 0 and 16 of the 32 cores of a 2 x H200 host
# stop 52, one H200: the workers forked from a server started before the clock, the compile workers without CUDA
FORKED = "workers forked"
BESIDE_FORKED = f"{OVERLAPPED}, beside the forked runs"  # 69beb4c (spawned workers), run in turn with FORKED
# Where each set-up's live runs lie under the live folder: the folder of its sitting's traces of every shape (None: it
# has none), and the folder of its repeated runs at one shape ([<strategy>_]seed<N>/ for a strategy's seeds, <names>/
# for other strategies).
RUNS = {BEFORE: ("", "repeats"), OVERLAPPED: ("overlapped", "overlapped/repeats"),
        OVERLAPPED_TWO_GPU: (None, "overlapped/two_gpu_host"), FORKED: (None, "forked/this_code"),
        BESIDE_FORKED: (None, "forked/commit_69beb4c")}


SITTINGS = "sittings: cuBLAS / best / configs"


def sitting_names(sittings: pd.Series) -> str:
    """The sittings, numbered from 1 in the provenance's order, '?' where the dataset does not know one."""
    known = sorted({int(sitting) + 1 for sitting in sittings.dropna()})
    return ", ".join([*map(str, known), *(["?"] if sittings.isna().any() else [])])


def sweep_table(dataset_path: Path) -> tuple[pd.DataFrame, pd.DataFrame, bool]:
    """Per recorded shape: outcomes, the best config against cuBLAS, and how many configs come near it (and, where the
    dataset records them, the sittings of cuBLAS, of the best config and of all configs); the failures by the
    parameters that decide them; and whether every shape failed exactly the same configs the same way."""
    dataset = open_dataset(dataset_path)
    rows, failures, failed_configs = [], [], []
    for shape in dataset.shapes():
        task = dataset.task(shape)
        ok = task[task.status == "ok"]
        vendor_ms = dataset.vendor_ms(shape)
        best = ok.loc[ok.latency_ms.idxmin()]
        counts = task.status.value_counts()
        rows.append({"shape": "x".join(map(str, shape)), "configs": len(task), "ok": counts.get("ok", 0),
                     "compile_error": counts.get("compile_error", 0), "wrong_result": counts.get("wrong_result", 0),
                     "out_of_resources": counts.get("out_of_resources", 0), "cuBLAS_ms": round(vendor_ms, 4),
                     "best_ms": round(best.latency_ms, 4), "best vs cuBLAS": round(vendor_ms / best.latency_ms, 3),
                     "configs >= 0.95x cuBLAS": int((vendor_ms / ok.latency_ms >= 0.95).sum()),
                     "best config": ", ".join(f"{name}={best[name]}" for name in dataset.parameter_names)})
        if has_sittings(dataset):
            vendor = dataset.vendor.set_index(list(dataset.shape_names)).loc[[shape]]
            rows[-1][SITTINGS] = " / ".join(sitting_names(sittings) for sittings in (
                vendor.get(SITTING, pd.Series([pd.NA])), pd.Series([best.get(SITTING, pd.NA)]), task[SITTING]))
        failed = task[task.status != "ok"]
        failed_configs.append(set(map(tuple, failed[[*dataset.parameter_names, "status"]].to_numpy().tolist())))
        failures.append(failed.groupby(["status", "WARP_SPECIALIZE", "FLATTEN", "num_warps"]).size()
                        .rename("configs").reset_index().assign(shape="x".join(map(str, shape))))
    same = all(configs == failed_configs[0] for configs in failed_configs)
    return pd.DataFrame(rows), pd.concat(failures, ignore_index=True), same


def replay_by_seed(trace: pd.DataFrame, dataset_path: Path) -> pd.DataFrame:
    """Per run: simulated seconds (and evaluations) to each fraction of cuBLAS and to FRACTION_OF_BEST of the sweep's
    best; NaN where the run never got there."""
    dataset = open_dataset(dataset_path)
    rows = []
    for (strategy, task, seed), run in trace.groupby(["strategy", "task", "seed"], sort=False):
        shape = tuple(int(size) for size in task.split(":")[-1].split("x"))
        vendor_ms = dataset.vendor_ms(shape)
        optimum_ms = dataset.task(shape).latency_ms.min()
        best, time_s = run.best_ms.to_numpy(), run.time_s.to_numpy()
        row = {"strategy": strategy, "shape": task.split(":")[-1], "seed": seed, "evaluations": len(run),
               "best vs cuBLAS": vendor_ms / best.min()}
        for fraction in FRACTIONS:
            row[f"s to {fraction}x"] = seconds_to_reach(best, time_s, vendor_ms, fraction)
        row[f"s to {FRACTION_OF_BEST} of best"] = seconds_to_reach(best, time_s, optimum_ms, FRACTION_OF_BEST)
        row[f"evals to {FRACTION_OF_BEST} of best"] = evaluations_to_reach(best, optimum_ms, FRACTION_OF_BEST)
        rows.append(row)
    return pd.DataFrame(rows)


def replay_summary(by_seed: pd.DataFrame) -> pd.DataFrame:
    """Per strategy and shape: medians over seeds (a seed that never got there counts as never: inf), and the share
    of seeds that got there."""
    rows = []
    targets = [f"s to {fraction}x" for fraction in FRACTIONS] + [f"s to {FRACTION_OF_BEST} of best",
                                                                f"evals to {FRACTION_OF_BEST} of best"]
    for (shape, strategy), part in by_seed.groupby(["shape", "strategy"], sort=False):
        row = {"shape": shape, "strategy": strategy, "seeds": len(part),
               "median best vs cuBLAS": round(part["best vs cuBLAS"].median(), 3)}
        for column in targets:
            row[f"median {column}"] = round(float(part[column].fillna(np.inf).median()), 1)
        row[f"seeds to {FRACTION_OF_BEST} of best"] = f"{part[targets[-1]].notna().mean():.0%}"
        rows.append(row)
    return pd.DataFrame(rows)


def sitting_traces(live: Path, shape: str) -> list[tuple[str, Path]]:
    """(kernel, trace) of both kernels' runs at `shape` in the sitting with the set-up overlapped (`RUNS`), those
    recorded."""
    stems = {"matmul": f"h200_bfloat16_{shape}", "matmul_tma": f"h200_matmul_tma_bfloat16_{shape}"}
    paths = [(kernel, live / RUNS[OVERLAPPED][0] / f"{stem}.parquet") for kernel, stem in stems.items()]
    return [(kernel, path) for kernel, path in paths if path.is_file()]


def live_table(live: Path) -> pd.DataFrame:
    """The live runs of both kernels in the sitting with the set-up overlapped (`RUNS`), shape by shape and strategy by
    strategy, from their recorded traces."""
    rows = []
    for shape in LIVE_SHAPES:
        for kernel, path in sitting_traces(live, shape):
            for _, summary in summary_rows(pd.read_parquet(path)).iterrows():
                row = {"shape": shape, "kernel": kernel, "strategy": summary["strategy"], "trace": shown_path(path),
                       "evaluations": summary["evaluations"], "search_s": summary["search_s"],
                       "best vs cuBLAS": summary["best vs cuBLAS"]}
                row.update({f"s to {fraction}x": summary[f"s to {fraction}x"] for fraction in FRACTIONS_OF_VENDOR[1:]})
                rows.append(row)
    return pd.DataFrame(rows)


REPEATED = [f"s to {fraction}x" for fraction in (0.95, 0.99, 1.0)]


def repeat_traces(live: Path, shape: str = "4096x4096x4096") -> list[tuple[str, int | None, Path]]:
    """(set-up, seed, trace) of every live run of the TMA kernel at `shape`, set-up by set-up (`RUNS`): its sitting's
    trace (seed 0), its seeds' runs, then other strategies' runs (seed None)."""
    stem = f"h200_matmul_tma_bfloat16_{shape}.parquet"
    traces = []
    for setup, (sitting, repeats) in RUNS.items():
        if sitting is not None:
            traces.append((setup, 0, live / sitting / stem))
        runs = sorted(live.glob(f"{repeats}/*/{stem}"))
        seeded = [path for path in runs if _seed_of(path.parent.name) is not None]
        traces += sorted((setup, _seed_of(path.parent.name), path) for path in seeded)
        traces += [(setup, None, path) for path in runs if path not in seeded]
    return traces


def _seed_of(folder: str) -> int | None:
    """N of a run folder named seed<N> or <strategy>_seed<N>; None for any other name."""
    tail = folder.rsplit("_", 1)[-1]
    return int(tail.removeprefix("seed")) if tail.startswith("seed") and tail[4:].isdigit() else None


def repeats_table(live: Path, shape: str = "4096x4096x4096") -> pd.DataFrame:
    """Every live run of the TMA kernel at `shape` (`repeat_traces`), a row per strategy of each trace; then, for each
    set-up and strategy with runs of several seeds, a row of the medians over them, a seed that never got there
    counting as never (inf)."""
    rows = []
    for setup, seed, path in repeat_traces(live, shape):
        for _, summary in summary_rows(pd.read_parquet(path)).iterrows():
            rows.append({"strategy": summary["strategy"], "set-up": setup, "seed": "" if seed is None else seed,
                         "trace": shown_path(path), "evaluations": summary["evaluations"],
                         "search_s": summary["search_s"], "setup_s": summary["setup_s"],
                         "best vs cuBLAS": summary["best vs cuBLAS"],
                         **{column: summary[column] for column in REPEATED},
                         **{f"set-up + {column}": round(summary["setup_s"] + summary[column], 1)
                            for column in REPEATED}})
    table = pd.DataFrame(rows)
    medians = []
    for (setup, strategy), runs in table.groupby(["set-up", "strategy"], sort=False):
        if len(runs) < 2:
            continue
        medians.append({"strategy": f"{strategy}, median of {len(runs)} seeds", "set-up": setup, "seed": "",
                        "trace": "", "evaluations": runs.evaluations.median(), "search_s": runs.search_s.median(),
                        "setup_s": runs.setup_s.median(), "best vs cuBLAS": runs["best vs cuBLAS"].median(),
                        **{column: float(runs[column].fillna(np.inf).median())
                           for column in [*REPEATED, *(f"set-up + {column}" for column in REPEATED)]}})
    return pd.concat([table, pd.DataFrame(medians)], ignore_index=True)


ROUND_SHAPE = ["M", "N", "K"]  # the shape columns of benchmarks/tma_rounds.py's plan and timings


def rounds_tables(timings: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per shape: cuBLAS's median over rounds, the config with the fastest median over rounds and its speed against
    cuBLAS (median over rounds of cuBLAS ms / its ms in the same round, with the range), beside the sweep's figure;
    and per config its median over rounds against cuBLAS's."""
    ok = timings[timings.status == "ok"].astype({name: int for name in ROUND_SHAPE})
    vendor = ok[ok.kind == "vendor"].set_index([*ROUND_SHAPE, "round"]).latency_ms.sort_index()
    configs = ok[ok.kind == "config"]
    medians = (configs.groupby([*ROUND_SHAPE, "recorded_rank", "recorded_ms", "recorded_vendor_ms"]).latency_ms
               .agg(["median", "count"]).reset_index())
    medians["vs cuBLAS (medians)"] = [vendor.loc[tuple(shape)].median() / median for shape, median in
                                      zip(medians[ROUND_SHAPE].itertuples(index=False), medians["median"])]
    rows = []
    for shape, group in medians.groupby(ROUND_SHAPE, sort=False):
        best = group.loc[group["median"].idxmin()]
        at_shape = (configs[ROUND_SHAPE] == pd.Series(dict(zip(ROUND_SHAPE, shape)))).all(axis=1)
        rounds = configs[at_shape & (configs.recorded_rank == best.recorded_rank)]
        per_round = vendor.loc[shape].reindex(rounds["round"]).to_numpy() / rounds.latency_ms.to_numpy()
        rows.append({"shape": "x".join(map(str, shape)), "rounds": len(vendor.loc[shape]),
                     "cuBLAS median ms": round(vendor.loc[shape].median(), 4),
                     "fastest config (recorded rank)": int(best.recorded_rank),
                     "its median ms": round(best["median"], 4),
                     "vs cuBLAS, median of rounds": round(float(pd.Series(per_round).median()), 3),
                     "lowest round": round(float(per_round.min()), 3),
                     "highest round": round(float(per_round.max()), 3),
                     "the sweep's best vs cuBLAS": round(group.recorded_vendor_ms.iloc[0] / group.recorded_ms.min(),
                                                         3)})
    return pd.DataFrame(rows), medians.round(4)


FAMILIES = ("matmul", "matmul_tma")  # benchmarks/gemm_families_rounds.py's timings: <family>.csv in one folder


def read_families(folder: Path) -> dict[str, pd.DataFrame]:
    """benchmarks/gemm_families_rounds.py's timings in `folder`, per family."""
    return {family: pd.read_csv(folder / f"{family}.csv") for family in FAMILIES}


def families_table(timings: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per shape and family: the fastest config's median over rounds and its speed against cuBLAS (rounds_tables),
    and the family's speed against the pointer GEMM's fastest (ratio of medians over rounds)."""
    rows = pd.concat([rounds_tables(frame)[0].assign(family=family) for family, frame in timings.items()],
                     ignore_index=True)
    pointer = rows[rows.family == FAMILIES[0]].set_index("shape")["its median ms"]
    rows["vs the pointer GEMM's fastest"] = (pointer.reindex(rows["shape"]).to_numpy() / rows["its median ms"]).round(3)
    return rows[["shape", "family", *[c for c in rows.columns if c not in ("shape", "family")]]]


def race_table(folder: Path) -> pd.DataFrame:
    """benchmarks/family_race.py's runs (`per_run_<strategy>.csv` in `folder`): a row per arm, a column per strategy,
    each cell the median of the paired extra seconds to 0.99 of the faster family's best over searching that family
    alone, and in brackets the share of runs that end on the faster family's config."""
    columns = {}
    for path in sorted(folder.glob("per_run_*.csv")):
        runs = pd.read_csv(path)
        runs = runs.assign(on_faster=runs["ends on"] == runs["faster family"])
        cells = {}
        for arm, group in runs.groupby("arm", sort=False):
            extra = group["extra s"].median()
            cells[arm] = (f"{'never' if pd.isna(extra) else f'{extra:+.1f} s'} "
                          f"({group['on_faster'].mean():.0%})")
        columns[path.stem.removeprefix("per_run_")] = cells
    table = pd.DataFrame(columns)
    return table.rename_axis("arm").reset_index()


# -- plots ---------------------------------------------------------------------------------------------------------

VENDOR_LABEL = "speed against cuBLAS (cuBLAS ms / best so far)"
SECONDS_TICKS = (0.3, 1, 3, 10, 30, 100, 300)
WALL_SECONDS = (1, 300)  # the live plots' range: the first results come after seconds of compiling, Helion's at 180


def _vendor_axes(ax, title: str, xlabel: str, xlim: tuple[float, float]) -> None:
    """Log seconds with plain tick labels, speed against cuBLAS from 0.5, dotted at cuBLAS."""
    ax.axhline(1.0, color="0.3", linestyle=":", linewidth=0.9)
    ax.set(title=title, xlabel=xlabel, xscale="log", xlim=xlim, ylim=(0.5, 1.05))
    ax.set_xticks([tick for tick in SECONDS_TICKS if xlim[0] <= tick <= xlim[1]])
    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _helion_marks(ax) -> list[Line2D]:
    """Helion 1.0.0's two measured points at bf16 4096^3 on an H200 (HELION_4096), as markers."""
    handles = []
    for (label, (seconds, speed)), marker in zip(HELION_4096.items(), ("s", "D")):
        handles += ax.plot([seconds], [speed], marker=marker, color="0.15", linestyle="none", markersize=7,
                           label=label)
    return handles


def plot_sweep_against_vendor(dataset: Dataset) -> Figure:
    """Per recorded shape: how many configs reach at least each speed against cuBLAS (cuBLAS ms / config ms), so the
    top of the space (how many configs come near cuBLAS) is visible; dotted at cuBLAS."""
    figure, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
    for shape in dataset.shapes():
        task = dataset.task(shape)
        speed = np.sort(dataset.vendor_ms(shape) / task.loc[task.status == "ok", "latency_ms"].to_numpy())[::-1]
        ax.step(speed, np.arange(1, len(speed) + 1), where="post", label="x".join(map(str, shape)))
    ax.axvline(1.0, color="0.3", linestyle=":", linewidth=0.9)
    ax.set(xlabel="speed against cuBLAS (cuBLAS ms / config ms)", ylabel="configs at least this fast",
           yscale="log", xlim=(0.3, 1.05), title=f"{dataset.kernel}: every config of the space, per shape")
    ax.legend(frameon=False)
    return figure


def plot_replay_against_vendor(trace: pd.DataFrame, dataset: Dataset, points: int = 200) -> Figure:
    """Replayed searches (a `study` trace table of the dataset's tasks): per shape, each strategy's median over seeds
    of its best so far against cuBLAS, on simulated seconds; dotted at cuBLAS."""
    colors = strategy_colors(list(dict.fromkeys(trace.strategy)))
    tasks = list(dict.fromkeys(trace.task))
    columns = min(3, len(tasks))
    rows = -(-len(tasks) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.6 * columns, 3.8 * rows), sharey=True, squeeze=False,
                                layout="constrained")
    for ax in axes.flat[len(tasks):]:
        ax.set_visible(False)
    grid = np.geomspace(max(float(trace.time_s.min()), 0.1), float(trace.time_s.max()), points)
    for ax, task in zip(axes.flat, tasks):
        shape = tuple(int(size) for size in task.split(":")[-1].split("x"))
        vendor_ms = dataset.vendor_ms(shape)
        for strategy, runs in trace[trace.task == task].groupby("strategy", sort=False):
            curves = [fraction_curve_over_time(run.best_ms.to_numpy(), run.time_s.to_numpy(), vendor_ms, grid)
                      for _, run in runs.groupby("seed")]
            ax.plot(grid, np.median(curves, axis=0), color=colors[strategy], linewidth=1.6, label=strategy)
        _vendor_axes(ax, task.split(":")[-1], "simulated seconds", (grid[0], grid[-1]))
    for row in axes:
        row[0].set_ylabel(VENDOR_LABEL)
    seeds = trace.groupby(["strategy", "task"]).seed.nunique().min()
    figure.suptitle(f"Replayed on the recorded sweep: median over {seeds} seeds")
    figure.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center", ncols=len(colors),
                  frameon=False)
    return figure


def plot_live_against_vendor(live: Path = LIVE) -> Figure:
    """The live searches of both kernels (`live_table`'s traces): per shape, best so far against cuBLAS on the wall
    clock from starting the workers, a line per kernel and strategy; at 4096^3 Helion 1.0.0's two measured points
    (HELION_4096)."""
    columns = 3
    rows = -(-len(LIVE_SHAPES) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.4 * columns, 3.6 * rows), sharey=True, squeeze=False,
                                layout="constrained")
    colors = {("matmul", "lfbo"): "C0", ("matmul_tma", "lfbo"): "C1", ("matmul_tma", "lfbo_quick"): "C3"}
    handles: dict[str, Line2D] = {}
    for ax, shape in zip(axes.flat, LIVE_SHAPES):
        for kernel, path in sitting_traces(live, shape):
            for strategy, trace in pd.read_parquet(path).groupby("strategy", sort=False):
                (line,) = ax.step(trace.time_s + trace.setup_s, trace.vendor_ms.iloc[0] / trace.best_ms, where="post",
                                  color=colors.get((kernel, strategy)), linewidth=1.6,
                                  label=f"{KERNELS[kernel]}, {strategy}")
                handles[line.get_label()] = line
        if shape == "4096x4096x4096":
            handles.update({handle.get_label(): handle for handle in _helion_marks(ax)})
        _vendor_axes(ax, shape, "wall seconds from starting the workers", WALL_SECONDS)
    for ax in axes.flat[len(LIVE_SHAPES):]:
        ax.set_visible(False)
    figure.supylabel(VENDOR_LABEL)
    figure.legend(handles=list(handles.values()), loc="outside lower center", ncols=len(handles), frameon=False)
    return figure


def plot_repeats_against_vendor(live: Path = LIVE, shape: str = "4096x4096x4096") -> Figure:
    """Every live run of the TMA kernel at `shape` (`repeat_traces`): best so far against cuBLAS on the wall clock
    from starting the workers (set-up included), one line per run (a colour per strategy, a line style per set-up),
    beside Helion 1.0.0's two measured points."""
    traces = pd.concat([pd.read_parquet(path).assign(run=str(path), setup=setup)
                        for setup, _, path in repeat_traces(live, shape)], ignore_index=True)
    colors = strategy_colors(list(dict.fromkeys(traces.strategy)))
    styles = {BEFORE: "-", OVERLAPPED: "--", OVERLAPPED_TWO_GPU: ":", FORKED: "-.", BESIDE_FORKED: (0, (1, 3))}
    figure, ax = plt.subplots(figsize=(9.5, 4.2), layout="constrained")
    for (run, strategy), trace in traces.groupby(["run", "strategy"], sort=False):
        ax.step(trace.time_s + trace.setup_s, trace.vendor_ms.iloc[0] / trace.best_ms, where="post",
                color=colors[strategy], linestyle=styles[trace.setup.iloc[0]], linewidth=1.3, alpha=0.85)
    handles = [Line2D([], [], color=color, linewidth=2, label=strategy) for strategy, color in colors.items()]
    handles += [Line2D([], [], color="0.4", linestyle=style, label=setup) for setup, style in styles.items()]
    handles += _helion_marks(ax) if shape == "4096x4096x4096" else []
    _vendor_axes(ax, f"matmul_tma {shape}: every live run", "wall seconds from starting the workers", WALL_SECONDS)
    ax.set_ylabel(VENDOR_LABEL)
    ax.legend(handles=handles, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return figure


def side_by_side_runs(folder: Path = SIDE_BY_SIDE) -> list[dict]:
    """The Helion runs in `folder` and our live runs under its `ours/` (`peer_runs`), Helion's first."""
    return helion_runs(folder) + our_runs(sorted(folder.glob("ours/*/*.parquet")))


def side_by_side_table(folder: Path = SIDE_BY_SIDE) -> pd.DataFrame:
    """Per arm (system, effort and search) over its seeds: `peer_runs.arms_table`, with the final configs' speed
    from the folder's last rounds."""
    files = rounds_files(folder)
    reach = pd.DataFrame([reach_row(run) for run in side_by_side_runs(folder)])
    return arms_table(reach, pd.read_csv(files[-1]) if files else None)


def plot_side_by_side(folder: Path = SIDE_BY_SIDE) -> Figure:
    """Every run in `folder`: best so far against cuBLAS, each system by its own timer, on the wall seconds of its
    clock (Helion's from the kernel's bind, ours from starting the workers); a colour per arm, a line per seed."""
    runs = side_by_side_runs(folder)
    arms = list(dict.fromkeys(arm_of(run["run"]) for run in runs))
    colors = strategy_colors(arms)
    figure, ax = plt.subplots(figsize=(9.5, 4.4), layout="constrained")
    for run in runs:
        trace = run["trace"].sort_values("time_s", kind="stable")
        ax.step(trace.time_s, run["cublas_ms"] / np.minimum.accumulate(trace.ms.to_numpy()), where="post",
                color=colors[arm_of(run["run"])], linewidth=1.3, alpha=0.9)
    _vendor_axes(ax, f"Helion 1.0.0 and tunebench, {folder.name}, every run", "wall seconds", (1, 600))
    ax.set(ylim=(0.3, 1.1), ylabel=VENDOR_LABEL)
    ax.legend(handles=[Line2D([], [], color=color, linewidth=2, label=arm) for arm, color in colors.items()],
              frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return figure


def plot_family_gaps(gaps: pd.DataFrame) -> Figure:
    """Per family of M, a box per (N, K) class of every shape's speed against cuBLAS (cuBLAS ms / the fastest recorded
    candidate's ms, log scale), each shape a dot; dotted at cuBLAS. Families by their least M, classes in the table's
    order."""
    order = list(gaps.groupby("family")["M"].min().sort_values().index)
    classes = list(dict.fromkeys(gaps["class"]))
    counts = gaps.groupby("class")["ratio"].size()
    labels = {name: f"{name} ({counts[name]:,})" for name in classes}
    frame = gaps.assign(**{"N, K": gaps["class"].map(labels)})
    figure, ax = plt.subplots(figsize=(10.0, 5.0), layout="constrained")
    sns.boxplot(frame, x="family", y="ratio", hue="N, K", order=order, hue_order=list(labels.values()),
                log_scale=True, showfliers=False, ax=ax)
    sns.stripplot(frame, x="family", y="ratio", hue="N, K", order=order, hue_order=list(labels.values()),
                  dodge=True, size=2, alpha=0.35, palette=dict.fromkeys(labels.values(), "0.2"), legend=False, ax=ax)
    ax.axhline(1.0, color="0.3", linestyle=":", linewidth=0.9)
    ax.yaxis.set_major_formatter(FormatStrFormatter("%gx"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_yticks([0.5, 0.7, 1.0, 1.5, 2.0, 3.0])
    ax.set(xlabel="family of M", ylabel="speed against cuBLAS\n(cuBLAS ms / fastest candidate's ms)",
           title="The pointer GEMM's fastest recorded candidate against cuBLAS, per shape")
    sns.move_legend(ax, "upper center", bbox_to_anchor=(0.5, -0.14), ncols=2, title="N, K (shapes)", frameon=False,
                    fontsize="small")
    return figure
