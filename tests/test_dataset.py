"""The dataset file format: a save/load round trip, atomic writes, and a clear error for each kind of bad file."""

from __future__ import annotations

import gc
import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tunebench.measure import dataset as dataset_module
from tunebench.measure.dataset import Dataset, DatasetError, load_dataset, repeat_spread, save_dataset
from tunebench.measure.result import Status
from tunebench.space import Choice, Flag, Ordinal, PowerOfTwo

SHAPES = [(64, 128), (32, 256)]
CONFIGS = [
    {"BLOCK": 16, "layout": "row", "split": False, "stages": 2},
    {"BLOCK": 32, "layout": "col", "split": True, "stages": 3},
    {"BLOCK": 64, "layout": "row", "split": True, "stages": 4},
]


def make_dataset(**changes) -> Dataset:
    """Test data: two shapes, three configs each, with an ok row, a compile error and a crash."""
    rows = []
    for shape_index, (m, n) in enumerate(SHAPES):
        for config_index, config in enumerate(CONFIGS):
            status = [Status.OK, Status.COMPILE_ERROR, Status.CRASH][(shape_index + config_index) % 3]
            repeats = [1.0 + config_index, 1.5 + config_index, 1.2 + config_index] if status is Status.OK else []
            rows.append({
                "M": m, "N": n, **config, "status": status.value,
                "latency_ms": sorted(repeats)[1] if repeats else math.nan, "repeats_ms": repeats,
                "compile_s": 0.5 + config_index, "bench_s": 0.25 if repeats else 0.0,
                "error": "" if status is Status.OK else f"{status.value} in config {config_index}",
            })
    vendor = pd.DataFrame([{"M": 64, "N": 128, "library": "torch.matmul (cuBLAS)", "latency_ms": 0.9,
                            "repeats_ms": [0.9, 0.8, 1.0], "status": "ok", "compile_s": 0.0, "bench_s": 0.1,
                            "error": ""}])
    arguments = dict(
        kernel="toy", dtype="float16", gpu="NVIDIA Test GPU", shape_names=("M", "N"),
        parameters=(PowerOfTwo("BLOCK", 16, 64), Choice("layout", ("row", "col")), Flag("split"),
                    Ordinal("stages", (2, 3, 4))),
        measurements=pd.DataFrame(rows), vendor=vendor,
        provenance={"gpu_name": "NVIDIA Test GPU", "compile_workers": 2, "command": "written by a test"},
    )
    arguments.update(changes)
    return Dataset(**arguments)


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "toy.parquet"
    save_dataset(make_dataset(), path)
    return path


def rewrite(path, change_table=None, change_metadata=None):
    """Rewrite a saved dataset file with its table or its metadata altered."""
    table = pq.read_table(path)
    metadata = json.loads(table.schema.metadata[b"tunebench"])
    if change_metadata is not None:
        change_metadata(metadata)
    if change_table is not None:
        table = change_table(table)
    pq.write_table(table.replace_schema_metadata({b"tunebench": json.dumps(metadata)}), path)


def test_round_trip_keeps_everything(saved):
    original = make_dataset()
    loaded = load_dataset(saved, kernel="toy")
    assert (loaded.kernel, loaded.dtype, loaded.gpu, loaded.shape_names) == ("toy", "float16", "NVIDIA Test GPU",
                                                                             ("M", "N"))
    assert [p.to_spec() for p in loaded.parameters] == [p.to_spec() for p in original.parameters]
    assert loaded.provenance == original.provenance
    pd.testing.assert_frame_equal(loaded.measurements, original.measurements)
    pd.testing.assert_frame_equal(loaded.vendor, original.vendor)
    assert loaded.shapes() == sorted(SHAPES)
    assert loaded.vendor_ms((64, 128)) == 0.9
    assert loaded.vendor_ms((32, 256)) is None


def test_saved_files_are_zstd_compressed(saved):
    metadata = pq.ParquetFile(saved).metadata
    assert {metadata.row_group(0).column(i).compression for i in range(metadata.num_columns)} == {"ZSTD"}


def test_a_saved_dataset_is_readable_by_all_not_private_as_mkstemp_leaves_it(saved):
    assert saved.stat().st_mode & 0o777 == 0o644


def test_vendor_rows_without_optional_columns_round_trip(tmp_path):
    vendor = pd.DataFrame([{"M": 32, "N": 256, "library": "cuBLAS", "latency_ms": 2.0, "repeats_ms": [2.0]}])
    save_dataset(make_dataset(vendor=vendor), tmp_path / "v.parquet")
    loaded = load_dataset(tmp_path / "v.parquet")
    assert list(loaded.vendor.columns) == ["M", "N", "library", "latency_ms", "repeats_ms"]
    assert loaded.vendor_ms((32, 256)) == 2.0


def test_configs_come_back_as_plain_python_values(saved):
    loaded = load_dataset(saved)
    configs = loaded.configs((64, 128))
    assert configs == CONFIGS
    for config in configs:
        assert [type(config[name]) for name in ("BLOCK", "layout", "split", "stages")] == [int, str, bool, int]


def test_task_optimum_and_space(saved):
    loaded = load_dataset(saved)
    task = loaded.task((32, 256))
    assert len(task) == 3 and set(task["M"]) == {32}
    # shape (32, 256): statuses rotate, so config 2 is its only ok row; its repeats are [3.0, 3.5, 3.2]
    assert list(task["status"]) == ["compile_error", "crash", "ok"]
    assert loaded.optimum_ms((32, 256)) == 3.2
    assert loaded.best_config((32, 256)) == CONFIGS[2]
    assert [type(value) for value in loaded.best_config((32, 256)).values()] == [int, str, bool, int]
    space = loaded.space((32, 256))
    assert space.is_valid(CONFIGS[0])
    assert not space.is_valid({"BLOCK": 16, "layout": "col", "split": False, "stages": 2})  # not recorded
    assert len(space.enumerate()) == 3


def test_best_config_takes_the_first_recorded_of_equals_and_refuses_a_shape_with_no_ok_row():
    measurements = make_dataset().measurements
    tied = measurements.assign(status="ok", latency_ms=1.0, repeats_ms=[[1.0]] * len(measurements), error="")
    assert make_dataset(measurements=tied).best_config((64, 128)) == CONFIGS[0]
    failed = measurements[~((measurements["M"] == 64) & (measurements["status"] == "ok"))]
    with pytest.raises(ValueError, match=r"shape \(64, 128\) of toy has no ok measurement"):
        make_dataset(measurements=failed).best_config((64, 128))


def test_space_of_a_subset_of_configs_excludes_the_rest(tmp_path):
    measurements = make_dataset().measurements
    keep = ~((measurements["M"] == 32) & (measurements["BLOCK"] == 64))
    dataset = make_dataset(measurements=measurements[keep])
    assert not dataset.space((32, 256)).is_valid(CONFIGS[2])
    assert dataset.space((64, 128)).is_valid(CONFIGS[2])
    assert dataset.space().is_valid(CONFIGS[2])


def test_missing_shape_names_the_recorded_shapes(saved):
    with pytest.raises(ValueError, match=r"\(1, 2\).*recorded shapes: \[\(32, 256\), \(64, 128\)\]"):
        load_dataset(saved).task((1, 2))


def test_write_is_atomic_and_leaves_no_temp_files(tmp_path, monkeypatch):
    path = tmp_path / "toy.parquet"
    save_dataset(make_dataset(), path)
    save_dataset(make_dataset(), path)  # overwrite in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy.parquet"]
    before = path.read_bytes()

    def write_half_then_die(table, where, **kwargs):
        with open(where, "wb") as handle:
            handle.write(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(dataset_module.pq, "write_table", write_half_then_die)
    with pytest.raises(OSError, match="disk full"):
        save_dataset(make_dataset(gpu="another GPU"), path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy.parquet"]


def test_parquet_without_metadata_is_not_a_dataset(tmp_path):
    path = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"M": [1], "N": [2]}), path)
    with pytest.raises(DatasetError, match=r"plain\.parquet is not a tunebench dataset.*'tunebench'"):
        load_dataset(path)


def test_not_a_parquet_file(tmp_path):
    path = tmp_path / "text.parquet"
    path.write_text("hello")
    with pytest.raises(DatasetError, match="not a readable parquet file"):
        load_dataset(path)


def test_unsupported_schema_version(saved):
    rewrite(saved, change_metadata=lambda meta: meta.update(schema_version=3))
    with pytest.raises(DatasetError, match="unsupported schema_version 3.*reads schema_version 1 and 2"):
        load_dataset(saved)


def test_missing_column_is_named(saved):
    rewrite(saved, change_table=lambda table: table.drop_columns(["bench_s", "stages"]))
    with pytest.raises(DatasetError, match=r"missing column\(s\) \['stages', 'bench_s'\]"):
        load_dataset(saved)


def test_wrong_kernel(saved):
    with pytest.raises(DatasetError, match="holds kernel 'toy', not the 'matmul' asked for"):
        load_dataset(saved, kernel="matmul")


def test_unknown_status(saved):
    def corrupt_status(table):
        statuses = table["status"].to_pylist()
        statuses[0] = "exploded"
        return table.set_column(table.schema.get_field_index("status"), "status", pa.array(statuses))

    rewrite(saved, change_table=corrupt_status)
    with pytest.raises(DatasetError, match="unknown status 'exploded'; allowed: ok, compile_error"):
        load_dataset(saved)


def test_parameter_value_outside_its_values(saved):
    def corrupt_block(table):
        blocks = table["BLOCK"].to_pylist()
        blocks[1] = 48
        return table.set_column(table.schema.get_field_index("BLOCK"), "BLOCK", pa.array(blocks, pa.int64()))

    rewrite(saved, change_table=corrupt_block)
    expected = r"parameter 'BLOCK' has value 48 \(shape \(64, 128\)\), outside its allowed values \[16, 32, 64\]"
    with pytest.raises(DatasetError, match=expected):
        load_dataset(saved)


def test_constructor_rejects_bad_frames():
    measurements = make_dataset().measurements
    with pytest.raises(DatasetError, match=r"missing column\(s\) \['error'\]"):
        make_dataset(measurements=measurements.drop(columns=["error"]))
    with pytest.raises(DatasetError, match="recorded twice"):
        make_dataset(measurements=pd.concat([measurements, measurements.iloc[:1]]))
    ok_without_latency = measurements.copy()
    ok_without_latency.loc[0, "latency_ms"] = math.nan
    with pytest.raises(DatasetError, match="an ok row needs a finite latency_ms"):
        make_dataset(measurements=ok_without_latency)
    with pytest.raises(DatasetError, match="provenance must be JSON-able"):
        make_dataset(provenance={"when": object()})


def test_repeats_are_kept_as_lists_of_float_whatever_held_them():
    measurements = make_dataset().measurements
    as_arrays = measurements.assign(repeats_ms=[np.asarray(r, dtype=np.float32) for r in measurements["repeats_ms"]])
    repeats = make_dataset(measurements=as_arrays).measurements["repeats_ms"]
    assert all(type(r) is list and all(type(x) is float for x in r) for r in repeats)
    assert repeats.tolist() == [np.float32(r).tolist() for r in measurements["repeats_ms"]]
    bad = measurements.copy()
    bad.at[0, "repeats_ms"] = [1.0, "fast"]
    with pytest.raises(DatasetError, match=r"repeats_ms must hold lists of numbers, got \[1.0, 'fast'\]"):
        make_dataset(measurements=bad)


def test_repeat_spread_matches_the_per_row_formula_for_mixed_repeat_counts():
    rng = np.random.default_rng(0)
    repeats = [list(rng.uniform(1.0, 2.0, size=count)) for count in rng.integers(0, 7, size=200)]
    expected = [(max(row) - min(row)) / np.median(row) if row else math.inf for row in repeats]
    assert repeat_spread(repeats).tolist() == expected
    assert repeat_spread([[], [2.0, 6.0, 4.0]]).tolist() == [math.inf, 1.0]
    assert repeat_spread([]).shape == (0,)


def test_loading_leaves_the_cyclic_collector_as_it_was(saved, tmp_path):
    load_dataset(saved)
    assert gc.isenabled()
    (tmp_path / "text.parquet").write_text("hello")
    with pytest.raises(DatasetError, match="not a readable parquet file"):
        load_dataset(tmp_path / "text.parquet")
    assert gc.isenabled()
    gc.disable()
    try:
        load_dataset(saved)
        assert not gc.isenabled()
    finally:
        gc.enable()


def shifted(dataset: Dataset, by: int, **changes) -> Dataset:
    """The same measurements on other shapes (M + by), e.g. a later sitting's extension."""
    moved = {"measurements": dataset.measurements.assign(M=dataset.measurements["M"] + by),
             "vendor": dataset.vendor.assign(M=dataset.vendor["M"] + by),
             "provenance": {**dataset.provenance, "date": f"later by {by}", "command": f"extension {by}"}}
    return make_dataset(**{**moved, **changes})


def test_extensions_are_appended_in_order_with_their_sittings(saved):
    base = load_dataset(saved)
    first = dataset_module.save_extension(shifted(base, 1000), saved, "first_check")
    second = dataset_module.save_extension(shifted(base, 2000), saved, "second_check")
    assert [first.name, second.name] == ["001_first_check.parquet", "002_second_check.parquet"]
    assert dataset_module.extension_files(saved) == [first, second]
    loaded = load_dataset(saved)
    rows = len(base.measurements) + len(base.vendor)
    pd.testing.assert_frame_equal(loaded.measurements, pd.concat(
        [base.measurements, shifted(base, 1000).measurements, shifted(base, 2000).measurements], ignore_index=True))
    assert loaded.shapes() == sorted([*SHAPES, *((m + by, n) for by in (1000, 2000) for m, n in SHAPES)])
    assert loaded.vendor_ms((1064, 128)) == 0.9
    assert [(s["measured_before"], s.get("extension"), s.get("command")) for s in loaded.provenance["sittings"]] == [
        (0, None, None), (rows, first.name, "extension 1000"), (2 * rows, second.name, "extension 2000")]
    assert {key: value for key, value in loaded.provenance.items() if key != "sittings"} == base.provenance


def test_an_extension_is_refused_before_anything_is_written(saved):
    base = load_dataset(saved)
    with pytest.raises(DatasetError, match=r"shapes \[\(32, 256\), \(64, 128\)\] \(2\) are already in the dataset"):
        dataset_module.save_extension(base, saved, "again")
    with pytest.raises(DatasetError, match="gpu 'NVIDIA Other GPU' differs from the dataset's 'NVIDIA Test GPU'"):
        dataset_module.save_extension(shifted(base, 1000, gpu="NVIDIA Other GPU"), saved, "other_gpu")
    with pytest.raises(DatasetError, match="its parameters differ"):
        dataset_module.save_extension(shifted(base, 1000, parameters=(
            PowerOfTwo("BLOCK", 16, 128), Choice("layout", ("row", "col")), Flag("split"),
            Ordinal("stages", (2, 3, 4)))), saved, "wider")
    with pytest.raises(ValueError, match="extension name 'Bad name'"):
        dataset_module.save_extension(shifted(base, 1000), saved, "Bad name")
    assert dataset_module.extension_files(saved) == []


def test_a_dataset_with_extensions_is_not_written_over(saved):
    base = load_dataset(saved)
    dataset_module.save_extension(shifted(base, 1000), saved, "later")
    with pytest.raises(DatasetError, match="has extensions in .*toy.extensions: writing over it"):
        save_dataset(load_dataset(saved), saved)
    assert len(load_dataset(saved).shapes()) == 4


def test_an_extension_dropped_in_by_hand_is_checked_on_loading(saved):
    base = load_dataset(saved)
    save_dataset(shifted(base, 0), dataset_module.extensions_directory(saved) / "001_copy.parquet")
    with pytest.raises(DatasetError, match=r"extension .*001_copy.parquet: shapes .* already in the dataset"):
        load_dataset(saved)


def with_sittings(dataset: Dataset, sittings: int, measurement_sittings, vendor_sittings) -> Dataset:
    """The dataset as if measured in `sittings` sittings, each row in the one given."""
    provenance = {**dataset.provenance, "date": "d0",
                  **({"sittings": [{"measured_before": 3 * index, "date": f"d{index}"} for index in range(sittings)]}
                     if sittings > 1 else {})}
    return make_dataset(measurements=dataset.measurements.assign(sitting=measurement_sittings),
                        vendor=dataset.vendor.assign(sitting=vendor_sittings), provenance=provenance)


def test_rows_keep_their_sittings_through_a_file_and_a_file_without_them_stays_version_1(saved, tmp_path):
    assert json.loads(pq.read_schema(saved).metadata[b"tunebench"])["schema_version"] == 1
    assert "sitting" not in pq.read_schema(saved).names and "sitting" not in load_dataset(saved).measurements
    dataset = with_sittings(make_dataset(), 2, [0, 0, 0, 1, 1, None], [1])
    path = tmp_path / "sittings.parquet"
    save_dataset(dataset, path)
    assert json.loads(pq.read_schema(path).metadata[b"tunebench"])["schema_version"] == 2
    loaded = load_dataset(path)
    assert loaded.measurements["sitting"].tolist() == [0, 0, 0, 1, 1, pd.NA]
    assert loaded.measurements["sitting"].dtype == "Int64" and loaded.vendor["sitting"].tolist() == [1]
    pd.testing.assert_frame_equal(loaded.measurements, dataset.measurements)


@pytest.mark.parametrize("bad", [2, -1, 0.5, "first"])
def test_a_sitting_the_provenance_does_not_list_is_refused(bad):
    with pytest.raises(DatasetError, match=rf"measurements: sitting {bad!r} is not one of the provenance's 2 "
                                           r"sitting\(s\): expected an integer from 0 to 1, or null"):
        with_sittings(make_dataset(), 2, [0, 0, 0, 1, 1, bad], [1])
    with pytest.raises(DatasetError, match=r"vendor: sitting 1 is not one of the provenance's 1 sitting\(s\)"):
        with_sittings(make_dataset(), 1, [0] * 6, [1])


def test_a_version_2_file_needs_its_sitting_column(tmp_path):
    path = tmp_path / "sittings.parquet"
    save_dataset(with_sittings(make_dataset(), 1, [0] * 6, [0]), path)
    rewrite(path, change_table=lambda table: table.drop_columns(["sitting"]))
    with pytest.raises(DatasetError, match=r"missing column\(s\) \['sitting'\]"):
        load_dataset(path)


def test_an_extensions_sittings_follow_the_datasets_and_rows_without_one_stay_unknown(saved):
    base = load_dataset(saved)  # no sitting column: its rows' sittings are unknown
    dataset_module.save_extension(with_sittings(shifted(base, 1000), 2, [0, 0, 0, 1, 1, 1], [0]), saved, "two")
    dataset_module.save_extension(with_sittings(shifted(base, 2000), 1, [0] * 6, [0]), saved, "one")
    loaded = load_dataset(saved)
    assert len(loaded.provenance["sittings"]) == 4
    assert loaded.measurements["sitting"].tolist() == [pd.NA] * 6 + [1, 1, 1, 2, 2, 2] + [3] * 6
    assert loaded.vendor["sitting"].tolist() == [pd.NA, 1, 3]
