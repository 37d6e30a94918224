"""Compile workers compile for a GPU target without a GPU, so they start no CUDA; a worker forked from the server
compiles into the Triton cache of the environment it was made with, not the server's."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tunebench.measure.cross_compile import CompileOnlyDriver

LIB = Path(__file__).resolve().parents[1] / "lib"

# Run in a fresh interpreter without TRITON_INTERPRET (which this suite sets, and which a preloaded kernel module
# keeps from the server's start): the server starts, then the cache directory is chosen, then a worker compiles.
COMPILE = """
import functools, json, os, sys, tempfile
from pathlib import Path
from triton.backends.compiler import GPUTarget
from tunebench.measure import live
from tunebench.measure.workers import Worker, start_worker_server


def compile_and_tell(target):
    compile = live._compile_handler("matmul", "bfloat16", target)

    def handle(request):
        import torch

        return compile(request), torch.cuda.is_initialized()
    return handle


if __name__ == "__main__":
    start_worker_server(live.worker_modules("matmul"), wait=True)
    os.environ["TRITON_CACHE_DIR"] = cache = tempfile.mkdtemp()
    config = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "SPLIT_K": 1, "num_warps": 4,
              "num_stages": 3}
    worker = Worker(functools.partial(compile_and_tell, GPUTarget("cuda", 90, 32)))
    try:
        outcome, cuda = worker.call((config, (64, 256, 256)), timeout_s=300)
    finally:
        worker.close()
    print(json.dumps({"status": outcome.status.value, "error": outcome.error, "cuda": cuda,
                      "cubins": [path.name for path in Path(cache).rglob("*.cubin")]}))
"""


def test_a_compile_worker_compiles_for_a_target_without_a_gpu_into_the_cache_it_was_made_with(tmp_path):
    script = tmp_path / "compile.py"
    script.write_text(COMPILE)
    environment = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    environment["PYTHONPATH"] = os.pathsep.join([str(LIB), environment.get("PYTHONPATH", "")])
    completed = subprocess.run([sys.executable, str(script)], env=environment, capture_output=True, text=True,
                               timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    answer = json.loads(completed.stdout.strip().splitlines()[-1])
    assert answer["status"] == "ok", answer["error"]
    assert answer["cubins"], "the binary is not in the cache directory set after the server started"
    assert not answer["cuda"], "the compile worker started CUDA"


def test_the_compile_only_driver_answers_what_the_jit_asks_and_refuses_the_rest_by_name():
    from triton.backends.compiler import GPUTarget

    driver = CompileOnlyDriver(GPUTarget("cuda", 90, 32))
    assert (driver.get_current_device(), driver.get_current_stream(0)) == (0, 0)
    assert driver.get_current_target() == GPUTarget("cuda", 90, 32)
    assert driver.get_device_capability(0) == (9, 0)
    with pytest.raises(AttributeError, match="has no 'launcher_cls': it needs a GPU"):
        driver.launcher_cls


@pytest.mark.gpu
def test_the_timing_worker_finds_the_cross_compiled_binaries_in_the_cache(tmp_path, monkeypatch):
    """Compiled without the GPU, timed on it: a binary the timing worker compiled again (another cache key) would show
    as a second cubin."""
    import numpy as np

    from tunebench.measure.live import GpuBench

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    with GpuBench("matmul_tma", "bfloat16", compile_workers=2) as bench:
        configs = bench.space.sample(np.random.default_rng(0), 4, unique=True)
        results = bench.measure(configs, (512, 512, 512))
    assert all(result.ok for result in results), [result.error for result in results]
    binaries = {bench.binary(bench.space.key(config)) for config in configs}
    assert len(list(tmp_path.rglob("*.cubin"))) == len(binaries)
