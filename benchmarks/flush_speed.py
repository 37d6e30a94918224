"""GPU time of ways to evict the L2 with the timer's 256 MiB buffer, and a small GEMM's latency after each: the
timer's two flushes (tunebench.measure.timing.evict) beside torch reductions that read the buffer too.

GPU: python benchmarks/flush_speed.py --out results/flush_speed_<gpu>.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Callable

import pandas as pd
import torch

from tunebench.files import write_text_atomically
from tunebench.measure.timing import TimingPolicy, evict, flush_buffer
from tunebench.tables import markdown_table


def event_ms(function: Callable[[], object], before: Callable[[], object] | None = None, runs: int = 30) -> float:
    """Median GPU time of `function` over `runs`, each timed alone with CUDA events (after `before`, untimed)."""
    elapsed = []
    for _ in range(runs):
        if before is not None:
            before()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        function()
        end.record()
        end.synchronize()
        elapsed.append(start.elapsed_time(end))
    return statistics.median(elapsed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    buffer = flush_buffer(TimingPolicy(), "cuda")
    buffer.zero_()
    flushes = {"timer: zero (`zero_`)": lambda: evict(buffer, "zero"),
               "timer: read (Triton kernel of block sums)": lambda: evict(buffer, "read"),
               "torch int32 `sum` (the read flush before stop 100)": lambda: buffer.sum(),
               "torch float32 view `sum`": lambda: buffer.view(torch.float32).sum(),
               "torch int64 view `sum`": lambda: buffer.view(torch.int64).sum()}
    a = torch.randn(1, 3072, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(3072, 768, device="cuda", dtype=torch.bfloat16)
    for flush in flushes.values():  # compile and warm every one before any is timed
        flush()
    torch.cuda.synchronize()
    rows = []
    for round_ in range(args.rounds):
        for name, flush in flushes.items():
            rows.append({"round": round_, "flush": name, "flush, us (median of 30)": f"{1e3 * event_ms(flush):.1f}",
                         "1 x 768 x 3072 matmul after it, us": f"{1e3 * event_ms(lambda: a @ b, before=flush):.2f}"})
    command = "python " + " ".join(sys.argv)
    write_text_atomically(args.out, f"""# L2 flushes on {torch.cuda.get_device_name()}

Command: `{command}` (torch {torch.__version__}). Each flush reads or writes the timer's {buffer.numel() * 4 >> 20} MiB
buffer; the matmul (bf16, torch) is timed right after one, as the timer times a config: what it costs after a flush
that left dirty lines (zero) or clean ones (the reads).

{markdown_table(pd.DataFrame(rows))}
""")
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
