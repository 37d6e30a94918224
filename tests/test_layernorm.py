"""The layer-norm kernel: its resource model and space, its launch contract, and its numerics under the
interpreter (CPU) or on a GPU."""

import numpy as np
import pytest
import torch

from tunebench.kernels import KERNEL_INTERFACE, get_kernel, layernorm, rowwise

from launch_recorder import LaunchRecorder

SPACE = layernorm.config_space()
STREAMED = {"BLOCK_SIZE": 1024, "ROW_IN_REGISTERS": False, "ROWS_PER_PROGRAM": 2, "num_warps": 4, "num_stages": 2,
            "LOOP_UNROLL": 2, "EVICTION_POLICY": "evict_last", "PERSISTENT": True, "PROGRAMS_PER_SM": 2}
IN_REGISTERS = {"BLOCK_SIZE": 2048, "ROW_IN_REGISTERS": True, "ROWS_PER_PROGRAM": 4, "num_warps": 8,
                "num_stages": 1, "LOOP_UNROLL": 1, "EVICTION_POLICY": "evict_first", "PERSISTENT": False,
                "PROGRAMS_PER_SM": 1}


def test_space_is_large_and_every_config_fits_the_resource_model():
    configs = SPACE.enumerate()
    assert 1000 <= len(configs) <= 1500
    for config in configs:
        usage = layernorm.resource_usage(config)
        assert usage.row_values_per_thread <= rowwise.register_cap(config["num_warps"]) / 2
        assert usage.tile_elements_per_thread >= rowwise.HOPPER.vector_elements
        assert usage.shared_memory_bytes <= rowwise.HOPPER.shared_memory_per_block
    assert {c["ROW_IN_REGISTERS"] for c in configs} == {False, True}
    assert {c["PROGRAMS_PER_SM"] for c in configs if c["PERSISTENT"]} == {1, 2, 4, 8}
    assert {c["EVICTION_POLICY"] for c in configs} == {"", "evict_first", "evict_last"}
    # weight and bias share the registers: no tile of 16384 columns fits beside them
    assert max(c["BLOCK_SIZE"] for c in configs) == 8192


def test_resource_model_by_hand():
    usage = layernorm.resource_usage(STREAMED)
    threads = 32 * 4
    assert usage.tile_elements_per_thread == 2 * 1024 / threads  # 16
    # two unrolled iterations in flight, each a 2-row tile plus weight and bias: 2 * (16 + 2 * 8)
    assert usage.row_values_per_thread == 2 * (16 + 2 * 1024 / threads)
    assert usage.registers_per_thread == 120  # 1.5 * 64 + 24
    # one pipeline buffer of what the output loop loads per (unrolled) iteration, plus reduction scratch
    assert usage.shared_memory_bytes == 2 * (2 + 2) * 1024 * 2 + rowwise.SCRATCH_SHARED_MEMORY_BYTES
    assert SPACE.is_valid(STREAMED)

    usage = layernorm.resource_usage(IN_REGISTERS)
    # the row path holds a 4 x 2048 tile plus weight and bias over 256 threads; the fallback streams one tile
    assert usage.row_values_per_thread == 4 * 2048 / 256 + 2 * 2048 / 256
    assert usage.shared_memory_bytes == rowwise.SCRATCH_SHARED_MEMORY_BYTES  # num_stages 1: no pipeline
    assert SPACE.is_valid(IN_REGISTERS)

    # 64 + 2 * 32 row values per thread: one more than half of the 255 registers of an 8-warp program
    assert "row_registers" in SPACE.violations(dict(IN_REGISTERS, BLOCK_SIZE=8192, ROWS_PER_PROGRAM=2))
    # at 16 warps a thread gets 65536 / 512 = 128 registers, so 32 + 32 row values are just allowed
    assert rowwise.register_cap(16) == 128
    assert SPACE.is_valid(dict(IN_REGISTERS, BLOCK_SIZE=8192, ROWS_PER_PROGRAM=2, num_warps=16))
    idle_lanes = dict(STREAMED, ROWS_PER_PROGRAM=1, num_warps=16, LOOP_UNROLL=1)  # 2 elements per thread
    assert "warps_for_tile" in SPACE.violations(idle_lanes)
    small_shared_memory = layernorm.config_space(rowwise.DeviceLimits(shared_memory_per_block=16384))
    assert "shared_memory" in small_shared_memory.violations(STREAMED)  # 20,480 bytes
    too_many_warps = dict(STREAMED, num_warps=16, ROWS_PER_PROGRAM=4, LOOP_UNROLL=1, PROGRAMS_PER_SM=8)  # 128
    assert SPACE.violations(too_many_warps) == ["programs_fit_on_an_sm"]
    too_many_registers = dict(STREAMED, BLOCK_SIZE=2048, ROWS_PER_PROGRAM=4, num_warps=8, LOOP_UNROLL=1,
                              PROGRAMS_PER_SM=4)
    assert layernorm.resource_usage(too_many_registers).registers_per_thread == 96  # 4 x 256 x 96 > 65536
    assert SPACE.violations(too_many_registers) == ["programs_fit_on_an_sm"]
    assert SPACE.is_valid(dict(too_many_registers, PROGRAMS_PER_SM=2))


def test_canonical_constraints_keep_one_config_per_behaviour():
    assert "grid_size_only_when_persistent" in SPACE.violations(dict(IN_REGISTERS, PROGRAMS_PER_SM=2))
    assert "unroll_only_when_streaming" in SPACE.violations(dict(IN_REGISTERS, LOOP_UNROLL=2))
    assert "stages_need_a_row_loop" in SPACE.violations(dict(IN_REGISTERS, num_stages=2))
    assert SPACE.is_valid(dict(IN_REGISTERS, num_stages=2, PERSISTENT=True))


def test_default_config_is_valid():
    assert SPACE.is_valid(layernorm.DEFAULT_CONFIG)


def test_registry_and_bad_input():
    assert get_kernel("layernorm") is layernorm
    assert [attribute for attribute in KERNEL_INTERFACE if not hasattr(layernorm, attribute)] == []
    assert layernorm.SHAPE_NAMES == ("rows", "cols") and layernorm.DTYPES == ("bfloat16", "float16")
    with pytest.raises(ValueError, match="cols=0"):
        layernorm.check_shape((4, 0))
    with pytest.raises(ValueError, match=r"\(rows, cols\)"):
        layernorm.check_shape((4, 4, 4))
    with pytest.raises(ValueError, match="rows=2.5"):
        layernorm.check_shape((2.5, 4))
    with pytest.raises(ValueError, match="unknown dtype 'int8'"):
        layernorm.make_inputs((2, 2), "int8", "cpu")


def test_cost_model():
    assert layernorm.bytes_moved((3, 5), "bfloat16") == 2 * (3 * 5 + 3 * 5 + 5 + 5)
    assert layernorm.flops((3, 5)) == 7 * 15


def test_specialization_follows_divisibility_of_cols_only():
    assert layernorm.specialization((1, 4096)) == layernorm.specialization((32768, 8192))
    assert layernorm.specialization((1, 4096)) != layernorm.specialization((1, 3000))
    assert layernorm.specialization((1, 3000)) != layernorm.specialization((1, 4100))  # the hint: 8 against 4
    specializations = {layernorm.specialization(shape) for shape in layernorm.SHAPE_SETS["default"]}
    assert len(specializations) == 2  # each binary is compiled twice over the whole dataset


def test_default_shapes():
    shapes = layernorm.SHAPE_SETS["default"]
    assert len(shapes) >= 8 and len(set(shapes)) == len(shapes)
    assert {4096, 5120, 8192} <= {cols for _, cols in shapes}
    assert min(rows for rows, _ in shapes) == 1 and max(rows for rows, _ in shapes) == 32768
    assert any(cols % 16 for _, cols in shapes)
    largest_tile = max(c["BLOCK_SIZE"] for c in SPACE.enumerate() if c["ROW_IN_REGISTERS"])
    assert any(cols > largest_tile for _, cols in shapes)  # the streamed fallback of the in-registers configs


def test_compile_only_sees_the_launch_that_run_makes(monkeypatch):
    """compile_only must compile the binary that run launches: same argument types, integers and options."""
    recorder = LaunchRecorder()
    monkeypatch.setattr(layernorm, "layernorm_kernel", recorder)
    shape = (3, 40)
    layernorm.compile_only(STREAMED, shape, "float16")
    layernorm.run(STREAMED, layernorm.make_inputs(shape, "float16", "cpu"))
    (warm_args, warm_options), (launch_args, launch_options) = recorder.calls["warmup"], recorder.calls["launch"]
    assert warm_options == launch_options
    as_compiled = [arg.dtype if isinstance(arg, torch.Tensor) else arg for arg in launch_args]
    assert list(warm_args) == as_compiled


def test_inputs_are_random_and_seeded():
    first = layernorm.make_inputs((3, 7), "float16", "cpu", seed=1)
    again = layernorm.make_inputs((3, 7), "float16", "cpu", seed=1)
    other = layernorm.make_inputs((3, 7), "float16", "cpu", seed=2)
    assert torch.equal(first.x, again.x) and not torch.equal(first.x, other.x)
    for tensor in (first.x, first.weight, first.bias):
        assert bool((tensor != 0).all())
    assert not torch.equal(first.weight, first.bias)


def test_vendor_writes_the_output():
    inputs = layernorm.make_inputs((5, 33), "float32", "cpu", seed=3)
    inputs.out.fill_(float("nan"))
    layernorm.run_vendor(inputs)
    assert layernorm.relative_error(inputs.out, layernorm.reference(inputs)) <= layernorm.TOLERANCE["float32"]


def test_relative_error_rejects_nan():
    expected = torch.ones(4)
    assert layernorm.relative_error(torch.full((4,), float("nan")), expected) == float("inf")
    assert layernorm.relative_error(expected * 1.01, expected) == pytest.approx(0.01)


def _covering_configs(count, seed):
    """A seeded sample plus configs covering both row paths, persistence and several rows per program."""
    configs = [STREAMED, IN_REGISTERS, dict(IN_REGISTERS, PERSISTENT=True, num_stages=2), layernorm.DEFAULT_CONFIG,
               dict(STREAMED, ROWS_PER_PROGRAM=1, num_stages=1, PERSISTENT=False, PROGRAMS_PER_SM=1)]
    configs += SPACE.sample(np.random.default_rng(seed), count, unique=True)
    for config in configs:
        SPACE.check(config)
    return configs


# (1, 37): one row, odd width; (5, 100): a ragged last row block; (37, 257): more row blocks than the programs of a
# persistent grid (rowwise.INTERPRETER_SM_COUNT SMs), so they loop; (2, 2500): past the register tile of the
# in-registers configs (their streamed fallback), and three streamed tiles of 1024 with a ragged last.
INTERPRETER_SHAPES = [(1, 37), (5, 100), (37, 257), (2, 2500)]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU test below covers this")
@pytest.mark.parametrize("shape", INTERPRETER_SHAPES)
def test_interpreter_matches_reference_on_odd_shapes(shape):
    for config in _covering_configs(4, seed=sum(shape)):
        inputs = layernorm.make_inputs(shape, "float16", "cpu", seed=5)
        inputs.out.fill_(float("nan"))
        error = layernorm.relative_error(layernorm.run(config, inputs), layernorm.reference(inputs))
        assert error <= layernorm.TOLERANCE["float16"], (config, error)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU test below covers this")
@pytest.mark.parametrize("config", [STREAMED, IN_REGISTERS], ids=["streamed", "in_registers"])
def test_statistics_survive_a_large_mean(config):
    """x = 1000 + a ramp from -2 to 2 along the row + N(0, 1): a sum-of-squares variance would lose it to
    cancellation in fp32, and merging tiles without the spread of their means would miss the ramp's variance."""
    inputs = layernorm.make_inputs((3, 2500 if not config["ROW_IN_REGISTERS"] else 1500), "float32", "cpu", seed=6)
    inputs.x += 1000.0 + torch.linspace(-2.0, 2.0, inputs.x.shape[1])
    expected = torch.nn.functional.layer_norm(inputs.x.double(), (inputs.x.shape[1],), inputs.weight.double(),
                                              inputs.bias.double(), layernorm.EPS)
    assert layernorm.relative_error(layernorm.run(config, inputs), expected) <= 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", layernorm.DTYPES)
@pytest.mark.parametrize("shape", [(1, 4096), (77, 5000), (130, 3000), (3, 20000), (1000, 8192)])
def test_gpu_matches_reference(dtype, shape):
    for config in _covering_configs(3, seed=sum(shape)):
        inputs = layernorm.make_inputs(shape, dtype, "cuda", seed=4)
        inputs.out.fill_(float("nan"))
        error = layernorm.relative_error(layernorm.run(config, inputs), layernorm.reference(inputs))
        assert error <= layernorm.TOLERANCE[dtype], (config, error)
    inputs.out.fill_(float("nan"))
    vendor_error = layernorm.relative_error(layernorm.run_vendor(inputs), layernorm.reference(inputs))
    assert vendor_error <= layernorm.TOLERANCE[dtype]


@pytest.mark.gpu
def test_gpu_compile_only_builds_the_binary_that_run_launches():
    compiled = layernorm.compile_only(STREAMED, (7, 4096), "bfloat16")
    assert compiled is not None and compiled.metadata.num_warps == STREAMED["num_warps"]
