"""Importing Kernel Tuner caches: the two real convolution caches, and clear errors for broken files."""

from __future__ import annotations

import collections
import gzip
import json
import math
import statistics
from pathlib import Path

import pandas as pd
import pytest

from tunebench.measure.dataset import load_dataset, save_dataset
from tunebench.measure.kerneltuner import load_kerneltuner_cache
from tunebench.space import Choice, Ordinal

CACHES = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "kerneltuner"
A100 = CACHES / "convolution_A100.json.gz"
A4000 = CACHES / "convolution_A4000.json.gz"
SHAPE = (4096, 4096)

needs_caches = pytest.mark.skipif(
    not (A100.exists() and A4000.exists()),
    reason=f"the real Kernel Tuner caches are not at {CACHES} (../shared beside the repo)")


def raw(path: Path) -> dict:
    with gzip.open(path, "rt") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def a100():
    return load_kerneltuner_cache(A100)


@pytest.fixture(scope="module")
def a4000():
    return load_kerneltuner_cache(A4000)


@needs_caches
@pytest.mark.parametrize("which", ["a100", "a4000"])
def test_counts_match_the_raw_cache(which, request):
    dataset = request.getfixturevalue(which)
    cache = raw(A100 if which == "a100" else A4000)
    entries = cache["cache"].values()
    expected = collections.Counter(
        "ok" if isinstance(entry["time"], float) else entry["time"] for entry in entries)
    got = collections.Counter(dataset.measurements["status"])
    assert got["ok"] == expected["ok"] > 4000
    assert got["compile_error"] == expected["CompilationFailedConfig"] > 0
    assert got["crash"] == expected["RuntimeFailedConfig"] > 0
    assert got["out_of_resources"] == expected["InvalidConfig"]
    assert len(dataset.measurements) == len(cache["cache"])
    assert dataset.shapes() == [SHAPE]
    assert dataset.shape_names == ("problem_size_0", "problem_size_1")
    assert dataset.gpu == cache["device_name"]
    assert dataset.kernel == "kerneltuner/convolution_kernel" and dataset.dtype == "float32"
    assert dataset.provenance["source_file"] == (A100 if which == "a100" else A4000).name
    assert "10.5281/zenodo.15364124" in dataset.provenance["citation"]
    assert dataset.provenance["timing"]["method"] == "Kernel Tuner brute force (cache file)"


@needs_caches
def test_parameters_are_ordinals_in_cache_order(a100):
    cache = raw(A100)
    assert [p.name for p in a100.parameters] == cache["tune_params_keys"]
    assert all(isinstance(p, Ordinal) for p in a100.parameters)
    by_name = {p.name: p for p in a100.parameters}
    assert list(by_name["block_size_y"].values) == [1, 2, 4, 8, 16]
    assert list(by_name["use_cmem"].values) == [1]  # a single-valued list


@needs_caches
def test_latency_is_the_median_of_times_not_the_mean(a4000):
    config = dict(block_size_x=16, block_size_y=1, tile_size_x=1, tile_size_y=1, read_only=0, use_padding=0,
                  use_shmem=0, use_cmem=1, filter_height=15, filter_width=15)
    task = a4000.task(SHAPE)
    row = task[(task[list(config)] == list(config.values())).all(axis=1)]
    assert len(row) == 1
    # 32 repeats: the mean of the 16th and 17th smallest, (5.97811222076416 + 6.013823986053467) / 2;
    # Kernel Tuner's `time` (the mean) is 5.900492995977402.
    assert row["latency_ms"].iloc[0] == pytest.approx(5.9959681034088135, rel=1e-12)
    assert len(row["repeats_ms"].iloc[0]) == 32
    entry = raw(A4000)["cache"]["16,1,1,1,0,0,0,1,15,15"]
    assert row["compile_s"].iloc[0] == pytest.approx(entry["compile_time"] / 1000)
    assert row["bench_s"].iloc[0] == pytest.approx(
        (entry["benchmark_time"] + entry["verification_time"] + entry["framework_time"]) / 1000)


@needs_caches
def test_optimum_and_space(a100):
    cache = raw(A100)["cache"]
    medians = {key: statistics.median(entry["times"]) for key, entry in cache.items()
               if not isinstance(entry["time"], str)}
    assert a100.optimum_ms(SHAPE) == pytest.approx(min(medians.values()), rel=1e-12)
    assert min(medians, key=medians.get) == "32,4,1,3,1,0,1,1,15,15"
    space = a100.space(SHAPE)
    names = space.names
    assert space.is_valid(dict(zip(names, (32, 4, 1, 3, 1, 0, 1, 1, 15, 15))))
    # In the value product but absent from the cache: it violates the kernel's restrictions.
    assert "112,1,1,1,0,1,0,1,15,15" not in cache
    assert not space.is_valid(dict(zip(names, (112, 1, 1, 1, 0, 1, 0, 1, 15, 15))))


@needs_caches
def test_imported_cache_saves_and_loads(a100, tmp_path):
    save_dataset(a100, tmp_path / "a100.parquet")
    loaded = load_dataset(tmp_path / "a100.parquet", kernel="kerneltuner/convolution_kernel")
    pd.testing.assert_frame_equal(loaded.measurements, a100.measurements)
    assert loaded.provenance == a100.provenance and len(loaded.vendor) == 0


def small_cache(**changes) -> dict:
    """A tiny cache in Kernel Tuner's format: test data for the error paths and the failure classes."""
    def entry(block, mode, time, times=None):
        return {"block": block, "mode": mode, "time": time, **({"times": times} if times is not None else {}),
                "compile_time": 200.0, "verification_time": 1.0, "benchmark_time": 30.0, "framework_time": 4.0,
                "timestamp": "2024-01-01 00:00:00+00:00"}

    cache = {
        "device_name": "Test GPU", "kernel_name": "toy_kernel", "problem_size": [256], "objective": "time",
        "tune_params_keys": ["block", "mode"], "tune_params": {"block": [64, 32], "mode": ["fast", "safe"]},
        "cache": {
            "32,fast": entry(32, "fast", 2.0, [1.0, 2.0, 4.0, 3.0]),
            "64,fast": entry(64, "fast", "InvalidConfig"),
            "32,safe": entry(32, "safe", "CompilationFailedConfig"),
            "64,safe": entry(64, "safe", "RuntimeFailedConfig"),
        },
    }
    cache.update(changes)
    return cache


def write(path: Path, cache: dict) -> Path:
    path.write_text(json.dumps(cache))
    return path


def test_small_cache_maps_every_failure_class(tmp_path):
    dataset = load_kerneltuner_cache(write(tmp_path / "toy.json", small_cache()), dtype="float16")
    assert dataset.dtype == "float16" and dataset.shapes() == [(256,)]
    by_name = {p.name: p for p in dataset.parameters}
    assert isinstance(by_name["mode"], Choice) and isinstance(by_name["block"], Ordinal)
    assert list(by_name["block"].values) == [32, 64]  # sorted, so that neighbours are adjacent sizes
    statuses = dict(zip(dataset.measurements["block"].astype(str) + "," + dataset.measurements["mode"],
                        dataset.measurements["status"]))
    assert statuses == {"32,fast": "ok", "64,fast": "out_of_resources", "32,safe": "compile_error",
                        "64,safe": "crash"}
    ok = dataset.measurements[dataset.measurements["status"] == "ok"].iloc[0]
    assert ok["latency_ms"] == 2.5 and ok["compile_s"] == 0.2 and ok["bench_s"] == pytest.approx(0.035)
    failed = dataset.measurements[dataset.measurements["status"] == "crash"].iloc[0]
    assert math.isnan(failed["latency_ms"]) and failed["error"] == "RuntimeFailedConfig"


def test_gzipped_cache_reads_like_plain_json(tmp_path):
    path = tmp_path / "toy.json.gz"
    path.write_bytes(gzip.compress(json.dumps(small_cache()).encode()))
    assert len(load_kerneltuner_cache(path).measurements) == 4


@needs_caches
def test_truncated_gzip_is_a_clear_error(tmp_path):
    data = A100.read_bytes()
    broken = tmp_path / "truncated.json.gz"
    broken.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"truncated\.json\.gz: the gzip stream is corrupt or truncated"):
        load_kerneltuner_cache(broken)


def test_truncated_json_is_a_clear_error(tmp_path):
    text = json.dumps(small_cache())
    broken = tmp_path / "cut.json"
    broken.write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match=r"cut\.json: not valid JSON .* line 1 column"):
        load_kerneltuner_cache(broken)


def test_missing_key_is_named(tmp_path):
    cache = small_cache()
    del cache["tune_params"]
    with pytest.raises(ValueError, match=r"missing key\(s\) \['tune_params'\]"):
        load_kerneltuner_cache(write(tmp_path / "no_params.json", cache))


def test_entry_missing_a_timing_is_named(tmp_path):
    cache = small_cache()
    del cache["cache"]["32,safe"]["framework_time"]
    with pytest.raises(ValueError, match=r"cache entry '32,safe' lacks \['framework_time'\]"):
        load_kerneltuner_cache(write(tmp_path / "no_framework_time.json", cache))


def test_entry_value_outside_tune_params_is_named(tmp_path):
    cache = small_cache()
    cache["cache"]["32,fast"]["block"] = 48
    with pytest.raises(ValueError, match=r"'32,fast' has block=48, which is not among tune_params\['block'\]"):
        load_kerneltuner_cache(write(tmp_path / "bad_value.json", cache))


def test_entry_disagreeing_with_its_key_is_named(tmp_path):
    cache = small_cache()
    cache["cache"]["32,fast"]["block"] = 64
    with pytest.raises(ValueError, match="'32,fast' holds the parameters 64,fast, not those of its key"):
        load_kerneltuner_cache(write(tmp_path / "bad_key.json", cache))


def test_unknown_failure_string_is_named(tmp_path):
    cache = small_cache()
    cache["cache"]["64,safe"]["time"] = "GremlinsConfig"
    with pytest.raises(ValueError, match="unknown failure 'GremlinsConfig'.*known: CompilationFailedConfig"):
        load_kerneltuner_cache(write(tmp_path / "gremlins.json", cache))
