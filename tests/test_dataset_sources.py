"""Matching a dataset's recorded kernel source hashes to the history that had that code (benchmarks/dataset_sources.py):
spans that open and close where the hash changes, a hash that comes back, and one that no commit has (CPU, instant)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from dataset_sources import describe_source, source_spans  # noqa: E402

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
