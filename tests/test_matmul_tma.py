"""The TMA GEMM: its resource model and space, its shape rules, and its numerics under the interpreter or on a GPU."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tunebench.kernels import get_kernel, launch_parameters, matmul, matmul_tma

from launch_recorder import compile_and_launch

LIB = Path(__file__).resolve().parents[1] / "lib"
SPACE = matmul_tma.config_space()
BIG = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "PROGRAMS_PER_SM": 1, "WARP_SPECIALIZE": True,
       "FLATTEN": False, "EPILOGUE_SPLIT": 2, "WIDEN": False, "TALL": False, "SPLIT_K": 1, "num_warps": 8,
       "num_stages": 4}
# 128 x 192 output tiles (128 + 64 columns): 132 of them at 768 x 4096, one per H200 SM.
WIDE = dict(BIG, BLOCK_N=128, PROGRAMS_PER_SM=0, WARP_SPECIALIZE=False, WIDEN=True, num_warps=4, num_stages=4)
# 192 x 128 output tiles (128 + 64 rows), cuBLAS's tile at 768 x 4096 x 14336: 4 x 32 = 128 of them.
TALL = dict(WIDE, WIDEN=False, TALL=True)
# The plain 64 x 64 tile a split of K takes, a program per tile and split (SPLIT_K set where used).
SPLIT = dict(BIG, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, PROGRAMS_PER_SM=0, WARP_SPECIALIZE=False, EPILOGUE_SPLIT=1,
             num_warps=4, num_stages=3)
SPLIT_8 = dict(SPLIT, BLOCK_K=128, SPLIT_K=8, num_stages=4)
TALL_PERSISTENT = dict(TALL, BLOCK_M=256, BLOCK_K=32, PROGRAMS_PER_SM=1, num_warps=8)  # 384 x 128, two warp groups


def test_space_is_large_and_every_config_fits_the_resource_model():
    configs = SPACE.enumerate()
    assert len(configs) >= 5000
    for config in configs:
        assert matmul_tma.shared_memory_bytes(config) <= matmul.HOPPER.shared_memory_bytes
        assert matmul_tma.accumulator_elements_per_thread(config) <= (
            192 if config["WIDEN"] or config["TALL"] else 128)
        assert config["PROGRAMS_PER_SM"] > 0 or not config["FLATTEN"]
        assert config["EPILOGUE_SPLIT"] == 2 or not (config["WIDEN"] or config["TALL"])
        assert not (config["WIDEN"] and config["TALL"])
        assert config["SPLIT_K"] == 1 or (config["PROGRAMS_PER_SM"] == 0 and config["EPILOGUE_SPLIT"] == 1 and not (
            config["WARP_SPECIALIZE"] or config["WIDEN"] or config["TALL"]))
    assert {matmul_tma.tile_columns(config) for config in configs} == {64, 96, 128, 192, 256, 384}
    assert {matmul_tma.tile_rows(config) for config in configs} == {64, 96, 128, 192, 256, 384}
    # the space before WIDEN joined it (stop 56's sweep measured 5,440 a shape), before TALL joined it (7,880), and
    # before SPLIT_K joined it (10,300, as every H100 sweep of stops 85 to 90 measured)
    whole_k = [config for config in configs if config["SPLIT_K"] == 1]
    assert sum(not (config["WIDEN"] or config["TALL"]) for config in whole_k) == 5440
    assert sum(not config["TALL"] for config in whole_k) == 7880
    assert len(whole_k) == 10300 and {config["SPLIT_K"] for config in configs} == {1, 2, 4, 8}


def test_resource_model_by_hand():
    # 4 stages of a 128x64 and a 64x256 tile, and half the 128x256 output staged for the store
    assert matmul_tma.shared_memory_bytes(BIG) == 4 * (128 * 64 + 64 * 256) * 2 + 128 * 128 * 2  # 229,376
    assert SPACE.is_valid(BIG)
    assert "shared_memory" in SPACE.violations(dict(BIG, EPILOGUE_SPLIT=1))  # 262,144 bytes
    assert "accumulator_registers" in SPACE.violations(dict(BIG, num_warps=4))
    # a widened tile stages 1.5 x the B block: 4 x (128*64 + 64*192) x 2 + 128*64 x 2, and holds 192 per thread
    assert matmul_tma.shared_memory_bytes(WIDE) == 4 * (128 * 64 + 64 * 192) * 2 + 128 * 64 * 2  # 180,224
    assert matmul_tma.accumulator_elements_per_thread(WIDE) == 128 * 192 / 128
    assert SPACE.is_valid(WIDE) and SPACE.violations(dict(WIDE, BLOCK_M=256, num_stages=2)) == ["accumulator_registers"]
    assert SPACE.violations(dict(WIDE, EPILOGUE_SPLIT=1)) == ["widen_needs_split_epilogue"]
    assert matmul_tma.programs(WIDE, (768, 4096, 14336), 132) == 6 * 22
    assert matmul_tma.tile_columns(BIG) == matmul_tma.tile_columns(dict(BIG, WIDEN=False)) == 256
    # a tall tile stages 1.5 x the A block, and both its row blocks' column halves for the store
    assert matmul_tma.shared_memory_bytes(TALL) == 4 * (192 * 64 + 64 * 128) * 2 + 192 * 64 * 2  # 188,416
    assert matmul_tma.accumulator_elements_per_thread(TALL) == 192 * 128 / 128
    assert matmul_tma.programs(TALL, (768, 4096, 14336), 132) == 4 * 32
    assert matmul_tma.tile_rows(TALL) == 192 and matmul_tma.tile_rows(BIG) == matmul_tma.tile_rows(
        {name: value for name, value in BIG.items() if name != "TALL"}) == 128  # recorded before TALL: not tall
    assert SPACE.is_valid(TALL) and SPACE.violations(dict(TALL, EPILOGUE_SPLIT=1)) == ["tall_needs_split_epilogue"]
    assert "widen_or_tall" in SPACE.violations(dict(TALL, WIDEN=True))
    with pytest.raises(ValueError, match="WIDEN and TALL exclude each other"):
        matmul_tma.run(dict(TALL, WIDEN=True), matmul_tma.make_inputs((8, 16, 16), "float16", "cpu"))
    with pytest.raises(ValueError, match="WIDEN needs EPILOGUE_SPLIT=2"):
        matmul_tma.run(dict(WIDE, EPILOGUE_SPLIT=1), matmul_tma.make_inputs((8, 16, 16), "float16", "cpu"))
    assert "flatten_needs_persistence" in SPACE.violations(dict(BIG, PROGRAMS_PER_SM=0, FLATTEN=True))
    # split-K: a program per tile and split of K, the plain tile alone
    split = dict(SPLIT, SPLIT_K=4)
    assert SPACE.is_valid(split) and matmul_tma.programs(split, (36, 616, 13192), 132) == 1 * 10 * 4
    before_split_k = {name: value for name, value in BIG.items() if name != "SPLIT_K"}
    assert matmul_tma.splits_k(split) == 4 and matmul_tma.splits_k(before_split_k) == 1  # recorded before: whole K
    for other in (dict(PROGRAMS_PER_SM=1), dict(EPILOGUE_SPLIT=2), dict(WARP_SPECIALIZE=True)):
        assert SPACE.violations(dict(split, **other)) == ["split_k_plain"], other
    assert "split_k_plain" in SPACE.violations(dict(WIDE, SPLIT_K=2))


def test_registry_and_bad_input():
    assert get_kernel("matmul_tma") is matmul_tma
    assert launch_parameters("matmul_tma") == ("PROGRAMS_PER_SM",) and launch_parameters("matmul") == ()
    assert launch_parameters("softmax") == ("PERSISTENT", "PROGRAMS_PER_SM")
    assert launch_parameters("convolution") == ()  # a Kernel Tuner cache's kernel: every config its own binary
    with pytest.raises(ValueError, match=r"N=4100 must be a multiple of 8"):
        matmul_tma.check_shape((16, 4100, 4096))
    with pytest.raises(ValueError, match=r"K=1001 must be a multiple of 8"):
        matmul_tma.make_inputs((16, 4096, 1001), "float16", "cpu")
    with pytest.raises(ValueError, match="K=0"):
        matmul_tma.check_shape((4, 8, 0))
    with pytest.raises(ValueError, match="unknown dtype 'int8'"):
        matmul_tma.make_inputs((2, 8, 8), "int8", "cpu")
    inputs = matmul_tma.make_inputs((8, 16, 16), "float16", "cpu")
    inputs.b = inputs.b.t().contiguous().t()
    with pytest.raises(ValueError, match="contiguous row-major"):
        matmul_tma.run(BIG, inputs)


def test_grid_is_a_program_per_tile_or_capped_per_multiprocessor():
    one_per_tile = dict(BIG, PROGRAMS_PER_SM=0)
    assert matmul_tma.programs(one_per_tile, (4096, 4096, 4096), 132) == 32 * 16
    assert matmul_tma.programs(BIG, (4096, 4096, 4096), 132) == 132
    assert matmul_tma.programs(dict(BIG, PROGRAMS_PER_SM=2), (4096, 4096, 4096), 132) == 264
    assert matmul_tma.programs(dict(BIG, PROGRAMS_PER_SM=2), (200, 512, 64), 132) == 2 * 2  # fewer tiles than SMs


def test_specialization_follows_divisibility_of_n_and_k_by_16():
    assert matmul_tma.specialization((1, 4096, 4096)) == matmul_tma.specialization((8192, 4096, 4096))
    assert matmul_tma.specialization((16, 4096, 4104)) == (True, False)


def _descriptor_fields(arg):
    if isinstance(arg, matmul_tma.TensorDescriptor):
        return arg.base.dtype, list(arg.shape), list(arg.strides), list(arg.block_shape)
    if isinstance(arg, torch.Tensor):  # the workspace: only its dtype compiles in
        return arg.dtype
    return arg


def test_compile_only_sees_the_launch_that_run_makes(monkeypatch):
    """compile_only must compile the binary that run launches: descriptors of the same dtypes, shapes, strides and
    blocks, the same integers and the same options."""
    shape = (37, 72, 56)
    for config, extra_block in ((BIG, [64, 256]), (WIDE, [64, 64]), (TALL, [64, 128])):  # B's own again unless WIDE
        (warm_args, warm_options), (launch_args, launch_options) = compile_and_launch(
            monkeypatch, matmul_tma, "matmul_tma_kernel", config, shape)
        assert warm_options == launch_options
        assert [_descriptor_fields(arg) for arg in warm_args] == [_descriptor_fields(arg) for arg in launch_args]
        assert _descriptor_fields(launch_args[3]) == (torch.float16, [56, 72], [72, 1], extra_block)
        assert _descriptor_fields(launch_args[4]) == (torch.float16, [37, 72], [72, 1],
                                                      [128, config["BLOCK_N"] // 2])  # the split epilogue
        extra_rows = 64 if config["TALL"] else 128  # TALL's extra row block; else A's and C's own descriptors again
        assert _descriptor_fields(launch_args[1]) == (torch.float16, [37, 56], [56, 1], [extra_rows, 64])
        assert _descriptor_fields(launch_args[5]) == (torch.float16, [37, 72], [72, 1],
                                                      [extra_rows, config["BLOCK_N"] // 2])
    (warm_args, warm_options), (launch_args, launch_options) = compile_and_launch(
        monkeypatch, matmul_tma, "matmul_tma_kernel", dict(SPLIT, SPLIT_K=2), shape)
    assert warm_options == launch_options and launch_options["SPLIT_K"] == 2
    assert [_descriptor_fields(arg) for arg in warm_args] == [_descriptor_fields(arg) for arg in launch_args]
    # C, the workspace and the tile counters, then M, N, K
    assert [arg.dtype for arg in launch_args[6:9]] == [torch.float16, torch.float32, torch.int32]
    assert tuple(launch_args[9:]) == shape


def test_run_builds_a_launch_once_per_config_and_tensors(monkeypatch):
    """A config's launch is built on its first run on these tensors and reused; new tensors, another config or a copy
    of the inputs get one of their own, and only the LAUNCHES_KEPT latest are kept."""
    monkeypatch.setattr(matmul, "LAUNCHES_KEPT", 2)
    inputs = matmul_tma.make_inputs((37, 72, 56), "float16", "cpu", seed=1)
    expected = matmul_tma.reference(inputs)
    first, second = _small_configs(2, seed=1)
    for _ in range(2):
        inputs.out.fill_(float("nan"))
        assert matmul_tma.relative_error(matmul_tma.run(first, inputs), expected) <= matmul_tma.TOLERANCE["float16"]
    assert len(inputs.launches) == 1
    inputs.out = torch.empty_like(inputs.out)
    assert matmul_tma.relative_error(matmul_tma.run(first, inputs), expected) <= matmul_tma.TOLERANCE["float16"]
    assert len(inputs.launches) == 2
    matmul_tma.run(second, inputs)
    assert [key[-1] for key in inputs.launches] == [tuple(first.items()), tuple(second.items())]
    assert [key[2] for key in inputs.launches] == [id(inputs.out)] * 2  # the first output's launch was dropped
    assert dataclasses.replace(inputs).launches == {}


def test_inputs_have_the_split_k_buffers_and_a_split_refuses_others():
    inputs = matmul_tma.make_inputs((4, 8, 8), "float16", "cpu")
    assert inputs.workspace.shape == (4, 8) and inputs.workspace.dtype == torch.float32
    assert inputs.tile_counts.dtype == torch.int32 and not inputs.workspace.any() and not inputs.tile_counts.any()
    kept = inputs.tile_counts
    inputs.workspace = torch.empty(0)
    with pytest.raises(ValueError, match=r"SPLIT_K=2 adds into an fp32 workspace of M x N = 4 x 8, got "
                                         r"torch.float32 \(0,\)"):
        matmul_tma.run(dict(SPLIT, SPLIT_K=2), inputs)
    inputs.workspace, inputs.tile_counts = torch.zeros(4, 8), kept.to(torch.int64)
    with pytest.raises(ValueError, match=r"SPLIT_K=2 counts splits per tile in at least 1 int32 counters for M x N = "
                                         r"4 x 8, got torch.int64 of 1"):
        matmul_tma.run(dict(SPLIT, SPLIT_K=2), inputs)


def _small_configs(count, seed):
    rng = np.random.default_rng(seed)
    configs = [c for c in SPACE.sample(rng, 400, unique=True) if c["BLOCK_M"] * c["BLOCK_N"] * c["BLOCK_K"] <= 64 ** 3]
    # always cover a persistent walk over several tiles and the split epilogue, widened tiles (64 x 96: N = 72 and 264
    # end inside the extra block, N = 128 inside the first block of a second tile) and tall ones (96 x 64: M = 70 ends
    # inside the extra rows, 37 inside the first block, 64 at its end)
    configs.insert(0, dict(BIG, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, EPILOGUE_SPLIT=2, PROGRAMS_PER_SM=1))
    configs.insert(1, dict(WIDE, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, PROGRAMS_PER_SM=1, FLATTEN=True))
    configs.insert(2, dict(WIDE, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32))
    configs.insert(3, dict(TALL, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, PROGRAMS_PER_SM=1, FLATTEN=True))
    configs.insert(4, dict(TALL, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32))
    configs.insert(5, dict(SPLIT, SPLIT_K=4))  # 2 K steps of 32 at K = 56 and 40: two of the four splits add nothing
    return configs[:count]


# N and K multiples of 8 but not 16, M off the tiles; M, N and K multiples of 64; more tiles than programs.
INTERPRETER_SHAPES = [(37, 72, 56), (64, 128, 64), (70, 264, 40)]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU test below covers this")
@pytest.mark.parametrize("shape", INTERPRETER_SHAPES)
def test_interpreter_matches_reference(shape):
    for config in _small_configs(6, seed=sum(shape)):
        inputs = matmul_tma.make_inputs(shape, "float16", "cpu", seed=3)
        inputs.out.fill_(float("nan"))
        output = matmul_tma.run(config, inputs)
        error = matmul_tma.relative_error(output, matmul_tma.reference(inputs))
        assert error <= matmul_tma.TOLERANCE["float16"], (config, error)


# Configs the H200 sweep (results/datasets/matmul_tma_bfloat16_h200.parquet) recorded as correct at 2048^3 and 4096^3:
# a program per tile; the sweep's fastest at 4096^3; warp-specialized and persistent with 8 and 4 warps. Random
# samples would also draw the warp-specialized 4-warp configs Triton 3.6 fails to compile or miscompiles there. Then
# two split-K configs (stop 90).
GPU_CONFIGS = [
    dict(BIG, BLOCK_M=64, BLOCK_N=128, BLOCK_K=32, GROUP_M=1, PROGRAMS_PER_SM=0, WARP_SPECIALIZE=False,
         EPILOGUE_SPLIT=1, num_warps=4, num_stages=3),
    dict(BIG, WARP_SPECIALIZE=False, FLATTEN=True),
    dict(BIG, BLOCK_M=256, BLOCK_N=128, PROGRAMS_PER_SM=2, FLATTEN=True, num_stages=3),
    dict(BIG, BLOCK_M=64, BLOCK_N=64, BLOCK_K=128, GROUP_M=1, FLATTEN=True, EPILOGUE_SPLIT=1, num_warps=4,
         num_stages=2),
    WIDE,  # widened tiles: a program per tile, and persistent with two warp groups
    dict(WIDE, PROGRAMS_PER_SM=1, FLATTEN=True, num_warps=8, num_stages=3),
    TALL,  # tall tiles: a program per tile, and persistent 384 x 128 with two warp groups
    TALL_PERSISTENT,
    SPLIT_8,  # split-K, the plain tile: K in 8 runs added by atomics
    dict(SPLIT, BLOCK_N=128, GROUP_M=1, SPLIT_K=2),
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", matmul_tma.DTYPES)
@pytest.mark.parametrize("shape", [(1, 4096, 4096), (77, 5000, 3000), (4096, 4096, 4096), (333, 1000, 520)])
def test_gpu_matches_reference(dtype, shape):
    for config in GPU_CONFIGS:
        assert SPACE.is_valid(config)
        inputs = matmul_tma.make_inputs(shape, dtype, "cuda", seed=4)
        inputs.out.fill_(float("nan"))
        output = matmul_tma.run(config, inputs)
        error = matmul_tma.relative_error(output, matmul_tma.reference(inputs))
        assert error <= matmul_tma.TOLERANCE[dtype], (config, error)


@pytest.mark.gpu
def test_gpu_compile_only_builds_the_binary_that_run_launches_for_any_m():
    """The binary compile_only makes is the one a launch uses, and M (not specialized) does not change it."""
    config, shape = GPU_CONFIGS[1], (333, 1000, 520)
    compiled = matmul_tma.compile_only(config, shape, "bfloat16")
    assert compiled.hash == matmul_tma.compile_only(config, (4096, 1000, 520), "bfloat16").hash
    inputs = matmul_tma.make_inputs(shape, "bfloat16", "cuda")
    launched = matmul_tma.matmul_tma_kernel[(1,)](
        *matmul_tma.kernel_arguments(config, inputs.a, inputs.b, inputs.out, inputs.workspace, inputs.tile_counts,
                                     shape), **matmul_tma._launch_arguments(config))
    assert launched.hash == compiled.hash


# Compiled for sm_90 through ptxas on any machine, in a fresh interpreter without TRITON_INTERPRET (as in
# test_cross_compile.py): widened and tall tiles build, and the resource model's shared memory matches the compiler's.
CROSS_COMPILE = """
import functools, json, os, sys, tempfile
from pathlib import Path
from triton.backends.compiler import GPUTarget
from tunebench.measure import live
from tunebench.measure.workers import Worker, start_worker_server

if __name__ == "__main__":
    start_worker_server(live.worker_modules("matmul_tma"), wait=True)
    os.environ["TRITON_CACHE_DIR"] = cache = tempfile.mkdtemp()
    worker = Worker(functools.partial(live._compile_handler, "matmul_tma", "bfloat16", GPUTarget("cuda", 90, 32)))
    answers = []
    try:
        for config in json.loads(sys.argv[1]):
            outcome = worker.call((config, (768, 4096, 14336)), timeout_s=600)
            answers.append({"status": outcome.status.value, "error": outcome.error})
    finally:
        worker.close()
    shared = {}
    for path in Path(cache).rglob("matmul_tma_kernel.json"):
        meta = json.loads(path.read_text())
        shared[meta["num_warps"]] = meta["shared"]
    print(json.dumps({"answers": answers, "shared": shared}))
"""


@pytest.mark.parametrize("configs", [  # 4 and 8 warps each: told apart in the cache
    [WIDE, dict(BIG, WARP_SPECIALIZE=False, PROGRAMS_PER_SM=0)], [TALL, TALL_PERSISTENT],
    [SPLIT_8, dict(SPLIT, BLOCK_M=128, BLOCK_N=128, SPLIT_K=2, num_warps=8)]], ids=["widened", "tall", "split"])
def test_tiles_compile_for_sm90_with_the_modelled_shared_memory(tmp_path, configs):
    script = tmp_path / "cross_compile.py"
    script.write_text(CROSS_COMPILE)
    environment = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    environment["PYTHONPATH"] = os.pathsep.join([str(LIB), environment.get("PYTHONPATH", "")])
    completed = subprocess.run([sys.executable, str(script), json.dumps(configs)], env=environment,
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    answer = json.loads(completed.stdout.strip().splitlines()[-1])
    assert [a["status"] for a in answer["answers"]] == ["ok", "ok"], answer["answers"]
    for config in configs:  # the compiler adds the pipeline's barriers: a few hundred bytes at most
        modelled = matmul_tma.shared_memory_bytes(config)
        shared = answer["shared"][str(config["num_warps"])]
        if config["SPLIT_K"] == 1:
            assert modelled <= shared <= modelled + 512, (config, answer["shared"])
        else:  # no staging for TMA stores, but the atomics' layout conversion may take up to as much: a bound
            pipeline = modelled - matmul_tma.tile_rows(config) * config["BLOCK_N"] * 2
            assert pipeline <= shared <= modelled, (config, answer["shared"])
