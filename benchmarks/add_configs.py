"""A saved sweep's shapes with configs added from a later sitting, as a dataset of its own: the configs a space gained
(`--configs` of the collector) timed at shapes swept before they existed, beside the sweep's own rows and vendor timing.

Run: `.venv/bin/python benchmarks/add_configs.py --dataset D --later J --shapes 256x11008x4096,... --out OUT`, where J
is the later sitting's journal (.jsonl or .gz) or the dataset it wrote. Every added row names its sitting in the
provenance; each shape keeps the sweep's cuBLAS row, so the sweep's configs compare with cuBLAS as before. With
`--replace`, configs the sweep already holds are timed again (their binary changed) and the later rows replace them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tunebench.collect import parse_shapes, read_records, with_added_configs
from tunebench.measure.dataset import load_dataset, save_dataset


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, required=True, help="the sweep the configs are added to")
    parser.add_argument("--later", type=Path, required=True,
                        help="the later sitting's journal (.jsonl or .gz), or the dataset it wrote (.parquet)")
    parser.add_argument("--shapes", required=True, help="comma-separated MxNxK shapes of the sweep to keep")
    parser.add_argument("--out", type=Path, required=True, help="the combined dataset to write")
    parser.add_argument("--replace", action="store_true",
                        help="let the later sitting's rows replace configs the sweep already holds")
    args = parser.parse_args()
    base = load_dataset(args.dataset)
    try:
        combined = with_added_configs(base, read_records(args.later),
                                      parse_shapes(args.shapes, len(base.shape_names)), replace=args.replace)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_dataset(combined, args.out)
    counts = combined.measurements.groupby([*combined.shape_names, "status"]).size().unstack(fill_value=0)
    print(f"wrote {args.out}: {len(combined.measurements)} config rows from "
          f"{len(combined.provenance.get('sittings', [])) or 1} sittings\n{counts.to_string()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
