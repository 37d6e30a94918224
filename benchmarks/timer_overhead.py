"""Wall time the timer spends per config against an earlier revision of it, side by side on the same bound launches:
a screen (3 runs) of every config of the prediction set and a full timing of every 10th, on shapes of one binary set;
and what the timing worker's set-up of a shape costs, step by step.

Here: git show REV:lib/tunebench/measure/timing.py > .devrun/baseline_timing.py (an ignored folder; carry it)
GPU: python benchmarks/timer_overhead.py --baseline-timing .devrun/baseline_timing.py --baseline-revision REV
         --out results/timer_overhead_<gpu>.md
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

import pandas as pd
import torch
from tqdm import tqdm

from tunebench.files import write_text_atomically
from tunebench.kernels import complete_config, get_kernel
from tunebench.measure.cross_compile import device_target
from tunebench.measure.live import CompilePool
from tunebench.measure.result import Status
from tunebench.measure.timing import Timer, TimingPolicy
from tunebench.tables import markdown_table

REPO = Path(__file__).resolve().parents[1]
SCREEN_RUNS = 3
FULL_EVERY = 10  # every 10th config is also timed in full


def load_module(path: Path) -> ModuleType:
    """The timing module at `path` (a copy of an earlier revision's), imported under its own name."""
    spec = importlib.util.spec_from_file_location("baseline_timing", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def compiled_configs(configs: list[dict], shape: tuple[int, int, int], workers: int) -> list[dict]:
    """The configs that compile for the shape's specialization, compiled in parallel into Triton's cache."""
    pool = CompilePool("matmul", "bfloat16", workers, 120.0, None, device_target())
    try:
        outcomes = dict(tqdm(pool.compile((i, (config, shape)) for i, config in enumerate(configs)),
                             total=len(configs), desc="compile", file=sys.stdout, mininterval=5.0))
    finally:
        pool.close()
    return [config for i, config in enumerate(configs) if outcomes[i].status is Status.OK]


def timed_call(timer: object, function: functools.partial, repeats: int | None) -> dict[str, float]:
    """Wall ms of one `timer.time` call, the median of its runs and the rounds it timed again."""
    retries, start = timer.retries, time.perf_counter()
    times = timer.time(function, repeats) if repeats is not None else timer.time(function)
    return {"wall_ms": 1e3 * (time.perf_counter() - start), "latency_ms": statistics.median(times),
            "retries": timer.retries - retries}


def compare(timers: dict[str, object], configs: list[dict], shape: tuple[int, int, int]) -> pd.DataFrame:
    """One row per (config, mode, timer): wall ms and latency; the timers take turns going first."""
    kernel = get_kernel("matmul")
    inputs = kernel.make_inputs(shape, "bfloat16", "cuda", 0)
    rows = []
    for index, config in enumerate(tqdm(configs, desc="x".join(map(str, shape)), file=sys.stdout, mininterval=5.0)):
        function = functools.partial(kernel.run, config, inputs)
        function()  # builds the bound launch outside every timed call
        modes = {"screen": SCREEN_RUNS, **({"full": None} if index % FULL_EVERY == 0 else {})}
        for mode, repeats in modes.items():
            names = list(timers) if index % 2 == 0 else list(timers)[::-1]
            for name in names:
                rows.append({"config": index, "mode": mode, "timer": name,
                             **timed_call(timers[name], function, repeats)})
    return pd.DataFrame(rows)


def setup_costs(shapes: list[tuple[int, int, int]], timer: Timer) -> list[dict]:
    """Wall ms of each step by which the timing worker takes up a shape (`live._TimingHandler`), in its order: free
    the last shape's tensors, make the inputs, the fp32 reference, the vendor call checked, the vendor timed. On one
    CPU thread, as the timing worker has one core."""
    kernel = get_kernel("matmul")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_num_threads(1)
    rows = []
    for shape in shapes:
        steps = {}

        def step(name, function):
            start = time.perf_counter()
            value = function()
            torch.cuda.synchronize()
            steps[name] = f"{1e3 * (time.perf_counter() - start):.1f}"
            return value

        inputs = None
        step("free, empty_cache", torch.cuda.empty_cache)
        inputs = step("make_inputs", lambda: kernel.make_inputs(shape, "bfloat16", "cuda", 0))
        reference = step("reference", lambda: kernel.reference(inputs))
        step("vendor, checked", lambda: kernel.relative_error(kernel.run_vendor(inputs), reference))
        step("vendor, timed", lambda: timer.time(functools.partial(kernel.run_vendor, inputs)))
        rows.append({"shape": "x".join(map(str, shape)), **{f"{name}, ms": ms for name, ms in steps.items()}})
    return rows


def summary(frame: pd.DataFrame, shape: tuple[int, int, int]) -> list[dict]:
    """Per mode: each timer's median wall ms a call, the sums' ratio, and the new / baseline latency ratios."""
    out = []
    for mode, part in frame.groupby("mode", sort=False):
        wall = part.pivot(index="config", columns="timer", values="wall_ms")
        latency = part.pivot(index="config", columns="timer", values="latency_ms")
        ratio = latency["new"] / latency["baseline"]
        retries = part.groupby("timer")["retries"].sum()
        out.append({"shape": "x".join(map(str, shape)), "mode": mode, "configs": len(wall),
                    "baseline wall ms a call (median)": f"{wall['baseline'].median():.2f}",
                    "new wall ms a call (median)": f"{wall['new'].median():.2f}",
                    "wall, new / baseline (sums)": f"{wall['new'].sum() / wall['baseline'].sum():.3f}",
                    "latency new / baseline: median (P10, P90)":
                        f"{ratio.median():.3f} ({ratio.quantile(0.1):.3f}, {ratio.quantile(0.9):.3f})",
                    "rounds timed again (baseline, new)": f"{retries['baseline']}, {retries['new']}"})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-timing", type=Path, required=True, help="an earlier revision's timing.py")
    parser.add_argument("--baseline-revision", required=True, help="the commit that file is from, for the report")
    parser.add_argument("--shapes", default="824x640x3072,377x8192x3584,8x8192x3584",
                        help="M x N x K shapes of one specialization (default: three of re-recording batch 2's)")
    parser.add_argument("--setup-shapes", type=lambda text: [tuple(int(v) for v in item.split("x"))
                                                              for item in text.split(",")],
                        default=[(82, 144, 896), (2, 8192, 28672), (1342, 1792, 5120)],
                        help="more shapes (any specialization) whose set-up is timed")
    parser.add_argument("--configs", type=Path, default=REPO / "results/datasets/matmul_prediction_configs.json")
    parser.add_argument("--flush", default="read", choices=["zero", "read"])
    parser.add_argument("--compile-workers", type=int, default=14)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    try:
        shapes = [tuple(int(v) for v in item.split("x")) for item in args.shapes.split(",")]
    except ValueError:
        parser.error(f"--shapes {args.shapes!r} is not a list of MxNxK, e.g. 16x4096x4096,32x4096x4096")
    kernel = get_kernel("matmul")
    specializations = {kernel.specialization(shape) for shape in shapes}
    if len(specializations) != 1:
        parser.error(f"--shapes {args.shapes} span {len(specializations)} specializations; give shapes of one")
    configs = compiled_configs([complete_config("matmul", c) for c in json.loads(args.configs.read_text())],
                               shapes[0], args.compile_workers)
    baseline = load_module(args.baseline_timing)
    timers = {"baseline": baseline.Timer(baseline.TimingPolicy(flush=args.flush)),
              "new": Timer(TimingPolicy(flush=args.flush))}
    rows = []
    for shape in shapes:
        rows += summary(compare(timers, configs, shape), shape)
    setup = setup_costs([*shapes, *args.setup_shapes], timers["new"])
    command = "python " + " ".join(sys.argv)
    write_text_atomically(args.out, f"""# The timer's wall time per config on {torch.cuda.get_device_name()}

Command: `{command}` (torch {torch.__version__}). "baseline" is `lib/tunebench/measure/timing.py` at
{args.baseline_revision}; "new" is this checkout's. Both flush the L2 by {args.flush}; they take turns going first on
each config. A screen is {SCREEN_RUNS} timed runs (the collector's `--screen-runs 3`), a full timing the policy's
adaptive count; every {FULL_EVERY}th of the {len(configs)} compiled configs of `{args.configs.name}` is timed in full
too. The wall time is that of `Timer.time` alone: no worker round trip, correctness check or journal.

{markdown_table(pd.DataFrame(rows))}

The timing worker's set-up of a shape, step by step (wall ms, each step synchronized, one CPU thread; the new timer):

{markdown_table(pd.DataFrame(setup))}
""")
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
