"""Helion 1.0.0's autotuner and tunebench's live search, side by side on one GPU in one sitting: how long each takes to
reach a fraction of cuBLAS's speed, and how fast each one's final kernel runs when all are timed again by one timer.

On a GPU machine, with Helion's wheels on the path (`build/helion_site`;
`results/helion_side_by_side/4096x4096x4096/README.md` says how to fetch them):
- `python3 benchmarks/helion_side_by_side.py helion --effort quick --autotuner LFBOPatternSearch --seed 0 --out D`
  autotunes `helion_matmul.matmul` once, in this process, from empty Helion and Triton caches. Helion's own log
  (`D/<run>.csv`: each config's timestamp and time by Helion's benchmark) is the trace; `D/<run>.json` holds cuBLAS
  timed by the same benchmark function before the clock starts, when the autotuner's log started, and, once it ends,
  the wall seconds, the config and its error against torch.matmul. A run killed by a time limit keeps its trace.
- `python3 benchmarks/helion_side_by_side.py rounds --out D --ours T1.parquet ...` times, in one process and by
  Helion's benchmark function, cuBLAS, each finished Helion run's config and each tunebench trace's best config
  (`live_search.py` traces of the TMA GEMM or the pointer GEMM) in shuffled rounds, into the next free
  `D/rounds_<n>.csv`.
Anywhere: `.venv/bin/python benchmarks/helion_side_by_side.py summarize --out D --ours T1.parquet ...` writes
`D/summary.md`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from tunebench.collect import parse_shapes
from tunebench.files import write_text_atomically
from tunebench.peer_runs import (arms_table, helion_outcome, helion_runs, our_runs, reach_row, rounds_files,
                                 rounds_table)
from tunebench.tables import markdown_table

EFFORTS = ("quick", "full")
AUTOTUNERS = ("LFBOPatternSearch", "LFBOTreeSearch")  # Helion 1.0.0's LFBO searches; the second is its default
CUBLAS_REPEATS = 5  # benchmark calls whose median is a run's cuBLAS latency
ROUNDS = 8


def run_name(effort: str, autotuner: str, seed: int) -> str:
    """A Helion run's file stem."""
    return f"helion_{effort}_{autotuner}_seed{seed}"


def check_choice(name: str, value: str, allowed: Sequence[str]) -> None:
    """A ValueError naming `value` and the allowed ones, unless it is one of them."""
    if value not in allowed:
        raise ValueError(f"{name} {value!r} is not one of {', '.join(allowed)}")


def median_benchmark(bench: Any, fn: Any, repeats: int) -> float:
    """The median of `repeats` calls of Helion's benchmark function (each the median of its own repetitions)."""
    return float(np.median([bench(fn, return_mode="median", rep=50) for _ in range(repeats)]))


def run_helion(effort: str, autotuner: str, seed: int, shape: tuple[int, int, int], out: Path) -> dict[str, Any]:
    """One Helion autotuning run from empty caches, its trace logged by Helion into `out`; the run's record."""
    check_choice("effort", effort, EFFORTS)
    check_choice("autotuner", autotuner, AUTOTUNERS)
    out.mkdir(parents=True, exist_ok=True)
    name = run_name(effort, autotuner, seed)
    os.environ.update(HELION_AUTOTUNER=autotuner, HELION_AUTOTUNE_RANDOM_SEED=str(seed),
                      HELION_AUTOTUNE_LOG=str(out / name), HELION_AUTOTUNE_PROGRESS_BAR="0",
                      HELION_CACHE_DIR=tempfile.mkdtemp(prefix="helion-cache-"),
                      TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="triton-helion-"))
    import torch
    import triton
    from helion.autotuner.benchmarking import do_bench
    from helion.autotuner.logger import AutotuneLogSink

    from helion_matmul import helion_matmul

    m, n, k = shape
    generator = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn((m, k), device="cuda", dtype=torch.bfloat16, generator=generator)
    y = torch.randn((k, n), device="cuda", dtype=torch.bfloat16, generator=generator)
    record: dict[str, Any] = {
        "run": name, "effort": effort, "autotuner": autotuner, "seed": seed, "shape": list(shape),
        "cublas_ms": median_benchmark(do_bench, lambda: torch.matmul(x, y), CUBLAS_REPEATS),
        "gpu": torch.cuda.get_device_name(), "helion": importlib.metadata.version("helion"),
        "torch": torch.__version__, "triton": triton.__version__, "command": " ".join(["python3", *sys.argv]),
        "finished": False}
    write_text_atomically(out / f"{name}.json", json.dumps(record, indent=1))
    start_run = AutotuneLogSink.start_run

    def noting_start(sink: AutotuneLogSink) -> None:
        """Record when the log's clock starts on the run's, at once, so that a run killed later keeps it."""
        record["log_start_s"] = time.perf_counter() - started
        write_text_atomically(out / f"{name}.json", json.dumps(record, indent=1))
        start_run(sink)

    AutotuneLogSink.start_run = noting_start
    kernel = helion_matmul(effort)
    started = time.perf_counter()
    bound = kernel.bind((x, y))
    config = bound.autotune((x, y))
    wall_s = time.perf_counter() - started
    bound.set_config(config)
    result = bound(x, y).float()
    expected = torch.matmul(x, y).float()
    record.update(finished=True, wall_s=wall_s, config=config.to_json(),
                  relative_error=float((result - expected).norm() / expected.norm()))
    write_text_atomically(out / f"{name}.json", json.dumps(record, indent=1))
    print(f"{name}: {wall_s:.1f} s, config {config}", flush=True)
    return record


def time_rounds(out: Path, traces: Sequence[Path], seed: int) -> pd.DataFrame:
    """cuBLAS, every finished Helion run's config and every tunebench run's best config, timed in ROUNDS shuffled
    rounds by Helion's benchmark function in this process; written to the next free `out/rounds_<n>.csv`, so that
    no earlier sitting's rounds are overwritten."""
    import helion
    import torch
    from helion.autotuner.benchmarking import do_bench

    from helion_matmul import helion_matmul
    from tunebench.kernels import matmul, matmul_tma
    from tunebench.redrive import config_of_key_text

    finished = [run for run in helion_runs(out) if run["finished"]]
    shapes = {tuple(run["shape"]) for run in finished}
    if len(shapes) != 1:
        raise ValueError(f"the finished Helion runs in {out} are of shapes {sorted(shapes)}; rounds need exactly one")
    shape = shapes.pop()
    kernels = {"matmul_tma": matmul_tma, "matmul": matmul}
    ours = our_runs(traces)
    inputs = {name: kernels[name].make_inputs(shape, "bfloat16", seed=seed)
              for name in {"matmul", *(run["kernel"] for run in ours)}}  # one seed: equal operands for each kernel
    x, y = inputs["matmul"].a, inputs["matmul"].b
    calls = {"cublas": lambda: torch.matmul(x, y)}
    for run in finished:
        bound = helion_matmul("quick").bind((x, y))
        bound.set_config(helion.Config.from_json(run["config"]))
        calls[run["run"]] = lambda bound=bound: bound(x, y)
    for run in ours:
        kernel = kernels[run["kernel"]]
        config = config_of_key_text(kernel.config_space(), run["config_key"])
        calls[run["run"]] = lambda kernel=kernel, config=config, given=inputs[run["kernel"]]: kernel.run(config, given)
    for call in calls.values():
        call()
    rng = np.random.default_rng(seed)
    rows = []
    for round_index in range(ROUNDS):
        for index in rng.permutation(len(calls)):
            name = list(calls)[index]
            rows.append({"round": round_index, "run": name, "ms": do_bench(calls[name], return_mode="median",
                                                                           rep=50)})
        print(f"round {round_index + 1} of {ROUNDS}", flush=True)
    frame = pd.DataFrame(rows).assign(gpu=torch.cuda.get_device_name(), shape="x".join(map(str, shape)))
    write_text_atomically(out / f"rounds_{len(rounds_files(out)) + 1}.csv", frame.to_csv(index=False))
    return frame


def summarize(out: Path, traces: Sequence[Path], command: str) -> str:
    """The reach table of every run and each rounds file's table; written to `out/summary.md`."""
    runs = helion_runs(out) + our_runs(traces)
    if not runs:
        raise ValueError(f"no Helion run in {out} and no tunebench trace given")
    helion_notes = [f"- {run['run']}: {helion_outcome(run)}" for run in runs if run["run"].startswith("helion_")]
    reach = pd.DataFrame([reach_row(run) for run in runs])
    files = rounds_files(out)
    latest = pd.read_csv(files[-1]) if files else None
    parts = ["# Helion and tunebench, side by side", f"Command: `{command}`",
             "Per arm, over its seeds" + (f" (the final configs' speed from the last rounds, `{files[-1].name}`)"
                                         if files else "") + ":", markdown_table(arms_table(reach, latest)),
             "Per run: seconds from its clock's start (Helion: the kernel's bind, before autotuning; tunebench: the "
             "bench's start, its workers' start-up included) until the best config so far reached each fraction of "
             "cuBLAS's speed, each system judged by its own timer and its own cuBLAS timing of the same sitting:",
             markdown_table(reach), "Helion's runs:", *helion_notes]
    for path in files:
        rounds = pd.read_csv(path)
        parts += [f"`{path.name}`: each finished run's final config and cuBLAS timed again in "
                  f"{rounds['round'].nunique()} shuffled rounds by Helion's benchmark function (the median of 50 ms "
                  f"of repetitions, L2 flushed before each), in one process on {rounds.gpu.iloc[0]}, "
                  f"{rounds['shape'].iloc[0]}:", markdown_table(rounds_table(rounds))]
    text = "\n\n".join(parts) + "\n"
    write_text_atomically(out / "summary.md", text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["helion", "rounds", "summarize"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--effort", default="quick", choices=EFFORTS)
    parser.add_argument("--autotuner", default="LFBOPatternSearch", choices=AUTOTUNERS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shape", default="4096x4096x4096", help="MxNxK")
    parser.add_argument("--ours", type=Path, nargs="*", default=[], help="live_search.py traces (.parquet)")
    args = parser.parse_args()
    missing = [str(path) for path in args.ours if not path.exists()]
    if missing:
        parser.error(f"no such trace: {', '.join(missing)}")
    shapes = parse_shapes(args.shape, 3)
    if len(shapes) != 1:
        parser.error(f"--shape {args.shape!r}: give one MxNxK")
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # helion_matmul, beside this script
    if args.action == "helion":
        run_helion(args.effort, args.autotuner, args.seed, shapes[0], args.out)
    elif args.action == "rounds":
        time_rounds(args.out, args.ours, args.seed)
    else:
        try:
            print(summarize(args.out, args.ours, " ".join([".venv/bin/python", *sys.argv])))
        except ValueError as error:
            parser.error(str(error))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
