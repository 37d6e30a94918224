"""One device sitting of issue 5's re-recording: the batches not yet finished on this GPU model, in order, each
resumed from its journal in the repository, until the time given; each journal comes back gzipped to --out-dir.

GPU: PYTHONPATH=lib python benchmarks/rerecord_sitting.py --out-dir $OUT --stop-after-s 480 [--gpus 0,1,...]
  then here: cp <files_at>/batch_NN_<gpu>.journal.jsonl.gz results/config_prediction/rerecord/
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tunebench.collect import journal_of, main as collect, read_records, whole_shapes
from tunebench.collect_gpus import parse_gpus
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


def deal(batches: list[Path], parts: int) -> list[list[Path]]:
    """Batch i to part i % parts: each GPU's collector goes through its own batches in order."""
    return [batches[part::parts] for part in range(parts)]


def on_gpus(gpus: list[int], todo: list[Path], out_dir: Path, stop_after_s: float) -> int:
    """One child sitting per GPU, each on its dealt batches with its share of the CPU cores for compiling; their logs
    go to `out_dir`/gpuN.log, whose last lines are printed every minute. The worst exit code."""
    workers = max(1, (os.cpu_count() or 2) // len(gpus) - 1)
    children = {}
    for gpu, part in zip(gpus, deal(todo, len(gpus))):
        if part:
            log = open(out_dir / f"gpu{gpu}.log", "w")
            children[gpu] = (subprocess.Popen(
                [sys.executable, __file__, "--out-dir", str(out_dir), "--stop-after-s", f"{stop_after_s:.0f}",
                 "--batch-dir", str(part[0].parent), "--batches", ",".join(batch.stem for batch in part),
                 "--compile-workers", str(workers)],
                env={**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}, stdout=log, stderr=subprocess.STDOUT), log)
    shown = time.monotonic()
    while any(child.poll() is None for child, _ in children.values()):
        time.sleep(5)
        if time.monotonic() - shown >= 60:
            shown = time.monotonic()
            for gpu in children:
                lines = (out_dir / f"gpu{gpu}.log").read_text(errors="replace").replace("\r", "\n").splitlines()
                print(f"GPU {gpu}: {lines[-1] if lines else '(starting)'}", flush=True)
    for _, log in children.values():
        log.close()
    return max((child.returncode for child, _ in children.values()), default=0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--stop-after-s", type=float, required=True)
    parser.add_argument("--gpus", default=None, help="device indices, e.g. 0,1,2,3: one sitting per GPU, each on "
                        "its own batches (default: the one GPU CUDA_VISIBLE_DEVICES shows first)")
    parser.add_argument("--batch-dir", type=Path, default=BATCHES,
                        help="the batch_NN.txt files and their journals (default: the re-recording's)")
    parser.add_argument("--batches", default=None, help="only these batches, e.g. batch_02,batch_05")
    parser.add_argument("--compile-workers", type=int, default=None, help="default: CPU cores - 1")
    args = parser.parse_args()
    import torch

    start = time.monotonic()
    out_dir = args.out_dir.resolve()
    batch_dir = args.batch_dir.resolve()
    if not batch_dir.is_relative_to(REPO):
        parser.error(f"--batch-dir {batch_dir} is outside the repository {REPO}: the collector's recorded command "
                     "names its batch file relative to the repository")
    os.chdir(REPO)  # the collector's recorded command names the repository's files relative to it
    try:
        gpus = parse_gpus(args.gpus) if args.gpus else None
    except ValueError as error:
        parser.error(str(error))
    tag = gpu_tag(torch.cuda.get_device_name(gpus[0] if gpus else None))
    configs = json.loads(CONFIGS.read_text())
    batches = sorted(batch_dir.glob("batch_*.txt"))
    if args.batches:
        names = args.batches.split(",")
        unknown = sorted(set(names) - {batch.stem for batch in batches})
        if unknown:
            parser.error(f"--batches {unknown} are not in {batch_dir}; it holds {[batch.stem for batch in batches]}")
        batches = [batch for batch in batches if batch.stem in names]
    todo = unfinished(batches, tag, configs)
    print(f"{len(todo)} batches left on {tag}: {', '.join(batch.stem for batch in todo)}", flush=True)
    if gpus:
        return on_gpus(gpus, todo, out_dir, args.stop_after_s - (time.monotonic() - start))
    for batch in todo:
        left_s = args.stop_after_s - (time.monotonic() - start)
        if left_s < LEAST_S:
            break
        out = out_dir / f"{batch.stem}_{tag}.parquet"
        committed = journal_path(batch, tag)
        code = collect(["--kernel", "matmul", "--dtype", "bfloat16", "--shapes", f"@{batch.relative_to(REPO)}",
                        "--configs", str(CONFIGS.relative_to(REPO)), "--out", str(out), "--flush", "read",
                        "--screen-runs", "3", "--screen-margin", "0.2", "--stop-after-s", f"{left_s:.0f}",
                        *(["--compile-workers", str(args.compile_workers)] if args.compile_workers else []),
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
