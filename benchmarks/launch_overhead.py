"""Host time per call of `matmul_tma.run` and `matmul.run` against Triton's own launch, cuBLAS and Helion's final
kernels, and what each call takes by Helion's benchmark function with and without a CUDA graph.

On a GPU machine, with Helion's wheels on the path (`results/helion_side_by_side/4096x4096x4096/README.md` says how):
`python3 benchmarks/launch_overhead.py --out results/launch_overhead` times, for each shape folder in
`results/helion_side_by_side`, cuBLAS, each seed-0 tunebench run's final config launched two ways (`jit`: descriptors,
grid and Triton's JIT launch made on every call, as `run` did before its launches were bound; `bound`: `run`) and each
finished seed-0 Helion run's config; then, for the pointer GEMM at small-M shapes of the H100 GEMM dataset, cuBLAS and
the dataset's best config launched both ways; into `OUT/<gpu>.csv`, and writes `OUT/<gpu>.md`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from tunebench.files import write_text_atomically
from tunebench.peer_runs import helion_runs, our_runs
from tunebench.tables import markdown_table

SIDE_BY_SIDE = Path("results/helion_side_by_side")
SHAPES = ("256x11008x4096", "4096x4096x4096")
POINTER_DATASET = Path("results/datasets/matmul_bfloat16_h100.parquet")
POINTER_SHAPES = ((1, 4096, 4096), (16, 5120, 5120), (32, 11008, 4096), (256, 14336, 4096))  # 20 to 60 us GEMMs
WARMUP_CALLS = 20
HOST_CALLS = 100  # calls per host timing, queued behind a GPU spin long enough that none waits for the GPU
HOST_REPEATS = 5
SPIN_CYCLES = 200_000_000  # about 0.1 s of GPU clock
BENCH_REPEATS = 5


def calls_of_shape(folder: Path) -> tuple[dict[str, Callable[[], Any]], list[str]]:
    """The calls to time at one side-by-side shape, and the relative error of each tunebench launch."""
    import helion
    import torch

    from helion_matmul import helion_matmul
    from tunebench.kernels import matmul_tma
    from tunebench.kernels.rowwise import sm_count
    from tunebench.redrive import config_of_key_text

    shape = tuple(int(size) for size in folder.name.split("x"))
    inputs = matmul_tma.make_inputs(shape, "bfloat16", seed=0)
    a, b, c = inputs.a, inputs.b, inputs.out
    space = matmul_tma.config_space()
    calls: dict[str, Callable[[], Any]] = {"cublas": lambda: torch.matmul(a, b)}
    notes = []
    for run in our_runs(sorted(folder.glob("ours/seed0/*.parquet"))):
        config = config_of_key_text(space, run["config_key"])

        def jit(config: dict[str, Any] = config) -> None:
            matmul_tma.matmul_tma_kernel[(matmul_tma.programs(config, shape, sm_count(a.device)),)](
                *matmul_tma.kernel_arguments(config, a, b, c, inputs.workspace, inputs.tile_counts, shape),
                **matmul_tma._launch_arguments(config))

        calls[f"{run['run']}:jit"] = jit
        calls[f"{run['run']}:bound"] = lambda config=config: matmul_tma.run(config, inputs)
        for way in ("jit", "bound"):
            c.zero_()
            calls[f"{run['run']}:{way}"]()
            notes.append(f"{folder.name} {run['run']}:{way}: relative error "
                         f"{matmul_tma.relative_error(c, torch.matmul(a, b)):.1e} against torch.matmul")
    for run in helion_runs(folder):
        if run["finished"] and run["run"].endswith("seed0"):
            bound = helion_matmul("quick").bind((a, b))
            bound.set_config(helion.Config.from_json(run["config"]))
            calls[run["run"]] = lambda bound=bound: bound(a, b)
    return calls, notes


def pointer_calls(shape: tuple[int, int, int]) -> tuple[dict[str, Callable[[], Any]], list[str]]:
    """The calls to time for the pointer GEMM at one shape: cuBLAS and the dataset's best config, launched as `run` did
    before its launches were bound (`jit`) and by `run` (`bound`); and the relative error of each launch."""
    import torch

    from tunebench.kernels import matmul
    from tunebench.study import open_dataset

    config = open_dataset(POINTER_DATASET).best_config(shape)
    inputs = matmul.make_inputs(shape, "bfloat16", seed=0)
    a, b, c = inputs.a, inputs.b, inputs.out
    m, n, k = shape

    def jit() -> None:
        matmul.matmul_kernel[matmul.grid(config, shape)](
            a, b, c, inputs.workspace, inputs.tile_counts, m, n, k, a.stride(0), a.stride(1), b.stride(0),
            b.stride(1), c.stride(0), c.stride(1),
            **matmul._launch_arguments(config, matmul.alignment(k), matmul.alignment(n)))

    name = "best " + ",".join(f"{value}" for value in config.values())
    calls: dict[str, Callable[[], Any]] = {"cublas": lambda: torch.matmul(a, b),
                                          f"{name}:jit": jit, f"{name}:bound": lambda: matmul.run(config, inputs)}
    notes = []
    for way in ("jit", "bound"):
        c.zero_()
        calls[f"{name}:{way}"]()
        notes.append(f"{'x'.join(map(str, shape))} matmul {way}: relative error "
                     f"{matmul.relative_error(c, torch.matmul(a, b)):.1e} against torch.matmul")
    return calls, notes


def time_call(fn: Callable[[], Any]) -> dict[str, float]:
    """Host microseconds per call (median of HOST_REPEATS), and Helion's benchmark of the call and of a CUDA graph of
    it (median of BENCH_REPEATS, each the median of 50 ms of repetitions)."""
    import torch
    from helion.autotuner.benchmarking import do_bench

    from helion_side_by_side import median_benchmark

    for _ in range(WARMUP_CALLS):
        fn()
    torch.cuda.synchronize()
    host = []
    for _ in range(HOST_REPEATS):
        torch.cuda._sleep(SPIN_CYCLES)
        started = time.perf_counter()
        for _ in range(HOST_CALLS):
            fn()
        host.append((time.perf_counter() - started) / HOST_CALLS * 1e6)
        torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return {"host_us_per_call": float(np.median(host)),
            "bench_ms": median_benchmark(do_bench, fn, BENCH_REPEATS),
            "bench_graph_ms": median_benchmark(do_bench, graph.replay, BENCH_REPEATS)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # helion_matmul and helion_side_by_side, beside
    rows, notes = [], []
    cases = [("matmul_tma", shape, lambda shape=shape: calls_of_shape(SIDE_BY_SIDE / shape)) for shape in SHAPES]
    cases += [("matmul", "x".join(map(str, shape)), lambda shape=shape: pointer_calls(shape))
              for shape in POINTER_SHAPES]
    for kernel, shape, make_calls in cases:
        calls, shape_notes = make_calls()
        notes += shape_notes
        for name, fn in calls.items():
            rows.append({"kernel": kernel, "shape": shape, "call": name, **time_call(fn)})
            print(rows[-1], flush=True)
    gpu = torch.cuda.get_device_name()
    frame = pd.DataFrame(rows).assign(gpu=gpu)
    stem = gpu.replace(" ", "_")
    args.out.mkdir(parents=True, exist_ok=True)
    write_text_atomically(args.out / f"{stem}.csv", frame.to_csv(index=False))
    text = "\n\n".join([f"# Launch overhead on {gpu}", f"Command: `python3 {' '.join(sys.argv)}`",
                        markdown_table(frame.drop(columns="gpu")), *[f"- {note}" for note in notes]]) + "\n"
    write_text_atomically(args.out / f"{stem}.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
