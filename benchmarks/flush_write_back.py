"""Does the timer's L2 flush slow the run it precedes? Zeroing the flush buffer leaves up to an L2 of dirty lines,
which the timed kernel's misses must write back to memory; reading the buffer leaves clean lines.

    python3 benchmarks/flush_write_back.py --out results/timing/flush_write_back_h100.md

The contenders of `compressed_mlp_chain.py` (each Llama-3.1-8B projection's dispatched pick and its cuBLAS matmul
alone, the passes whole) at batches 1, 64, 256 and 1024, and a copy of 8 MiB that fits in the L2 (where a flush that
evicts nothing would show as no flush), each timed under three policies side by side: the default flush (zero), a read
flush, and none. Every round times every (contender, policy) pair once, in a seeded shuffled order.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch

from compressed_mlp_chain import (SELECTIONS, command_line, contenders, parse_round_arguments, run_line, weights,
                                  write_report)
from tunebench.kernels.compressed_matmul.dispatch import Dispatcher
from tunebench.kernels.compressed_matmul.mlp import LLAMA_3_1_8B
from tunebench.kernels.compressed_matmul.selection_file import file_name
from tunebench.measure.timing import Timer, TimingPolicy

POLICIES = {"zero": TimingPolicy(), "read": TimingPolicy(flush="read"), "none": TimingPolicy(flush_bytes=0)}
BATCHES = (1, 64, 256, 1024)
L2_RESIDENT = "copy of 8 MiB"


def summary(timings: pd.DataFrame) -> pd.DataFrame:
    """One row per batch and contender: the median over rounds under each policy, and each flush over none."""
    table = timings.groupby(["batch", "contender", "policy"], sort=False).latency_us.median().unstack()
    table = table[list(POLICIES)].rename(columns=lambda policy: f"{policy}, us")
    table["zero / read"] = table["zero, us"] / table["read, us"]
    table["zero / none"] = table["zero, us"] / table["none, us"]
    table["read / none"] = table["read, us"] / table["none, us"]
    return table.reset_index()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args, gpu = parse_round_arguments(parser, argv, rounds=5)
    dispatcher = Dispatcher.load(SELECTIONS / file_name(LLAMA_3_1_8B.model, gpu), model=LLAMA_3_1_8B.model, gpu=gpu)
    compressed, uncompressed = weights(dispatcher.selection.tuning.mlp, args.seed)
    timers = {name: Timer(policy) for name, policy in POLICIES.items()}
    source = torch.ones(4 * 1024 * 1024, dtype=torch.bfloat16, device="cuda")
    target = torch.empty_like(source)
    rng, rows = np.random.default_rng(args.seed), []
    for batch in BATCHES:
        started = time.perf_counter()
        functions = contenders(dispatcher, compressed, uncompressed, batch, args.seed)[0]
        functions[L2_RESIDENT] = lambda: target.copy_(source)
        pairs = [(name, policy) for name in functions for policy in POLICIES]
        for round_index in range(args.rounds):
            for index in rng.permutation(len(pairs)):
                name, policy = pairs[index]
                rows.append({"batch": batch, "round": round_index, "contender": name, "policy": policy,
                             "latency_us": 1000 * float(np.median(timers[policy].time(functions[name])))})
        print(f"batch {batch}: {len(pairs)} pairs x {args.rounds} rounds in {time.perf_counter() - started:.0f} s",
              flush=True)
    timings = pd.DataFrame(rows)
    write_report(args.out, f"The L2 flush's write-back on {gpu}",
                 f"Command: `{command_line('flush_write_back.py', argv)}` ({run_line(args)}). Microseconds, medians "
                 "over rounds of the timer's medians; the flush buffer is "
                 f"{POLICIES['zero'].flush_bytes // 2**20} MiB, zeroed (the default) or summed.",
                 summary(timings), timings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
