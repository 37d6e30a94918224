"""What the compiler makes of each GEMM candidate: shared memory, registers, spills and instruction mix of the kernel
as Triton compiles it for one GPU architecture, per alignment class of N and K, with no GPU needed.

Triton specializes the GEMM on whether N and K (and the strides equal to them) are multiples of 16. An operand whose
row stride is not cannot be copied to shared memory asynchronously, so the software pipeline usually keeps one
buffer for it instead of one per stage (a 64x256x64 tile at 3 stages takes 104 KiB with K unaligned, 120 KiB
aligned), and other buffers vary too: occupancy differs by alignment class in ways a closed-form model misses. `resource_table` compiles every candidate
once per class; `CompiledResources` looks rows up for the features.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
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

ALIGNMENTS = ((True, True), (True, False), (False, True), (False, False))  # (N % 16 == 0, K % 16 == 0)
DIVISOR = 16  # Triton specializes integer arguments (N, K, the strides) on divisibility by 16: vectorized loads
POINTER_TYPES = {"bfloat16": "*bf16", "float16": "*fp16"}
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


def compile_matmul(config: Mapping[str, Any], n_aligned: bool, k_aligned: bool, dtype: str = "bfloat16",
                   capability: int = 90) -> Any:
    """The GEMM compiled for `capability` (90: Hopper) as a launch with N and K of this alignment specializes it: the
    operand pointers 16-byte aligned, the split-K workspace fp32, M unspecialized, as `matmul.run` launches it."""
    if dtype not in POINTER_TYPES:
        raise ValueError(f"unsupported dtype {dtype!r}; compiled resources cover {', '.join(POINTER_TYPES)}")
    constants = _constants(config)
    divisible = {"N": n_aligned, "K": k_aligned, "stride_am": k_aligned, "stride_bk": n_aligned,
                 "stride_cm": n_aligned}
    signature, attributes = {}, {}
    for index, name in enumerate(matmul.matmul_kernel.arg_names):
        if name in constants:
            signature[name] = "constexpr"
        elif index < 3:
            fp32_output = name == "c_ptr" and constants["SPLIT_K"] > 1
            signature[name] = "*fp32" if fp32_output else POINTER_TYPES[dtype]
            attributes[(index,)] = [["tt.divisibility", DIVISOR]]
        else:
            signature[name] = "i32"
            if divisible.get(name, False):
                attributes[(index,)] = [["tt.divisibility", DIVISOR]]
    return triton.compile(ASTSource(matmul.matmul_kernel, signature, constants, attributes),
                          target=GPUTarget("cuda", capability, 32),
                          options={"num_warps": int(config["num_warps"]), "num_stages": int(config["num_stages"])})


def _cuobjdump() -> str:
    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")


def kernel_facts(compiled: Any) -> dict[str, int]:
    """Shared memory (Triton's metadata), registers and local memory per thread (cuobjdump of the cubin), and the
    PTX instruction counts of INSTRUCTIONS."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(compiled.asm["cubin"])
        usage = subprocess.run([_cuobjdump(), "--dump-resource-usage", str(path)], check=True, capture_output=True,
                               text=True).stdout
    found = {key: int(value) for key, value in re.findall(r"\b(REG|LOCAL):(\d+)", usage)}
    if "REG" not in found:
        raise RuntimeError(f"cuobjdump printed no register count: {usage!r}")
    ptx = compiled.asm["ptx"]
    return {"shared_memory_bytes": int(compiled.metadata.shared), "registers": found["REG"],
            "local_memory_bytes": found.get("LOCAL", 0),
            **{name: len(re.findall(pattern, ptx)) for name, pattern in INSTRUCTIONS.items()}}


def _facts_row(job: tuple[dict[str, int], bool, bool, str, int]) -> dict[str, Any]:
    config, n_aligned, k_aligned, dtype, capability = job
    facts = kernel_facts(compile_matmul(config, n_aligned, k_aligned, dtype, capability))
    return {**config, "N_divisible_16": n_aligned, "K_divisible_16": k_aligned, **facts}


def resource_table(configs: Sequence[Mapping[str, Any]], dtype: str = "bfloat16", capability: int = 90,
                   workers: int = 1) -> pd.DataFrame:
    """Every config compiled in every alignment class (in `workers` processes, with a progress bar): one row each,
    the config's parameters, the class and FACTS."""
    jobs = [({name: int(value) for name, value in config.items()}, n_aligned, k_aligned, dtype, capability)
            for config in configs for n_aligned, k_aligned in ALIGNMENTS]
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
        missing = [name for name in (*parameter_names, "N_divisible_16", "K_divisible_16", *FACTS)
                   if name not in table.columns]
        if missing:
            raise ValueError(f"compiled-resource table lacks columns {missing}")
        self.parameter_names = tuple(parameter_names)
        self.source = dict(source)
        self.table = table.reset_index(drop=True)
        keys = self.table[[*parameter_names, "N_divisible_16", "K_divisible_16"]].astype(np.int64).to_numpy()
        # A dense index over the grid of each column's values: a lookup is a few vectorized searchsorted calls.
        self._levels = [np.unique(column) for column in keys.T]
        self._dims = tuple(len(levels) for levels in self._levels)
        self._position = np.full(int(np.prod(self._dims)), -1, dtype=np.int64)
        codes = [np.searchsorted(levels, column) for levels, column in zip(self._levels, keys.T)]
        self._position[np.ravel_multi_index(codes, self._dims)] = np.arange(len(keys))
        self._facts = self.table[list(FACTS)].to_numpy(dtype=np.float64)

    def restricted(self, config_values: np.ndarray) -> CompiledResources:
        """The table's rows of these configs only, in every alignment class (a predictor keeps its candidates')."""
        wanted = {tuple(row) for row in np.asarray(config_values, dtype=np.int64).tolist()}
        keys = self.table[list(self.parameter_names)].astype(np.int64).to_numpy().tolist()
        keep = [tuple(key) in wanted for key in keys]
        return CompiledResources(self.table[keep], self.parameter_names, self.source)

    def lookup(self, config_values: np.ndarray, n_aligned: np.ndarray, k_aligned: np.ndarray) -> dict[str, np.ndarray]:
        """FACTS for each row of (rows, parameters) config values and its shape's alignment; a clear error names
        the first config the table does not hold."""
        keys = np.column_stack([config_values, n_aligned, k_aligned]).astype(np.int64)
        codes, found = [], np.ones(len(keys), dtype=bool)
        for levels, column in zip(self._levels, keys.T):
            code = np.minimum(np.searchsorted(levels, column), len(levels) - 1)
            found &= levels[code] == column
            codes.append(code)
        positions = np.where(found, self._position[np.ravel_multi_index(codes, self._dims)], -1)
        if (positions < 0).any():
            key = keys[np.flatnonzero(positions < 0)[0]].tolist()
            config = dict(zip(self.parameter_names, key))
            raise KeyError(f"config {config} (N % 16 == 0: {bool(key[-2])}, K % 16 == 0: {bool(key[-1])}) was never "
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
    """Compile a prediction dataset's candidates in every alignment class and save the table."""
    from tunebench.measure.dataset import load_dataset
    from tunebench.predict.model import common_candidates

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--dataset", type=Path, required=True, help="prediction dataset whose candidates to compile")
    parser.add_argument("--out", type=Path, required=True, help="CSV to write")
    parser.add_argument("--capability", type=int, default=90, help="CUDA compute capability x 10 (90: Hopper)")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    dataset = load_dataset(args.dataset)
    names = dataset.parameter_names
    configs = [dict(zip(names, map(int, row))) for row in common_candidates(dataset).tolist()]
    table = resource_table(configs, dataset.dtype, args.capability, args.workers)
    command = "PYTHONPATH=lib python3 -m tunebench.predict.compiled " + " ".join(sys.argv[1:] if argv is None else argv)
    save_table(table, args.out, provenance(dataset.dtype, args.capability, command))
    print(f"{len(table)} kernels compiled with Triton {triton.__version__} for sm_{args.capability} -> {args.out}")


if __name__ == "__main__":
    main()
