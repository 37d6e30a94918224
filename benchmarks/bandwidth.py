"""Achieved memory bandwidth of a recorded kernel dataset's best configs, against the device's copy bandwidth.

For every shape of each dataset given, re-measures side by side, in interleaved rounds: the recorded best config,
the same without the alignment hint where the launch passes one (cols or a row stride a multiple of 2, 4 or 8 but not
of 16; see kernels/rowwise.py), the kernel's DEFAULT_CONFIG (an untuned user's pick), torch eager (the dataset's
vendor) and torch.compile; each is
checked against the fp32 reference, then reported as bytes_moved / latency and as a share of the copy bandwidth,
measured first (a device-to-device copy of --copy-mib MiB, bytes read plus written). Timing is the project's one
method (tunebench.measure.timing.Timer).

Run on a GPU: `PYTHONPATH=lib python3 benchmarks/bandwidth.py results/datasets/layernorm_bfloat16_h100.parquet`
(writes results/bandwidth/<dataset stem>.md and .json, and prints the table last). Each measured shape is kept at once
in <dataset stem>.partial.json; a run killed or stopped by --stop-after-s (exit status 3) resumes there when the same
command runs again, and the finished files are written when every shape is measured.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from tunebench.files import write_text_atomically

METHODS = ("best", "best without the hint", "default", "torch eager", "torch.compile")  # in the tables' order
KERNELS = ("layernorm", "softmax")  # the memory-bound families, whose cost is bytes moved


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", type=Path, nargs="+", help="recorded datasets, e.g. "
                        "results/datasets/softmax_bfloat16_h100.parquet")
    parser.add_argument("--out-dir", type=Path, default=Path("results/bandwidth"))
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds per method (default 3)")
    parser.add_argument("--copy-mib", type=int, default=1024, help="size of the copied buffer (default 1024 MiB)")
    parser.add_argument("--stop-after-s", type=float, default=None,
                        help="start no shape after this many seconds; the same command resumes (exit status 3)")
    arguments = parser.parse_args(argv)
    if arguments.rounds < 1 or arguments.copy_mib < 1:
        parser.error(f"--rounds and --copy-mib must be >= 1, got {arguments.rounds} and {arguments.copy_mib}")
    if arguments.stop_after_s is not None and not arguments.stop_after_s >= 0:
        parser.error(f"--stop-after-s must be at least 0, got {arguments.stop_after_s}")
    return arguments


def compilable_function(kernel_name: str) -> Callable[[Any], Any]:
    """The torch expression torch.compile gets for a kernel family: its eager op, returning a new tensor."""
    import torch
    import torch.nn.functional as F

    from tunebench.kernels import layernorm

    if kernel_name == "layernorm":
        return lambda inputs: F.layer_norm(inputs.x, (inputs.x.shape[1],), inputs.weight, inputs.bias, layernorm.EPS)
    return lambda inputs: torch.softmax(inputs.x, dim=-1)


def copy_bandwidth(mebibytes: int, timer: Any) -> dict[str, Any]:
    """Bytes read plus written per second by a device-to-device copy of random bytes."""
    import torch

    size = mebibytes * 2**20
    source = torch.randint(0, 256, (size,), dtype=torch.uint8, device="cuda")
    target = torch.empty_like(source)
    repeats = timer.time(functools.partial(target.copy_, source))
    latency = statistics.median(repeats)
    return {"bytes": 2 * size, "latency_ms": latency, "repeats_ms": repeats, "bandwidth_gbs": 2 * size / latency / 1e6}


def best_config(dataset: Any, shape: tuple[int, ...]) -> tuple[dict[str, Any], float]:
    """The fastest ok config recorded for a shape, and its recorded latency."""
    task = dataset.task(shape)
    ok = task[task["status"] == "ok"]
    if ok.empty:
        raise ValueError(f"{dataset.kernel} shape {shape} has no ok measurement")
    row = ok.loc[ok["latency_ms"].idxmin()]
    config = {name: row[name].item() if hasattr(row[name], "item") else row[name] for name in dataset.parameter_names}
    return config, float(row["latency_ms"])


def measure_shape(kernel: Any, dtype: str, shape: tuple[int, ...], best: dict[str, Any], rounds: int,
                  timer: Any) -> dict[str, dict[str, Any]]:
    """Each method's check and interleaved timing on one shape."""
    import torch

    from tunebench.kernels.alignment import alignment

    inputs = kernel.make_inputs(shape, dtype, "cuda", seed=0)
    expected = kernel.reference(inputs)
    torch._dynamo.reset()  # one static-shape compile per shape, clear of the recompile limit
    compiled = torch.compile(compilable_function(kernel.NAME), dynamic=False)
    functions = {"best": functools.partial(kernel.run, best, inputs)}
    if alignment(shape[1], inputs.x.stride(0), inputs.out.stride(0)) > 1:  # the hint `run` passes
        functions["best without the hint"] = functools.partial(kernel.run, best, inputs, hint=False)
    functions |= {
        "default": functools.partial(kernel.run, kernel.DEFAULT_CONFIG, inputs),
        "torch eager": functools.partial(kernel.run_vendor, inputs),
        "torch.compile": functools.partial(compiled, inputs),
    }
    outcomes: dict[str, dict[str, Any]] = {}
    for method, function in functions.items():
        try:
            inputs.out.fill_(float("nan"))
            error = kernel.relative_error(function(), expected)
        except Exception as failure:  # torch.compile may not run here: report it and go on
            outcomes[method] = {"error": f"{type(failure).__name__}: {str(failure)[:300]}"}
            continue
        outcomes[method] = {"relative_error": error, "repeats_ms": [], "error": ""}
        if not error <= kernel.TOLERANCE[dtype]:
            outcomes[method]["error"] = f"relative error {error:.3g} > tolerance {kernel.TOLERANCE[dtype]:g}"
    timed = {method: function for method, function in functions.items() if not outcomes[method]["error"]}
    for _ in range(rounds):  # interleaved, so that drift over the run affects every method alike
        for method, function in timed.items():
            outcomes[method]["repeats_ms"] += timer.time(function)
    for method in timed:
        outcomes[method]["latency_ms"] = statistics.median(outcomes[method]["repeats_ms"])
    return outcomes


def markdown(report: dict[str, Any]) -> str:
    import pandas as pd

    from tunebench.tables import markdown_table

    copy = report["copy"]
    rows = []
    for entry in report["shapes"]:
        for method in (method for method in METHODS if method in entry["methods"]):
            outcome = entry["methods"][method]
            row: dict[str, Any] = dict(zip(report["shape_names"], entry["shape"]))
            row.update({"MB moved": entry["bytes_moved"] / 1e6, "method": method})
            if "latency_ms" in outcome:
                row.update({"ms": outcome["latency_ms"], "GB/s": f"{outcome['bandwidth_gbs']:.0f}",
                            "% of copy": f"{100 * outcome['share_of_copy']:.1f}",
                            "relative error": f"{outcome['relative_error']:.2g}"})
            else:
                row.update({"ms": "failed", "GB/s": "-", "% of copy": "-", "relative error": "-"})
            rows.append(row)
    failures = [f"- {entry['shape']} {method}: {outcome['error']}" for entry in report["shapes"]
                for method, outcome in entry["methods"].items() if outcome["error"]]
    shown = {"": '""'}  # the default eviction policy would be an empty cell
    configs = pd.DataFrame([{**dict(zip(report["shape_names"], entry["shape"])),
                             **{name: shown.get(value, value) if isinstance(value, str) else value
                                for name, value in entry["best_config"].items()},
                             "recorded ms": entry["recorded_best_ms"]} for entry in report["shapes"]])
    moved = "input read once, output written once" + (", weight and bias once" if report["kernel"] == "layernorm"
                                                      else "")
    parts = [
        f"# Bandwidth: {report['kernel']} {report['dtype']} on {report['device']}",
        f"Command: `{report['command']}` on {report['date']} (torch {report['torch']}, Triton {report['triton']})  \n"
        f"Dataset: `{report['dataset']}`",
        f"Copy bandwidth (device-to-device copy of {copy['bytes'] // 2 // 2**20} MiB, bytes read + written): "
        f"{copy['bandwidth_gbs']:.0f} GB/s ({copy['latency_ms']:.4g} ms). Achieved bandwidth: bytes_moved ({moved}) "
        "/ median latency; '% of copy' is its share of the copy bandwidth. Methods: the recorded best config, the "
        "same without the alignment hint (where the launch passes one), the kernel's DEFAULT_CONFIG, torch eager, "
        "torch.compile, re-measured side by side in interleaved rounds.",
        markdown_table(pd.DataFrame(rows)),
    ]
    sittings = report.get("sittings", [])
    if len(sittings) > 1:
        parts.append(f"Measured in {len(sittings)} sittings (the run was resumed); each shape's share of the copy is "
                     "its own sitting's: " + "; ".join(
                         f"{index}: {sitting['date']} on {sitting['device']}, copy "
                         f"{sitting['copy']['bandwidth_gbs']:.0f} GB/s, shapes "
                         + ", ".join("x".join(map(str, entry["shape"])) for entry in report["shapes"]
                                     if entry.get("sitting") == index)
                         for index, sitting in enumerate(sittings)))
    parts += [
        "## Recorded best config per shape",
        markdown_table(configs),
    ]
    if failures:
        parts += ["## Failures", "\n".join(failures)]
    return "\n\n".join(parts) + "\n"


# (kernel module, dtype, shape, best config) -> each method's outcome: `measure_shape` with its rounds and timer bound
Measure = Callable[[Any, str, tuple[int, ...], dict[str, Any]], dict[str, dict[str, Any]]]


def measure_dataset(path: Path, dataset: Any, arguments: argparse.Namespace, sitting: dict[str, Any],
                    measure: Measure, deadline: float) -> bool:
    """Every shape of one dataset that its partial file (<out stem>.partial.json) does not hold yet, each kept there
    as soon as it is measured; the finished .json and .md once all are, the partial file then removed. False if
    `deadline` (time.monotonic()) passed before a shape began. `sitting`: this process's command, date, device,
    software, timing and copy bandwidth; each shape's share of the copy is its own sitting's."""
    from tunebench.kernels import get_kernel

    kernel = get_kernel(dataset.kernel)
    out = arguments.out_dir / path.stem
    partial = out.with_suffix(".partial.json")
    report = json.loads(partial.read_text()) if partial.exists() else None
    if report is not None and (report["dataset"], report["rounds"]) != (str(path), arguments.rounds):
        print(f"{partial} is of another run ({report['dataset']}, {report['rounds']} rounds): starting afresh",
              flush=True)
        report = None
    if report is None:
        report = {**sitting, "dataset": str(path), "kernel": dataset.kernel, "dtype": dataset.dtype,
                  "rounds": arguments.rounds, "shape_names": list(dataset.shape_names), "sittings": [], "shapes": []}
    done = {tuple(entry["shape"]) for entry in report["shapes"]}
    if done:
        print(f"{path.stem}: resuming with {len(done)} of {len(dataset.shapes())} shapes measured", flush=True)
    report["sittings"].append(sitting)
    for shape in (shape for shape in dataset.shapes() if tuple(shape) not in done):
        if time.monotonic() > deadline:
            return False
        best, recorded_ms = best_config(dataset, shape)
        outcomes = measure(kernel, dataset.dtype, shape, best)
        moved = kernel.bytes_moved(shape, dataset.dtype)
        for outcome in outcomes.values():
            if "latency_ms" in outcome:
                outcome["bandwidth_gbs"] = moved / outcome["latency_ms"] / 1e6
                outcome["share_of_copy"] = outcome["bandwidth_gbs"] / sitting["copy"]["bandwidth_gbs"]
        report["shapes"].append({"shape": list(shape), "bytes_moved": moved, "best_config": best,
                                 "recorded_best_ms": recorded_ms, "sitting": len(report["sittings"]) - 1,
                                 "methods": outcomes})
        write_text_atomically(partial, json.dumps(report, indent=1) + "\n")
        print(dataset.kernel, shape, {m: round(o.get("latency_ms", float("nan")), 5) for m, o in outcomes.items()},
              flush=True)
    order = {tuple(shape): index for index, shape in enumerate(dataset.shapes())}
    report["shapes"].sort(key=lambda entry: order[tuple(entry["shape"])])
    text = markdown(report)
    write_text_atomically(out.with_suffix(".json"), json.dumps(report, indent=1) + "\n")
    write_text_atomically(out.with_suffix(".md"), text)
    partial.unlink(missing_ok=True)
    print(f"wrote {out.with_suffix('.md')} and .json", flush=True)
    print(text, flush=True)
    return True


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    started = time.monotonic()
    import torch

    from tunebench.measure.dataset import load_dataset

    datasets = {path: load_dataset(path) for path in arguments.datasets}
    for path, dataset in datasets.items():
        if dataset.kernel not in KERNELS:
            print(f"{path} holds kernel {dataset.kernel!r}; bandwidth.py measures {', '.join(KERNELS)}",
                  file=sys.stderr)
            return 2
    if not torch.cuda.is_available():
        print("benchmarks/bandwidth.py needs a CUDA GPU: torch.cuda.is_available() is False on this machine",
              file=sys.stderr)
        return 2
    import triton

    from tunebench.measure.timing import Timer, TimingPolicy

    policy = TimingPolicy()
    timer = Timer(policy)
    copy = copy_bandwidth(arguments.copy_mib, timer)
    print(f"copy bandwidth: {copy['bandwidth_gbs']:.0f} GB/s", flush=True)
    command = " ".join(["python3", "benchmarks/bandwidth.py", *(argv if argv is not None else sys.argv[1:])])
    sitting = {"command": command,
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
               "copy": copy, "timing": policy.describe()}
    measure = functools.partial(measure_shape, rounds=arguments.rounds, timer=timer)
    deadline = started + (arguments.stop_after_s if arguments.stop_after_s is not None else float("inf"))
    for path, dataset in datasets.items():
        if not measure_dataset(path, dataset, arguments, sitting, measure, deadline):
            print(f"stopped after --stop-after-s {arguments.stop_after_s:g}: the same command resumes", file=sys.stderr)
            return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
