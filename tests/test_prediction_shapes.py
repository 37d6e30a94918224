"""The prediction dataset's shape list against the seeded draws that made it (benchmarks/hinted_shapes.py and
benchmarks/odd_shapes.py): the list in kernels/matmul.py must be what the draws give, in measured order."""

import os
import subprocess
import sys
from math import gcd
from pathlib import Path

import pytest

from tunebench.kernels import matmul

REPOSITORY = Path(__file__).resolve().parent.parent


def run_script(name: str, *arguments: str) -> subprocess.CompletedProcess:
    paths = [str(REPOSITORY / "lib"), os.environ.get("PYTHONPATH", "")]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    return subprocess.run([sys.executable, str(REPOSITORY / "benchmarks" / name), *arguments], cwd=REPOSITORY,
                          env=environment, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("arguments", [("hinted_shapes.py",), ("odd_shapes.py", "--check")])
def test_the_listed_shapes_are_the_seeded_draws(arguments):
    completed = run_script(*arguments)
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_the_odd_draw_has_an_odd_n_or_k_unless_its_pattern_says_hinted():
    lines = run_script("odd_shapes.py").stdout.split()
    shapes = [tuple(int(size) for size in shape.split("x")) for line in lines for shape in line.split(",")]
    assert len(shapes) == 160 and len(set(shapes)) == 160
    hinted_both = [shape for shape in shapes if all(gcd(size, 16) in (2, 4, 8) for size in shape[1:])]
    assert len(hinted_both) == 160 // 8  # one (hinted, hinted) per cycle of 8; every other has N or K odd
    assert all(shape[1] % 2 or shape[2] % 2 for shape in shapes if shape not in hinted_both)
    assert not set(shapes) & set(matmul.DATASET_SHAPES)
