"""A stopping rule for warm starts with restart, measured on recorded live runs: each trace's `warm:<inner>:restart`
run is re-driven (`tunebench.redrive`) as `warm:<inner>:restart<n>`, which asks what the recorded run asked until it
stops, so where it would have stopped, after how many seconds and with which best, is read off the live run itself.

Run: `.venv/bin/python benchmarks/restart_patience_live.py results/live_search/warm_restart/*.parquet` (CPU, a few
minutes: LFBO refits its forest at every batch); writes results/live_search/warm_restart/patience.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from live_search import parse_strategy_name
from tunebench.files import write_text_atomically
from tunebench.kernels import get_kernel
from tunebench.live_traces import FRACTION_OF_BEST, first_time_reaching
from tunebench.redrive import config_of_key_text, recorded_batches, redrive
from tunebench.search.warm_start import RESTART_GAIN, warm_start
from tunebench.tables import markdown_table

OUT = Path("results/live_search/warm_restart/patience.md")


def shape_of(path: Path) -> str:
    """The `MxNxK` that `live_search.py` ends a trace's file name with."""
    return path.stem.rsplit("_", 1)[-1]


def patience_rows(path: Path, strategy: str, patiences: list[int], kernel: str, seed: int) -> list[dict]:
    """For one trace: the recorded restart run, then per patience where its re-drive stopped."""
    traces = pd.read_parquet(path)
    recorded = traces[traces.strategy == strategy]
    if recorded.empty:
        raise ValueError(f"{path} holds no {strategy!r} run; it holds {', '.join(traces.strategy.unique())}")
    space = get_kernel(kernel).config_space()
    seeds = [config_of_key_text(space, key) for key in recorded_batches(recorded)[0]]
    inner = parse_strategy_name(strategy)[0]
    run_best = float(traces.best_ms.min())
    others = {name: round(float(group.time_s.max()), 1) for name, group in traces.groupby("strategy", sort=False)
              if name != strategy}
    base = {"shape": shape_of(path), **{f"{name} s": seconds for name, seconds in others.items()},
            f"{strategy} evaluations": len(recorded), f"{strategy} s": round(float(recorded.time_s.max()), 1),
            f"its s to {FRACTION_OF_BEST} of run's best": round(first_time_reaching(recorded, run_best,
                                                                                     FRACTION_OF_BEST), 1)}
    rows = []
    for patience in patiences:
        searcher = warm_start(inner, space, seeds, seed=seed, restart=True, restart_patience=patience)
        result = redrive(searcher, recorded)
        rows.append({**base, "patience": patience, "outcome": result.outcome, "evaluations": result.evaluations,
                     "s": round(result.seconds, 1),
                     "best kept": round(float(recorded.best_ms.min()) / result.best_ms, 4)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", type=Path, nargs="+", help="live_search.py traces (.parquet)")
    parser.add_argument("--strategy", default="warm:lfbo:restart", help="the recorded restart run of each trace")
    parser.add_argument("--patience", type=int, nargs="+", default=[1, 2], help="restart_patience values to re-drive")
    parser.add_argument("--kernel", default="matmul", choices=["matmul", "matmul_tma"])
    parser.add_argument("--seed", type=int, default=0, help="the live runs' --seed")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    missing = [str(path) for path in args.traces if not path.is_file()]
    if missing:
        parser.error(f"no such trace: {', '.join(missing)}")
    if min(args.patience) < 1:
        parser.error(f"--patience {min(args.patience)}: a patience counts fresh runs, so it is 1 or more")
    name, warm = parse_strategy_name(args.strategy)
    if not (warm and warm["restart"] and not warm["restart_patience"]):
        parser.error(f"--strategy {args.strategy!r}: give the recorded run that restarts without a patience, "
                     f"warm:{name}:restart")
    started = time.perf_counter()
    rows = [row for path in tqdm(args.traces, desc="re-driving", unit="trace")
            for row in patience_rows(path, args.strategy, args.patience, args.kernel, args.seed)]
    table = pd.DataFrame(rows)
    medians = (table.groupby("patience")
               .agg(shapes=("shape", "size"), stopped=("outcome", lambda outcome: int((outcome == "stopped").sum())),
                    diverged=("outcome", lambda outcome: int((outcome == "diverged").sum())),
                    median_s=("s", "median"), median_evaluations=("evaluations", "median"),
                    best_kept=("best kept", lambda kept: int((kept == 1).sum())))
               .reset_index()
               .rename(columns={"median_s": "median s", "median_evaluations": "median evaluations",
                                "best_kept": "shapes whose best is kept"}))
    per_shape = table.drop_duplicates("shape")
    searched = ", ".join(f"`{column.removesuffix(' s')}` {per_shape[column].median():.1f} s"
                         for column in per_shape.columns if column.endswith(" s"))
    command = " ".join([".venv/bin/python", *map(str, [sys.argv[0], *(argv if argv is not None else sys.argv[1:])])])
    text = "\n\n".join([
        f"# Restart patience, re-driven on {table['shape'].nunique()} recorded live runs",
        f"Command: `{command}` ({time.perf_counter() - started:.0f} s).",
        f"Each trace's `{args.strategy}` run was re-driven as `{args.strategy}<n>`: the same warm start (seed "
        f"{args.seed}, the run's first batch as its seeds), ending after n fresh runs in a row that lowered the best "
        f"latency by less than {RESTART_GAIN:.0%}. It asks what the recorded run asked until it stops, so `s` is the "
        "recorded run's clock when it would have stopped, and `best kept` its best then as a fraction of the recorded "
        "run's best (1: the same). `diverged`: the re-driven search asked something else (another library version, "
        f"say); such a row measures nothing. Median seconds searched, as recorded: {searched}.",
        markdown_table(medians), markdown_table(table)]) + "\n"
    write_text_atomically(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
