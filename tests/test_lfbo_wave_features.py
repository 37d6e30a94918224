"""benchmarks/lfbo_wave_features.py: the wave columns it gives LFBO's classifier, its paired counts, and its refusal
of a shape it has no sweep of."""

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tunebench.kernels import matmul_tma

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import lfbo_wave_features  # noqa: E402


def test_wave_columns_follow_the_space_encoding():
    space = matmul_tma.config_space()
    tall = next(c for c in space.enumerate() if c["TALL"] and c["BLOCK_M"] == 128 and c["BLOCK_N"] == 128)
    plain = dict(tall, TALL=False)
    features = lfbo_wave_features.WaveFeatures(space, (192, 16384, 4096), 132)
    encoded = features.encode([tall, plain])
    assert encoded.shape == (2, space.encode([tall]).shape[1] + 2)
    np.testing.assert_array_equal(encoded[:, :-2], space.encode([tall, plain]))
    # 192 x 128 tiles: one row of 128 tiles, in one wave; 128 x 128: 256 tiles, in two waves of 132.
    np.testing.assert_allclose(encoded[:, -2:], [[128 / 132, 7.0], [256 / 264, 8.0]])
    assert features.names == space.names


def test_paired_counts_and_medians():
    target = f"evals to {lfbo_wave_features.TARGET} of best"
    seconds = f"s to {lfbo_wave_features.TARGET} of best"
    runs = pd.DataFrame([
        {"shape": "s", "strategy": "lfbo", "seed": 0, "waves": False, target: 100, seconds: 10.0},
        {"shape": "s", "strategy": "lfbo", "seed": 0, "waves": True, target: 50, seconds: 5.0},
        {"shape": "s", "strategy": "lfbo", "seed": 1, "waves": False, target: np.nan, seconds: np.nan},
        {"shape": "s", "strategy": "lfbo", "seed": 1, "waves": True, target: 80, seconds: 8.0},
    ])
    medians, paired = lfbo_wave_features.summary(runs)
    assert paired.iloc[0].to_dict() == {
        "strategy": "lfbo", "runs": 2, "there with the features only": 1, "there without them only": 0,
        "both: fewer evals with": 1, "both: fewer evals without": 0, "both: median evals ratio with / without": 0.5}
    row = medians.iloc[0]
    assert row["without: seeds there"] == "50%" and row["with: seeds there"] == "100%"
    assert row[f"without: median {seconds}"] == np.inf and row[f"with: median {seconds}"] == 6.5


def test_a_shape_without_a_tall_sweep_is_refused(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["lfbo_wave_features.py", "--out", "unused", "--shapes", "8x8x8"])
    with pytest.raises(SystemExit):
        lfbo_wave_features.main()
    assert "no sweep with TALL of [(8, 8, 8)]; known: 768x4096x14336" in capsys.readouterr().err
