"""How every kernel family's output is compared with its reference: one relative error, in fp64.

A NaN or an infinity anywhere in the output (an element a kernel never wrote keeps its NaN poison) fails it.
"""

from __future__ import annotations

import math

import torch


def relative_error(output: torch.Tensor, expected: torch.Tensor) -> float:
    """||output - expected|| / ||expected|| in fp64; NaN or inf anywhere in the output gives inf."""
    output = output.double()
    expected = expected.double()
    if not bool(torch.isfinite(output).all()):
        return math.inf
    return float(torch.linalg.vector_norm(output - expected) / torch.linalg.vector_norm(expected))
