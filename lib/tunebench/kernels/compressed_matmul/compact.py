"""The compact (storage and transfer) form of a BF16 weight matrix: the palette form with its code bytes
entropy coded in the parallel stream layout. Lossless; CPU compression, decompression and size accounting.

The stream codes the palette form's code bytes as they are, so decoding it gives back the palette form exactly
(pipeline 3); the exponent and BF16 decoders patch the verbatim groups afterwards (pipelines 1 and 2).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tunebench.kernels.compressed_matmul import huffman
from tunebench.kernels.compressed_matmul.format import PaletteWeight, encode_palette, palette_exponents, split_bits
from tunebench.kernels.compressed_matmul.stream import CodedStream, StreamLayout, decode_stream, encode_stream


@dataclass(frozen=True)
class CompactWeight:
    """A palette form whose codes are entropy coded; `palette_form` minus its codes is shared as is."""

    palette_form: PaletteWeight  # with its codes: kept so one encode serves every pipeline; not part of the size
    stream: CodedStream

    @property
    def shape(self) -> tuple[int, int]:
        return self.palette_form.shape

    def stored_bytes(self) -> dict[str, int]:
        """Bytes of each array the compact form stores: the palette form's but its codes, and its column starts (a
        prefix count of the group list, rebuilt when the weight is loaded)."""
        palette_bytes = self.palette_form.stored_bytes()
        del palette_bytes["codes"], palette_bytes["verbatim_column_starts"]
        return {**palette_bytes, **self.stream.stored_bytes()}


def compress(bits: np.ndarray, layout: StreamLayout = StreamLayout()) -> CompactWeight:
    """The compact form of BF16 bit patterns (uint16, K x N)."""
    palette_form = encode_palette(bits)
    return CompactWeight(palette_form, encode_stream(palette_form.codes.ravel(), layout))


def transcode(weight: CompactWeight) -> PaletteWeight:
    """The palette form recovered from the stream alone (the CPU reference of pipeline 3's preprocessing)."""
    codes = decode_stream(weight.stream).reshape(weight.palette_form.codes.shape)
    return replace(weight.palette_form, codes=codes)


@dataclass(frozen=True)
class CompressionFigures:
    """Sizes and exponent statistics of one compressed matrix."""

    weights: int
    bf16_bytes: int
    palette_bytes: int
    compact_bytes: int
    exponent_entropy_bits: float  # Shannon entropy of the exponent distribution, bits per weight
    code_entropy_bits: float  # of the coded nibbles (palette codes), bits per coded symbol
    huffman_bits: float  # mean Huffman code length, bits per coded symbol
    compact_exponent_bits: float  # everything the compact form stores besides sign+mantissa, bits per weight
    top16_coverage: float  # share of weights whose exponent is in the palette
    verbatim_group_share: float  # share of groups stored verbatim
    distinct_exponents: int

    @property
    def palette_ratio(self) -> float:
        return self.bf16_bytes / self.palette_bytes

    @property
    def compact_ratio(self) -> float:
        return self.bf16_bytes / self.compact_bytes


def figures(bits: np.ndarray, weight: CompactWeight) -> CompressionFigures:
    """Compression figures of `weight`, the compact form of `bits`."""
    rows, columns = weight.shape
    exponent, _ = split_bits(bits)
    counts = np.bincount(exponent.ravel(), minlength=256)
    nibbles = weight.palette_form.codes
    code_counts = np.bincount(nibbles.ravel() & 0xF, minlength=16) + np.bincount(nibbles.ravel() >> 4, minlength=16)
    compact_bytes = sum(weight.stored_bytes().values())
    return CompressionFigures(
        weights=rows * columns, bf16_bytes=2 * rows * columns,
        palette_bytes=sum(weight.palette_form.stored_bytes().values()), compact_bytes=compact_bytes,
        exponent_entropy_bits=huffman.entropy_bits(counts), code_entropy_bits=huffman.entropy_bits(code_counts),
        huffman_bits=float((code_counts * weight.stream.code_lengths).sum() / code_counts.sum()),
        compact_exponent_bits=8 * (compact_bytes - rows * columns) / (rows * columns),
        top16_coverage=float(counts[weight.palette_form.palette].sum() / counts.sum()),
        verbatim_group_share=len(weight.palette_form.verbatim_groups) / (weight.palette_form.group_rows * columns),
        distinct_exponents=int((counts > 0).sum()),
    )


def exponents_of(weight: CompactWeight) -> np.ndarray:
    """The (K, N) exponent bytes, from the stream (the CPU reference of pipeline 2's preprocessing)."""
    return palette_exponents(weight.palette_form, transcode(weight).codes)
