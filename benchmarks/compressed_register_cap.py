"""Whether capping registers (Triton's `maxnreg`) lets the palette matmul's split sum in the kernel keep its
occupancy: at gate (batches 1 and 16) and down (batch 1), the dispatch's split configs summed in the kernel at the
compiler's choice, with at most each of CAPS registers a thread, with each `register_cap` of the space ("as_by_launches":
at most the registers of the same tile summed by launches; "one_more_program": few enough for one program an SM more;
`reconstruct.register_cap`), and by launches after it, beside cuBLAS.

    PYTHONPATH=lib python3 benchmarks/compressed_register_cap.py --out results/compressed_split_k/register_cap_h100.csv

Contender names carry each binary's registers a thread and spilled 4-byte words (Triton's n_spills: local memory bytes
/ 4), as Triton reports them on the GPU.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

from tunebench.measure.probe_rounds import Contender, checked_contenders, probe_command

SHAPES = ((1, 14336, 4096), (16, 14336, 4096), (1, 4096, 14336))
TILES = ((16, 64, 64, 4, 4, 3), (16, 64, 64, 16, 4, 3))  # (BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages)
# On the H100 (Triton 3.6) the split 4 binary takes 80 registers a thread summed in the kernel and 72 by launches: 6
# or 7 programs of 4 warps an SM (results/compressed_split_k/profile_h100.md)
CAPS = (80, 72, 64)
TITLE = "The palette matmul's split sum in the kernel with registers capped, beside the sum by launches and cuBLAS"


def launch_in_kernel(inputs: Any, config: Mapping[str, Any], cap: int | None) -> Callable[[], Any]:
    """The palette matmul's launch for a config summed in the kernel (which needs no launch after it), with Triton's
    `maxnreg` set to `cap` unless None (the compiler's choice); a call returns the compiled kernel."""
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
    """cuBLAS; each of TILES in the kernel (uncapped, at each of CAPS, at each register_cap) and by launches."""
    import torch

    from tunebench.kernels.compressed_matmul import family, reconstruct

    inputs = family.make_inputs(shape, "bfloat16")
    runs: dict[str, Callable[[], Any]] = {"cuBLAS": lambda: torch.matmul(inputs.x, inputs.bf16_weight, out=inputs.out)}
    for tile in TILES:
        config = {**dict(zip(reconstruct.MATMUL_PARAMETERS, tile)), "split_reduction": "in_kernel"}
        label = f"{tile[0]}x{tile[1]}x{tile[2]} split {tile[3]} w{tile[4]} s{tile[5]}"
        for cap in (None, *CAPS):
            launch = launch_in_kernel(inputs, config, cap)
            kernel = launch()  # compiled here, so the name can say what it became
            way = "in the kernel, " + ("uncapped" if cap is None else f"maxnreg {cap}")
            runs[f"{label} {way} ({kernel.n_regs} registers, {kernel.n_spills} spilled)"] = launch
        for cap in reconstruct.REGISTER_CAPS[1:]:
            capped = dict(config, register_cap=cap)
            launched = reconstruct.compile_matmul(capped, "palette", shape)
            launched._init_handles()  # loads the binary, which sets n_regs and n_spills
            runs[f"{label} in the kernel, {cap} ({launched.n_regs} registers, {launched.n_spills} spilled)"] = \
                functools.partial(reconstruct.multiply, inputs.x, "palette", capped, inputs.out, inputs.split,
                                  inputs.weight)
        runs[f"{label} by launches after it"] = functools.partial(
            reconstruct.multiply, inputs.x, "palette", dict(config, split_reduction="separate_launches"), inputs.out,
            inputs.split, inputs.weight)
    return checked_contenders(runs, inputs.out, family.reference(inputs))


if __name__ == "__main__":
    raise SystemExit(probe_command(__doc__.split("\n\n")[0], "benchmarks/compressed_register_cap.py", TITLE, SHAPES,
                                   contenders))
