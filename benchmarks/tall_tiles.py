"""The TMA GEMM's tall tiles (TALL: 1.5 x BLOCK_M rows; 192 x 128 is cuBLAS's own tile at 768 x 4096 x 14336) timed in
shuffled rounds beside cuBLAS and the widened sweep's best config, which holds no tall tile.

cuBLAS is column-major, so torch's row-major C = A @ B runs there as C^T = B^T A^T, and the tile its kernel names is
columns x rows of ours (`results/matmul_tma/cublas_orientation_h200.md`): 128 x 192 at 768 x 4096 x 14336 is 192 rows
by 128 columns. WIDEN lengthens a tile along N, TALL along M. On an H200: `PYTHONPATH=lib python3
benchmarks/tall_tiles.py --out results/matmul_tma/tall_tiles/rounds_h200.csv` (writes the summary beside it as `.md`;
`--summarize` writes it again from the CSV, anywhere). Stop 63's first run (`probe_rounds_h200.md` there) timed a
probe kernel of its own (commit 51afd8b), which stored the extra rows whole rather than in column halves.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import torch

from tunebench.kernels import complete_config, matmul, matmul_tma
from tunebench.measure.dataset import Dataset, load_dataset
from tunebench.measure.probe_rounds import Contender, checked_contenders, probe_command

REPO = Path(__file__).resolve().parents[1]
# Each shape's widened sweep: the four prefill-sized layers, and 4096^3 (where cuBLAS runs 128 x 256: no tall tile).
SWEEPS = {
    (256, 11008, 4096): "matmul_tma_bfloat16_h200_mid_widened.parquet",
    (512, 4096, 11008): "matmul_tma_bfloat16_h200_mid_widened.parquet",
    (768, 4096, 14336): "matmul_tma_bfloat16_h200_mid_widened.parquet",
    (1024, 6144, 4096): "matmul_tma_bfloat16_h200_mid_widened.parquet",
    (4096, 4096, 4096): "matmul_tma_bfloat16_h200_default_widened.parquet",
}
TITLE = "Tall tiles (TALL, 1.5 x BLOCK_M rows) against cuBLAS and the TMA sweep's best"
# 192 x 128 on one warp group with 3 to 5 stages, on two, persistent and warp-specialized; 192 x 256 and 384 x 128 on
# two warp groups; 96 x 256 (cuBLAS's tile at 192 x 16384 x 4096).
TALL = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, PROGRAMS_PER_SM=0, WARP_SPECIALIZE=False, FLATTEN=False,
            EPILOGUE_SPLIT=2, WIDEN=False, TALL=True, num_warps=4, num_stages=4)
CONFIGS = (
    TALL, dict(TALL, num_stages=3), dict(TALL, num_stages=5), dict(TALL, num_warps=8),
    dict(TALL, PROGRAMS_PER_SM=1), dict(TALL, PROGRAMS_PER_SM=1, FLATTEN=True),
    dict(TALL, WARP_SPECIALIZE=True, num_warps=8), dict(TALL, BLOCK_N=256, num_warps=8, num_stages=3),
    dict(TALL, BLOCK_M=256, BLOCK_K=32, num_warps=8), dict(TALL, BLOCK_M=64, BLOCK_N=256),
)


def config_name(config: dict[str, Any]) -> str:
    """'tall 192x128x64 w4 s4', then what sets it apart: programs per SM, FLATTEN, warp specialization."""
    name = (f"tall {matmul_tma.tile_rows(config)}x{config['BLOCK_N']}x{config['BLOCK_K']} w{config['num_warps']} "
            f"s{config['num_stages']}")
    return name + "".join([f", {config['PROGRAMS_PER_SM']} program per SM" if config["PROGRAMS_PER_SM"] else "",
                           ", flattened" if config["FLATTEN"] else "",
                           ", warp-specialized" if config["WARP_SPECIALIZE"] else ""])


@functools.cache
def _sweep(name: str) -> Dataset:
    return load_dataset(REPO / "results/datasets" / name, kernel="matmul_tma")


def sweep_best(shape: tuple[int, int, int]) -> dict:
    """The widened sweep's fastest `matmul_tma` config at `shape`."""
    if shape not in SWEEPS:
        raise ValueError(f"no widened sweep holds {shape}; these do: {sorted(SWEEPS)}")
    return _sweep(SWEEPS[shape]).best_config(shape)


def contenders(shape: tuple[int, int, int], multiprocessors: int) -> dict[str, Contender]:
    """Name -> callable: cuBLAS, the sweep's best TMA config and every tall config (each one of the space), each
    checked against an fp32 reference first; one that fails to compile or run, or misses the reference, maps to its
    status. (`multiprocessors` is unused: `matmul_tma.run` sizes its own grid.)"""
    space = matmul_tma.config_space()
    for config in CONFIGS:
        space.check(complete_config("matmul_tma", config))  # CONFIGS were written before SPLIT_K joined the space
    inputs = matmul_tma.make_inputs(shape, "bfloat16")
    expected = matmul.reference(inputs)
    best = sweep_best(shape)
    runs = {"cuBLAS": lambda: torch.matmul(inputs.a, inputs.b, out=inputs.out),
            "TMA sweep's best": lambda: matmul_tma.run(best, inputs),
            **{config_name(config): functools.partial(matmul_tma.run, config, inputs) for config in CONFIGS}}
    return checked_contenders(runs, inputs.out, expected)


def main(argv: list[str] | None = None) -> int:
    return probe_command(__doc__.split("\n\n")[0], "benchmarks/tall_tiles.py", TITLE, SWEEPS, contenders, argv)


if __name__ == "__main__":
    raise SystemExit(main())
