"""Add shapes measured in a later collector journal to a saved dataset (whose own journal may be gone), as a new
sitting in its provenance; every earlier row is kept as it was (checked).

Run: `.venv/bin/python benchmarks/extend_dataset.py --dataset D --journal J.jsonl.gz --shapes 4x9672x2048,...`
Each listed shape must be complete in the journal: every config the dataset holds per shape, and the vendor row.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np

from tunebench.collect import build_dataset, dataset_records, parse_shapes
from tunebench.measure.dataset import load_dataset, save_dataset


def read_journal(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--journal", type=Path, required=True, help="the later sitting's journal (.jsonl or .gz)")
    parser.add_argument("--shapes", required=True, help="comma-separated MxNxK shapes to add")
    parser.add_argument("--write", action="store_true", help="write the extended dataset over --dataset")
    args = parser.parse_args()
    dataset = load_dataset(args.dataset)
    shapes = set(parse_shapes(args.shapes, len(dataset.shape_names)))
    if shapes & set(dataset.shapes()):
        raise SystemExit(f"already in {args.dataset}: {sorted(shapes & set(dataset.shapes()))}")
    journal = read_journal(args.journal)
    gpus = {r["provenance"].get("gpu_name") for r in journal if r["kind"] == "provenance"}
    if gpus != {dataset.gpu}:
        raise SystemExit(f"{args.journal} was measured on {sorted(map(str, gpus))}, {args.dataset} on {dataset.gpu!r}")
    per_shape = len(dataset.measurements) // len(dataset.shapes())
    configs: dict[tuple, set] = {}
    vendor = {tuple(r["shape"]) for r in journal if r["kind"] == "vendor"}
    for record in journal:
        if record["kind"] == "config":
            configs.setdefault(tuple(record["shape"]), set()).add(json.dumps(record["config"], sort_keys=True))
    incomplete = sorted(s for s in shapes if len(configs.get(s, ())) < per_shape or s not in vendor)
    if incomplete:
        raise SystemExit(f"not complete in {args.journal} ({per_shape} configs and the vendor row): {incomplete}")
    earlier = len(dataset.measurements) + len(dataset.vendor)
    later = [{**r, "measured_before": r["measured_before"] + earlier} if r["kind"] == "provenance" else r
             for r in journal if r["kind"] == "provenance"
             or (r["kind"] in ("config", "vendor") and tuple(r["shape"]) in shapes)]
    extended = build_dataset(dataset.kernel, dataset.dtype, dataset_records(dataset) + later)
    names = [*dataset.shape_names, *dataset.parameter_names]
    before = dataset.measurements.sort_values(names).reset_index(drop=True)
    after = extended.measurements.merge(before[names], on=names).sort_values(names).reset_index(drop=True)
    if len(after) != len(before) or not np.array_equal(before["latency_ms"], after["latency_ms"], equal_nan=True):
        raise SystemExit("an earlier row changed: not writing")
    print(f"{len(dataset.shapes())} + {len(shapes)} shapes, {len(extended.measurements)} rows; status "
          f"{extended.measurements['status'].value_counts().to_dict()}; {len(extended.provenance.get('sittings', []))} "
          "sittings; earlier rows unchanged")
    if args.write:
        save_dataset(extended, args.dataset)
        print(f"wrote {args.dataset}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
