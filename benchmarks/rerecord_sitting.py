"""One device sitting of issue 5's re-recording: the batches not yet finished on this GPU model, in order, each
resumed from its journal in the repository, until the time given; each journal comes back gzipped to --out-dir.

GPU: PYTHONPATH=lib python benchmarks/rerecord_sitting.py --out-dir $OUT --stop-after-s 480
  then here: cp <files_at>/batch_NN_<gpu>.journal.jsonl.gz results/config_prediction/rerecord/
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import time
from pathlib import Path

from tunebench.collect import journal_of, main as collect, read_records, whole_shapes
from tunebench.kernels import get_kernel

REPO = Path(__file__).resolve().parents[1]
BATCHES = REPO / "results/config_prediction/rerecord"
CONFIGS = REPO / "results/datasets/matmul_prediction_configs.json"
GPU_TAGS = {"H100": "h100", "H200": "h200"}
LEAST_S = 60  # a batch is not begun with less time than this left


def gpu_tag(device_name: str) -> str:
    """The short name a GPU model's journals carry ("NVIDIA H100 80GB HBM3" -> "h100"), with a clear error."""
    tags = [tag for model, tag in GPU_TAGS.items() if model in device_name]
    if len(tags) != 1:
        raise SystemExit(f"GPU {device_name!r} is not one the re-recording knows; allowed: {', '.join(GPU_TAGS)}")
    return tags[0]


def journal_path(batch: Path, tag: str) -> Path:
    """batch_07.txt -> batch_07_<tag>.journal.jsonl.gz beside it."""
    return batch.with_name(f"{batch.stem}_{tag}.journal.jsonl.gz")


def unfinished(batches: list[Path], tag: str, configs: list[dict]) -> list[Path]:
    """The batches whose journal for `tag` is missing or lacks a whole shape (every config, the vendor row, the
    screen's full pass), in order."""
    key = get_kernel("matmul").config_space().key
    left = []
    for batch in batches:
        shapes = {tuple(int(v) for v in item.split("x")) for item in batch.read_text().split()}
        journal = journal_path(batch, tag)
        records = read_records(journal) if journal.exists() else []
        whole = {tuple(r["shape"]) for r in whole_shapes(records, configs, key) if r["kind"] == "vendor"}
        if not shapes <= whole:
            left.append(batch)
    return left


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--stop-after-s", type=float, required=True)
    args = parser.parse_args()
    import torch

    start = time.monotonic()
    out_dir = args.out_dir.resolve()
    os.chdir(REPO)  # the collector's recorded command names the repository's files relative to it
    tag = gpu_tag(torch.cuda.get_device_name())
    configs = json.loads(CONFIGS.read_text())
    todo = unfinished(sorted(BATCHES.glob("batch_*.txt")), tag, configs)
    print(f"{len(todo)} batches left on {tag}: {', '.join(batch.stem for batch in todo)}", flush=True)
    for batch in todo:
        left_s = args.stop_after_s - (time.monotonic() - start)
        if left_s < LEAST_S:
            break
        out = out_dir / f"{batch.stem}_{tag}.parquet"
        committed = journal_path(batch, tag)
        code = collect(["--kernel", "matmul", "--dtype", "bfloat16", "--shapes", f"@{batch.relative_to(REPO)}",
                        "--configs", str(CONFIGS.relative_to(REPO)), "--out", str(out), "--flush", "read",
                        "--screen-runs", "3", "--screen-margin", "0.2", "--stop-after-s", f"{left_s:.0f}",
                        *(["--resume-from", str(committed.relative_to(REPO))] if committed.exists() else [])])
        partial = out_dir / f"{committed.name}.partial"
        with open(journal_of(out).path, "rb") as source, gzip.open(partial, "wb") as target:
            shutil.copyfileobj(source, target)
        os.replace(partial, out_dir / committed.name)
        print(f"{batch.stem}: collector exit {code}; journal {out_dir / committed.name}", flush=True)
        if code != 0:
            return 0 if code == 3 else code
    return 0


if __name__ == "__main__":
    sys.exit(main())
