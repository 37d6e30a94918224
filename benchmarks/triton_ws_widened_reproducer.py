"""A standalone reproducer, for the Triton project, of the wrong results that the TMA GEMM's widened, warp-specialized
configs give on Hopper: two dots per K step on one A tile inside a warp-specialized tile loop, 4 warps, 64-row tiles.

Only torch and triton are imported, so the file can be attached to an upstream report as it is. Each variant of the
kernel below is compiled, run on one shape and compared with torch.matmul in fp32; the output says, per variant, whether
it failed to compile, and else the largest error in each of the output's three column blocks. On an H200:
`python3 benchmarks/triton_ws_widened_reproducer.py --out results/matmul_tma/ws_widened_reproducer/h200.md`.
"""

from __future__ import annotations

import argparse
import itertools
import os
import tempfile
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def two_dot_kernel(a_desc, b_desc, b_extra_desc, c_desc, M, N, K,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   WARP_SPECIALIZE: tl.constexpr):
    """C = A @ B in tiles of BLOCK_M x 1.5 BLOCK_N: a dot for the first BLOCK_N columns and one for the next
    BLOCK_N / 2, both on the same A tile; tiles in row-major order, one or more per program; stored in three slices
    of BLOCK_N / 2 columns."""
    EXTRA_N: tl.constexpr = BLOCK_N // 2
    tiles_n = tl.cdiv(N, BLOCK_N + EXTRA_N)
    for tile in tl.range(tl.program_id(0), tl.cdiv(M, BLOCK_M) * tiles_n, tl.num_programs(0),
                         warp_specialize=WARP_SPECIALIZE):
        offset_m = tile // tiles_n * BLOCK_M
        offset_n = tile % tiles_n * (BLOCK_N + EXTRA_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        extra = tl.zeros((BLOCK_M, EXTRA_N), dtype=tl.float32)
        for k in range(tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([offset_m, k * BLOCK_K])
            acc = tl.dot(a, b_desc.load([k * BLOCK_K, offset_n]), acc)
            extra = tl.dot(a, b_extra_desc.load([k * BLOCK_K, offset_n + BLOCK_N]), extra)
        c_desc.store([offset_m, offset_n + BLOCK_N], extra.to(c_desc.dtype))
        left, right = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
        c_desc.store([offset_m, offset_n], left.to(c_desc.dtype))
        c_desc.store([offset_m, offset_n + BLOCK_N // 2], right.to(c_desc.dtype))


def run_variant(a: torch.Tensor, b: torch.Tensor, reference: torch.Tensor, block_m: int, block_n: int, block_k: int,
                warp_specialize: bool, num_warps: int, num_stages: int, programs: int) -> dict[str, object]:
    """Compile and run one variant; its status and the largest error of each column block of the output."""
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty(M, N, device=a.device, dtype=a.dtype)
    descriptors = (TensorDescriptor.from_tensor(a, [block_m, block_k]),
                   TensorDescriptor.from_tensor(b, [block_k, block_n]),
                   TensorDescriptor.from_tensor(b, [block_k, block_n // 2]),
                   TensorDescriptor.from_tensor(c, [block_m, block_n // 2]))
    tiles = triton.cdiv(M, block_m) * triton.cdiv(N, block_n * 3 // 2)
    grid = (tiles if programs == 0 else min(tiles, programs),)
    try:
        two_dot_kernel[grid](*descriptors, M, N, K, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                             WARP_SPECIALIZE=warp_specialize, num_warps=num_warps, num_stages=num_stages)
        torch.cuda.synchronize()
    except Exception as error:  # a compile failure is a result here, reported by its last line
        return {"status": "compile error", "detail": str(error).strip().splitlines()[-1][:120]}
    error = (c.float() - reference).abs()
    width = block_n * 3 // 2
    blocks = [error.view(M, N // width, width)[:, :, start:stop].max().item()
              for start, stop in ((0, block_n // 2), (block_n // 2, block_n), (block_n, width))]
    wrong = max(blocks) > 0.05 * reference.abs().max().item() or not torch.isfinite(c.float()).all()
    return {"status": "wrong" if wrong else "ok", "detail": ", ".join(f"{value:.3g}" for value in blocks)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="1024x1536x1024", help="MxNxK: M a multiple of 128, N of 192, K of 64")
    parser.add_argument("--out", type=Path, help="also write the table here (markdown)")
    args = parser.parse_args()
    sizes = args.shape.split("x")
    if len(sizes) != 3 or not all(size.isdigit() for size in sizes):
        parser.error(f"--shape {args.shape!r} is not MxNxK with three positive integers")
    M, N, K = (int(size) for size in sizes)
    if M % 128 or N % 192 or K % 64 or 0 in (M, N, K):
        parser.error(f"--shape {args.shape}: M must be a multiple of 128, N of 192 (1.5 x the largest BLOCK_N) and K "
                     "of 64, so that every tile of every variant is whole")
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    reference = a.float() @ b.float()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    lines = [f"# Two dots on one A tile in a warp-specialized loop: {args.shape}, bf16, "
             f"{torch.cuda.get_device_name(0)}",
             f"torch {torch.__version__}, triton {triton.__version__}. Largest absolute error of the first, second and "
             "extra column blocks against fp32 torch.matmul (a right variant's is the bf16 rounding of its output, "
             "under 1 at this shape).", "",
             "| BLOCK_M | BLOCK_N | BLOCK_K | warp specialize | warps | stages | programs | status | errors |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    variants = itertools.product((64, 128), (64, 128), (64,), (True, False), (4, 8), (2, 3), (0, sms))
    for block_m, block_n, block_k, specialize, warps, stages, programs in variants:
        result = run_variant(a, b, reference, block_m, block_n, block_k, specialize, warps, stages, programs)
        lines.append(f"| {block_m} | {block_n} | {block_k} | {specialize} | {warps} | {stages} | "
                     f"{programs or 'one per tile'} | {result['status']} | {result['detail']} |")
        print(lines[-1], flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=args.out.parent, delete=False) as handle:
            handle.write("\n".join(lines) + "\n")
        os.replace(handle.name, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
