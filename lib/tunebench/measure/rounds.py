"""Timing the same configs again in rounds: every round times each shape's configs once, in a seeded shuffled order,
so that a config's median over rounds averages out what changes between timings; a killed run resumes by round.
Also the command line the re-timing scripts share.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.measure.timing import TimingPolicy


def time_in_rounds(out: Path, plan: pd.DataFrame, shape_names: Sequence[str], config_names: Sequence[str],
                   policies: Mapping[str, TimingPolicy], rounds: int, seed: int, kernel: str = "matmul",
                   dtype: str = "bfloat16", vendor: bool = False) -> pd.DataFrame:
    """Time `plan`'s rows (a shape and a config each, plus any other columns, which are kept) in `rounds` rounds
    under each named policy, appending each finished round to the CSV `out` (policy, round, the plan's columns,
    status, latency_ms, repeats, gpu) and skipping the rounds it already holds. Every round's shuffles are drawn
    in order whether or not the round is skipped, so a resumed run times the same orders. With `vendor`, each round
    also times the vendor library once per shape, before the shape's configs in even rounds and after them in odd
    ones, as a row of kind "vendor" (the configs' rows are of kind "config"; the plan's other columns empty). Returns
    every row."""
    from tunebench.measure.live import GpuBench

    if rounds < 1:
        raise ValueError(f"rounds={rounds!r}: time each config at least once")
    missing = [name for name in [*shape_names, *config_names] if name not in plan.columns]
    if missing:
        raise ValueError(f"the plan lacks the columns {missing}")
    done = pd.read_csv(out) if out.exists() else pd.DataFrame(columns=["policy", "round"])
    rng = np.random.default_rng(seed)
    groups = list(plan.groupby(list(shape_names), sort=False))
    for policy_name, policy in policies.items():
        with GpuBench(kernel, dtype, timing=policy, seed=seed) as bench:
            gpu = bench.provenance()["gpu_name"]
            for round_index in range(rounds):
                order = [rng.permutation(len(group)) for _, group in groups]
                if ((done["policy"] == policy_name) & (done["round"] == round_index)).any():
                    continue
                started, rows = time.perf_counter(), []
                for (shape, group), permutation in zip(groups, order):
                    timed = _time_group(bench, group.iloc[permutation], tuple(int(value) for value in shape),
                                        shape_names, config_names, vendor, vendor_first=round_index % 2 == 0)
                    rows += [{"policy": policy_name, "round": round_index, **fields, "status": result.status.value,
                              "latency_ms": result.latency_ms, "repeats": len(result.repeats_ms), "gpu": gpu}
                             for fields, result in timed]
                done = pd.concat([done, pd.DataFrame(rows)], ignore_index=True)
                write_text_atomically(out, done.to_csv(index=False))
                print(f"{policy_name} round {round_index + 1} of {rounds}: {len(rows)} timings in "
                      f"{time.perf_counter() - started:.0f} s", flush=True)
    return done


def _time_group(bench, group: pd.DataFrame, shape: tuple[int, ...], shape_names: Sequence[str],
                config_names: Sequence[str], vendor: bool, vendor_first: bool) -> list[tuple[dict, object]]:
    """(row fields, result) of one shape's configs timed in one batch, in the group's order, and with `vendor` of the
    vendor library timed once, before or after them."""
    vendor_row = {**dict(zip(shape_names, shape)), "kind": "vendor"}
    timed = [(vendor_row, bench.measure_vendor(shape))] if vendor and vendor_first else []
    results = bench.measure(group[list(config_names)].to_dict("records"), shape)
    timed += [({**row.to_dict(), **({"kind": "config"} if vendor else {})}, result)
              for (_, row), result in zip(group.iterrows(), results)]
    return timed + ([(vendor_row, bench.measure_vendor(shape))] if vendor and not vendor_first else [])


def rounds_command(description: str, repo: Path, default_dataset: Path, write_plan: Callable[[Path], pd.DataFrame],
                   time_plan: Callable[[Path, pd.DataFrame, int], object], summarize: Callable[[Path, str], str],
                   argv: Sequence[str] | None = None) -> int:
    """The command line of a re-timing script: `--write-plan PATH` writes what to time, from --dataset (no GPU);
    `--plan PATH --out CSV` times it (on the GPU, resuming CSV); `--summarize --out CSV` writes CSV's summary
    beside it as `.md` (no GPU), its command line in it."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, help="the timings' CSV (resumed when it exists)")
    parser.add_argument("--dataset", type=Path, default=default_dataset,
                        help="the recorded dataset the plan is drawn from")
    parser.add_argument("--write-plan", type=Path, help="write the configs to time here (no GPU)")
    parser.add_argument("--plan", type=Path, help="the configs to time, as --write-plan wrote them")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--summarize", action="store_true", help="write the summary of --out beside it (no GPU)")
    args = parser.parse_args(argv)
    if args.write_plan:
        write_text_atomically(args.write_plan, write_plan(args.dataset).to_csv(index=False))
    elif args.out is None:
        parser.error("--out is required to time or to summarize")
    elif args.summarize:
        script = os.path.relpath(os.path.abspath(sys.argv[0]), repo)
        command = " ".join([".venv/bin/python", script, *(sys.argv[1:] if argv is None else argv)])
        text = summarize(args.out.resolve(), command)
        write_text_atomically(args.out.with_suffix(".md"), text)
        print(text)
    elif args.plan is None:
        parser.error("--plan is required to time (write one with --write-plan)")
    else:
        time_plan(args.out, pd.read_csv(args.plan), args.seed)
    return 0
