"""The GEMM that Helion autotunes in `helion_side_by_side.py`: Helion's own documented matmul form (one output tile
per program, an fp32 accumulator over K tiles), so its autotuner searches the space Helion builds for that program.

Imports Helion, which tunebench does not install: only the GPU machine's runs carry its wheels (see the script).
"""

from __future__ import annotations

from typing import Any

import helion
import helion.language as hl
import torch


def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x (M x K) @ y (K x N), accumulated in fp32, returned in x's dtype."""
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc
    return out


def helion_matmul(effort: str) -> Any:
    """`matmul` as a Helion kernel that autotunes at `effort` ("quick" or "full") on its first call."""
    return helion.kernel(autotune_effort=effort)(matmul)
