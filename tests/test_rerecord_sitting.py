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


def test_the_batches_are_dealt_to_the_gpus_in_turn():
    batches = [Path(f"batch_{n:02d}.txt") for n in range(1, 8)]
    assert [[b.stem for b in part] for part in rerecord_sitting.deal(batches, 3)] == [
        ["batch_01", "batch_04", "batch_07"], ["batch_02", "batch_05"], ["batch_03", "batch_06"]]
    assert rerecord_sitting.deal(batches[:1], 2) == [batches[:1], []]


def test_a_sitting_resumes_each_unfinished_batch_and_leaves_its_journal_gzipped(tmp_path, monkeypatch):
    """The sequential path with the collector stood in for: the arguments it gets, the gzipped journals it leaves."""
    batches = tmp_path / "rerecord"
    batches.mkdir()
    for n in (1, 2):
        (batches / f"batch_0{n}.txt").write_text("3x32x48\n")
    write_journal(rerecord_sitting.journal_path(batches / "batch_01.txt", "h100"), [])  # begun, nothing whole
    (tmp_path / "configs.json").write_text("[]")
    calls = []

    def stand_in_collect(argv):
        calls.append(argv)
        out = Path(argv[argv.index("--out") + 1])
        journal_of(out).path.parent.mkdir(parents=True, exist_ok=True)
        journal_of(out).path.write_text(json.dumps({"kind": "vendor", "shape": [3, 32, 48]}) + "\n")
        return 0

    monkeypatch.setattr(rerecord_sitting, "REPO", tmp_path)
    monkeypatch.setattr(rerecord_sitting, "BATCHES", batches)
    monkeypatch.setattr(rerecord_sitting, "CONFIGS", tmp_path / "configs.json")
    monkeypatch.setattr(rerecord_sitting, "collect", stand_in_collect)
    monkeypatch.setattr("torch.cuda.get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    monkeypatch.setattr(sys, "argv", ["rerecord_sitting.py", "--out-dir", str(out_dir), "--stop-after-s", "600"])
    assert rerecord_sitting.main() == 0
    assert [argv[argv.index("--shapes") + 1] for argv in calls] == ["@rerecord/batch_01.txt", "@rerecord/batch_02.txt"]
    assert "--resume-from" in calls[0] and "--resume-from" not in calls[1]
    assert calls[0][calls[0].index("--flush") + 1] == "read" and "--screen-runs" in calls[0]
    for n in (1, 2):
        assert read_records(out_dir / f"batch_0{n}_h100.journal.jsonl.gz") == [{"kind": "vendor", "shape": [3, 32, 48]}]


def test_a_batch_directory_outside_the_repository_is_refused_by_name(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["rerecord_sitting.py", "--out-dir", str(tmp_path), "--stop-after-s", "60",
                                      "--batch-dir", str(tmp_path)])
    with pytest.raises(SystemExit):
        rerecord_sitting.main()
    assert f"--batch-dir {tmp_path.resolve()} is outside the repository" in capsys.readouterr().err
