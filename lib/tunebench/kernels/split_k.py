"""Split-K's reduction inside the GEMM kernels' own launch: every split adds its partial sum into an fp32 workspace,
and the last split of a tile to arrive casts the tile's total into the output and leaves the workspace at zero.

Before (stop 90), `run` zeroed the workspace before the kernel and cast it into C after it: three launches, where the
two small ones cost more than the GEMM itself saves at small M. Here one launch does it all, as CUTLASS's serial
split-K does with a semaphore per tile; the counters and the workspace are zero when allocated and every launch leaves
them so.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

SMALLEST_TILE = 16  # no GEMM block is smaller along M or N (tl.dot needs 16), so this many tiles bound any config's


def tile_counters(m: int, n: int, device: str | torch.device) -> torch.Tensor:
    """Zeroed int32 counters, one per output tile of the smallest tiles: enough for any config's tiles of M x N."""
    return torch.zeros(triton.cdiv(m, SMALLEST_TILE) * triton.cdiv(n, SMALLEST_TILE), dtype=torch.int32,
                       device=device)


def check_split_buffers(workspace: torch.Tensor, tile_counts: torch.Tensor, m: int, n: int, split_k: int) -> None:
    """Refuse a workspace or counters that a split of M x N cannot use (`tile_counters`' for M x N can)."""
    if tuple(workspace.shape) != (m, n) or workspace.dtype != torch.float32:
        raise ValueError(f"SPLIT_K={split_k} adds into an fp32 workspace of M x N = {m} x {n}, got "
                         f"{workspace.dtype} {tuple(workspace.shape)}")
    tiles = triton.cdiv(m, SMALLEST_TILE) * triton.cdiv(n, SMALLEST_TILE)
    if tile_counts.numel() < tiles or tile_counts.dtype != torch.int32:
        raise ValueError(f"SPLIT_K={split_k} counts splits per tile in at least {tiles} int32 counters for M x N = "
                         f"{m} x {n}, got {tile_counts.dtype} of {tile_counts.numel()}")


@triton.jit
def add_split(acc, workspace_ptrs, out_ptrs, mask, tile_count_ptr, SPLIT_K: tl.constexpr):
    """Add this split's partial sum `acc` into the workspace; the tile's last split to arrive stores the total into
    `out_ptrs` in their element type and zeroes the workspace tile and its counter for the next launch."""
    # Relaxed adds (fire-and-forget reductions), then a barrier, then one thread counts the split in with a release:
    # CUTLASS's semaphore, where PTX's cumulativity orders every thread's adds before the count. The last split's
    # acquire of the count orders its reads of the total after every split's adds. Acquire-release adds ran as
    # correctly and 1.2x slower at 36 x 616 x 13192 on an H100 (results/split_k_epilogue/).
    tl.atomic_add(workspace_ptrs, acc, mask=mask, sem="relaxed")
    tl.debug_barrier()
    arrived = tl.atomic_add(tile_count_ptr, 1, sem="acq_rel")
    if arrived == SPLIT_K - 1:
        total = tl.load(workspace_ptrs, mask=mask, other=0.0, cache_modifier=".cg")
        tl.store(out_ptrs, total.to(out_ptrs.dtype.element_ty), mask=mask)
        # The compiler may zero with another thread-to-element layout than it loaded with: without this barrier a
        # thread could zero elements that another has not read yet (seen on an H100, stop 91).
        tl.debug_barrier()
        tl.store(workspace_ptrs, tl.zeros_like(total), mask=mask)
        tl.atomic_xchg(tile_count_ptr, 0, sem="relaxed")
