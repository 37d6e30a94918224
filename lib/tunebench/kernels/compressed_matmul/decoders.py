"""Triton decoders of the compact form: the entropy-coded stream to palette codes, to exponent bytes or to BF16
weights, on a persistent grid whose size is the SM-split knob; and the patch of verbatim groups.

Each program takes `chunks_per_program` chunks at a time, one lane of the stream per (chunk, lane) element; at
each step a lane tops up a 64-bit buffer of its next bits by a word when fewer than 32 are left, looks its two nibbles
up in the decode table and writes one code byte (or two exponent bytes, or two BF16 weights: rows 2r and 2r + 1 of one
column).
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

    # One chunk of 128 lanes on 2 warps (2 lanes a thread), 16 programs for each SM of the share: 32 warps an SM keep
    # more gathers in flight than one program of 16 chunks on 16 warps did, and a Llama MLP weight's 1,792 chunks
    # spread over every SM instead of 112 programs (docs/compressed_matmul.md, "A bit buffer in the stream decoder").
    chunks_per_program: int = 1
    num_warps: int = 2
    programs_per_sm: int = 16
    patch_groups_per_block: int = 16
    patch_num_warps: int = 4


DECODER = DecoderSettings()


@triton.jit
def _bf16_bits(exponent, sign_mantissa):
    return (((sign_mantissa & 0x80) << 8) | (exponent << 7) | (sign_mantissa & 0x7F)).to(tl.int16)


@triton.jit(do_not_specialize=["num_chunks"])
def decode_stream_kernel(
    words_ptr, chunk_starts_ptr, lane_bits_ptr, table_ptr, sign_mantissa_ptr, out_ptr,
    num_chunks, num_bytes, K, N,
    OUTPUT: tl.constexpr, LANES: tl.constexpr, STEPS: tl.constexpr, MAX_CODE_LENGTH: tl.constexpr,
    CHUNKS_PER_PROGRAM: tl.constexpr, EXPONENT_SHIFT: tl.constexpr, NARROW: tl.constexpr,
):
    lane = tl.arange(0, LANES)[None, :]
    within = tl.arange(0, CHUNKS_PER_PROGRAM)[:, None]
    # A step moves every lane LANES bytes on: whole rows of row pairs plus columns, with at most one carry.
    rows_a_step = LANES // N
    columns_a_step = LANES % N
    # Persistent grid: the launch picks how many programs (the SM share); each loops over chunks.
    for first in range(tl.program_id(0) * CHUNKS_PER_PROGRAM, num_chunks, tl.num_programs(0) * CHUNKS_PER_PROGRAM):
        chunk = first + within
        live = chunk < num_chunks
        bits = tl.load(lane_bits_ptr + chunk * LANES + lane, mask=live, other=0).to(tl.int64)
        start = tl.load(chunk_starts_ptr + chunk, mask=live, other=0)
        position = start * 32 + tl.cumsum(bits, axis=1) - bits
        # A 64-bit buffer of the lane's next bits, MSB first: `valid` of them are the stream's. A step reads at
        # most 2 x MAX_CODE_LENGTH <= 30 bits, so topping it up by a word whenever fewer than 32 are left keeps it
        # full enough, and a lane loads a word every few steps. The word it tops up with was loaded at its previous
        # refill (`ahead`), so no step waits on a load it issued itself (the stream keeps 2 spare words at its end).
        word = position >> 5
        high = tl.load(words_ptr + word, mask=live, other=0).to(tl.uint32, bitcast=True).to(tl.uint64)
        low = tl.load(words_ptr + word + 1, mask=live, other=0).to(tl.uint32, bitcast=True).to(tl.uint64)
        ahead = tl.load(words_ptr + word + 2, mask=live, other=0)
        buffer = ((high << 32) | low) << (position & 31).to(tl.uint64)
        valid = 64 - (position & 31).to(tl.int32)
        next_word = word + 3
        byte = chunk.to(tl.int64) * (LANES * STEPS) + lane
        row_pair = (byte // N).to(tl.int32)  # the byte's place in the (padded K / 2) x N code matrix, divided once
        column = (byte - row_pair.to(tl.int64) * N).to(tl.int32)
        if NARROW:  # every offset fits 32 bits: cheaper address arithmetic in the loop
            byte = byte.to(tl.int32)
            next_word = next_word.to(tl.int32)
        for _ in range(STEPS):
            refill = valid < 32
            incoming = tl.where(refill, ahead, 0).to(tl.uint32, bitcast=True).to(tl.uint64)
            buffer |= incoming << tl.where(refill, 32 - valid, 0).to(tl.uint64)
            valid += tl.where(refill, 32, 0)
            ahead = tl.load(words_ptr + next_word, mask=live & refill, other=ahead)
            next_word += refill.to(tl.int32)
            first_entry = tl.load(table_ptr + (buffer >> (64 - MAX_CODE_LENGTH)).to(tl.int32))
            first_length = (first_entry >> 4) & 15
            second_entry = tl.load(table_ptr + ((buffer << first_length.to(tl.uint64)) >> (64 - MAX_CODE_LENGTH))
                                   .to(tl.int32))
            consumed = first_length + ((second_entry >> 4) & 15)
            buffer = buffer << consumed.to(tl.uint64)
            valid -= consumed
            written = live & (byte < num_bytes)
            if OUTPUT == 0:
                tl.store(out_ptr + byte, ((first_entry & 15) | ((second_entry & 15) << 4)).to(tl.uint8), mask=written)
            else:
                if NARROW:  # element (2 * row_pair, column) of the output
                    even = row_pair * (2 * N) + column
                else:
                    even = row_pair.to(tl.int64) * (2 * N) + column
                even_written = written & (2 * row_pair < K)
                odd_written = written & (2 * row_pair + 1 < K)
                first_exponent = (first_entry >> EXPONENT_SHIFT) & 255
                second_exponent = (second_entry >> EXPONENT_SHIFT) & 255
                if OUTPUT == 1:
                    tl.store(out_ptr + even, first_exponent.to(tl.uint8), mask=even_written)
                    tl.store(out_ptr + even + N, second_exponent.to(tl.uint8), mask=odd_written)
                else:
                    first_sm = tl.load(sign_mantissa_ptr + even, mask=even_written, other=0).to(tl.int32)
                    second_sm = tl.load(sign_mantissa_ptr + even + N, mask=odd_written, other=0).to(tl.int32)
                    tl.store(out_ptr + even, _bf16_bits(first_exponent, first_sm), mask=even_written)
                    tl.store(out_ptr + even + N, _bf16_bits(second_exponent, second_sm), mask=odd_written)
            byte += LANES
            column += columns_a_step
            carry = column >= N
            column = tl.where(carry, column - N, column)
            row_pair += rows_a_step + carry.to(tl.int32)


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
            "EXPONENT_SHIFT": EXPONENT_SHIFT, "num_warps": settings.num_warps}


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


def _launch_stream(weight: DeviceWeight, output: str, target: torch.Tensor, programs: int,
                   settings: DecoderSettings) -> object:
    rows, columns = weight.shape
    # No program without a chunk: with idle programs the grid decoded 9 % slower on an H200 (docs/compressed_matmul.md).
    programs = min(programs, triton.cdiv(weight.chunks, settings.chunks_per_program))
    return decode_stream_kernel[(programs,)](
        weight.words, weight.chunk_starts, weight.lane_bits, weight.decode_table, weight.sign_mantissa, target,
        weight.chunks, weight.num_bytes, rows, columns, **_launch_arguments(weight.layout, output, settings),
        NARROW=_narrow(weight.shape, weight.words.numel()))


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
    target = torch.int16 if output == "bfloat16" else torch.uint8
    decode_stream_kernel.warmup(
        torch.int32, torch.int64, torch.int16, torch.int32, torch.uint8, target,
        2, num_bytes, rows, columns, grid=(1,),
        **_launch_arguments(layout, output, settings), NARROW=_narrow(shape, 0))
    if output != "codes":
        patch_verbatim_kernel.warmup(
            torch.int32, torch.uint8, torch.uint8, target, 2, rows, columns, grid=(1,),
            OUTPUT=_OUTPUT_ID[output], GROUP_ROWS=GROUP_ROWS, GROUPS_PER_BLOCK=settings.patch_groups_per_block,
            num_warps=settings.patch_num_warps)
