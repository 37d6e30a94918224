"""Matching a dataset's recorded kernel source hashes to the history that had that code (benchmarks/dataset_sources.py):
spans that open and close where the hash changes, a hash that comes back, and one that no commit has; a file whose
sittings recorded a hash, none, or some of each (CPU, instant)."""

import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from dataset_sources import dataset_rows, describe_source, source_spans  # noqa: E402
from tunebench.measure.dataset import Dataset, save_dataset  # noqa: E402
from tunebench.space import PowerOfTwo  # noqa: E402

COMMITS = [("c1" * 20, "2026-11-24T10:00:00+00:00"), ("c2" * 20, "2026-11-25T10:00:00+00:00"),
           ("c3" * 20, "2026-11-26T10:00:00+00:00"), ("c4" * 20, "2026-11-27T10:00:00+00:00"),
           ("c5" * 20, "2026-11-28T10:00:00+00:00")]
HASHES = {COMMITS[0][0]: {"matmul": "aaa", "softmax": None}, COMMITS[1][0]: {"matmul": "aaa", "softmax": "sss"},
          COMMITS[2][0]: {"matmul": "bbb", "softmax": "sss"}, COMMITS[3][0]: {"matmul": "aaa", "softmax": "sss"},
          COMMITS[4][0]: {"matmul": "aaa", "softmax": "ttt"}}


def test_a_span_runs_from_the_commit_that_made_the_code_so_to_the_one_that_changed_it():
    spans = source_spans(COMMITS, HASHES, "matmul")
    c1, c3, c4 = COMMITS[0][0], COMMITS[2][0], COMMITS[3][0]
    assert spans == {"aaa": [(c1, c3), (c4, None)], "bbb": [(c3, c4)]}
    assert source_spans(COMMITS, HASHES, "softmax") == {"sss": [(COMMITS[1][0], COMMITS[4][0])],
                                                         "ttt": [(COMMITS[4][0], None)]}
    dates = dict(COMMITS)
    assert describe_source("aaa", spans, dates) == ("aaa: `c1c1c1c` (2026-11-24) until `c3c3c3c` (2026-11-26); "
                                                    "`c4c4c4c` (2026-11-27) to now")
    assert describe_source("zzz", spans, dates) == "zzz: no committed code hashes so"


def toy_dataset(path: Path, provenance: dict) -> Path:
    rows = pd.DataFrame([{"M": 16, "BLOCK": 16, "status": "ok", "latency_ms": 1.0, "repeats_ms": [1.0],
                          "compile_s": 0.1, "bench_s": 0.1, "error": ""}])
    vendor = pd.DataFrame([{"M": 16, "library": "torch", "latency_ms": 0.5, "repeats_ms": [0.5], "status": "ok",
                            "compile_s": 0.0, "bench_s": 0.1, "error": ""}])
    save_dataset(Dataset(kernel="matmul", dtype="float16", gpu="GPU", shape_names=("M",),
                         parameters=(PowerOfTwo("BLOCK", 16, 64),), measurements=rows, vendor=vendor,
                         provenance=provenance), path)
    return path


def test_a_file_is_the_current_code_s_only_where_every_sitting_recorded_its_hash(tmp_path):
    spans, dates = {"matmul": source_spans(COMMITS, HASHES, "matmul")}, dict(COMMITS)
    paths = [toy_dataset(tmp_path / "none.parquet", {"date": "2026-11-22"}),
             toy_dataset(tmp_path / "mixed.parquet", {"date": "2026-11-22", "sittings": [
                 {"date": "2026-11-22"}, {"date": "2026-12-05", "kernel_source_sha256": "aaa"}]}),
             toy_dataset(tmp_path / "current.parquet", {"kernel_source_sha256": "aaa", "sittings": [
                 {"date": "2026-11-22"}, {"date": "2026-12-05"}]})]
    rows = dataset_rows(paths, spans, dates, {"matmul": "aaa"})
    assert [row[2:] for row in rows] == [
        ["1", "not recorded", "no"],
        ["2", describe_source("aaa", spans["matmul"], dates) + "<br>not recorded by 1 of 2 sittings", "no"],
        ["2", describe_source("aaa", spans["matmul"], dates), "yes"]]
