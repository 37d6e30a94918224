"""Synthetic BF16 weights whose exponent statistics match real trained ones: exponents drawn from a histogram fitted
on real weights (benchmarks/compression.py writes it), sign and mantissa uniform; seeded.

Uniform sign+mantissa bytes match trained weights closely (their entropy is ~7.9 of 8 bits); the exponents are drawn
independently, so row or column structure of real weights (and so where verbatim groups fall) is not reproduced.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from tunebench.kernels.compressed_matmul.format import join_bits

STATISTICS_PATH = Path(__file__).with_name("exponent_statistics.json")
SAMPLING_BITS = 24  # exponents come from a table of 2**24 entries: probabilities kept to multiples of 6e-8
# Llama-3.1-8B MLP projections as (K, N) = (in features, out features) of x @ W: hidden 4096, intermediate 14336.
LLAMA_3_1_8B_MLP = {"gate": (4096, 14336), "up": (4096, 14336), "down": (14336, 4096)}


def exponent_distribution(path: Path = STATISTICS_PATH) -> np.ndarray:
    """Probabilities (256,) of each exponent byte, from a statistics file written by benchmarks/compression.py."""
    statistics = json.loads(Path(path).read_text())
    counts = np.zeros(256, dtype=np.float64)
    for exponent, count in statistics["exponent_counts"].items():
        counts[int(exponent)] = count
    if counts.sum() <= 0:
        raise ValueError(f"{path}: exponent_counts has no positive count")
    return counts / counts.sum()


def sampling_table(probabilities: np.ndarray) -> np.ndarray:
    """A uint8 table of 2**SAMPLING_BITS exponents in which each exponent's share is its probability, rounded by
    largest remainders (a table lookup per weight is ~10x faster than a search of the cumulative distribution)."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if probabilities.shape != (256,) or (probabilities < 0).any() or probabilities.sum() <= 0:
        raise ValueError(f"expected 256 non-negative probabilities with a positive sum, got shape {probabilities.shape}")
    scaled = probabilities / probabilities.sum() * 2**SAMPLING_BITS
    counts = np.floor(scaled).astype(np.int64)
    counts[np.argsort(counts - scaled)[:2**SAMPLING_BITS - counts.sum()]] += 1
    return np.repeat(np.arange(256, dtype=np.uint8), counts)


def synthetic_bits(shape: tuple[int, int], seed: int | Sequence[int], probabilities: np.ndarray | None = None) -> np.ndarray:
    """BF16 bit patterns (uint16) of `shape` with exponents drawn from `probabilities` (default: the fitted real
    histogram) and uniform sign+mantissa bytes."""
    table = sampling_table(exponent_distribution() if probabilities is None else probabilities)
    rng = np.random.default_rng(seed)
    size = int(np.prod(shape))
    exponent = table[rng.integers(0, 2**SAMPLING_BITS, size, dtype=np.uint32)]
    sign_mantissa = rng.integers(0, 256, size, dtype=np.uint8)
    return join_bits(exponent, sign_mantissa).reshape(shape)
