"""Kernel variants or chosen configs timed beside cuBLAS in shuffled rounds in this process (not through the bench's
workers), and the summary of such timings: each contender's median over rounds and cuBLAS's median over rounds / it.

The stream-K probe and the tall-tile benchmark under `benchmarks/` share this: each supplies its contenders per shape.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, Union

import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.tables import markdown_table

# A contender is a callable to time, or the status (a string) of one that failed its check and is recorded untimed.
Contender = Union[Callable[[], object], str]


def checked_contenders(runs: Mapping[str, Callable[[], object]], output: Any, expected: Any) -> dict[str, Contender]:
    """Each GEMM run once, into `output` (NaN-filled first), checked against `expected`: the run itself where its
    relative error is within the bf16 tolerance, else a status ("wrong_result: ..." or the compile or launch error)."""
    from tunebench.kernels import matmul

    called: dict[str, Contender] = {}
    for name, run in runs.items():
        output.fill_(float("nan"))
        try:
            run()
            error = matmul.relative_error(output, expected)
            called[name] = run if error <= matmul.TOLERANCE["bfloat16"] else f"wrong_result: error {error:.3g}"
        except Exception as failure:  # noqa: BLE001 (a compile or launch failure is a result to record)
            called[name] = f"error: {type(failure).__name__}: {str(failure)[:160]}"
    return called


def time_contenders(shapes: Iterable[tuple[int, int, int]],
                    contenders: Callable[[tuple[int, int, int]], Mapping[str, Contender]],
                    rounds: int, seed: int) -> pd.DataFrame:
    """Per shape, time every contender `contenders(shape)` names once a round, in a seeded shuffled order, for
    `rounds` rounds with the default timing policy (CUDA events, L2 flushed, the median of its repeats). Rows: shape
    ("MxNxK"), name, round, status ("ok" or the failed contender's), latency_ms (NaN unless ok), gpu."""
    import torch

    from tunebench.measure.timing import Timer, TimingPolicy

    if rounds < 1:
        raise ValueError(f"rounds={rounds!r}: time each contender at least once")
    timer, gpu, shuffle, rows = Timer(TimingPolicy()), torch.cuda.get_device_name(0), random.Random(seed), []
    for shape in shapes:
        called = dict(contenders(shape))
        label = "x".join(map(str, shape))
        rows += [{"shape": label, "name": name, "round": 0, "status": status, "latency_ms": float("nan"), "gpu": gpu}
                 for name, status in called.items() if isinstance(status, str)]
        timed = [name for name, contender in called.items() if not isinstance(contender, str)]
        for round_index in range(rounds):
            for name in shuffle.sample(timed, len(timed)):
                rows.append({"shape": label, "name": name, "round": round_index, "status": "ok",
                             "latency_ms": statistics.median(timer.time(called[name])), "gpu": gpu})
        print(f"{shape}: {len(timed)} contenders x {rounds} rounds, {len(called) - len(timed)} failed", flush=True)
        del called
        torch.cuda.empty_cache()
    return pd.DataFrame(rows)


def contender_summary(timings: pd.DataFrame, title: str, command: str, timing_command: str) -> str:
    """Markdown: per shape, each timed contender's median over rounds and cuBLAS's median / it, fastest first, then
    any contender that failed, with its status. `timing_command` is the command that timed them."""
    if "status" not in timings:  # written before failures were recorded: every row was timed
        timings = timings.assign(status="ok")
    ok = timings[timings.status == "ok"]
    medians = ok.groupby(["shape", "name"], sort=False).latency_ms.median().rename("median_ms").reset_index()
    cublas = medians[medians.name == "cuBLAS"].set_index("shape").median_ms
    medians["vs cuBLAS"] = (medians["shape"].map(cublas) / medians.median_ms).round(3)
    medians["median_ms"] = medians.median_ms.round(4)
    table = medians.sort_values(["shape", "vs cuBLAS"], ascending=[True, False], kind="stable")
    parts = [
        f"# {title}", f"Command: `{command}`",
        f"The timings: `{timing_command}` (--summarize rewrites this from the CSV) on {timings.gpu.iloc[0]}, "
        f"{ok['round'].nunique()} rounds; each round times every contender once per shape in a seeded shuffled order "
        "(the default timing policy: CUDA events, L2 flushed, median of repeats). "
        "Per contender, its median over rounds and cuBLAS's median over rounds / it.",
        markdown_table(table[["shape", "name", "median_ms", "vs cuBLAS"]]),
    ]
    failed = timings[timings.status != "ok"]
    if len(failed):
        parts += ["Failed their check, not timed:", markdown_table(failed[["shape", "name", "status"]])]
    return "\n\n".join(parts) + "\n"


def probe_command(description: str, script: str, title: str, shapes: Iterable[tuple[int, int, int]],
                  contenders: Callable[[tuple[int, int, int], int], Mapping[str, Contender]],
                  argv: Sequence[str] | None = None) -> int:
    """A probe's command line: `--out CSV` times `contenders(shape, multiprocessors)` per shape in `--rounds` rounds on
    this machine's GPU and writes the CSV and its summary beside it (`.md`); `--summarize --out CSV` writes the
    summary again from the CSV, anywhere. `script` is the probe's path from the repository root."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, required=True, help="CSV of every timing; the summary goes beside it")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--summarize", action="store_true", help="only write the summary of --out's timings (no GPU)")
    args = parser.parse_args(argv)
    command = f"PYTHONPATH=lib python3 {script} " + " ".join(sys.argv[1:] if argv is None else argv)
    timing_command = f"PYTHONPATH=lib python3 {script} --out CSV"
    if args.summarize:
        timings = pd.read_csv(args.out)
    else:
        import torch

        multiprocessors = torch.cuda.get_device_properties(0).multi_processor_count
        timings = time_contenders(shapes, lambda shape: contenders(shape, multiprocessors), args.rounds, args.seed)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomically(args.out, timings.to_csv(index=False))
    write_text_atomically(args.out.with_suffix(".md"), contender_summary(timings, title, command, timing_command))
    return 0
