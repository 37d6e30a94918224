"""Tunable Hopper GEMM with tensor-memory-accelerator (TMA) loads and stores, C = A @ B as in `matmul`.

Its space adds what `matmul` lacks at large shapes: persistent programs, warp specialization, a split epilogue, and
tiles widened by half (WIDEN; see `tile_columns`) or lengthened by half (TALL; see `tile_rows`); and, as `matmul` has,
split-K for shapes with few output tiles (SPLIT_K; see `splits_k`).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, Sequence

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from tunebench.kernels import matmul
from tunebench.kernels.split_k import add_split, check_split_buffers
from tunebench.kernels.rowwise import sm_count
from tunebench.space import Constraint, Flag, IntRange, Ordinal, PowerOfTwo, Space

NAME = "matmul_tma"
SHAPE_NAMES = matmul.SHAPE_NAMES
DTYPES = matmul.DTYPES
VENDOR_LIBRARY = matmul.VENDOR_LIBRARY
TOLERANCE = matmul.TOLERANCE
LAUNCH_PARAMETERS = ("PROGRAMS_PER_SM",)  # sizes the grid only (see `programs`)
SOURCE_MODULES = ("tunebench.kernels.split_k",)  # other modules its binaries are built from (see kernel_source_files)
# wgmma reads both operands from shared memory, so a thread's registers can hold more accumulator than `matmul`'s
# (limits.accumulator_registers_per_thread, 128). A widened 128 x 192 tile on 4 warps holds 192 and ran at 0.98x cuBLAS
# on an H200 (docs/tma_gemm.md); every other tile's count is a power of two, so the higher limit adds widened and tall
# tiles alone.
ACCUMULATOR_REGISTERS_PER_THREAD = 192
# Parameters added to the space after configs were recorded without them, and what such a config meant: every dataset
# and plan before WIDEN's is of unwidened tiles, every one before TALL's of tiles of BLOCK_M rows, and every one before
# SPLIT_K's (stop 90) of whole K.
ADDED_PARAMETERS = {"WIDEN": False, "TALL": False, "SPLIT_K": 1}
# Compute-bound shapes, where cuBLAS is hardest to match: squares of 2048 to 8192 (4096^3 is the shape Helion's
# LFBO search was measured on), and Llama-3-8B's MLP up and down projections (N or K = 14336) for 4096 tokens.
DATASET_SHAPES = (
    (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
    (4096, 14336, 4096), (4096, 4096, 14336), (8192, 4096, 4096),
)
SHAPE_SETS = {"default": DATASET_SHAPES}
# A TMA descriptor's strides must be multiples of 16 bytes: 8 elements of a 2-byte dtype.
TMA_ALIGNMENT = 8


@triton.jit
def _store_in_slices(c_desc, block, offset_m, offset_n, ROWS: tl.constexpr, COLUMNS: tl.constexpr,
                     SLICES: tl.constexpr):
    """Store a ROWS x COLUMNS block of C at (offset_m, offset_n) whole, or (SLICES=2) in two column halves."""
    if SLICES == 1:
        c_desc.store([offset_m, offset_n], block.to(c_desc.dtype))
    else:
        left, right = tl.split(tl.permute(tl.reshape(block, (ROWS, 2, COLUMNS // 2)), (0, 2, 1)))
        c_desc.store([offset_m, offset_n], left.to(c_desc.dtype))
        c_desc.store([offset_m, offset_n + COLUMNS // 2], right.to(c_desc.dtype))


# The TMA descriptors of A, B and C are made on the host and passed by value: made on the device instead (by
# `tl.make_tensor_descriptor`, in every program) they cost 2 % at 4096^3 and 9 % at 2048^3 on an H200
# (docs/tma_gemm.md).
# Every program walks output tiles start, start + programs, ... (one tile each when a program per tile is launched,
# several when PROGRAMS_PER_SM caps the grid: a persistent kernel). With WARP_SPECIALIZE the compiler splits the
# walk into producer warps that issue the TMA loads and consumer warps that run the tensor-core dots; FLATTEN lets it
# pipeline loads across tile boundaries. EPILOGUE_SPLIT stores the tile in that many column slices, so the output
# staging buffer in shared memory shrinks by the same factor. WIDEN adds a second column block of BLOCK_N / 2 beside
# the first, with a dot of its own on the same A tile: a tile of 1.5 x BLOCK_N columns, which Triton's power-of-two
# blocks cannot express in one (M x N = 768 x 4096 makes 6 x 22 = 132 tiles of 128 x 192, one per H200 SM, where
# 128 x 256 makes 96 and 128 x 128 makes 192). A widened tile is stored in three slices of BLOCK_N / 2. TALL adds a
# second row block of BLOCK_M / 2 below the first instead, with a dot of its own on the same B tile: 192 x 128 is the
# tile cuBLAS runs at 768 x 4096 x 14336 (4 x 32 = 128 tiles), where it ran at 1.01x cuBLAS on an H200
# (docs/tma_gemm.md). Its extra rows are stored in the same column slices as the first block's. With SPLIT_K > 1 a
# program takes one of a tile's SPLIT_K runs of K steps and adds its partial sum into the fp32 workspace (M x N) with
# atomics, and the tile's last split stores C (`split_k.add_split`); TMA stores and the options that shape them do not
# apply.
@triton.jit(do_not_specialize=["M"])
def matmul_tma_kernel(
    a_desc, a_extra_desc, b_desc, b_extra_desc, c_desc, c_extra_desc, c, workspace, tile_counts,
    M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EPILOGUE_SPLIT: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, FLATTEN: tl.constexpr, WIDEN: tl.constexpr,
    TALL: tl.constexpr, SPLIT_K: tl.constexpr,
):
    EXTRA_N: tl.constexpr = BLOCK_N // 2 if WIDEN else 0
    EXTRA_M: tl.constexpr = BLOCK_M // 2 if TALL else 0
    tiles_m = tl.cdiv(M, BLOCK_M + EXTRA_M)
    tiles_n = tl.cdiv(N, BLOCK_N + EXTRA_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    tiles_in_group = GROUP_M * tiles_n  # grouped order: GROUP_M tile rows share B's column tiles while in L2
    for item in tl.range(tl.program_id(0), tiles_m * tiles_n * SPLIT_K, tl.num_programs(0),
                         flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        tile = item // SPLIT_K
        first_m = tile // tiles_in_group * GROUP_M
        rows = min(tiles_m - first_m, GROUP_M)
        offset_m = (first_m + tile % tiles_in_group % rows) * (BLOCK_M + EXTRA_M)
        offset_n = tile % tiles_in_group // rows * (BLOCK_N + EXTRA_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        if WIDEN:
            extra = tl.zeros((BLOCK_M, EXTRA_N), dtype=tl.float32)
            for k in range(k_steps):  # the descriptors zero-fill reads past K, M or N, and clip the stores
                a = a_desc.load([offset_m, k * BLOCK_K])
                acc = tl.dot(a, b_desc.load([k * BLOCK_K, offset_n]), acc)
                extra = tl.dot(a, b_extra_desc.load([k * BLOCK_K, offset_n + BLOCK_N]), extra)
            c_desc.store([offset_m, offset_n + BLOCK_N], extra.to(c_desc.dtype))
        elif TALL:
            extra = tl.zeros((EXTRA_M, BLOCK_N), dtype=tl.float32)
            for k in range(k_steps):
                b = b_desc.load([k * BLOCK_K, offset_n])
                acc = tl.dot(a_desc.load([offset_m, k * BLOCK_K]), b, acc)
                extra = tl.dot(a_extra_desc.load([offset_m + BLOCK_M, k * BLOCK_K]), b, extra)
            _store_in_slices(c_extra_desc, extra, offset_m + BLOCK_M, offset_n, EXTRA_M, BLOCK_N, EPILOGUE_SPLIT)
        elif SPLIT_K > 1:
            steps = tl.cdiv(k_steps, SPLIT_K)
            first_step = item % SPLIT_K * steps
            for k in range(first_step, min(first_step + steps, k_steps)):
                acc = tl.dot(a_desc.load([offset_m, k * BLOCK_K]), b_desc.load([k * BLOCK_K, offset_n]), acc)
            out_rows = offset_m + tl.arange(0, BLOCK_M)[:, None]
            out_columns = offset_n + tl.arange(0, BLOCK_N)[None, :]
            add_split(acc, workspace + out_rows * N + out_columns, c + out_rows * N + out_columns,
                      (out_rows < M) & (out_columns < N), tile_counts + tile, SPLIT_K)
        else:
            for k in range(k_steps):
                acc = tl.dot(a_desc.load([offset_m, k * BLOCK_K]), b_desc.load([k * BLOCK_K, offset_n]), acc)
        if SPLIT_K == 1:
            _store_in_slices(c_desc, acc, offset_m, offset_n, BLOCK_M, BLOCK_N, EPILOGUE_SPLIT)


# ---------------------------------------------------------------------------------------------
# Config space and the resource model that prunes it
# ---------------------------------------------------------------------------------------------

def widened(config: Mapping[str, Any]) -> bool:
    """Whether `config` widens its tiles; a config recorded before WIDEN joined the space lacks it and means
    `ADDED_PARAMETERS`'s value."""
    return bool(config.get("WIDEN", ADDED_PARAMETERS["WIDEN"]))


def stores_widened_tile(config: Mapping[str, Any]) -> bool:
    """Whether `config` can store its tile: a widened one only in slices of BLOCK_N / 2 (EPILOGUE_SPLIT=2)."""
    return not widened(config) or config["EPILOGUE_SPLIT"] == 2


def tile_columns(config: Mapping[str, Any]) -> int:
    """Output columns per tile: BLOCK_N, or 1.5 x BLOCK_N for a widened config. A widened config needs
    EPILOGUE_SPLIT=2, which `check_widened` enforces."""
    return config["BLOCK_N"] * 3 // 2 if widened(config) else config["BLOCK_N"]


def tall(config: Mapping[str, Any]) -> bool:
    """Whether `config` lengthens its tiles by half along M; a config recorded before TALL joined the space lacks it
    and means `ADDED_PARAMETERS`'s value."""
    return bool(config.get("TALL", ADDED_PARAMETERS["TALL"]))


def splits_k(config: Mapping[str, Any]) -> int:
    """How many runs of K steps each output tile's sum is split into (1: none); a config recorded before SPLIT_K
    joined the space lacks it and means `ADDED_PARAMETERS`'s value."""
    return int(config.get("SPLIT_K", ADDED_PARAMETERS["SPLIT_K"]))


def tile_rows(config: Mapping[str, Any]) -> int:
    """Output rows per tile: BLOCK_M, or 1.5 x BLOCK_M for a tall config."""
    return config["BLOCK_M"] * 3 // 2 if tall(config) else config["BLOCK_M"]


def check_widened(config: Mapping[str, Any]) -> None:
    """Raise a ValueError unless a config with WIDEN set stores its tile in slices of BLOCK_N / 2 (EPILOGUE_SPLIT=2)
    and is not also TALL (a tile lengthened both ways is not built)."""
    if not stores_widened_tile(config):
        raise ValueError(f"WIDEN needs EPILOGUE_SPLIT=2 (a widened tile is stored in three slices of BLOCK_N / 2), "
                         f"got EPILOGUE_SPLIT={config['EPILOGUE_SPLIT']!r}")
    if widened(config) and tall(config):
        raise ValueError("WIDEN and TALL exclude each other (a tile lengthened both ways is not built)")


def shared_memory_bytes(config: Mapping[str, Any], element_bytes: int = 2) -> int:
    """The load pipeline's stages plus the output slices staged for the TMA stores (a tall tile's extra rows get a
    buffer of their own). A split of K stages nothing for stores, but its atomics' layout conversion takes scratch of
    up to that size (16 KiB for a 128 x 128 tile on 8 warps, none on 4), so the model keeps it as a bound."""
    stage = (tile_rows(config) * config["BLOCK_K"] + config["BLOCK_K"] * tile_columns(config)) * element_bytes
    epilogue = tile_rows(config) * config["BLOCK_N"] // config["EPILOGUE_SPLIT"] * element_bytes
    return config["num_stages"] * stage + epilogue


def accumulator_elements_per_thread(config: Mapping[str, Any]) -> float:
    """fp32 accumulator elements each thread holds in registers."""
    return tile_rows(config) * tile_columns(config) / (32 * config["num_warps"])


def config_space(limits: matmul.DeviceLimits = matmul.HOPPER) -> Space:
    """The TMA GEMM's config space, pruned by the resource model for `limits` (2-byte inputs)."""
    parameters = [
        PowerOfTwo("BLOCK_M", 64, 256),  # a Hopper warp group's tensor-core instruction covers 64 rows
        PowerOfTwo("BLOCK_N", 64, 256),
        PowerOfTwo("BLOCK_K", 32, 128),
        Ordinal("GROUP_M", (1, 8)),
        Ordinal("PROGRAMS_PER_SM", (0, 1, 2)),  # 0: a program per output tile; else persistent programs
        Flag("WARP_SPECIALIZE"),
        Flag("FLATTEN"),
        Ordinal("EPILOGUE_SPLIT", (1, 2)),
        Flag("WIDEN"),
        Flag("TALL"),
        PowerOfTwo("SPLIT_K", 1, 8),
        PowerOfTwo("num_warps", 4, 8),
        IntRange("num_stages", 2, 5),
    ]
    constraints = [
        Constraint(
            "split_k_plain",
            lambda c: splits_k(c) == 1 or (c["PROGRAMS_PER_SM"] == 0 and c["EPILOGUE_SPLIT"] == 1 and not (
                c["WARP_SPECIALIZE"] or widened(c) or tall(c))),
            "SPLIT_K > 1 only with a program per tile and split, EPILOGUE_SPLIT=1, and neither WARP_SPECIALIZE, "
            "WIDEN nor TALL (a split adds into a workspace by atomics, not by the TMA stores these shape; it is for "
            "shapes with few tiles, where persistent programs have nothing to walk)",
        ),
        Constraint(
            "shared_memory",
            lambda c: shared_memory_bytes(c) <= limits.shared_memory_bytes,
            f"num_stages x (rows*BLOCK_K + BLOCK_K*columns) x 2 + rows*BLOCK_N / EPILOGUE_SPLIT x 2 bytes "
            f"<= {limits.shared_memory_bytes}",
        ),
        Constraint(
            "accumulator_registers",
            lambda c: accumulator_elements_per_thread(c) <= ACCUMULATOR_REGISTERS_PER_THREAD,
            f"BLOCK_M*columns / (32*num_warps) <= {ACCUMULATOR_REGISTERS_PER_THREAD} fp32 registers "
            "(columns: BLOCK_N, 1.5 x BLOCK_N with WIDEN)",
        ),
        Constraint(
            "flatten_needs_persistence",
            lambda c: c["PROGRAMS_PER_SM"] > 0 or not c["FLATTEN"],
            "FLATTEN only with PROGRAMS_PER_SM > 0 (a program per tile has no tile loop to flatten)",
        ),
        Constraint(
            "widen_needs_split_epilogue",
            stores_widened_tile,
            "WIDEN only with EPILOGUE_SPLIT=2 (a widened tile is stored in three slices of BLOCK_N / 2)",
        ),
        Constraint(
            "tall_needs_split_epilogue",
            lambda c: not tall(c) or c["EPILOGUE_SPLIT"] == 2,
            "TALL only with EPILOGUE_SPLIT=2 (a space choice, not the kernel's: no recorded sweep's fastest config "
            "stores its tile whole, and the split halves the larger staging buffer of a tall tile)",
        ),
        Constraint(
            "widen_or_tall",
            lambda c: not (widened(c) and tall(c)),
            "WIDEN and TALL exclude each other (a tile lengthened both ways is not built)",
        ),
    ]
    return Space(parameters, constraints, name=NAME)


# ---------------------------------------------------------------------------------------------
# Inputs, reference and wrappers
# ---------------------------------------------------------------------------------------------

def check_shape(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """Validate an (M, N, K) shape whose row strides a TMA descriptor can take, and return it as plain ints."""
    m, n, k = matmul.check_shape(shape)
    for name, value in (("N", n), ("K", k)):
        if value % TMA_ALIGNMENT:
            raise ValueError(f"matmul_tma shape {name}={value} must be a multiple of {TMA_ALIGNMENT} (TMA strides "
                             "are multiples of 16 bytes); the `matmul` kernel takes any size")
    return m, n, k


def make_inputs(shape: tuple[int, ...], dtype: str, device: str | torch.device = "cuda",
                seed: int = 0) -> matmul.MatmulInputs:
    """`matmul.make_inputs` for a shape this kernel takes, with the workspace and counters that SPLIT_K > 1 uses."""
    return matmul.make_inputs(check_shape(shape), dtype, device, seed)


reference = matmul.reference
relative_error = matmul.relative_error
run_vendor = matmul.run_vendor
flops = matmul.flops
bytes_moved = matmul.bytes_moved


def output_tiles(config: Mapping[str, Any], shape: Sequence[int]) -> int:
    """How many output tiles of `config` cover the M x N result of `shape`."""
    m, n = shape[0], shape[1]
    return triton.cdiv(m, tile_rows(config)) * triton.cdiv(n, tile_columns(config))


def programs(config: Mapping[str, Any], shape: tuple[int, int, int], sms: int) -> int:
    """The grid: a program per output tile and split of K, or PROGRAMS_PER_SM per multiprocessor when that is fewer."""
    items = output_tiles(config, shape) * splits_k(config)
    return items if config["PROGRAMS_PER_SM"] == 0 else min(items, config["PROGRAMS_PER_SM"] * sms)


def _launch_arguments(config: Mapping[str, Any]) -> dict[str, Any]:
    check_widened(config)
    return {
        "BLOCK_M": config["BLOCK_M"], "BLOCK_N": config["BLOCK_N"], "BLOCK_K": config["BLOCK_K"],
        "GROUP_M": config["GROUP_M"], "EPILOGUE_SPLIT": config["EPILOGUE_SPLIT"],
        "WARP_SPECIALIZE": config["WARP_SPECIALIZE"], "FLATTEN": config["FLATTEN"],
        "WIDEN": widened(config), "TALL": tall(config), "SPLIT_K": splits_k(config),
        "num_warps": config["num_warps"], "num_stages": config["num_stages"],
    }


def _descriptors(config: Mapping[str, Any], a: Any, b: Any, c: Any, shape: tuple[int, int, int]) -> tuple:
    """TMA descriptors of row-major A (M x K) twice (over BLOCK_M rows, and over the BLOCK_M / 2 that TALL adds),
    B (K x N) twice (over BLOCK_N columns, and over the BLOCK_N / 2 that WIDEN adds) and C (M x N) twice (over
    BLOCK_M rows, and over TALL's extra rows), each over the block one load or store moves; a second descriptor that
    its option does not use is the first again. The bases are the tensors to launch on, or (to compile) any tensors
    of their dtypes."""
    m, n, k = shape
    block_m, block_n, block_k = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    store_columns = block_n // config["EPILOGUE_SPLIT"]
    a_desc = TensorDescriptor(a, [m, k], [k, 1], [block_m, block_k])
    b_desc = TensorDescriptor(b, [k, n], [n, 1], [block_k, block_n])
    c_desc = TensorDescriptor(c, [m, n], [n, 1], [block_m, store_columns])
    b_extra_desc = TensorDescriptor(b, [k, n], [n, 1], [block_k, block_n // 2]) if widened(config) else b_desc
    a_extra_desc, c_extra_desc = (
        (TensorDescriptor(a, [m, k], [k, 1], [block_m // 2, block_k]),
         TensorDescriptor(c, [m, n], [n, 1], [block_m // 2, store_columns])) if tall(config) else (a_desc, c_desc))
    return a_desc, a_extra_desc, b_desc, b_extra_desc, c_desc, c_extra_desc


def kernel_arguments(config: Mapping[str, Any], a: Any, b: Any, c: Any, workspace: Any, tile_counts: Any,
                     shape: tuple[int, int, int]) -> tuple:
    """The kernel's positional arguments: the descriptors (`_descriptors`); C, the fp32 workspace and the tile
    counters, which a split of K uses (`split_k.add_split`); and M, N, K."""
    return (*_descriptors(config, a, b, c, shape), c, workspace, tile_counts, *shape)


def _bound_launch(config: Mapping[str, Any], inputs: matmul.MatmulInputs) -> Callable[[], Any]:
    """A launch of `config` on these tensors with its descriptors, grid and binary made once. On a GPU it calls the
    compiled kernel straight, past the argument binding and cache lookup that Triton's launch repeats per call; on a
    CPU it is the interpreter's launch with the same arguments."""
    a, b, out = inputs.a, inputs.b, inputs.out
    if not (a.is_contiguous() and b.is_contiguous() and out.is_contiguous()):
        raise ValueError("matmul_tma takes contiguous row-major A, B and C")
    m, k = a.shape
    n = b.shape[1]
    if splits_k(config) > 1:
        check_split_buffers(inputs.workspace, inputs.tile_counts, m, n, splits_k(config))
    options = _launch_arguments(config)
    arguments = kernel_arguments(config, a, b, out, inputs.workspace, inputs.tile_counts, (m, n, k))
    grid = (programs(config, (m, n, k), sm_count(a.device)), 1, 1)
    if a.device.type != "cuda":
        return functools.partial(matmul_tma_kernel[grid], *arguments, **options)
    compiled = matmul_tma_kernel.warmup(*arguments, grid=grid, **options)
    values = dict(zip(matmul_tma_kernel.arg_names, arguments), **options)
    return functools.partial(compiled[grid], *(values[name] for name in matmul_tma_kernel.arg_names))


def run(config: Mapping[str, Any], inputs: matmul.MatmulInputs) -> torch.Tensor:
    """Compute inputs.a @ inputs.b into inputs.out with one config, in one launch (split-K's too: `split_k`). The
    launch is built on the config's first run on these tensors and kept (`matmul.bound_launch`)."""
    matmul.bound_launch(inputs, config, lambda: _bound_launch(config, inputs))()
    return inputs.out


def compile_only(config: Mapping[str, Any], shape: tuple[int, ...], dtype: str) -> Any:
    """Compile the config for the shape's specialization without launching it (fills Triton's cache)."""
    m, n, k = check_shape(shape)
    placeholder = torch.empty(8, dtype=matmul.torch_dtype(dtype))  # a descriptor's base: only its dtype compiles in
    workspace, tile_counts = torch.empty(8, dtype=torch.float32), torch.empty(8, dtype=torch.int32)
    arguments = kernel_arguments(config, placeholder, placeholder, placeholder, workspace, tile_counts, (m, n, k))
    return matmul_tma_kernel.warmup(*arguments, grid=(1,), **_launch_arguments(config))


def specialization(shape: tuple[int, ...]) -> tuple[bool, bool]:
    """The part of a shape that selects a distinct compiled binary: Triton specializes N and K on divisibility by 16
    (M is exempt, see the kernel; neither can be 1, Triton's other specialization, since both are multiples of 8)."""
    _, n, k = check_shape(shape)
    return n % 16 == 0, k % 16 == 0
