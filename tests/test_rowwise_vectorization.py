"""The README's explanation of the 5000-wide row-wise shapes: compiled for sm_90 (on the CPU, no GPU), the recorded
best configs of 5000-wide rows get 2-byte global accesses and those of 5120-wide rows 16-byte vectors
(benchmarks/rowwise_vectorization.py, run as a script: it compiles, so the interpreter must be off)."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_only_widths_divisible_by_16_get_vector_accesses(tmp_path):
    out = tmp_path / "vectorization.md"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"PYTHONPATH": str(REPO / "lib")}
    subprocess.run([sys.executable, "benchmarks/rowwise_vectorization.py", "--out", str(out)], cwd=REPO, env=env,
                   check=True, capture_output=True, timeout=300)
    rows = [line.split(" | ") for line in out.read_text().splitlines() if line.startswith("| layernorm")
            or line.startswith("| softmax")]
    accesses = {(row[0].strip("| "), row[1]): row[3] for row in rows}
    assert set(accesses) == {(kernel, f"8192 x {cols}") for kernel in ("layernorm", "softmax") for cols in (5000, 5120)}
    for (kernel, shape), text in accesses.items():
        if shape.endswith("5120"):
            assert ".v4." in text and ".b16" not in text, (kernel, text)
        else:
            assert ".b16" in text and ".v4." not in text, (kernel, text)
