"""Live search on a GPU: strategies tune the GEMM for each shape against the real device, on the wall clock, each
from a cold Triton cache; the trace records when each fraction of cuBLAS speed, and of the best any strategy found
for the shape, was first reached. A strategy `warm:<name>` is <name> warm-started with a predictor's top k configs;
`warm:<name>:restart` starts <name>'s search copies from them at once and runs <name> afresh when it stops
(`WarmStartSettings.restart`), and `warm:<name>:restart<n>` ends that after n fresh runs in a row that found nothing
1 % faster (`restart_patience`).

Run on a GPU machine: `PYTHONPATH=lib python3 benchmarks/live_search.py --strategies lfbo pattern random --seconds 120`
(writes results/live_search/<gpu>_<dtype>_<shape>.parquet and .md per shape; `--kernel matmul_tma` searches the TMA
kernel's space instead, into <gpu>_matmul_tma_<dtype>_<shape>.*; `--kernel both` races each strategy's search of the
pointer GEMM against its search of the TMA GEMM, `tunebench.family_race.race_searches` with `--probe-batches` and
`--race-margin`, into <gpu>_both_<dtype>_<shape>.*). With a predictor:
`... --strategies lfbo warm:lfbo --predictor results/config_prediction/matmul_bfloat16_h100.predictor --shapes A,B`.
Anywhere, from recorded traces: `.venv/bin/python benchmarks/live_search.py --summarize T1.parquet T2.parquet ...
--summary-out S.md` writes each shape's table and the medians over the shapes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from tunebench.collect import parse_shapes
from tunebench.family_race import race_searches
from tunebench.files import write_parquet_atomically, write_text_atomically
from tunebench.kernels import get_kernel
from tunebench.live_traces import across_shapes, summary_rows
from tunebench.measure.dataset import PARQUET_OPTIONS
from tunebench.search import NAMES, make_strategy, strategy_class
from tunebench.search.base import Strategy
from tunebench.search.warm_start import warm_start
from tunebench.space import Space
from tunebench.study import Budget, Search, key_text, run_search
from tunebench.tables import markdown_table

WARM = "warm:"
BOTH = "both"  # --kernel both: a race of the two GEMM families, each searched by the same strategy
FAMILY_KERNELS = {"pointer": "matmul", "TMA": "matmul_tma"}
WARM_NAME = re.compile(r"warm:(?P<inner>[^:]+)(?P<restart>:restart(?P<patience>[1-9][0-9]*)?)?")


def parse_strategy_name(name: str) -> tuple[str, dict[str, Any] | None]:
    """(inner name, warm-start keywords) of `warm:<inner>[:restart[<n>]]`, (name, None) for any other name; a clear
    error for a malformed or unknown one."""
    if not name.startswith(WARM):
        inner, warm = name, None
    elif match := WARM_NAME.fullmatch(name):
        inner = match["inner"]
        warm = {"restart": bool(match["restart"]), "restart_patience": int(match["patience"] or 0)}
    else:
        inner, warm = "", {}
    if inner not in NAMES and "." not in inner:
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(NAMES)} or a Strategy subclass's import path, "
                         f"each also as {WARM}<name>, {WARM}<name>:restart or {WARM}<name>:restart<n> (n >= 1) with "
                         "--predictor")
    if "." in inner:
        strategy_class(inner)
    return inner, warm


def check_strategy_names(names: Sequence[str], predictor: Path | None, kernel: str = "matmul") -> None:
    """Registered names, or warm-started ones (`parse_strategy_name`) when a predictor is given and one kernel family
    is searched; a clear error otherwise."""
    for name in names:
        if parse_strategy_name(name)[1] is not None:
            if kernel == BOTH:
                raise ValueError(f"strategy {name!r} is warm-started by a predictor of one kernel family; --kernel "
                                 f"{BOTH} races two: give it cold strategies")
            if predictor is None:
                raise ValueError(f"strategy {name!r} is warm-started by a predictor: give --predictor")


def check_shape(kernel: str, shape: Sequence[int]) -> tuple[int, ...]:
    """The shape as the kernel family (or, for --kernel both, each of the two) takes it; the family's clear error for
    one it cannot run."""
    kernels = FAMILY_KERNELS.values() if kernel == BOTH else [kernel]
    checked = [get_kernel(name).check_shape(shape) for name in kernels]
    return checked[0]  # the families agree on a shape they both take


def trace_name(kernel: str, dtype: str, shape: Sequence[int]) -> str:
    """A trace's file name after its GPU model and without its suffix: kernel (but the pointer GEMM's), dtype, shape."""
    return f"{'' if kernel == 'matmul' else f'{kernel}_'}{dtype}_{'x'.join(map(str, shape))}"


def check_no_trace_yet(out: Path, kernel: str, dtype: str, shapes: Sequence[Sequence[int]]) -> None:
    """Raise a ValueError naming any trace of these shapes that `out` already holds (of any GPU), which this run
    would overwrite; before the search, so that no run's trace is lost to the next."""
    names = {trace_name(kernel, dtype, shape) for shape in shapes}
    found = sorted(str(path) for path in out.glob("*.parquet") if path.stem.split("_", 1)[-1] in names)
    if found:
        raise ValueError(f"--out {out} already holds {', '.join(found)}; give this run a folder of its own (one per "
                         "seed, say), so that no recorded trace is overwritten")


def live_strategy(name: str, space: Space, seed: int, seeds: Sequence[dict[str, Any]]) -> Strategy:
    """The strategy `name`; for `warm:<inner>...`, <inner> warm-started with `seeds` (the predictor's top k) as the
    name says (`parse_strategy_name`)."""
    inner, warm = parse_strategy_name(name)
    if warm is not None:
        return warm_start(inner, space, seeds, seed=seed, **warm)
    return make_strategy(name, space, seed=seed)


def with_result_times(trace: pd.DataFrame, measured: Sequence[tuple[dict[str, Any], float, Any]],
                      space: Space) -> pd.DataFrame:
    """The trace with, per evaluation, the clock's reading when its result came (`result_s`), its binary's compile
    seconds and its benchmark seconds (`LiveEvaluator.measured`): when each compile and timing ended inside a batch."""
    times = pd.DataFrame([{"config_key": key_text(space.key(config)), "result_s": seconds,
                           "compile_s": result.compile_s, "bench_s": result.bench_s}
                          for config, seconds, result in measured],
                         columns=["config_key", "result_s", "compile_s", "bench_s"])
    return trace.merge(times.drop_duplicates("config_key"), on="config_key", how="left")


def race_live(name: str, shape: Sequence[int], dtype: str, seconds: float, seed: int, probe_batches: int,
              margin: float, make_bench: Any = None) -> tuple[pd.DataFrame, float, float, dict[str, Any]]:
    """Strategy `name` searching the pointer and the TMA GEMM at `shape`, raced on this GPU
    (`family_race.race_searches`): (the combined trace, cuBLAS ms measured after it, the seconds until both searches
    could start, the pointer bench's provenance). Both families' benches and evaluators start before the first ask,
    so a family's budget of `seconds` runs on the race's wall clock; the trace's time_s adds up the batches' own
    seconds, which leaves out only the moments between them. `make_bench`: GpuBench, or a stand-in in tests."""
    if make_bench is None:
        from tunebench.measure.live import GpuBench as make_bench
    from tunebench.measure.live import LiveEvaluator

    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        benches = {family: stack.enter_context(make_bench(kernel, dtype, seed=seed))
                   for family, kernel in FAMILY_KERNELS.items()}
        searches = {family: Search(make_strategy(name, bench.space, seed=seed), LiveEvaluator(bench, shape),
                                   Budget(seconds=seconds)) for family, bench in benches.items()}
        setup_s = time.monotonic() - started
        trace = race_searches(searches, probe_batches, margin)
        vendor_ms = benches["pointer"].measure_vendor(tuple(shape)).latency_ms
        provenance = benches["pointer"].provenance(["python", *sys.argv])
    return trace, vendor_ms, setup_s, provenance


def summarize(traces: Sequence[Path], out: Path, command: str) -> str:
    """Each recorded trace's table, then `across_shapes` over them, written to `out` (markdown); returns the text."""
    summaries, parts = [], []
    for path in traces:
        summary = summary_rows(pd.read_parquet(path))
        summaries.append(summary)
        parts.append(f"## {path.parent.name}/{path.stem}\n\n{markdown_table(summary)}")
    shapes = len({path.stem for path in traces})  # a trace's file is named by its GPU, kernel, dtype and shape
    text = "\n\n".join([f"# Live search: {len(traces)} traces of {shapes} shape(s)\n\nCommand: `{command}`",
                          "Per strategy, over the traces (the `shapes` column counts traces):",
                          markdown_table(across_shapes(summaries)), *parts]) + "\n"
    write_text_atomically(out, text)
    return text


def race_shape(args: argparse.Namespace, shape: tuple[int, ...]) -> None:
    """Each strategy's race of the two families at `shape` (`race_live`), from a cold Triton cache, written as one
    shape's trace and table."""
    traces = []
    for name in args.strategies:
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"triton-race-{name}-")
        trace, vendor_ms, setup_s, provenance = race_live(name, shape, args.dtype, args.seconds, args.seed,
                                                          args.probe_batches, args.race_margin)
        traces.append(trace.assign(strategy=f"race:{name}", vendor_ms=vendor_ms, setup_s=setup_s))
        found = trace.loc[trace["latency_ms"] == trace["best_ms"].min(), "family"]
        print(f"race:{name}", "x".join(map(str, shape)), f"best {trace.best_ms.min():.4f} ms "
              f"({found.iloc[0] if len(found) else 'no config ran'}), cuBLAS {vendor_ms:.4f} ms", flush=True)
    frame = pd.concat(traces, ignore_index=True)
    stem = f"{provenance['gpu_name'].split()[1].lower()}_{trace_name(BOTH, args.dtype, shape)}"
    write_parquet_atomically(frame, args.out / f"{stem}.parquet", **PARQUET_OPTIONS)
    families = frame.groupby("strategy", sort=False)["family"].agg(lambda f: ", ".join(
        f"{family} {count}" for family, count in f.value_counts().items())).rename("evaluations per family")
    text = (f"# Live race of the two GEMM families, {args.dtype} {'x'.join(map(str, shape))} on "
            f"{provenance['gpu_name']}\n\n"
            f"Command: `{provenance['command']}` ({provenance['date']}, torch {provenance['torch']}, "
            f"Triton {provenance['triton']})\n\n"
            "Each strategy searches the pointer GEMM and the TMA GEMM, each family on its own bench; the race probes "
            f"{args.probe_batches} batch(es) of each and goes on with every family within {args.race_margin:.0%} of "
            "the leader (`tunebench.family_race`). Seconds add up the batches run, from a cold Triton cache; setup_s = "
            "the time to start both benches; cuBLAS is measured after the race.\n\n"
            + markdown_table(summary_rows(frame).merge(families, left_on="strategy", right_index=True)) + "\n")
    write_text_atomically(args.out / f"{stem}.md", text)
    print(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", default="matmul", choices=["matmul", "matmul_tma", BOTH],
                        help=f"the GEMM kernel family whose space is searched; {BOTH}: race the two")
    parser.add_argument("--probe-batches", type=int, default=1,
                        help=f"with --kernel {BOTH}: each family's batches before the race compares them")
    parser.add_argument("--race-margin", type=float, default=0.10,
                        help=f"with --kernel {BOTH}: a family stays in the race while its best is within this "
                             "fraction of the leader's")
    parser.add_argument("--strategies", nargs="+", default=["lfbo", "pattern", "random"],
                        help="registered names or a Strategy subclass's import path, each also as warm:<name>")
    parser.add_argument("--shapes", "--shape", default="4096x4096x4096", help="comma-separated MxNxK")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--seconds", type=float, default=120.0, help="wall-clock budget per strategy and shape")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--predictor", type=Path, default=None, help="a saved predictor, for warm:<name> strategies")
    parser.add_argument("--warm-k", type=int, default=10, help="configs a warm start measures first")
    parser.add_argument("--out", type=Path, default=Path("results/live_search"))
    parser.add_argument("--summarize", type=Path, nargs="+", default=None,
                        help="recorded traces (.parquet) to summarize instead of searching; no GPU needed")
    parser.add_argument("--summary-out", type=Path, default=None, help="where --summarize writes its markdown")
    args = parser.parse_args()
    if args.summarize is not None:
        if args.summary_out is None:
            parser.error("--summarize needs --summary-out")
        missing = [str(path) for path in args.summarize if not path.exists()]
        if missing:
            parser.error(f"no such trace: {', '.join(missing)}")
        command = " ".join([".venv/bin/python", *sys.argv])
        print(summarize(args.summarize, args.summary_out, command))
        return 0
    if args.probe_batches < 1 or args.race_margin < 0:
        parser.error(f"--probe-batches must be >= 1 and --race-margin >= 0, got {args.probe_batches} and "
                     f"{args.race_margin}")
    try:
        shapes = [check_shape(args.kernel, shape) for shape in parse_shapes(args.shapes, 3)]
        check_strategy_names(args.strategies, args.predictor, args.kernel)
        check_no_trace_yet(args.out, args.kernel, args.dtype, shapes)
    except ValueError as error:
        parser.error(str(error))

    from tunebench.measure.live import GpuBench, LiveEvaluator, worker_modules
    from tunebench.measure.workers import start_worker_server
    from tunebench.predict import load_predictor

    # Every strategy's workers are forked from one server, started before any clock: the first strategy would
    # otherwise pay its imports alone.
    kernels = list(FAMILY_KERNELS.values()) if args.kernel == BOTH else [args.kernel]
    modules = sorted({module for kernel in kernels for module in worker_modules(kernel)})
    print(f"worker server ready in {start_worker_server(modules, wait=True):.1f} s", flush=True)
    if args.kernel == BOTH:
        for shape in shapes:
            race_shape(args, shape)
        return 0

    predictor = load_predictor(args.predictor, kernel=args.kernel) if args.predictor is not None else None
    for shape in shapes:
        traces = []
        seeds = predictor.top_configs(shape, args.warm_k, args.dtype) if predictor is not None else []
        for name in args.strategies:
            # Every strategy starts from a cold compile cache, as a user tuning a new kernel would.
            os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"triton-{name.replace(':', '-')}-")
            # The clock starts as the workers do: their start-up overlaps the first compiles. cuBLAS, which a user
            # tuning a kernel does not need, is measured after the search.
            started = time.monotonic()
            with GpuBench(args.kernel, args.dtype, seed=args.seed) as bench:
                strategy = live_strategy(name, bench.space, args.seed, seeds)
                evaluator = LiveEvaluator(bench, shape)
                setup_s = time.monotonic() - started
                trace = with_result_times(run_search(strategy, evaluator, Budget(seconds=args.seconds)),
                                          evaluator.measured, bench.space)
                vendor_ms = bench.measure_vendor(shape).latency_ms
                provenance = bench.provenance(["python", *sys.argv])
            trace.insert(0, "strategy", name)
            trace["vendor_ms"] = vendor_ms
            trace["setup_s"] = setup_s
            traces.append(trace)
            print(name, "x".join(map(str, shape)), f"best {trace.best_ms.min():.4f} ms, cuBLAS {vendor_ms:.4f} ms",
                  flush=True)
        frame = pd.concat(traces, ignore_index=True)
        stem = f"{provenance['gpu_name'].split()[1].lower()}_{trace_name(args.kernel, args.dtype, shape)}"
        write_parquet_atomically(frame, args.out / f"{stem}.parquet", **PARQUET_OPTIONS)
        warm = (f" Warm starts measure the top {args.warm_k} configs of `{args.predictor}` first."
                if predictor is not None else "")
        text = (f"# Live search, {args.dtype} GEMM ({args.kernel}) {'x'.join(map(str, shape))} on "
                f"{provenance['gpu_name']}\n\n"
                f"Command: `{provenance['command']}` ({provenance['date']}, torch {provenance['torch']}, "
                f"Triton {provenance['triton']}, {provenance['compile_workers']} compile workers)\n\n"
                "Wall-clock seconds from the first ask, cold Triton cache; setup_s = the time from starting the "
                "workers to the first ask (their start-up runs on into the search, and counts in its seconds); in the "
                "trace, result_s is the clock's reading when each config's result came, with its binary's compile_s "
                "and its bench_s; cuBLAS "
                f"is measured after the search; the run's best is the fastest config any strategy found.{warm}\n\n"
                + markdown_table(summary_rows(frame)) + "\n")
        write_text_atomically(args.out / f"{stem}.md", text)
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
