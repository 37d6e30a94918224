"""The palette form of a BF16 weight matrix W (K x N, used as x @ W): sign+mantissa bytes, 4-bit exponent codes
and verbatim groups. Lossless; what the reconstructive matmul reads. CPU encoder and reference decoder (numpy).

Layout, chosen so that a matmul tile of W (BLOCK_K rows x BLOCK_N columns) loads every array contiguously
along N, like the BF16 matrix itself:

- `sign_mantissa` (K, N) uint8: bit 7 the sign, bits 0-6 the mantissa (incompressible, kept as is).
- `codes` (padded_rows / 2, N) uint8: the 4-bit palette code of row 2r in the low nibble of byte (r, n) and of row
  2r + 1 in the high nibble. K is padded to whole groups (padding codes are 0).
- A group is 64 consecutive rows of one column: (g, n) covers W[64g : 64g + 64, n]. A group holding any exponent
  outside the palette is verbatim: bit g % 8 of `verbatim_flags[g // 8, n]` is set (1/64 bit a weight), its codes
  are 0, and its 64 raw exponent bytes live in `verbatim_exponents`, groups sorted by column then row, with
  `verbatim_column_starts[n]` the first group of column n. The matmul zeroes flagged weights in its main loop (a
  flag bit per weight, no gathers) and adds each verbatim group of its column tile after the loop, exactly up to
  the order of the fp32 sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

GROUP_ROWS = 64  # rows of one verbatim group; the kernels find a group with shifts by 6 and 9 (8 groups a flag byte)
PALETTE_SIZE = 16  # 4-bit codes


@dataclass(frozen=True)
class PaletteWeight:
    """A BF16 matrix in palette form (see the module docstring for the layout)."""

    shape: tuple[int, int]  # (K, N)
    palette: np.ndarray  # uint8 (16,): the exponent of each code, most frequent first
    sign_mantissa: np.ndarray  # uint8 (K, N)
    codes: np.ndarray  # uint8 (padded_rows // 2, N)
    verbatim_flags: np.ndarray  # uint8 (ceil(groups / 8), N)
    verbatim_groups: np.ndarray  # int32 (V, 2): (group row g, column n), sorted by column then row
    verbatim_column_starts: np.ndarray  # int32 (N + 1,): verbatim groups of column n are [starts[n], starts[n + 1])
    verbatim_exponents: np.ndarray  # uint8 (V, 64): raw exponents of each verbatim group (0 past row K)

    @property
    def group_rows(self) -> int:
        """Groups along K (the last one may be partial)."""
        return -(-self.shape[0] // GROUP_ROWS)

    def stored_bytes(self) -> dict[str, int]:
        """Bytes of each array a matmul over this form keeps resident."""
        return {
            "sign_mantissa": self.sign_mantissa.nbytes, "codes": self.codes.nbytes,
            "verbatim_flags": self.verbatim_flags.nbytes, "verbatim_groups": self.verbatim_groups.nbytes,
            "verbatim_column_starts": self.verbatim_column_starts.nbytes,
            "verbatim_exponents": self.verbatim_exponents.nbytes, "palette": self.palette.nbytes,
        }


def bf16_bits(weight: torch.Tensor) -> np.ndarray:
    """The bit patterns of a 2-D BF16 tensor as a uint16 numpy array (on the CPU)."""
    if weight.dtype != torch.bfloat16 or weight.dim() != 2:
        raise ValueError(f"expected a 2-D bfloat16 tensor, got {weight.dim()}-D {weight.dtype}")
    return weight.detach().cpu().contiguous().view(torch.int16).numpy().view(np.uint16)


def bits_to_bf16(bits: np.ndarray) -> torch.Tensor:
    """The BF16 CPU tensor whose bit patterns are `bits` (uint16)."""
    return torch.from_numpy(np.ascontiguousarray(bits, dtype=np.uint16).view(np.int16)).view(torch.bfloat16)


def split_bits(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(exponent bytes, sign+mantissa bytes) of BF16 bit patterns."""
    bits = np.asarray(bits, dtype=np.uint16)
    exponent = ((bits >> 7) & 0xFF).astype(np.uint8)
    sign_mantissa = (((bits >> 8) & 0x80) | (bits & 0x7F)).astype(np.uint8)
    return exponent, sign_mantissa


def join_bits(exponent: np.ndarray, sign_mantissa: np.ndarray) -> np.ndarray:
    """BF16 bit patterns (uint16) from exponent and sign+mantissa bytes."""
    sign_mantissa = sign_mantissa.astype(np.uint16)
    return ((sign_mantissa & 0x80) << 8) | (exponent.astype(np.uint16) << 7) | (sign_mantissa & 0x7F)


def choose_palette(exponent_counts: np.ndarray) -> np.ndarray:
    """The 16 most frequent exponents, most frequent first (ties: smaller exponent first); with fewer than 16
    distinct exponents the rest are filled with unused values so that every code has a distinct exponent."""
    counts = np.asarray(exponent_counts, dtype=np.int64)
    if counts.shape != (256,):
        raise ValueError(f"exponent_counts must have 256 entries, got shape {counts.shape}")
    order = np.lexsort((np.arange(256), -counts))  # by count descending, then exponent ascending
    return order[:PALETTE_SIZE].astype(np.uint8)


def unpack_codes(codes: np.ndarray) -> np.ndarray:
    """(padded_rows, N) codes from the packed (padded_rows / 2, N) nibbles."""
    unpacked = np.empty((2 * codes.shape[0], codes.shape[1]), dtype=np.uint8)
    unpacked[0::2] = codes & 0xF
    unpacked[1::2] = codes >> 4
    return unpacked


def encode_palette(bits: np.ndarray) -> PaletteWeight:
    """The palette form of BF16 bit patterns `bits` (uint16, K x N)."""
    bits = np.asarray(bits)
    if bits.dtype != np.uint16 or bits.ndim != 2 or min(bits.shape) < 1:
        raise ValueError(f"expected a non-empty 2-D uint16 array of BF16 bits, got {bits.dtype} {bits.shape}")
    rows, columns = bits.shape
    groups = -(-rows // GROUP_ROWS)
    exponent, sign_mantissa = split_bits(bits)
    palette = choose_palette(np.bincount(exponent.ravel(), minlength=256))
    code_of = np.full(256, PALETTE_SIZE, dtype=np.uint8)  # PALETTE_SIZE marks "outside the palette"
    code_of[palette] = np.arange(PALETTE_SIZE, dtype=np.uint8)

    codes = np.zeros((groups * GROUP_ROWS, columns), dtype=np.uint8)
    codes[:rows] = code_of[exponent]
    by_group = codes.reshape(groups, GROUP_ROWS, columns)
    flags = (by_group == PALETTE_SIZE).any(axis=1)
    column, group_row = np.nonzero(flags.T)  # sorted by column, then row
    padded_exponent = np.zeros((groups * GROUP_ROWS, columns), dtype=np.uint8)
    padded_exponent[:rows] = exponent
    verbatim_exponents = padded_exponent.reshape(groups, GROUP_ROWS, columns)[group_row, :, column]
    by_group[group_row, :, column] = 0  # the most frequent code: the cheapest to entropy-code
    return PaletteWeight(
        shape=(rows, columns), palette=palette, sign_mantissa=sign_mantissa,
        codes=codes[0::2] | (codes[1::2] << 4),
        verbatim_flags=np.packbits(flags, axis=0, bitorder="little"),
        verbatim_groups=np.stack([group_row, column], axis=1).astype(np.int32).reshape(-1, 2),
        verbatim_column_starts=np.searchsorted(column, np.arange(columns + 1)).astype(np.int32),
        verbatim_exponents=np.ascontiguousarray(verbatim_exponents, dtype=np.uint8).reshape(-1, GROUP_ROWS),
    )


def palette_exponents(weight: PaletteWeight, codes: np.ndarray | None = None) -> np.ndarray:
    """The (K, N) exponent bytes of a palette form; `codes` replaces its packed codes (a transcoded copy)."""
    rows, columns = weight.shape
    exponent = weight.palette[unpack_codes(weight.codes if codes is None else codes)]
    group_row, column = weight.verbatim_groups[:, 0], weight.verbatim_groups[:, 1]
    exponent.reshape(weight.group_rows, GROUP_ROWS, columns)[group_row, :, column] = weight.verbatim_exponents
    return exponent[:rows]


def decode_palette(weight: PaletteWeight) -> np.ndarray:
    """The BF16 bit patterns (uint16, K x N) of a palette form: the CPU reference decoder."""
    return join_bits(palette_exponents(weight), weight.sign_mantissa)
