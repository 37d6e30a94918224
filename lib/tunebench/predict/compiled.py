"""What the compiler makes of each GEMM candidate: shared memory, registers, spills and instruction mix of the kernel
as Triton compiles it for one GPU architecture, per alignment class of N and K, with no GPU needed.

The compiler knows a divisibility of N and K (and of the strides equal to them): 16 from Triton's own specialization,
8, 4 or 2 from the kernel's alignment hints (`matmul.alignment`), else 1. An operand whose row stride it knows to be
odd cannot be copied to shared memory asynchronously, so the software pipeline usually keeps one buffer for it
instead of one per stage (a 64x256x64 tile at 3 stages takes 104 KiB with K odd, 120 KiB aligned); narrower copies
need more registers. Occupancy thus differs by alignment class in ways a closed-form model misses. `resource_table`
compiles every candidate once per class (resumably, class by class); `CompiledResources` looks rows up.
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import triton
from tqdm import tqdm
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tunebench.files import write_text_atomically
from tunebench.kernels import matmul
from tunebench.kernels.cubin import resource_usage

DIVISOR = 16  # Triton specializes integer arguments (N, K, the strides) on divisibility by 16: vectorized loads
DIVISIBILITIES = (16, 8, 4, 2, 1)  # what the compiler may know of N or K: gcd(value, 16)
CLASSES = tuple(itertools.product(DIVISIBILITIES, DIVISIBILITIES))  # (N divisibility, K divisibility)
CLASS_COLUMNS = ("N_divisibility", "K_divisibility")
POINTER_TYPES = {"bfloat16": "*bf16", "float16": "*fp16"}
SPLIT_K_POINTER_TYPES = {"workspace_ptr": "*fp32", "tile_counts_ptr": "*i32"}
# Per-thread counts of these PTX instructions in the compiled kernel (static counts, not executed ones).
INSTRUCTIONS = {
    "wgmma": r"\bwgmma\.mma_async\b",  # Hopper warpgroup MMA
    "mma_sync": r"\bmma\.sync\b",  # Ampere-style warp MMA
    "cp_async": r"\bcp\.async\.(?:ca|cg)\b",  # asynchronous global-to-shared copies
    "scalar_global_loads": r"\bld\.global(?:\.\w+)*\.b16\b",  # one 2-byte element per load
}
FACTS = ("shared_memory_bytes", "registers", "local_memory_bytes", *INSTRUCTIONS)


def _constants(config: Mapping[str, Any]) -> dict[str, int]:
    names = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "SPLIT_K")
    return {**{name: int(config[name]) for name in names}, "stride_ak": 1, "stride_bn": 1, "stride_cn": 1}


def divisibility(values: np.ndarray) -> np.ndarray:
    """What the compiler knows of each N or K (and the row strides equal to it): gcd(value, 16)."""
    return np.gcd(np.asarray(values).astype(np.int64), DIVISOR)


def compile_matmul(config: Mapping[str, Any], n_divisibility: int, k_divisibility: int, dtype: str = "bfloat16",
                   capability: int = 90) -> Any:
    """The GEMM compiled for `capability` (90: Hopper) as `matmul.run` launches it on N and K of these
    divisibilities (see `divisibility`): the pointers 16-byte aligned (split-K's workspace fp32 and its tile counters
    int32), M unspecialized, the alignment hints set."""
    if dtype not in POINTER_TYPES:
        raise ValueError(f"unsupported dtype {dtype!r}; compiled resources cover {', '.join(POINTER_TYPES)}")
    if n_divisibility not in DIVISIBILITIES or k_divisibility not in DIVISIBILITIES:
        raise ValueError(f"divisibilities ({n_divisibility}, {k_divisibility}) must each be one of {DIVISIBILITIES}")
    constants = {**_constants(config), "ALIGN_N": matmul.alignment(n_divisibility),
                 "ALIGN_K": matmul.alignment(k_divisibility)}
    n_aligned, k_aligned = n_divisibility == DIVISOR, k_divisibility == DIVISOR
    divisible = {"N": n_aligned, "K": k_aligned, "stride_am": k_aligned, "stride_bk": n_aligned,
                 "stride_cm": n_aligned}
    signature, attributes = {}, {}
    for index, name in enumerate(matmul.matmul_kernel.arg_names):
        if name in constants:
            signature[name] = "constexpr"
        elif name in SPLIT_K_POINTER_TYPES:
            signature[name] = SPLIT_K_POINTER_TYPES[name]
            attributes[(index,)] = [["tt.divisibility", DIVISOR]]
        elif index < 3:
            signature[name] = POINTER_TYPES[dtype]
            attributes[(index,)] = [["tt.divisibility", DIVISOR]]
        else:
            signature[name] = "i32"
            if divisible.get(name, False):
                attributes[(index,)] = [["tt.divisibility", DIVISOR]]
    return triton.compile(ASTSource(matmul.matmul_kernel, signature, constants, attributes),
                          target=GPUTarget("cuda", capability, 32),
                          options={"num_warps": int(config["num_warps"]), "num_stages": int(config["num_stages"])})


def kernel_facts(compiled: Any) -> dict[str, int]:
    """Shared memory (Triton's metadata), registers and local memory per thread (cuobjdump of the cubin), and the
    PTX instruction counts of INSTRUCTIONS."""
    ptx = compiled.asm["ptx"]
    return {"shared_memory_bytes": int(compiled.metadata.shared), **resource_usage(compiled),
            **{name: len(re.findall(pattern, ptx)) for name, pattern in INSTRUCTIONS.items()}}


def _facts_row(job: tuple[dict[str, int], int, int, str, int]) -> dict[str, Any]:
    config, n_divisibility, k_divisibility, dtype, capability = job
    facts = kernel_facts(compile_matmul(config, n_divisibility, k_divisibility, dtype, capability))
    return {**config, "N_divisibility": n_divisibility, "K_divisibility": k_divisibility, **facts}


def resource_table(configs: Sequence[Mapping[str, Any]], classes: Sequence[tuple[int, int]] = CLASSES,
                   dtype: str = "bfloat16", capability: int = 90, workers: int = 1) -> pd.DataFrame:
    """Every config compiled in each of `classes` (in `workers` processes, with a progress bar): one row each,
    the config's parameters, the class and FACTS."""
    jobs = [({name: int(value) for name, value in config.items()}, n_class, k_class, dtype, capability)
            for n_class, k_class in classes for config in configs]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        rows = list(tqdm(pool.map(_facts_row, jobs, chunksize=8), total=len(jobs), desc="compiling", unit="kernel"))
    return pd.DataFrame(rows)


def provenance(dtype: str, capability: int, command: str) -> dict[str, Any]:
    """Where a table came from: the compiler's version and target, and the command that wrote it."""
    return {"triton": triton.__version__, "capability": capability, "dtype": dtype, "kernel": matmul.NAME,
            "command": command}


def save_table(table: pd.DataFrame, path: Path, source: Mapping[str, Any]) -> None:
    """The table as CSV, preceded by `# key: value` provenance lines, written atomically."""
    header = "".join(f"# {key}: {value}\n" for key, value in source.items())
    write_text_atomically(path, header + table.to_csv(index=False))


class CompiledResources:
    """FACTS per (config, alignment class), looked up for rows of config values."""

    def __init__(self, table: pd.DataFrame, parameter_names: Sequence[str], source: Mapping[str, Any]) -> None:
        missing = [name for name in (*parameter_names, *CLASS_COLUMNS, *FACTS)
                   if name not in table.columns]
        if missing:
            raise ValueError(f"compiled-resource table lacks columns {missing}")
        self.parameter_names = tuple(parameter_names)
        self.source = dict(source)
        self.table = table.reset_index(drop=True)
        keys = self.table[[*parameter_names, *CLASS_COLUMNS]].astype(np.int64).to_numpy()
        # A dense index over the grid of each column's values: a lookup is a few vectorized searchsorted calls.
        self._levels = [np.unique(column) for column in keys.T]
        self._dims = tuple(len(levels) for levels in self._levels)
        self._position = np.full(int(np.prod(self._dims)), -1, dtype=np.int64)
        codes = [np.searchsorted(levels, column) for levels, column in zip(self._levels, keys.T)]
        self._position[np.ravel_multi_index(codes, self._dims)] = np.arange(len(keys))
        self._facts = self.table[list(FACTS)].to_numpy(dtype=np.float64)

    def __getstate__(self) -> dict[str, Any]:
        return {"table": self.table, "parameter_names": self.parameter_names, "source": self.source}  # the index and
        # the facts array are rebuilt on loading, not stored

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["table"], state["parameter_names"], state["source"])

    def restricted(self, config_values: np.ndarray) -> CompiledResources:
        """The table's rows of these configs only, in every alignment class (a predictor keeps its candidates')."""
        wanted = {tuple(row) for row in np.asarray(config_values, dtype=np.int64).tolist()}
        keys = self.table[list(self.parameter_names)].astype(np.int64).to_numpy().tolist()
        keep = [tuple(key) in wanted for key in keys]
        return CompiledResources(self.table[keep], self.parameter_names, self.source)

    def lookup(self, config_values: np.ndarray, n_divisibility: np.ndarray, k_divisibility: np.ndarray
               ) -> dict[str, np.ndarray]:
        """FACTS for each row of (rows, parameters) config values and its shape's class (`divisibility` of N and
        K); a clear error names the first (config, class) the table does not hold."""
        keys = np.column_stack([config_values, n_divisibility, k_divisibility]).astype(np.int64)
        codes, found = [], np.ones(len(keys), dtype=bool)
        for levels, column in zip(self._levels, keys.T):
            code = np.minimum(np.searchsorted(levels, column), len(levels) - 1)
            found &= levels[code] == column
            codes.append(code)
        positions = np.where(found, self._position[np.ravel_multi_index(codes, self._dims)], -1)
        if (positions < 0).any():
            key = keys[np.flatnonzero(positions < 0)[0]].tolist()
            config = dict(zip(self.parameter_names, key))
            raise KeyError(f"config {config} with N divisibility {key[-2]}, K divisibility {key[-1]} was never "
                           "compiled into the compiled-resource table; rebuild it with these candidates")
        return {name: self._facts[positions, column] for column, name in enumerate(FACTS)}


def load_table(path: Path, parameter_names: Sequence[str]) -> CompiledResources:
    """A table written by `save_table`."""
    source = {}
    with open(path) as handle:
        for line in handle:
            if not line.startswith("# "):
                break
            key, _, value = line[2:].rstrip("\n").partition(": ")
            source[key] = value
    return CompiledResources(pd.read_csv(path, comment="#"), parameter_names, source)


def main(argv: Sequence[str] | None = None) -> None:
    """Compile a prediction dataset's candidates in every alignment class and save the table; an existing table at
    --out (from the same Triton and target) is extended class by class, saved after each, so a killed run resumes."""
    from tunebench.measure.dataset import load_dataset
    from tunebench.predict.model import common_candidates

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--dataset", type=Path, required=True, help="prediction dataset whose candidates to compile")
    parser.add_argument("--out", type=Path, required=True, help="CSV to write or extend")
    parser.add_argument("--capability", type=int, default=90, help="CUDA compute capability x 10 (90: Hopper)")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    dataset = load_dataset(args.dataset)
    names = dataset.parameter_names
    configs = [dict(zip(names, map(int, row))) for row in common_candidates(dataset).tolist()]
    command = "PYTHONPATH=lib python3 -m tunebench.predict.compiled " + " ".join(sys.argv[1:] if argv is None else argv)
    source = provenance(dataset.dtype, args.capability, command)
    table = pd.DataFrame()
    if args.out.exists():
        existing = load_table(args.out, names)
        for key in ("triton", "capability", "dtype", "kernel"):
            if str(existing.source.get(key)) != str(source[key]):
                raise ValueError(f"{args.out} was compiled with {key}={existing.source.get(key)!r}, this run has "
                                 f"{source[key]!r}; write a new table instead of mixing them")
        table, source = existing.table, {**existing.source, "command": command}
    for n_class, k_class in CLASSES:
        done = 0 if table.empty else int(((table["N_divisibility"] == n_class)
                                          & (table["K_divisibility"] == k_class)).sum())
        if done >= len(configs):
            continue
        rows = resource_table(configs, [(n_class, k_class)], dataset.dtype, args.capability, args.workers)
        table = pd.concat([table, rows], ignore_index=True)
        save_table(table, args.out, source)
        print(f"class (N {n_class}, K {k_class}): {len(rows)} kernels -> {args.out}", flush=True)
    print(f"{len(table)} kernels compiled with Triton {triton.__version__} for sm_{args.capability} -> {args.out}")


if __name__ == "__main__":
    main()
