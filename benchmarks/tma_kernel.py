"""The TMA GEMM (`matmul_tma`) against cuBLAS and against the pointer GEMM (`matmul`): its recorded H200 sweep, the
strategies replayed on it in simulated seconds, and the live LFBO searches of both kernels on the same shapes.

Run: `.venv/bin/python benchmarks/tma_kernel.py` (CPU, a few minutes; resumable: the replays' runs are kept under
results/matmul_tma/replay.runs/). Writes results/matmul_tma/summary.md and replay_by_seed.csv.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.live_traces import FRACTIONS_OF_VENDOR, summary_rows
from tunebench.metrics import evaluations_to_reach, seconds_to_reach
from tunebench.study import Budget, open_dataset, run_study, tasks_of
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "results" / "datasets" / "matmul_tma_bfloat16_h200.parquet"
LIVE = REPO / "results" / "live_search" / "matmul_tma"  # both kernels' LFBO runs of one sitting; repeats/ below
LIVE_SHAPES = ("2048x2048x2048", "4096x4096x4096", "8192x8192x8192", "4096x14336x4096")
STRATEGIES = ("random", "pattern", "lfbo", "de", "optuna_tpe")
FRACTIONS = (0.71, 0.9, 0.95, 0.99)  # of cuBLAS's speed: Helion's quick effort reached 0.71x
FRACTION_OF_BEST = 0.99  # of the sweep's best config


def sweep_table(dataset_path: Path) -> tuple[pd.DataFrame, pd.DataFrame, bool]:
    """Per recorded shape: outcomes, the best config against cuBLAS, and how many configs come near it; the failures
    by the parameters that decide them; and whether every shape failed exactly the same configs the same way."""
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


def live_table(live: Path) -> pd.DataFrame:
    """LFBO's live runs of both kernels, shape by shape, from their recorded traces."""
    rows = []
    for shape in LIVE_SHAPES:
        for kernel, stem in (("matmul", f"h200_bfloat16_{shape}"), ("matmul_tma", f"h200_matmul_tma_bfloat16_{shape}")):
            path = live / f"{stem}.parquet"
            if not path.is_file():
                continue
            lfbo = summary_rows(pd.read_parquet(path)).set_index("strategy").loc["lfbo"]
            row = {"shape": shape, "kernel": kernel, "trace": str(path.relative_to(REPO)),
                   "evaluations": lfbo["evaluations"], "search_s": lfbo["search_s"],
                   "best vs cuBLAS": lfbo["best vs cuBLAS"]}
            row.update({f"s to {fraction}x": lfbo[f"s to {fraction}x"] for fraction in FRACTIONS_OF_VENDOR[1:]})
            rows.append(row)
    return pd.DataFrame(rows)


REPEATED = [f"s to {fraction}x" for fraction in (0.95, 0.99, 1.0)]


def repeats_table(live: Path, shape: str = "4096x4096x4096") -> pd.DataFrame:
    """Every live run of the TMA kernel at `shape`: LFBO's seeds (seed 0 is the run of `live_table`, the others under
    repeats/seed<N>/), then the other strategies under repeats/<names>/; a last row of LFBO's medians over seeds, a
    seed that never got there counting as never (inf)."""
    stem = f"h200_matmul_tma_bfloat16_{shape}.parquet"
    traces = [(0, live / stem)] + sorted((int(path.parent.name.removeprefix("seed")), path)
                                         for path in live.glob(f"repeats/seed*/{stem}"))
    traces += [(None, path) for path in sorted(live.glob(f"repeats/*/{stem}"))
               if not path.parent.name.startswith("seed")]
    rows = []
    for seed, path in traces:
        for _, summary in summary_rows(pd.read_parquet(path)).iterrows():
            rows.append({"strategy": summary["strategy"], "seed": "" if seed is None else seed,
                         "trace": str(path.relative_to(REPO)), "evaluations": summary["evaluations"],
                         "search_s": summary["search_s"], "setup_s": summary["setup_s"],
                         "best vs cuBLAS": summary["best vs cuBLAS"],
                         **{column: summary[column] for column in REPEATED},
                         **{f"set-up + {column}": round(summary["setup_s"] + summary[column], 1)
                            for column in REPEATED[:2]}})
    table = pd.DataFrame(rows)
    lfbo = table[table.strategy == "lfbo"]
    median = {"strategy": f"lfbo, median of {len(lfbo)} seeds", "seed": "", "trace": "",
              "evaluations": lfbo.evaluations.median(), "search_s": lfbo.search_s.median(),
              "setup_s": lfbo.setup_s.median(), "best vs cuBLAS": lfbo["best vs cuBLAS"].median(),
              **{column: float(lfbo[column].fillna(np.inf).median())
                 for column in [*REPEATED, *(f"set-up + {column}" for column in REPEATED[:2])]}}
    return pd.concat([table, pd.DataFrame([median])], ignore_index=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=120.0, help="simulated seconds per replayed run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "results" / "matmul_tma")
    args = parser.parse_args()
    if not args.dataset.is_file():
        parser.error(f"no dataset at {args.dataset}")
    args.out.mkdir(parents=True, exist_ok=True)
    command = " ".join([".venv/bin/python", *sys.argv])

    sweep, failures, same_failures = sweep_table(args.dataset)
    trace = run_study(STRATEGIES, tasks_of(args.dataset), range(args.seeds), Budget(seconds=args.seconds),
                      args.out / "replay.parquet", workers=args.workers)
    by_seed = replay_by_seed(trace, args.dataset)
    by_seed.to_csv(args.out / "replay_by_seed.csv", index=False, float_format="%.4g")
    live = live_table(LIVE)
    repeats = repeats_table(LIVE)
    compile_workers = open_dataset(args.dataset).provenance.get("compile_workers")
    text = "\n\n".join([
        "# The TMA GEMM (`matmul_tma`) on the H200", f"Command: `{command}`",
        f"## The recorded sweep (`{args.dataset.relative_to(REPO)}`)",
        "Every config of the space per shape, measured with the collector (CUDA events, L2 flushed, median of "
        "repeats, every output checked against an fp32 reference); cuBLAS measured the same way in the same sitting.",
        markdown_table(sweep),
        *(["Failures by the parameters that decide them (every shape fails exactly the same configs, the same way):",
            markdown_table(failures[failures["shape"] == failures["shape"].iloc[0]].drop(columns="shape"))]
          if same_failures else ["Failures by the parameters that decide them:", markdown_table(failures)]),
        f"## Replayed searches ({args.seeds} seeds, {args.seconds:g} simulated seconds each)",
        "Deterministic replay of the sweep: each batch is charged its compile makespan on the sweep's "
        f"{compile_workers} compile workers (a binary once: configs that differ only in PROGRAMS_PER_SM share it), "
        "the recorded benchmark times, and the strategy's own CPU time on this machine. Medians over seeds; a seed "
        "that never reached a target counts as inf. Per run in `replay_by_seed.csv`.",
        markdown_table(replay_summary(by_seed)),
        "## Live LFBO on the H200, both kernels",
        "From the recorded traces of `benchmarks/live_search.py --strategies lfbo` (wall-clock seconds from the "
        "first ask, cold Triton cache; both kernels in one sitting; the command is in each trace's .md; NaN: never "
        "reached).",
        markdown_table(live),
        "## Repeated live runs of the TMA kernel at 4096x4096x4096",
        "LFBO on five seeds (`--seed N`) and pattern and random search, each a separate run of "
        "`benchmarks/live_search.py --kernel matmul_tma --seconds 45` on the same machine; seconds to 0.95x, 0.99x and "
        "1.0x cuBLAS (cuBLAS measured in each run) from the first ask, and to 0.95x and 0.99x counting the run's set-up "
        "(worker start-up and the cuBLAS measurement) too.",
        markdown_table(repeats),
    ]) + "\n"
    write_text_atomically(args.out / "summary.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
