"""The vendor-kernel listing: cuBLAS's kernels for a small bf16 product, named and timed by the CUDA profiler."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import vendor_kernels  # noqa: E402


@pytest.mark.gpu
def test_vendor_kernels_names_at_least_one_kernel_per_product():
    found = vendor_kernels.vendor_kernels((64, 128, 256), runs=4)
    assert found["shape"].eq("64x128x256").all()
    assert found.launches_per_product.sum() >= 1
    assert (found.mean_us > 0).all() and found.kernel.str.len().gt(0).all()
