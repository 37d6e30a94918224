"""Tunable Triton softmax along the rows of a (rows x cols) bf16/fp16 tensor: numerically stable (the row maximum
is subtracted first), fp32 math, output in the input dtype.

Reads top to bottom: kernel, config space and its resource model, inputs and reference, wrappers, cost model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch
import triton
import triton.language as tl

from tunebench.kernels import numerics, rowwise
from tunebench.space import Space

NAME = "softmax"
SHAPE_NAMES = rowwise.SHAPE_NAMES
DTYPES = rowwise.DTYPES
VENDOR_LIBRARY = "torch.softmax (eager)"
# Rows 4096, 5120 and 8192 wide (attention scores over a context of that length, or hidden-size activations) from
# one decoded token to a 32768-row batch; 32000 (the Llama-2 vocabulary: softmax over logits) is past the largest
# register tile (16384), so it is always streamed; 3000 and 5000 are not multiples of 16 (the second compiled
# specialization). The largest moves 512 MiB: about 25 ms of checking and timing per config.
DATASET_SHAPES = (
    (1, 4096), (64, 8192), (512, 5120), (4096, 8192), (8192, 5120), (32768, 4096), (256, 32000),
    (1000, 3000), (8192, 5000),
)
SHAPE_SETS = {"default": DATASET_SHAPES}
# Relative Frobenius error allowed against an fp32 reference: the rounding of the output to bf16 (8 significant
# bits) or fp16 (11), measured on an H100 as 1.7e-3 and 2.1e-4 for torch and every config tried; fp16 also loses
# precision on probabilities below 6e-5 (subnormal), which took it to 4.4e-4 on 40000-wide rows. The tolerances leave
# a margin of 3x and about 5x. float32 is for logic checks under the interpreter.
TOLERANCE = {"bfloat16": 5e-3, "float16": 2e-3, "float32": 1e-5}
LAUNCH_PARAMETERS = rowwise.LAUNCH_PARAMETERS
SOURCE_MODULES = rowwise.SOURCE_MODULES  # its launch arguments and hint come from these
COLUMN_VECTORS = 0  # nothing is loaded beside the rows (see rowwise.resource_usage)


@triton.jit
def _softmax_rows_in_registers(
    x_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride,
    BLOCK_SIZE: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr, EVICTION_POLICY: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    """Rows of at most BLOCK_SIZE columns: each row is read once, kept in registers, and written."""
    cols = tl.arange(0, BLOCK_SIZE)
    in_row = cols < n_cols
    for row_block in tl.range(tl.program_id(0), tl.cdiv(n_rows, ROWS_PER_PROGRAM), tl.num_programs(0),
                              num_stages=NUM_STAGES):
        row_ids = row_block * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
        # Rows past the end re-read the last row, so loads need no row mask; their stores are masked.
        rows = tl.minimum(row_ids, n_rows - 1).to(tl.int64)
        x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=in_row[None, :],
                    other=-float("inf"), eviction_policy=EVICTION_POLICY).to(tl.float32)
        numerators = tl.exp(x - tl.max(x, axis=1)[:, None])
        y = numerators * (1.0 / tl.sum(numerators, axis=1))[:, None]
        store_mask = (row_ids < n_rows)[:, None] & in_row[None, :]
        tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=store_mask)


@triton.jit
def _softmax_rows_streamed(
    x_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride,
    BLOCK_SIZE: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr, EVICTION_POLICY: tl.constexpr, NUM_STAGES: tl.constexpr,
    LOOP_UNROLL: tl.constexpr,
):
    """Rows of any length, in tiles of BLOCK_SIZE columns: an online pass for the maximum and the sum of
    exponentials (Milakov and Gimelshein, 2018), then one for the output."""
    for row_block in tl.range(tl.program_id(0), tl.cdiv(n_rows, ROWS_PER_PROGRAM), tl.num_programs(0)):
        row_ids = row_block * ROWS_PER_PROGRAM + tl.arange(0, ROWS_PER_PROGRAM)
        rows = tl.minimum(row_ids, n_rows - 1).to(tl.int64)
        x_rows = x_ptr + rows[:, None] * x_row_stride
        row_max = tl.full((ROWS_PER_PROGRAM,), -float("inf"), dtype=tl.float32)
        row_sum = tl.zeros((ROWS_PER_PROGRAM,), dtype=tl.float32)
        for start in tl.range(0, n_cols, BLOCK_SIZE, num_stages=NUM_STAGES, loop_unroll_factor=LOOP_UNROLL):
            cols = start + tl.arange(0, BLOCK_SIZE)
            x = tl.load(x_rows + cols[None, :], mask=(cols < n_cols)[None, :], other=-float("inf"),
                        eviction_policy=EVICTION_POLICY).to(tl.float32)
            # Every tile holds at least one element of the row, so new_max is finite and exp(-inf) = 0 rescales
            # the empty sum of the first tile.
            new_max = tl.maximum(row_max, tl.max(x, axis=1))
            row_sum = row_sum * tl.exp(row_max - new_max) + tl.sum(tl.exp(x - new_max[:, None]), axis=1)
            row_max = new_max
        inverse_sum = 1.0 / row_sum
        y_rows = y_ptr + rows[:, None] * y_row_stride
        row_in_bounds = (row_ids < n_rows)[:, None]
        for start in tl.range(0, n_cols, BLOCK_SIZE, num_stages=NUM_STAGES, loop_unroll_factor=LOOP_UNROLL):
            cols = start + tl.arange(0, BLOCK_SIZE)
            in_row = cols < n_cols
            x = tl.load(x_rows + cols[None, :], mask=in_row[None, :], other=-float("inf"),
                        eviction_policy=EVICTION_POLICY).to(tl.float32)
            y = tl.exp(x - row_max[:, None]) * inverse_sum[:, None]
            tl.store(y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=row_in_bounds & in_row[None, :])


# rows is left unspecialized so that every row count shares one binary; cols and the row strides stay
# specialized because their divisibility by 16 decides whether loads are vectorized. Triton knows only
# divisibility by 16; ALIGN (see `rowwise.compile_arguments`) tells it 8, 4 or 2 where that holds.
@triton.jit(do_not_specialize=["n_rows"])
def softmax_kernel(
    x_ptr, y_ptr,
    n_rows, n_cols, x_row_stride, y_row_stride,
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
            _softmax_rows_in_registers(x_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride,
                                       BLOCK_SIZE, ROWS_PER_PROGRAM, EVICTION_POLICY, NUM_STAGES)
        else:
            _softmax_rows_streamed(x_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride,
                                   BLOCK_SIZE, ROWS_PER_PROGRAM, EVICTION_POLICY, NUM_STAGES, LOOP_UNROLL)
    else:
        _softmax_rows_streamed(x_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride,
                               BLOCK_SIZE, ROWS_PER_PROGRAM, EVICTION_POLICY, NUM_STAGES, LOOP_UNROLL)


# ---------------------------------------------------------------------------------------------
# Config space and the resource model that prunes it (shared with layernorm: see rowwise)
# ---------------------------------------------------------------------------------------------

def resource_usage(config: Mapping[str, Any]) -> rowwise.ResourceUsage:
    """A config's registers, shared memory and tile per thread (only the rows are loaded)."""
    return rowwise.resource_usage(config, COLUMN_VECTORS)


def config_space(limits: rowwise.DeviceLimits = rowwise.HOPPER) -> Space:
    """The softmax config space, pruned by the row-wise resource model for `limits` (2-byte inputs)."""
    return rowwise.config_space(NAME, COLUMN_VECTORS, limits)


DEFAULT_CONFIG = rowwise.DEFAULT_CONFIG  # an untuned user's pick (rowwise says which)


# ---------------------------------------------------------------------------------------------
# Inputs and reference
# ---------------------------------------------------------------------------------------------

@dataclass
class SoftmaxInputs:
    """The rows and the output of one problem, allocated once."""

    x: torch.Tensor
    out: torch.Tensor


def check_shape(shape: tuple[int, ...]) -> tuple[int, int]:
    """Validate a (rows, cols) shape and return it as plain ints."""
    return rowwise.check_shape(shape, NAME)


def make_inputs(shape: tuple[int, ...], dtype: str, device: str | torch.device = "cuda",
                seed: int = 0) -> SoftmaxInputs:
    """Standard normal rows (never zeros: a constant row hides wrong maxima and runs unrealistically fast), drawn
    on the CPU from `seed`."""
    rows, cols = check_shape(shape)
    element = rowwise.torch_dtype(dtype)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn((rows, cols), generator=generator).to(device=device, dtype=element)
    return SoftmaxInputs(x, torch.empty((rows, cols), device=device, dtype=element))


def reference(inputs: SoftmaxInputs) -> torch.Tensor:
    """The softmax in fp32 arithmetic on upcast inputs."""
    return torch.softmax(inputs.x.float(), dim=-1)


relative_error = numerics.relative_error  # ||output - expected|| / ||expected|| in fp64; inf on NaN or inf


# ---------------------------------------------------------------------------------------------
# Wrappers
# ---------------------------------------------------------------------------------------------

def run(config: Mapping[str, Any], inputs: SoftmaxInputs, hint: bool = True) -> torch.Tensor:
    """Softmax of inputs.x's rows into inputs.out with one config; with `hint` False, without the alignment hint
    (ALIGN 1: the kernel as it was before the hint, to time the two side by side)."""
    x, out = inputs.x, inputs.out
    rows, cols = x.shape
    arguments = rowwise.compile_arguments(config, cols, x.stride(0), out.stride(0))
    softmax_kernel[rowwise.grid(config, rows, x.device)](
        x, out, rows, cols, x.stride(0), out.stride(0),
        **(arguments if hint else {**arguments, "ALIGN": 1}),
    )
    return out


def run_vendor(inputs: SoftmaxInputs) -> torch.Tensor:
    """torch's eager softmax, written straight into inputs.out."""
    return torch.softmax(inputs.x, dim=-1, out=inputs.out)


def compile_only(config: Mapping[str, Any], shape: tuple[int, ...], dtype: str) -> Any:
    """Compile the config for the shape's specialization without launching it (fills Triton's cache)."""
    rows, cols = check_shape(shape)
    element = rowwise.torch_dtype(dtype)
    return softmax_kernel.warmup(
        element, element, rows, cols, cols, cols,
        grid=(triton.cdiv(rows, config["ROWS_PER_PROGRAM"]),), **rowwise.compile_arguments(config, cols),
    )


def specialization(shape: tuple[int, ...]) -> tuple[bool, ...]:
    """The part of a shape that selects a distinct compiled binary (see rowwise.specialization)."""
    return rowwise.specialization(shape, NAME)


# ---------------------------------------------------------------------------------------------
# Cost model
# ---------------------------------------------------------------------------------------------

def flops(shape: tuple[int, ...]) -> int:
    """Floating-point operations per element: max, subtract, exponential, sum and scale (5); the exponential
    counts as one."""
    rows, cols = check_shape(shape)
    return 5 * rows * cols


def bytes_moved(shape: tuple[int, ...], dtype: str) -> int:
    """The fewest bytes any implementation moves through device memory: x read once, the output written once."""
    rows, cols = check_shape(shape)
    return rowwise.torch_dtype(dtype).itemsize * 2 * rows * cols
