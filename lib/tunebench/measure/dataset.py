"""Recorded datasets: every measured config of one kernel x dtype x GPU model over its shapes.

`save_dataset` writes one parquet file atomically; `load_dataset` reads it back, with the extensions saved beside it
(`save_extension`: later shapes in files of their own, so that growing a dataset never rewrites it), and says what is
wrong if it can't.

File format (schema_version 2; a file without the `sitting` column is written as, and read as, version 1): one
parquet file, one row per measurement.

| column            | type                 | meaning                                                          |
| ----------------- | -------------------- | ---------------------------------------------------------------- |
| `source`          | string               | "triton": a config's measurement; "vendor": the vendor reference |
| one per shape dim | int64                | the problem shape, e.g. `M`, `N`, `K`                            |
| one per parameter | the parameter's type | the config (int64, bool or string); null in vendor rows         |
| `status`          | string               | a `Status` value: ok, compile_error, out_of_resources, ...       |
| `latency_ms`      | float64              | median of the repeats; NaN unless ok                             |
| `repeats_ms`      | list<float64>        | the individual timings; empty unless ok                          |
| `compile_s`       | float64              | seconds to compile the config                                    |
| `bench_s`         | float64              | seconds to time it (warm-up, repeats, correctness check)         |
| `error`           | string               | why it failed; "" when ok                                        |
| `library`         | string               | vendor rows: the library measured, e.g. "torch.matmul (cuBLAS)"  |
| `sitting`         | int64, optional      | the provenance's sitting that measured the row (0: the first);   |
|                   |                      | null where unknown (rows recorded before the column existed)     |

In vendor rows `status`, `compile_s`, `bench_s` and `error` may be null. The parquet schema metadata holds,
under the key `tunebench`, a JSON object: `schema_version` (1 or 2), `kernel`, `dtype`, `gpu` (GPU model name),
`shape_names`, `parameters` (each parameter's `to_spec()`, in config-space order) and `provenance` (where and
how it was measured: GPU, driver, CUDA, torch, Triton, Python, timing method, date, command, compile workers).

Extensions: the dataset `D.parquet` may have a folder `D.extensions/` of files in the same format, each holding
shapes that none before it holds, of the same kernel, dtype, GPU model, shape names and parameters; `load_dataset`
appends them in file-name order (`001_name.parquet`, `002_...`), and each one's sittings join the provenance.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import math
import numbers
import os
import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tunebench.measure.result import Status
from tunebench.space import Space, parameter_from_spec

if TYPE_CHECKING:
    from tunebench.space import Parameter

Shape = tuple[int, ...]

SCHEMA_VERSION = 2
READ_SCHEMA_VERSIONS = (1, 2)  # version 1: no `sitting` column
SITTING = "sitting"
METADATA_KEY = b"tunebench"
MEASUREMENT_COLUMNS = ("status", "latency_ms", "repeats_ms", "compile_s", "bench_s", "error")
VENDOR_COLUMNS = ("library", "latency_ms", "repeats_ms")
VENDOR_OPTIONAL_COLUMNS = ("status", "compile_s", "bench_s", "error")
SOURCES = ("triton", "vendor")
# Parquet codec of every file tunebench writes: zstd at level 9 stores the recorded datasets about 12 % smaller than
# pyarrow's default snappy (the tracked tree, datasets included, travels to the GPU machine, which takes 64 MiB).
PARQUET_OPTIONS = {"compression": "zstd", "compression_level": 9}
_STATUS_VALUES = tuple(status.value for status in Status)
_RESERVED = ("source", *MEASUREMENT_COLUMNS, "library", SITTING)
EXTENSIONS_SUFFIX = ".extensions"
_EXTENSION_NAME = re.compile(r"[a-z0-9][a-z0-9_]*")


class DatasetError(ValueError):
    """A dataset that breaks the format; the message names the bad thing and what was expected."""


@dataclass(eq=False)
class Dataset:
    """The measurements of one kernel x dtype x GPU model: a row per (shape, config), and vendor rows per shape.

    Construction validates and normalizes the frames (column order and dtypes, `repeats_ms` as lists of float).
    """

    kernel: str
    dtype: str
    gpu: str
    shape_names: tuple[str, ...]
    parameters: tuple[Parameter, ...]
    measurements: pd.DataFrame
    vendor: pd.DataFrame
    provenance: dict[str, Any]
    _spaces: dict[Shape | None, Space] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.shape_names = tuple(self.shape_names)
        self.parameters = tuple(self.parameters)
        self.parameter_names = tuple(parameter.name for parameter in self.parameters)
        names = [*self.shape_names, *self.parameter_names]
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            raise DatasetError(f"column names used twice among shape names and parameters: {duplicated}")
        reserved = sorted(set(names) & set(_RESERVED))
        if reserved:
            raise DatasetError(f"shape or parameter names {reserved} clash with the format's own columns {_RESERVED}")
        if not isinstance(self.provenance, dict):
            raise DatasetError(f"provenance must be a dict, got {type(self.provenance).__name__}")
        try:
            json.dumps(self.provenance)
        except (TypeError, ValueError) as error:
            raise DatasetError(f"provenance must be JSON-able: {error}") from None
        self.measurements = self._normalize_measurements(self.measurements)
        self.vendor = self._normalize_vendor(self.vendor)

    def __repr__(self) -> str:
        return (f"Dataset({self.kernel!r}, {self.dtype!r}, {self.gpu!r}: {len(self.measurements)} measurements, "
                f"{len(self.shapes())} shapes, {len(self.vendor)} vendor rows)")

    # -- queries ---------------------------------------------------------------------------------

    def shapes(self) -> list[Shape]:
        """The recorded shapes, sorted."""
        return sorted(set(_rows(self.measurements, self.shape_names)))

    def with_shapes(self, shapes: Iterable[Sequence[int]]) -> Dataset:
        """The dataset's rows of `shapes` alone, its provenance kept (a clear error for a shape it lacks)."""
        keep = {self._check_shape(shape) for shape in shapes}
        missing = sorted(keep - set(self.shapes()))
        if missing:
            raise ValueError(f"shapes {missing} are not recorded in {self.kernel} {self.dtype} on {self.gpu}")

        def rows_kept(frame: pd.DataFrame) -> pd.DataFrame:
            return frame[[shape in keep for shape in _rows(frame, self.shape_names)]]

        return replace(self, measurements=rows_kept(self.measurements), vendor=rows_kept(self.vendor))

    def task(self, shape: Sequence[int]) -> pd.DataFrame:
        """The measurements of one shape (a copy with a fresh index)."""
        shape = self._check_shape(shape)
        rows = self.measurements[self._mask(self.measurements, shape)]
        if rows.empty:
            raise ValueError(f"shape {shape} ({'x'.join(self.shape_names)}) is not recorded in {self.kernel} "
                             f"{self.dtype} on {self.gpu}; recorded shapes: {self.shapes()}")
        return rows.reset_index(drop=True)

    def configs(self, shape: Sequence[int]) -> list[dict[str, Any]]:
        """The configs recorded for one shape, in row order, with plain Python values."""
        return [dict(zip(self.parameter_names, key)) for key in _rows(self.task(shape), self.parameter_names)]

    def space(self, shape: Sequence[int] | None = None) -> Space:
        """The config space restricted to the configs recorded for `shape` (for any shape when None)."""
        shape = None if shape is None else self._check_shape(shape)
        if shape not in self._spaces:
            frame = self.measurements if shape is None else self.task(shape)
            name = f"{self.kernel} {self.dtype} {self.gpu}"
            if shape is not None:
                name += f" {'x'.join(self.shape_names)}={'x'.join(map(str, shape))}"
            keys = list(dict.fromkeys(_rows(frame, self.parameter_names)))
            self._spaces[shape] = Space(self.parameters, name=name).restrict(keys, "recorded")
        return self._spaces[shape]

    def optimum_ms(self, shape: Sequence[int]) -> float:
        """The best ok latency of a shape."""
        task = self.task(shape)
        ok = task.loc[task["status"] == Status.OK.value, "latency_ms"]
        if ok.empty:
            raise ValueError(f"shape {tuple(shape)} of {self.kernel} has no ok measurement")
        return float(ok.min())

    def best_config(self, shape: Sequence[int]) -> dict[str, Any]:
        """The fastest ok config of a shape (the first recorded of equals), with plain Python values."""
        task = self.task(shape)
        ok = task[task["status"] == Status.OK.value]
        if ok.empty:
            raise ValueError(f"shape {tuple(shape)} of {self.kernel} has no ok measurement")
        return dict(zip(self.parameter_names, _rows(ok.loc[[ok["latency_ms"].idxmin()]], self.parameter_names)[0]))

    def vendor_ms(self, shape: Sequence[int]) -> float | None:
        """The vendor library's latency for a shape; None if it was not measured or failed."""
        rows = self.vendor[self._mask(self.vendor, self._check_shape(shape))]
        if rows.empty or not math.isfinite(rows["latency_ms"].iloc[0]):
            return None
        return float(rows["latency_ms"].iloc[0])

    def _check_shape(self, shape: Sequence[int]) -> Shape:
        shape = tuple(int(size) for size in shape)
        if len(shape) != len(self.shape_names):
            raise ValueError(f"shape {shape} has {len(shape)} dimensions; {self.kernel} shapes have "
                             f"{len(self.shape_names)}: {self.shape_names}")
        return shape

    def _mask(self, frame: pd.DataFrame, shape: Shape) -> pd.Series:
        mask = pd.Series(True, index=frame.index)
        for name, size in zip(self.shape_names, shape):
            mask &= frame[name] == size
        return mask

    # -- validation ------------------------------------------------------------------------------

    def _normalize_measurements(self, frame: pd.DataFrame) -> pd.DataFrame:
        columns = [*self.shape_names, *self.parameter_names, *MEASUREMENT_COLUMNS]
        frame = _select_columns(frame, columns, (SITTING,), "measurements")
        for name in self.shape_names:
            frame[name] = _int_column(frame[name], name, "measurements")
        frame["status"] = _status_column(frame["status"], "measurements")
        for name in ("latency_ms", "compile_s", "bench_s"):
            frame[name] = _float_column(frame[name], name, "measurements")
        frame["repeats_ms"] = _repeats_column(frame["repeats_ms"], "measurements")
        frame["error"] = frame["error"].fillna("").astype(str)
        for parameter in self.parameters:
            allowed = list(parameter.values)
            outside = [value for value in frame[parameter.name].unique() if not parameter.contains(value)]
            if outside:
                row = frame[~frame[parameter.name].map(parameter.contains).astype(bool)].iloc[0]
                raise DatasetError(
                    f"measurements: parameter {parameter.name!r} has value {_plain(row[parameter.name])!r} "
                    f"(shape {tuple(_plain(row[n]) for n in self.shape_names)}), outside its allowed values "
                    f"{_describe_values(allowed)}")
            if all(isinstance(value, str) for value in allowed):
                frame[parameter.name] = frame[parameter.name].astype(str)
        ok = frame["status"] == Status.OK.value
        for name in ("compile_s", "bench_s"):
            bad = ~_finite_nonnegative(frame[name])
            if bad.any():
                raise DatasetError(f"measurements: {name} must be a finite number of seconds >= 0, "
                                   f"got {_plain(frame.loc[bad, name].iloc[0])!r}")
        bad_ok = ok & ~(_finite_nonnegative(frame["latency_ms"]) & (frame["repeats_ms"].map(len) > 0))
        if bad_ok.any():
            raise DatasetError(f"measurements: an ok row needs a finite latency_ms and its repeats_ms; row "
                               f"{self._describe_row(frame, bad_ok)} has latency_ms "
                               f"{_plain(frame.loc[bad_ok, 'latency_ms'].iloc[0])!r}")
        bad_failed = ~ok & frame["latency_ms"].notna()
        if bad_failed.any():
            raise DatasetError(f"measurements: a failed row carries no latency (NaN); row "
                               f"{self._describe_row(frame, bad_failed)} has "
                               f"{_plain(frame.loc[bad_failed, 'latency_ms'].iloc[0])!r}")
        if SITTING in frame:
            frame[SITTING] = self._sitting_column(frame[SITTING], "measurements")
        duplicated = frame.duplicated(subset=[*self.shape_names, *self.parameter_names])
        if duplicated.any():
            raise DatasetError(f"measurements: (shape, config) recorded twice: {self._describe_row(frame, duplicated)}")
        return frame

    def _normalize_vendor(self, frame: pd.DataFrame) -> pd.DataFrame:
        frame = _select_columns(frame, [*self.shape_names, *VENDOR_COLUMNS], (*VENDOR_OPTIONAL_COLUMNS, SITTING),
                               "vendor")
        for name in self.shape_names:
            frame[name] = _int_column(frame[name], name, "vendor")
        frame["library"] = frame["library"].astype(str)
        frame["latency_ms"] = _float_column(frame["latency_ms"], "latency_ms", "vendor")
        frame["repeats_ms"] = _repeats_column(frame["repeats_ms"], "vendor")
        if "status" in frame:
            frame["status"] = _status_column(frame["status"], "vendor")
        for name in ("compile_s", "bench_s"):
            if name in frame:
                frame[name] = _float_column(frame[name], name, "vendor")
        if "error" in frame:
            frame["error"] = frame["error"].fillna("").astype(str)
        if SITTING in frame:
            frame[SITTING] = self._sitting_column(frame[SITTING], "vendor")
        duplicated = frame.duplicated(subset=list(self.shape_names))
        if duplicated.any():
            shape = tuple(_plain(size) for size in frame.loc[duplicated, list(self.shape_names)].iloc[0])
            raise DatasetError(f"vendor: shape {shape} has more than one vendor row")
        return frame

    def _sitting_column(self, column: pd.Series, what: str) -> pd.Series:
        """The column as nullable integers, each the index of one of the provenance's sittings."""
        count = sitting_count(self.provenance)
        numbers_ = pd.to_numeric(column, errors="coerce")
        bad = (numbers_.isna() & column.notna()) | (numbers_.notna() & ((numbers_ != numbers_.round())
                                                                        | (numbers_ < 0) | (numbers_ >= count)))
        if bad.any():
            raise DatasetError(f"{what}: sitting {_plain(column[bad].iloc[0])!r} is not one of the provenance's "
                               f"{count} sitting(s): expected an integer from 0 to {count - 1}, or null if unknown")
        return numbers_.astype("Int64")

    def _describe_row(self, frame: pd.DataFrame, mask: pd.Series) -> str:
        row = frame[mask].iloc[0]
        shape = tuple(_plain(row[name]) for name in self.shape_names)
        return f"shape {shape} config { {name: _plain(row[name]) for name in self.parameter_names} }"


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds, so that messages and configs read plainly."""
    return value.item() if isinstance(value, np.generic) else value


def _rows(frame: pd.DataFrame, columns: Sequence[str]) -> list[tuple]:
    """The frame's rows over `columns` as tuples of plain Python values."""
    return list(zip(*(frame[name].tolist() for name in columns)))


def _select_columns(frame: pd.DataFrame, required: Sequence[str], optional: Sequence[str], what: str) -> pd.DataFrame:
    if not isinstance(frame, pd.DataFrame):
        raise DatasetError(f"{what} must be a pandas DataFrame, got {type(frame).__name__}")
    if frame.empty and len(frame.columns) == 0:
        return pd.DataFrame({name: pd.Series([], dtype=object) for name in required})
    missing = [name for name in required if name not in frame.columns]
    if missing:
        raise DatasetError(f"{what}: missing column(s) {missing}; expected {list(required)}")
    unexpected = [name for name in frame.columns if name not in required and name not in optional]
    if unexpected:
        raise DatasetError(f"{what}: unexpected column(s) {unexpected}; expected {list(required)}"
                           + (f" and optionally {list(optional)}" if optional else ""))
    present = [*required, *(name for name in optional if name in frame.columns)]
    return frame.loc[:, present].reset_index(drop=True).copy()


def _int_column(column: pd.Series, name: str, what: str) -> pd.Series:
    numbers_ = pd.to_numeric(column, errors="coerce")
    bad = numbers_.isna() | (numbers_ != numbers_.round())
    if bad.any():
        raise DatasetError(f"{what}: shape column {name!r} must hold integers, got {_plain(column[bad].iloc[0])!r}")
    return numbers_.astype("int64")


def _float_column(column: pd.Series, name: str, what: str) -> pd.Series:
    converted = pd.to_numeric(column, errors="coerce").astype("float64")
    bad = converted.isna() & column.notna()
    if bad.any():
        raise DatasetError(f"{what}: column {name!r} must hold numbers, got {_plain(column[bad].iloc[0])!r}")
    return converted


def _finite_nonnegative(column: pd.Series) -> pd.Series:
    return pd.Series(np.isfinite(column.to_numpy()) & (column.to_numpy() >= 0), index=column.index)


def _status_column(column: pd.Series, what: str) -> pd.Series:
    values = column.map(lambda value: value.value if isinstance(value, Status) else value)
    bad = ~values.isin(_STATUS_VALUES)
    if bad.any():
        raise DatasetError(f"{what}: unknown status {_plain(values[bad].iloc[0])!r}; "
                           f"allowed: {', '.join(_STATUS_VALUES)}")
    return values.astype(str)


def _repeats_column(column: pd.Series, what: str) -> pd.Series:
    if set(map(type, column)) <= {list} and set(map(type, itertools.chain.from_iterable(column))) <= {float}:
        return column.astype(object)  # already lists of float, as a loaded file's are: no per-row conversion

    def as_list(value: Any) -> list[float]:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return []
        try:
            return [float(x) for x in value]
        except (TypeError, ValueError):
            raise DatasetError(f"{what}: repeats_ms must hold lists of numbers, got {value!r}") from None

    return column.map(as_list).astype(object)


def repeat_spread(repeats: Sequence[Sequence[float]]) -> np.ndarray:
    """Per row, (max - min) / median of its repeated timings (a `repeats_ms` column); infinite for a row with none.
    Rows of one repeat count are reduced together (3 s on a 2-core CPU for the H100 prediction dataset's 1.1 M rows)."""
    lengths = np.fromiter(map(len, repeats), dtype=np.int64, count=len(repeats))
    flat = np.fromiter(itertools.chain.from_iterable(repeats), dtype=float, count=int(lengths.sum()))
    starts = np.cumsum(lengths) - lengths
    spread = np.full(len(lengths), np.inf)
    for length in np.unique(lengths[lengths > 0]):
        rows = np.flatnonzero(lengths == length)
        timings = flat[starts[rows, None] + np.arange(length)]
        spread[rows] = (timings.max(axis=1) - timings.min(axis=1)) / np.median(timings, axis=1)
    return spread


def _describe_values(values: Sequence[Any]) -> str:
    return repr(values) if len(values) <= 12 else f"[{values[0]!r}, ..., {values[-1]!r}] ({len(values)} values)"


# -- the parquet file ----------------------------------------------------------------------------

def _arrow_type(parameter: Parameter) -> pa.DataType:
    values = list(parameter.values)
    if all(isinstance(value, (bool, np.bool_)) for value in values):
        return pa.bool_()
    if all(isinstance(value, numbers.Integral) and not isinstance(value, bool) for value in values):
        return pa.int64()
    if all(isinstance(value, str) for value in values):
        return pa.string()
    raise DatasetError(f"parameter {parameter.name!r}: values {_describe_values(values)} mix types; a parquet "
                       "column holds one type (all bools, all ints or all strs)")


def sitting_count(provenance: Mapping[str, Any]) -> int:
    """How many sittings a provenance lists (one, when it lists none: the sweep took one)."""
    return len(provenance.get("sittings") or [None])


def recorded_kernel_sources(provenance: Mapping[str, Any]) -> list[str]:
    """The kernel source hashes (`kernel_source_sha256`) a provenance records, its sittings' included, each once in
    the order first met; empty for a dataset recorded before the collector wrote them."""
    sittings = [sitting for sitting in provenance.get("sittings") or [] if isinstance(sitting, dict)]
    hashes = [record.get("kernel_source_sha256") for record in (provenance, *sittings)]
    return list(dict.fromkeys(value for value in hashes if value))


def sitting_kernel_sources(provenance: Mapping[str, Any]) -> list[str | None]:
    """Each sitting's kernel source hash, in the order the provenance lists the sittings (one, when it lists none),
    a later sitting inheriting the first's where it recorded the same; None for a sitting that recorded none."""
    return [record["provenance"].get("kernel_source_sha256") or None for record in provenance_records(provenance)]


def has_sittings(dataset: Dataset) -> bool:
    """Whether the dataset's rows say which sitting measured them (the `sitting` column; null where unknown)."""
    return SITTING in dataset.measurements or SITTING in dataset.vendor


def _metadata(dataset: Dataset) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION if has_sittings(dataset) else 1,
        "kernel": dataset.kernel, "dtype": dataset.dtype, "gpu": dataset.gpu,
        "shape_names": list(dataset.shape_names), "parameters": [p.to_spec() for p in dataset.parameters],
        "provenance": dataset.provenance,
    }


def _to_table(dataset: Dataset) -> pa.Table:
    measurements, vendor = dataset.measurements, dataset.vendor
    n_vendor = len(vendor)

    def vendor_values(name: str) -> list[Any]:
        return vendor[name].tolist() if name in vendor else [None] * n_vendor

    columns: dict[str, pa.Array] = {
        "source": pa.array(["triton"] * len(measurements) + ["vendor"] * n_vendor, pa.string()),
    }
    for name in dataset.shape_names:
        columns[name] = pa.array(measurements[name].tolist() + vendor[name].tolist(), pa.int64())
    for parameter in dataset.parameters:
        columns[parameter.name] = pa.array(measurements[parameter.name].tolist() + [None] * n_vendor,
                                           _arrow_type(parameter))
    columns["status"] = pa.array(measurements["status"].tolist() + vendor_values("status"), pa.string())
    columns["latency_ms"] = pa.array(measurements["latency_ms"].tolist() + vendor["latency_ms"].tolist(), pa.float64())
    columns["repeats_ms"] = pa.array(measurements["repeats_ms"].tolist() + vendor["repeats_ms"].tolist(),
                                     pa.list_(pa.float64()))
    for name in ("compile_s", "bench_s"):
        columns[name] = pa.array(measurements[name].tolist() + vendor_values(name), pa.float64())
    columns["error"] = pa.array(measurements["error"].tolist() + vendor_values("error"), pa.string())
    columns["library"] = pa.array([None] * len(measurements) + vendor["library"].tolist(), pa.string())
    if has_sittings(dataset):
        columns[SITTING] = pa.array([None if pd.isna(value) else int(value) for frame in (measurements, vendor)
                                     for value in (frame[SITTING] if SITTING in frame else [None] * len(frame))],
                                    pa.int64())
    table = pa.table(columns)
    return table.replace_schema_metadata({METADATA_KEY: json.dumps(_metadata(dataset)).encode()})


def save_dataset(dataset: Dataset, path: str | os.PathLike[str]) -> None:
    """Write the dataset as one parquet file, atomically: a temp file beside it, fsynced, then renamed. Refused over
    a dataset that has extensions: its loaded form already holds their shapes, which would then be read twice."""
    path = Path(path)
    if extension_files(path):
        raise DatasetError(f"{path} has extensions in {extensions_directory(path)}: writing over it would count their "
                           "shapes twice; add shapes with save_extension, or move the extensions away first")
    table = _to_table(dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    os.chmod(temp_name, 0o644)  # mkstemp makes it private; a saved dataset is meant to be shared
    try:
        pq.write_table(table, temp_name, **PARQUET_OPTIONS)
        handle = os.open(temp_name, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable where directories can be fsynced
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def load_dataset(path: str | os.PathLike[str], *, kernel: str | None = None) -> Dataset:
    """Read and validate a dataset file and its extensions; with `kernel`, also check that it holds that kernel."""
    path = Path(path)
    with _cyclic_gc_paused():
        dataset = _load_file(path, kernel)
        extensions = extension_files(path)
        return _extended(dataset, [(file, _load_file(file, kernel)) for file in extensions]) if extensions else dataset


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic collector paused: a dataset's repeats are a million small lists, and the collections their
    making triggers, each walking every list made so far, took most of a prediction dataset's load time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _load_file(path: Path, kernel: str | None) -> Dataset:
    if not path.is_file():
        raise FileNotFoundError(f"no dataset file at {path}")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as error:
        raise DatasetError(f"{path} is not a readable parquet file: {error}") from None
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise DatasetError(f"{path} is not a tunebench dataset: its parquet schema metadata has no "
                           f"{METADATA_KEY.decode()!r} entry")
    try:
        meta = json.loads(raw)
    except json.JSONDecodeError as error:
        raise DatasetError(f"{path}: the {METADATA_KEY.decode()!r} metadata is not valid JSON ({error})") from None
    if not isinstance(meta, dict):
        raise DatasetError(f"{path}: the {METADATA_KEY.decode()!r} metadata must be a JSON object")
    version = meta.get("schema_version")
    if version not in READ_SCHEMA_VERSIONS:
        raise DatasetError(f"{path}: unsupported schema_version {version!r}; this version of tunebench reads "
                           f"schema_version {' and '.join(map(str, READ_SCHEMA_VERSIONS))}")
    required = ("kernel", "dtype", "gpu", "shape_names", "parameters", "provenance")
    missing = [key for key in required if key not in meta]
    if missing:
        raise DatasetError(f"{path}: the metadata lacks {missing}; expected {list(required)}")
    if kernel is not None and meta["kernel"] != kernel:
        raise DatasetError(f"{path} holds kernel {meta['kernel']!r}, not the {kernel!r} asked for")
    try:
        parameters = tuple(parameter_from_spec(spec) for spec in meta["parameters"])
    except (ValueError, TypeError, KeyError) as error:
        raise DatasetError(f"{path}: a parameter spec in the metadata is invalid: {error}") from None
    shape_names = tuple(meta["shape_names"])
    parameter_names = [parameter.name for parameter in parameters]
    sitting = [SITTING] if version >= 2 else []
    expected = ["source", *shape_names, *parameter_names, *MEASUREMENT_COLUMNS, "library", *sitting]
    missing = [name for name in expected if name not in table.column_names]
    if missing:
        raise DatasetError(f"{path}: missing column(s) {missing}; a {meta['kernel']} dataset has {expected}")
    unexpected = [name for name in table.column_names if name not in expected]
    if unexpected:
        raise DatasetError(f"{path}: unexpected column(s) {unexpected}; expected {expected}")
    sources = set(table["source"].to_pylist())
    if not sources <= set(SOURCES):
        raise DatasetError(f"{path}: unknown source value(s) {sorted(sources - set(SOURCES), key=repr)}; "
                           f"allowed: {list(SOURCES)}")

    triton = table.filter(pc.equal(table["source"], "triton"))
    vendor = table.filter(pc.equal(table["source"], "vendor"))
    vendor_columns = [*shape_names, *VENDOR_COLUMNS,
                      *(name for name in VENDOR_OPTIONAL_COLUMNS if vendor[name].null_count < len(vendor)), *sitting]
    try:
        return Dataset(kernel=meta["kernel"], dtype=meta["dtype"], gpu=meta["gpu"], shape_names=shape_names,
                       parameters=parameters,
                       measurements=_to_frame(triton, [*shape_names, *parameter_names, *MEASUREMENT_COLUMNS,
                                                       *sitting]),
                       vendor=_to_frame(vendor, vendor_columns), provenance=meta["provenance"])
    except DatasetError as error:
        raise DatasetError(f"{path}: {error}") from None


def _to_frame(table: pa.Table, columns: Sequence[str]) -> pd.DataFrame:
    data = {}
    for name in columns:
        if name == "repeats_ms":
            data[name] = pd.Series([value or [] for value in table[name].to_pylist()], dtype=object)
        else:
            data[name] = table[name].to_pandas()
    return pd.DataFrame(data)


# -- extensions ----------------------------------------------------------------------------------

def extensions_directory(path: str | os.PathLike[str]) -> Path:
    """The folder of a dataset's extensions: `D.extensions/` beside `D.parquet`."""
    path = Path(path)
    return path.with_name(path.stem + EXTENSIONS_SUFFIX)


def extension_files(path: str | os.PathLike[str]) -> list[Path]:
    """A dataset's extension files, in the order they are appended (none when it has no extensions folder)."""
    directory = extensions_directory(path)
    return sorted(directory.glob("*.parquet")) if directory.is_dir() else []


def save_extension(dataset: Dataset, path: str | os.PathLike[str], name: str) -> Path:
    """Add `dataset`'s shapes to the dataset at `path` as its next extension file, `NNN_name.parquet`, atomically;
    refused, before anything is written, unless they are new shapes of the same kernel, dtype, GPU and parameters."""
    if not _EXTENSION_NAME.fullmatch(name):
        raise ValueError(f"extension name {name!r}: use lower-case letters, digits and underscores, e.g. 'sixth_check'")
    path = Path(path)
    existing = extension_files(path)
    out = extensions_directory(path) / f"{len(existing) + 1:03d}_{name}.parquet"
    if out.exists():
        raise DatasetError(f"{out} exists: extensions are numbered 001, 002, ... without gaps; found {existing}")
    _extended(load_dataset(path), [(out, dataset)])
    out.parent.mkdir(parents=True, exist_ok=True)
    save_dataset(dataset, out)
    return out


def _extended(base: Dataset, extensions: Sequence[tuple[Path, Dataset]]) -> Dataset:
    """`base` with each extension's rows appended and its sittings in the provenance, each marked with its file."""
    sittings = has_sittings(base) or any(has_sittings(extension) for _, extension in extensions)
    measurements, vendor = _with_sittings([base.measurements, base.vendor], 0, sittings)
    measurements, vendor, records = [measurements], [vendor], provenance_records(base.provenance)
    rows, shapes = len(base.measurements) + len(base.vendor), set(base.shapes())
    for file, extension in extensions:
        for what in ("kernel", "dtype", "gpu", "shape_names"):
            if getattr(extension, what) != getattr(base, what):
                raise DatasetError(f"extension {file}: {what} {getattr(extension, what)!r} differs from the "
                                   f"dataset's {getattr(base, what)!r}")
        if [p.to_spec() for p in extension.parameters] != [p.to_spec() for p in base.parameters]:
            raise DatasetError(f"extension {file}: its parameters differ from the dataset's "
                               f"{[p.to_spec() for p in base.parameters]}")
        again = sorted(shapes & set(extension.shapes()))
        if again:
            raise DatasetError(f"extension {file}: shapes {again[:5]}{' ...' if len(again) > 5 else ''} "
                               f"({len(again)}) are already in the dataset or an earlier extension")
        shapes |= set(extension.shapes())
        extension_measurements, extension_vendor = _with_sittings([extension.measurements, extension.vendor],
                                                                  len(records), sittings)
        records += [{**record, "measured_before": record["measured_before"] + rows,
                     "provenance": {**record["provenance"], "extension": file.name}}
                    for record in provenance_records(extension.provenance)]
        rows += len(extension.measurements) + len(extension.vendor)
        measurements.append(extension_measurements)
        vendor.append(extension_vendor)
    extended = Dataset(kernel=base.kernel, dtype=base.dtype, gpu=base.gpu, shape_names=base.shape_names,
                       parameters=base.parameters, measurements=base.measurements.iloc[:0],
                       vendor=pd.concat(vendor, ignore_index=True), provenance=sweep_provenance(records))
    # Each part was validated when it was made and their shapes are disjoint (above): the rows need no second pass.
    extended.measurements = pd.concat(measurements, ignore_index=True)
    return extended


def _with_sittings(frames: Sequence[pd.DataFrame], offset: int, sittings: bool) -> list[pd.DataFrame]:
    """The frames with their `sitting` shifted by `offset` (the sittings listed before theirs), or null where they
    have none; unchanged when no part of the dataset has sittings."""
    if not sittings:
        return list(frames)
    return [frame.assign(**{SITTING: (frame[SITTING] + offset if SITTING in frame
                                      else pd.Series(pd.NA, index=frame.index, dtype="Int64"))})
            for frame in frames]


# -- provenance ----------------------------------------------------------------------------------

def sweep_provenance(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The first sitting's provenance; when a sweep took several sittings, `sittings` lists each one's date, how
    many measurements came before it, and whatever in its provenance differs from the first's (versions, the
    timing policy, the command), so that a dataset measured across a change says so."""
    sittings = [record for record in records if record["kind"] == "provenance"]
    if not sittings:
        raise ValueError("the journal holds no provenance record")
    first = dict(sittings[0]["provenance"])
    if len(sittings) > 1:
        first["sittings"] = [
            {"measured_before": sitting.get("measured_before", 0), "date": sitting["provenance"].get("date"),
             **{name: value for name, value in sitting["provenance"].items()
                if name != "date" and first.get(name) != value}}
            for sitting in sittings]
    return first


def provenance_records(provenance: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The journal's provenance records that `sweep_provenance` summarized into `provenance` (its inverse)."""
    first = {name: value for name, value in provenance.items() if name != "sittings"}
    sittings = provenance.get("sittings") or [{"measured_before": 0}]
    return [{"kind": "provenance", "measured_before": sitting.get("measured_before", 0),
             "provenance": {**first, **{name: value for name, value in sitting.items() if name != "measured_before"}}}
            for sitting in sittings]
