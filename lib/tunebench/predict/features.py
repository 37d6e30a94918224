"""Features of (GEMM shape, config) pairs for predicting a config's speed on a shape no one has measured.

One code path: `features` computes a batch in a row loop that numba compiles (`_fill`); `feature_row` calls it with
one row; the dispatcher's `CandidateFeatures.rows` shares its arithmetic (`_fill`) and numpy's log2 of the same
columns, with the candidates' lookups done once.
Shared memory, registers and PTX instruction counts are the compiler's (`CompiledResources`, per config and
alignment class).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numba
import numpy as np

from tunebench.kernels import matmul
from tunebench.kernels.occupancy import HOPPER
from tunebench.predict.compiled import CLASSES, DIVISOR, CompiledResources, divisibility
from tunebench.space import ConfigError, Parameter, Space

ELEMENT_BYTES = {"bfloat16": 2, "float16": 2}  # the dtypes the GEMM's config space is pruned for
VECTOR_BYTES = 16  # widest global load or store per thread; an operand whose row stride the compiler knows to be
# divisible by d elements (`compiled.divisibility`) is accessed d at a time, up to this
# (`tests/test_matmul_vectorization.py` checks it in the PTX)


@dataclass(frozen=True)
class Hardware:
    """What the interaction features need to know of the GPU. Defaults: H100 SXM, its SM count and the per-SM limits
    of compute capability 9.0 (`kernels.occupancy.HOPPER`: 228 KiB shared memory, 1 KiB of it reserved per resident
    program, 64 resident warps and 64 Ki registers per SM, allocated per warp in units of 256)."""

    sm_count: int = 132
    shared_memory_per_sm: int = HOPPER.shared_memory_per_sm
    reserved_shared_memory_per_program: int = HOPPER.reserved_shared_memory_per_block
    warps_per_sm: int = HOPPER.warps_per_sm
    registers_per_sm: int = HOPPER.registers_per_sm
    register_allocation_unit: int = HOPPER.register_allocation_unit

    @classmethod
    def from_provenance(cls, provenance: Mapping[str, Any]) -> Hardware:
        """The SM count a dataset was measured with (its provenance's `sm_count`); the per-SM limits of the H100."""
        sm_count = provenance.get("sm_count")
        if not isinstance(sm_count, int) or isinstance(sm_count, bool) or sm_count < 1:
            raise ValueError(f"dataset provenance has no usable sm_count (got {sm_count!r}); the waves and occupancy "
                             "features need the GPU's SM count")
        return cls(sm_count=sm_count)


PROBLEM_FEATURES = (
    "M", "N", "K", "log2_M", "log2_N", "log2_K", "arithmetic_intensity", "log2_M_over_N", "log2_M_over_K",
    "log2_N_over_K", "log2_N_divisibility", "log2_K_divisibility",
)
INTERACTION_FEATURES = (
    "tiles_m", "tiles_n", "programs", "log2_programs", "fill_last_tile_m", "fill_last_tile_n", "waves",
    "last_wave_fraction", "k_iterations", "shared_memory_per_program", "registers_per_thread", "programs_per_sm",
    "occupancy_waves",
    "padding_waste", "tile_intensity", "split_k_traffic_ratio",
    "a_loads_per_thread", "b_loads_per_thread", "loads_per_thread_per_iteration", "log2_loads_per_program",
    "log2_load_instructions_per_sm", "log2_mma_per_sm", "log2_mma_per_sm_whole_waves",
    # the compiled kernel's static PTX instruction counts per thread (`compiled.INSTRUCTIONS`), for its alignment class
    "compiled_cp_async", "compiled_scalar_global_loads", "compiled_wgmma", "compiled_mma_sync",
)


def feature_names(space: Space) -> list[str]:
    """The schema: problem features, the space's encoding of the config, interaction features, in that order."""
    return [*PROBLEM_FEATURES, *space.feature_names, *INTERACTION_FEATURES]


def check_dtype(dtype: str) -> int:
    """Bytes per element of a supported dtype; a clear error otherwise."""
    if dtype not in ELEMENT_BYTES:
        raise ValueError(f"unsupported dtype {dtype!r}; the GEMM predictor supports {', '.join(ELEMENT_BYTES)}")
    return ELEMENT_BYTES[dtype]


def check_shapes(shapes: np.ndarray) -> np.ndarray:
    """Shapes as an (n, 3) int64 array of positive (M, N, K); a clear error names the first bad one."""
    array = np.asarray(shapes)
    if array.ndim != 2 or array.shape[1] != len(matmul.SHAPE_NAMES):
        raise ValueError(f"shapes must be an (n, 3) array of (M, N, K), got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"shape dimensions must be integers, got dtype {array.dtype}")
    bad = np.flatnonzero((array < 1).any(axis=1))
    if bad.size:
        row = tuple(int(value) for value in array[bad[0]])
        raise ValueError(f"GEMM shape (M, N, K)={row} has a dimension < 1; every dimension must be a positive int")
    return array.astype(np.int64, copy=False)


def config_columns(space: Space, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Configs as an (n, parameters) int64 array of their values, in the space's parameter order; each config's
    names and values are checked against the space (not its constraints)."""
    return np.array([space.key(config) for config in configs], dtype=np.int64).reshape(len(configs), len(space.names))


@functools.lru_cache(maxsize=256)
def _encoding(parameter: Parameter) -> tuple[np.ndarray, np.ndarray]:
    """A parameter's allowed values, sorted, and `parameter.encode` of each, in that order (computed once per
    parameter: the dispatcher encodes a few configs per call)."""
    allowed = np.array(parameter.values)
    order = np.argsort(allowed)
    table = np.array([parameter.encode(value) for value in parameter.values], dtype=np.float64)
    return allowed[order], table[order]


def encode_columns(space: Space, values: np.ndarray) -> np.ndarray:
    """`Space.encode`, vectorized over rows of parameter values (a lookup per parameter of its few values)."""
    blocks = []
    for position, parameter in enumerate(space.parameters):
        column = values[:, position]
        allowed, table = _encoding(parameter)
        index = np.minimum(np.searchsorted(allowed, column), len(allowed) - 1)
        outside = allowed[index] != column
        if outside.any():
            raise ConfigError(parameter._not_allowed(int(column[np.flatnonzero(outside)[0]])))
        blocks.append(table[index])
    return np.hstack(blocks) if blocks else np.empty((len(values), 0))


def _checked(space: Space, dtype: str, resources: CompiledResources) -> int:
    """Bytes per element of `dtype`, after checking that the compiled-resource table is of the space's parameters."""
    element_bytes = check_dtype(dtype)
    if tuple(space.names) != resources.parameter_names:
        raise ValueError(f"the compiled-resource table's parameters {list(resources.parameter_names)} are not the "
                         f"space's {list(space.names)}")
    return element_bytes


def features(shapes: np.ndarray, config_values: np.ndarray, space: Space, dtype: str,
             resources: CompiledResources, hardware: Hardware = Hardware()) -> np.ndarray:
    """The (n, len(feature_names(space))) float64 feature matrix of n (shape, config) rows.

    `shapes` is (n, 3) or (1, 3) (one shape against n configs); `config_values` is (n, parameters) from
    `config_columns`, or (1, parameters) against n shapes. `resources` holds what the compiler makes of each config
    in each alignment class of N and K (their divisibility as the compiler knows it).
    """
    element_bytes = _checked(space, dtype, resources)
    shapes = check_shapes(shapes)
    values = np.asarray(config_values, dtype=np.int64)
    if values.ndim != 2 or values.shape[1] != len(space.names):
        raise ValueError(f"config values must be (n, {len(space.names)}) in the order {list(space.names)}, "
                         f"got shape {values.shape}")
    rows = max(len(shapes), len(values))
    if len(shapes) not in (1, rows) or len(values) not in (1, rows):
        raise ValueError(f"{len(shapes)} shapes and {len(values)} configs: give as many of each, or one of either")
    n_divisibility, k_divisibility = divisibility(shapes[:, 1]), divisibility(shapes[:, 2])
    compiled = resources.lookup(np.broadcast_to(values, (rows, values.shape[1])),
                                np.broadcast_to(n_divisibility, (rows,)), np.broadcast_to(k_divisibility, (rows,)))
    return _assemble(shapes, values, encode_columns(space, values), compiled, element_bytes, hardware, space)


class CandidateFeatures:
    """What the features read of each of a fixed set of candidate configs alone, computed once: the space's encoding,
    the tile parameters and the compiler's facts in every alignment class the table holds for all of them.
    `rows(shape, indices)` is `features` of one shape against those candidates, one compiled call with the lookups
    done (the dispatcher's path; tests check they agree)."""

    def __init__(self, config_values: np.ndarray, space: Space, dtype: str, resources: CompiledResources,
                 hardware: Hardware = Hardware()) -> None:
        self.element_bytes = _checked(space, dtype, resources)
        self.values = np.asarray(config_values, dtype=np.int64)
        self.space, self.resources, self.hardware = space, resources, hardware
        self.encoded = encode_columns(space, self.values)
        self.tile = _tile_columns(self.values, space)
        self.limits = _limits(hardware)
        self.logarithms = _log2_columns(space)
        self.facts: dict[tuple[int, int], np.ndarray] = {}  # per class: (candidates, len(COMPILED_FACTS))
        for n_class, k_class in CLASSES:
            try:
                self.facts[n_class, k_class] = _fact_columns(
                    resources.lookup(self.values, np.full(len(self.values), n_class),
                                     np.full(len(self.values), k_class)))
            except KeyError:  # a class the table lacks for some candidate: `rows` looks it up per call, and says so
                continue

    def rows(self, shape: Sequence[int], indices: np.ndarray) -> np.ndarray:
        """The feature rows of `shape` against the candidates at `indices`, in their order."""
        shapes = np.array([shape], dtype=np.int64)
        if shapes.shape != (1, len(matmul.SHAPE_NAMES)) or min(shapes[0].tolist()) < 1:
            check_shapes(shapes)  # raises, naming what is wrong
        _, n, k = shapes[0].tolist()
        n_divisibility, k_divisibility = math.gcd(n, DIVISOR), math.gcd(k, DIVISOR)  # `divisibility`
        facts = self.facts.get((n_divisibility, k_divisibility))
        if facts is None:
            return self._looked_up_rows(shapes, indices)
        matrix, arguments = _candidate_matrix(shapes, n_divisibility, k_divisibility, indices, self.encoded,
                                              self.tile, facts, float(self.element_bytes), self.limits,
                                              self.logarithms)
        _put_columns(matrix, self.logarithms, np.log2(arguments))  # `_assemble`'s log2, of the same contiguous block
        return matrix

    def _looked_up_rows(self, shapes: np.ndarray, indices: np.ndarray) -> np.ndarray:
        """`rows` in a class the table lacks for some candidate: a KeyError if it lacks it for one of these."""
        values = self.values[indices]
        n_divisibility, k_divisibility = divisibility(shapes[0, 1:])
        compiled = self.resources.lookup(values, np.full(len(values), n_divisibility),
                                         np.full(len(values), k_divisibility))
        return _assemble(shapes, values, self.encoded[indices], compiled, self.element_bytes, self.hardware,
                         self.space)


TILE_PARAMETERS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "num_warps")  # the config values the arithmetic reads
COMPILED_FACTS = ("shared_memory_bytes", "registers", "cp_async", "scalar_global_loads", "wgmma", "mma_sync")
# Columns `_fill` writes the argument of, and `_assemble` takes the log2 of
LOG2_PROBLEM_COLUMNS = tuple(PROBLEM_FEATURES.index(name) for name in PROBLEM_FEATURES if name.startswith("log2_"))
LOG2_INTERACTION_COLUMNS = tuple(INTERACTION_FEATURES.index(name) for name in INTERACTION_FEATURES
                                 if name.startswith("log2_"))


def _tile_columns(values: np.ndarray, space: Space) -> np.ndarray:
    """The TILE_PARAMETERS columns of config values, the arithmetic's view of a config."""
    return values[:, [space.names.index(name) for name in TILE_PARAMETERS]]


def _fact_columns(compiled: Mapping[str, np.ndarray]) -> np.ndarray:
    """The compiler's facts of each row as (rows, len(COMPILED_FACTS)) float64."""
    return np.column_stack([np.asarray(compiled[name], dtype=np.float64) for name in COMPILED_FACTS])


def _limits(hardware: Hardware) -> np.ndarray:
    """The hardware's limits in the order `_fill` reads them."""
    return np.array([hardware.sm_count, hardware.shared_memory_per_sm, hardware.reserved_shared_memory_per_program,
                     hardware.warps_per_sm, hardware.registers_per_sm, hardware.register_allocation_unit],
                    dtype=np.float64)


def _log2_columns(space: Space) -> np.ndarray:
    """The matrix columns `_fill` writes the argument of: the log2_ problem and interaction features."""
    return np.array([*LOG2_PROBLEM_COLUMNS, *(len(PROBLEM_FEATURES) + space.width + column
                                              for column in LOG2_INTERACTION_COLUMNS)], dtype=np.int64)


def _assemble(shapes: np.ndarray, values: np.ndarray, encoded: np.ndarray, compiled: Mapping[str, np.ndarray],
              element_bytes: int, hardware: Hardware, space: Space) -> np.ndarray:
    """The feature matrix from checked shapes and config values (either may be one row against the other's n), the
    configs' encoding and the compiler's facts of each row."""
    rows = max(len(shapes), len(values))
    matrix = np.empty((rows, len(PROBLEM_FEATURES) + space.width + len(INTERACTION_FEATURES)))
    matrix[:, len(PROBLEM_FEATURES):len(PROBLEM_FEATURES) + space.width] = encoded
    _fill(matrix, shapes, divisibility(shapes[:, 1:]), _tile_columns(values, space), _fact_columns(compiled),
          float(element_bytes), _limits(hardware), space.width)
    logarithms = _log2_columns(space)
    matrix[:, logarithms] = np.log2(matrix[:, logarithms])  # numpy's log2, whose last bit libm's can differ from
    return matrix


@numba.njit(cache=True, nogil=True)
def _candidate_matrix(shapes: np.ndarray, n_divisibility: int, k_divisibility: int, indices: np.ndarray,
                      encoded: np.ndarray, tile: np.ndarray, facts: np.ndarray, element_bytes: float,
                      limits: np.ndarray, logarithms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_assemble` of one shape (of these divisibilities) against the candidates at `indices`, from every
    candidate's encoding, tile columns and facts in the shape's class, up to its log2: the matrix, and a contiguous
    copy of its `logarithms` columns (each holding the logarithm's argument)."""
    width = encoded.shape[1]
    matrix = np.empty((len(indices), len(PROBLEM_FEATURES) + width + len(INTERACTION_FEATURES)))
    chosen_tile = np.empty((len(indices), tile.shape[1]), dtype=np.int64)
    chosen_facts = np.empty((len(indices), facts.shape[1]))
    for row in range(len(indices)):  # element by element: compiled slice copies cost more at these sizes
        index = indices[row]
        if not -len(encoded) <= index < len(encoded):
            raise IndexError("a candidate index is out of range")
        for column in range(width):
            matrix[row, len(PROBLEM_FEATURES) + column] = encoded[index, column]
        for column in range(tile.shape[1]):
            chosen_tile[row, column] = tile[index, column]
        for column in range(facts.shape[1]):
            chosen_facts[row, column] = facts[index, column]
    divisibilities = np.empty((1, 2), dtype=np.int64)
    divisibilities[0, 0], divisibilities[0, 1] = n_divisibility, k_divisibility
    _fill(matrix, shapes, divisibilities, chosen_tile, chosen_facts, element_bytes, limits, width)
    arguments = np.empty((len(indices), len(logarithms)))
    for row in range(len(indices)):
        for position in range(len(logarithms)):
            arguments[row, position] = matrix[row, logarithms[position]]
    return matrix, arguments


@numba.njit(cache=True, nogil=True)
def _put_columns(matrix: np.ndarray, columns: np.ndarray, values: np.ndarray) -> None:
    """matrix[:, columns] = values, without numpy's fancy-indexing overhead on a couple of dozen rows."""
    for row in range(matrix.shape[0]):
        for position in range(len(columns)):
            matrix[row, columns[position]] = values[row, position]


@numba.njit(cache=True, nogil=True)
def _fill(matrix: np.ndarray, shapes: np.ndarray, divisibilities: np.ndarray, tile: np.ndarray, facts: np.ndarray,
          element_bytes: float, limits: np.ndarray, width: int) -> None:
    """Write the problem and interaction columns of `matrix` (the encoding's `width` columns between them are left
    as they are), row by row: `shapes` with the `divisibility` of their N and K, `tile` (BLOCK_M, BLOCK_N, BLOCK_K,
    SPLIT_K, num_warps) and `facts` (COMPILED_FACTS) have one row or one per matrix row. The log2_ columns get their
    argument: `_assemble` and `CandidateFeatures.rows` take the logarithm. Compiled, so a dispatcher call's couple of
    dozen rows cost microseconds instead of a hundred numpy calls."""
    sm_count, shared_memory_per_sm, reserved, warps_per_sm, registers_per_sm, unit = (
        limits[0], limits[1], limits[2], limits[3], limits[4], limits[5])
    vector = float(VECTOR_BYTES // int(element_bytes))
    interaction = len(PROBLEM_FEATURES) + width  # the first interaction column
    for row in range(matrix.shape[0]):
        s = row if shapes.shape[0] > 1 else 0
        c = row if tile.shape[0] > 1 else 0
        f = row if facts.shape[0] > 1 else 0
        m, n, k = float(shapes[s, 0]), float(shapes[s, 1]), float(shapes[s, 2])
        n_divisibility, k_divisibility = float(divisibilities[s, 0]), float(divisibilities[s, 1])
        block_m, block_n, block_k = float(tile[c, 0]), float(tile[c, 1]), float(tile[c, 2])
        split_k, warps = float(tile[c, 3]), float(tile[c, 4])
        shared, registers = facts[f, 0], facts[f, 1]

        minimum_bytes = element_bytes * (m * k + k * n + m * n)
        out = matrix[row]
        out[0], out[1], out[2] = m, n, k
        out[3], out[4], out[5] = m, n, k  # this and every log2_ column: the logarithm's argument
        out[6] = 2 * m * n * k / minimum_bytes
        out[7], out[8], out[9] = m / n, m / k, n / k
        out[10], out[11] = n_divisibility, k_divisibility

        tiles_m, tiles_n = np.ceil(m / block_m), np.ceil(n / block_n)
        programs = tiles_m * tiles_n * split_k
        waves = programs / sm_count
        k_iterations = np.ceil(k / (block_k * split_k))
        warps_by_registers = np.floor(registers_per_sm / (np.ceil(32 * registers / unit) * unit))
        programs_per_sm = max(1.0, min(min(np.floor(shared_memory_per_sm / (shared + reserved)),
                                           np.floor(warps_per_sm / warps)), np.floor(warps_by_registers / warps)))
        occupancy_waves = programs / (sm_count * programs_per_sm)
        # Multiply-adds the tiles compute (padded M, N; K rounded up to whole iterations) over those the problem needs.
        padded = (tiles_m * block_m) * (tiles_n * block_n) * (k_iterations * block_k * split_k)
        # Split-K adds an fp32 workspace: every split adds into it atomically, and it is read once and zeroed once
        # (by the tile's last split since stop 91, by launches of their own before), besides C's store.
        split_k_bytes = m * n * 4 * (split_k + 2) + m * n * element_bytes if split_k > 1 else 0.0
        # Load instructions: A's rows are K apart and B's and C's N apart, so each moves as many elements per access
        # as the compiler knows that divisible by, up to VECTOR_BYTES; per thread per K iteration, per program (with
        # the C store), and per SM over the grid.
        vector_a, vector_bn = min(k_divisibility, vector), min(n_divisibility, vector)
        threads = 32.0 * warps
        a_loads, b_loads = block_m * block_k / (vector_a * threads), block_k * block_n / (vector_bn * threads)
        loads_per_program = (a_loads + b_loads) * k_iterations + block_m * block_n / (vector_bn * threads)
        multiply_adds = block_m * block_n * block_k * k_iterations  # per program
        at = interaction
        for value in (tiles_m, tiles_n, programs, programs,
                      np.mod(m, block_m) / block_m, np.mod(n, block_n) / block_n,
                      waves, np.mod(programs, sm_count) / sm_count,
                      k_iterations, shared, registers, programs_per_sm, occupancy_waves,
                      1.0 - m * n * k / padded,
                      block_m * block_n / (block_m + block_n),
                      split_k_bytes / minimum_bytes,
                      a_loads, b_loads, a_loads + b_loads, loads_per_program,
                      programs * loads_per_program * warps / sm_count,
                      programs * multiply_adds / sm_count,
                      np.ceil(waves) * multiply_adds,
                      facts[f, 2], facts[f, 3], facts[f, 4], facts[f, 5]):
            out[at] = value
            at += 1


def feature_row(shape: Sequence[int], config: Mapping[str, Any], space: Space, dtype: str,
                resources: CompiledResources, hardware: Hardware = Hardware()) -> np.ndarray:
    """The features of one (shape, config): the batch path on a batch of one."""
    return features(np.array([shape], dtype=np.int64), config_columns(space, [config]), space, dtype, resources,
                    hardware)[0]
