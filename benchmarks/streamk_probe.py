"""A stream-K probe for the TMA GEMM's lagging prefill shapes: every SM takes an equal share of all tiles' K steps, so
fewer tiles than SMs no longer leave SMs idle; timed in shuffled rounds beside cuBLAS and the sweep's best TMA config.

A probe, not part of `matmul_tma`'s space. Its kernel takes two switches. REDUCE: a tile split between programs is
summed by the last program to finish its part (fp32 partials in a workspace, an arrival counter per tile); without it
each part is stored as if it were the whole tile, a wrong result that times the balanced schedule alone (its output is
not checked). HEADS_FIRST: each program runs its parts last to first, so that the parts that start at K = 0 run at the
same time on every SM and share the same slices of A and B in L2. On an H200:
`PYTHONPATH=lib python3 benchmarks/streamk_probe.py --out results/matmul_tma/streamk_probe/rounds_h200.csv`
(writes the summary beside it as `.md`; `--summarize` writes it again from the CSV, anywhere).
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from tunebench.kernels import matmul, matmul_tma
from tunebench.measure.dataset import Dataset, load_dataset
from tunebench.measure.probe_rounds import probe_command

REPO = Path(__file__).resolve().parents[1]
SWEEP = REPO / "results/datasets/matmul_tma_bfloat16_h200_mid.parquet"
SHAPES = ((256, 11008, 4096), (512, 4096, 11008), (768, 4096, 14336), (1024, 6144, 4096))
TILES = (  # BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages: the sweep's best tiles at these shapes
    (128, 256, 64, 8, 4), (128, 256, 64, 8, 3), (128, 128, 64, 4, 5),
)
TITLE = "A stream-K probe against cuBLAS and the TMA sweep's best"
REDUCE_ROWS = 32  # rows of a tile the reducing program sums at a time (a whole fp32 tile would spill registers)


@triton.jit
def _offsets(tile, tiles_m, tiles_n, GROUP_M: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    tiles_in_group = GROUP_M * tiles_n
    first_m = tile // tiles_in_group * GROUP_M
    rows = min(tiles_m - first_m, GROUP_M)
    return (first_m + tile % tiles_in_group % rows) * BLOCK_M, tile % tiles_in_group // rows * BLOCK_N


@triton.jit(do_not_specialize=["M"])
def streamk_kernel(a_desc, b_desc, c_desc, c, partials, arrivals, M, N, K,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                   REDUCE: tl.constexpr, HEADS_FIRST: tl.constexpr, REDUCE_ROWS: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    per_program = tl.cdiv(tiles_m * tiles_n * k_steps, tl.num_programs(0))
    first = pid * per_program  # this program's K steps, counted over all tiles in order: [first, end)
    end = tl.minimum(first + per_program, tiles_m * tiles_n * k_steps)
    first_tile = first // k_steps
    parts = tl.where(end > first, (end - 1) // k_steps - first_tile + 1, 0)
    rows = tl.arange(0, BLOCK_M)[:, None]
    cols = tl.arange(0, BLOCK_N)[None, :]
    for index in range(parts):
        part = parts - 1 - index if HEADS_FIRST else index
        tile_first = (first_tile + part) * k_steps
        k0 = tl.maximum(first - tile_first, 0)
        k1 = tl.minimum(k_steps, end - tile_first)
        offset_m, offset_n = _offsets(first_tile + part, tiles_m, tiles_n, GROUP_M, BLOCK_M, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k1 - k0):
            acc = tl.dot(a_desc.load([offset_m, (k0 + k) * BLOCK_K]), b_desc.load([(k0 + k) * BLOCK_K, offset_n]), acc)
        if (k0 == 0 and k1 == k_steps) or not REDUCE:  # stored in two column halves, as EPILOGUE_SPLIT=2 does
            left, right = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
            c_desc.store([offset_m, offset_n], left.to(c_desc.dtype))
            c_desc.store([offset_m, offset_n + BLOCK_N // 2], right.to(c_desc.dtype))
        else:  # a program holds at most two split parts: its first (slot 0) and its last (slot 1)
            slot = (2 * pid + tl.where(part > 0, 1, 0)).to(tl.int64) * (BLOCK_M * BLOCK_N)
            tl.store(partials + slot + rows * BLOCK_N + cols, acc, cache_modifier=".cg")
            tl.debug_barrier()
            sharers = (tile_first + k_steps - 1) // per_program - tile_first // per_program + 1
            if tl.atomic_add(arrivals + first_tile + part, 1, sem="acq_rel", scope="gpu") == sharers - 1:
                for chunk in tl.static_range(0, BLOCK_M, REDUCE_ROWS):
                    chunk_rows = chunk + tl.arange(0, REDUCE_ROWS)[:, None]
                    total = tl.zeros((REDUCE_ROWS, BLOCK_N), dtype=tl.float32)
                    for sharer in range(tile_first // per_program, tile_first // per_program + sharers):
                        sharer_slot = (2 * sharer + tl.where(sharer * per_program < tile_first, 1, 0)).to(tl.int64)
                        total += tl.load(partials + sharer_slot * (BLOCK_M * BLOCK_N) + chunk_rows * BLOCK_N + cols,
                                         cache_modifier=".cg")
                    out_rows = offset_m + chunk_rows
                    tl.store(c + out_rows.to(tl.int64) * N + offset_n + cols, total.to(c.dtype.element_ty),
                             mask=(out_rows < M) & (offset_n + cols < N))
                tl.atomic_xchg(arrivals + first_tile + part, 0, sem="relaxed", scope="gpu")  # ready for the next run


class StreamK:
    """One stream-K config bound to one problem's operands: a grid of one program per SM, its workspace and counters."""

    def __init__(self, tile: tuple[int, int, int, int, int], reduce: bool, heads_first: bool,
                 inputs: matmul.MatmulInputs, programs: int) -> None:
        a, b, out = inputs.a, inputs.b, inputs.out
        (m, k), n = a.shape, b.shape[1]
        block_m, block_n, block_k, warps, stages = tile
        self.grid = (programs,)
        self.descriptors = (TensorDescriptor(a, [m, k], [k, 1], [block_m, block_k]),
                            TensorDescriptor(b, [k, n], [n, 1], [block_k, block_n]),
                            TensorDescriptor(out, [m, n], [n, 1], [block_m, block_n // 2]))
        self.out = out
        self.partials = torch.empty(2 * programs * block_m * block_n, device=a.device, dtype=torch.float32)
        self.arrivals = torch.zeros(triton.cdiv(m, block_m) * triton.cdiv(n, block_n), device=a.device,
                                    dtype=torch.int32)
        self.shape = (m, n, k)
        self.options = dict(BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=8, REDUCE=reduce,
                            HEADS_FIRST=heads_first, REDUCE_ROWS=REDUCE_ROWS, num_warps=warps, num_stages=stages)

    def __call__(self) -> None:
        streamk_kernel[self.grid](*self.descriptors, self.out, self.partials, self.arrivals, *self.shape,
                                  **self.options)


def variant_name(tile: tuple[int, ...], reduce: bool, heads_first: bool) -> str:
    block_m, block_n, block_k, warps, stages = tile
    return (f"stream-K {block_m}x{block_n}x{block_k} w{warps} s{stages}, "
            f"{'reduced' if reduce else 'unreduced (wrong output)'}, {'heads first' if heads_first else 'in order'}")


@functools.cache
def _sweep() -> Dataset:
    return load_dataset(SWEEP, kernel="matmul_tma")


def sweep_best(shape: tuple[int, int, int]) -> dict:
    """The sweep's fastest `matmul_tma` config at `shape`."""
    return _sweep().best_config(shape)


def contenders(shape: tuple[int, int, int], programs: int) -> dict:
    """Name -> callable: cuBLAS, the sweep's best TMA config and every stream-K variant; reduced variants are checked
    against an fp32 reference first (a wrong one raises)."""
    inputs = matmul_tma.make_inputs(shape, "bfloat16")
    expected = matmul.reference(inputs)
    best = sweep_best(shape)
    called = {"cuBLAS": lambda: torch.matmul(inputs.a, inputs.b, out=inputs.out),
              "TMA sweep's best": lambda: matmul_tma.run(best, inputs)}
    for tile in TILES:
        for reduce in (True, False):
            for heads_first in (True, False):
                variant = StreamK(tile, reduce, heads_first, inputs, programs)
                if reduce:
                    for _ in range(3):  # the counters must come back to zero for the next run to sum right
                        inputs.out.zero_()
                        variant()
                    error = matmul.relative_error(inputs.out, expected)
                    if not error <= matmul.TOLERANCE["bfloat16"]:
                        raise RuntimeError(f"{variant_name(tile, reduce, heads_first)} at {shape}: error {error}")
                called[variant_name(tile, reduce, heads_first)] = variant
    return called


def main(argv: list[str] | None = None) -> int:
    return probe_command(__doc__.split("\n\n")[0], "benchmarks/streamk_probe.py", TITLE, SHAPES, contenders, argv)


if __name__ == "__main__":
    raise SystemExit(main())
