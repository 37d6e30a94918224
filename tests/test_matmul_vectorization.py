"""The prediction features' load counts are the compiler's: the GEMM compiled for sm_90 (on the CPU, no GPU) loads an
operand whose row stride is odd one bf16 element per instruction, exactly as many per thread as
`a_loads_per_thread` / `b_loads_per_thread` count, and stores C element by element when N is odd; an even stride takes
the alignment hint and loads no single elements. The suite runs
Triton's interpreter, which cannot compile, so the compile runs in a subprocess: this file run as a script."""

import collections
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tunebench.kernels import matmul
from tunebench.predict import feature_names, feature_row
from tunebench.predict.compiled import compile_matmul, load_table
from tunebench.space import Space

REPO = Path(__file__).resolve().parent.parent
CONFIG = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8, "SPLIT_K": 1, "num_warps": 8, "num_stages": 3}
TABLE = REPO / "results" / "datasets" / "matmul_bfloat16_sm90_compiled.csv"  # the candidates' compiled resources


def scalar_accesses(n: int, k: int) -> collections.Counter:
    """2-byte global loads and stores in the PTX of the kernel specialized as a launch with these N and K would be."""
    compiled = compile_matmul(CONFIG, math.gcd(n, 16), math.gcd(k, 16))
    return collections.Counter(re.findall(r"\b((?:ld|st)\.global\.b16)\b", compiled.asm["ptx"]))


@pytest.mark.parametrize("n, k", [(4096, 4096), (4096, 4095), (4095, 4096), (4104, 4098), (4095, 4100)])
def test_scalar_loads_in_the_ptx_match_the_features(n, k):
    space = Space(matmul.config_space().parameters)
    resources = load_table(TABLE, space.names)
    row = dict(zip(feature_names(space), feature_row((256, n, k), CONFIG, space, "bfloat16", resources)))
    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(REPO / "lib")
    run = subprocess.run([sys.executable, __file__, str(n), str(k)], env=env, check=True, capture_output=True,
                         text=True, timeout=300)
    accesses = json.loads(run.stdout.splitlines()[-1])
    assert accesses.get("ld.global.b16", 0) == (row["a_loads_per_thread"] if k % 2 else 0) + \
        (row["b_loads_per_thread"] if n % 2 else 0)
    threads = 32 * CONFIG["num_warps"]
    assert accesses.get("st.global.b16", 0) == (CONFIG["BLOCK_M"] * CONFIG["BLOCK_N"] / threads if n % 2 else 0)


if __name__ == "__main__":
    print(json.dumps(scalar_accesses(int(sys.argv[1]), int(sys.argv[2]))))
