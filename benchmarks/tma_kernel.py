"""The TMA GEMM (`matmul_tma`) against cuBLAS and against the pointer GEMM (`matmul`): its recorded H200 sweep, the
strategies replayed on it in simulated seconds, and (for the default sweep) the live searches of both kernels.

Run: `.venv/bin/python benchmarks/tma_kernel.py` (CPU, a few minutes; resumable: the replays' runs are kept under
results/matmul_tma/replay.runs/). Writes results/matmul_tma/summary.md and replay_by_seed.csv; with `--dataset D --out
DIR`, another sweep's report in DIR (the mid-size sweep: results/matmul_tma/mid_size/, 6 min 26 s on a 2-core machine).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tunebench.files import write_text_atomically
from tunebench.gemm_kernels import (
    DATASET, LIVE, SITTINGS, STRATEGIES, live_table, repeats_table, replay_by_seed, replay_summary, sweep_table,
)
from tunebench.measure.replay import CLOCKS, check_clock
from tunebench.search import check_strategy_names
from tunebench.study import Budget, open_dataset, run_study, tasks_of
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "results" / "matmul_tma"  # its replay table holds runs on the sequential clock without start-up
CLOCK_TEXT = {"sequential": "sequential (a batch compiles, then is timed)",
              "pipelined": "pipelined (compiles overlapping timing, as the live bench does: 'Replay against live' in "
                           "docs/strategies.md)"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=120.0, help="simulated seconds per replayed run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES),
                        help="registered names or a Strategy subclass's import path (docs/strategies.md)")
    parser.add_argument("--clock", choices=CLOCKS, default="sequential", help="the replay's simulated clock")
    parser.add_argument("--startup-s", type=float, default=0.0,
                        help="seconds before the first batch, as a live run's worker start-up")
    args = parser.parse_args()
    if not args.dataset.is_file():
        parser.error(f"no dataset at {args.dataset}")
    try:
        check_strategy_names(args.strategies)
        check_clock(args.clock, args.startup_s)
    except ValueError as error:
        parser.error(str(error))
    if (args.clock, args.startup_s) != ("sequential", 0.0) and args.out.resolve() == DEFAULT_OUT.resolve():
        parser.error("a replay on another clock or with a start-up needs its own --out: the default folder's replay "
                     "table holds runs on the sequential clock, which it would reuse")
    args.out.mkdir(parents=True, exist_ok=True)
    command = " ".join([".venv/bin/python", *sys.argv])

    sweep, failures, same_failures = sweep_table(args.dataset)
    trace = run_study(args.strategies, tasks_of(args.dataset), range(args.seeds), Budget(seconds=args.seconds),
                      args.out / "replay.parquet", workers=args.workers, clock=args.clock, startup_s=args.startup_s)
    by_seed = replay_by_seed(trace, args.dataset)
    write_text_atomically(args.out / "replay_by_seed.csv", by_seed.to_csv(index=False, float_format="%.4g"))
    provenance = open_dataset(args.dataset).provenance
    compile_workers = provenance.get("compile_workers")
    text = "\n\n".join([
        f"# The TMA GEMM (`matmul_tma`) on the {provenance.get('gpu_name', 'recorded GPU')}", f"Command: `{command}`",
        f"## The recorded sweep (`{os.path.relpath(args.dataset.resolve(), REPO)}`)",
        "Every config of the space per shape, measured with the collector (CUDA events, L2 flushed, median of "
        "repeats, every output checked against an fp32 reference); cuBLAS measured the same way when the collector "
        "began the shape. A shape whose configs span two sittings (the provenance lists each, with its GPU) is "
        "compared with the cuBLAS of the first."
        + (f" The column '{SITTINGS}' numbers the sittings that timed each, in the provenance's order ('?': rows "
           "recorded before datasets kept their sitting)." if SITTINGS in sweep else ""),
        markdown_table(sweep),
        *(["Failures by the parameters that decide them (every shape fails exactly the same configs, the same way):",
            markdown_table(failures[failures["shape"] == failures["shape"].iloc[0]].drop(columns="shape"))]
          if same_failures else ["Failures by the parameters that decide them:", markdown_table(failures)]),
        f"## Replayed searches ({args.seeds} seeds, {args.seconds:g} simulated seconds each)",
        "Deterministic replay of the sweep: each batch is charged its compile makespan on the sweep's "
        f"{compile_workers} compile workers (a binary once: configs that differ only in PROGRAMS_PER_SM share it), "
        "the recorded benchmark times, and the strategy's own CPU time on this machine. Medians over seeds; a seed "
        "that never reached a target counts as inf. Per run in `replay_by_seed.csv`."
        + ("" if args.clock == "sequential" and not args.startup_s else
           f" Clock: {CLOCK_TEXT[args.clock]}, {args.startup_s:g} s of start-up before the first batch."),
        markdown_table(replay_summary(by_seed)),
        # the recorded live runs searched the default sweep's shapes: another sweep's report leaves them out
        *(live_sections() if args.dataset.resolve() == DATASET.resolve() else []),
    ]) + "\n"
    write_text_atomically(args.out / "summary.md", text)
    print(text)
    return 0


def live_sections() -> list[str]:
    """The live searches of both kernels on the default sweep's shapes, and the repeated runs at 4096^3."""
    return [
        "## Live on the H200, both kernels",
        "From the recorded traces of `benchmarks/live_search.py` in one sitting on one H200 with the set-up "
        "overlapped (the TMA kernel with `--strategies lfbo lfbo_quick`, the pointer GEMM with `--strategies lfbo`, "
        "`--seconds 45`; the command is in each trace's .md): wall-clock seconds from starting the workers, cold "
        "Triton cache, cuBLAS measured after each search; NaN: never reached.",
        markdown_table(live_table(LIVE)),
        "## Repeated live runs of the TMA kernel at 4096x4096x4096",
        "Each a separate run of `benchmarks/live_search.py --kernel matmul_tma` (the command is in each trace's .md); "
        "seconds to 0.95x, 0.99x and 1.0x cuBLAS (cuBLAS measured in each run) from the first ask, and counting the "
        "run's set-up too. Set-up first (stop 49, one H200, `--seconds 45`): LFBO on five seeds and pattern and random "
        "search, each after its worker start-up and cuBLAS measurement. Set-up overlapped (stop 50, one H200, "
        "`--seconds 45`): the sitting above (seed 0) and LFBO at Helion's quick effort on seeds 1 to 4, the workers "
        "starting as the search does and cuBLAS measured after it. The same on a two-H200 host (stop 50, GPU 0 and 16 "
        "of its 32 cores, `--seconds 30`): LFBO on five seeds.",
        markdown_table(repeats_table(LIVE)),
    ]


if __name__ == "__main__":
    raise SystemExit(main())
