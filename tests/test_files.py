"""Atomic result writes: a reader sees the old file or the new one, never part of one.

A write that fails leaves the old file as it was."""

from __future__ import annotations

import pandas as pd
import pytest

from tunebench.files import write_parquet_atomically, write_text_atomically


def test_text_is_written_whole_into_a_new_folder_and_replaces_the_old(tmp_path):
    path = tmp_path / "new" / "summary.md"
    assert write_text_atomically(path, "old\n") == path
    write_text_atomically(path, "new\n")
    assert path.read_text() == "new\n"
    assert [p.name for p in path.parent.iterdir()] == ["summary.md"]


def test_parquet_round_trips_without_the_index_and_passes_options(tmp_path):
    frame = pd.DataFrame({"latency_ms": [0.5, 0.25], "config": ["a", "b"]}, index=[7, 9])
    path = write_parquet_atomically(frame, tmp_path / "trace.parquet", compression="zstd")
    back = pd.read_parquet(path)
    pd.testing.assert_frame_equal(back, frame.reset_index(drop=True))
    assert [p.name for p in tmp_path.iterdir()] == ["trace.parquet"]


def test_a_write_killed_halfway_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = write_parquet_atomically(pd.DataFrame({"a": [1]}), tmp_path / "trace.parquet")

    def half_then_fail(self, target, **options):
        with open(target, "wb") as file:
            file.write(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        write_parquet_atomically(pd.DataFrame({"a": [2]}), path)
    monkeypatch.undo()
    pd.testing.assert_frame_equal(pd.read_parquet(path), pd.DataFrame({"a": [1]}))
    assert [p.name for p in tmp_path.iterdir()] == ["trace.parquet"]
