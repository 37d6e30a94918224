"""Add shapes measured in a later collector journal (or the dataset that sitting wrote) to a saved dataset, as an
extension file beside it (`tunebench.measure.dataset.save_extension`): the dataset's own file is never rewritten.

Run: `.venv/bin/python benchmarks/extend_dataset.py --dataset D --journal J.jsonl.gz --shapes 4x9672x2048,... --name N`
Each listed shape must be complete in the journal: every config the dataset holds per shape, and the vendor row.
Without `--write` it only checks and says what it would add.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tunebench.collect import build_dataset, parse_shapes, read_records
from tunebench.measure.dataset import load_dataset, save_extension


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--journal", type=Path, required=True,
                        help="the later sitting's journal (.jsonl or .gz), or the dataset it wrote (.parquet)")
    parser.add_argument("--shapes", required=True, help="comma-separated MxNxK shapes to add")
    parser.add_argument("--name", required=True, help="the extension's name, e.g. sixth_check")
    parser.add_argument("--write", action="store_true", help="write the extension beside --dataset")
    args = parser.parse_args()
    dataset = load_dataset(args.dataset)
    shapes = set(parse_shapes(args.shapes, len(dataset.shape_names)))
    if shapes & set(dataset.shapes()):
        raise SystemExit(f"already in {args.dataset}: {sorted(shapes & set(dataset.shapes()))}")
    journal = read_records(args.journal)
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
    extension = build_dataset(dataset.kernel, dataset.dtype, [
        r for r in journal if r["kind"] == "provenance"
        or (r["kind"] in ("config", "vendor") and tuple(r["shape"]) in shapes)])
    print(f"{len(dataset.shapes())} + {len(shapes)} shapes; the extension: {len(extension.measurements)} rows, status "
          f"{extension.measurements['status'].value_counts().to_dict()}, "
          f"{len(extension.provenance.get('sittings', [])) or 1} sitting(s)")
    if args.write:
        print(f"wrote {save_extension(extension, args.dataset, args.name)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
