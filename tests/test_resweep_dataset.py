"""benchmarks/resweep_dataset.py: a shape swept again replaces its rows in a recorded dataset, in a sitting of its own."""

import sys
from pathlib import Path

import pytest

from tunebench.collect import read_records, sweep
from tunebench.measure.dataset import load_dataset

import stand_in_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import resweep_dataset  # noqa: E402

SHAPES = [(3, 32, 48), (5, 64, 32)]


class FirstSitting(stand_in_bench.StandInBench):
    def latency_ms(self, config, shape):
        return config["BLOCK_M"] * 0.001 + shape[0] * 0.1


class SecondSitting(FirstSitting):
    def latency_ms(self, config, shape):
        return super().latency_ms(config, shape) + 1.0


def test_the_reswept_shape_replaces_its_rows_and_names_its_sitting(tmp_path, capsys):
    base, again, out = tmp_path / "base.parquet", tmp_path / "again.parquet", tmp_path / "out" / "swapped.parquet"
    assert sweep("matmul", "bfloat16", SHAPES, base, limit_configs=5, make_bench=FirstSitting)
    assert sweep("matmul", "bfloat16", SHAPES[:1], again, limit_configs=5, make_bench=SecondSitting)
    assert resweep_dataset.main(["--dataset", str(base), "--resweep", str(again), "--out", str(out)]) == 0
    assert "10 rows; 1 of its 2 shapes swept again (2 sittings in all)" in capsys.readouterr().out
    swapped = load_dataset(out)
    rows = swapped.measurements.set_index(["M", "N", "K"])
    first, second = rows.loc[SHAPES[0]], rows.loc[SHAPES[1]]
    assert (first["sitting"] == 1).all() and (second["sitting"] == 0).all()
    assert sorted(first["latency_ms"]) == sorted(load_dataset(again).measurements["latency_ms"])
    assert sorted(second["latency_ms"]) == sorted(load_dataset(base).measurements.set_index(["M", "N", "K"])
                                                  .loc[SHAPES[1], "latency_ms"])
    assert len(swapped.provenance["sittings"]) == 2 and sorted(swapped.vendor["sitting"]) == [0, 1]


def test_only_reswept_keeps_the_reswept_shapes_and_the_configs_the_resweep_left_out(tmp_path, capsys):
    base, again, out = tmp_path / "base.parquet", tmp_path / "again.parquet", tmp_path / "only.parquet"
    assert sweep("matmul", "bfloat16", SHAPES, base, limit_configs=5, make_bench=FirstSitting)
    two = load_dataset(base).configs(SHAPES[0])[:2]
    assert sweep("matmul", "bfloat16", SHAPES[:1], again, configs=two, make_bench=SecondSitting)
    assert resweep_dataset.main(["--dataset", str(base), "--resweep", str(again), "--out", str(out),
                                 "--only-reswept"]) == 0
    assert "5 rows; 1 of its 1 shapes swept again (2 sittings in all)" in capsys.readouterr().out
    rows = load_dataset(out).measurements
    assert sorted(set(zip(rows["M"], rows["N"], rows["K"]))) == SHAPES[:1]
    assert sorted(rows["sitting"]) == [0, 0, 0, 1, 1]  # two configs swept again, three kept from the base
    again_ms = sorted(load_dataset(again).measurements["latency_ms"])
    assert sorted(rows.loc[rows["sitting"] == 1, "latency_ms"]) == again_ms


def test_with_shapes_keeps_those_shapes_rows_and_refuses_others(tmp_path):
    path = tmp_path / "base.parquet"
    assert sweep("matmul", "bfloat16", SHAPES, path, limit_configs=3, make_bench=FirstSitting)
    dataset = load_dataset(path)
    kept = dataset.with_shapes([SHAPES[1]])
    assert kept.shapes() == [SHAPES[1]] and len(kept.measurements) == 3 and len(kept.vendor) == 1
    assert kept.provenance == dataset.provenance
    with pytest.raises(ValueError, match=r"shapes \[\(7, 8, 9\)\] are not recorded in matmul bfloat16"):
        dataset.with_shapes([(7, 8, 9)])


def test_a_resweep_of_other_shapes_kernels_or_gpus_is_refused(tmp_path):
    base, other = tmp_path / "base.parquet", tmp_path / "other.parquet"
    assert sweep("matmul", "bfloat16", SHAPES[:1], base, limit_configs=3, make_bench=FirstSitting)
    assert sweep("matmul", "bfloat16", SHAPES[1:], other, limit_configs=3, make_bench=FirstSitting)
    dataset, records = load_dataset(base), read_records(base)
    with pytest.raises(ValueError, match=r"it measured \[\(5, 64, 32\)\], of which the dataset lacks \[\(5, 64, 32\)\]"):
        resweep_dataset.reswept(dataset, read_records(other))
    elsewhere = [dict(r, provenance=dict(r["provenance"], gpu_name="H100")) if r["kind"] == "provenance" else r
                 for r in records]
    with pytest.raises(ValueError, match=r"measured on \['H100'\], the dataset on 'stand-in'"):
        resweep_dataset.reswept(dataset, elsewhere)
    flagged = [dict(r, config=dict(r["config"], WIDEN=True)) if r["kind"] == "config" else r for r in records]
    with pytest.raises(ValueError, match=r"parameters \['WIDEN'\] that matmul's space lacks"):
        resweep_dataset.reswept(dataset, flagged)
    with pytest.raises(SystemExit):
        resweep_dataset.main(["--dataset", str(base), "--resweep", str(other), "--out", str(tmp_path / "x.parquet")])
    assert not (tmp_path / "x.parquet").exists()
