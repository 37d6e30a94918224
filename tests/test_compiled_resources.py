"""The compiled-resource table: compiling on the CPU gives what a real launch compiles (on the GPU), an odd operand of
a wide tile keeps one shared-memory buffer instead of num_stages while a hinted one keeps them all (on the CPU, in a
subprocess: the suite runs Triton's interpreter), and the table's save, load and lookup, with its errors."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tunebench.kernels import matmul
from tunebench.predict.compiled import FACTS, CompiledResources, compile_matmul, load_table, save_table

REPO = Path(__file__).resolve().parent.parent
WIDE = {"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "SPLIT_K": 1, "num_warps": 8, "num_stages": 3}
NAMES = tuple(WIDE)


def compiled_in_subprocess(config: dict, n_divisibility: int, k_divisibility: int) -> dict:
    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(REPO / "lib")
    run = subprocess.run([sys.executable, __file__, json.dumps([config, n_divisibility, k_divisibility])], env=env,
                         check=True, capture_output=True, text=True, timeout=300)
    return json.loads(run.stdout.splitlines()[-1])


def test_an_odd_operand_keeps_one_shared_buffer_and_a_hinted_one_all():
    tile_a = WIDE["BLOCK_M"] * WIDE["BLOCK_K"] * 2
    tile_b = WIDE["BLOCK_K"] * WIDE["BLOCK_N"] * 2
    aligned = compiled_in_subprocess(WIDE, 16, 16)
    k_odd = compiled_in_subprocess(WIDE, 16, 1)
    k_hinted = compiled_in_subprocess(WIDE, 16, 8)
    assert aligned["shared_memory_bytes"] == WIDE["num_stages"] * (tile_a + tile_b)
    assert k_odd["shared_memory_bytes"] == tile_a + WIDE["num_stages"] * tile_b
    assert k_hinted["shared_memory_bytes"] == aligned["shared_memory_bytes"]
    assert aligned["wgmma"] > 0 and aligned["cp_async"] > 0 and aligned["scalar_global_loads"] == 0
    assert k_odd["scalar_global_loads"] > 0 and k_hinted["scalar_global_loads"] == 0
    assert 0 < aligned["registers"] <= 255
    with pytest.raises(ValueError, match=r"divisibilities \(16, 3\)"):
        compile_matmul(WIDE, 16, 3)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(512, 4096, 4096), (300, 4095, 4096), (77, 4096, 2130), (1, 3000, 999),
                                   (64, 4100, 5000)])
@pytest.mark.parametrize("split_k", [1, 4])
def test_the_cpu_compile_is_what_a_launch_compiles(shape, split_k):
    from tunebench.predict.compiled import kernel_facts

    config = {**WIDE, "SPLIT_K": split_k}
    inputs = matmul.make_inputs(shape, "bfloat16")
    a, b, out = inputs.a, inputs.b, inputs.out
    launched = matmul.matmul_kernel[matmul.grid(config, shape)](
        a, b, out, inputs.workspace, inputs.tile_counts, *shape, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        out.stride(0), out.stride(1),
        ALIGN_K=matmul.alignment(shape[2]), ALIGN_N=matmul.alignment(shape[1]), **config)
    offline = compile_matmul(config, math.gcd(shape[1], 16), math.gcd(shape[2], 16), "bfloat16")
    assert kernel_facts(launched) == kernel_facts(offline)


def table(rows: list[dict]) -> pd.DataFrame:
    facts = {name: 0 for name in FACTS}
    return pd.DataFrame([{**row, **facts, "shared_memory_bytes": row["BLOCK_N"]} for row in rows])


def test_lookup_round_trip_and_errors(tmp_path):
    rows = [{**WIDE, "BLOCK_N": block_n, "N_divisibility": n, "K_divisibility": k}
            for block_n in (128, 256) for n in (16, 1) for k in (16, 1)]
    path = tmp_path / "compiled.csv"
    save_table(table(rows), path, {"triton": "x.y", "capability": 90})
    resources = load_table(path, NAMES)
    assert resources.source == {"triton": "x.y", "capability": "90"}
    values = np.array([[WIDE[name] for name in NAMES], [{**WIDE, "BLOCK_N": 128}[name] for name in NAMES]])
    found = resources.lookup(values, np.array([16, 1]), np.array([1, 1]))
    assert found["shared_memory_bytes"].tolist() == [256, 128]
    with pytest.raises(KeyError, match="BLOCK_N': 64.*never compiled"):
        resources.lookup(np.array([[{**WIDE, "BLOCK_N": 64}[name] for name in NAMES]]), np.array([16]),
                         np.array([16]))
    with pytest.raises(KeyError, match="N divisibility 8, K divisibility 16 was never compiled"):
        resources.lookup(values[:1], np.array([8]), np.array([16]))
    with pytest.raises(ValueError, match="lacks columns.*registers"):
        CompiledResources(table(rows).drop(columns="registers"), NAMES, {})


if __name__ == "__main__":
    from tunebench.predict.compiled import kernel_facts

    config, n_divisibility, k_divisibility = json.loads(sys.argv[1])
    print(json.dumps(kernel_facts(compile_matmul(config, n_divisibility, k_divisibility))))
