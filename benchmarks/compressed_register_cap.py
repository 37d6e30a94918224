"""Whether capping registers (Triton's `maxnreg`) lets the palette matmul's split sum in the kernel keep its
occupancy: at gate (batches 1 and 16) and down (batch 1), the dispatch's split configs summed in the kernel as
compiled, in the kernel with at most CAP registers a thread, and by launches after it, side by side with cuBLAS.

    PYTHONPATH=lib python3 benchmarks/compressed_register_cap.py --out results/compressed_split_k/register_cap_h100.csv

Contender names carry each binary's registers a thread and spilled bytes, as Triton reports them on the GPU.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

from tunebench.measure.probe_rounds import Contender, checked_contenders, probe_command

SHAPES = ((1, 14336, 4096), (16, 14336, 4096), (1, 4096, 14336))
TILES = ((16, 64, 64, 4, 4, 3), (16, 64, 64, 16, 4, 3))  # (BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages)
CAP = 80  # the registers a thread of 16x64x64 w4 s3's unsplit binary (Triton 3.9's cross-compile, stop 92)
TITLE = "The palette matmul's split sum in the kernel with registers capped, beside the sum by launches and cuBLAS"


def launch_in_kernel(inputs: Any, config: Mapping[str, Any], cap: int | None) -> Callable[[], Any]:
    """The palette matmul's launch as `reconstruct.multiply` makes it for a config summed in the kernel (which needs
    no launch after it), with Triton's `maxnreg` set to `cap` unless None; a call returns the compiled kernel."""
    from tunebench.kernels.compressed_matmul import reconstruct

    pointers, (k, n) = reconstruct._operands("palette", inputs.weight, None, None, None)
    m = inputs.x.shape[0]
    options = {} if cap is None else {"maxnreg": cap}
    arguments = reconstruct._launch_arguments(config, "palette", k)
    assert arguments["LAST_SPLIT_STORES"]
    return functools.partial(
        reconstruct.reconstruct_matmul_kernel[reconstruct._grid(config, m, n)], inputs.x, inputs.out,
        inputs.split.workspace, inputs.split.tile_counts, *pointers, m, n, k, inputs.x.stride(0), inputs.out.stride(0),
        **arguments, **options)


def contenders(shape: tuple[int, int, int], multiprocessors: int) -> Mapping[str, Contender]:
    """cuBLAS, and each of TILES summed in the kernel (as compiled, and capped at CAP registers) and by launches."""
    import torch

    from tunebench.kernels.compressed_matmul import family, reconstruct

    inputs = family.make_inputs(shape, "bfloat16")
    runs: dict[str, Callable[[], Any]] = {"cuBLAS": lambda: torch.matmul(inputs.x, inputs.bf16_weight, out=inputs.out)}
    for tile in TILES:
        config = {**dict(zip(reconstruct.MATMUL_PARAMETERS, tile)), "split_reduction": "in_kernel"}
        label = f"{tile[0]}x{tile[1]}x{tile[2]} split {tile[3]} w{tile[4]} s{tile[5]}"
        for cap in (None, CAP):
            launch = launch_in_kernel(inputs, config, cap)
            kernel = launch()  # compiled here, so the name can say what it became
            way = "in the kernel" + ("" if cap is None else f", maxnreg {cap}")
            runs[f"{label} {way} ({kernel.n_regs} registers, {kernel.n_spills} spilled)"] = launch
        runs[f"{label} by launches after it"] = functools.partial(
            reconstruct.multiply, inputs.x, "palette", dict(config, split_reduction="separate_launches"), inputs.out,
            inputs.split, inputs.weight)
    return checked_contenders(runs, inputs.out, family.reference(inputs))


if __name__ == "__main__":
    raise SystemExit(probe_command(__doc__.split("\n\n")[0], "benchmarks/compressed_register_cap.py", TITLE, SHAPES,
                                   contenders))
