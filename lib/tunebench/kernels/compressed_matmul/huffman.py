"""Length-limited canonical Huffman codes for small alphabets (here the 16 palette codes).

Code lengths come from package-merge (optimal under the length limit); codes are canonical, MSB first, so a
decoder finds a symbol and its length with one lookup of the next `max_length` bits.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

TABLE_SYMBOL_BITS = 4  # a decode-table entry is symbol | length << 4
MAX_SUPPORTED_LENGTH = 15  # lengths must fit the entry's 4 length bits


def code_lengths(counts: Sequence[int], max_length: int) -> np.ndarray:
    """Optimal code lengths (uint8; 0 for a symbol that never occurs) with none longer than `max_length`,
    by package-merge. A single occurring symbol gets length 1."""
    counts = np.asarray(counts, dtype=np.int64)
    present = [int(symbol) for symbol in np.flatnonzero(counts)]
    if not 1 <= max_length <= MAX_SUPPORTED_LENGTH:
        raise ValueError(f"max_length={max_length} is not allowed; allowed: 1 to {MAX_SUPPORTED_LENGTH}")
    if not present:
        raise ValueError("cannot build a code: every count is 0")
    if len(present) > 2 ** max_length:
        raise ValueError(f"{len(present)} symbols do not fit codes of at most {max_length} bits")
    lengths = np.zeros(len(counts), dtype=np.uint8)
    if len(present) == 1:
        lengths[present[0]] = 1
        return lengths
    # Each item is (weight, symbols it covers); a symbol's length is how many chosen items cover it.
    leaves = sorted((int(counts[symbol]), (symbol,)) for symbol in present)
    items = leaves
    for _ in range(max_length - 1):
        packages = [(items[i][0] + items[i + 1][0], items[i][1] + items[i + 1][1]) for i in range(0, len(items) - 1, 2)]
        items = sorted(leaves + packages)
    for _, symbols in items[:2 * len(present) - 2]:
        for symbol in symbols:
            lengths[symbol] += 1
    return lengths


def canonical_codes(lengths: np.ndarray) -> np.ndarray:
    """The canonical code (uint32, MSB first) of each symbol: shorter codes first, ties by symbol."""
    lengths = np.asarray(lengths, dtype=np.int64)
    codes = np.zeros(len(lengths), dtype=np.uint32)
    code, previous = 0, 0
    for symbol in sorted(np.flatnonzero(lengths), key=lambda s: (lengths[s], s)):
        code <<= int(lengths[symbol]) - previous
        previous = int(lengths[symbol])
        codes[symbol] = code
        code += 1
    if code > 1 << previous:
        raise ValueError(f"code lengths {lengths.tolist()} violate the Kraft inequality")
    return codes


def decode_table(lengths: np.ndarray, max_length: int) -> np.ndarray:
    """int32 table of 2**max_length entries: the entry at the next `max_length` stream bits is
    symbol | length << 4. Entries no code reaches (an incomplete code) read as symbol 0 of length max_length."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.max(initial=0) > max_length:
        raise ValueError(f"a code length {int(lengths.max())} exceeds the table's max_length={max_length}")
    table = np.full(1 << max_length, max_length << TABLE_SYMBOL_BITS, dtype=np.int32)
    codes = canonical_codes(lengths)
    for symbol in np.flatnonzero(lengths):
        span = max_length - int(lengths[symbol])
        start = int(codes[symbol]) << span
        table[start:start + (1 << span)] = symbol | (int(lengths[symbol]) << TABLE_SYMBOL_BITS)
    return table


def entropy_bits(counts: Sequence[int]) -> float:
    """Shannon entropy, in bits per symbol, of the empirical distribution `counts`."""
    counts = np.asarray(counts, dtype=np.float64)
    probabilities = counts[counts > 0] / counts.sum()
    return float(-(probabilities * np.log2(probabilities)).sum())
