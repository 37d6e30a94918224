"""Import a Kernel Tuner brute-force cache file (`.json` or `.json.gz`) as a tunebench `Dataset`.

Published brute-force sweeps (e.g. the FAIR Benchmark Hub's) then replay like tunebench's own recordings.
"""

from __future__ import annotations

import gzip
import json
import math
import numbers
import os
import statistics
import zlib
from pathlib import Path
from typing import Any

import pandas as pd

from tunebench.measure.dataset import Dataset, DatasetError
from tunebench.measure.result import Status
from tunebench.space import Choice, Flag, Ordinal

CITATION = ("FAIR Benchmark Hub for Auto-Tuning (AutoTuningAssociation/benchmark_hub), MIT licence, "
            "DOI 10.5281/zenodo.15364124")
TIMING_METHOD = "Kernel Tuner brute force (cache file)"
FAILURE_STATUS = {
    "CompilationFailedConfig": Status.COMPILE_ERROR,
    "RuntimeFailedConfig": Status.CRASH,
    "InvalidConfig": Status.OUT_OF_RESOURCES,
}
REQUIRED_KEYS = ("device_name", "kernel_name", "problem_size", "tune_params_keys", "tune_params", "cache")
TIMING_KEYS = ("compile_time", "verification_time", "benchmark_time", "framework_time")


def load_kerneltuner_cache(path: str | os.PathLike[str], *, dtype: str = "float32") -> Dataset:
    """The dataset of one Kernel Tuner cache: one kernel on one GPU at one problem size, so a single shape,
    named ("problem_size_0", "problem_size_1", ...). `dtype` names the kernel's data type (the cache does not).

    - Parameters: a numeric value list becomes an `Ordinal` (sorted; a single value is fine), [False, True] a
      `Flag`, any other a `Choice`. tunebench spaces hold ints, strs and bools: a float parameter is an error.
    - A config absent from the cache violated the kernel's restrictions; the dataset's space, restricted to
      the recorded configs, excludes it.
    - Status: a number in `time` is ok. `CompilationFailedConfig` is a compile_error and `RuntimeFailedConfig`
      a crash. `InvalidConfig` is what Kernel Tuner records when it refuses to launch a config, e.g. a thread
      block larger than the device allows: the config asks for more than the GPU has, our out_of_resources.
      Any other string is an error.
    - Latency: the MEDIAN of `times`. Kernel Tuner's `time` is their mean; one slow outlier (a clock change, a
      context switch) moves the mean but not the median, and the median is what tunebench records everywhere.
    - Costs: compile_s is `compile_time`; bench_s is `benchmark_time + verification_time + framework_time`,
      the rest of what one evaluation cost in wall time (running the repeats, checking the output, Kernel
      Tuner's own per-config work). Kernel Tuner reports milliseconds; the dataset holds seconds. Brute force
      compiles one config at a time, so the provenance says compile_workers = 1.
    """
    path = Path(path)
    cache_file = _read_json(path)
    missing = [key for key in REQUIRED_KEYS if key not in cache_file]
    if missing:
        raise ValueError(f"{path}: not a Kernel Tuner cache: missing key(s) {missing}; "
                         f"a cache has {list(REQUIRED_KEYS)}")
    parameters, allowed = _parameters(path, cache_file["tune_params_keys"], cache_file["tune_params"])
    shape = _shape(path, cache_file["problem_size"])
    shape_names = tuple(f"problem_size_{index}" for index in range(len(shape)))
    names = [parameter.name for parameter in parameters]
    parameter_of = dict(zip(names, parameters))

    rows = []
    timestamps = []
    if not isinstance(cache_file["cache"], dict):
        raise ValueError(f"{path}: 'cache' must be a JSON object mapping config strings to entries")
    for key, entry in cache_file["cache"].items():
        if not isinstance(entry, dict):
            raise ValueError(f"{path}: cache entry {key!r} is not a JSON object")
        row: dict[str, Any] = dict(zip(shape_names, shape))
        for name in names:
            if name not in entry:
                raise ValueError(f"{path}: cache entry {key!r} lacks parameter {name!r}")
            if not parameter_of[name].contains(entry[name]):
                raise ValueError(f"{path}: cache entry {key!r} has {name}={entry[name]!r}, which is not among "
                                 f"tune_params[{name!r}] = {allowed[name]}")
            row[name] = entry[name]
        if ",".join(str(entry[name]) for name in names) != key:
            raise ValueError(f"{path}: cache entry {key!r} holds the parameters "
                             f"{','.join(str(entry[name]) for name in names)}, not those of its key")
        row.update(_outcome(path, key, entry))
        rows.append(row)
        if isinstance(entry.get("timestamp"), str):
            timestamps.append(entry["timestamp"])

    columns = [*shape_names, *names, "status", "latency_ms", "repeats_ms", "compile_s", "bench_s", "error"]
    provenance = {
        "gpu_name": cache_file["device_name"],
        "source_file": path.name,
        "timing": {"method": TIMING_METHOD, "objective": cache_file.get("objective"), "latency": "median of times"},
        "citation": CITATION,
        "compile_workers": 1,
        "kernel_tuner_kernel_name": cache_file["kernel_name"],
        "cache_entries": len(rows),
    }
    if timestamps:
        provenance["date"] = f"{min(timestamps)} to {max(timestamps)}"
    try:
        return Dataset(kernel=f"kerneltuner/{cache_file['kernel_name']}", dtype=dtype,
                       gpu=cache_file["device_name"], shape_names=shape_names, parameters=parameters,
                       measurements=pd.DataFrame(rows, columns=columns), vendor=pd.DataFrame(),
                       provenance=provenance)
    except DatasetError as error:
        raise DatasetError(f"{path}: {error}") from None


def _read_json(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as error:
            raise ValueError(f"{path}: the gzip stream is corrupt or truncated ({type(error).__name__}: {error})") \
                from None
    try:
        data = json.loads(raw)
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not a Kernel Tuner cache: neither gzip nor UTF-8 JSON ({error})") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error.msg} at line {error.lineno} column {error.colno}); "
                         "the file may be truncated or corrupt") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a Kernel Tuner cache: the JSON is a {type(data).__name__}, not an object")
    return data


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _parameters(path: Path, keys: Any, tune_params: Any) -> tuple[list, dict[str, list]]:
    if not isinstance(keys, list) or not isinstance(tune_params, dict):
        raise ValueError(f"{path}: tune_params_keys must be a list and tune_params an object")
    parameters, allowed = [], {}
    for name in keys:
        values = tune_params.get(name)
        if not isinstance(values, list) or not values:
            raise ValueError(f"{path}: tune_params[{name!r}] must be a non-empty list of values, got {values!r}")
        try:
            if all(isinstance(value, bool) for value in values) and set(values) == {False, True}:
                parameters.append(Flag(name))
            elif all(_is_number(value) for value in values):
                parameters.append(Ordinal(name, tuple(values)))
            else:
                parameters.append(Choice(name, tuple(values)))
        except ValueError as error:
            raise ValueError(f"{path}: tune_params[{name!r}] = {values!r} is not a valid parameter: {error}") from None
        allowed[name] = values
    return parameters, allowed


def _shape(path: Path, problem_size: Any) -> tuple[int, ...]:
    sizes = problem_size if isinstance(problem_size, list) else [problem_size]
    if not sizes or not all(isinstance(size, int) and not isinstance(size, bool) for size in sizes):
        raise ValueError(f"{path}: problem_size must be an integer or a list of integers, got {problem_size!r}")
    return tuple(sizes)


def _outcome(path: Path, key: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The status, latency, repeats, costs and error of one cache entry."""
    missing = [name for name in ("time", *TIMING_KEYS) if name not in entry]
    if missing:
        raise ValueError(f"{path}: cache entry {key!r} lacks {missing}")
    for name in TIMING_KEYS:
        if not _is_number(entry[name]):
            raise ValueError(f"{path}: cache entry {key!r} has {name}={entry[name]!r}; expected milliseconds")
    costs = {
        "compile_s": entry["compile_time"] / 1000,
        "bench_s": (entry["benchmark_time"] + entry["verification_time"] + entry["framework_time"]) / 1000,
    }
    time = entry["time"]
    if isinstance(time, str):
        if time not in FAILURE_STATUS:
            raise ValueError(f"{path}: cache entry {key!r} has the unknown failure {time!r} in 'time'; "
                             f"known: {', '.join(FAILURE_STATUS)}")
        return {"status": FAILURE_STATUS[time].value, "latency_ms": math.nan, "repeats_ms": [], "error": time,
                **costs}
    times = entry.get("times")
    if not _is_number(time) or not math.isfinite(time):
        raise ValueError(f"{path}: cache entry {key!r} has time={time!r}; expected milliseconds or a failure name")
    if not isinstance(times, list) or not times or not all(_is_number(t) and math.isfinite(t) for t in times):
        raise ValueError(f"{path}: cache entry {key!r} has a time but no usable 'times' (the repeats, ms), "
                         f"got {times!r}; the latency is their median")
    repeats = [float(t) for t in times]
    return {"status": Status.OK.value, "latency_ms": statistics.median(repeats), "repeats_ms": repeats, "error": "",
            **costs}
