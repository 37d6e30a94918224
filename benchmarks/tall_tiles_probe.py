"""Tall tiles for the TMA GEMM: tiles of 1.5 x BLOCK_M rows (192 x 128, as cuBLAS's own kernels run at three of the
prefill-sized layers), timed in shuffled rounds beside cuBLAS and the widened sweep's best config.

A probe, not part of `matmul_tma`'s space. cuBLAS is column-major, so torch's row-major C = A @ B runs there as
C^T = B^T A^T, and the tile its kernel names (`cublas_kernels_h200.md`: 192 x 128 at 256 x 11008 x 4096 and 1024 x 6144
x 4096, 128 x 192 at 768 x 4096 x 14336) may read in either order. The space widens along N (WIDEN: 128 x 192); this
kernel widens along M: a second row block of BLOCK_M / 2 below the first, with a dot of its own on the same B tile, so
the two orders can be timed side by side. On an H200: `PYTHONPATH=lib python3 benchmarks/tall_tiles_probe.py --out
results/matmul_tma/tall_tiles/rounds_h200.csv` (writes the summary beside it as `.md`; `--summarize` writes it again
from the CSV, anywhere).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from tunebench.kernels import matmul, matmul_tma
from tunebench.measure.dataset import Dataset, load_dataset
from tunebench.measure.probe_rounds import Contender, probe_command

REPO = Path(__file__).resolve().parents[1]
# Each shape's widened sweep: the four prefill-sized layers, and 4096^3 (where cuBLAS runs 256 x 128).
SWEEPS = {
    (256, 11008, 4096): "matmul_tma_bfloat16_h200_mid_widened.parquet",
    (512, 4096, 11008): "matmul_tma_bfloat16_h200_mid_widened.parquet",
    (768, 4096, 14336): "matmul_tma_bfloat16_h200_mid_widened.parquet",
    (1024, 6144, 4096): "matmul_tma_bfloat16_h200_mid_widened.parquet",
    (4096, 4096, 4096): "matmul_tma_bfloat16_h200_default_widened.parquet",
}
TITLE = "Tall tiles (1.5 x BLOCK_M rows) against cuBLAS and the TMA sweep's best"


class TallTile(NamedTuple):
    """A tall tile's blocks and launch: (BLOCK_M + BLOCK_M / 2) x BLOCK_N output rows by columns."""

    block_m: int
    block_n: int
    block_k: int
    warps: int
    stages: int
    programs_per_sm: int = 0  # 0: a program per tile; else persistent programs, as PROGRAMS_PER_SM


# 192 x 128 on one and two warp groups, with 3 to 5 stages and persistent; 192 x 256 and 384 x 128 on two warp groups.
TILES = (
    TallTile(128, 128, 64, 4, 4), TallTile(128, 128, 64, 4, 3), TallTile(128, 128, 64, 4, 5),
    TallTile(128, 128, 64, 8, 4), TallTile(128, 128, 64, 4, 4, 1),
    TallTile(128, 256, 64, 8, 3), TallTile(256, 128, 64, 8, 3), TallTile(256, 128, 32, 8, 4),
)


@triton.jit(do_not_specialize=["M"])
def tall_tile_kernel(a_desc, a_extra_desc, b_desc, c_desc, c_extra_desc, M, N, K,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    EXTRA_M: tl.constexpr = BLOCK_M // 2
    tiles_m = tl.cdiv(M, BLOCK_M + EXTRA_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    tiles_in_group = GROUP_M * tiles_n  # the grouped order of `matmul_tma`
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, tl.num_programs(0)):
        first_m = tile // tiles_in_group * GROUP_M
        rows = min(tiles_m - first_m, GROUP_M)
        offset_m = (first_m + tile % tiles_in_group % rows) * (BLOCK_M + EXTRA_M)
        offset_n = tile % tiles_in_group // rows * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        extra = tl.zeros((EXTRA_M, BLOCK_N), dtype=tl.float32)
        for k in range(k_steps):  # the descriptors zero-fill reads past K, M or N, and clip the stores
            b = b_desc.load([k * BLOCK_K, offset_n])
            acc = tl.dot(a_desc.load([offset_m, k * BLOCK_K]), b, acc)
            extra = tl.dot(a_extra_desc.load([offset_m + BLOCK_M, k * BLOCK_K]), b, extra)
        c_extra_desc.store([offset_m + BLOCK_M, offset_n], extra.to(c_extra_desc.dtype))
        left, right = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
        c_desc.store([offset_m, offset_n], left.to(c_desc.dtype))  # in column halves, as EPILOGUE_SPLIT=2
        c_desc.store([offset_m, offset_n + BLOCK_N // 2], right.to(c_desc.dtype))


class TallTileGemm:
    """One tall tile bound to one problem's operands, called to compute inputs.a @ inputs.b into inputs.out."""

    def __init__(self, tile: TallTile, inputs: matmul.MatmulInputs, sms: int) -> None:
        a, b, out = inputs.a, inputs.b, inputs.out
        (m, k), n = a.shape, b.shape[1]
        extra_m = tile.block_m // 2
        tiles = triton.cdiv(m, tile.block_m + extra_m) * triton.cdiv(n, tile.block_n)
        self.grid = (tiles if tile.programs_per_sm == 0 else min(tiles, tile.programs_per_sm * sms),)
        self.descriptors = (TensorDescriptor(a, [m, k], [k, 1], [tile.block_m, tile.block_k]),
                            TensorDescriptor(a, [m, k], [k, 1], [extra_m, tile.block_k]),
                            TensorDescriptor(b, [k, n], [n, 1], [tile.block_k, tile.block_n]),
                            TensorDescriptor(out, [m, n], [n, 1], [tile.block_m, tile.block_n // 2]),
                            TensorDescriptor(out, [m, n], [n, 1], [extra_m, tile.block_n]))
        self.shape = (m, n, k)
        self.options = dict(BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, BLOCK_K=tile.block_k, GROUP_M=8,
                            num_warps=tile.warps, num_stages=tile.stages)

    def __call__(self) -> None:
        tall_tile_kernel[self.grid](*self.descriptors, *self.shape, **self.options)


def tile_name(tile: TallTile) -> str:
    rows = tile.block_m * 3 // 2
    return (f"tall {rows}x{tile.block_n}x{tile.block_k} w{tile.warps} s{tile.stages}"
            + (f", {tile.programs_per_sm} program per SM" if tile.programs_per_sm else ""))


@functools.cache
def _sweep(name: str) -> Dataset:
    return load_dataset(REPO / "results/datasets" / name, kernel="matmul_tma")


def sweep_best(shape: tuple[int, int, int]) -> dict:
    """The widened sweep's fastest `matmul_tma` config at `shape`."""
    if shape not in SWEEPS:
        raise ValueError(f"no widened sweep holds {shape}; these do: {sorted(SWEEPS)}")
    dataset = _sweep(SWEEPS[shape])
    task = dataset.task(shape)
    fastest = task[task.status == "ok"].sort_values("latency_ms", kind="stable").head(1)
    return fastest[list(dataset.parameter_names)].to_dict("records")[0]


def contenders(shape: tuple[int, int, int], sms: int) -> dict[str, Contender]:
    """Name -> callable: cuBLAS, the sweep's best TMA config and every tall tile, each checked against an fp32
    reference first; a tall tile that fails to compile or run, or misses the reference, maps to its status."""
    inputs = matmul_tma.make_inputs(shape, "bfloat16")
    expected = matmul.reference(inputs)
    best = sweep_best(shape)
    called: dict[str, Contender] = {"cuBLAS": lambda: torch.matmul(inputs.a, inputs.b, out=inputs.out),
                                    "TMA sweep's best": lambda: matmul_tma.run(best, inputs)}
    for name, run in list(called.items()) + [(tile_name(tile), TallTileGemm(tile, inputs, sms)) for tile in TILES]:
        inputs.out.fill_(float("nan"))
        try:
            run()
            error = matmul.relative_error(inputs.out, expected)
            called[name] = run if error <= matmul.TOLERANCE["bfloat16"] else f"wrong_result: error {error:.3g}"
        except Exception as failure:  # noqa: BLE001 (a compile or launch failure is a result to record)
            called[name] = f"error: {type(failure).__name__}: {str(failure)[:160]}"
    return called


def main(argv: list[str] | None = None) -> int:
    return probe_command(__doc__.split("\n\n")[0], "benchmarks/tall_tiles_probe.py", TITLE, SWEEPS, contenders, argv)


if __name__ == "__main__":
    raise SystemExit(main())
