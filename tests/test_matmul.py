"""The GEMM kernel: its resource model and space, and its numerics under the interpreter (CPU) or on a GPU."""

import dataclasses

import numpy as np
import pytest
import torch

from launch_recorder import compile_and_launch
from tunebench.kernels import get_kernel
from tunebench.kernels import matmul

SPACE = matmul.config_space()


def test_space_is_large_and_every_config_fits_the_resource_model():
    configs = SPACE.enumerate()
    assert len(configs) >= 2000
    for config in configs:
        usage = matmul.resource_usage(config)
        assert usage.shared_memory_bytes <= matmul.HOPPER.shared_memory_bytes
        assert 4 <= usage.accumulator_elements_per_thread <= 128


def test_resource_model_by_hand():
    config = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "SPLIT_K": 1, "num_warps": 8, "num_stages": 3}
    usage = matmul.resource_usage(config)
    assert usage.shared_memory_bytes == 3 * (128 * 64 + 64 * 256) * 2  # 147,456 bytes
    assert usage.accumulator_elements_per_thread == 128 * 256 / 256
    assert SPACE.is_valid(config)
    too_much_shared = dict(config, BLOCK_M=256, BLOCK_K=128, num_stages=4)  # 4 * 64 KiB * ... > 227 KiB
    assert "shared_memory" in SPACE.violations(too_much_shared)
    too_many_registers = dict(config, BLOCK_M=256, BLOCK_N=256, BLOCK_K=32, num_stages=2)
    assert "accumulator_registers" in SPACE.violations(too_many_registers)
    idle_lanes = dict(config, BLOCK_M=16, BLOCK_N=32, num_warps=8)
    assert "warps_for_tile" in SPACE.violations(idle_lanes)


def test_registry_and_bad_input():
    assert get_kernel("matmul") is matmul
    with pytest.raises(ValueError, match="unknown kernel 'gemm'.*matmul"):
        get_kernel("gemm")
    with pytest.raises(ValueError, match="K=0"):
        matmul.check_shape((4, 4, 0))
    with pytest.raises(ValueError, match=r"\(M, N, K\)"):
        matmul.check_shape((4, 4))
    with pytest.raises(ValueError, match="unknown dtype 'int8'"):
        matmul.make_inputs((2, 2, 2), "int8", "cpu")


def test_cost_model():
    assert matmul.flops((2, 3, 4)) == 48
    assert matmul.bytes_moved((2, 3, 4), "bfloat16") == 2 * (8 + 12 + 6)


def test_specialization_follows_divisibility_of_n_and_k_only():
    assert matmul.specialization((1, 4096, 4096)) == matmul.specialization((8192, 4096, 4096))
    assert matmul.specialization((16, 4096, 4096)) != matmul.specialization((16, 4096, 3000))


def test_alignment_hint_is_the_largest_common_width_below_16():
    assert matmul.alignment(5000) == 8 and matmul.alignment(5000, 3000) == 8
    assert matmul.alignment(4100) == 4 and matmul.alignment(4100, 5000) == 4
    assert matmul.alignment(1002) == 2 and matmul.alignment(1002, 1001) == 1
    assert matmul.alignment(4096) == 1 and matmul.alignment(4096, 4096) == 1  # Triton's own specialization sees 16
    assert matmul.alignment(4096, 5000) == 8  # a stride of 5000 keeps the hint at 8
    hints = [spec[-2:] for spec in map(matmul.specialization, [(1, 4096, 4096), (1, 5000, 3000), (1, 1002, 4100)])]
    assert hints == [(1, 1), (8, 8), (4, 2)]  # (K, N) hints: each selects its own binary


def test_inputs_are_random_and_seeded():
    first = matmul.make_inputs((3, 5, 7), "float16", "cpu", seed=1)
    again = matmul.make_inputs((3, 5, 7), "float16", "cpu", seed=1)
    other = matmul.make_inputs((3, 5, 7), "float16", "cpu", seed=2)
    assert torch.equal(first.a, again.a) and not torch.equal(first.a, other.a)
    assert bool((first.a != 0).all())


def test_relative_error_rejects_nan():
    expected = torch.ones(4)
    assert matmul.relative_error(torch.full((4,), float("nan")), expected) == float("inf")
    assert matmul.relative_error(expected * 1.01, expected) == pytest.approx(0.01)


# K hinted 2, N odd; N hinted 2, K odd; both multiples of 16; N hinted 8 and K hinted 4.
INTERPRETER_SHAPES = [(1, 33, 70), (19, 50, 45), (5, 64, 96), (6, 40, 52)]


def _sample_configs(count, seed):
    rng = np.random.default_rng(seed)
    configs = SPACE.sample(rng, count, unique=True)
    # always cover split-K and grouped launch order, the two paths with their own code
    configs.append({"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8, "SPLIT_K": 4, "num_warps": 4, "num_stages": 2})
    return configs


@pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU test below covers this")
@pytest.mark.parametrize("shape", INTERPRETER_SHAPES)
def test_interpreter_matches_reference_on_odd_shapes(shape):
    small = [c for c in _sample_configs(40, seed=sum(shape)) if c["BLOCK_M"] * c["BLOCK_N"] * c["BLOCK_K"] <= 64 * 64 * 64]
    assert len(small) >= 3
    for config in small[:4]:
        inputs = matmul.make_inputs(shape, "float16", "cpu", seed=3)
        inputs.out.fill_(float("nan"))
        output = matmul.run(config, inputs)
        error = matmul.relative_error(output, matmul.reference(inputs))
        assert error <= matmul.TOLERANCE["float16"], (config, error)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", matmul.DTYPES)
@pytest.mark.parametrize("shape", [(1, 4096, 4096), (77, 5000, 3000), (129, 160, 4100), (33, 1002, 514), (8, 777, 999)])
def test_gpu_matches_reference(dtype, shape):
    inputs = matmul.make_inputs(shape, dtype, "cuda", seed=4)
    expected = matmul.reference(inputs)
    configs = _sample_configs(4, seed=sum(shape))
    for config in configs:
        for _ in range(2):  # the second run calls the launch the first one bound
            inputs.out.fill_(float("nan"))
            error = matmul.relative_error(matmul.run(config, inputs), expected)
            assert error <= matmul.TOLERANCE[dtype], (config, error)
    assert len(inputs.launches) == len({tuple(config.items()) for config in configs})


SPLIT = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 1, "SPLIT_K": 2, "num_warps": 4, "num_stages": 2}
WHOLE = {**SPLIT, "SPLIT_K": 1}


def test_compile_only_sees_the_launch_that_run_makes(monkeypatch):
    """compile_only must compile the binary that run launches: pointers of the same dtypes (C's, the split-K
    workspace's fp32 and the tile counters' int32), the same integers and the same options, alignment hints included."""
    shape = (5, 40, 52)  # N hinted 8, K hinted 4
    for config in (WHOLE, SPLIT):
        (warm_args, warm_options), (launch_args, launch_options) = compile_and_launch(
            monkeypatch, matmul, "matmul_kernel", config, shape)
        assert warm_options == launch_options
        assert launch_options["ALIGN_N"] == 8 and launch_options["ALIGN_K"] == 4
        assert list(warm_args[:5]) == [arg.dtype for arg in launch_args[:5]]
        assert [arg.dtype for arg in launch_args[2:5]] == [torch.float16, torch.float32, torch.int32]
        assert list(warm_args[5:]) == list(launch_args[5:])


def test_run_builds_a_launch_once_per_config_and_tensors(monkeypatch):
    """A config's launch is built on its first run on these tensors and reused; a new workspace, another config or a
    copy of the inputs get one of their own, and only the LAUNCHES_KEPT latest are kept."""
    monkeypatch.setattr(matmul, "LAUNCHES_KEPT", 2)
    inputs = matmul.make_inputs((19, 50, 45), "float16", "cpu", seed=1)
    expected = matmul.reference(inputs)
    for _ in range(2):
        inputs.out.fill_(float("nan"))
        assert matmul.relative_error(matmul.run(SPLIT, inputs), expected) <= matmul.TOLERANCE["float16"]
    assert len(inputs.launches) == 1
    inputs.workspace = torch.zeros_like(inputs.workspace)
    assert matmul.relative_error(matmul.run(SPLIT, inputs), expected) <= matmul.TOLERANCE["float16"]
    assert len(inputs.launches) == 2
    inputs.out.fill_(float("nan"))
    assert matmul.relative_error(matmul.run(WHOLE, inputs), expected) <= matmul.TOLERANCE["float16"]
    assert [key[-1] for key in inputs.launches] == [tuple(SPLIT.items()), tuple(WHOLE.items())]
    assert [key[3] for key in inputs.launches] == [id(inputs.workspace)] * 2  # the first workspace's was dropped
    assert dataclasses.replace(inputs).launches == {}


def test_a_split_leaves_its_workspace_and_counters_zero_and_refuses_others():
    """Every split-K launch leaves the workspace and the tile counters as it found them, zero, so that the next one
    needs no zeroing (`split_k`); a split refuses a workspace of another shape."""
    inputs = matmul.make_inputs((19, 50, 45), "float16", "cpu", seed=1)
    expected = matmul.reference(inputs)
    for split_k in (2, 4, 8, 2):  # 8 splits of 45 leave some with no K to add
        inputs.out.fill_(float("nan"))
        error = matmul.relative_error(matmul.run({**SPLIT, "SPLIT_K": split_k}, inputs), expected)
        assert error <= matmul.TOLERANCE["float16"], (split_k, error)
        assert not inputs.workspace.any() and not inputs.tile_counts.any()
    inputs.workspace = torch.zeros(19, 49)
    with pytest.raises(ValueError, match=r"SPLIT_K=2 adds into an fp32 workspace of M x N = 19 x 50, got "
                                         r"torch.float32 \(19, 49\)"):
        matmul.run(SPLIT, inputs)
