"""Which committed kernel code each recorded dataset timed: the kernel source hashes its provenance records, matched to
the commits whose code hashes the same, beside the current code's hash.

Run: `.venv/bin/python benchmarks/dataset_sources.py` (CPU; minutes the first time, seconds after). Every commit that
touched lib/tunebench/kernels since the collector first recorded a hash is hashed by that commit's own code, in a
subprocess on a `git archive` of its lib/, and cached in build/kernel_source_hashes.json (written after each commit, so
a killed run resumes). Writes results/dataset_sources.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd
import pyarrow.parquet as pq
from tqdm import tqdm

from tunebench.files import write_text_atomically
from tunebench.kernels import KERNELS, get_kernel, kernel_source_sha256
from tunebench.measure.dataset import sitting_kernel_sources
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "results" / "dataset_sources.md"
CACHE = REPO / "build" / "kernel_source_hashes.json"
KERNEL_DIR = "lib/tunebench/kernels"
FIRST_RECORDING_COMMIT = "e727c61"  # the collector's provenance gained kernel_source_sha256 here
# Run by a commit's own code: each family's hash as the collector of that commit recorded it (before 12f003b, the
# SHA-256 of the family module's source, as `inspect.getsource` gives it).
HASH_AT_COMMIT = """
import hashlib, inspect, json, sys
sys.path.insert(0, sys.argv[1])
import tunebench.kernels as kernels
hashes = {}
for name in kernels.KERNELS:
    try:
        module = kernels.get_kernel(name)
        hashes[name] = (kernels.kernel_source_sha256(module) if hasattr(kernels, "kernel_source_sha256")
                        else hashlib.sha256(inspect.getsource(module).encode()).hexdigest()[:16])
    except Exception:  # a family that this commit's code cannot import here
        hashes[name] = None
print(json.dumps(hashes))
"""


def git(*arguments: str) -> str:
    return subprocess.run(["git", *arguments], cwd=REPO, check=True, capture_output=True, text=True).stdout


def kernel_commits() -> list[tuple[str, str]]:
    """(commit, ISO date) of each commit since the first recorded hash that touched the kernels, oldest first."""
    lines = git("log", "--reverse", "--format=%H %cI", f"{FIRST_RECORDING_COMMIT}^..HEAD", "--", KERNEL_DIR)
    return [tuple(line.split(" ", 1)) for line in lines.splitlines()]


def archived_lib(commit: str, folder: Path) -> Path:
    """`commit`'s lib/ folder, extracted from `git archive` under `folder`; its path."""
    archive = subprocess.run(["git", "archive", "--format=tar", commit, "lib"], cwd=REPO, check=True,
                             capture_output=True).stdout
    folder.mkdir(parents=True, exist_ok=True)
    archive_path = folder / "lib.tar"
    archive_path.write_bytes(archive)
    with tarfile.open(archive_path) as tar:
        tar.extractall(folder, filter="data")
    archive_path.unlink()
    return folder / "lib"


def environment_without_pythonpath() -> dict[str, str]:
    """This process's environment less PYTHONPATH, so that a subprocess imports the tunebench it is pointed at."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}


def hashes_at(commit: str) -> dict[str, str | None]:
    """Each kernel family's source hash as `commit`'s code computes it."""
    with tempfile.TemporaryDirectory() as folder:
        lib = archived_lib(commit, Path(folder))
        answer = subprocess.run([sys.executable, "-c", HASH_AT_COMMIT, str(lib)], check=True,
                                capture_output=True, text=True, env=environment_without_pythonpath())
    return json.loads(answer.stdout.splitlines()[-1])


def commit_hashes(commits: Sequence[tuple[str, str]], cache: Path) -> dict[str, dict[str, str | None]]:
    """Every commit's hashes, from the cache where it holds them; the rest computed, the cache rewritten after each."""
    known = json.loads(cache.read_text()) if cache.exists() else {}
    missing = [commit for commit, _ in commits if commit not in known]
    for commit in tqdm(missing, desc="hashing kernels at commits", unit="commit", file=sys.stderr, disable=not missing):
        known[commit] = hashes_at(commit)
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomically(cache, json.dumps(known, indent=1, sort_keys=True) + "\n")
    return {commit: known[commit] for commit, _ in commits}


def source_spans(commits: Sequence[tuple[str, str]], hashes: Mapping[str, Mapping[str, str | None]],
                 kernel: str) -> dict[str, list[tuple[str, str | None]]]:
    """For each hash of `kernel`'s code, the spans of history that had it: (the commit that made the code so, the
    commit that next changed it, or None while it is the newest commit's)."""
    spans: dict[str, list[tuple[str, str | None]]] = {}
    previous = None
    for commit, _ in commits:
        source = hashes[commit].get(kernel)
        if source == previous:
            continue
        if previous is not None:
            spans[previous][-1] = (spans[previous][-1][0], commit)
        if source is not None:
            spans.setdefault(source, []).append((commit, None))
        previous = source
    return spans


def describe_source(source: str, spans: Mapping[str, Sequence[tuple[str, str | None]]],
                    dates: Mapping[str, str]) -> str:
    """'hash: `abc1234` (date) until `def5678` (date)' for each span of history whose code had this hash."""
    if not spans.get(source):
        return f"{source}: no committed code hashes so"

    def name(commit: str) -> str:
        return f"`{commit[:7]}` ({dates[commit][:10]})"

    described = [f"{name(first)} until {name(until)}" if until else f"{name(first)} to now"
                 for first, until in spans[source]]
    return f"{source}: {'; '.join(described)}"


def dataset_rows(paths: Sequence[Path], spans: Mapping[str, Mapping[str, Sequence[tuple[str, str | None]]]],
                 dates: Mapping[str, str], current: Mapping[str, str]) -> list[list[str]]:
    """One row per dataset file: its kernel, sittings, each recorded source and its commits (and how many sittings
    recorded none), and whether every sitting recorded the hash the current code has."""
    rows = []
    for path in paths:
        metadata = json.loads(pq.read_schema(path).metadata[b"tunebench"])
        kernel = metadata["kernel"]
        sources = sitting_kernel_sources(metadata.get("provenance") or {})
        recorded = list(dict.fromkeys(source for source in sources if source))
        unrecorded = sources.count(None)
        described = [describe_source(source, spans.get(kernel, {}), dates) for source in recorded]
        if unrecorded:
            described.append("not recorded" if not recorded else f"not recorded by {unrecorded} of {len(sources)} "
                                                                 "sittings")
        rows.append([os.path.relpath(path, REPO), kernel, str(len(sources)), "<br>".join(described),
                     "yes" if set(sources) == {current.get(kernel)} else "no"])
    return rows


def dataset_paths(datasets: Sequence[Path] | None) -> list[Path]:
    """The dataset files given, and those in the folders given (extensions included); results/datasets' when None."""
    folders = [REPO / "results" / "datasets"] if datasets is None else datasets
    return sorted(path.resolve() for folder in folders
                  for path in ([folder] if folder.is_file() else folder.glob("**/*.parquet")))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, nargs="*", default=None,
                        help="dataset files (default: results/datasets/*.parquet and their extensions)")
    parser.add_argument("--out", type=Path, default=OUT)
    arguments = parser.parse_args(argv)
    paths = dataset_paths(arguments.datasets)
    if not paths:
        parser.error(f"no dataset files in {', '.join(map(str, arguments.datasets or ['results/datasets']))}")
    commits = kernel_commits()
    hashes = commit_hashes(commits, CACHE)
    dates = dict(commits)
    spans = {kernel: source_spans(commits, hashes, kernel) for kernel in KERNELS}
    current = {kernel: kernel_source_sha256(get_kernel(kernel)) for kernel in KERNELS}
    rows = dataset_rows(paths, spans, dates, current)
    text = "\n".join([
        "# Which kernel code each recorded dataset timed",
        "",
        f"Command: `.venv/bin/python benchmarks/dataset_sources.py` at "
        f"`{git('rev-parse', '--short', 'HEAD').strip()}`; "
        f"{len(commits)} commits touched `{KERNEL_DIR}` since the collector first recorded a hash "
        f"(`{FIRST_RECORDING_COMMIT}`), each hashed by its own code.",
        "",
        f"The current code's hashes: {', '.join(f'{kernel} {source}' for kernel, source in current.items())}. "
        "A hash covers the text of the files a family's binaries are built from, comments included, so code that "
        "hashes otherwise may still compile to the same binaries. A replay answers with the recorded timings; a live "
        "run measures the current code.",
        "",
        markdown_table(pd.DataFrame(rows, columns=["dataset", "kernel", "sittings",
                                                   "kernel source recorded: the commits whose code has it",
                                                   "the current code's"])),
        "",
    ])
    write_text_atomically(arguments.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
