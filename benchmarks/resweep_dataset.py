"""A recorded dataset with some of its shapes swept again: the re-sweep's rows replace the earlier rows of its shapes
and configs, each naming its own sitting, listed after the dataset's (`tunebench.collect.records_after`).

`.venv/bin/python benchmarks/resweep_dataset.py --dataset D.parquet --resweep R.parquet --out OUT.parquet` (R: the
re-sweep's dataset or journal; `--only-reswept` keeps the re-swept shapes alone). Refused: a re-swept shape the dataset
lacks, another kernel's configs, or a re-sweep on another GPU model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from tunebench.collect import build_dataset, dataset_records, read_records, records_after
from tunebench.kernels import get_kernel
from tunebench.measure.dataset import Dataset, load_dataset, save_dataset


def reswept(dataset: Dataset, records: Sequence[dict], only_reswept: bool = False) -> Dataset:
    """`dataset` with each (shape, config) that `records` (a later sitting's, journal or dataset) measured replaced
    by theirs, and its vendor rows of those shapes too; with `only_reswept`, the re-swept shapes alone."""
    shapes = sorted({tuple(record["shape"]) for record in records if record["kind"] == "config"})
    missing = sorted(set(shapes) - set(dataset.shapes()))
    if not shapes or missing:
        raise ValueError(f"the re-sweep's shapes must be the dataset's; it measured {shapes}, of which the dataset "
                         f"lacks {missing}")
    other = sorted({name for record in records if record["kind"] == "config" for name in record["config"]}
                   - set(get_kernel(dataset.kernel).config_space().names))
    if other:
        raise ValueError(f"the re-sweep's configs have parameters {other} that {dataset.kernel}'s space lacks")
    gpus = {record["provenance"].get("gpu_name") for record in records if record["kind"] == "provenance"}
    if gpus != {dataset.gpu}:
        raise ValueError(f"the re-sweep was measured on {sorted(map(str, gpus))}, the dataset on {dataset.gpu!r}")
    base = dataset.with_shapes(shapes) if only_reswept else dataset
    return build_dataset(dataset.kernel, dataset.dtype, records_after(dataset_records(base), records))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--resweep", type=Path, required=True, help="the re-sweep's dataset (.parquet) or journal")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only-reswept", action="store_true",
                        help="keep the re-swept shapes alone (their configs the re-sweep left out stay as they were)")
    args = parser.parse_args(argv)
    records = read_records(args.resweep)
    try:
        result = reswept(load_dataset(args.dataset), records, args.only_reswept)
    except ValueError as error:
        parser.error(str(error))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_dataset(result, args.out)
    again = {tuple(record["shape"]) for record in records if record["kind"] == "config"}
    print(f"wrote {args.out}: {len(result.measurements)} rows; {len(again)} of its {len(result.shapes())} shapes "
          f"swept again ({len(result.provenance['sittings'])} sittings in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
