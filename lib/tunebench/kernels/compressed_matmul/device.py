"""The compressed forms as torch tensors on a device, in the dtypes the Triton kernels read.

One `DeviceWeight` holds the compact form (stream) and the resident palette codes, so a measurement can run
every pipeline on one weight; a deployment would keep only what its pipeline reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from tunebench.kernels.compressed_matmul import huffman
from tunebench.kernels.compressed_matmul.compact import CompactWeight
from tunebench.kernels.compressed_matmul.stream import StreamLayout

EXPONENT_SHIFT = 8  # decode-table entries carry the code's exponent in bits 8-15


@dataclass(frozen=True)
class DeviceWeight:
    """Tensors of one compressed K x N matrix on one device."""

    shape: tuple[int, int]
    layout: StreamLayout
    num_bytes: int  # code bytes: (padded K / 2) * N
    sign_mantissa: torch.Tensor  # uint8 (K, N)
    codes: torch.Tensor  # uint8 (padded K / 2, N): the resident palette codes (pipeline 4)
    verbatim_flags: torch.Tensor  # uint8 (ceil(groups / 8), N)
    verbatim_groups: torch.Tensor  # int32 (max(V, 1), 2): (group row, column), sorted by column
    verbatim_column_starts: torch.Tensor  # int32 (N + 1,)
    verbatim_exponents: torch.Tensor  # uint8 (max(V, 1), 64)
    verbatim_count: int
    palette_words: torch.Tensor  # int32 (4,): the 16 palette exponents, 4 a word, little-endian
    words: torch.Tensor  # int32: the entropy-coded code bytes
    chunk_starts: torch.Tensor  # int64 (chunks,)
    lane_bits: torch.Tensor  # int16 (chunks, lanes)
    decode_table: torch.Tensor  # int16 (2**max_code_length,): symbol | length << 4 | exponent << 8, as 16 bits

    @property
    def chunks(self) -> int:
        return int(self.chunk_starts.numel())


def _at_least_one_row(array: np.ndarray) -> np.ndarray:
    # An empty tensor may have no usable address; kernels never read it when the count is 0.
    return array if len(array) else np.zeros((1,) + array.shape[1:], dtype=array.dtype)


def to_device(weight: CompactWeight, device: str | torch.device) -> DeviceWeight:
    """Copy a compact weight (and its palette form's codes) to `device`."""
    palette_form, stream = weight.palette_form, weight.stream
    table = huffman.decode_table(stream.code_lengths, stream.layout.max_code_length)
    symbols = table & 0xF
    table = table | (palette_form.palette[symbols].astype(np.int32) << EXPONENT_SHIFT)

    def tensor(array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(array)).to(device)

    return DeviceWeight(
        shape=palette_form.shape, layout=stream.layout, num_bytes=stream.num_bytes,
        sign_mantissa=tensor(palette_form.sign_mantissa), codes=tensor(palette_form.codes),
        verbatim_flags=tensor(palette_form.verbatim_flags),
        verbatim_groups=tensor(_at_least_one_row(palette_form.verbatim_groups)),
        verbatim_column_starts=tensor(palette_form.verbatim_column_starts),
        verbatim_exponents=tensor(_at_least_one_row(palette_form.verbatim_exponents)),
        verbatim_count=len(palette_form.verbatim_groups),
        palette_words=tensor(palette_form.palette.astype(np.uint8).view("<i4")),
        words=tensor(stream.words), chunk_starts=tensor(stream.chunk_starts), lane_bits=tensor(stream.lane_bits),
        decode_table=tensor(table.astype(np.uint16).view(np.int16)),
    )
