"""What the row-wise kernel families (layernorm, softmax) share: the config space and the resource model that prunes
it, the launch grid (one program per row block, or a persistent grid sized from the SM count), shapes and dtypes.

Both kernels read a (rows x cols) tensor in tiles of ROWS_PER_PROGRAM rows by BLOCK_SIZE columns. With
ROW_IN_REGISTERS a row that fits one tile is read once and kept in registers; every other row is streamed through
a loop over its tiles twice (statistics, then output). PERSISTENT and PROGRAMS_PER_SM only size the grid, so
configs that differ in them alone share one compiled binary. The launch passes ALIGN, the divisibility of the column
count and the row strides that Triton's own specialization (by 16) does not see (`kernels.alignment`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Mapping

import torch
import triton

from tunebench.kernels.alignment import alignment
from tunebench.kernels.occupancy import HOPPER, DeviceLimits
from tunebench.space import Choice, Constraint, Flag, IntRange, Ordinal, PowerOfTwo, Space

SHAPE_NAMES = ("rows", "cols")
DTYPES = ("bfloat16", "float16")
ELEMENT_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
EVICTION_POLICIES = ("", "evict_first", "evict_last")  # tl.load's eviction_policy; "" is the hardware default
# The interpreter on a CPU has no SMs; a small count makes a persistent grid loop over several row blocks even on
# the tiny shapes of the tests, so that path is exercised there.
INTERPRETER_SM_COUNT = 4
LAUNCH_PARAMETERS = ("PERSISTENT", "PROGRAMS_PER_SM")  # they size the grid only (see `grid`)
# The modules besides a row-wise family's own whose source its binaries depend on (`kernels.kernel_source_files`).
SOURCE_MODULES = ("tunebench.kernels.rowwise", "tunebench.kernels.alignment")


# ---------------------------------------------------------------------------------------------
# Resource model
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RegisterModel:
    """How row values turn into registers. Checked against what ptxas reported for 961 binaries of both kernels
    compiled by Triton 3.6 for an H100 (BLOCK_SIZE 1024..16384, ROWS_PER_PROGRAM 1..4, num_warps 4..16, num_stages
    1..3, LOOP_UNROLL 1..4; 107 more ran out of shared memory, all outside the model). The records are in
    results/rowwise_calibration; tests/test_rowwise_calibration.py checks these claims against them."""

    # Row values may fill half of the registers a thread can get; the rest hold addresses, masks, indices,
    # statistics and temporaries. Of the 504 binaries the model admits none spilled more than 10 four-byte words
    # per thread (Triton's n_spills: 40 bytes of local memory); beyond this share spills reached 2,972 words.
    row_value_share: float = 0.5
    # Registers per thread ~ 1.5 per row value + 24, allocated in units of 8: a central fit, used only to count
    # how many persistent programs share an SM; ptxas used from 120 fewer to 42 more.
    registers_per_row_value: float = 1.5
    base_registers: int = 24


REGISTERS = RegisterModel()
# Shared memory that Triton takes besides the pipeline buffers: cross-warp reduction and layout-conversion scratch,
# at most 4 KiB in every calibration binary (RegisterModel).
SCRATCH_SHARED_MEMORY_BYTES = 4096


@dataclass(frozen=True)
class ResourceUsage:
    """A config's footprint under the resource model."""

    tile_elements_per_thread: float  # elements of one ROWS_PER_PROGRAM x BLOCK_SIZE tile per thread
    row_values_per_thread: float  # fp32 row values live at once per thread, on the hungrier code path
    registers_per_thread: int  # estimated from row_values_per_thread (RegisterModel)
    shared_memory_bytes: int  # software-pipelining buffers of the innermost loop, plus reduction scratch


def resource_usage(config: Mapping[str, Any], column_vectors: int, element_bytes: int = 2,
                   registers: RegisterModel = REGISTERS) -> ResourceUsage:
    """The footprint of `config` for a kernel that loads `column_vectors` per-column vectors beside the rows
    (layer norm: weight and bias, 2; softmax: 0).

    Row values: a ROWS_PER_PROGRAM x BLOCK_SIZE tile of fp32 values spreads over the 32 x num_warps threads, and so
    does each column vector. The whole-row path holds one tile and the vectors across its row loop; the streamed
    path has LOOP_UNROLL tiles and their vectors in flight. A kernel with ROW_IN_REGISTERS has both paths (rows
    that do not fit fall back to streaming), so it needs the larger.

    Shared memory: with num_stages > 1 Triton pipelines the loads of the innermost loop (the loops ask for it with
    tl.range(num_stages=...)) through num_stages - 1 buffers of what one iteration loads: a tile on the whole-row
    path; LOOP_UNROLL tiles and their column vectors on the streamed path. For every calibration binary
    (RegisterModel) Triton allocated exactly these buffers plus at most SCRATCH_SHARED_MEMORY_BYTES.
    """
    rows, block, warps = config["ROWS_PER_PROGRAM"], config["BLOCK_SIZE"], config["num_warps"]
    threads = 32 * warps
    tile = rows * block / threads
    vectors = column_vectors * block / threads
    unroll = config["LOOP_UNROLL"]
    row_values = unroll * (tile + vectors)
    iteration_bytes = unroll * (rows + column_vectors) * block * element_bytes
    if config["ROW_IN_REGISTERS"]:
        row_values = max(tile + vectors, row_values)
        iteration_bytes = max(rows * block * element_bytes, iteration_bytes)
    estimate = registers.registers_per_row_value * row_values + registers.base_registers
    return ResourceUsage(
        tile_elements_per_thread=tile,
        row_values_per_thread=row_values,
        registers_per_thread=8 * math.ceil(estimate / 8),
        shared_memory_bytes=(config["num_stages"] - 1) * iteration_bytes + SCRATCH_SHARED_MEMORY_BYTES,
    )


def register_cap(num_warps: int, limits: DeviceLimits = HOPPER) -> int:
    """The most registers a thread of a program of `num_warps` warps can get."""
    return min(limits.registers_per_thread, limits.registers_per_sm // (32 * num_warps))


def _programs_fit_on_an_sm(config: Mapping[str, Any], usage: ResourceUsage, limits: DeviceLimits) -> bool:
    programs, warps = config["PROGRAMS_PER_SM"], config["num_warps"]
    shared = usage.shared_memory_bytes + limits.reserved_shared_memory_per_block
    return (programs * warps <= limits.warps_per_sm
            and programs * shared <= limits.shared_memory_per_sm
            and programs * 32 * warps * usage.registers_per_thread <= limits.registers_per_sm)


# What a user who does not tune would pick, for layer norm and softmax alike: the whole row of a typical hidden size
# (up to 8192) in registers, one row per program, the 8 warps of Triton's fused-softmax tutorial (without its
# persistent grid), no pipelining or unrolling, default caching.
DEFAULT_CONFIG = {
    "BLOCK_SIZE": 8192, "ROW_IN_REGISTERS": True, "ROWS_PER_PROGRAM": 1, "num_warps": 8, "num_stages": 1,
    "LOOP_UNROLL": 1, "EVICTION_POLICY": "", "PERSISTENT": False, "PROGRAMS_PER_SM": 1,
}


def config_space(name: str, column_vectors: int, limits: DeviceLimits = HOPPER,
                 registers: RegisterModel = REGISTERS) -> Space:
    """The row-wise config space of kernel family `name`, pruned by the resource model for `limits`."""
    parameters = [
        PowerOfTwo("BLOCK_SIZE", 1024, 16384),  # columns per tile; 1024 = 4 warps x 32 lanes x one 16-byte load
        Flag("ROW_IN_REGISTERS"),  # True: a row that fits one tile is read once and kept in registers
        PowerOfTwo("ROWS_PER_PROGRAM", 1, 4),
        PowerOfTwo("num_warps", 4, 16),
        IntRange("num_stages", 1, 2),  # software pipelining of the innermost loop's loads; 1: none
        PowerOfTwo("LOOP_UNROLL", 1, 2),  # tl.range(loop_unroll_factor=...) of the streamed loops over a row
        Choice("EVICTION_POLICY", EVICTION_POLICIES),  # of the loads of the input rows
        Flag("PERSISTENT"),  # True: PROGRAMS_PER_SM x SM count programs loop over the row blocks
        Ordinal("PROGRAMS_PER_SM", (1, 2, 4, 8)),
    ]

    def usage(config: Mapping[str, Any]) -> ResourceUsage:
        return resource_usage(config, column_vectors, registers=registers)

    constraints = [
        Constraint(
            "row_registers",
            lambda c: (usage(c).row_values_per_thread
                       <= registers.row_value_share * register_cap(c["num_warps"], limits)),
            f"fp32 row values per thread <= {registers.row_value_share} x min({limits.registers_per_thread}, "
            f"{limits.registers_per_sm} / (32*num_warps))",
        ),
        Constraint(
            "warps_for_tile",
            lambda c: usage(c).tile_elements_per_thread >= limits.vector_elements,
            f"ROWS_PER_PROGRAM*BLOCK_SIZE / (32*num_warps) >= {limits.vector_elements} (a 16-byte load per thread)",
        ),
        Constraint(
            "shared_memory",
            lambda c: usage(c).shared_memory_bytes <= limits.shared_memory_per_block,
            f"(num_stages - 1) x bytes loaded per innermost iteration + {SCRATCH_SHARED_MEMORY_BYTES} scratch "
            f"<= {limits.shared_memory_per_block}",
        ),
        Constraint(
            "programs_fit_on_an_sm",
            lambda c: not c["PERSISTENT"] or _programs_fit_on_an_sm(c, usage(c), limits),
            f"a persistent grid's PROGRAMS_PER_SM fit on one SM together: warps <= {limits.warps_per_sm}, shared "
            f"memory <= {limits.shared_memory_per_sm}, estimated registers <= {limits.registers_per_sm}",
        ),
        # The remaining constraints keep one config per distinct behaviour: a parameter with no effect is fixed.
        Constraint(
            "grid_size_only_when_persistent",
            lambda c: c["PERSISTENT"] or c["PROGRAMS_PER_SM"] == 1,
            "PROGRAMS_PER_SM sizes a persistent grid only; otherwise it is 1",
        ),
        Constraint(
            "unroll_only_when_streaming",
            lambda c: not c["ROW_IN_REGISTERS"] or c["LOOP_UNROLL"] == 1,
            "LOOP_UNROLL unrolls the streamed loops; with ROW_IN_REGISTERS it is 1",
        ),
        Constraint(
            "stages_need_a_row_loop",
            lambda c: not c["ROW_IN_REGISTERS"] or c["PERSISTENT"] or c["num_stages"] == 1,
            "with the whole row in registers only a persistent program loops (over rows) for num_stages to pipeline",
        ),
    ]
    return Space(parameters, constraints, name=name)


# ---------------------------------------------------------------------------------------------
# Shapes, dtypes and the launch grid
# ---------------------------------------------------------------------------------------------

def check_shape(shape: tuple[int, ...], kernel: str) -> tuple[int, int]:
    """Validate a (rows, cols) shape and return it as plain ints."""
    if not isinstance(shape, (tuple, list)) or len(shape) != 2:
        raise ValueError(f"{kernel} shape must be (rows, cols), got {shape!r}")
    for name, value in zip(SHAPE_NAMES, shape):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{kernel} shape {name}={value!r} must be a positive int")
    return int(shape[0]), int(shape[1])


def torch_dtype(dtype: str) -> torch.dtype:
    """The torch dtype named `dtype`: one of DTYPES, or float32 for logic checks under the interpreter."""
    if dtype not in ELEMENT_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; allowed: {', '.join(DTYPES)} (and float32 for tests)")
    return getattr(torch, dtype)


@functools.cache
def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of `device`; INTERPRETER_SM_COUNT for a CPU tensor (the Triton interpreter)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return INTERPRETER_SM_COUNT


def grid(config: Mapping[str, Any], rows: int, device: torch.device) -> tuple[int]:
    """One program per block of ROWS_PER_PROGRAM rows, or a persistent grid of PROGRAMS_PER_SM per SM (never
    more programs than row blocks)."""
    row_blocks = triton.cdiv(rows, config["ROWS_PER_PROGRAM"])
    if not config["PERSISTENT"]:
        return (row_blocks,)
    return (min(row_blocks, config["PROGRAMS_PER_SM"] * sm_count(device)),)


def compile_arguments(config: Mapping[str, Any], cols: int, *row_strides: int) -> dict[str, Any]:
    """The config's compile-time arguments for rows of `cols` columns at these row strides (in elements): its
    constexprs and launch options, without the grid's, and ALIGN.

    num_stages goes to the kernel's loops as NUM_STAGES (tl.range(num_stages=...)) as well as to the launch:
    Triton software-pipelines loads that feed no tl.dot only in loops that ask for it themselves. ALIGN is the
    largest of 8, 4 and 2 that divides cols and every row stride, 1 where none does or where all are multiples of 16
    (`kernels.alignment`): the kernel rewrites those values as multiples of ALIGN, so that the compiler can prove
    rows of 5000 bf16 elements 16-byte aligned and load them as vectors."""
    return {
        "BLOCK_SIZE": config["BLOCK_SIZE"], "ROWS_PER_PROGRAM": config["ROWS_PER_PROGRAM"],
        "ROW_IN_REGISTERS": config["ROW_IN_REGISTERS"], "LOOP_UNROLL": config["LOOP_UNROLL"],
        "EVICTION_POLICY": config["EVICTION_POLICY"], "NUM_STAGES": config["num_stages"],
        "ALIGN": alignment(cols, *row_strides),
        "num_warps": config["num_warps"], "num_stages": config["num_stages"],
    }


def specialization(shape: tuple[int, ...], kernel: str) -> tuple[int | bool, ...]:
    """The part of a shape that selects a distinct compiled binary. Triton specializes integer arguments on == 1
    and on divisibility by 16; the kernels pass cols and the two row strides (equal to cols for contiguous
    tensors) and their ALIGN, and leave rows unspecialized so that every row count shares one binary."""
    _, cols = check_shape(shape, kernel)
    return (*(flag for value in (cols, cols, cols) for flag in (value == 1, value % 16 == 0)), alignment(cols))
