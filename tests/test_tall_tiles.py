"""The tall-tile benchmark: its configs are the space's tall ones, named apart; the summary of timings in rounds ranks
against cuBLAS and lists what failed; on a GPU its contenders pass their check or fail to compile."""

import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from tunebench.kernels import complete_config, matmul_tma
from tunebench.measure.probe_rounds import contender_summary

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import tall_tiles  # noqa: E402


def test_configs_are_the_spaces_tall_ones_named_apart():
    space = matmul_tma.config_space()
    assert all(space.is_valid(complete_config("matmul_tma", config)) and matmul_tma.tall(config)
               for config in tall_tiles.CONFIGS)  # written before SPLIT_K joined the space
    names = [tall_tiles.config_name(config) for config in tall_tiles.CONFIGS]
    assert len(set(names)) == len(names)
    assert names[0] == "tall 192x128x64 w4 s4" and "tall 384x128x32 w8 s4" in names
    assert "tall 192x128x64 w4 s4, 1 program per SM, flattened" in names


def test_sweep_best_names_the_shapes_it_has_a_sweep_of():
    assert tall_tiles.sweep_best((768, 4096, 14336))["WIDEN"]  # 128 x (128 + 64): results/matmul_tma/mid_widened
    with pytest.raises(ValueError, match="no widened sweep holds"):
        tall_tiles.sweep_best((8, 8, 8))


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
def test_gpu_contenders_pass_their_check():
    called = tall_tiles.contenders((768, 4096, 14336), torch.cuda.get_device_properties(0).multi_processor_count)
    assert len(called) == 2 + len(tall_tiles.CONFIGS)
    assert not [(name, status) for name, status in called.items() if isinstance(status, str)]


def test_the_tall_sweeps_subspace_without_tall_is_the_widened_space(tmp_path, monkeypatch):
    import space_without

    from tunebench.measure.dataset import load_dataset

    out = tmp_path / "without_tall.parquet"
    swept = Path(space_without.REPO) / "results/datasets/matmul_tma_bfloat16_h200_tall.parquet"
    monkeypatch.setattr(sys, "argv", ["space_without.py", "--dataset", str(swept), "--without", "TALL", "--out",
                                      str(out)])
    assert space_without.main() == 0
    subspace = load_dataset(out)
    assert subspace.shapes() == [(768, 4096, 14336)] and len(subspace.measurements) == 7880
    assert not subspace.measurements.TALL.astype(bool).any() and subspace.measurements.WIDEN.astype(bool).sum() == 2440
    assert load_dataset(swept).best_config((768, 4096, 14336))["TALL"]


def test_tall_configs_timed_later_join_the_widened_sweep_and_the_comparison_names_their_sitting():
    """results/datasets/matmul_tma_bfloat16_h200_tall_other.parquet's tall configs at 1024 x 6144 x 4096, added to the
    widened sweep there (`add_configs.py`): every config once, cuBLAS the sweep's, and the best still widened."""
    import space_without

    from tunebench.collect import read_records, with_added_configs
    from tunebench.measure.dataset import load_dataset

    datasets, shape = Path(space_without.REPO) / "results/datasets", (1024, 6144, 4096)
    base = load_dataset(datasets / "matmul_tma_bfloat16_h200_mid_widened.parquet")
    combined = with_added_configs(base, read_records(datasets / "matmul_tma_bfloat16_h200_tall_other.parquet"),
                                  [shape])
    rows = combined.measurements
    assert len(rows) == 10300 and rows.TALL.astype(bool).sum() == 2420 and rows.WIDEN.astype(bool).sum() == 2440
    assert combined.vendor_ms(shape) == base.vendor_ms(shape)
    assert combined.best_config(shape) == base.best_config(shape) | {"TALL": False, "SPLIT_K": 1}
    assert space_without.sittings_sentence(combined, "TALL") == (
        "Its provenance lists 3 sittings (1 on 2026-12-02, 2 on 2026-12-02, 3 on 2026-12-03): the configs with TALL "
        "come from 3, the others from ?.")
    tall_768 = load_dataset(datasets / "matmul_tma_bfloat16_h200_tall.parquet")
    assert space_without.sittings_sentence(tall_768, "TALL") == "It was timed in one sitting."
