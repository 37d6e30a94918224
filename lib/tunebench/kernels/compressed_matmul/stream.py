"""An entropy-coded byte stream laid out for parallel decoding: the 4-bit halves of each byte are Huffman coded,
and the bytes are dealt to independent lanes so that a GPU decodes many short runs side by side.

Layout: bytes are cut into chunks of `lanes x steps` bytes; in a chunk, lane j owns bytes j, j + lanes,
j + 2 lanes, ... (so at each step the lanes write `lanes` consecutive bytes: coalesced) and codes them, low nibble
first, into its own bit string. A chunk's lane strings are concatenated (MSB first, in 32-bit words) and padded to
a word; `chunk_starts` holds each chunk's first word and `lane_bits` (int16) each lane's length, from which a
decoder gets every lane's start with a prefix sum. Offset overhead per weight (two symbols a byte):
16 / (2 * steps) bits for the lane lengths + 64 / (2 * lanes * steps) for the chunk start + under 32 / (2 * lanes *
steps) of word padding: 0.13 bits a weight with the default layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tunebench.kernels.compressed_matmul import huffman

SYMBOLS = 16  # nibbles
ENCODE_BLOCK_CHUNKS = 64  # chunks packed at once: bounds the encoder's temporary memory


@dataclass(frozen=True)
class StreamLayout:
    """How a stream is cut for parallel decoding; part of the format (the decoder must use the same)."""

    # 64 steps and codes of at most 8 bits: on an H200 the stream kernel decoded a Llama MLP weight 1.15x (BF16) to
    # 1.24x (codes) faster than with 128 steps and 12 bits, for 0.8 % more bytes (docs/compressed_matmul.md, "A
    # 512-byte table").
    lanes: int = 128  # lanes of one chunk, decoded side by side (a power of two for the GPU decoder)
    steps: int = 64  # bytes each lane decodes serially; longer runs cut the offset overhead, shorter add parallelism
    max_code_length: int = 8  # bits; the GPU decoder's table has 2**max_code_length int16 entries (512 bytes)

    def __post_init__(self) -> None:
        for name in ("lanes", "steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1 or value & (value - 1):
                raise ValueError(f"StreamLayout.{name}={value!r} is not allowed; allowed: a power of two")
        if not 1 <= self.max_code_length <= huffman.MAX_SUPPORTED_LENGTH:
            raise ValueError(f"StreamLayout.max_code_length={self.max_code_length!r} is not allowed; "
                             f"allowed: 1 to {huffman.MAX_SUPPORTED_LENGTH}")
        if 2 * self.steps * self.max_code_length > np.iinfo(np.int16).max:
            raise ValueError(f"StreamLayout steps={self.steps} with max_code_length={self.max_code_length}: a lane "
                             "could exceed the int16 lane length; allowed: 2 * steps * max_code_length <= 32767")

    @property
    def chunk_bytes(self) -> int:
        return self.lanes * self.steps


@dataclass(frozen=True)
class CodedStream:
    """A byte stream, entropy coded in the parallel layout (module docstring)."""

    layout: StreamLayout
    num_bytes: int  # bytes coded; the last chunk is padded with the cheapest byte
    code_lengths: np.ndarray  # uint8 (16,): Huffman code length of each nibble (0: absent)
    words: np.ndarray  # int32: the bits, MSB first, plus 2 zero words so a decoder may read 64 bits anywhere
    chunk_starts: np.ndarray  # int64 (chunks,): first word of each chunk
    lane_bits: np.ndarray  # int16 (chunks, lanes): bits of each lane

    @property
    def chunks(self) -> int:
        return len(self.chunk_starts)

    def payload_bits(self) -> int:
        """Bits of the Huffman codes themselves, without offsets or padding."""
        return int(self.lane_bits.astype(np.int64).sum())

    def stored_bytes(self) -> dict[str, int]:
        return {"stream_words": self.words.nbytes, "lane_bits": self.lane_bits.nbytes,
                "chunk_starts": self.chunk_starts.nbytes, "code_lengths": self.code_lengths.nbytes}


def _nibbles(data: np.ndarray) -> np.ndarray:
    return np.stack([data & 0xF, data >> 4], axis=-1)


def _lane_order(data: np.ndarray, layout: StreamLayout) -> np.ndarray:
    """Nibbles of whole chunks as (chunks, lanes, 2 * steps): each lane's symbols in decoding order."""
    chunks = len(data) // layout.chunk_bytes
    by_step = _nibbles(data).reshape(chunks, layout.steps, layout.lanes, 2)
    return by_step.transpose(0, 2, 1, 3).reshape(chunks, layout.lanes, 2 * layout.steps)


def encode_stream(data: np.ndarray, layout: StreamLayout = StreamLayout()) -> CodedStream:
    """Entropy-code a uint8 byte array in the parallel layout (vectorized: ~1 s for 30 M bytes)."""
    data = np.asarray(data)
    if data.dtype != np.uint8 or data.ndim != 1 or len(data) == 0:
        raise ValueError(f"expected a non-empty 1-D uint8 array, got {data.dtype} {data.shape}")
    counts = np.bincount(data & 0xF, minlength=SYMBOLS) + np.bincount(data >> 4, minlength=SYMBOLS)
    cheapest = int(np.argmax(counts))
    chunks = -(-len(data) // layout.chunk_bytes)
    padded = np.full(chunks * layout.chunk_bytes, cheapest | cheapest << 4, dtype=np.uint8)
    padded[:len(data)] = data
    counts += np.bincount(_nibbles(padded[len(data):]).ravel(), minlength=SYMBOLS)
    lengths = huffman.code_lengths(counts, layout.max_code_length)
    codes = huffman.canonical_codes(lengths)

    lane_bits = np.empty((chunks, layout.lanes), dtype=np.int64)
    for first in range(0, chunks, ENCODE_BLOCK_CHUNKS):
        block = padded[first * layout.chunk_bytes:(first + ENCODE_BLOCK_CHUNKS) * layout.chunk_bytes]
        lane_bits[first:first + ENCODE_BLOCK_CHUNKS] = lengths[_lane_order(block, layout)].sum(axis=-1, dtype=np.int64)
    chunk_words = (lane_bits.sum(axis=1) + 31) // 32
    chunk_starts = np.concatenate([[0], np.cumsum(chunk_words)[:-1]]).astype(np.int64)
    words = np.zeros(int(chunk_words.sum()) + 2, dtype=np.uint32)
    for first in range(0, chunks, ENCODE_BLOCK_CHUNKS):
        block = padded[first * layout.chunk_bytes:(first + ENCODE_BLOCK_CHUNKS) * layout.chunk_bytes]
        symbols = _lane_order(block, layout).reshape(-1, 2 * layout.lanes * layout.steps)
        starts = chunk_starts[first:first + len(symbols)]
        _pack(words, symbols, starts, lengths, codes)
    return CodedStream(layout=layout, num_bytes=len(data), code_lengths=lengths, words=words.view(np.int32),
                       chunk_starts=chunk_starts, lane_bits=lane_bits.astype(np.int16))


def _pack(words: np.ndarray, symbols: np.ndarray, chunk_starts: np.ndarray, lengths: np.ndarray,
          codes: np.ndarray) -> None:
    """OR the codes of `symbols` (chunks, symbols per chunk) into `words`, each chunk from its start word."""
    length = lengths[symbols].astype(np.int64)
    position = np.cumsum(length, axis=1) - length  # bit position within the chunk
    position += (chunk_starts - chunk_starts[0])[:, None] * 32
    # A code of at most 15 bits at bit offset o of word w spans words w and w + 1: place it in a 64-bit window.
    window = codes[symbols].astype(np.uint64) << (64 - (position & 31) - length).astype(np.uint64)
    word = (position >> 5).ravel()
    span = int(word.max()) + 2
    # Codes never overlap, so summing the pieces of a word equals OR-ing them; float64 sums of values below
    # 2**32 are exact.
    high = np.bincount(word, weights=(window >> np.uint64(32)).ravel().astype(np.float64), minlength=span)
    low = np.bincount(word + 1, weights=(window & np.uint64(0xFFFFFFFF)).ravel().astype(np.float64), minlength=span)
    base = int(chunk_starts[0])
    block = words[base:base + span]
    block |= (high[:len(block)] + low[:len(block)]).astype(np.uint64).astype(np.uint32)


def lane_starts(stream: CodedStream) -> np.ndarray:
    """The first bit (int64) of every lane, (chunks, lanes)."""
    lane_bits = stream.lane_bits.astype(np.int64)
    return stream.chunk_starts[:, None] * 32 + np.cumsum(lane_bits, axis=1) - lane_bits


def decode_stream(stream: CodedStream) -> np.ndarray:
    """The coded bytes (uint8), decoded on the CPU exactly as the GPU decoder does: all lanes side by side."""
    layout = stream.layout
    table = huffman.decode_table(stream.code_lengths, layout.max_code_length).astype(np.int64)
    words = stream.words.view(np.uint32).astype(np.uint64)
    position = lane_starts(stream)
    decoded = np.empty((stream.chunks, layout.steps, layout.lanes), dtype=np.uint8)
    shift = np.uint64(64 - layout.max_code_length)
    for step in range(layout.steps):
        word = position >> 5
        window = ((words[word] << np.uint64(32)) | words[word + 1]) << (position & 31).astype(np.uint64)
        first = table[(window >> shift).astype(np.int64)]
        first_length = first >> huffman.TABLE_SYMBOL_BITS
        second = table[((window << first_length.astype(np.uint64)) >> shift).astype(np.int64)]
        decoded[:, step, :] = (first & 0xF) | ((second & 0xF) << 4)
        position += first_length + (second >> huffman.TABLE_SYMBOL_BITS)
    return decoded.reshape(-1)[:stream.num_bytes]
