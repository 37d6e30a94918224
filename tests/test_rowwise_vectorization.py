"""The explanation of the 5000-wide row-wise shapes and its fix: compiled for sm_90 (on the CPU, no GPU), the recorded
best configs of 5000-wide rows get 2-byte global accesses without the alignment hint and only 16-byte ones with it
(16-byte vectors, or cp.async.cg, which copies 16 bytes), as those of 5120-wide rows get either way; and the register
table covers every sampled config (benchmarks/rowwise_vectorization.py, run as a script: it compiles, so the
interpreter must be off)."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_hint_gives_5000_wide_rows_the_vector_accesses_of_5120_wide_ones(tmp_path):
    out = tmp_path / "vectorization.md"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"PYTHONPATH": str(REPO / "lib")}
    subprocess.run([sys.executable, "benchmarks/rowwise_vectorization.py", "--out", str(out), "--sample", "3"],
                   cwd=REPO, env=env, check=True, capture_output=True, timeout=300)
    lines = out.read_text().splitlines()
    rows = [line.split(" | ") for line in lines if line.startswith("| layernorm") or line.startswith("| softmax")]
    accesses = [row for row in rows if " x " in row[1]]
    table = {(row[0].strip("| "), row[1]): (int(row[3]), row[4], row[5].rstrip(" |")) for row in accesses}
    assert set(table) == {(kernel, f"8192 x {cols}") for kernel in ("layernorm", "softmax") for cols in (5000, 5120)}
    for (kernel, shape), (align, unhinted, launched) in table.items():
        wide = ".v4." in launched or "cp.async.cg" in launched
        assert wide and ".b16" not in launched, (kernel, shape, launched)
        if shape.endswith("5120"):
            assert align == 1 and unhinted == launched, (kernel, unhinted, launched)
        else:
            assert align == 8 and ".b16" in unhinted and ".v4." not in unhinted, (kernel, unhinted)
    registers = {row[0].strip("| "): [cell.strip(" |") for cell in row[1:]] for row in rows if " x " not in row[1]}
    assert set(registers) == {"layernorm", "softmax"}
    for cells in registers.values():
        configs, more, fewer = int(cells[0]), int(cells[3]), int(cells[4])
        assert configs == 3 and more + fewer <= configs and float(cells[1]) > 0 and float(cells[2]) > 0
