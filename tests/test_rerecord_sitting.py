"""benchmarks/rerecord_sitting.py's plan: a batch is left while its journal lacks a whole shape (or is missing), a
finished one is skipped, journals are per GPU model, and a GPU the re-recording does not know is refused by name."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

from test_collect import SHAPES, StandInBench
from tunebench.collect import journal_of, read_records, sweep

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import rerecord_sitting  # noqa: E402


def write_journal(path: Path, records: list[dict]) -> None:
    with gzip.open(path, "wt") as handle:
        handle.writelines(json.dumps(record) + "\n" for record in records)


def test_only_batches_without_every_shape_whole_on_this_gpu_are_left(tmp_path):
    out = tmp_path / "sweep.parquet"
    assert sweep("matmul", "bfloat16", SHAPES, out, limit_configs=6, make_bench=StandInBench)
    records = read_records(journal_of(out).path)
    configs = list({str(r["config"]): r["config"] for r in records if r["kind"] == "config"}.values())
    done, half, fresh = (tmp_path / f"batch_0{n}.txt" for n in (1, 2, 3))
    for batch in (done, half, fresh):
        batch.write_text("\n".join("x".join(map(str, shape)) for shape in SHAPES) + "\n")
    write_journal(rerecord_sitting.journal_path(done, "h100"), records)
    one_short = [r for r in records if not (r["kind"] == "config" and r["config"] == configs[0]
                                            and tuple(r["shape"]) == SHAPES[1])]
    write_journal(rerecord_sitting.journal_path(half, "h100"), one_short)
    assert rerecord_sitting.unfinished([done, half, fresh], "h100", configs) == [half, fresh]
    assert rerecord_sitting.unfinished([done, half, fresh], "h200", configs) == [done, half, fresh]


def test_the_gpu_models_tag_and_an_unknown_gpu():
    assert rerecord_sitting.gpu_tag("NVIDIA H100 80GB HBM3") == "h100"
    assert rerecord_sitting.gpu_tag("NVIDIA H200") == "h200"
    with pytest.raises(SystemExit, match="'NVIDIA A100-SXM4-80GB' is not one the re-recording knows; allowed: H100"):
        rerecord_sitting.gpu_tag("NVIDIA A100-SXM4-80GB")
    assert rerecord_sitting.journal_path(Path("d/batch_07.txt"), "h100") == Path("d/batch_07_h100.journal.jsonl.gz")
