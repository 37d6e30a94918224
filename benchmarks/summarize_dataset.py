"""Summarize a recorded dataset as Markdown: valid configs and failure shares per shape, best Triton config
against the vendor library per shape. The README and docs/ quote its output.

Run: `.venv/bin/python benchmarks/summarize_dataset.py results/datasets/matmul_bfloat16_h100.parquet`
(writes `results/<dataset name>_summary.md` and prints it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tunebench.dataset_summary import (STATUSES, best_per_shape, sittings_table, speedup_summary, status_shares,
                                      timing_spread)
from tunebench.files import write_text_atomically
from tunebench.measure.dataset import load_dataset
from tunebench.tables import markdown_table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    data = load_dataset(args.dataset)
    out = args.out or Path("results") / f"{args.dataset.stem}_summary.md"
    shapes = list(data.shape_names)
    shares = status_shares(data)
    best = best_per_shape(data)
    best_columns = [*shapes, *data.parameter_names, "latency_ms", "vendor_ms", "speedup"]
    best_columns += [c for c in ("tflops", "vendor_tflops") if c in best]
    text = "\n\n".join([
        f"# {data.kernel} {data.dtype} on {data.gpu}",
        f"Command: `{' '.join(['python', *sys.argv])}`  \nMeasured with: `{data.provenance.get('command', '?')}` "
        f"on {data.provenance.get('date', '?')} (torch {data.provenance.get('torch')}, "
        f"Triton {data.provenance.get('triton')}, CUDA {data.provenance.get('cuda')}, driver {data.provenance.get('driver')})"
        + ("" if (sittings := sittings_table(data)).empty else
           f" and {len(sittings) - 1} more sitting(s):\n\n" + markdown_table(sittings)),
        "## Valid configs and failure shares per shape",
        markdown_table(shares[[*shapes, "configs", "valid", *[s for s in STATUSES if s != "ok"]]], "{:.1%}"),
        timing_spread(data),
        "## Best Triton config vs the vendor library per shape (speedup = vendor latency / Triton latency)",
        markdown_table(best[best_columns]),
        speedup_summary(best),
    ]) + "\n"
    write_text_atomically(out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
