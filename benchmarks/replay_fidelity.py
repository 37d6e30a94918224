"""Replay against live: every recorded live search of the TMA GEMM replayed batch for batch on its H200 sweep under
each replay clock, the start-up a live run pays before its first batch, and replays that charge it, beside live.

Run: `.venv/bin/python benchmarks/replay_fidelity.py` (CPU, about 2 min on 2 cores; the replays resume from
results/replay_fidelity/replay.runs/). Writes results/replay_fidelity/batches.csv, replay_by_seed.csv and summary.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.gemm_kernels import DATASET, FORKED, LIVE, OVERLAPPED, replay_by_seed, repeats_table
from tunebench.replay_fidelity import (
    calibrated_startup_s, fidelity_table, first_batch_residuals, later_batches_summary, live_runs,
    recorded_on_another_host, residuals_summary, sitting_first_batches,
)
from tunebench.study import Budget, open_dataset, run_study, tasks_of
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
STRATEGIES = ("lfbo", "lfbo_quick")  # the two efforts run live at 4096^3 on several seeds
SHAPE = "4096x4096x4096"
TARGETS = ("s to 0.95x", "s to 0.99x")
LIVE_TARGETS = tuple(f"set-up + {target}" for target in TARGETS)  # the clock from making the bench


def live_against_replay(live_repeats: pd.DataFrame, by_seed: pd.DataFrame, startup_s: float) -> pd.DataFrame:
    """At SHAPE, per strategy: the median seconds to each target over the live runs of each set-up whose clock starts
    with the workers (counted from making the bench), and over the seeds replayed on the pipelined clock with and
    without the start-up (a run that never got there: inf)."""
    rows = []
    with_workers = live_repeats[(live_repeats["set-up"].str.startswith(OVERLAPPED) | (live_repeats["set-up"] == FORKED))
                                & ~live_repeats.strategy.str.contains("median")]
    for (setup, strategy), runs in with_workers.groupby(["set-up", "strategy"], sort=False):
        rows.append({"strategy": strategy, "runs": f"live, {setup}", "seeds": len(runs),
                     **{target: float(runs[live].fillna(float("inf")).median())
                        for target, live in zip(TARGETS, LIVE_TARGETS)}})
    replayed = by_seed[by_seed["shape"] == SHAPE]
    for strategy, runs in replayed.groupby("strategy", sort=False):
        for label, shift in ((f"replayed, pipelined clock + {startup_s:.1f} s start-up", 0.0),
                             ("the same less the start-up", -startup_s)):
            rows.append({"strategy": strategy, "runs": label, "seeds": len(runs),
                         **{target: float(runs[target].fillna(float("inf")).median()) + shift for target in TARGETS}})
    return pd.DataFrame(rows).round(1).sort_values(["strategy", "runs"], kind="stable")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--live", type=Path, default=LIVE, help="the folder of the recorded live runs")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0, help="simulated seconds per replayed run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "results" / "replay_fidelity")
    args = parser.parse_args()
    if not args.dataset.is_file():
        parser.error(f"no dataset at {args.dataset}")
    runs = live_runs(args.live)
    if not runs:
        parser.error(f"no live runs of the TMA GEMM under {args.live}")
    args.out.mkdir(parents=True, exist_ok=True)
    command = " ".join([".venv/bin/python", *sys.argv])

    dataset = open_dataset(args.dataset)
    batches = fidelity_table(runs, dataset)
    write_text_atomically(args.out / "batches.csv", batches.to_csv(index=False, float_format="%.4g"))
    other_host = recorded_on_another_host(dataset, args.dataset)
    residuals = first_batch_residuals(batches)
    startup_s = calibrated_startup_s(residuals)
    print(f"{len(runs)} live runs, {len(batches)} batches; start-up {startup_s:.2f} s", flush=True)

    trace = run_study(STRATEGIES, tasks_of(args.dataset), range(args.seeds), Budget(seconds=args.seconds),
                      args.out / "replay.parquet", workers=args.workers, clock="pipelined", startup_s=startup_s)
    by_seed = replay_by_seed(trace, args.dataset)
    write_text_atomically(args.out / "replay_by_seed.csv", by_seed.to_csv(index=False, float_format="%.4g"))
    side_by_side = live_against_replay(repeats_table(args.live), by_seed, startup_s)

    text = "\n\n".join([
        "# Replay against live: the TMA GEMM on the H200", f"Command: `{command}`",
        f"Every recorded live search of the TMA GEMM ({len(runs)} runs of `benchmarks/live_search.py --kernel "
        f"matmul_tma` under `{args.live.relative_to(REPO)}`, {batches.trace.nunique()} traces, {len(batches)} batches) "
        f"replayed batch for batch: the configs each batch asked, in its order, on the sweep "
        f"`{args.dataset.relative_to(REPO)}` with the run's number of compile workers. A batch's live seconds are the "
        "wall seconds between its clock readings less the strategy's own CPU time, which replay charges as measured. "
        "Clocks (`tunebench.measure.replay.CLOCKS`): `sequential` compiles a batch's new binaries, then times its "
        "configs (the design's contract, as Kernel Tuner's simulation does); `pipelined` times each binary's configs "
        "as its compile ends while the other workers compile on, as `GpuBench` does. Per batch in `batches.csv`.",
        "## Batches after the first",
        "live seconds / replayed seconds per batch. The sweep's rows of "
        f"{', '.join(sorted(other_host)) or 'no shape'} come from its extension, recorded on another host (32 cores, "
        "two H200s) than its base file (16 cores, one H200). The live runs ran on one-H200 hosts, and the two-GPU "
        "host's on GPU 0 and 16 of its 32 cores.",
        markdown_table(later_batches_summary(batches, other_host)),
        "## The first batch: the start-up",
        "live seconds less the pipelined clock's, per run's first batch. Set-up first (stop 49): the workers were "
        "started and cuBLAS measured before the clock, so what is left is each worker's first compile and the first "
        "timings. Set-up overlapped (stop 50): the clock starts with the workers, spawned. Workers forked (stop 52): "
        "the clock starts with the workers, forked from a server started before it, the compile workers without "
        "CUDA; the bench's making before the clock (setup_s in the traces, 0.6 to 1.0 s) is not in these residuals. "
        "The start-up charged below is the "
        f"median over the overlapped sitting's {len(sitting_first_batches(residuals))} first batches: "
        f"{startup_s:.2f} s; its repeated runs (other seeds, and the two-GPU host) were not used to set it.",
        markdown_table(residuals_summary(residuals, startup_s)),
        markdown_table(residuals.round(2)),
        f"## Replayed with the start-up, beside live at {SHAPE}",
        f"`run_study` of {', '.join(STRATEGIES)} on every shape of the sweep, {args.seeds} seeds, {args.seconds:g} "
        f"simulated seconds, `clock=\"pipelined\"`, `startup_s={startup_s:.2f}`; per run in `replay_by_seed.csv`. "
        "Live: the runs of `gemm_kernels.repeats_table` whose clock starts with the workers (seconds from making the "
        "bench: setup_s included). Medians; a run that never got there counts as inf.",
        markdown_table(side_by_side),
    ]) + "\n"
    write_text_atomically(args.out / "summary.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
