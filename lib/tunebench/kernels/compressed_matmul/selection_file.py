"""The pipeline-selection file: one JSON file per (model, GPU) holding the autotuner's choice per projection and
batch-size bucket, the latencies that justify it, and its provenance; written atomically, validated when read.

Format (format_version 1), one JSON object:

| key | meaning |
| --- | --- |
| `kind` | "tunebench pipeline selection" |
| `format_version` | 1 |
| `kernel`, `model`, `gpu` | "compressed_matmul"; the model (e.g. "Llama-3.1-8B"); the GPU name as torch reports it |
| `projections` | the MLP's projections in execution order: `name`, `out_features` (N), `in_features` (K) |
| `buckets` | one per tuned batch size, in increasing order (below) |
| `search` | `evaluations` and `seconds` (on the evaluators' clocks) the autotuner spent |
| `provenance` | dataset (path and its own provenance), strategy and settings, seeds, date, command |

A bucket: `batch`; `round_totals_ms`, the MLP step (summed over the projections) after each round of the descent, the
last being the selection's; `converged`; and `projections`, per name: `config` (a compressed_matmul config: pipeline,
matmul tile, `decode_sm_percent`, `decode_schedule`: a file written before it existed reads as "overlapped"),
`latency_ms` (its measured step) and `fixed_pipelines`, per pipeline its best found (`config`, `latency_ms`) or null
(under the autotuner's race, a pipeline that did not go on holds the best of its probe).
Latencies are milliseconds.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from tunebench.files import write_text_atomically
from tunebench.kernels import complete_config
from tunebench.kernels.compressed_matmul.autotune import BucketTuning, Choice, MlpTuning, ProjectionChoice
from tunebench.kernels.compressed_matmul.family import NAME, config_space
from tunebench.kernels.compressed_matmul.mlp import Mlp, Projection
from tunebench.kernels.compressed_matmul.pipelines import PIPELINES
from tunebench.space import ConfigError, Space

KIND = "tunebench pipeline selection"
FORMAT_VERSION = 1


class SelectionFileError(ValueError):
    """A selection file that is malformed or made for another model, GPU or format version; the message names the
    bad value and what was expected."""


@dataclass(frozen=True)
class SelectionFile:
    """What a selection file holds: the tuning of one model's MLP on one GPU, and how it was found."""

    gpu: str
    tuning: MlpTuning
    provenance: Mapping[str, Any]

    @property
    def model(self) -> str:
        return self.tuning.mlp.model


def file_name(model: str, gpu: str) -> str:
    """The file name of a (model, GPU) selection: both lower-cased, runs of characters other than letters, digits,
    '.' and '-' as '_'."""
    def slug(text: str) -> str:
        return re.sub(r"[^a-z0-9.-]+", "_", text.lower()).strip("_")

    return f"{slug(model)}__{slug(gpu)}.json"


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------

def _choice_json(choice: Choice | None) -> dict[str, Any] | None:
    return None if choice is None else {"config": dict(choice.config), "latency_ms": choice.latency_ms}


def to_json(selection: SelectionFile) -> dict[str, Any]:
    """The file's JSON object."""
    tuning = selection.tuning
    return {
        "kind": KIND, "format_version": FORMAT_VERSION, "kernel": NAME, "model": tuning.mlp.model,
        "gpu": selection.gpu,
        "projections": [{"name": p.name, "out_features": p.out_features, "in_features": p.in_features}
                        for p in tuning.mlp.projections],
        "buckets": [{
            "batch": bucket.batch, "round_totals_ms": list(bucket.round_totals_ms), "converged": bucket.converged,
            "projections": {name: {**_choice_json(choice.choice),
                                   "fixed_pipelines": {p: _choice_json(choice.fixed[p]) for p in PIPELINES}}
                            for name, choice in bucket.projections.items()},
        } for bucket in tuning.buckets],
        "search": {"evaluations": tuning.evaluations, "seconds": tuning.search_s},
        "provenance": dict(selection.provenance),
    }


def save_selection(selection: SelectionFile, path: str | os.PathLike[str]) -> Path:
    """Write the selection file atomically (standard JSON: no NaN or infinity); the path."""
    return write_text_atomically(path, json.dumps(to_json(selection), indent=1, allow_nan=False) + "\n")


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------

def load_selection(path: str | os.PathLike[str], *, model: str, gpu: str) -> SelectionFile:
    """Read a selection file made for `model` on `gpu`; a SelectionFileError names anything else (another kind of
    file, format version, kernel, model or GPU) and any malformed entry."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no pipeline selection file at {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise SelectionFileError(f"{path} is not valid JSON ({error})") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        kind = data.get("kind") if isinstance(data, dict) else type(data).__name__
        raise SelectionFileError(f"{path} is not a pipeline selection file: kind {kind!r}, expected {KIND!r}")
    expected = {"format_version": FORMAT_VERSION, "kernel": NAME, "model": model, "gpu": gpu}
    for key, value in expected.items():
        if data.get(key) != value:
            raise SelectionFileError(f"{path} has {key} {data.get(key)!r}, expected {value!r}"
                                     + (" (re-run the autotuner for this one)" if key != "kernel" else ""))
    try:
        return from_json(data)
    except SelectionFileError as error:
        raise SelectionFileError(f"{path}: {error}") from None


def from_json(data: Mapping[str, Any]) -> SelectionFile:
    """The selection a file's JSON object holds (its kind, version, kernel, model and GPU already checked)."""
    projections = tuple(Projection(_get(p, "name", str, "a projection"), _get(p, "out_features", int, "a projection"),
                                   _get(p, "in_features", int, "a projection"))
                        for p in _get(data, "projections", list, "the file"))
    try:
        mlp = Mlp(_get(data, "model", str, "the file"), projections)
    except ValueError as error:
        raise SelectionFileError(str(error)) from None
    names = [projection.name for projection in mlp.projections]
    space = config_space()
    buckets = []
    for bucket in _get(data, "buckets", list, "the file"):
        batch = _get(bucket, "batch", int, "a bucket")
        where = f"bucket batch={batch}"
        if batch < 1:
            raise SelectionFileError(f"{where}: the batch size must be >= 1")
        chosen = _get(bucket, "projections", dict, where)
        if list(chosen) != names:
            raise SelectionFileError(f"{where} has projections {list(chosen)}, expected {names}")
        choices = {}
        for name, entry in chosen.items():
            fixed = _get(entry, "fixed_pipelines", dict, f"{where} {name}")
            if sorted(fixed) != sorted(PIPELINES):
                raise SelectionFileError(f"{where} {name}: fixed_pipelines has {sorted(fixed)}, "
                                         f"expected {sorted(PIPELINES)}")
            choices[name] = ProjectionChoice(
                _read_choice(entry, f"{where} {name}", space),
                {p: None if fixed[p] is None else _read_choice(fixed[p], f"{where} {name} {p}", space)
                 for p in PIPELINES})
        totals = tuple(_latency(total, where) for total in _get(bucket, "round_totals_ms", list, where))
        if not totals:
            raise SelectionFileError(f"{where}: round_totals_ms is empty")
        buckets.append(BucketTuning(batch, choices, totals, _get(bucket, "converged", bool, where)))
    batches = [bucket.batch for bucket in buckets]
    if not batches or batches != sorted(set(batches)):
        raise SelectionFileError(f"buckets must be non-empty with increasing batch sizes, got {batches}")
    search = _get(data, "search", dict, "the file")
    tuning = MlpTuning(mlp, tuple(buckets), _get(search, "evaluations", int, "search"),
                       _latency(_get(search, "seconds", (int, float), "search"), "search"))
    return SelectionFile(_get(data, "gpu", str, "the file"), tuning, _get(data, "provenance", dict, "the file"))


def _get(mapping: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(mapping, dict):
        raise SelectionFileError(f"{where} must be a JSON object, got {mapping!r}")
    if key not in mapping:
        raise SelectionFileError(f"{where} lacks {key!r}")
    value = mapping[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise SelectionFileError(f"{where}: {key} must be {expected}, got {value!r}")
    return value


def _latency(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise SelectionFileError(f"{where}: a latency must be a finite number >= 0, got {value!r}")
    return float(value)


def _read_choice(entry: Any, where: str, space: Space) -> Choice:
    config = complete_config(NAME, _get(entry, "config", dict, where))  # a file from before a parameter was added
    try:
        space.check(config)
    except ConfigError as error:
        raise SelectionFileError(f"{where}: not a valid {NAME} config of this version: {error}") from None
    return Choice(config, _latency(_get(entry, "latency_ms", (int, float), where), where))
