"""Whether each recorded dataset's best configs still compile to the same sm_90 binaries under the current kernel code
as under the code that timed them: a replay's recorded timings stand for today's kernels only where they do.

Run: `.venv/bin/python benchmarks/dataset_binaries.py` (CPU, no GPU: Triton compiles for sm_90 through
`measure.cross_compile`; about 9 minutes on 2 cores the first time, seconds after). The code that timed a sitting is
the first commit whose kernel code has the hash it recorded (benchmarks/dataset_sources.py finds them); where it
recorded none, the commit that added the file, an inference marked as such. Up to --shapes-per-dataset shapes of each
file (a seeded sample) have their best config compiled by its sitting's code, in a subprocess on a `git archive` of its
lib/, and by the current code, with line info off; the cubins' hashes are compared, and where they differ the opcodes
of their instructions in order. Each answer is kept at once in build/kernel_binaries.json (per Triton version; the
current code's answers under its kernel source hashes), so a killed run resumes. Writes results/dataset_binaries.md.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq
import triton
from tqdm import tqdm

from dataset_sources import (CACHE as SOURCE_CACHE, REPO, archived_lib, commit_hashes, dataset_paths,
                             environment_without_pythonpath, git, kernel_commits, source_spans)
from tunebench.files import write_text_atomically
from tunebench.kernels import KERNELS, get_kernel, kernel_source_sha256
from tunebench.measure.dataset import sitting_kernel_sources
from tunebench.tables import markdown_table

OUT = REPO / "results" / "dataset_binaries.md"
CACHE = REPO / "build" / "kernel_binaries.json"
CURRENT = "current:"  # the code key of the working tree's kernels begins so, and goes on with their source hashes
UNCOMPILED_KERNELS = {"compressed_matmul": "its compile_only builds several kernels and returns none of them"}
JOBS_PER_SUBPROCESS = 16
# Run by a commit's own code (argv: its lib/ folder, the current measure/cross_compile.py): for each job, the sha256
# prefixes of its sm_90 cubin and of the opcodes of its instructions in order (their operands left out, as `nvdisasm`,
# bundled with Triton, lists them; empty where it is missing), or the first line of the error that stopped its compile.
COMPILE_AT_COMMIT = r"""
import hashlib, importlib.util, json, os, re, subprocess, sys, tempfile
import triton
sys.path.insert(0, sys.argv[1])
spec = importlib.util.spec_from_file_location("current_cross_compile", sys.argv[2])
cross_compile = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cross_compile)
from triton.backends.compiler import GPUTarget
cross_compile.compile_for(GPUTarget("cuda", 90, 32))
import tunebench.kernels as kernels
complete = getattr(kernels, "complete_config", lambda name, config: config)
nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
instruction = re.compile(r"/\*[0-9a-f]{4,}\*/\s+((?:@!?U?P[T0-9]+\s+)?[A-Z][A-Z0-9_.]*)")


def opcodes_hash(cubin):
    if not os.path.exists(nvdisasm):
        return ""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        listing = subprocess.run([nvdisasm, "-c", file.name], capture_output=True, text=True, check=True).stdout
    return hashlib.sha256(" ".join(instruction.findall(listing)).encode()).hexdigest()[:16]


answers = []
for kernel, config, shape, dtype in json.load(sys.stdin):
    try:
        compiled = kernels.get_kernel(kernel).compile_only(complete(kernel, config), tuple(shape), dtype)
        cubin = compiled.asm["cubin"]
        answers.append(hashlib.sha256(cubin).hexdigest()[:16] + " " + opcodes_hash(cubin))
    except Exception as error:
        answers.append("error: " + (f"{type(error).__name__}: {error}".splitlines() or [""])[0][:200])
print(json.dumps(answers))
"""


@dataclass(frozen=True)
class TimingCode:
    """The code that timed (some of) a dataset: a commit, or None where no commit holds it, how that is known, and
    whether it is inferred (the sitting recorded no hash)."""

    commit: str | None
    how: str
    inferred: bool = False


class Best(NamedTuple):
    """A shape's best ok config, and the sitting that timed it (None where the file does not say)."""

    shape: tuple[int, ...]
    config: dict[str, Any]
    sitting: int | None


def best_configs(path: Path, count: int, seed: int = 0) -> list[Best]:
    """The best ok config of up to `count` of the file's shapes, a seeded sample in shape order; the file alone,
    without its extensions."""
    schema = pq.read_schema(path)
    metadata = json.loads(schema.metadata[b"tunebench"])
    shape_names = list(metadata["shape_names"])
    parameter_names = [parameter["name"] for parameter in metadata["parameters"]]
    sitting = ["sitting"] if "sitting" in schema.names else []
    table = pq.read_table(path, columns=["source", *shape_names, *parameter_names, *sitting, "status", "latency_ms"])
    # filtered before pandas sees it: the vendor rows' null parameters would turn integer columns into floats
    ok = table.filter(pc.and_(pc.equal(table["source"], "triton"), pc.equal(table["status"], "ok"))).to_pandas()
    best = ok.loc[ok.groupby(shape_names, sort=True)["latency_ms"].idxmin()]
    rows = [Best(tuple(int(row[name]) for name in shape_names), {name: plain(row[name]) for name in parameter_names},
                 None if pd.isna(row.get("sitting", pd.NA)) else int(row["sitting"]))
            for row in best.to_dict("records")]
    chosen = sorted(random.Random(seed).sample(range(len(rows)), count)) if len(rows) > count else range(len(rows))
    return [rows[index] for index in chosen]


def plain(value: Any) -> Any:
    """A numpy scalar as the Python value a config holds."""
    return value.item() if hasattr(value, "item") else value


def timing_codes(provenance: Mapping[str, Any], spans: Mapping[str, Sequence[tuple[str, str | None]]],
                 adding_commit: str | None) -> list[TimingCode]:
    """The code that timed each sitting the provenance lists (one, when it lists none): the first commit whose code
    has the sitting's recorded kernel source hash (None where no commit holds it); where the sitting recorded none,
    the commit that added the file (None: not committed yet), as an inference."""
    codes = []
    for source in sitting_kernel_sources(provenance):
        if source is None and adding_commit is None:
            codes.append(TimingCode(None, "not recorded, and the file is not committed", inferred=True))
        elif source is None:
            codes.append(TimingCode(adding_commit, f"not recorded; inferred: the commit that added the file, "
                                                   f"`{adding_commit[:7]}`", inferred=True))
        elif spans.get(source):
            codes.append(TimingCode(spans[source][0][0], f"{source}: `{spans[source][0][0][:7]}`"))
        else:
            codes.append(TimingCode(None, f"{source}: no commit holds this code"))
    return codes


Job = tuple[str, tuple[tuple[str, Any], ...], tuple[int, ...], str]  # kernel, config as sorted items, shape, dtype


def job(kernel: str, config: Mapping[str, Any], shape: Sequence[int], dtype: str) -> Job:
    """A compile job as a hashable tuple, so that a job met twice is compiled once."""
    return kernel, tuple(sorted(config.items())), tuple(shape), dtype


def job_key(code: str, compile_job: Job) -> str:
    """The cache's key of a job's answer by one code (the current code's key or a commit)."""
    kernel, config, shape, dtype = compile_job
    return json.dumps([code, kernel, dict(config), list(shape), dtype])


def compile_batch(lib: Path, jobs: Sequence[Job]) -> list[str]:
    """Each job's cubin hash (or error) as the code in `lib` compiles it, in a subprocess with a fresh Triton cache."""
    with tempfile.TemporaryDirectory() as cache:
        environment = {**environment_without_pythonpath(), "TRITON_DISABLE_LINE_INFO": "1",
                       "TRITON_CACHE_DIR": cache, "TRITON_DEFAULT_FP_FUSION": "1",
                       "TRITON_INTERPRET": "0"}  # the interpreter compiles nothing
        answer = subprocess.run(
            [sys.executable, "-c", COMPILE_AT_COMMIT, str(lib), str(REPO / "lib/tunebench/measure/cross_compile.py")],
            input=json.dumps([[kernel, dict(config), shape, dtype] for kernel, config, shape, dtype in jobs]),
            capture_output=True, text=True, env=environment, timeout=120 * len(jobs))
    if answer.returncode != 0:
        line = (answer.stderr.strip().splitlines() or [f"exit status {answer.returncode}"])[-1]
        return [f"error: the compile subprocess failed: {line[:200]}"] * len(jobs)
    return json.loads(answer.stdout.splitlines()[-1])


def compile_all(jobs: Mapping[str, Sequence[Job]], cache: Path, workers: int) -> dict[str, str]:
    """Every job's answer by code key (the current code's or a commit): from the cache where it holds it, the rest
    compiled in `workers` subprocesses at once, the cache rewritten after each batch."""
    stored = json.loads(cache.read_text()) if cache.exists() else {}
    known: dict[str, str] = stored.get("answers", {}) if stored.get("triton") == triton.__version__ else {}
    missing = {code: [each for each in dict.fromkeys(code_jobs) if job_key(code, each) not in known]
               for code, code_jobs in jobs.items()}
    batches = [(code, todo[start:start + JOBS_PER_SUBPROCESS]) for code, todo in missing.items()
               for start in range(0, len(todo), JOBS_PER_SUBPROCESS)]
    with tempfile.TemporaryDirectory() as folder, concurrent.futures.ThreadPoolExecutor(workers) as pool, \
            tqdm(total=sum(len(batch) for _, batch in batches), desc="compiling best configs for sm_90",
                 unit="config", file=sys.stderr, disable=not batches) as progress:
        libs = {code: REPO / "lib" if code.startswith(CURRENT) else archived_lib(code, Path(folder) / code)
                for code in {code for code, _ in batches}}
        futures = {pool.submit(compile_batch, libs[code], batch): (code, batch) for code, batch in batches}
        for future in concurrent.futures.as_completed(futures):
            code, batch = futures[future]
            known.update({job_key(code, each): answer for each, answer in zip(batch, future.result())})
            cache.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomically(cache, json.dumps({"triton": triton.__version__, "answers": known}, indent=0) + "\n")
            progress.update(len(batch))
    return known


@dataclass(frozen=True)
class Comparison:
    """How the jobs compiled by the code that timed them compare with the current code's: indices of the jobs with
    the same cubin, with the same opcodes in the same order but other operands (a parameter's offset, a constant), and
    with other instructions; the errors met."""

    same: list[int]
    same_opcodes: list[int]
    different: list[int]
    errors: list[str]


def compare(then: Sequence[str], now: Sequence[str]) -> Comparison:
    """Each job's answers (cubin hash and opcode hash, or an error) by the two codes, compared."""
    errors = [answer for answer in [*then, *now] if answer.startswith("error")]
    compiled = [index for index, (a, b) in enumerate(zip(then, now))
                if not a.startswith("error") and not b.startswith("error")]
    cubins = {index: (then[index].split(" ")[0], now[index].split(" ")[0]) for index in compiled}
    opcodes = {index: (then[index].split(" ")[1:], now[index].split(" ")[1:]) for index in compiled}
    same = [index for index in compiled if cubins[index][0] == cubins[index][1]]
    same_opcodes = [index for index in compiled if index not in same and opcodes[index][0] == opcodes[index][1]
                    and opcodes[index][0] not in ([], [""])]
    different = [index for index in compiled if index not in same and index not in same_opcodes]
    return Comparison(same, same_opcodes, different, errors)


def code_groups(codes: Sequence[TimingCode], best: Sequence[Best]) -> list[tuple[TimingCode, list[Best]]]:
    """The sampled best configs each timing code compiles: where every one names its sitting, each goes to its
    sitting's code; otherwise every distinct recorded code compiles the whole sample (the inferred one only where no
    sitting recorded a hash: which rows the others timed is unknown, and a later recorded sitting may have timed
    them again)."""
    if not best or any(item.sitting is None for item in best):
        recorded = [code for code in codes if not code.inferred] or list(codes)
        return [(code, list(best)) for code in dict.fromkeys(recorded)]
    beyond = sorted({item.sitting for item in best if item.sitting >= len(codes)})
    if beyond:
        raise ValueError(f"rows name sittings {beyond}, but the provenance lists {len(codes)}")
    groups: dict[TimingCode, list[Best]] = {}
    for item in best:
        groups.setdefault(codes[item.sitting], []).append(item)
    return list(groups.items())


def describe(best: Sequence[tuple[tuple[int, ...], Mapping[str, Any]]], comparison: Comparison, shown: int = 4) -> str:
    """The note of one row: the shapes whose best config compiles to other instructions today (the first few), and
    the errors."""
    parts = []
    if comparison.different:
        shapes = ", ".join("x".join(map(str, best[index][0])) for index in comparison.different[:shown])
        parts.append(f"other instructions on {shapes}{', ...' if len(comparison.different) > shown else ''}")
    if comparison.errors:
        parts.append(f"{len(comparison.errors)} failed, e.g. {comparison.errors[0].removeprefix('error: ')}")
    return "; ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, nargs="*", default=None,
                        help="dataset files (default: results/datasets/*.parquet and their extensions)")
    parser.add_argument("--shapes-per-dataset", type=int, default=16, help="best configs checked per file (default 16)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="compile subprocesses at once")
    parser.add_argument("--out", type=Path, default=OUT)
    arguments = parser.parse_args(argv)
    if arguments.shapes_per_dataset < 1:
        parser.error(f"--shapes-per-dataset must be at least 1, got {arguments.shapes_per_dataset}")
    paths = dataset_paths(arguments.datasets)
    if not paths:
        parser.error(f"no dataset files in {', '.join(map(str, arguments.datasets or ['results/datasets']))}")
    commits = kernel_commits()
    spans = {kernel: source_spans(commits, commit_hashes(commits, SOURCE_CACHE), kernel) for kernel in KERNELS}
    current = {kernel: kernel_source_sha256(get_kernel(kernel)) for kernel in KERNELS}
    current_code = CURRENT + ",".join(current.values())
    plan = []  # (path, kernel, dtype, [(TimingCode, [Best])])
    jobs: dict[str, list[Job]] = {}
    for path in paths:
        metadata = json.loads(pq.read_schema(path).metadata[b"tunebench"])
        kernel, dtype = metadata["kernel"], metadata["dtype"]
        if kernel in UNCOMPILED_KERNELS:
            plan.append((path, kernel, dtype, []))
            continue
        adding = (git("log", "--diff-filter=A", "--format=%H", "--", str(path.relative_to(REPO))).split()
                  if path.is_relative_to(REPO) else [])
        codes = timing_codes(metadata.get("provenance") or {}, spans[kernel], adding[-1] if adding else None)
        groups = code_groups(codes, best_configs(path, arguments.shapes_per_dataset))
        plan.append((path, kernel, dtype, groups))
        for code, best in groups:
            for key in [current_code, code.commit] if code.commit else [current_code]:
                jobs.setdefault(key, []).extend(job(kernel, item.config, item.shape, dtype) for item in best)
    known = compile_all(jobs, CACHE, arguments.workers)
    rows = []
    for path, kernel, dtype, groups in plan:
        name = os.path.relpath(path, REPO)
        if not groups:
            rows.append([name, kernel, "", "", "", "", "", f"not compiled: {UNCOMPILED_KERNELS[kernel]}"])
            continue
        for code, best in groups:
            if code.commit is None:
                rows.append([name, kernel, code.how, str(len(best)), "", "", "",
                             "not compiled: no commit holds the code"])
                continue
            now = [known[job_key(current_code, job(kernel, item.config, item.shape, dtype))] for item in best]
            then = [known[job_key(code.commit, job(kernel, item.config, item.shape, dtype))] for item in best]
            comparison = compare(then, now)
            rows.append([name, kernel, code.how, str(len(best)), str(len(comparison.same)),
                         str(len(comparison.same_opcodes)), str(len(comparison.different)), describe(best, comparison)])
    totals = [sum(int(row[column]) for row in rows if row[column]) for column in (4, 5, 6)]
    text = "\n".join([
        "# Whether each recorded dataset's best configs compile today as they did when timed",
        "",
        f"Command: `.venv/bin/python benchmarks/dataset_binaries.py` at `{git('rev-parse', '--short', 'HEAD').strip()}`"
        f" (Triton {triton.__version__} on this CPU, compiling for sm_90 with line info off; the datasets were timed "
        "with Triton 3.6, so 'same' means the two codes lower to the same binary under one compiler).",
        "",
        f"The current code's hashes: {', '.join(f'{kernel} {source}' for kernel, source in current.items())}. Per "
        f"file, up to {arguments.shapes_per_dataset} shapes (a seeded sample) have their recorded best config "
        "compiled by the code that timed them and by the current code. Where each row names the sitting that timed it, "
        "a shape's best config is compiled by its sitting's code (one table row per code); where rows name no sitting, "
        "each recorded code compiles the whole sample, and sittings that recorded none (dataset_sources.md counts "
        "them) are left out unless no sitting recorded one. 'Same opcodes, other operands': the two cubins differ, "
        "but their instructions' opcodes, in order, are the same (`nvdisasm`); what differs is operands, such as the "
        "offset of a kernel parameter after the signature changed.",
        "",
        f"In all: {totals[0]} same cubin, {totals[1]} same opcodes with other operands, {totals[2]} other "
        f"instructions, of {sum(totals)} compiled pairs.",
        "",
        markdown_table(pd.DataFrame(rows, columns=["dataset", "kernel", "code that timed it: hash, first commit",
                                                   "configs", "same cubin today", "same opcodes, other operands",
                                                   "other instructions", "note"])),
        "",
    ])
    write_text_atomically(arguments.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
