"""The compressed-weight format on the CPU: Huffman codes, the parallel stream, the palette and compact forms
(bit-exact round trips on random, out-of-palette, odd-sized and special-value data), synthetic weights."""

import heapq

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tunebench.kernels.compressed_matmul import compact, format, huffman, stream, synthetic
from tunebench.kernels.compressed_matmul.stream import StreamLayout

SMALL = StreamLayout(lanes=8, steps=4, max_code_length=12)


def gaussian_bits(shape, seed=0, scale=0.02):
    generator = torch.Generator().manual_seed(seed)
    return format.bf16_bits((torch.randn(shape, generator=generator) * scale).to(torch.bfloat16))


def huffman_cost(counts):
    """Total bits of an unlimited Huffman code (sum of merged weights)."""
    heap = [c for c in counts if c > 0]
    heapq.heapify(heap)
    total = 0
    while len(heap) > 1:
        merged = heapq.heappop(heap) + heapq.heappop(heap)
        total += merged
        heapq.heappush(heap, merged)
    return total


# Huffman -------------------------------------------------------------------------------------

@pytest.mark.parametrize("counts", [[5, 9, 12, 13, 16, 45], [1] * 16, [2**i for i in range(16)], [0, 7, 0, 3]])
def test_code_lengths_are_optimal_when_the_limit_does_not_bind(counts):
    lengths = huffman.code_lengths(counts, 15)
    assert int((np.asarray(counts) * lengths).sum()) == huffman_cost(counts)
    assert sum(2.0 ** -int(length) for length in lengths if length) <= 1.0


def test_length_limit_binds_and_stays_a_prefix_code():
    counts = [2**i for i in range(16)]  # unlimited Huffman needs 15 bits
    lengths = huffman.code_lengths(counts, 8)
    assert lengths.max() == 8 and sum(2.0 ** -int(length) for length in lengths) == 1.0
    assert (np.asarray(counts) * lengths).sum() > huffman_cost(counts)
    codes = huffman.canonical_codes(lengths)
    words = {f"{int(code):0{int(length)}b}" for code, length in zip(codes, lengths)}
    assert not any(a != b and b.startswith(a) for a in words for b in words)


def test_single_symbol_and_bad_input():
    assert huffman.code_lengths([0, 0, 4], 12).tolist() == [0, 0, 1]
    with pytest.raises(ValueError, match="every count is 0"):
        huffman.code_lengths([0, 0], 12)
    with pytest.raises(ValueError, match="max_length=16"):
        huffman.code_lengths([1, 2], 16)
    with pytest.raises(ValueError, match="17 symbols do not fit"):
        huffman.code_lengths([1] * 17, 4)


def test_decode_table_maps_every_prefix_to_its_symbol():
    lengths = huffman.code_lengths([40, 30, 20, 10], 4)
    table = huffman.decode_table(lengths, 4)
    codes = huffman.canonical_codes(lengths)
    for symbol in range(4):
        start = int(codes[symbol]) << (4 - int(lengths[symbol]))
        assert table[start] == symbol | int(lengths[symbol]) << 4


def test_entropy_bits():
    assert huffman.entropy_bits([1, 1, 1, 1]) == pytest.approx(2.0)
    assert huffman.entropy_bits([5, 0]) == 0.0


# Stream --------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 31, 32, 33, 1000])
@pytest.mark.parametrize("layout", [SMALL, StreamLayout(lanes=4, steps=8, max_code_length=5)])
def test_stream_round_trip(size, layout):
    data = np.random.default_rng(size).integers(0, 256, size).astype(np.uint8)
    coded = stream.encode_stream(data, layout)
    assert coded.chunks == -(-size // layout.chunk_bytes)
    np.testing.assert_array_equal(stream.decode_stream(coded), data)


def test_stream_lanes_start_where_the_previous_lane_ends():
    data = np.random.default_rng(0).integers(0, 256, 3 * SMALL.chunk_bytes).astype(np.uint8)
    coded = stream.encode_stream(data, SMALL)
    starts = stream.lane_starts(coded)
    assert (np.diff(starts, axis=1) == coded.lane_bits[:, :-1]).all()
    # chunks start on a word: the previous chunk's bits rounded up
    assert (coded.chunk_starts[1:] * 32 - starts[:-1, -1] - coded.lane_bits[:-1, -1] < 32).all()
    assert coded.payload_bits() <= 32 * (len(coded.words) - 2)


def test_stream_codes_skewed_bytes_near_their_entropy():
    rng = np.random.default_rng(1)
    probabilities = np.array([0.5, 0.25, 0.125] + [0.125 / 13] * 13)
    nibbles = rng.choice(16, size=2 * 200_000, p=probabilities).astype(np.uint8)
    coded = stream.encode_stream(nibbles[0::2] | nibbles[1::2] << 4)
    bits_per_symbol = coded.payload_bits() / len(nibbles)
    entropy = huffman.entropy_bits(np.bincount(nibbles))
    assert entropy <= bits_per_symbol < entropy + 0.1


def test_layout_errors():
    with pytest.raises(ValueError, match="lanes=12"):
        StreamLayout(lanes=12)
    with pytest.raises(ValueError, match="max_code_length=16"):
        StreamLayout(max_code_length=16)
    with pytest.raises(ValueError, match="int16 lane length"):
        StreamLayout(steps=2048)
    with pytest.raises(ValueError, match="non-empty 1-D uint8"):
        stream.encode_stream(np.zeros(0, np.uint8))


# Palette and compact forms -------------------------------------------------------------------

def round_trip(bits, layout=SMALL):
    weight = compact.compress(bits, layout)
    np.testing.assert_array_equal(format.decode_palette(weight.palette_form), bits)
    transcoded = compact.transcode(weight)
    np.testing.assert_array_equal(transcoded.codes, weight.palette_form.codes)
    np.testing.assert_array_equal(format.decode_palette(transcoded), bits)
    np.testing.assert_array_equal(compact.exponents_of(weight), format.split_bits(bits)[0])
    return weight


def test_gaussian_weights_round_trip_and_compress():
    bits = gaussian_bits((256, 320))
    weight = round_trip(bits, StreamLayout())
    figures = compact.figures(bits, weight)
    assert 1.25 < figures.palette_ratio < 1.34  # 12 bits a weight plus flags and verbatim groups
    assert figures.compact_ratio > 1.4  # a Gaussian's exponents carry ~2.6 bits
    assert figures.exponent_entropy_bits < figures.compact_exponent_bits < figures.exponent_entropy_bits + 0.5


def test_uniform_random_bits_round_trip_with_many_verbatim_groups():
    bits = np.random.default_rng(2).integers(0, 2**16, (200, 70)).astype(np.uint16)
    weight = round_trip(bits)
    assert len(weight.palette_form.verbatim_groups) == 4 * 70  # every group of random exponents escapes


def test_exponents_outside_the_palette_make_exactly_their_groups_verbatim():
    rng = np.random.default_rng(5)
    exponent = rng.integers(110, 126, (130, 50)).astype(np.uint8)  # 16 frequent exponents; 3 groups along K
    bits = format.join_bits(exponent, rng.integers(0, 256, (130, 50)).astype(np.uint8))
    bits[65, 7] = 0x7F80  # +inf: exponent 255
    bits[129, 49] = 0x7F00  # a huge finite value (exponent 254), in the partial last group
    bits[3, 7] = 0x0001  # a subnormal (exponent 0) in an earlier group of the same column
    weight = round_trip(bits)
    palette = weight.palette_form
    assert palette.verbatim_groups.tolist() == [[0, 7], [1, 7], [2, 49]]  # by column, then row
    flags = np.unpackbits(palette.verbatim_flags, axis=0, bitorder="little")[:palette.group_rows]
    assert set(zip(*np.nonzero(flags))) == {(0, 7), (1, 7), (2, 49)}
    starts = palette.verbatim_column_starts
    assert len(starts) == 51 and starts[7] == 0 and starts[8] == 2 and starts[49] == 2 and starts[50] == 3
    for slot, (group_row, column) in enumerate(palette.verbatim_groups):
        rows = slice(64 * group_row, min(64 * group_row + 64, 130))
        assert palette.verbatim_exponents[slot, :rows.stop - rows.start].tolist() == \
            format.split_bits(bits)[0][rows, column].tolist()
        assert not format.unpack_codes(palette.codes)[rows, column].any()  # the cheapest code


def test_special_values_round_trip():
    specials = np.array([0x0000, 0x8000, 0x0001, 0x807F, 0x7F80, 0xFF80, 0x7FC0, 0xFFFF, 0x7F7F, 0x0080],
                        dtype=np.uint16)
    bits = np.resize(specials, (67, 9)).astype(np.uint16)
    round_trip(bits)


@pytest.mark.parametrize("shape", [(1, 1), (1, 300), (300, 1), (63, 3), (64, 3), (65, 3)])
def test_odd_shapes_round_trip(shape):
    round_trip(gaussian_bits(shape, seed=sum(shape)))


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 140), columns=st.integers(1, 20), spread=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_round_trip_property(rows, columns, spread, seed):
    rng = np.random.default_rng(seed)
    exponent = np.clip(120 + rng.integers(-spread, spread + 1, (rows, columns)), 0, 255).astype(np.uint8)
    bits = format.join_bits(exponent, rng.integers(0, 256, (rows, columns)).astype(np.uint8))
    round_trip(bits)


def test_palette_is_the_16_most_frequent_exponents():
    counts = np.zeros(256, np.int64)
    counts[100:120] = np.arange(1, 21)
    palette = format.choose_palette(counts)
    assert palette.tolist() == list(range(119, 103, -1))
    few = np.zeros(256, np.int64)
    few[[3, 200]] = [5, 9]
    assert format.choose_palette(few)[:2].tolist() == [200, 3] and len(set(format.choose_palette(few))) == 16


def test_bits_helpers_and_errors():
    weight = torch.tensor([[1.0, -2.5], [0.0, float("inf")]], dtype=torch.bfloat16)
    bits = format.bf16_bits(weight)
    assert torch.equal(format.bits_to_bf16(bits), weight)
    exponent, sign_mantissa = format.split_bits(bits)
    assert exponent.tolist() == [[127, 128], [0, 255]] and sign_mantissa[0, 1] == 0x80 | 0x20
    with pytest.raises(ValueError, match="2-D bfloat16"):
        format.bf16_bits(torch.zeros(3))
    with pytest.raises(ValueError, match="uint16"):
        format.encode_palette(np.zeros((2, 2), np.int32))


# Synthetic weights ----------------------------------------------------------------------------

def test_synthetic_weights_follow_the_fitted_histogram_and_are_seeded():
    probabilities = synthetic.exponent_distribution()
    assert probabilities.sum() == pytest.approx(1.0) and (probabilities > 0).sum() >= 16
    bits = synthetic.synthetic_bits((512, 1024), seed=3)
    assert np.array_equal(bits, synthetic.synthetic_bits((512, 1024), seed=3))
    assert not np.array_equal(bits, synthetic.synthetic_bits((512, 1024), seed=4))
    exponent, sign_mantissa = format.split_bits(bits)
    observed = np.bincount(exponent.ravel(), minlength=256) / bits.size
    assert np.abs(observed - probabilities).max() < 0.005
    assert abs(huffman.entropy_bits(np.bincount(sign_mantissa.ravel(), minlength=256)) - 8) < 0.01


def test_sampling_table_keeps_rare_exponents():
    probabilities = np.zeros(256)
    probabilities[[10, 11]] = [1 - 1e-6, 1e-6]
    table = synthetic.sampling_table(probabilities)
    assert len(table) == 2**synthetic.SAMPLING_BITS and (table == 11).sum() == round(1e-6 * 2**24)
    with pytest.raises(ValueError, match="256 non-negative"):
        synthetic.sampling_table(np.ones(3))
