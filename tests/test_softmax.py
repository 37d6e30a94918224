"""The softmax kernel: its resource model and space, its launch contract, its numerics under the interpreter (CPU)
or on a GPU; and a row-wise sweep (shape names rows, cols; bool and str parameters) through the collector, the
dataset file and replay."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tunebench.collect import sweep
from tunebench.kernels import KERNEL_INTERFACE, get_kernel, rowwise, softmax
from tunebench.measure.dataset import load_dataset
from tunebench.measure.replay import ReplayEvaluator
from tunebench.measure.result import Status

import stand_in_bench
from launch_recorder import LaunchRecorder

SPACE = softmax.config_space()
REPOSITORY = Path(__file__).resolve().parent.parent
STREAMED = {"BLOCK_SIZE": 1024, "ROW_IN_REGISTERS": False, "ROWS_PER_PROGRAM": 4, "num_warps": 8, "num_stages": 2,
            "LOOP_UNROLL": 2, "EVICTION_POLICY": "evict_first", "PERSISTENT": True, "PROGRAMS_PER_SM": 2}
IN_REGISTERS = {"BLOCK_SIZE": 4096, "ROW_IN_REGISTERS": True, "ROWS_PER_PROGRAM": 2, "num_warps": 16,
                "num_stages": 2, "LOOP_UNROLL": 1, "EVICTION_POLICY": "", "PERSISTENT": True, "PROGRAMS_PER_SM": 1}


def test_space_is_large_and_every_config_fits_the_resource_model():
    configs = SPACE.enumerate()
    assert 1000 <= len(configs) <= 1600
    for config in configs:
        usage = softmax.resource_usage(config)
        assert usage.row_values_per_thread <= rowwise.register_cap(config["num_warps"]) / 2
        assert usage.tile_elements_per_thread >= rowwise.HOPPER.vector_elements
        assert usage.shared_memory_bytes <= rowwise.HOPPER.shared_memory_per_block
    assert {c["ROW_IN_REGISTERS"] for c in configs} == {False, True}
    assert {c["PROGRAMS_PER_SM"] for c in configs if c["PERSISTENT"]} == {1, 2, 4, 8}
    assert {c["EVICTION_POLICY"] for c in configs} == {"", "evict_first", "evict_last"}
    assert max(c["BLOCK_SIZE"] for c in configs if c["ROW_IN_REGISTERS"]) == 16384  # nothing beside the rows


def test_resource_model_by_hand():
    usage = softmax.resource_usage(STREAMED)
    assert usage.tile_elements_per_thread == 4 * 1024 / 256  # 16
    assert usage.row_values_per_thread == 2 * 16  # two unrolled tiles in flight, nothing beside the rows
    assert usage.registers_per_thread == 72  # 1.5 * 32 + 24
    # one pipeline buffer of 2 unrolled 4 x 1024 tiles of 2 bytes, plus reduction scratch
    assert usage.shared_memory_bytes == 2 * 4 * 1024 * 2 + rowwise.SCRATCH_SHARED_MEMORY_BYTES
    assert SPACE.is_valid(STREAMED)
    assert SPACE.violations(dict(STREAMED, PROGRAMS_PER_SM=4)) == ["programs_fit_on_an_sm"]  # 4 x 256 x 72 > 65536

    usage = softmax.resource_usage(IN_REGISTERS)
    assert usage.row_values_per_thread == 2 * 4096 / 512  # the 2 x 4096 row tile over 512 threads
    assert usage.shared_memory_bytes == 2 * 4096 * 2 + rowwise.SCRATCH_SHARED_MEMORY_BYTES  # the row loop's tile
    assert SPACE.is_valid(IN_REGISTERS)

    # a 2 x 16384 tile: 128 values per thread at 8 warps (half of 255 is 127.5), 64 at 16 warps (half of 128)
    assert "row_registers" in SPACE.violations(dict(IN_REGISTERS, BLOCK_SIZE=16384, num_warps=8))
    assert SPACE.is_valid(dict(IN_REGISTERS, BLOCK_SIZE=16384))
    assert "warps_for_tile" in SPACE.violations(dict(STREAMED, ROWS_PER_PROGRAM=1, num_warps=16))
    assert "programs_fit_on_an_sm" in SPACE.violations(dict(IN_REGISTERS, PROGRAMS_PER_SM=8))  # 128 warps


def test_default_config_is_valid():
    assert SPACE.is_valid(softmax.DEFAULT_CONFIG)


def test_registry_and_bad_input():
    assert get_kernel("softmax") is softmax
    assert [attribute for attribute in KERNEL_INTERFACE if not hasattr(softmax, attribute)] == []
    assert softmax.SHAPE_NAMES == ("rows", "cols") and softmax.DTYPES == ("bfloat16", "float16")
    with pytest.raises(ValueError, match="rows=-1"):
        softmax.check_shape((-1, 8))
    with pytest.raises(ValueError, match=r"\(rows, cols\)"):
        softmax.check_shape((8,))
    with pytest.raises(ValueError, match="unknown dtype 'float64'"):
        softmax.make_inputs((2, 2), "float64", "cpu")


def test_cost_model():
    assert softmax.bytes_moved((3, 5), "float16") == 2 * 2 * 15
    assert softmax.flops((3, 5)) == 5 * 15


def test_specialization_follows_divisibility_of_cols_only():
    assert softmax.specialization((1, 8192)) == softmax.specialization((4096, 32000))
    assert softmax.specialization((1, 5000)) != softmax.specialization((1, 5120))
    assert softmax.specialization((1, 5000)) != softmax.specialization((1, 4100))  # the hint: 8 against 4
    assert len({softmax.specialization(shape) for shape in softmax.SHAPE_SETS["default"]}) == 2


def test_default_shapes():
    shapes = softmax.SHAPE_SETS["default"]
    assert len(shapes) >= 8 and len(set(shapes)) == len(shapes)
    assert {4096, 5120, 8192} <= {cols for _, cols in shapes}
    assert min(rows for rows, _ in shapes) == 1 and max(rows for rows, _ in shapes) == 32768
    assert any(cols % 16 for _, cols in shapes)
    assert any(cols > max(SPACE["BLOCK_SIZE"].values) for _, cols in shapes)  # the streamed fallback


def test_grid_is_persistent_and_never_larger_than_the_work():
    cpu = torch.device("cpu")
    assert rowwise.grid(dict(STREAMED, PERSISTENT=False), 10, cpu) == (3,)  # 4 rows per program
    assert rowwise.grid(STREAMED, 1000, cpu) == (STREAMED["PROGRAMS_PER_SM"] * rowwise.INTERPRETER_SM_COUNT,)
    assert rowwise.grid(STREAMED, 10, cpu) == (3,)


def test_compile_only_sees_the_launch_that_run_makes(monkeypatch):
    recorder = LaunchRecorder()
    monkeypatch.setattr(softmax, "softmax_kernel", recorder)
    shape = (5, 40)  # the alignment hint is 8
    softmax.compile_only(IN_REGISTERS, shape, "bfloat16")
    softmax.run(IN_REGISTERS, softmax.make_inputs(shape, "bfloat16", "cpu"))
    (warm_args, warm_options), (launch_args, launch_options) = recorder.calls["warmup"], recorder.calls["launch"]
    assert warm_options == launch_options
    assert list(warm_args) == [arg.dtype if isinstance(arg, torch.Tensor) else arg for arg in launch_args]


def test_inputs_are_random_and_seeded():
    first = softmax.make_inputs((3, 7), "float16", "cpu", seed=1)
    again = softmax.make_inputs((3, 7), "float16", "cpu", seed=1)
    other = softmax.make_inputs((3, 7), "float16", "cpu", seed=2)
    assert torch.equal(first.x, again.x) and not torch.equal(first.x, other.x)
    assert bool((first.x != 0).all())


def test_vendor_writes_the_output():
    inputs = softmax.make_inputs((5, 33), "float32", "cpu", seed=3)
    inputs.out.fill_(float("nan"))
    softmax.run_vendor(inputs)
    assert softmax.relative_error(inputs.out, softmax.reference(inputs)) <= softmax.TOLERANCE["float32"]


def _covering_configs(count, seed):
    """A seeded sample plus configs covering both row paths, persistence and several rows per program."""
    configs = [STREAMED, IN_REGISTERS, softmax.DEFAULT_CONFIG,
               dict(STREAMED, ROWS_PER_PROGRAM=1, num_warps=4, LOOP_UNROLL=1, num_stages=1, PERSISTENT=False,
                    PROGRAMS_PER_SM=1)]
    configs += SPACE.sample(np.random.default_rng(seed), count, unique=True)
    for config in configs:
        SPACE.check(config)
    return configs


# (1, 37): one row, odd width; (5, 100): a ragged last row block; (37, 257): more row blocks than the programs of a
# persistent grid (rowwise.INTERPRETER_SM_COUNT SMs), so they loop; (2, 4500): past the register tile of
# IN_REGISTERS (its streamed fallback), and five streamed tiles of 1024 with a ragged last.
INTERPRETER_SHAPES = [(1, 37), (5, 100), (37, 257), (2, 4500)]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU test below covers this")
@pytest.mark.parametrize("shape", INTERPRETER_SHAPES)
def test_interpreter_matches_reference_on_odd_shapes(shape):
    for config in _covering_configs(4, seed=sum(shape)):
        inputs = softmax.make_inputs(shape, "float16", "cpu", seed=5)
        inputs.out.fill_(float("nan"))
        error = softmax.relative_error(softmax.run(config, inputs), softmax.reference(inputs))
        assert error <= softmax.TOLERANCE["float16"], (config, error)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU test below covers this")
@pytest.mark.parametrize("config", [STREAMED, IN_REGISTERS], ids=["streamed", "in_registers"])
def test_large_logits_do_not_overflow(config):
    """Logits of +-400: exp overflows fp32 unless the row maximum is subtracted first."""
    inputs = softmax.make_inputs((3, 4500 if not config["ROW_IN_REGISTERS"] else 3000), "float32", "cpu", seed=6)
    inputs.x *= 100.0
    error = softmax.relative_error(softmax.run(config, inputs), softmax.reference(inputs))
    assert error <= softmax.TOLERANCE["float32"]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", softmax.DTYPES)
@pytest.mark.parametrize("shape", [(1, 4096), (77, 5000), (130, 3000), (3, 40000), (1000, 8192)])
def test_gpu_matches_reference(dtype, shape):
    for config in _covering_configs(3, seed=sum(shape)):
        inputs = softmax.make_inputs(shape, dtype, "cuda", seed=4)
        inputs.out.fill_(float("nan"))
        error = softmax.relative_error(softmax.run(config, inputs), softmax.reference(inputs))
        assert error <= softmax.TOLERANCE[dtype], (config, error)
    inputs.out.fill_(float("nan"))
    assert softmax.relative_error(softmax.run_vendor(inputs), softmax.reference(inputs)) <= softmax.TOLERANCE[dtype]


@pytest.mark.gpu
def test_gpu_compile_only_builds_the_binary_that_run_launches():
    compiled = softmax.compile_only(IN_REGISTERS, (7, 4096), "float16")
    assert compiled is not None and compiled.metadata.num_warps == IN_REGISTERS["num_warps"]


# --- a row-wise sweep through the collector, the dataset file and replay ------------------------------------------

class StandInBench(stand_in_bench.StandInBench):
    """Latencies from the config; configs that evict first fail to compile."""

    def latency_ms(self, config, shape):
        return shape[0] * 1e-3 + config["BLOCK_SIZE"] * 1e-6 + (0.0 if config["PERSISTENT"] else 0.5)

    def fails_to_compile(self, config):
        return config["EVICTION_POLICY"] == "evict_first"


SWEPT_SHAPES = [(4, 3000), (16, 4096)]


@pytest.fixture(scope="module")
def swept_dataset(tmp_path_factory):
    """A stand-in sweep of 30 softmax configs on two shapes, recorded by the collector."""
    out = tmp_path_factory.mktemp("sweep") / "softmax_stand_in.parquet"
    assert sweep("softmax", "bfloat16", SWEPT_SHAPES, out, limit_configs=30, seed=1, make_bench=StandInBench)
    return out


def test_sweep_dataset_and_replay_keep_row_shapes_and_str_parameters(swept_dataset):
    dataset = load_dataset(swept_dataset, kernel="softmax")
    assert dataset.shape_names == ("rows", "cols") and dataset.shapes() == SWEPT_SHAPES
    assert len(dataset.measurements) == 60 and len(dataset.vendor) == 2
    assert [parameter.name for parameter in dataset.parameters] == list(SPACE.names)
    recorded = dataset.configs((16, 4096))
    sampled = SPACE.sample(np.random.default_rng(1), 30, unique=True)
    assert sorted(map(SPACE.key, recorded)) == sorted(map(SPACE.key, sampled))  # str and bool values round-trip
    assert {type(config["EVICTION_POLICY"]) for config in recorded} == {str}
    assert {type(config["PERSISTENT"]) for config in recorded} == {bool}

    replay = ReplayEvaluator(dataset, (16, 4096))
    results = replay.evaluate(recorded)
    for config, result in zip(recorded, results):
        assert result.config == config
        assert (result.status is Status.COMPILE_ERROR) == (config["EVICTION_POLICY"] == "evict_first")
    default_policy = [config for config in recorded if config["EVICTION_POLICY"] == ""]
    assert default_policy and {result.status for result in replay.evaluate(default_policy)} == {Status.OK}


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the benchmark would run")
def test_bandwidth_benchmark_parses_and_needs_a_gpu(swept_dataset):
    script = [sys.executable, str(REPOSITORY / "benchmarks" / "bandwidth.py")]
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY / "lib")}
    assert subprocess.run([*script, "--help"], capture_output=True, env=environment).returncode == 0
    run = subprocess.run([*script, str(swept_dataset)], capture_output=True, text=True, env=environment)
    assert run.returncode == 2 and "needs a CUDA GPU" in run.stderr


def test_bandwidth_benchmark_resumes_a_killed_run_and_stops_when_told(swept_dataset, tmp_path):
    """The benchmark's loop with a stand-in measurement: a kill during the second shape keeps the first in the partial
    file; --stop-after-s 0 then starts no shape; the next run measures only the second shape and writes the report
    in the dataset's shape order, each shape's share against its own sitting's copy bandwidth."""
    spec = importlib.util.spec_from_file_location("bandwidth", REPOSITORY / "benchmarks" / "bandwidth.py")
    bandwidth = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bandwidth)
    dataset = load_dataset(swept_dataset)
    asked = []

    def measure(kernel, dtype, shape, best, fail_at=None):
        asked.append(tuple(shape))
        if tuple(shape) == fail_at:
            raise KeyboardInterrupt  # the process killed mid-shape
        return {"best": {"latency_ms": 0.5, "relative_error": 1e-3, "repeats_ms": [0.5], "error": ""}}

    def sitting(copy_gbs):
        return {"command": "python3 benchmarks/bandwidth.py x", "date": f"day {copy_gbs}", "device": "stand-in",
                "torch": "t", "triton": "t", "timing": {},
                "copy": {"bytes": 2 * 2**30, "latency_ms": 1.0, "bandwidth_gbs": copy_gbs}}

    arguments = bandwidth.parse_arguments([str(swept_dataset), "--out-dir", str(tmp_path)])
    first, second = (tuple(shape) for shape in dataset.shapes())
    with pytest.raises(KeyboardInterrupt):
        bandwidth.measure_dataset(swept_dataset, dataset, arguments, sitting(1000.0),
                                  lambda *a: measure(*a, fail_at=second), float("inf"))
    partial = tmp_path / f"{swept_dataset.stem}.partial.json"
    assert [tuple(entry["shape"]) for entry in json.loads(partial.read_text())["shapes"]] == [first]
    assert not bandwidth.measure_dataset(swept_dataset, dataset, arguments, sitting(2000.0), measure, 0.0)
    assert asked == [first, second], "a run past its deadline starts no shape"
    assert bandwidth.measure_dataset(swept_dataset, dataset, arguments, sitting(4000.0), measure, float("inf"))
    assert asked == [first, second, second]
    report = json.loads((tmp_path / f"{swept_dataset.stem}.json").read_text())
    assert [tuple(entry["shape"]) for entry in report["shapes"]] == [first, second]
    moved = [softmax.bytes_moved(shape, "bfloat16") for shape in (first, second)]
    shares = [entry["methods"]["best"]["share_of_copy"] for entry in report["shapes"]]
    assert shares == pytest.approx([moved[0] / 0.5 / 1e6 / 1000.0, moved[1] / 0.5 / 1e6 / 4000.0])
    # the stopped run measured nothing, so its sitting was never kept
    assert [entry["sitting"] for entry in report["shapes"]] == [0, 1]
    assert [entry["date"] for entry in report["sittings"]] == ["day 1000.0", "day 4000.0"]
    assert not partial.exists()
    assert "Measured in 2 sittings" in (tmp_path / f"{swept_dataset.stem}.md").read_text()
