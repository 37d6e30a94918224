"""Triton decoders of the compact form: the entropy-coded stream to palette codes, to exponent bytes or to BF16
weights, on a persistent grid whose size is the SM-split knob; and the patch of verbatim groups.

Each program takes `chunks_per_program` chunks at a time; a thread decodes two adjacent lanes of a chunk. At each
step a lane tops up a 64-bit buffer of its next bits by a word when fewer than 32 are left (every other step when
codes have at most 8 bits), looks its two nibbles up in the decode table and gives one code byte (or two exponent
bytes, or two BF16 weights: rows 2r and 2r + 1 of one column); the thread writes its two lanes' outputs together
where they are adjacent.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from tunebench.kernels.compressed_matmul.device import EXPONENT_SHIFT, DeviceWeight
from tunebench.kernels.compressed_matmul.format import GROUP_ROWS
from tunebench.kernels.compressed_matmul.stream import StreamLayout

OUTPUTS = ("codes", "exponents", "bfloat16")
_OUTPUT_ID = {name: index for index, name in enumerate(OUTPUTS)}


@dataclass(frozen=True)
class DecoderSettings:
    """Launch settings of the decoders (not part of the format)."""

    # One chunk of 128 lanes on 2 warps (2 lanes a thread), 32 programs for each SM of the share: a Llama MLP weight's
    # 3,584 chunks of 64 steps all resident at once, 54 warps an SM to hide the table's and the sign+mantissa bytes'
    # latency; at 32 registers a thread, 32 programs fill the register file (docs/compressed_matmul.md, "A 512-byte
    # table").
    chunks_per_program: int = 1
    num_warps: int = 2
    programs_per_sm: int = 32
    # At most 32 registers a thread where N is even, so that 32 programs fit an SM: topped up every other step, the
    # BF16 loop takes 34 and decoded 1.10x slower than held to 32, with no spills (docs/compressed_matmul.md, "A refill
    # every other step").
    max_registers: int = 32
    patch_groups_per_block: int = 16
    patch_num_warps: int = 4


DECODER = DecoderSettings()


@triton.jit
def _bf16_bits(exponent, sign_mantissa):
    return (((sign_mantissa & 0x80) << 8) | (exponent << 7) | (sign_mantissa & 0x7F)).to(tl.int16)


@triton.jit
def _open_lane(words_ptr, position, live):
    """A lane's 64-bit buffer of its first bits (MSB first), how many are valid, the word after them (loaded ahead)
    and the next word to load."""
    word = position >> 5
    high = tl.load(words_ptr + word, mask=live, other=0).to(tl.uint32, bitcast=True).to(tl.uint64)
    low = tl.load(words_ptr + word + 1, mask=live, other=0).to(tl.uint32, bitcast=True).to(tl.uint64)
    ahead = tl.load(words_ptr + word + 2, mask=live, other=0)
    buffer = ((high << 32) | low) << (position & 31).to(tl.uint64)
    return buffer, 64 - (position & 31).to(tl.int32), ahead, word + 3


@triton.jit
def _decode_step(words_ptr, table_ptr, buffer, valid, ahead, next_word, live, MAX_CODE_LENGTH: tl.constexpr,
                 REFILL: tl.constexpr):
    """One step of a lane: if REFILL, top the buffer up with the word loaded ahead when fewer than 32 bits are left;
    look its two nibbles up. A step reads at most 2 x MAX_CODE_LENGTH <= 30 bits, so a buffer topped up at every step
    never runs dry, and one topped up every other step does not either when 4 x MAX_CODE_LENGTH <= 32; the word it
    tops up with was loaded at the previous refill, so no step waits on a load it issued itself (the stream keeps 2
    spare words at its end)."""
    if REFILL:
        refill = valid < 32
        incoming = tl.where(refill, ahead, 0).to(tl.uint32, bitcast=True).to(tl.uint64)
        buffer |= incoming << tl.where(refill, 32 - valid, 0).to(tl.uint64)
        valid += tl.where(refill, 32, 0)
        ahead = tl.load(words_ptr + next_word, mask=live & refill, other=ahead)
        next_word += refill.to(next_word.dtype)
    first = tl.load(table_ptr + (buffer >> (64 - MAX_CODE_LENGTH)).to(tl.int32)).to(tl.int32)
    first_length = (first >> 4) & 15
    second = tl.load(table_ptr + ((buffer << first_length.to(tl.uint64)) >> (64 - MAX_CODE_LENGTH)).to(tl.int32))
    second = second.to(tl.int32)
    consumed = first_length + ((second >> 4) & 15)
    return first, second, buffer << consumed.to(tl.uint64), valid - consumed, ahead, next_word


@triton.jit
def _place(position, N):
    """The code byte `position`'s row pair and column in the (padded K / 2) x N code matrix."""
    row_pair = (position // N).to(tl.int32)
    return row_pair, (position - row_pair.to(tl.int64) * N).to(tl.int32)


@triton.jit
def _advance(row_pair, column, LANES: tl.constexpr, N):
    """The place LANES code bytes on: whole rows of row pairs plus columns, with at most one carry."""
    column += LANES % N
    carry = column >= N
    return row_pair + LANES // N + carry.to(tl.int32), tl.where(carry, column - N, column)


@triton.jit
def _load_sign_mantissa(sign_mantissa_ptr, at, written, OUTPUT: tl.constexpr):
    """Element `at` of the sign+mantissa bytes (or of their 16-bit view) for the BF16 output; 0 for the others."""
    if OUTPUT == 2:
        return tl.load(sign_mantissa_ptr + at, mask=written, other=0).to(tl.int32)
    else:
        return 0


@triton.jit
def _store_lane(out_ptr, at, entry, sign_mantissa, written, OUTPUT: tl.constexpr, EXPONENT_SHIFT: tl.constexpr):
    """Write one lane's output element `at`: the exponent of its decode-table `entry`, or that weight in BF16."""
    exponent = (entry >> EXPONENT_SHIFT) & 255
    if OUTPUT == 1:
        tl.store(out_ptr + at, exponent.to(tl.uint8), mask=written)
    else:
        tl.store(out_ptr + at, _bf16_bits(exponent, sign_mantissa), mask=written)


@triton.jit
def _store_pair(out_ptr, at, even_entry, odd_entry, sign_mantissas, written, OUTPUT: tl.constexpr,
                EXPONENT_SHIFT: tl.constexpr):
    """Write a lane pair's two adjacent outputs as element `at` of a 16-bit (exponents) or 32-bit (BF16) view, from
    their decode-table entries and (BF16) their two sign+mantissa bytes; the even lane's output is the low half."""
    even_exponent = (even_entry >> EXPONENT_SHIFT) & 255
    odd_exponent = (odd_entry >> EXPONENT_SHIFT) & 255
    if OUTPUT == 1:
        tl.store(out_ptr + at, (even_exponent | (odd_exponent << 8)).to(tl.int16), mask=written)
    else:
        low = _bf16_bits(even_exponent, sign_mantissas & 0xFF).to(tl.int32) & 0xFFFF
        high = _bf16_bits(odd_exponent, (sign_mantissas >> 8) & 0xFF).to(tl.int32) << 16
        tl.store(out_ptr + at, low | high, mask=written)


@triton.jit
def _element(row_pair, column, N, NARROW: tl.constexpr):
    """The output element (2 * row_pair, column) of a K x N matrix, as an offset."""
    if NARROW:
        return row_pair * (2 * N) + column
    else:
        return row_pair.to(tl.int64) * (2 * N) + column


@triton.jit
def _pair_sign_mantissas(sign_mantissa_ptr, byte, row_pair, column, live, num_bytes, K, N, OUTPUT: tl.constexpr,
                         NARROW: tl.constexpr):
    """A lane pair's sign+mantissa bytes of a step's two rows, as two 16-bit elements (BF16 output; 0 otherwise)."""
    even = _element(row_pair, column, N, NARROW)
    written = live & (byte < num_bytes)
    first = _load_sign_mantissa(sign_mantissa_ptr, even >> 1, written & (2 * row_pair < K), OUTPUT)
    second = _load_sign_mantissa(sign_mantissa_ptr, (even + N) >> 1, written & (2 * row_pair + 1 < K), OUTPUT)
    return first, second


@triton.jit(do_not_specialize=["num_chunks"])
def decode_stream_kernel(
    words_ptr, chunk_starts_ptr, lane_bits_ptr, table_ptr, sign_mantissa_ptr, out_ptr,
    num_chunks, num_bytes, K, N,
    OUTPUT: tl.constexpr, LANES: tl.constexpr, STEPS: tl.constexpr, MAX_CODE_LENGTH: tl.constexpr,
    CHUNKS_PER_PROGRAM: tl.constexpr, EXPONENT_SHIFT: tl.constexpr, NARROW: tl.constexpr, PAIRED: tl.constexpr,
    STEPS_A_REFILL: tl.constexpr,
):
    # A thread decodes the lanes 2p and 2p + 1 of a pair p. At each step they give adjacent code bytes, so the codes
    # go out as one 16-bit store (out_ptr a 16-bit view). With N even (PAIRED) their outputs are adjacent columns of
    # one row pair too: out_ptr is then a 32-bit (BF16) or 16-bit (exponents) view and sign_mantissa_ptr a 16-bit
    # one, and a pair loads its two sign+mantissa bytes and stores its two outputs of a row with one instruction each.
    pair = tl.arange(0, LANES // 2)[None, :]
    within = tl.arange(0, CHUNKS_PER_PROGRAM)[:, None]
    # Persistent grid: the launch picks how many programs (the SM share); each loops over chunks.
    for first in range(tl.program_id(0) * CHUNKS_PER_PROGRAM, num_chunks, tl.num_programs(0) * CHUNKS_PER_PROGRAM):
        chunk = first + within
        live = chunk < num_chunks
        even_bits = tl.load(lane_bits_ptr + chunk * LANES + 2 * pair, mask=live, other=0).to(tl.int64)
        odd_bits = tl.load(lane_bits_ptr + chunk * LANES + 2 * pair + 1, mask=live, other=0).to(tl.int64)
        start = tl.load(chunk_starts_ptr + chunk, mask=live, other=0)
        even_position = start * 32 + tl.cumsum(even_bits + odd_bits, axis=1) - even_bits - odd_bits
        even_buffer, even_valid, even_ahead, even_next = _open_lane(words_ptr, even_position, live)
        odd_buffer, odd_valid, odd_ahead, odd_next = _open_lane(words_ptr, even_position + even_bits, live)
        byte = chunk.to(tl.int64) * (LANES * STEPS) + 2 * pair  # the even lane's code byte at this step
        row_pair, column = _place(byte, N)  # stepped, not divided, in the loop
        if not PAIRED:
            odd_row_pair, odd_column = _place(byte + 1, N)
        if NARROW:  # every offset fits 32 bits: cheaper address arithmetic in the loop
            byte = byte.to(tl.int32)
            even_next = even_next.to(tl.int32)
            odd_next = odd_next.to(tl.int32)
        if PAIRED:  # loaded a step ahead: a load's latency would stall the step that issues it (ptxas puts its use
            # right behind it), and loaded a step ahead BF16 decoded 1.3x faster on an H200 (docs/compressed_matmul.md)
            ahead_first, ahead_second = _pair_sign_mantissas(sign_mantissa_ptr, byte, row_pair, column, live,
                                                             num_bytes, K, N, OUTPUT, NARROW)
        # STEPS_A_REFILL steps a loop iteration, the buffers topped up only in the first: with codes of at most 8 bits,
        # 2 (fewer instructions a step: on an H200 codes decoded 1.14x faster, docs/compressed_matmul.md).
        for _ in range(STEPS // STEPS_A_REFILL):
            for sub in tl.static_range(STEPS_A_REFILL):
                written = live & (byte < num_bytes)  # num_bytes is even: both bytes of the pair, or neither
                if OUTPUT != 0:  # a step's first nibbles go to row 2 * row_pair, its second ones to the row below
                    even = _element(row_pair, column, N, NARROW)
                    first_written = written & (2 * row_pair < K)
                    second_written = written & (2 * row_pair + 1 < K)
                    if PAIRED:  # the odd lane's outputs sit right after the even lane's, in one row pair
                        first_at = even >> 1
                        second_at = (even + N) >> 1
                        first_sign_mantissas = ahead_first
                        second_sign_mantissas = ahead_second
                    else:  # N odd: loaded in the step (slower: see above)
                        odd = _element(odd_row_pair, odd_column, N, NARROW)
                        odd_first_written = written & (2 * odd_row_pair < K)
                        odd_second_written = written & (2 * odd_row_pair + 1 < K)
                        even_first_sm = _load_sign_mantissa(sign_mantissa_ptr, even, first_written, OUTPUT)
                        even_second_sm = _load_sign_mantissa(sign_mantissa_ptr, even + N, second_written, OUTPUT)
                        odd_first_sm = _load_sign_mantissa(sign_mantissa_ptr, odd, odd_first_written, OUTPUT)
                        odd_second_sm = _load_sign_mantissa(sign_mantissa_ptr, odd + N, odd_second_written, OUTPUT)
                even_first, even_second, even_buffer, even_valid, even_ahead, even_next = _decode_step(
                    words_ptr, table_ptr, even_buffer, even_valid, even_ahead, even_next, live, MAX_CODE_LENGTH,
                    sub == 0)
                odd_first, odd_second, odd_buffer, odd_valid, odd_ahead, odd_next = _decode_step(
                    words_ptr, table_ptr, odd_buffer, odd_valid, odd_ahead, odd_next, live, MAX_CODE_LENGTH,
                    sub == 0)
                if OUTPUT == 0:
                    codes = (even_first & 15) | ((even_second & 15) << 4) | ((odd_first & 15) << 8) | (
                        (odd_second & 15) << 12)
                    tl.store(out_ptr + (byte >> 1), codes.to(tl.int16), mask=written)
                elif PAIRED:
                    _store_pair(out_ptr, first_at, even_first, odd_first, first_sign_mantissas, first_written,
                                OUTPUT, EXPONENT_SHIFT)
                    _store_pair(out_ptr, second_at, even_second, odd_second, second_sign_mantissas, second_written,
                                OUTPUT, EXPONENT_SHIFT)
                else:
                    _store_lane(out_ptr, even, even_first, even_first_sm, first_written, OUTPUT, EXPONENT_SHIFT)
                    _store_lane(out_ptr, even + N, even_second, even_second_sm, second_written, OUTPUT, EXPONENT_SHIFT)
                    _store_lane(out_ptr, odd, odd_first, odd_first_sm, odd_first_written, OUTPUT, EXPONENT_SHIFT)
                    _store_lane(out_ptr, odd + N, odd_second, odd_second_sm, odd_second_written, OUTPUT, EXPONENT_SHIFT)
                byte += LANES
                row_pair, column = _advance(row_pair, column, LANES, N)
                if PAIRED:
                    ahead_first, ahead_second = _pair_sign_mantissas(sign_mantissa_ptr, byte, row_pair, column, live,
                                                                     num_bytes, K, N, OUTPUT, NARROW)
                else:
                    odd_row_pair, odd_column = _advance(odd_row_pair, odd_column, LANES, N)


@triton.jit(do_not_specialize=["num_groups"])
def patch_verbatim_kernel(
    groups_ptr, verbatim_ptr, sign_mantissa_ptr, out_ptr, num_groups, K, N,
    OUTPUT: tl.constexpr, GROUP_ROWS: tl.constexpr, GROUPS_PER_BLOCK: tl.constexpr,
):
    row = tl.arange(0, GROUP_ROWS)[None, :]
    within = tl.arange(0, GROUPS_PER_BLOCK)[:, None]
    for first in range(tl.program_id(0) * GROUPS_PER_BLOCK, num_groups, tl.num_programs(0) * GROUPS_PER_BLOCK):
        group = first + within
        live = group < num_groups
        group_row = tl.load(groups_ptr + group * 2, mask=live, other=0)
        column = tl.load(groups_ptr + group * 2 + 1, mask=live, other=0)
        k = group_row * GROUP_ROWS + row
        inside = live & (k < K)
        exponent = tl.load(verbatim_ptr + group * GROUP_ROWS + row, mask=inside, other=0).to(tl.int32)
        offset = k.to(tl.int64) * N + column
        if OUTPUT == 1:
            tl.store(out_ptr + offset, exponent.to(tl.uint8), mask=inside)
        else:
            sign_mantissa = tl.load(sign_mantissa_ptr + offset, mask=inside, other=0).to(tl.int32)
            tl.store(out_ptr + offset, _bf16_bits(exponent, sign_mantissa), mask=inside)


def _output_spec(weight: DeviceWeight, output: str) -> tuple[tuple[int, ...], torch.dtype]:
    specs = {"codes": (tuple(weight.codes.shape), torch.uint8), "exponents": (weight.shape, torch.uint8),
             "bfloat16": (weight.shape, torch.bfloat16)}
    if output not in specs:
        raise ValueError(f"unknown decoder output {output!r}; allowed: {', '.join(OUTPUTS)}")
    return specs[output]


def output_buffer(weight: DeviceWeight, output: str) -> torch.Tensor:
    """An uninitialised tensor for the decoder's `output`."""
    shape, dtype = _output_spec(weight, output)
    return torch.empty(shape, dtype=dtype, device=weight.words.device)


def _check_output(weight: DeviceWeight, output: str, out: torch.Tensor) -> None:
    shape, dtype = _output_spec(weight, output)
    if tuple(out.shape) != tuple(shape) or out.dtype != dtype or not out.is_contiguous():
        raise ValueError(f"decoder output for {output!r} must be a contiguous {dtype} tensor of shape {shape}, "
                         f"got {out.dtype} {tuple(out.shape)}")


def _launch_arguments(layout: StreamLayout, output: str, settings: DecoderSettings) -> dict:
    return {"OUTPUT": _OUTPUT_ID[output], "LANES": layout.lanes, "STEPS": layout.steps,
            "MAX_CODE_LENGTH": layout.max_code_length, "CHUNKS_PER_PROGRAM": settings.chunks_per_program,
            "STEPS_A_REFILL": _steps_a_refill(layout),
            "EXPONENT_SHIFT": EXPONENT_SHIFT, "num_warps": settings.num_warps}


def _steps_a_refill(layout: StreamLayout) -> int:
    """Steps decoded between the buffers' top-ups: 2 where two steps read at most 32 bits and the steps pair up."""
    return 2 if 4 * layout.max_code_length <= 32 and layout.steps % 2 == 0 else 1


def _register_cap(settings: DecoderSettings, paired: bool) -> int | None:
    """The stream kernel's register cap: `settings.max_registers` where N is even (lane pairs written together); none
    for N odd, whose BF16 loop would spill at 32 registers (it takes 43; neither was timed)."""
    return settings.max_registers if paired else None


def _narrow(shape: tuple[int, int], words: int) -> bool:
    """Whether every offset the stream kernel forms (output element, code byte, stream word) fits 31 bits."""
    rows, columns = shape
    return (-(-rows // GROUP_ROWS) * GROUP_ROWS) * columns < 2**31 and words < 2**31


def _checked_target(weight: DeviceWeight, output: str, out: torch.Tensor, programs: int) -> torch.Tensor:
    """`out` as the kernels write it (BF16 as int16), after checking it and `programs`."""
    _check_output(weight, output, out)
    if programs < 1:
        raise ValueError(f"programs={programs!r} is not allowed; allowed: an int >= 1")
    return out.view(torch.int16) if output == "bfloat16" else out


def _stream_dtypes(output: str, paired: bool) -> tuple[torch.dtype, torch.dtype]:
    """The dtypes the stream kernel reads the sign+mantissa bytes as and writes `output` as: a lane pair's two
    bytes or weights at once, where they are adjacent (codes always; exponents and BF16 when N is even)."""
    if output == "codes":
        return torch.uint8, torch.int16
    if not paired:
        return torch.uint8, torch.uint8 if output == "exponents" else torch.int16
    return torch.int16, torch.int16 if output == "exponents" else torch.int32


def _launch_stream(weight: DeviceWeight, output: str, target: torch.Tensor, programs: int,
                   settings: DecoderSettings) -> object:
    rows, columns = weight.shape
    # No program without a chunk: with idle programs the grid decoded 9 % slower on an H200 (docs/compressed_matmul.md).
    programs = min(programs, triton.cdiv(weight.chunks, settings.chunks_per_program))
    sign_mantissa_dtype, out_dtype = _stream_dtypes(output, columns % 2 == 0)
    return decode_stream_kernel[(programs,)](
        weight.words, weight.chunk_starts, weight.lane_bits, weight.decode_table,
        weight.sign_mantissa.view(-1).view(sign_mantissa_dtype), target.view(-1).view(out_dtype),
        weight.chunks, weight.num_bytes, rows, columns, **_launch_arguments(weight.layout, output, settings),
        NARROW=_narrow(weight.shape, weight.words.numel()), PAIRED=columns % 2 == 0,
        maxnreg=_register_cap(settings, columns % 2 == 0))


def _launch_patch(weight: DeviceWeight, output: str, target: torch.Tensor, programs: int,
                  settings: DecoderSettings) -> object:
    if output == "codes" or not weight.verbatim_count:
        return None
    rows, columns = weight.shape
    blocks = triton.cdiv(weight.verbatim_count, settings.patch_groups_per_block)
    return patch_verbatim_kernel[(min(programs, blocks),)](
        weight.verbatim_groups, weight.verbatim_exponents, weight.sign_mantissa, target,
        weight.verbatim_count, rows, columns, OUTPUT=_OUTPUT_ID[output], GROUP_ROWS=GROUP_ROWS,
        GROUPS_PER_BLOCK=settings.patch_groups_per_block, num_warps=settings.patch_num_warps)


def launch_stream_decoder(weight: DeviceWeight, output: str, out: torch.Tensor, programs: int,
                          settings: DecoderSettings = DECODER) -> object:
    """Queue the stream kernel alone: every code byte of `weight` decoded into `out` (verbatim groups left as their
    code 0 decodes), on `programs` persistent programs. Returns Triton's compiled kernel (`n_regs`, `n_spills`)."""
    return _launch_stream(weight, output, _checked_target(weight, output, out, programs), programs, settings)


def launch_verbatim_patch(weight: DeviceWeight, output: str, out: torch.Tensor, programs: int,
                          settings: DecoderSettings = DECODER) -> object:
    """Queue the patch of the verbatim groups alone (exponent and BF16 outputs; nothing for codes or when the weight
    has none), on at most `programs` programs. Returns Triton's compiled kernel, or None when nothing ran."""
    return _launch_patch(weight, output, _checked_target(weight, output, out, programs), programs, settings)


def decode(weight: DeviceWeight, output: str, out: torch.Tensor, programs: int,
           settings: DecoderSettings = DECODER) -> torch.Tensor:
    """Decode the stream of `weight` into `out` on `programs` persistent programs (the SM-split knob:
    `schedule.decoder_programs` gives `settings.programs_per_sm` for each SM it may use), then patch the verbatim
    groups (exponent and BF16 outputs). Checks its arguments once for both launches."""
    target = _checked_target(weight, output, out, programs)
    _launch_stream(weight, output, target, programs, settings)
    _launch_patch(weight, output, target, programs, settings)
    return out


def compile_decoder(output: str, shape: tuple[int, int], layout: StreamLayout = StreamLayout(),
                    settings: DecoderSettings = DECODER) -> None:
    """Compile the stream decoder (and the verbatim patch) for `output` and a (K, N) weight without launching."""
    if output not in OUTPUTS:
        raise ValueError(f"unknown decoder output {output!r}; allowed: {', '.join(OUTPUTS)}")
    rows, columns = shape
    num_bytes = -(-rows // GROUP_ROWS) * GROUP_ROWS // 2 * columns
    sign_mantissa_dtype, out_dtype = _stream_dtypes(output, columns % 2 == 0)
    decode_stream_kernel.warmup(
        torch.int32, torch.int64, torch.int16, torch.int16, sign_mantissa_dtype, out_dtype,
        2, num_bytes, rows, columns, grid=(1,),
        **_launch_arguments(layout, output, settings), NARROW=_narrow(shape, 0), PAIRED=columns % 2 == 0,
        maxnreg=_register_cap(settings, columns % 2 == 0))
    if output != "codes":
        patch_verbatim_kernel.warmup(
            torch.int32, torch.uint8, torch.uint8, torch.int16 if output == "bfloat16" else torch.uint8, 2, rows,
            columns, grid=(1,),
            OUTPUT=_OUTPUT_ID[output], GROUP_ROWS=GROUP_ROWS, GROUPS_PER_BLOCK=settings.patch_groups_per_block,
            num_warps=settings.patch_num_warps)
