"""Replay against live on the widened TMA space: the live searches at 4096^3 on the space with WIDEN (stop 59) replayed
batch for batch on the widened sweep, which the same H200 recorded right after them, and replayed from scratch
beside them.

Run: `.venv/bin/python benchmarks/replay_fidelity_widened.py` (CPU, 65 s on 2 cores; the replays resume from
results/replay_fidelity/widened_4096/replay.runs/). Writes batches.csv, replay_by_seed.csv and summary.md there. The
start-up charged is the one the runs with forked workers on the space before WIDEN leave (`replay_fidelity.py`'s
"workers forked" sitting), so nothing here is calibrated on the runs it is judged against.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.gemm_kernels import DATASET, FORKED, LIVE, replay_by_seed
from tunebench.live_traces import summary_rows
from tunebench.replay_fidelity import (
    calibrated_startup_s, fidelity_table, first_batch_residuals, later_batches_summary, live_runs,
)
from tunebench.report import shown_path
from tunebench.study import Budget, open_dataset, run_study, tasks_of
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
WIDENED_DATASET = REPO / "results/datasets/matmul_tma_bfloat16_h200_default_widened.parquet"
WIDENED_LIVE = REPO / "results/live_search/matmul_tma_widened/side_by_side_4096/widened"
SETUP = "workers forked, widened space"
SHAPE = "4096x4096x4096"
STRATEGIES = ("lfbo", "lfbo_quick")
TARGETS = ("s to 0.95x", "s to 0.99x")


def widened_runs(live: Path) -> list[tuple[str, str, Path]]:
    """(set-up, shape, trace) of every live run at SHAPE under `live` (<strategy>_seed<N>/ folders)."""
    return [(SETUP, SHAPE, path) for path in sorted(live.glob(f"*/h200_matmul_tma_bfloat16_{SHAPE}.parquet"))]


def live_medians(runs: list[tuple[str, str, Path]]) -> pd.DataFrame:
    """Per strategy, the medians over the live runs of the seconds to each target counted from making the bench
    (setup_s included), a run that never got there counting as inf."""
    rows = []
    for _, _, path in runs:
        for _, summary in summary_rows(pd.read_parquet(path)).iterrows():
            rows.append({"strategy": summary["strategy"],
                         **{target: summary["setup_s"] + summary[target] for target in TARGETS}})
    table = pd.DataFrame(rows).fillna(float("inf"))
    return table.groupby("strategy", sort=False).agg(seeds=(TARGETS[0], "size"), **{
        target: (target, "median") for target in TARGETS}).reset_index()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0, help="simulated seconds per replayed run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "results" / "replay_fidelity" / "widened_4096")
    args = parser.parse_args()
    runs = widened_runs(WIDENED_LIVE)
    if not runs:
        parser.error(f"no live runs at {SHAPE} under {WIDENED_LIVE}")
    args.out.mkdir(parents=True, exist_ok=True)
    command = " ".join([".venv/bin/python", *sys.argv])

    forked = [run for run in live_runs(LIVE) if run[0] == FORKED]
    startup_s = calibrated_startup_s(first_batch_residuals(fidelity_table(forked, open_dataset(DATASET))), FORKED)
    batches = fidelity_table(runs, open_dataset(WIDENED_DATASET))
    write_text_atomically(args.out / "batches.csv", batches.to_csv(index=False, float_format="%.4g"))
    residuals = first_batch_residuals(batches)
    print(f"{len(runs)} live runs, {len(batches)} batches; start-up {startup_s:.2f} s", flush=True)

    trace = run_study(STRATEGIES, tasks_of(WIDENED_DATASET, [SHAPE.split("x")]), range(args.seeds),
                      Budget(seconds=args.seconds), args.out / "replay.parquet", workers=args.workers,
                      clock="pipelined", startup_s=startup_s)
    by_seed = replay_by_seed(trace, WIDENED_DATASET)
    write_text_atomically(args.out / "replay_by_seed.csv", by_seed.to_csv(index=False, float_format="%.4g"))
    replayed = by_seed.fillna({target: float("inf") for target in TARGETS}).groupby("strategy", sort=False).agg(
        seeds=(TARGETS[0], "size"), **{target: (target, "median") for target in TARGETS}).reset_index()
    side_by_side = pd.concat([
        live_medians(runs).assign(runs="live, widened space, forked workers"),
        replayed.assign(runs=f"replayed, pipelined clock + {startup_s:.2f} s start-up"),
    ], ignore_index=True)[["strategy", "runs", "seeds", *TARGETS]].round(1).sort_values("strategy", kind="stable")

    text = "\n\n".join([
        "# Replay against live on the widened TMA space, 4096^3", f"Command: `{command}`",
        f"The {len(runs)} live runs of stop 59 on the space with WIDEN (`{shown_path(WIDENED_LIVE)}`, "
        f"{len(batches)} batches) replayed batch for batch on the widened sweep `{shown_path(WIDENED_DATASET)}`, "
        "whose 4096^3 rows the same H200 recorded right after them, with each run's number of compile workers "
        "(`tunebench.replay_fidelity`; per batch in `batches.csv`).",
        "## Batches after the first", "live seconds / replayed seconds per batch.",
        markdown_table(later_batches_summary(batches, set()).query("`sweep rows recorded on` == 'every shape'")
                       .drop(columns="sweep rows recorded on")),
        "## The first batch: the start-up",
        "live seconds less the pipelined clock's, per run's first batch. The clock starts with the workers, forked "
        "from a server started before it. The start-up charged below is not calibrated on these runs: it is the "
        f"median first-batch residual of the runs with forked workers on the space before WIDEN ({len(forked)} runs "
        f"under `{shown_path(LIVE)}`, replayed on `{shown_path(DATASET)}`): {startup_s:.2f} s.",
        markdown_table(residuals.round(2)),
        f"## Replayed with that start-up, beside live at {SHAPE}",
        f"`run_study` of {', '.join(STRATEGIES)} at {SHAPE} on the widened sweep, {args.seeds} seeds, {args.seconds:g} "
        f"simulated seconds, `clock=\"pipelined\"`, `startup_s={startup_s:.2f}`; per run in `replay_by_seed.csv`. "
        "Live: seconds from making the bench (setup_s included). Medians; a run that never got there counts as inf.",
        markdown_table(side_by_side),
    ]) + "\n"
    write_text_atomically(args.out / "summary.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
