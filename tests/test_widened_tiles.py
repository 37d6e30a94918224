"""The widened-tile benchmark's plan (the sweep's best and every widened config per shape), its summary's ratios, the
widened sweep's unwidened subspace (`benchmarks/space_without.py`) and the live side by side of the two spaces
(`benchmarks/live_side_by_side.py`)."""

import sys
from pathlib import Path

import pandas as pd
import pytest

from tunebench.kernels import matmul_tma
from tunebench.space import ConfigError

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import widened_tiles  # noqa: E402


def test_plan_holds_the_sweeps_best_unwidened_and_every_widened_config_per_shape():
    plan = widened_tiles.plan(widened_tiles.DATASET)
    assert len(plan) == 4 * (1 + len(widened_tiles.WIDENED))
    for _, group in plan.groupby(widened_tiles.SHAPE):
        assert list(group.WIDEN) == [False] + [True] * len(widened_tiles.WIDENED)
        assert group.candidate.is_unique
    best = plan[(plan.M == 768) & ~plan.WIDEN].iloc[0]
    assert (best.BLOCK_M, best.BLOCK_N, best.PROGRAMS_PER_SM) == (128, 256, 2)  # results/matmul_tma/mid_size
    widest = plan[plan.WIDEN].apply(lambda row: matmul_tma.tile_columns(row.to_dict()), axis=1)
    assert set(widest) == {96, 192}


def test_summary_takes_each_rounds_ratio_to_cublas_in_that_round(tmp_path):
    rows = []
    for round_index, (cublas, config) in enumerate([(1.0, 2.0), (2.0, 2.0), (1.0, 1.0)]):
        for kind, candidate, latency in (("vendor", "cuBLAS", cublas), ("config", "widened", config)):
            rows.append({"M": 8, "N": 16, "K": 16, "candidate": candidate, "round": round_index, "kind": kind,
                         "status": "ok", "latency_ms": latency, "gpu": "stand-in"})
    out = tmp_path / "rounds.csv"
    pd.DataFrame(rows).to_csv(out, index=False)
    text = widened_tiles.summarize(out, "command")
    # its median ms 2 over 3 rounds; ratios 0.5, 1 and 1: median 1, lowest 0.5, highest 1; cuBLAS's median ms 1
    assert "| 8 | 16 | 16 | widened | 2 | 3 | 1 | 0.5 | 1 | 1 |" in text


def test_plan_refuses_a_widened_config_without_the_split_epilogue(monkeypatch):
    monkeypatch.setattr(widened_tiles, "WIDENED", (dict(widened_tiles.WIDE, EPILOGUE_SPLIT=1),))
    with pytest.raises(ConfigError, match="widen_needs_split_epilogue"):
        widened_tiles.plan(widened_tiles.DATASET)


def test_the_space_without_widen_keeps_the_space_before_it_and_refuses_a_sweep_without_widen(tmp_path, monkeypatch,
                                                                                               capsys):
    import space_without

    from tunebench.measure.dataset import load_dataset

    out = tmp_path / "subspace.parquet"
    monkeypatch.setattr(sys, "argv", ["space_without.py", "--out", str(out)])
    assert space_without.main() == 0
    subspace = load_dataset(out)
    assert not subspace.measurements.WIDEN.astype(bool).any()
    assert {len(subspace.task(shape)) for shape in subspace.shapes()} == {5440}
    assert len(subspace.shapes()) == 6 and "space_without.py --without WIDEN" in subspace.provenance["derived"]
    before = Path(space_without.REPO) / "results/datasets/matmul_tma_bfloat16_h200.parquet"
    monkeypatch.setattr(sys, "argv", ["space_without.py", "--dataset", str(before), "--out", str(out)])
    with pytest.raises(SystemExit):
        space_without.main()
    assert "has no WIDEN parameter" in capsys.readouterr().err


def test_the_side_by_side_counts_a_seed_that_never_got_there_as_inf(tmp_path):
    import space_without

    paths = {}
    for space, seconds in (("wide", [1.0, 3.0, None]), ("narrow", [2.0, 2.0, 4.0])):
        paths[space] = tmp_path / f"{space}.csv"
        pd.DataFrame({"shape": "8x8x8", "strategy": "lfbo", "seed": range(3), space_without.TARGET: seconds,
                      "evals to 0.99 of best": [10, 30, None] if space == "wide" else [20, 20, 40]}
                     ).to_csv(paths[space], index=False)
    row = space_without.side_by_side(paths).iloc[0]
    assert row[f"wide: median {space_without.TARGET}"] == 3.0 and row["wide: median evals"] == 30
    assert row["wide: seeds there"] == "67%" and row["narrow: seeds there"] == "100%"
    assert row[f"narrow: median {space_without.TARGET}"] == 2.0


def test_the_best_config_is_the_fastest_ok_row_widened_at_the_prefill_layers_only():
    from tunebench.measure.dataset import load_dataset

    for name, any_widened in (("default_widened", False), ("mid_widened", True)):
        dataset = load_dataset(REPO / "results" / "datasets" / f"matmul_tma_bfloat16_h200_{name}.parquet")
        bests = {shape: dataset.best_config(shape) for shape in dataset.shapes()}
        assert any(bool(best["WIDEN"]) for best in bests.values()) is any_widened
        for shape, best in bests.items():
            task = dataset.task(shape)
            row = task[(task[list(best)] == pd.Series(best)).all(axis=1)].iloc[0]
            assert row.status == "ok" and row.latency_ms == task[task.status == "ok"].latency_ms.min()


def test_the_live_side_by_side_gives_stop_59s_medians_at_4096_and_each_seed_at_8192(tmp_path, monkeypatch, capsys):
    """benchmarks/live_side_by_side.py on the recorded live runs: at 4096^3 the medians stop 59 took from a scratch
    script (a seed that never reached 0.99x counted as the slowest); at 8192^3, every run reached 0.99x cuBLAS."""
    import live_side_by_side

    live = REPO / "results" / "live_search" / "matmul_tma_widened"
    table = live_side_by_side.side_by_side(live_side_by_side.runs(live / "side_by_side_4096"))
    rows = table.set_index(["strategy", "version"])
    assert rows.loc[("lfbo_quick", "widened"), "s to 0.99x"] == 5.65
    assert rows.loc[("lfbo_quick", "unwidened_6990140"), ["s to 0.99x", "seeds to 0.99x"]].tolist() == [4.25, "3 of 4"]
    assert rows.loc[("lfbo", "widened"), ["s to 0.95x", "s to 0.99x"]].tolist() == [6.6, 9.8]
    wide = live_side_by_side.runs(live / "side_by_side_8192")
    assert len(wide) == 10 and wide["s to 0.99x"].notna().all() and (wide["best vs cuBLAS"] > 1).all()

    mixed = tmp_path / "mixed"
    for size in ("4096", "8192"):
        run = next((live / f"side_by_side_{size}" / "widened" / "lfbo_seed0").glob("*.parquet"))
        (mixed / "widened" / f"lfbo_seed{size}").mkdir(parents=True)
        (mixed / "widened" / f"lfbo_seed{size}" / run.name).write_bytes(run.read_bytes())
    monkeypatch.setattr(sys, "argv", ["live_side_by_side.py", "--folder", str(mixed)])
    with pytest.raises(SystemExit):
        live_side_by_side.main()
    assert "are of 2 shapes, ['4096x4096x4096', '8192x8192x8192']: expected one" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no traces in"):
        live_side_by_side.runs(tmp_path / "empty")
