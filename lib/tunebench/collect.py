"""Exhaustive sweeps on a GPU: every valid config of a kernel over a list of shapes, recorded as a dataset.

Resumable: every measurement is appended to a journal (one JSON line each, flushed at once), so a killed
run continues where it stopped; one collector at a time holds a journal; the dataset file is written atomically once
every shape is complete. With `--screen-runs`, a sweep times each config with a few runs first and only the near-best
in full (`tunebench.measure.screen`).
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import gzip
import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from tunebench.kernels import complete_config, get_kernel, kernel_source_sha256
from tunebench.measure.dataset import (SITTING, Dataset, load_dataset, provenance_records, recorded_kernel_sources,
                                      save_dataset, sweep_provenance)
from tunebench.measure.result import Result, Status
from tunebench.measure.screen import Screen
from tunebench.measure.timing import FLUSHES, TimingPolicy, recorded_flush

Shape = tuple[int, ...]


def parse_shapes(text: str, dimensions: int) -> list[Shape]:
    """'1x4096x4096,16x4096x4096' -> [(1, 4096, 4096), (16, 4096, 4096)], with clear errors."""
    shapes = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        try:
            shape = tuple(int(value) for value in item.lower().split("x"))
        except ValueError:
            raise ValueError(f"bad shape {item!r}: expected {dimensions} positive integers joined by 'x'") from None
        if len(shape) != dimensions or min(shape) < 1:
            raise ValueError(f"bad shape {item!r}: expected {dimensions} positive integers joined by 'x'")
        shapes.append(shape)
    if not shapes:
        raise ValueError("no shapes given")
    return shapes


def shapes_argument(text: str, kernel_name: str, shape_sets: Mapping[str, Sequence[Shape]],
                    dimensions: int) -> list[Shape]:
    """The shapes `--shapes` names: one of the kernel's shape sets by name; '@D.parquet', every shape of a recorded
    dataset of the kernel (its extensions included), sorted; '@FILE', a text file of shapes separated by
    commas or whitespace; or the shapes themselves, comma-separated."""
    if text in shape_sets:
        return list(shape_sets[text])
    if not text.startswith("@"):
        return parse_shapes(text, dimensions)
    path = Path(text[1:])
    if not path.is_file():
        raise ValueError(f"--shapes {text!r}: no file at {path}")
    if path.suffix == ".parquet":
        return [tuple(int(value) for value in shape) for shape in load_dataset(path, kernel=kernel_name).shapes()]
    return parse_shapes(",".join(path.read_text().split()), dimensions)


class JournalBusy(RuntimeError):
    """Another live process holds the journal a sweep would write."""


class Journal:
    """An append-only JSON-lines record of a sweep; a line cut short by a kill is ignored on reading.

    Every line is flushed to the operating system at once (a killed process loses nothing); it is forced to disk
    at most every `sync_interval_s`, since an fsync per measurement costs more than timing a small kernel.
    """

    def __init__(self, path: Path, sync_interval_s: float = 2.0) -> None:
        self.path = path
        self.sync_interval_s = sync_interval_s
        self._synced = time.monotonic()
        path.parent.mkdir(parents=True, exist_ok=True)

    def seed_from(self, archive: Path) -> int:
        """Start this journal from another machine's (a gzipped or plain JSON-lines copy); the records it holds.
        A journal that already holds records is kept if it goes on from the archive's (the same machine resumed with
        the same copy; it may have measured more since) and refused otherwise: two histories are never merged."""
        opener = gzip.open if archive.suffix == ".gz" else open
        with opener(archive, "rt") as source:
            lines = [line for line in source if line.strip()]
        held = self.read()
        if held:
            carried = [json.loads(line) for line in lines]
            if held[:len(carried)] != carried:
                raise ValueError(f"{self.path} already holds records that do not go on from {archive}; --resume-from "
                                 "starts an empty journal, or one that already continues the archive's")
            return len(held)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text("".join(line if line.endswith("\n") else line + "\n" for line in lines))
        os.replace(temporary, self.path)
        return len(self.read())

    @contextmanager
    def hold(self) -> Iterator[None]:
        """This journal for this process alone while the block runs: a second collector on it (the command started
        twice, or a child of a killed `--gpus` parent still running) is refused rather than interleaving its records.
        The lock is an flock, which the kernel drops when its holder dies, however it dies."""
        with self.path.with_name(self.path.name + ".lock").open("a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                raise JournalBusy(f"{self.path} is being written by another collector (pid "
                                  f"{handle.read().strip() or 'unknown'}): let it finish or stop it, then run the "
                                  "command again") from None
            handle.truncate(0)
            handle.write(str(os.getpid()))
            handle.flush()
            yield

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        records = []
        with self.path.open() as handle:
            for line in handle:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # the tail of a killed write
        return records

    def append(self, record: Mapping[str, Any]) -> None:
        with self.path.open("a") as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            if time.monotonic() - self._synced >= self.sync_interval_s:
                os.fsync(handle.fileno())
                self._synced = time.monotonic()


def _result_record(kind: str, shape: Shape, result: Result, screened: bool = False) -> dict[str, Any]:
    record = {
        "kind": kind, "shape": list(shape), "config": dict(result.config), "status": result.status.value,
        "repeats_ms": list(result.repeats_ms), "compile_s": result.compile_s, "bench_s": result.bench_s,
        "error": result.error,
    }
    if screened:
        record["screened"] = True
    return record


class _Screens:
    """What a journal's records say of a two-pass sweep: each shape's screened medians, the configs timed in full and
    the shapes whose second pass is done (a "screen_done" record)."""

    def __init__(self, key: Callable[[Mapping[str, Any]], tuple], records: Sequence[Mapping[str, Any]] = ()) -> None:
        self.key = key
        self.screened_ms: dict[Shape, dict[tuple, float]] = {}
        self.full: set[tuple[Shape, tuple]] = set()
        self.finished: set[Shape] = set()
        for record in records:
            self.add(record)

    def add(self, record: Mapping[str, Any]) -> None:
        if record["kind"] == "screen_done":
            self.finished.add(tuple(record["shape"]))
        elif record["kind"] == "config":
            shape, key = tuple(record["shape"]), self.key(record["config"])
            if not record.get("screened"):
                self.full.add((shape, key))
            elif record["status"] == Status.OK.value:
                self.screened_ms.setdefault(shape, {})[key] = float(np.median(record["repeats_ms"]))
            else:
                self.screened_ms.setdefault(shape, {})

    def done(self, shape: Shape) -> bool:
        return shape in self.finished

    def unfinished(self) -> list[Shape]:
        """Shapes screened but not yet timed in full."""
        return sorted(set(self.screened_ms) - self.finished)

    def to_time_in_full(self, shape: Shape, configs: Sequence[Mapping[str, Any]], screen: Screen) -> list[dict]:
        """The configs of `shape` that `screen` keeps and that have no full timing yet, in sweep order."""
        kept = screen.kept(self.screened_ms.get(shape, {}))
        return [dict(c) for c in configs if self.key(c) in kept and (shape, self.key(c)) not in self.full]


def dataset_records(dataset: Dataset) -> list[dict[str, Any]]:
    """A saved dataset as the journal records `build_dataset` makes it from, for a dataset whose journal is gone:
    `build_dataset(kernel, dtype, records_after(dataset_records(dataset), later))` extends it with a later sitting.
    Each row's record names its sitting (None where the dataset does not know it), counted from the dataset's first,
    since here the rows follow all the sittings' provenance records rather than each its own."""
    shape_names, names = list(dataset.shape_names), list(dataset.parameter_names)

    def record(kind: str, row: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
        error = row["error"]
        return {"kind": kind, "shape": [int(row[name]) for name in shape_names], "config": dict(config),
                "status": row["status"], "repeats_ms": [float(x) for x in row["repeats_ms"]],
                "compile_s": float(row["compile_s"]), "bench_s": float(row["bench_s"]),
                "error": error if isinstance(error, str) else None,
                "sitting": None if pd.isna(row.get(SITTING, pd.NA)) else int(row[SITTING])}

    records = provenance_records(dataset.provenance)
    for row in dataset.measurements.to_dict("records"):
        records.append(record("config", row, {name: row[name] for name in names}))  # bools stay bools
    for row in dataset.vendor.to_dict("records"):
        records.append(record("vendor", row, {}))
    return records


def records_after(earlier: Sequence[Mapping[str, Any]], later: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`earlier` then `later`, as `build_dataset` takes them, with `later`'s sittings listed after `earlier`'s: a row
    that names its sitting (as a saved dataset's do, `dataset_records`) counts it after `earlier`'s sittings, and each
    later provenance's count of measurements before it includes `earlier`'s. A later row replaces an earlier one of
    the same shape and config (a shape swept again), or joins it (a shape or config added)."""
    sittings_before = sum(record["kind"] == "provenance" for record in earlier)
    measured_before = sum(record["kind"] == "config" for record in earlier)
    shifted = []
    for record in later:
        if record["kind"] == "provenance":
            record = dict(record, measured_before=record.get("measured_before", 0) + measured_before)
        elif record["kind"] in ("config", "vendor") and record.get("sitting") is not None:
            record = dict(record, sitting=record["sitting"] + sittings_before)
        shifted.append(record)
    return [*earlier, *shifted]


def whole_shapes(records: Sequence[Mapping[str, Any]], configs: Sequence[Mapping[str, Any]],
                 key: Callable[[Mapping[str, Any]], tuple]) -> list[Mapping[str, Any]]:
    """The records without the config and vendor rows of any shape that lacks its vendor timing or one of `configs`
    (keyed by `key`), or that was screened and not yet timed in full: a journal that an earlier sweep of other shapes
    left unfinished gives no partial shape."""
    wanted = {key(config) for config in configs}
    measured: dict[tuple, set] = {}
    for record in records:
        if record["kind"] == "config":
            measured.setdefault(tuple(record["shape"]), set()).add(key(record["config"]))
    vendor = {tuple(record["shape"]) for record in records if record["kind"] == "vendor"}
    unfinished = set(_Screens(key, records).unfinished())
    whole = {shape for shape, keys in measured.items()
             if shape in vendor and wanted <= keys and shape not in unfinished}
    return [record for record in records
            if record["kind"] not in ("config", "vendor") or tuple(record["shape"]) in whole]


def read_records(path: Path) -> list[dict[str, Any]]:
    """A journal's records, from a plain or gzipped JSON-lines copy; or a saved dataset's (.parquet), as the records
    that rebuild it, for a sitting whose journal is gone."""
    if path.suffix == ".parquet":
        return dataset_records(load_dataset(path))
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def with_added_configs(base: Dataset, records: Sequence[Mapping[str, Any]], shapes: Sequence[Shape], *,
                       replace: bool = False) -> Dataset:
    """`base` at `shapes` with the configs that a later sitting measured there added (`records`: its journal's, or
    its dataset's by `read_records`). Each added row names its own sitting, listed after the base's, whose count of
    measurements before it includes the base's rows; the base's vendor rows stay, so that every config is compared
    with the vendor library's timing from the base. Refused: a shape the base lacks, a later sitting on another GPU,
    a shape that lacks some of the added configs, and, unless `replace` (the later sitting's rows then replace the
    base's: configs whose binary changed), a config the base already holds there."""
    space = get_kernel(base.kernel).config_space()
    shapes = [tuple(shape) for shape in shapes]
    missing = sorted(set(shapes) - set(base.shapes()))
    if missing:
        raise ValueError(f"shapes not in the base dataset: {missing}; it holds {sorted(base.shapes())}")
    gpus = {record["provenance"].get("gpu_name") for record in records if record["kind"] == "provenance"}
    if gpus != {base.gpu}:
        raise ValueError(f"the later sitting was measured on {sorted(map(str, gpus))}, the base on {base.gpu!r}")
    # A config recorded before a parameter joined the space means the parameter's old value.
    records = [dict(record, config=complete_config(base.kernel, record["config"])) if record["kind"] == "config"
               else record for record in records]
    added = [record for record in records if record["kind"] == "config" and tuple(record["shape"]) in shapes]
    keys = {shape: set() for shape in shapes}
    for record in added:
        keys[tuple(record["shape"])].add(space.key(record["config"]))
    every = set().union(*keys.values())
    short = {shape: len(every - measured) for shape, measured in keys.items() if every - measured}
    if short:
        raise ValueError(f"shapes the later sitting measured only some of its {len(every)} configs at (how many "
                         f"they lack): {short}")
    for shape in shapes:
        held = every & {space.key(complete_config(base.kernel, config)) for config in base.configs(shape)}
        if held and not replace:
            raise ValueError(f"{len(held)} of the added configs are in the base already at {shape}, e.g. "
                             f"{sorted(held)[0]}")
    kept = [record for record in dataset_records(base)
            if record["kind"] == "provenance" or tuple(record["shape"]) in shapes]
    later = [record for record in records if record["kind"] == "provenance" or (
        record["kind"] == "config" and tuple(record["shape"]) in shapes)]
    return build_dataset(base.kernel, base.dtype, records_after(kept, later))


def build_dataset(kernel_name: str, dtype: str, records: Sequence[Mapping[str, Any]]) -> Dataset:
    """The Dataset of a finished sweep: the last record of each (shape, config) wins. Each row's `sitting` is that of
    the provenance record last before it (a record that names its own, as `dataset_records` makes, keeps it). A config
    recorded before a parameter joined the space means the parameter's old value (`complete_config`)."""
    kernel = get_kernel(kernel_name)
    space = kernel.config_space()
    provenance = sweep_provenance(records)
    triton_rows: dict[tuple, dict] = {}
    vendor_rows: dict[tuple, dict] = {}
    sitting = -1
    for record in records:
        if record["kind"] == "provenance":
            sitting += 1
        if record["kind"] not in ("config", "vendor"):
            continue
        shape = tuple(record["shape"])
        repeats = [float(x) for x in record["repeats_ms"]]
        row = dict(zip(kernel.SHAPE_NAMES, shape))
        ok = record["status"] == Status.OK.value
        row.update(status=record["status"], latency_ms=float(np.median(repeats)) if ok else np.nan,
                   repeats_ms=repeats, compile_s=float(record["compile_s"]), bench_s=float(record["bench_s"]),
                   error=record["error"], sitting=record.get("sitting", sitting))
        if record["kind"] == "vendor":
            row["library"] = kernel.VENDOR_LIBRARY
            vendor_rows[shape] = row
        else:
            config = complete_config(kernel_name, record["config"])
            row.update(config)
            triton_rows[(shape, space.key(config))] = row
    measurements = pd.DataFrame(list(triton_rows.values()))
    vendor = pd.DataFrame(list(vendor_rows.values()))
    return Dataset(kernel=kernel_name, dtype=dtype, gpu=provenance["gpu_name"], shape_names=kernel.SHAPE_NAMES,
                   parameters=space.parameters, measurements=measurements, vendor=vendor, provenance=dict(provenance))


def sweep_configs(kernel_name: str, configs: Sequence[Mapping[str, Any]] | None = None,
                  limit_configs: int | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """The configs a sweep measures on every shape: the given ones (each checked against the space), a seeded
    sample of `limit_configs`, or every valid config."""
    space = get_kernel(kernel_name).config_space()
    if configs is not None:
        configs = [complete_config(kernel_name, config) for config in configs]
        for config in configs:
            space.check(config)
        return configs
    if limit_configs is None:
        return space.enumerate()
    return space.sample(np.random.default_rng(seed), limit_configs, unique=True)


def _warn_of_other_kernel_source(records: Sequence[Mapping[str, Any]], current: str) -> None:
    """Say so on stderr when the journal's earlier sittings measured another kernel source than the current code's:
    the sweep goes on (an edit may leave the binaries as they were), and its dataset's provenance lists both."""
    earlier = [source for record in records if record["kind"] == "provenance"
               for source in recorded_kernel_sources(record["provenance"])]
    other = [source for source in dict.fromkeys(earlier) if source != current]
    if other:
        print(f"warning: earlier sittings of this journal measured kernel source {', '.join(other)}; the current "
              f"code's is {current}, so the dataset will hold timings of both (its provenance lists each sitting's)",
              file=sys.stderr, flush=True)


def _refuse_other_flush(records: Sequence[Mapping[str, Any]], path: Path, flush: str) -> None:
    """A ValueError when the journal's earlier sittings evicted the L2 another way than `flush`: one dataset holds one
    timing policy."""
    earlier = {recorded_flush(record["provenance"].get("timing"))
               for record in records if record["kind"] == "provenance"}
    if earlier - {flush}:
        recorded = " and ".join(sorted(earlier))
        raise ValueError(f"{path} was timed with --flush {recorded}, not --flush {flush}: a dataset holds one timing "
                         f"policy; continue it with --flush {recorded} or write another --out")


def journal_of(out: Path) -> Journal:
    """The journal of the sweep that writes `out`."""
    return Journal(out.with_suffix(".journal") / "journal.jsonl")


def sweep(kernel_name: str, dtype: str, shapes: Sequence[Shape], out: Path, *, compile_workers: int | None = None,
          stop_after_s: float | None = None, limit_configs: int | None = None, seed: int = 0,
          timing: TimingPolicy = TimingPolicy(), command: Sequence[str] = (),
          make_bench: Callable[..., Any] | None = None, configs: Sequence[Mapping[str, Any]] | None = None,
          resume_from: Path | None = None, save: bool = True, screen: Screen | None = None) -> bool:
    """Measure every valid config (or a seeded sample of `limit_configs`, or the given `configs`) on every
    shape; True when complete. A complete sweep writes its dataset to `out` unless `save` is False (the journal
    beside `out` holds it all the same).

    With a `screen`, each shape's configs are first timed with `screen.runs` runs (journal records marked
    "screened"), then those the screen keeps are timed again in full, and a "screen_done" record closes the shape;
    the full timing, recorded later, is the kept configs' row in the dataset, the screen's the others'.

    `make_bench` builds the measuring back end (default: `GpuBench`); tests pass a stand-in to exercise
    resumption without a GPU.
    """
    from tqdm import tqdm

    if make_bench is None:
        from tunebench.measure.live import GpuBench as make_bench

    kernel = get_kernel(kernel_name)
    shapes = [kernel.check_shape(shape) for shape in shapes]
    space = kernel.config_space()
    configs = sweep_configs(kernel_name, configs, limit_configs, seed)
    journal = journal_of(out)
    with journal.hold():
        if resume_from is not None:
            print(f"journal started from {resume_from}: {journal.seed_from(resume_from)} records", flush=True)
        records = journal.read()
        _warn_of_other_kernel_source(records, kernel_source_sha256(kernel))
        _refuse_other_flush(records, journal.path, timing.flush)
        done = {(tuple(r["shape"]), space.key(r["config"]) if r["kind"] == "config" else "vendor")
                for r in records if r["kind"] in ("config", "vendor")}
        screens = _Screens(space.key, records)
        if screen is None and screens.unfinished():
            raise ValueError(f"{journal.path} holds a screened sweep whose shapes {screens.unfinished()} are not yet "
                             "timed in full; continue it with --screen-runs (and the same --screen-margin)")
        compile_s = {(tuple(r["specialization"]), tuple(r["key"])): r["compile_s"]
                     for r in records if r["kind"] == "compile"}
        # Shapes that share a compiled binary run back to back, so each binary is compiled once per sitting.
        shapes = sorted(shapes, key=lambda shape: (kernel.specialization(shape), shape))
        todo = {shape: [c for c in configs if (shape, space.key(c)) not in done] for shape in shapes}
        remaining = sum(len(v) for v in todo.values()) + sum((shape, "vendor") not in done for shape in shapes)
        print(f"{kernel_name} {dtype}: {len(configs)} configs x {len(shapes)} shapes; "
              f"{len(done)} measured before, {remaining} to go; journal {journal.path}", flush=True)
        start = time.monotonic()
        complete = True
        with make_bench(kernel_name, dtype, compile_workers=compile_workers, timing=timing, seed=seed,
                        known_compile_s=compile_s, on_compile=lambda special, key, seconds: journal.append(
                            {"kind": "compile", "specialization": list(special), "key": list(key),
                             "compile_s": seconds})) as bench:
            provenance = bench.provenance(command)
            if screen is not None:
                provenance["screen"] = dataclasses.asdict(screen)
            journal.append({"kind": "provenance", "provenance": provenance, "measured_before": len(done)})
            with tqdm(total=remaining, unit="config", smoothing=0.05, mininterval=5.0, file=sys.stdout) as progress:
                for shape in shapes:
                    if stop_after_s is not None and time.monotonic() - start > stop_after_s:
                        complete = False
                        break
                    if (shape, "vendor") not in done:
                        journal.append(_result_record("vendor", shape, bench.measure_vendor(shape)))
                        progress.update(1)
                    progress.set_postfix_str("x".join(map(str, shape)))

                    deadline = None if stop_after_s is None else start + stop_after_s
                    screening = {} if screen is None else {"repeats": screen.runs}
                    measured = 0
                    for _, result in bench.measure_iter(todo[shape], shape, deadline=deadline, **screening):
                        record = _result_record("config", shape, result, screened=screen is not None)
                        journal.append(record)
                        screens.add(record)
                        progress.update(1)
                        measured += 1
                    if measured < len(todo[shape]):
                        complete = False
                        break
                    if screen is not None and not screens.done(shape):
                        again = screens.to_time_in_full(shape, configs, screen)
                        progress.total += len(again)
                        progress.refresh()
                        measured = 0
                        for _, result in bench.measure_iter(again, shape, deadline=deadline):
                            record = _result_record("config", shape, result)
                            journal.append(record)
                            screens.add(record)
                            progress.update(1)
                            measured += 1
                        if measured < len(again):
                            complete = False
                            break
                        record = {"kind": "screen_done", "shape": list(shape),
                                  "timed_in_full": sum(done_shape == shape for done_shape, _ in screens.full)}
                        journal.append(record)
                        screens.add(record)
        if not complete:
            print(f"stopped after {time.monotonic() - start:.0f} s as asked; run the same command again to continue",
                  flush=True)
            return False
        if not save:
            print(f"measured every shape in {time.monotonic() - start:.0f} s", flush=True)
            return True
        dataset = build_dataset(kernel_name, dtype, whole_shapes(journal.read(), configs, space.key))
        save_dataset(dataset, out)
        print(f"wrote {out} ({len(dataset.measurements)} measurements, {len(dataset.shapes())} shapes) "
              f"in {time.monotonic() - start:.0f} s", flush=True)
        return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tunebench.collect", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", default="matmul")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--shapes", required=True,
                        help="comma-separated, e.g. 1x4096x4096,16x14336x4096; the name of one of the kernel's "
                             "SHAPE_SETS; @D.parquet, a recorded dataset's shapes; or @FILE, a text file of shapes")
    parser.add_argument("--out", type=Path, required=True, help="dataset parquet file to write when complete")
    parser.add_argument("--compile-workers", type=int, default=None, help="default: CPU cores - 1")
    parser.add_argument("--stop-after-s", type=float, default=None, help="stop cleanly after this many seconds")
    parser.add_argument("--limit-configs", type=int, default=None, help="a seeded sample instead of every config")
    parser.add_argument("--configs", type=Path, default=None, help="a JSON list of configs instead of every config")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resume-from", type=Path, default=None,
                        help="a journal (.jsonl or .jsonl.gz) of a sweep begun elsewhere, to continue here")
    parser.add_argument("--screen-runs", type=int, default=None,
                        help="time every config with this many runs first, then only the near-best in full "
                             "(default: every config in full)")
    parser.add_argument("--screen-margin", type=float, default=None,
                        help="with --screen-runs: time in full the configs within this fraction of the shape's "
                             "screened best (default 0.2)")
    parser.add_argument("--flush", choices=FLUSHES, default="zero",
                        help="how the timer evicts the L2 before each run: zero the flush buffer (the default, as "
                             "every recorded dataset) or read it (no dirty lines left to write back; "
                             "docs/measuring.md)")
    parser.add_argument("--gpus", default=None,
                        help="device indices, e.g. 0,1: one collector per GPU, each on its share of the shapes and "
                             "of the CPU cores (default: the one GPU CUDA_VISIBLE_DEVICES shows first)")
    args = parser.parse_args(argv)
    if args.configs is not None and args.limit_configs is not None:
        parser.error("--configs and --limit-configs exclude each other")
    if args.gpus is not None and args.resume_from is not None:
        parser.error("--resume-from seeds one journal; with --gpus each GPU resumes its own journal "
                     "(<out stem>.gpu<N>.journal) in place")
    for option, value, least in (("--stop-after-s", args.stop_after_s, 0),
                                 ("--compile-workers", args.compile_workers, 1),
                                 ("--limit-configs", args.limit_configs, 1)):
        if value is not None and not value >= least:
            parser.error(f"{option} must be at least {least}, got {value}")
    if args.screen_margin is not None and args.screen_runs is None:
        parser.error("--screen-margin needs --screen-runs")
    try:
        screen = None if args.screen_runs is None else Screen(
            args.screen_runs, *(() if args.screen_margin is None else (args.screen_margin,)))
    except ValueError as error:
        parser.error(str(error))
    if args.out.suffix != ".parquet":
        parser.error(f"--out {str(args.out)!r}: a dataset is a .parquet file")
    try:
        kernel = get_kernel(args.kernel)
    except ValueError as error:
        parser.error(str(error))
    if args.dtype not in kernel.DTYPES:
        parser.error(f"unknown dtype {args.dtype!r} for {args.kernel}; allowed: {', '.join(kernel.DTYPES)}")
    try:
        shapes = shapes_argument(args.shapes, args.kernel, kernel.SHAPE_SETS, len(kernel.SHAPE_NAMES))
    except ValueError as error:
        parser.error(str(error) if args.shapes.startswith("@") else f"{error}; or the name of one of {args.kernel}'s "
                     f"shape sets: {', '.join(kernel.SHAPE_SETS)}; or @FILE")
    command = ["python", "-m", "tunebench.collect", *(argv if argv is not None else sys.argv[1:])]
    try:
        configs = json.loads(args.configs.read_text()) if args.configs else None
    except (OSError, json.JSONDecodeError) as error:
        parser.error(f"--configs {str(args.configs)!r} is not a readable JSON list of configs: {error}")
    if configs is not None and not (isinstance(configs, list) and all(isinstance(c, dict) for c in configs)):
        parser.error(f"--configs {str(args.configs)!r} holds {type(configs).__name__}, not a JSON list of configs")
    try:
        if args.gpus is None:
            complete = sweep(args.kernel, args.dtype, shapes, args.out, compile_workers=args.compile_workers,
                             stop_after_s=args.stop_after_s, limit_configs=args.limit_configs, seed=args.seed,
                             command=command, configs=configs, resume_from=args.resume_from, screen=screen,
                             timing=TimingPolicy(flush=args.flush))
        else:
            from tunebench.collect_gpus import parse_gpus, sweep_on_gpus

            complete = sweep_on_gpus(args.kernel, args.dtype, shapes, args.out, parse_gpus(args.gpus),
                                     compile_workers=args.compile_workers, stop_after_s=args.stop_after_s,
                                     limit_configs=args.limit_configs, seed=args.seed, command=command,
                                     configs=configs, screen=screen, timing=TimingPolicy(flush=args.flush))
    except ValueError as error:  # a config outside the space, a journal that cannot be resumed from, bad --gpus
        parser.error(str(error))
    except RuntimeError as error:  # another collector holds the journal; or a GPU's collector died (--gpus), its own
        # traceback printed above
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0 if complete else 3


if __name__ == "__main__":
    raise SystemExit(main())
