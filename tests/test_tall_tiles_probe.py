"""The tall-tile probe's kernel: tiles of 1.5 x BLOCK_M rows match the reference where a tile ends inside either row
block, a program per tile or persistent, under the interpreter and on a GPU; the summary lists failed contenders."""

import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from tunebench.kernels import matmul
from tunebench.measure.probe_rounds import contender_summary

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import tall_tiles_probe  # noqa: E402

on_the_interpreter = pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU test below covers this")


@on_the_interpreter
@pytest.mark.parametrize("shape", [(96, 64, 64), (70, 96, 200), (40, 40, 96)])  # M: whole tiles, 22 and 8 rows left
@pytest.mark.parametrize("programs_per_sm", [0, 1])
def test_interpreter_tall_tiles_match_the_reference(shape, programs_per_sm):
    inputs = matmul.make_inputs(shape, "float16", "cpu", seed=1, split_k_workspace=False)
    inputs.out.fill_(float("nan"))
    tall_tiles_probe.TallTileGemm(tall_tiles_probe.TallTile(32, 32, 32, 4, 2, programs_per_sm), inputs, sms=2)()
    assert matmul.relative_error(inputs.out, matmul.reference(inputs)) <= matmul.TOLERANCE["float16"]


def test_tile_names_count_the_rows_of_both_blocks():
    assert tall_tiles_probe.tile_name(tall_tiles_probe.TallTile(128, 128, 64, 4, 4)) == "tall 192x128x64 w4 s4"
    assert tall_tiles_probe.tile_name(tall_tiles_probe.TallTile(256, 128, 32, 8, 4, 1)) == (
        "tall 384x128x32 w8 s4, 1 program per SM")


def test_sweep_best_names_the_shapes_it_has_a_sweep_of():
    assert tall_tiles_probe.sweep_best((768, 4096, 14336))["WIDEN"]  # 128 x (128 + 64): results/matmul_tma/mid_widened
    with pytest.raises(ValueError, match="no widened sweep holds"):
        tall_tiles_probe.sweep_best((8, 8, 8))


def test_summary_ranks_against_cublas_and_lists_the_failed():
    timings = pd.DataFrame([
        {"shape": "8x8x8", "name": "cuBLAS", "round": 0, "status": "ok", "latency_ms": 1.0, "gpu": "stand-in"},
        {"shape": "8x8x8", "name": "tall", "round": 0, "status": "ok", "latency_ms": 2.0, "gpu": "stand-in"},
        {"shape": "8x8x8", "name": "tall", "round": 1, "status": "ok", "latency_ms": 4.0, "gpu": "stand-in"},
        {"shape": "8x8x8", "name": "cuBLAS", "round": 1, "status": "ok", "latency_ms": 1.0, "gpu": "stand-in"},
        {"shape": "8x8x8", "name": "huge", "round": 0, "status": "error: OutOfResources", "latency_ms": float("nan"),
         "gpu": "stand-in"},
    ])
    text = contender_summary(timings, "T", "command", "timing command")
    assert "| 8x8x8 | tall | 3 | 0.333 |" in text and "2 rounds" in text
    assert "| 8x8x8 | huge | error: OutOfResources |" in text


@pytest.mark.gpu
def test_gpu_contenders_pass_their_check_or_fail_to_compile():
    called = tall_tiles_probe.contenders((768, 4096, 14336), torch.cuda.get_device_properties(0).multi_processor_count)
    assert not [status for status in called.values() if isinstance(status, str) and status.startswith("wrong")]
    assert callable(called[tall_tiles_probe.tile_name(tall_tiles_probe.TILES[0])])


@pytest.mark.gpu
@pytest.mark.parametrize("tile", tall_tiles_probe.TILES[:5])  # the 192 x 128 tiles
def test_gpu_tall_tiles_match_the_reference_at_a_ragged_shape(tile):
    inputs = matmul.make_inputs((333, 1000, 520), "bfloat16", "cuda", seed=2, split_k_workspace=False)
    inputs.out.fill_(float("nan"))
    tall_tiles_probe.TallTileGemm(tile, inputs, torch.cuda.get_device_properties(0).multi_processor_count)()
    assert matmul.relative_error(inputs.out, matmul.reference(inputs)) <= matmul.TOLERANCE["bfloat16"]
