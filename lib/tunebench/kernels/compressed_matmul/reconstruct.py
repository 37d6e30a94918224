"""The reconstructive matmul: out = x @ W for BF16 x (M x K) and a compressed W (K x N), rebuilding BF16 tiles of W
in registers before tl.dot, fp32 accumulation, split-K summed in the kernel or by launches after it. Its tunable space
is pruned by an explicit resource model.

Sources of W: "exponents" (sign+mantissa bytes + exponent bytes, pipeline 2), "palette" (sign+mantissa bytes +
packed 4-bit codes + verbatim groups, pipelines 3 and 4) and "bfloat16" (W itself: the same loop on plain
weights, a Triton baseline). The palette source zeroes the weights of verbatim groups in its main loop and adds
those groups after it, so its sums are those of x @ W up to the order of fp32 additions. It rebuilds W two rows at
a time, both rows' BF16 values in one 32-bit word: they share a code byte, a 64-row group and most of the work.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch
import triton
import triton.language as tl

from tunebench.kernels.compressed_matmul.device import DeviceWeight
from tunebench.kernels import cubin, occupancy
from tunebench.kernels.split_k import add_split, check_split_buffers, tile_counters
from tunebench.space import Choice, Constraint, Ordinal, Parameter

SOURCES = ("bfloat16", "exponents", "palette")
# How a split config's partial sums reach the output: fp32 atomic adds into a workspace, then a copy into the output and
# the workspace zeroed by two launches after the kernel; or, in the kernel, the tile's last split stores the output and
# zeroes the workspace (`split_k.add_split`), which saves the two launches.
SPLIT_REDUCTIONS = ("separate_launches", "in_kernel")
# The registers a thread of a config summed in the kernel: the compiler's choice, at most as many as the same tile
# summed by launches takes, or few enough for one program an SM more than that (`register_cap`).
REGISTER_CAPS = ("none", "as_by_launches", "one_more_program")
_SOURCE_ID = {name: index for index, name in enumerate(SOURCES)}
GROUP_M = 8  # grouped launch order (row blocks that share W tiles run together); fixed: it matters little here


@triton.jit
def _bf16(exponent, sign_mantissa):
    bits = ((sign_mantissa & 0x80) << 8) | (exponent << 7) | (sign_mantissa & 0x7F)
    return bits.to(tl.int16).to(tl.bfloat16, bitcast=True)


# The interpreter (CPU) runs no PTX: there the palette lookup takes selects (`_palette_exponent`), on a GPU byte
# permutes (`_PAIR_EXPONENTS_PTX`). Both give the same bits: the CPU tests check the first and run the second's
# instructions in Python; the GPU tests run it.
_PTX = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") != "1")
# Both rows' exponents of a code byte ($1) from the palette's 16 bytes ($2-$5): byte permutes look up the low three
# bits of each nibble in palette[0:8] and in palette[8:16]; a permute that copies each nibble's top bit over its byte
# picks between the two; a last permute spreads the two bytes to bits 0-7 and 16-23, and a shift to bits 7 and 23.
_PAIR_EXPONENTS_PTX = tl.constexpr("""{
.reg .b32 select, low, high, top, pick, zero;
mov.b32 zero, 0;
and.b32 select, $1, 0x77;
prmt.b32 low, $2, $3, select;
prmt.b32 high, $4, $5, select;
shl.b32 top, $1, 4;
prmt.b32 pick, top, $1, 0x22C8;
lop3.b32 pick, high, low, pick, 0xE4;
prmt.b32 pick, pick, zero, 0x4140;
shl.b32 $0, pick, 7;
}""")


@triton.jit
def _palette_exponent(code, palette0, palette1, palette2, palette3):
    # The palette lives in 4 registers (4 exponents each): selects and a shift, no memory lookup.
    word = tl.where(code < 8, tl.where(code < 4, palette0, palette1), tl.where(code < 12, palette2, palette3))
    return (word >> ((code & 3) * 8)) & 255


@triton.jit
def _pair_exponents(code, palette0, palette1, palette2, palette3):
    """The exponents of both rows of code bytes (int32), where a 32-bit word of two BF16 holds them: bits 7-14 for
    the low nibble's row, 23-30 for the high nibble's."""
    if _PTX:
        exponents = tl.inline_asm_elementwise(
            _PAIR_EXPONENTS_PTX, "=r,r,r,r,r,r",
            [code, tl.broadcast_to(palette0, code.shape), tl.broadcast_to(palette1, code.shape),
             tl.broadcast_to(palette2, code.shape), tl.broadcast_to(palette3, code.shape)],
            dtype=tl.int32, is_pure=True, pack=1)
    else:
        exponents = (_palette_exponent(code & 15, palette0, palette1, palette2, palette3) << 7
                     | _palette_exponent(code >> 4, palette0, palette1, palette2, palette3) << 23)
    return exponents


@triton.jit
def palette_tile(k0, offs_n, K, N, sign_mantissa_ptr, codes_ptr, flags_ptr, palette0, palette1, palette2, palette3,
                 BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr, EVEN_K: tl.constexpr):
    """The palette source's BF16 tile W[k0:k0 + BLOCK_K, offs_n], zero in verbatim groups and in rows past K, rebuilt
    by pairs of rows (2r, 2r + 1): one code byte, one flag bit and one 32-bit word of two BF16 values each. k0 is a
    multiple of BLOCK_K, which divides 512, so the tile lies in one row of verbatim flags. Columns past N may hold
    whatever their codes give: their outputs are never stored. With EVEN_K no tile reaches past K."""
    k_even = k0 + 2 * tl.arange(0, BLOCK_K // 2)
    columns_inside = offs_n[None, :] < N
    even_inside = (k_even[:, None] < K) & columns_inside
    odd_inside = (k_even[:, None] + 1 < K) & columns_inside
    even = k_even[:, None] * N + offs_n[None, :]
    sign_mantissa = (tl.load(sign_mantissa_ptr + even, mask=even_inside, other=0).to(tl.uint32)
                     | tl.load(sign_mantissa_ptr + even + N, mask=odd_inside, other=0).to(tl.uint32) << 16)
    code = tl.load(codes_ptr + (k_even[:, None] >> 1) * N + offs_n[None, :], mask=even_inside, other=0).to(tl.int32)
    exponents = _pair_exponents(code, palette0, palette1, palette2, palette3)
    flags = tl.load(flags_ptr + (k0 >> 9) * N + offs_n, mask=offs_n < N, other=0).to(tl.int32)
    # All ones, or 0 in a verbatim group: an AND; with EVEN_K the tile takes no select at all.
    kept = (((flags[None, :] >> ((k_even[:, None] >> 6) & 7)) & 1) - 1).to(tl.uint32, bitcast=True)
    # A byte copied 8 bits up puts its sign at bit 15 of its half and keeps its mantissa at bits 0-6.
    bits = ((sign_mantissa * 0x101) & 0x807F807F | exponents.to(tl.uint32, bitcast=True)) & kept
    if not EVEN_K:  # rows past K must be +0: x's zero padding times an inf exponent from a code would be NaN
        bits = tl.where(even_inside, bits, 0)
        bits = tl.where(odd_inside, bits, bits & 0xFFFF)
    rows_even = bits.to(tl.uint16).to(tl.bfloat16, bitcast=True)
    rows_odd = (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    return tl.reshape(tl.permute(tl.join(rows_even, rows_odd), (0, 2, 1)), (BLOCK_K, BLOCK_N))


@triton.jit
def weight_tile(
    k0, offs_n, K, N, weight_ptr, sign_mantissa_ptr, exponents_ptr, codes_ptr, flags_ptr,
    palette0, palette1, palette2, palette3, SOURCE: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    """The BF16 tile W[k0:k0 + BLOCK_K, offs_n], zero past K and (palette source) in verbatim groups; EVEN_K says no
    tile reaches past K. Columns past N are zero, or (palette source) may hold whatever their codes give."""
    if SOURCE == 2:
        tile = palette_tile(k0, offs_n, K, N, sign_mantissa_ptr, codes_ptr, flags_ptr, palette0, palette1, palette2,
                            palette3, BLOCK_K, BLOCK_N, EVEN_K)
    else:
        offs_k = k0 + tl.arange(0, BLOCK_K)
        inside = (offs_k[:, None] < K) & (offs_n[None, :] < N)
        offset = offs_k[:, None] * N + offs_n[None, :]
        if SOURCE == 0:
            tile = tl.load(weight_ptr + offset, mask=inside, other=0.0)
        else:
            sign_mantissa = tl.load(sign_mantissa_ptr + offset, mask=inside, other=0).to(tl.int32)
            exponent = tl.load(exponents_ptr + offset, mask=inside, other=0).to(tl.int32)
            tile = _bf16(exponent, sign_mantissa)  # masked loads give +0 outside K x N
    return tile


@triton.jit
def add_verbatim_groups(
    acc, x_ptr, sign_mantissa_ptr, groups_ptr, column_starts_ptr, verbatim_ptr, offs_m, offs_n, pid_n, pid_k,
    M, N, K, stride_xm, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
):
    """acc + the products of the verbatim groups in this program's columns (and, with split-K, its K blocks)."""
    rows = tl.arange(0, 64)
    first = tl.load(column_starts_ptr + pid_n * BLOCK_N)
    last = tl.load(column_starts_ptr + tl.minimum((pid_n + 1) * BLOCK_N, N))
    for group in range(first, last):
        group_row = tl.load(groups_ptr + group * 2)
        column = tl.load(groups_ptr + group * 2 + 1)
        if (group_row * 64 // BLOCK_K) % SPLIT_K == pid_k:  # the K block this group lies in is this program's
            k = group_row * 64 + rows
            valid = k < K
            exponent = tl.load(verbatim_ptr + group * 64 + rows, mask=valid, other=0).to(tl.int32)
            sign_mantissa = tl.load(sign_mantissa_ptr + k * N + column, mask=valid, other=0).to(tl.int32)
            w = _bf16(exponent, sign_mantissa).to(tl.float32)
            x = tl.load(x_ptr + offs_m[:, None] * stride_xm + k[None, :],
                        mask=(offs_m[:, None] < M) & valid[None, :], other=0.0).to(tl.float32)
            products = tl.sum(x * w[None, :], axis=1)  # each product of two BF16 values is exact in fp32
            acc += tl.where(offs_n[None, :] == column, products[:, None], 0.0)
    return acc


@triton.jit(do_not_specialize=["M"])
def reconstruct_matmul_kernel(
    x_ptr, out_ptr, workspace_ptr, tile_counts_ptr, weight_ptr, sign_mantissa_ptr, exponents_ptr, codes_ptr, flags_ptr,
    palette_ptr, groups_ptr, column_starts_ptr, verbatim_ptr, M, N, K, stride_xm, stride_om,
    SOURCE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr, LAST_SPLIT_STORES: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_n = tl.max_contiguous(tl.multiple_of(offs_n, BLOCK_N), BLOCK_N)
    # The palette's 16 exponents, 4 to a word (read by the "palette" source only).
    palette0 = tl.load(palette_ptr)
    palette1 = tl.load(palette_ptr + 1)
    palette2 = tl.load(palette_ptr + 2)
    palette3 = tl.load(palette_ptr + 3)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K * SPLIT_K)):
        k0 = (k * SPLIT_K + pid_k) * BLOCK_K
        offs_k = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :],
                    mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        w = weight_tile(k0, offs_n, K, N, weight_ptr, sign_mantissa_ptr, exponents_ptr, codes_ptr, flags_ptr,
                        palette0, palette1, palette2, palette3, SOURCE, BLOCK_K, BLOCK_N, EVEN_K)
        acc = tl.dot(x, w, acc)
    if SOURCE == 2:
        acc = add_verbatim_groups(acc, x_ptr, sign_mantissa_ptr, groups_ptr, column_starts_ptr, verbatim_ptr, offs_m,
                                  offs_n, pid_n, pid_k, M, N, K, stride_xm, BLOCK_N, BLOCK_K, SPLIT_K)

    out_ptrs = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :]
    out_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    workspace_ptrs = workspace_ptr + offs_m[:, None] * N + offs_n[None, :]
    if SPLIT_K == 1:
        tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=out_mask)
    elif LAST_SPLIT_STORES:  # pid numbers the output tiles: it is the tile's counter
        add_split(acc, workspace_ptrs, out_ptrs, out_mask, tile_counts_ptr + pid, SPLIT_K)
    else:  # the launches after this one cast the workspace into the output and zero it
        tl.atomic_add(workspace_ptrs, acc, mask=out_mask, sem="relaxed")


# ---------------------------------------------------------------------------------------------
# Config space and its resource model
# ---------------------------------------------------------------------------------------------

# the tile config (constexprs and compile options)
MATMUL_PARAMETERS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "num_warps", "num_stages")


@dataclass(frozen=True)
class MatmulLimits:
    """What a reconstructive-matmul config may use on one Hopper SM. Checked against ptxas for the palette source on
    sm_90 (Triton 3.6, N and K divisible by 16, `cuobjdump -res-usage`): the shared-memory model below matches the
    kernels' allocation to within 6 %, and exactly the configs rebuilding 128 W elements per thread spilled."""

    shared_memory_bytes: int = 232_448  # opt-in maximum per block on H100 and H200 (227 KiB)
    accumulator_registers_per_thread: int = 128  # fp32 accumulator elements per thread, of 255 registers
    min_accumulator_elements_per_thread: int = 4  # fewer leaves most of a warp's lanes idle
    rebuilt_elements_per_thread: int = 64  # W elements each thread rebuilds per K step (loaded bytes, code, bits)


HOPPER_MATMUL = MatmulLimits()


def matmul_parameters() -> list[Parameter]:
    """The reconstructive matmul's tunable parameters."""
    return [
        Ordinal("BLOCK_M", (16, 64, 128)),  # 16: decode batches; 64/128: prefill
        Ordinal("BLOCK_N", (64, 128)),
        Ordinal("BLOCK_K", (64, 128)),
        # Spreads K over more programs when M and N give few output tiles: at batch 1 on an H100 the palette matmul's
        # time fell with its programs from 64 to 256 (down projection, 0.294 to 0.125 ms; stop 83's H100 sweep).
        Ordinal("SPLIT_K", (1, 4, 16)),
        Ordinal("num_warps", (4, 8)),
        Ordinal("num_stages", (2, 3)),
        Choice("split_reduction", SPLIT_REDUCTIONS),  # read only when SPLIT_K > 1
        Choice("register_cap", REGISTER_CAPS),  # read only when the split is summed in the kernel
    ]


def resource_usage(config: Mapping[str, Any]) -> dict[str, float]:
    """Shared memory of the pipelined loads (num_stages x the x tile and the W source, at most 2 bytes a weight, plus
    the rebuilt BF16 tile staged for the dot), and fp32 accumulator and rebuilt W elements per thread."""
    threads = 32 * config["num_warps"]
    block_m, block_n, block_k = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    return {
        "shared_memory_bytes": config["num_stages"] * (block_m * block_k * 2 + block_k * block_n * 2)
        + block_k * block_n * 2,
        "accumulator_elements_per_thread": block_m * block_n / threads,
        "rebuilt_elements_per_thread": block_k * block_n / threads,
    }


def matmul_constraints(applies: Callable[[Mapping[str, Any]], bool] = lambda config: True,
                       limits: MatmulLimits = HOPPER_MATMUL) -> list[Constraint]:
    """The resource model as constraints; `applies(config)` says whether a config runs this matmul at all."""
    def holds(test):
        return lambda config: not applies(config) or test(resource_usage(config))

    return [
        Constraint("shared_memory", holds(lambda use: use["shared_memory_bytes"] <= limits.shared_memory_bytes),
                   f"num_stages x (BLOCK_M*BLOCK_K + BLOCK_K*BLOCK_N) x 2 + BLOCK_K*BLOCK_N x 2 bytes "
                   f"<= {limits.shared_memory_bytes}"),
        Constraint("accumulator_registers",
                   holds(lambda use: use["accumulator_elements_per_thread"] <= limits.accumulator_registers_per_thread),
                   f"BLOCK_M*BLOCK_N / (32*num_warps) <= {limits.accumulator_registers_per_thread}"),
        Constraint("warps_for_tile",
                   holds(lambda use: use["accumulator_elements_per_thread"]
                         >= limits.min_accumulator_elements_per_thread),
                   f"BLOCK_M*BLOCK_N / (32*num_warps) >= {limits.min_accumulator_elements_per_thread}"),
        Constraint("rebuild_registers",
                   holds(lambda use: use["rebuilt_elements_per_thread"] <= limits.rebuilt_elements_per_thread),
                   f"BLOCK_K*BLOCK_N / (32*num_warps) <= {limits.rebuilt_elements_per_thread}"),
    ]


# ---------------------------------------------------------------------------------------------
# Wrapper
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SplitBuffers:
    """Where a split config's partial sums of an M x N output meet: an fp32 workspace and the tiles' counters (see
    `split_k.add_split`), zero when allocated; every launch leaves them so."""

    workspace: torch.Tensor
    tile_counts: torch.Tensor

    @classmethod
    def zeroed(cls, m: int, n: int, device: str | torch.device) -> "SplitBuffers":
        return cls(torch.zeros((m, n), dtype=torch.float32, device=device), tile_counters(m, n, device))


def _grid(config: Mapping[str, Any], m: int, n: int) -> tuple[int, int]:
    return triton.cdiv(m, config["BLOCK_M"]) * triton.cdiv(n, config["BLOCK_N"]), config["SPLIT_K"]


def sums_in_kernel(config: Mapping[str, Any]) -> bool:
    """Whether a config's split partial sums reach the output in the kernel (`split_reduction`, which a split config
    must name); False for an unsplit one."""
    if config["SPLIT_K"] == 1:
        return False
    reduction = config.get("split_reduction")
    if reduction not in SPLIT_REDUCTIONS:
        raise ValueError(f"split_reduction={reduction!r} for SPLIT_K={config['SPLIT_K']}; allowed: "
                         f"{', '.join(SPLIT_REDUCTIONS)}")
    return reduction == "in_kernel"


def _launch_arguments(config: Mapping[str, Any], source: str, k: int) -> dict[str, Any]:
    """The kernel's constexprs; EVEN_K: every program's K blocks lie inside K (so no tile needs rows zeroed)."""
    even_k = k % (config["BLOCK_K"] * config["SPLIT_K"]) == 0
    return {"SOURCE": _SOURCE_ID[source], "GROUP_M": GROUP_M, "EVEN_K": even_k,
            "LAST_SPLIT_STORES": sums_in_kernel(config), **{name: config[name] for name in MATMUL_PARAMETERS}}


def register_cap(config: Mapping[str, Any], source: str, n: int, k: int) -> int | None:
    """The registers a thread that a config may take on the GPU (Triton's `maxnreg`), or None for the compiler's
    choice. A config summed in the kernel with `register_cap` "as_by_launches" takes at most as many as the same tile's
    binary summed by launches, so that the last split's epilogue cannot cost the main loop registers and an SM
    programs. At the compiler's choice on an H100 (Triton 3.6), 16x64x64 split 4 w4 s3 took 80 registers in the
    kernel and 72 by launches: 6 programs an SM instead of 7, so its 896 programs at gate, batch 1 ran in 1.13 waves
    instead of 0.97 (results/compressed_split_k/profile_h100.md). "one_more_program" goes further: at most the
    registers with which one program an SM more fits than "as_by_launches" fits (`_registers_for_one_more_program`),
    at the price of spilling if the loop needs more: down at batch 1, split 16, took 0.0959 ms at 64 registers
    against 0.1094 at 71 (results/compressed_split_k/register_cap_h100.md)."""
    cap = config.get("register_cap", "none")
    if cap not in REGISTER_CAPS:
        raise ValueError(f"register_cap={cap!r}; allowed: {', '.join(REGISTER_CAPS)}")
    if cap == "none" or not sums_in_kernel(config):
        return None
    tile = tuple(config[name] for name in MATMUL_PARAMETERS)
    if cap == "as_by_launches":
        return _registers_summed_by_launches(source, tile, n, k)
    return _registers_for_one_more_program(source, tile, n, k)


@functools.cache
def _registers_summed_by_launches(source: str, tile: tuple[int, ...], n: int, k: int) -> int:
    twin = {**dict(zip(MATMUL_PARAMETERS, tile)), "split_reduction": "separate_launches"}
    return cubin.resource_usage(compile_matmul(twin, source, (1, n, k)))["registers"]  # M is never specialized on


@functools.cache
def _registers_for_one_more_program(source: str, tile: tuple[int, ...], n: int, k: int) -> int:
    """The most registers with which one program an SM more fits than the tile summed in the kernel with
    "as_by_launches" fits (by registers, shared memory and warps: `occupancy.programs_per_sm`); where its shared memory
    or warps leave no room for another, the same cap as "as_by_launches"."""
    config = {**dict(zip(MATMUL_PARAMETERS, tile)), "split_reduction": "in_kernel", "register_cap": "as_by_launches"}
    capped = compile_matmul(config, source, (1, n, k))
    shared, warps = capped.metadata.shared, config["num_warps"]
    more = occupancy.programs_per_sm(cubin.resource_usage(capped)["registers"], shared, warps) + 1
    registers = occupancy.registers_for_programs(more, warps)
    if occupancy.programs_per_sm(registers, shared, warps) < more:
        return _registers_summed_by_launches(source, tile, n, k)
    return registers


def _operands(source: str, weight: DeviceWeight | None, bf16_weight: torch.Tensor | None,
              exponents: torch.Tensor | None, codes: torch.Tensor | None) -> tuple[tuple[torch.Tensor, ...], tuple]:
    """The kernel's nine W pointers for `source`, and W's (K, N)."""
    if source == "bfloat16":
        if bf16_weight is None:
            raise ValueError('source "bfloat16" needs bf16_weight')
        return (bf16_weight,) * 9, tuple(bf16_weight.shape)
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; allowed: {', '.join(SOURCES)}")
    if weight is None or (source == "exponents" and exponents is None):
        raise ValueError(f"source {source!r} needs weight{' and exponents' if source == 'exponents' else ''}")
    unread = weight.sign_mantissa  # pointers this source never reads: any uint8 tensor, one binary per source
    pointers = (unread, weight.sign_mantissa, exponents if source == "exponents" else unread,
                (weight.codes if codes is None else codes) if source == "palette" else unread,
                weight.verbatim_flags, weight.palette_words, weight.verbatim_groups, weight.verbatim_column_starts,
                weight.verbatim_exponents)
    return pointers, tuple(weight.shape)


def multiply(x: torch.Tensor, source: str, config: Mapping[str, Any], out: torch.Tensor, split: SplitBuffers,
             weight: DeviceWeight | None = None, *, bf16_weight: torch.Tensor | None = None,
             exponents: torch.Tensor | None = None, codes: torch.Tensor | None = None) -> torch.Tensor:
    """out = x @ W with W read from `source`: "bfloat16" reads `bf16_weight`; "exponents" reads `exponents` and the
    sign+mantissa bytes of `weight`; "palette" reads `codes` (default: the resident `weight.codes`) and the rest of
    `weight`'s palette form. `split` (for M x N) takes the split-K partial sums, and is zero again on return."""
    pointers, (k, n) = _operands(source, weight, bf16_weight, exponents, codes)
    if x.dtype != torch.bfloat16 or x.dim() != 2 or x.stride(1) != 1 or x.shape[1] != k:
        raise ValueError(f"x must be a bfloat16 M x {k} tensor with unit column stride, got {x.dtype} {tuple(x.shape)}")
    if k * n >= 2**31:
        raise ValueError(f"W of {k} x {n} has 2**31 or more elements; the kernel's int32 offsets allow fewer")
    if source == "palette" and (config["BLOCK_K"] < 2 or 512 % config["BLOCK_K"]):
        raise ValueError(f"BLOCK_K={config['BLOCK_K']} for the palette source must divide 512 (a row of verbatim "
                         "flags) and be even (pairs of rows)")
    m = x.shape[0]
    if config["SPLIT_K"] > 1:
        check_split_buffers(split.workspace, split.tile_counts, m, n, config["SPLIT_K"])
    arguments = _launch_arguments(config, source, k)
    cap = register_cap(config, source, n, k) if x.is_cuda else None  # the interpreter compiles nothing
    reconstruct_matmul_kernel[_grid(config, m, n)](
        x, out, split.workspace, split.tile_counts, *pointers, m, n, k, x.stride(0), out.stride(0), **arguments,
        **({} if cap is None else {"maxnreg": cap}))
    if config["SPLIT_K"] > 1 and not arguments["LAST_SPLIT_STORES"]:
        out.copy_(split.workspace)
        split.workspace.zero_()
    return out


def compile_matmul(config: Mapping[str, Any], source: str, shape: tuple[int, int, int]) -> Any:
    """Compile the kernel for `source`, `config` and the (M, N, K) shape's specialization without launching it, as
    `multiply` launches it (with its `register_cap`)."""
    m, n, k = shape
    cap = register_cap(config, source, n, k)
    byte, word = torch.uint8, torch.int32
    if source == "bfloat16":
        pointers = (torch.bfloat16,) * 9
    else:
        pointers = (byte, byte, byte, byte, byte, word, word, word, byte)
    return reconstruct_matmul_kernel.warmup(
        torch.bfloat16, torch.bfloat16, torch.float32, torch.int32, *pointers, m, n, k, k, n, grid=_grid(config, m, n),
        **_launch_arguments(config, source, k), **({} if cap is None else {"maxnreg": cap}))
