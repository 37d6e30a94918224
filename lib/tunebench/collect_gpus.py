"""One sweep over several GPUs of one host: the shapes dealt out between them, one collector process per GPU on its
own share of the CPU cores (so each timing worker has a core of its own), each with its own journal, merged at the end.
A GPU's collector ends with the parent process, however the parent ends.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path
from typing import Any, Sequence

from tunebench.collect import Shape, build_dataset, journal_of, sweep, sweep_configs, whole_shapes
from tunebench.kernels import get_kernel
from tunebench.measure.dataset import save_dataset
from tunebench.measure.workers import end_with_parent


def parse_gpus(text: str) -> list[int]:
    """'0,1' -> [0, 1]: distinct device indices, as CUDA_VISIBLE_DEVICES numbers them; a clear error otherwise."""
    try:
        gpus = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"bad GPU list {text!r}: expected device indices joined by ',', e.g. 0,1") from None
    if not gpus or min(gpus) < 0 or len(set(gpus)) != len(gpus):
        raise ValueError(f"bad GPU list {text!r}: expected distinct device indices >= 0 joined by ',', e.g. 0,1")
    return gpus


def deal_shapes(kernel_name: str, shapes: Sequence[Shape], parts: int) -> list[list[Shape]]:
    """The shapes in the order a sweep measures them (by compiled binary, then shape), dealt round-robin into
    `parts` lists: as many shapes each, give or take one, and the same deal on every rerun."""
    kernel = get_kernel(kernel_name)
    ordered = sorted((kernel.check_shape(shape) for shape in shapes),
                     key=lambda shape: (kernel.specialization(shape), shape))
    return [ordered[part::parts] for part in range(parts)]


def split_cores(cores: Sequence[int], parts: int) -> list[list[int]]:
    """The CPU cores in `parts` contiguous runs, as many each, give or take one (each run's first core times)."""
    ordered = sorted(cores)
    if len(ordered) < parts:
        raise ValueError(f"{len(ordered)} CPU cores cannot be shared by {parts} GPUs' collectors: give fewer GPUs")
    size, extra = divmod(len(ordered), parts)
    starts = [part * size + min(part, extra) for part in range(parts + 1)]
    return [ordered[starts[part]:starts[part + 1]] for part in range(parts)]


def gpu_out(out: Path, gpu: int) -> Path:
    """The path whose journal GPU `gpu`'s collector keeps (`<out stem>.gpu<N>.journal/`); no dataset is written
    there."""
    return out.with_name(f"{out.stem}.gpu{gpu}{out.suffix}")


def _sweep_on_gpu(gpu: int, cores: Sequence[int], arguments: dict[str, Any], parent: int) -> None:
    """A child process: this GPU alone, these cores alone, then the single-GPU sweep; exit status 0 when complete."""
    end_with_parent(parent)  # killed with it: the journal loses at most a cut line, its workers die with this process
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    os.sched_setaffinity(0, set(cores))
    raise SystemExit(0 if sweep(**arguments) else 3)


def sweep_on_gpus(kernel_name: str, dtype: str, shapes: Sequence[Shape], out: Path, gpus: Sequence[int], *,
                  limit_configs: int | None = None, seed: int = 0, configs: Sequence[Any] | None = None,
                  **sweep_arguments: Any) -> bool:
    """`collect.sweep` of the shapes over `gpus` at once; True when every GPU's share is complete and the merged
    dataset is written to `out`. Rerun the same call to continue: each GPU resumes its own journal, with the same
    shapes dealt to it. Other keyword arguments go to every GPU's `sweep` (`stop_after_s`, `make_bench`, ...)."""
    if not gpus:
        raise ValueError("no GPUs given")
    chosen = sweep_configs(kernel_name, configs, limit_configs, seed)
    shares = deal_shapes(kernel_name, shapes, len(gpus))
    cores = split_cores(sorted(os.sched_getaffinity(0)), len(gpus))
    for gpu, share in zip(gpus, shares):
        if share:
            with journal_of(gpu_out(out, gpu)).hold():  # refused now, not in a child, if another collector has it
                pass
    context = multiprocessing.get_context("spawn")  # a forked child would inherit this process's CUDA state
    children = []
    for gpu, share, own_cores in zip(gpus, shares, cores):
        if not share:
            continue
        arguments = {"kernel_name": kernel_name, "dtype": dtype, "shapes": share, "out": gpu_out(out, gpu),
                     "configs": chosen, "seed": seed, "save": False, **sweep_arguments}
        child = context.Process(target=_sweep_on_gpu, args=(gpu, own_cores, arguments, os.getpid()),
                                name=f"collect-gpu{gpu}")
        child.start()
        print(f"GPU {gpu}: {len(share)} shapes on cores {own_cores[0]}-{own_cores[-1]}, journal "
              f"{journal_of(gpu_out(out, gpu)).path}", flush=True)
        children.append((gpu, child))
    for _, child in children:
        child.join()
    failed = [f"GPU {gpu} (exit status {child.exitcode})" for gpu, child in children if child.exitcode not in (0, 3)]
    if failed:
        raise RuntimeError(f"the collector failed on {', '.join(failed)}; its log is above, its journal kept")
    if any(child.exitcode for _, child in children):
        print("a GPU's share is not complete; run the same command again to continue", flush=True)
        return False
    start = time.monotonic()
    records = [record for gpu, _ in children for record in journal_of(gpu_out(out, gpu)).read()]
    space = get_kernel(kernel_name).config_space()
    dataset = build_dataset(kernel_name, dtype, whole_shapes(records, chosen, space.key))
    save_dataset(dataset, out)
    print(f"wrote {out} ({len(dataset.measurements)} measurements, {len(dataset.shapes())} shapes from "
          f"{len(children)} GPUs) in {time.monotonic() - start:.0f} s", flush=True)
    return True
