"""The stream-K probe's kernel: split tiles sum right in either part order, twice in a row (the arrival counters come
back to zero), under the interpreter and on a GPU; without the reduction the output is wrong, as documented."""

import sys
from pathlib import Path

import pytest
import torch

from tunebench.kernels import matmul

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import streamk_probe  # noqa: E402

TILE = (32, 32, 32, 4, 2)  # BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages: tiny, for the interpreter
on_the_interpreter = pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU test below covers this")


def _sums_right_twice(variant, inputs, dtype: str) -> None:
    for _ in range(2):
        inputs.out.fill_(float("nan"))
        variant()
        assert matmul.relative_error(inputs.out, matmul.reference(inputs)) <= matmul.TOLERANCE[dtype]
        assert variant.arrivals.abs().sum().item() == 0


@on_the_interpreter
@pytest.mark.parametrize("shape, programs", [((64, 96, 256), 5), ((70, 96, 200), 7), ((40, 40, 96), 3)])
@pytest.mark.parametrize("heads_first", [True, False])
def test_interpreter_reduced_stream_k_matches_the_reference(shape, programs, heads_first):
    inputs = matmul.make_inputs(shape, "float16", "cpu", seed=1, split_k_workspace=False)
    _sums_right_twice(streamk_probe.StreamK(TILE, True, heads_first, inputs, programs), inputs, "float16")


@on_the_interpreter
def test_interpreter_unreduced_stream_k_is_wrong_where_tiles_are_split():
    inputs = matmul.make_inputs((64, 96, 256), "float16", "cpu", seed=1, split_k_workspace=False)
    streamk_probe.StreamK(TILE, False, True, inputs, 5)()
    assert matmul.relative_error(inputs.out, matmul.reference(inputs)) > 0.1


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(256, 11008, 4096), (333, 1000, 520)])
@pytest.mark.parametrize("tile", streamk_probe.TILES)
def test_gpu_reduced_stream_k_matches_the_reference(shape, tile):
    programs = torch.cuda.get_device_properties(0).multi_processor_count
    for heads_first in (True, False):
        inputs = matmul.make_inputs(shape, "bfloat16", "cuda", seed=2, split_k_workspace=False)
        _sums_right_twice(streamk_probe.StreamK(tile, True, heads_first, inputs, programs), inputs, "bfloat16")
