"""Tunable Triton layer norm forward over the last dim of a (rows x cols) bf16/fp16 tensor, with weight and bias,
eps 1e-5, fp32 statistics.

Reads top to bottom: kernel, config space and its resource model, inputs and reference, wrappers, cost model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from tunebench.kernels import numerics, rowwise
from tunebench.space import Space

NAME = "layernorm"
SHAPE_NAMES = rowwise.SHAPE_NAMES
DTYPES = rowwise.DTYPES
VENDOR_LIBRARY = "torch.nn.functional.layer_norm (eager)"
EPS = 1e-5
# Hidden sizes of real models: 4096 (Llama-2/3-7B/8B), 5120 (Llama-2-13B), 8192 (Llama-2/3-70B), with rows from one
# decoded token to a 32768-token prefill; 14336 (the Llama-3-8B MLP width) is past every register tile this space
# allows a layer norm (8192 columns: its weight and bias share the registers), so it is always streamed; 3000 and
# 5000 are not multiples of 16 (the second compiled specialization). The largest moves 512 MiB: about 25 ms of
# checking and timing per config, which keeps a sweep of both row-wise kernels within a few minutes.
DATASET_SHAPES = (
    (1, 4096), (64, 8192), (512, 5120), (4096, 8192), (8192, 5120), (32768, 4096), (4096, 14336),
    (1000, 3000), (8192, 5000),
)
SHAPE_SETS = {"default": DATASET_SHAPES}
# Relative Frobenius error allowed against an fp32 reference. The statistics are fp32, so the error is the rounding
# of the output to bf16 (8 significant bits) or fp16 (11): measured on an H100, 1.7e-3 and 2.1e-4 for torch and for
# every config tried; the tolerances leave a margin of 3x and 5x. float32 is for logic checks under the interpreter.
TOLERANCE = {"bfloat16": 5e-3, "float16": 1e-3, "float32": 1e-5}
LAUNCH_PARAMETERS = rowwise.LAUNCH_PARAMETERS
SOURCE_MODULES = rowwise.SOURCE_MODULES  # its launch arguments and hint come from these
# The weight and bias are loaded beside the rows, one per-column vector each (see rowwise.resource_usage).
COLUMN_VECTORS = 2


@triton.jit
def _normalize_rows_in_registers(
    x_ptr, weight_ptr, bias_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride, eps,
    BLOCK_SIZE: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr, EVICTION_POLICY: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    """Rows of at most BLOCK_SIZE columns: each row is read once, kept in registers, normalized and written."""
    cols = tl.arange(0, BLOCK_SIZE)
    in_row = cols < n_cols
    # The weight and bias serve every row this program normalizes: load them once.
    weight = tl.load(weight_ptr + cols, mask=in_row, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + cols, mask=in_row, other=0.0).to(tl.float32)
    for row_block in tl.range(tl.program_id(0), tl.cdiv(n_rows, ROWS_PER_PROGRAM), tl.num_programs(0),
                              num_stages=NUM_STAGES):
        row_ids = row_block * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
        # Rows past the end re-read the last row, so loads need no row mask; their stores are masked.
        rows = tl.minimum(row_ids, n_rows - 1).to(tl.int64)
        x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=in_row[None, :], other=0.0,
                    eviction_policy=EVICTION_POLICY).to(tl.float32)
        mean = tl.sum(x, axis=1) / n_cols
        centered = tl.where(in_row[None, :], x - mean[:, None], 0.0)
        rstd = tl.rsqrt(tl.sum(centered * centered, axis=1) / n_cols + eps)
        y = centered * rstd[:, None] * weight[None, :] + bias[None, :]
        store_mask = (row_ids < n_rows)[:, None] & in_row[None, :]
        tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=store_mask)


@triton.jit
def _normalize_rows_streamed(
    x_ptr, weight_ptr, bias_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride, eps,
    BLOCK_SIZE: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr, EVICTION_POLICY: tl.constexpr, NUM_STAGES: tl.constexpr,
    LOOP_UNROLL: tl.constexpr,
):
    """Rows of any length, in tiles of BLOCK_SIZE columns: one pass for the statistics, one for the output."""
    for row_block in tl.range(tl.program_id(0), tl.cdiv(n_rows, ROWS_PER_PROGRAM), tl.num_programs(0)):
        row_ids = row_block * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
        rows = tl.minimum(row_ids, n_rows - 1).to(tl.int64)
        x_rows = x_ptr + rows[:, None] * x_row_stride
        # Each tile's count, mean and centered sum of squares (M2), exact within the tile, merge into the row's
        # with Chan, Golub and LeVeque's parallel update: no cancellation however large the mean is.
        mean = tl.zeros((ROWS_PER_PROGRAM,), dtype=tl.float32)
        m2 = tl.zeros((ROWS_PER_PROGRAM,), dtype=tl.float32)
        for start in tl.range(0, n_cols, BLOCK_SIZE, num_stages=NUM_STAGES, loop_unroll_factor=LOOP_UNROLL):
            cols = start + tl.arange(0, BLOCK_SIZE)
            in_row = cols < n_cols
            x = tl.load(x_rows + cols[None, :], mask=in_row[None, :], other=0.0,
                        eviction_policy=EVICTION_POLICY).to(tl.float32)
            seen = tl.cast(start, tl.float32)  # every earlier tile was full
            tile_count = tl.minimum(n_cols - start, BLOCK_SIZE).to(tl.float32)
            tile_mean = tl.sum(x, axis=1) / tile_count
            centered = tl.where(in_row[None, :], x - tile_mean[:, None], 0.0)
            delta = tile_mean - mean
            total = seen + tile_count
            mean += delta * (tile_count / total)
            m2 += tl.sum(centered * centered, axis=1) + delta * delta * (seen * tile_count / total)
        rstd = tl.rsqrt(m2 / n_cols + eps)
        y_rows = y_ptr + rows[:, None] * y_row_stride
        row_in_bounds = (row_ids < n_rows)[:, None]
        for start in tl.range(0, n_cols, BLOCK_SIZE, num_stages=NUM_STAGES, loop_unroll_factor=LOOP_UNROLL):
            cols = start + tl.arange(0, BLOCK_SIZE)
            in_row = cols < n_cols
            x = tl.load(x_rows + cols[None, :], mask=in_row[None, :], other=0.0,
                        eviction_policy=EVICTION_POLICY).to(tl.float32)
            weight = tl.load(weight_ptr + cols, mask=in_row, other=0.0).to(tl.float32)
            bias = tl.load(bias_ptr + cols, mask=in_row, other=0.0).to(tl.float32)
            y = (x - mean[:, None]) * rstd[:, None] * weight[None, :] + bias[None, :]
            tl.store(y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=row_in_bounds & in_row[None, :])


# rows is left unspecialized so that every row count shares one binary; cols and the row strides stay
# specialized because their divisibility by 16 decides whether loads are vectorized. Triton knows only
# divisibility by 16; ALIGN (see `rowwise.compile_arguments`) tells it 8, 4 or 2 where that holds.
@triton.jit(do_not_specialize=["n_rows"])
def layernorm_kernel(
    x_ptr, weight_ptr, bias_ptr, y_ptr,
    n_rows, n_cols, x_row_stride, y_row_stride, eps,
    BLOCK_SIZE: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr, ROW_IN_REGISTERS: tl.constexpr,
    LOOP_UNROLL: tl.constexpr, EVICTION_POLICY: tl.constexpr, NUM_STAGES: tl.constexpr,
    ALIGN: tl.constexpr = 1,
):
    if ALIGN > 1:  # the wrapper guarantees divisibility, so these rewrites keep the values and add the fact
        n_cols = n_cols // ALIGN * ALIGN
        x_row_stride = x_row_stride // ALIGN * ALIGN
        y_row_stride = y_row_stride // ALIGN * ALIGN
    if ROW_IN_REGISTERS:
        if n_cols <= BLOCK_SIZE:
            _normalize_rows_in_registers(x_ptr, weight_ptr, bias_ptr, y_ptr, n_rows, n_cols, x_row_stride,
                                         y_row_stride, eps, BLOCK_SIZE, ROWS_PER_PROGRAM, EVICTION_POLICY, NUM_STAGES)
        else:
            _normalize_rows_streamed(x_ptr, weight_ptr, bias_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride,
                                     eps, BLOCK_SIZE, ROWS_PER_PROGRAM, EVICTION_POLICY, NUM_STAGES, LOOP_UNROLL)
    else:
        _normalize_rows_streamed(x_ptr, weight_ptr, bias_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride,
                                 eps, BLOCK_SIZE, ROWS_PER_PROGRAM, EVICTION_POLICY, NUM_STAGES, LOOP_UNROLL)


# ---------------------------------------------------------------------------------------------
# Config space and the resource model that prunes it (shared with softmax: see rowwise)
# ---------------------------------------------------------------------------------------------

def resource_usage(config: Mapping[str, Any]) -> rowwise.ResourceUsage:
    """A config's registers, shared memory and tile per thread, with the weight and bias beside the rows."""
    return rowwise.resource_usage(config, COLUMN_VECTORS)


def config_space(limits: rowwise.DeviceLimits = rowwise.HOPPER) -> Space:
    """The layer-norm config space, pruned by the row-wise resource model for `limits` (2-byte inputs)."""
    return rowwise.config_space(NAME, COLUMN_VECTORS, limits)


DEFAULT_CONFIG = rowwise.DEFAULT_CONFIG  # an untuned user's pick (rowwise says which)


# ---------------------------------------------------------------------------------------------
# Inputs and reference
# ---------------------------------------------------------------------------------------------

@dataclass
class LayerNormInputs:
    """The rows, the per-column weight and bias, and the output of one problem, allocated once."""

    x: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor
    out: torch.Tensor


def check_shape(shape: tuple[int, ...]) -> tuple[int, int]:
    """Validate a (rows, cols) shape and return it as plain ints."""
    return rowwise.check_shape(shape, NAME)


def make_inputs(shape: tuple[int, ...], dtype: str, device: str | torch.device = "cuda",
                seed: int = 0) -> LayerNormInputs:
    """Standard normal rows, weight and bias (never zeros: they hide unwritten outputs and run unrealistically
    fast), drawn on the CPU from `seed`."""
    rows, cols = check_shape(shape)
    element = rowwise.torch_dtype(dtype)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn((rows, cols), generator=generator).to(device=device, dtype=element)
    weight = torch.randn((cols,), generator=generator).to(device=device, dtype=element)
    bias = torch.randn((cols,), generator=generator).to(device=device, dtype=element)
    return LayerNormInputs(x, weight, bias, torch.empty((rows, cols), device=device, dtype=element))


def reference(inputs: LayerNormInputs) -> torch.Tensor:
    """The layer norm in fp32 arithmetic on upcast inputs."""
    x = inputs.x.float()
    return F.layer_norm(x, (x.shape[1],), inputs.weight.float(), inputs.bias.float(), EPS)


relative_error = numerics.relative_error  # ||output - expected|| / ||expected|| in fp64; inf on NaN or inf


# ---------------------------------------------------------------------------------------------
# Wrappers
# ---------------------------------------------------------------------------------------------

def run(config: Mapping[str, Any], inputs: LayerNormInputs, hint: bool = True) -> torch.Tensor:
    """Normalize inputs.x into inputs.out with one config; with `hint` False, without the alignment hint (ALIGN 1:
    the kernel as it was before the hint, to time the two side by side)."""
    x, out = inputs.x, inputs.out
    rows, cols = x.shape
    arguments = rowwise.compile_arguments(config, cols, x.stride(0), out.stride(0))
    layernorm_kernel[rowwise.grid(config, rows, x.device)](
        x, inputs.weight, inputs.bias, out, rows, cols, x.stride(0), out.stride(0), EPS,
        **(arguments if hint else {**arguments, "ALIGN": 1}),
    )
    return out


def run_vendor(inputs: LayerNormInputs) -> torch.Tensor:
    """torch's eager layer norm. It has no out= form (native_layer_norm.out computes, then copies), so inputs.out
    is re-pointed at the result's storage instead of copying into it: the copy would charge torch a second pass."""
    x = inputs.x
    result = F.layer_norm(x, (x.shape[1],), inputs.weight, inputs.bias, EPS)
    return inputs.out.set_(result)


def compile_only(config: Mapping[str, Any], shape: tuple[int, ...], dtype: str) -> Any:
    """Compile the config for the shape's specialization without launching it (fills Triton's cache)."""
    rows, cols = check_shape(shape)
    element = rowwise.torch_dtype(dtype)
    return layernorm_kernel.warmup(
        element, element, element, element, rows, cols, cols, cols, EPS,
        grid=(triton.cdiv(rows, config["ROWS_PER_PROGRAM"]),), **rowwise.compile_arguments(config, cols),
    )


def specialization(shape: tuple[int, ...]) -> tuple[bool, ...]:
    """The part of a shape that selects a distinct compiled binary (see rowwise.specialization)."""
    return rowwise.specialization(shape, NAME)


# ---------------------------------------------------------------------------------------------
# Cost model
# ---------------------------------------------------------------------------------------------

def flops(shape: tuple[int, ...]) -> int:
    """Floating-point operations per element: sum and centered square for the statistics (3), then subtract,
    scale, multiply by the weight and add the bias (4); the per-row square root is not counted."""
    rows, cols = check_shape(shape)
    return 7 * rows * cols


def bytes_moved(shape: tuple[int, ...], dtype: str) -> int:
    """The fewest bytes any implementation moves through device memory: x read once, the output written once,
    the weight and bias read once."""
    rows, cols = check_shape(shape)
    element = rowwise.torch_dtype(dtype).itemsize
    return element * (2 * rows * cols + 2 * cols)
