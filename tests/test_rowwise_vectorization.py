"""The explanation of the 5000-wide row-wise shapes and its fix: compiled for sm_90 (on the CPU, no GPU), the recorded
best configs of 5000-wide rows get 2-byte global accesses without the alignment hint and only 16-byte ones with it
(16-byte vectors, or cp.async.cg, which copies 16 bytes), as those of 5120-wide rows get either way
(benchmarks/rowwise_vectorization.py, run as a script: it compiles, so the interpreter must be off)."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_hint_gives_5000_wide_rows_the_vector_accesses_of_5120_wide_ones(tmp_path):
    out = tmp_path / "vectorization.md"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"PYTHONPATH": str(REPO / "lib")}
    subprocess.run([sys.executable, "benchmarks/rowwise_vectorization.py", "--out", str(out)], cwd=REPO, env=env,
                   check=True, capture_output=True, timeout=300)
    rows = [line.split(" | ") for line in out.read_text().splitlines() if line.startswith("| layernorm")
            or line.startswith("| softmax")]
    table = {(row[0].strip("| "), row[1]): (int(row[3]), row[4], row[5].rstrip(" |")) for row in rows}
    assert set(table) == {(kernel, f"8192 x {cols}") for kernel in ("layernorm", "softmax") for cols in (5000, 5120)}
    for (kernel, shape), (align, unhinted, launched) in table.items():
        wide = ".v4." in launched or "cp.async.cg" in launched
        assert wide and ".b16" not in launched, (kernel, shape, launched)
        if shape.endswith("5120"):
            assert align == 1 and unhinted == launched, (kernel, unhinted, launched)
        else:
            assert align == 8 and ".b16" in unhinted and ".v4." not in unhinted, (kernel, unhinted)
