"""Config prediction: one feature code path, the grouped protocol, the predictor file and its checks, the dispatcher's
compiled trees, and the warm-start wrapper. Runs on a small synthetic GEMM dataset."""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import pickle
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tunebench.kernels import matmul
from tunebench.measure.dataset import Dataset
from tunebench.measure.replay import ReplayEvaluator
from tunebench.measure.result import Result, Status
from tunebench.predict import (CompiledForest, PredictorError, RankerSettings, feature_names, feature_row, features,
                               fit_predictor, grouped_folds, load_predictor, read_header, save_predictor,
                               select_ranker, training_data)
from tunebench.predict.compiled import CompiledResources, load_table
from tunebench.predict.dispatch import FORMAT_VERSION
from tunebench.predict.evaluation import (alignment, best_of_top_k, by_alignment, per_shape_table, retest_efficiency,
                                          retimed_efficiency, thin_shapes, untimed_picks)
from tunebench.predict.features import CandidateFeatures, config_columns, encode_columns
from tunebench.predict import forest
from tunebench.predict.forest import MANY_CORES, PARTS
from tunebench.predict.model import INNER_SPLITS, ConfigRanker, portfolio, relative_speed, restrict
from tunebench.predict.shortlist import SIZE
from tunebench.predict.transfer import combine, transfer_efficiency
from tunebench.search import make_strategy
from tunebench.search.warm_start import SeededSpace, WarmStart, warm_start
from tunebench.space import IntRange, PowerOfTwo, Space

SHAPES = [(1, 4096, 4096), (3, 5000, 3000), (16, 1024, 8192), (64, 4608, 1536), (200, 3000, 5000),
          (256, 4096, 4096), (1000, 5000, 3000), (2048, 8192, 1024), (4096, 4096, 4096), (8192, 3072, 3072)]
# The compiler's facts of the prediction dataset's 600 candidates (Triton 3.6, sm_90): the synthetic dataset draws
# its configs from them.
TABLE = Path(__file__).resolve().parent.parent / "results" / "datasets" / "matmul_bfloat16_sm90_compiled.csv"
SMALL = RankerSettings(objective="relative", max_iter=20, max_leaf_nodes=7, max_depth=4)


def synthetic_latency(shape, config) -> float:
    """A made-up cost: padded work at a rate that grows with the tile, plus a cost per wave and per K step."""
    m, n, k = shape
    tiles = math.ceil(m / config["BLOCK_M"]) * math.ceil(n / config["BLOCK_N"]) * config["SPLIT_K"]
    padded = (math.ceil(m / config["BLOCK_M"]) * config["BLOCK_M"]) * (math.ceil(n / config["BLOCK_N"])
                                                                       * config["BLOCK_N"]) * k
    rate = config["BLOCK_M"] * config["BLOCK_N"] / (config["BLOCK_M"] + config["BLOCK_N"]) * config["num_stages"]
    return 1e-9 * padded / rate + 1e-3 * math.ceil(tiles / 132) + 1e-4 * k / (config["BLOCK_K"] * config["SPLIT_K"])


@pytest.fixture(scope="module")
def resources() -> CompiledResources:
    return load_table(TABLE, matmul.config_space().names)


@pytest.fixture(scope="module")
def dataset(resources) -> Dataset:
    space = matmul.config_space()
    table = resources.table[list(space.names)].drop_duplicates()
    configs = [dict(zip(space.names, map(int, row)))
               for row in table.sample(40, random_state=0).itertuples(index=False)]
    rows = []
    for shape in SHAPES:
        for config in configs:
            latency = synthetic_latency(shape, config)
            rows.append({"M": shape[0], "N": shape[1], "K": shape[2], **config, "status": "ok", "latency_ms": latency,
                         "repeats_ms": [0.99 * latency, latency, 1.01 * latency], "compile_s": 1.0, "bench_s": 0.1,
                         "error": ""})
    return Dataset(kernel="matmul", dtype="bfloat16", gpu="Test GPU", shape_names=("M", "N", "K"),
                   parameters=space.parameters, measurements=pd.DataFrame(rows), vendor=pd.DataFrame(),
                   provenance={"sm_count": 132, "gpu_name": "Test GPU"})


@pytest.fixture(scope="module")
def data(dataset, resources):
    return training_data(dataset, resources)


@pytest.fixture(scope="module")
def predictor(data):
    return fit_predictor(data, replace(SMALL, models=2))


# -- features ----------------------------------------------------------------------------------------------------

def test_batch_and_single_row_features_agree(data):
    rows = np.arange(0, len(data.latency_ms), 7)
    shapes = data.shapes[data.group[rows]]
    configs = [dict(zip(data.space.names, map(int, data.candidates[r % len(data.candidates)]))) for r in rows]
    batch = features(shapes, config_columns(data.space, configs), data.space, "bfloat16", data.resources,
                     data.hardware)
    single = np.array([feature_row(tuple(shape), config, data.space, "bfloat16", data.resources, data.hardware)
                       for shape, config in zip(shapes.tolist(), configs)])
    assert batch.shape == (len(rows), len(feature_names(data.space)))
    np.testing.assert_array_equal(batch, single)
    np.testing.assert_array_equal(batch, data.features[rows])


def test_one_shape_or_one_config_broadcasts_to_the_full_batch(data):
    """The dispatcher passes one shape against its shortlist, a grid may pass one config against many shapes: both
    must give the rows of the fully repeated batch exactly."""
    shape, shapes = data.shapes[3], data.shapes[::40]
    one_shape = features(shape[None], data.candidates, data.space, "bfloat16", data.resources, data.hardware)
    repeated = features(np.repeat(shape[None], len(data.candidates), axis=0), data.candidates, data.space,
                        "bfloat16", data.resources, data.hardware)
    np.testing.assert_array_equal(one_shape, repeated)
    config = data.candidates[5]
    one_config = features(shapes, config[None], data.space, "bfloat16", data.resources, data.hardware)
    tiled = features(shapes, np.repeat(config[None], len(shapes), axis=0), data.space, "bfloat16", data.resources,
                     data.hardware)
    np.testing.assert_array_equal(one_config, tiled)
    assert one_shape.shape == (len(data.candidates), len(feature_names(data.space)))


def test_the_dispatchers_candidate_rows_are_the_batch_features(data):
    """`CandidateFeatures.rows`, which reads the candidates' encoding and compiled facts computed once, gives the rows
    `features` computes, in every alignment class of N and K, for any subset of candidates in any order (indexed as
    numpy indexes them)."""
    table = CandidateFeatures(data.candidates, data.space, "bfloat16", data.resources, data.hardware)
    chosen = np.array([7, 0, 31, 12, 5, -1])
    for n, k in [(4096, 4096), (1000, 3000), (1004, 3002), (1001, 3001), (50257, 768), (8, 3)]:
        for m in (1, 300, 9000):
            np.testing.assert_array_equal(
                table.rows((m, n, k), chosen),
                features(np.array([[m, n, k]]), data.candidates[chosen], data.space, "bfloat16", data.resources,
                         data.hardware))
    with pytest.raises(IndexError):
        table.rows((64, 4096, 4096), np.array([0, len(data.candidates)]))


def test_the_dispatchers_rows_in_a_class_the_table_lacks_are_an_error(data):
    odd = (data.resources.table["N_divisibility"] == 1) & (data.resources.table["K_divisibility"] == 1)
    partial = CompiledResources(data.resources.table[~odd], data.resources.parameter_names, data.resources.source)
    table = CandidateFeatures(data.candidates, data.space, "bfloat16", partial, data.hardware)
    assert table.rows((64, 1000, 3000), np.arange(3)).shape == (3, len(feature_names(data.space)))
    with pytest.raises(KeyError, match="N divisibility 1, K divisibility 1 was never compiled"):
        table.rows((64, 1001, 3001), np.arange(3))


def test_config_encoding_is_the_spaces(data):
    configs = [dict(zip(data.space.names, map(int, row))) for row in data.candidates]
    np.testing.assert_array_equal(encode_columns(data.space, data.candidates), data.space.encode(configs))


def test_interaction_features_by_hand(data):
    config = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 1, "SPLIT_K": 4, "num_warps": 4,
              "num_stages": 3}
    row = dict(zip(feature_names(data.space), feature_row((200, 1001, 3001), config, data.space, "bfloat16",
                                                             data.resources)))
    assert (row["tiles_m"], row["tiles_n"], row["programs"]) == (4, 8, 128)
    assert row["fill_last_tile_m"] == pytest.approx(8 / 64) and row["fill_last_tile_n"] == pytest.approx(105 / 128)
    assert row["waves"] == pytest.approx(128 / 132) and row["k_iterations"] == math.ceil(3001 / (64 * 4))
    # The compiler's figures for odd N and K (the table's row): 32 KiB of shared memory (72 KiB aligned), and 255
    # registers per thread, which limit the SM to 2 programs of 4 warps (32 x 256 registers a warp).
    assert (row["shared_memory_per_program"], row["registers_per_thread"]) == (32768, 255)
    assert row["programs_per_sm"] == 2 and row["occupancy_waves"] == pytest.approx(128 / (132 * 2))
    assert row["log2_K_divisibility"] == 0 and row["log2_N_divisibility"] == 0 and row["BLOCK_M"] == 6  # log2 codes
    # N = 1000 and K = 3000 are multiples of 8: the alignment hints give the aligned kernel's three-stage buffers.
    hinted = dict(zip(feature_names(data.space), feature_row((200, 1000, 3000), config, data.space, "bfloat16",
                                                                data.resources)))
    assert hinted["log2_K_divisibility"] == 3 and hinted["log2_N_divisibility"] == 3
    assert hinted["shared_memory_per_program"] == 3 * (64 * 64 + 64 * 128) * 2


def test_problem_and_traffic_features_by_hand(data):
    """The columns the compiled row loop writes that the other hand tests leave out, each from its formula."""
    config = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 1, "SPLIT_K": 4, "num_warps": 4,
              "num_stages": 3}
    m, n, k = 200, 1001, 3001
    row = dict(zip(feature_names(data.space), feature_row((m, n, k), config, data.space, "bfloat16", data.resources)))
    minimum_bytes = 2 * (m * k + k * n + m * n)
    assert (row["M"], row["N"], row["K"]) == (m, n, k)
    assert row["log2_M"] == pytest.approx(math.log2(m)) and row["log2_N_over_K"] == pytest.approx(math.log2(n / k))
    assert row["log2_M_over_N"] == pytest.approx(math.log2(m / n))
    assert row["log2_M_over_K"] == pytest.approx(math.log2(m / k))
    assert row["arithmetic_intensity"] == pytest.approx(2 * m * n * k / minimum_bytes)
    k_iterations = math.ceil(k / (64 * 4))  # 12: padded K is 12 x 64 x 4 = 3072
    assert row["padding_waste"] == pytest.approx(1 - m * n * k / ((4 * 64) * (8 * 128) * (k_iterations * 64 * 4)))
    assert row["tile_intensity"] == pytest.approx(64 * 128 / (64 + 128))
    assert row["split_k_traffic_ratio"] == pytest.approx((m * n * 4 * (4 + 2) + m * n * 2) / minimum_bytes)
    assert row["last_wave_fraction"] == pytest.approx(128 / 132) and row["log2_programs"] == 7
    multiply_adds = 64 * 128 * 64 * k_iterations  # per program
    assert row["log2_mma_per_sm"] == pytest.approx(math.log2(128 * multiply_adds / 132))
    assert row["log2_mma_per_sm_whole_waves"] == pytest.approx(math.log2(1 * multiply_adds))
    unsplit = dict(zip(feature_names(data.space), feature_row((m, n, k), {**config, "SPLIT_K": 1}, data.space,
                                                               "bfloat16", data.resources)))
    assert unsplit["split_k_traffic_ratio"] == 0


def test_load_features_are_the_compilers_scalar_loads_for_every_candidate(resources):
    """For each of the 600 candidates in each of the 25 alignment classes, the scalar loads the features count equal
    the 2-byte global loads in the PTX that Triton 3.6 compiled for sm_90 (the table's `scalar_global_loads`): only
    an odd operand is loaded element by element."""
    space = Space(matmul.config_space().parameters)
    table = resources.table
    assert len(table.groupby(["N_divisibility", "K_divisibility"])) == 25
    values = table[list(space.names)].to_numpy(dtype=np.int64)
    size_of = {16: 4096, 8: 4104, 4: 4100, 2: 4098, 1: 4095}  # a size the compiler knows divisible by exactly that
    n, k = table["N_divisibility"].map(size_of).to_numpy(), table["K_divisibility"].map(size_of).to_numpy()
    matrix = features(np.column_stack([np.full(len(table), 256), n, k]), values, space, "bfloat16", resources)
    row = dict(zip(feature_names(space), matrix.T))
    scalar = (row["a_loads_per_thread"] * (table["K_divisibility"] == 1).to_numpy()
              + row["b_loads_per_thread"] * (table["N_divisibility"] == 1).to_numpy())
    np.testing.assert_array_equal(scalar, table["scalar_global_loads"].to_numpy())
    np.testing.assert_array_equal(row["shared_memory_per_program"], table["shared_memory_bytes"].to_numpy())


def test_load_features_count_unvectorized_operands_element_by_element(data):
    """A's rows are K apart, B's and C's N apart: an operand whose stride is not a multiple of 16 is loaded one
    element per instruction instead of 8 (16 bytes of bf16)."""
    config = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8, "SPLIT_K": 1, "num_warps": 8,
              "num_stages": 3}
    names = feature_names(data.space)
    aligned, k_odd, n_odd, k_hinted_2, n_hinted_8 = (
        dict(zip(names, feature_row(shape, config, data.space, "bfloat16", data.resources)))
        for shape in ((256, 4096, 4096), (256, 4096, 4095), (256, 4095, 4096), (256, 4096, 4098), (256, 4104, 4096)))
    assert aligned["a_loads_per_thread"] == 64 * 32 / (8 * 256)
    assert aligned["b_loads_per_thread"] == 32 * 128 / (8 * 256)
    assert k_odd["a_loads_per_thread"] == 8 * aligned["a_loads_per_thread"]
    assert k_odd["b_loads_per_thread"] == aligned["b_loads_per_thread"]
    assert n_odd["b_loads_per_thread"] == 8 * aligned["b_loads_per_thread"]
    assert k_hinted_2["a_loads_per_thread"] == 4 * aligned["a_loads_per_thread"]  # 2 elements (4 bytes) at a time
    assert n_hinted_8["b_loads_per_thread"] == aligned["b_loads_per_thread"]
    per_program = (1 + 2) * 128 + 64 * 128 / (8 * 256)  # A and B per K iteration, 128 iterations, then the C store
    assert aligned["log2_loads_per_program"] == pytest.approx(math.log2(per_program))
    assert aligned["log2_load_instructions_per_sm"] == pytest.approx(math.log2(4 * 32 * per_program * 8 / 132))


@pytest.mark.parametrize("shape", [(0, 4096, 4096), (16, 0, 4096), (16, 4096, -3)])
def test_zero_or_negative_dimension_is_an_error(data, predictor, shape):
    config = dict(zip(data.space.names, map(int, data.candidates[0])))
    with pytest.raises(ValueError, match="dimension < 1"):
        feature_row(shape, config, data.space, "bfloat16", data.resources)
    with pytest.raises(ValueError, match="positive int"):
        predictor.best_config(shape)


def test_a_compiled_table_of_another_dtype_is_an_error(dataset, resources):
    other = CompiledResources(resources.table, resources.parameter_names, {**resources.source, "dtype": "float16"})
    with pytest.raises(ValueError, match="compiled for float16, the dataset is bfloat16"):
        training_data(dataset, other)


def test_unknown_or_other_dtype_is_an_error(data, predictor):
    config = dict(zip(data.space.names, map(int, data.candidates[0])))
    with pytest.raises(ValueError, match="unsupported dtype 'float64'"):
        feature_row((16, 4096, 4096), config, data.space, "float64", data.resources)
    with pytest.raises(ValueError, match="unsupported dtype"):
        predictor.best_config((16, 4096, 4096), dtype="int8")
    with pytest.raises(PredictorError, match="trained for bfloat16, not 'float16'"):
        predictor.best_config((16, 4096, 4096), dtype="float16")


# -- protocol ----------------------------------------------------------------------------------------------------

def test_best_of_top_k_keeps_the_fastest_of_the_k_highest_scored():
    latency = np.array([[2.0, 1.0, 4.0, 8.0], [1.0, 3.0, 2.0, 6.0]])
    scores = np.array([[4.0, 1.0, 3.0, 2.0], [0.0, 3.0, 2.0, 1.0]])
    np.testing.assert_allclose(best_of_top_k(scores, latency, 1), [0.5, 1 / 3])
    np.testing.assert_allclose(best_of_top_k(scores, latency, 2), [0.5, 0.5])
    np.testing.assert_allclose(best_of_top_k(scores, latency, 4), [1.0, 1.0])


def test_alignment_classes_and_their_summary():
    assert [alignment(n, k) for n, k in ((4096, 768), (1000, 4096), (4096, 1001), (6, 16), (32, 2))] == [
        "aligned", "hinted", "odd", "hinted", "hinted"]
    shapes = np.array([[1, 4096, 768], [8, 1000, 4096], [64, 999, 4096], [128, 2048, 2048]])
    latency = np.array([[1.0, 2.0], [1.0, 4.0], [2.0, 1.0], [3.0, 1.0]])
    scores = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])  # picks 1, 4, 2, 1 ms
    table = per_shape_table(shapes, scores, latency)
    assert table["alignment"].tolist() == ["aligned", "hinted", "odd", "aligned"]
    summary = by_alignment(table).set_index("alignment")
    assert summary.loc["aligned", "shapes"] == 2 and summary.loc["aligned", "mean"] == pytest.approx(1.0)
    assert summary.loc["hinted", "mean"] == pytest.approx(0.25) and summary.loc["odd", "mean"] == pytest.approx(0.5)
    assert summary.loc["aligned", "top1_hit_rate"] == 1.0 and summary.loc["hinted", "top1_hit_rate"] == 0.0
    # a table without hit columns (the cross-validation's per-shape CSV) is summarized without hit rates
    bare = by_alignment(table.drop(columns=["top1_hit", "top5_hit"])).set_index("alignment")
    assert "top1_hit_rate" not in bare and bare.loc["hinted", "mean"] == pytest.approx(0.25)


def test_retimed_picks_are_judged_on_the_rounds_after_the_top_k_choice():
    # Round 0 favours "b" by noise; rounds 1 and 2 show "c" fastest. The top-2 hybrid (a, b) keeps b from round 0
    # and is judged by the median of rounds 1-2; "e" (the dispatcher's) was never timed.
    timings = {"a": [3.0, 3.0, 3.0], "b": [1.0, 2.0, 2.2], "c": [1.5, 1.0, 1.2], "d": [4.0, 4.0, 4.0]}
    journal = pd.DataFrame([{"round": r, "M": 8, "N": 16, "K": 32, "config": config, "status": "ok",
                             "latency_ms": values[r]} for config, values in timings.items() for r in range(3)]
                           + [{"round": 1, "M": 8, "N": 16, "K": 32, "config": "d", "status": "crash",
                               "latency_ms": None}])
    per_shape = pd.DataFrame([{"M": 8, "N": 16, "K": 32, "predicted_config": "a", "dispatcher_config": "e",
                               "best_config": "c", "top2_configs": "a;b", "selected_efficiency": 0.5,
                               "selected_top2_timed_efficiency": 0.9},
                              {"M": 1, "N": 1, "K": 1, "predicted_config": "a", "dispatcher_config": "a",
                               "best_config": "a", "top2_configs": "a", "selected_efficiency": 1.0,
                               "selected_top2_timed_efficiency": 1.0}])
    table = retimed_efficiency(journal, per_shape, 2)
    assert len(table) == 1 and table["configs timed"].item() == 4
    assert table["prediction"].item() == pytest.approx(1.1 / 3.0)
    assert table["top 2 timed"].item() == pytest.approx(1.1 / 2.1)
    assert table["recorded best"].item() == pytest.approx(1.0) and table["dispatcher"].item() == 0.0
    assert table["prediction (replay)"].item() == 0.5
    assert untimed_picks(journal, per_shape, 2) == [((8, 16, 32), "e")]  # the shape never timed is not listed


def test_retest_judges_each_sittings_best_by_the_other():
    def sitting(latencies, statuses=("ok", "ok", "ok")):
        return pd.DataFrame({"M": 1, "N": 2, "K": 3, "BLOCK_M": [16, 32, 64], "status": list(statuses),
                             "latency_ms": latencies})
    table = retest_efficiency(sitting([1.0, 1.1, 2.0]), sitting([1.2, 1.0, 2.0]), ["M", "N", "K", "BLOCK_M"])
    assert table.loc[0, "first_best_judged_by_second"] == pytest.approx(1.0 / 1.2)
    assert table.loc[0, "second_best_judged_by_first"] == pytest.approx(1.0 / 1.1)
    failed = retest_efficiency(sitting([1.0, 1.1, 2.0]), sitting([1.2, 1.0, 2.0], ("failed", "ok", "ok")),
                               ["M", "N", "K", "BLOCK_M"])
    assert failed.loc[0, "configs"] == 2 and failed.loc[0, "first_best_judged_by_second"] == 1.0


def test_grouped_folds_never_put_a_shape_in_train_and_test(data):
    folds = grouped_folds(data.group, 5)
    tested = np.concatenate([test for _, test in folds])
    assert sorted(tested.tolist()) == list(range(len(SHAPES)))  # every shape scored exactly once
    for train, test in folds:
        assert not set(train) & set(test)
        assert not set(data.rows_of(train)) & set(data.rows_of(test))
        assert set(data.group[data.rows_of(test)]) == set(test)


def test_thin_shapes_keeps_a_seeded_ordered_share_and_rejects_a_bad_fraction():
    shapes = np.arange(100, 200)
    kept = thin_shapes(shapes, 0.1)
    assert len(kept) == 10 and set(kept) <= set(shapes) and (np.diff(kept) > 0).all()
    np.testing.assert_array_equal(kept, thin_shapes(shapes, 0.1))
    assert not np.array_equal(kept, thin_shapes(shapes, 0.1, seed=1))
    np.testing.assert_array_equal(thin_shapes(shapes, 1.0), shapes)
    assert len(thin_shapes(shapes, 0.001)) == 1
    for bad in (0.0, 1.5, -0.2):
        with pytest.raises(ValueError, match=r"fraction=.*\(0, 1\]"):
            thin_shapes(shapes, bad)


def test_tuning_reads_only_the_training_shapes(data):
    train, test = grouped_folds(data.group, 5)[0]
    poisoned = replace(data, latency_ms=data.latency_ms.copy(), features=data.features.copy())
    rows = data.rows_of(test)
    poisoned.latency_ms[rows] = np.inf
    poisoned.features[rows] = np.nan
    grid, iterations = {"max_leaf_nodes": (3, 7)}, (5, 10)
    clean = select_ranker(data, train, "relative", grid=grid, iterations=iterations)
    dirty = select_ranker(poisoned, train, "relative", grid=grid, iterations=iterations)
    assert clean[0] == dirty[0] and clean[1]["tried"] == dirty[1]["tried"]
    np.testing.assert_array_equal(clean[1]["out_of_fold_scores"], dirty[1]["out_of_fold_scores"])


def test_tuning_chooses_on_the_mean_of_the_inner_splits(data):
    train, _ = grouped_folds(data.group, 5)[0]
    settings, info = select_ranker(data, train, "relative", grid={"max_leaf_nodes": (3, 7)}, iterations=(5, 10))
    assert info["inner_splits"] == INNER_SPLITS >= 2
    for trial in info["tried"]:
        assert len(trial["inner_split_efficiencies"]) == INNER_SPLITS
        assert trial["inner_mean_efficiency"] == pytest.approx(np.mean(trial["inner_split_efficiencies"]))
    best = max(info["tried"], key=lambda trial: trial["inner_mean_efficiency"])
    assert (settings.max_leaf_nodes, settings.max_iter, settings.portfolio_size) == (
        best["max_leaf_nodes"], best["max_iter"], best["portfolio_size"])


def test_compiled_forest_equals_sklearn(data):
    ranker = ConfigRanker(replace(SMALL, max_iter=30, max_depth=6, max_leaf_nodes=15)).fit(data)
    rows = np.arange(0, len(data.latency_ms), 3)
    np.testing.assert_allclose(CompiledForest(ranker.models_[0]).predict(data.features[rows]),
                               ranker.score(data.features[rows]), rtol=1e-12, atol=1e-12)


def test_compiled_forest_bins_values_at_and_beyond_the_thresholds_as_sklearn_splits_them(data):
    """The forest walks binned rows: a value equal to a split's threshold goes left, one just above it right, and
    values past the first or last threshold (infinities too) land in the end bins."""
    ranker = ConfigRanker(replace(SMALL, max_iter=30, max_depth=6, max_leaf_nodes=15)).fit(data)
    forest = CompiledForest(ranker.models_[0])
    rng = np.random.default_rng(0)
    rows = data.features[rng.choice(len(data.features), 400)].copy()
    for feature, edges in enumerate(ranker.models_[0]._bin_mapper.bin_thresholds_):
        picks = rng.choice(len(edges), len(rows)) if len(edges) else np.zeros(len(rows), dtype=int)
        at = edges[picks] if len(edges) else np.zeros(len(rows))
        rows[:100, feature] = at[:100]
        rows[100:200, feature] = np.nextafter(at[100:200], np.inf)
        rows[200:300, feature] = np.where(rng.random(100) < 0.5, -np.inf, np.inf)
    np.testing.assert_allclose(forest.predict(rows), ranker.score(rows), rtol=1e-12, atol=1e-12)


def test_compiled_forest_of_several_models_is_their_mean(data):
    """Two models of different seeds (so their slow rows, and thus their bin thresholds, differ): one walk over both
    is the mean of their sklearn predictions."""
    first, second = (ConfigRanker(replace(SMALL, max_iter=30, max_depth=6, max_leaf_nodes=15, random_state=seed)
                                  ).fit(data).models_[0] for seed in (0, 1))
    assert any(not np.array_equal(a, b) for a, b in zip(first._bin_mapper.bin_thresholds_,
                                                        second._bin_mapper.bin_thresholds_))
    rows = data.features[::3]
    np.testing.assert_allclose(CompiledForest(first, second).predict(rows),
                               (first.predict(rows) + second.predict(rows)) / 2, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="at least one model"):
        CompiledForest()


_FORKED_FOREST: CompiledForest | None = None


def _forked_predict(rows: np.ndarray) -> np.ndarray:
    return _FORKED_FOREST.predict(rows, threads=3)


def test_compiled_forest_sums_alike_in_any_number_of_threads_and_in_a_forked_child(data):
    """The parts' sums are added in one order: every thread count gives the same bits. A child forked after the
    parent's threads started makes its own (fork copies none of them), so its walk still finishes."""
    global _FORKED_FOREST
    model = ConfigRanker(replace(SMALL, max_iter=30, max_depth=6, max_leaf_nodes=15)).fit(data).models_[0]
    forest = CompiledForest(model)
    rows = data.features[::5]
    single = forest.predict(rows)
    np.testing.assert_allclose(single, model.predict(rows), rtol=1e-12, atol=1e-12)
    for threads in range(2, PARTS + 1):
        np.testing.assert_array_equal(forest.predict(rows, threads=threads), single)
    _FORKED_FOREST = forest
    with multiprocessing.get_context("fork").Pool(1) as pool:
        np.testing.assert_array_equal(pool.apply_async(_forked_predict, (rows,)).get(timeout=120), single)
    for bad in (0, PARTS + 1, True, 1.5, "2"):
        with pytest.raises(ValueError, match=f"threads must be an integer from 1 to {PARTS}, got {bad!r}"):
            forest.predict(rows, threads=bad)


def test_compiled_forest_rejects_rows_of_another_width(data):
    forest = CompiledForest(ConfigRanker(SMALL).fit(data).models_[0])
    with pytest.raises(ValueError, match=f"rows of {data.features.shape[1]} features"):
        forest.predict(data.features[:3, :-1])


def test_slow_rows_are_subsampled_with_inverse_probability_weights(data):
    rows = np.arange(len(data.latency_ms))
    relative = relative_speed(data.latency_ms, data.group)
    slow = relative < SMALL.subsample_below
    assert 0.2 < slow.mean() < 0.9, "the synthetic data needs slow and fast rows for this test to bite"
    full_rows, full_target, full_weight = ConfigRanker(replace(SMALL, subsample_keep=1.0)).training_rows(data, rows)
    np.testing.assert_array_equal(full_rows, rows)
    kept, target, weight = ConfigRanker(SMALL).training_rows(data, rows)
    assert set(rows[~slow]) <= set(kept), "every fast row is kept"
    assert abs((~slow[kept]).sum() + slow[kept].sum() / SMALL.subsample_keep - len(rows)) < 0.15 * len(rows)
    np.testing.assert_allclose(weight, full_weight[kept] / np.where(slow[kept], SMALL.subsample_keep, 1.0))
    np.testing.assert_array_equal(target, full_target[kept])
    again = ConfigRanker(SMALL).training_rows(data, rows)[0]
    np.testing.assert_array_equal(again, kept)  # seeded


def test_models_are_seeded_apart_and_averaged(data):
    rows = np.arange(len(data.latency_ms))
    pair = ConfigRanker(replace(SMALL, models=2)).fit(data)
    single = ConfigRanker(SMALL).fit(data)
    first, second = (ConfigRanker(SMALL).training_rows(data, rows, member)[0] for member in (0, 1))
    assert len(first) != len(second) or (first != second).any(), "each model draws its own subsample"
    matrix = data.features[::7]
    np.testing.assert_array_equal(pair.models_[0].predict(matrix), single.models_[0].predict(matrix))
    assert not np.allclose(pair.models_[1].predict(matrix), pair.models_[0].predict(matrix))
    np.testing.assert_allclose(pair.score(matrix), (pair.models_[0].predict(matrix) + pair.models_[1].predict(matrix))
                               / 2, rtol=1e-12)
    np.testing.assert_array_equal(pair.score(matrix, members=1), single.score(matrix))
    staged = pair.staged_scores(matrix)
    assert len(staged) == SMALL.max_iter
    np.testing.assert_allclose(staged[-1], pair.score(matrix), rtol=1e-12, atol=1e-12)


def test_a_predictor_with_fewer_models_scores_with_its_first_ones(data, predictor):
    single = predictor.with_models(1)
    shape = (300, 5000, 3000)
    rows = single.candidate_features.rows(shape, np.arange(len(data.candidates)))
    np.testing.assert_array_equal(single.model_scores(shape), predictor.ranker.models_[0].predict(rows))
    assert len(single.forests[0].roots) == len(predictor.ranker.models_[0]._predictors)
    assert single.ranker.settings.models == 1
    with pytest.raises(ValueError, match="count must be from 1 to 2 \\(the models\\), got 3"):
        predictor.with_models(3)


def test_a_predictor_picks_alike_in_any_number_of_threads(tmp_path, data, predictor):
    path = tmp_path / "model.predictor"
    save_predictor(predictor, path)
    threaded = load_predictor(path, threads=PARTS)
    assert threaded.with_models(1).threads == PARTS
    for shape in data.shapes[::3]:
        assert threaded.best_config(shape) == predictor.best_config(shape)
    with pytest.raises(ValueError, match=f"threads must be an integer from 1 to {PARTS}, got 0"):
        load_predictor(path, threads=0)


def test_a_loaded_predictor_walks_in_parts_threads_only_on_a_host_of_many_cores(tmp_path, predictor, monkeypatch):
    path = tmp_path / "model.predictor"
    save_predictor(predictor, path)
    monkeypatch.setattr(forest, "usable_cores", lambda: MANY_CORES)
    assert load_predictor(path).threads == PARTS
    monkeypatch.setattr(forest, "usable_cores", lambda: MANY_CORES - 1)
    assert load_predictor(path).threads == 1
    assert load_predictor(path, threads=2).threads == 2


def test_fewer_than_one_model_is_an_error():
    for models in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match=f"models must be an integer >= 1, got {models!r}"):
            replace(SMALL, models=models)


def test_subsample_keep_outside_its_range_is_an_error():
    for keep in (0.0, 1.5):
        with pytest.raises(ValueError, match=f"subsample_keep must lie in \\(0, 1\\], got {keep}"):
            replace(SMALL, subsample_keep=keep)


# -- the predictor file ------------------------------------------------------------------------------------------

def test_save_load_round_trip(tmp_path, data, predictor):
    path = tmp_path / "model.predictor"
    save_predictor(predictor, path)
    header = read_header(path)
    assert header["feature_names"] == feature_names(data.space)
    assert (header["kernel"], header["dtype"], header["gpu"]) == ("matmul", "bfloat16", "Test GPU")
    assert header["hardware"]["sm_count"] == 132 and header["training"]["provenance"]["gpu_name"] == "Test GPU"
    loaded = load_predictor(path, gpu="Test GPU")
    for shape in [(5, 4096, 4096), (300, 5000, 3000), (9000, 2048, 2048)]:
        np.testing.assert_array_equal(loaded.scores(shape), predictor.scores(shape))
        assert loaded.best_config(shape) == predictor.best_config(shape)
        assert loaded.top_configs(shape, 3) == predictor.top_configs(shape, 3)
    assert loaded.best_config(np.array([5, 4096, 4096])) == predictor.best_config((5, 4096, 4096))


def _rewrite_header(path, change):
    magic, header, payload = path.read_bytes().split(b"\n", 2)
    content = json.loads(header)
    change(content)
    path.write_bytes(magic + b"\n" + json.dumps(content).encode() + b"\n" + payload)


def test_tampered_feature_name_is_rejected(tmp_path, predictor):
    path = tmp_path / "model.predictor"
    save_predictor(predictor, path)
    load_predictor(path)
    _rewrite_header(path, lambda header: header["feature_names"].__setitem__(3, "log2_M_renamed"))
    with pytest.raises(PredictorError, match="feature schema mismatch.*log2_M_renamed"):
        load_predictor(path)


def test_a_predictor_trained_on_other_kernel_code_warns_on_load_naming_the_hashes(tmp_path, predictor):
    """The training sittings' kernel source hashes against the current code's: another hash warns (naming it and
    the current one), the current one alone or none recorded is silent."""
    import warnings

    from tunebench.kernels import get_kernel, kernel_source_sha256
    from tunebench.predict import StaleTrainingWarning
    path = tmp_path / "model.predictor"
    save_predictor(predictor, path)
    current = kernel_source_sha256(get_kernel("matmul"))

    def recorded(*hashes):
        def change(header):
            header["training"]["provenance"]["kernel_source_sha256"] = hashes[0]
            header["training"]["provenance"]["sittings"] = [{"kernel_source_sha256": h} for h in hashes]
        return change

    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleTrainingWarning)
        load_predictor(path)  # the stand-in training data recorded no hash
        _rewrite_header(path, recorded(current))
        load_predictor(path)
    _rewrite_header(path, recorded("0123456789abcdef", current))
    stale = f"matmul source 0123456789abcdef, not of the current code \\({current}\\)"
    with pytest.warns(StaleTrainingWarning, match=stale):
        load_predictor(path)
    _rewrite_header(path, recorded(*(f"{i:016x}" for i in range(5))))
    with pytest.warns(StaleTrainingWarning, match=f"0000000000000002 and 2 more, .*\\({current}, in none of its"):
        load_predictor(path)


def test_a_file_of_another_format_version_is_rejected(tmp_path, predictor):
    path = tmp_path / "model.predictor"
    save_predictor(predictor, path)
    _rewrite_header(path, lambda header: header.__setitem__("format_version", 2))
    with pytest.raises(PredictorError,
                       match="format_version 2 is not one this code reads \\(5, 6, 7, 8, 9\\): fit and save"):
        load_predictor(path)


def test_a_header_whose_model_count_is_not_the_payloads_is_rejected(tmp_path, predictor):
    path = tmp_path / "model.predictor"
    save_predictor(predictor, path)
    assert len(load_predictor(path).ranker.models_) == 2
    _rewrite_header(path, lambda header: header["settings"].__setitem__("models", 3))
    with pytest.raises(PredictorError, match="the payload holds 2 models, the header's settings 3"):
        load_predictor(path)


def test_a_format_5_file_of_one_model_still_loads(tmp_path, data):
    single = fit_predictor(data, SMALL)
    path = tmp_path / "five.predictor"
    save_predictor(single, path)
    magic, header, payload = path.read_bytes().split(b"\n", 2)
    assert json.loads(header)["format_version"] == FORMAT_VERSION
    content = pickle.loads(zlib.decompress(payload))
    content["model"] = content.pop("models")[0]
    payload = zlib.compress(pickle.dumps(content))
    path.write_bytes(magic + b"\n" + header + b"\n" + payload)
    _rewrite_header(path, lambda header: header.update(format_version=5,
                                                       payload_sha256=hashlib.sha256(payload).hexdigest()))
    loaded = load_predictor(path)
    for shape in [(5, 4096, 4096), (300, 5000, 3000)]:
        np.testing.assert_array_equal(loaded.scores(shape), single.scores(shape))
        assert loaded.best_config(shape) == single.best_config(shape)


def test_tampered_payload_is_rejected(tmp_path, predictor):
    path = tmp_path / "model.predictor"
    save_predictor(predictor, path)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(PredictorError, match="checksum"):
        load_predictor(path)


def test_other_kernel_or_gpu_is_rejected(tmp_path, predictor):
    path = tmp_path / "model.predictor"
    save_predictor(predictor, path)
    with pytest.raises(PredictorError, match="kernel 'matmul', not 'conv2d'"):
        load_predictor(path, kernel="conv2d")
    with pytest.raises(PredictorError, match="GPU 'Test GPU', not 'NVIDIA A100'"):
        load_predictor(path, gpu="NVIDIA A100")
    (tmp_path / "other").write_bytes(b"not a predictor")
    with pytest.raises(PredictorError, match="not a tunebench predictor"):
        load_predictor(tmp_path / "other")


def assert_dispatches_its_ranking_and_round_trips(predictor, shapes, path):
    """The predictor's `best_config` is its full ranking's pick within the shortlist on every one of `shapes`, and it
    scores and picks alike once saved to `path` and loaded back (returned)."""
    for shape in [tuple(int(v) for v in s) for s in shapes]:
        shortlist = predictor.shortlist.for_shape(shape)
        scores = predictor.scores(shape)
        assert predictor.best_config(shape) == predictor.config(int(shortlist[np.argmax(scores[shortlist])]))
    save_predictor(predictor, path)
    loaded = load_predictor(path, kernel=matmul.NAME)
    for shape in [(5, 4096, 4096), (300, 5000, 3000), (9000, 2048, 2056)]:
        np.testing.assert_array_equal(loaded.scores(shape), predictor.scores(shape))
        assert loaded.best_config(shape) == predictor.best_config(shape)
    return loaded


def test_best_config_is_the_full_rankings_pick_when_the_shortlist_holds_it(data, predictor):
    for shape in [tuple(int(v) for v in s) for s in data.shapes]:
        shortlist = predictor.shortlist.for_shape(shape)
        scores = predictor.scores(shape)
        expected = predictor.config(int(shortlist[np.argmax(scores[shortlist])]))
        assert predictor.best_config(shape) == expected
        assert len(shortlist) <= SIZE


def test_timed_best_config_keeps_the_fastest_of_the_models_top_k(dataset, predictor):
    shape = SHAPES[1]
    pick = predictor.timed_best_config(shape, ReplayEvaluator(dataset, shape), k=5)
    top = predictor.top_configs(shape, 5)
    assert [dict(result.config) for result in pick.results] == top
    latencies = [synthetic_latency(shape, config) for config in top]
    assert pick.config == top[int(np.argmin(latencies))]
    assert pick.latency_ms == pytest.approx(min(latencies))


class FailingEvaluator:
    shape = SHAPES[0]

    def evaluate(self, configs):
        return [Result(config, Status.COMPILE_ERROR, error="out of resources") for config in configs]


def test_timed_best_config_errors(dataset, predictor):
    with pytest.raises(RuntimeError, match=r"none of the model's top 3 configs ran .*compile_error"):
        predictor.timed_best_config(SHAPES[0], FailingEvaluator(), k=3)
    with pytest.raises(ValueError, match=r"measures shape \(3, 5000, 3000\), not \(1, 4096, 4096\)"):
        predictor.timed_best_config(SHAPES[0], ReplayEvaluator(dataset, SHAPES[1]))
    for k in (0, 41, True, 2.0):
        with pytest.raises(ValueError, match=f"k must be an integer from 1 to 40 .*got {k!r}"):
            predictor.timed_best_config(SHAPES[0], FailingEvaluator(), k=k)


def test_portfolio_is_a_greedy_cover_of_near_best_configs(data):
    two = np.array([0, 1])
    latency = data.latency_ms.copy()
    table = latency.reshape(len(data.shapes), -1)
    table[:2] = 10.0
    table[0, 3], table[0, 5], table[1, 5], table[1, 7] = 1.0, 1.1, 2.0, 1.0
    covered = replace(data, latency_ms=table.ravel())
    # candidate 5 is near-best on both shapes (mean relative speed (1/1.1 + 1/2) / 2), more than 3 or 7 alone (0.55)
    assert portfolio(covered, two, 1).tolist() == [5]
    assert portfolio(covered, two, 2).tolist() == [5, 7]  # 7 lifts shape 1 from 0.5 to 1; 3 lifts shape 0 by 0.09
    assert sorted(portfolio(covered, two, 3).tolist()) == [3, 5, 7]
    assert portfolio(covered, two, 0).tolist() == list(range(len(data.candidates)))


def test_a_predictor_picks_only_from_its_portfolio(data):
    small = fit_predictor(data, replace(SMALL, portfolio_size=3))
    assert len(small.portfolio) == 3
    for shape in [(5, 4096, 4096), (300, 5000, 3000), (9000, 2048, 2048)]:
        scores = small.scores(shape)
        assert np.isfinite(scores).sum() == 3 and np.argmax(scores) in small.portfolio
        assert small.config(int(np.argmax(scores))) == small.best_config(shape)
        top = small.top_configs(shape, 5)
        assert sorted(map(str, top[:3])) == sorted(str(small.config(int(i))) for i in small.portfolio)
        assert len(top) == 5 and top[0] == small.best_config(shape)
    np.testing.assert_array_equal(restrict(np.array([[3.0, 2.0, 1.0]]), np.array([1])), [[-np.inf, 2.0, -np.inf]])


# -- warm start --------------------------------------------------------------------------------------------------

def bowl_space() -> Space:
    return Space([PowerOfTwo("BLOCK_M", 16, 256), PowerOfTwo("BLOCK_N", 16, 256), IntRange("stages", 1, 4)],
                 name="bowl")


def bowl(config) -> Result:
    latency = 1.0 + (math.log2(config["BLOCK_M"]) - 6) ** 2 + (math.log2(config["BLOCK_N"]) - 5) ** 2 \
        + 0.3 * abs(config["stages"] - 3)
    return Result(dict(config), Status.OK, latency_ms=latency, repeats_ms=(latency,))


def drive(strategy, limit=200) -> list[list[dict]]:
    asked = []
    while sum(map(len, asked)) < limit:
        batch = strategy.ask()
        if not batch:
            break
        asked.append(batch)
        strategy.tell([bowl(config) for config in batch])
    return asked


SEEDS = [{"BLOCK_M": 64, "BLOCK_N": 64, "stages": 3}, {"BLOCK_M": 128, "BLOCK_N": 32, "stages": 2},
         {"BLOCK_M": 16, "BLOCK_N": 256, "stages": 1}]


@pytest.mark.parametrize("inner", ["pattern", "lfbo", "random"])
def test_warm_start_asks_the_seeds_first_then_the_inner_strategy(inner):
    settings = {"initial_population": 12, "num_neighbors": 30, "n_trees": 10} if inner == "lfbo" else (
        {"initial_population": 12} if inner == "pattern" else {})
    asked = drive(warm_start(inner, bowl_space(), SEEDS, seed=3, **settings))
    assert asked[0] == SEEDS
    # The reference: the inner strategy alone over the seeded space, answered by the same function.
    reference = drive(make_strategy(inner, SeededSpace(bowl_space(), SEEDS), seed=3, **settings), limit=10_000)
    space = bowl_space()
    seen = {space.key(config) for config in SEEDS}
    expected = []
    for batch in reference:
        new = [config for config in batch if space.key(config) not in seen]
        seen.update(space.key(config) for config in new)
        if new:
            expected.append(new)
    assert asked[1:] == expected[:len(asked) - 1]
    keys = [space.key(config) for batch in asked for config in batch]
    assert len(keys) == len(set(keys))  # nothing measured twice
    assert all(space.key(seed) in {space.key(c) for c in reference[0]} for seed in SEEDS)  # seeds in its population


def test_warm_start_without_seeds_is_the_inner_strategy():
    plain = drive(make_strategy("pattern", bowl_space(), seed=5, initial_population=10))
    wrapped = drive(WarmStart(bowl_space(), 5, WarmStart.Settings("pattern", (("initial_population", 10),))))
    assert wrapped == plain


def test_a_warm_start_with_restart_starts_from_the_seeds_and_runs_afresh_when_the_seeded_run_stops():
    """The seeds alone are the seeded run's population (no random configs before its copies start); when it stops,
    fresh runs go on until one asks nothing new, and nothing is measured twice."""
    with_restart = warm_start("pattern", bowl_space(), SEEDS, seed=3, restart=True)
    assert with_restart.inner.settings.initial_population == len(SEEDS)
    seeded_only = drive(warm_start("pattern", bowl_space(), SEEDS, seed=3, initial_population=len(SEEDS)), 10_000)
    asked = drive(with_restart, limit=10_000)
    assert asked[:len(seeded_only)] == seeded_only
    space = bowl_space()
    keys = [space.key(config) for batch in asked for config in batch]
    assert len(keys) == len(set(keys)) == len(space), "the fresh runs measured the rest of the space, once each"
    assert with_restart.done
    plain = drive(warm_start("pattern", bowl_space(), SEEDS, seed=3), 10_000)
    assert len(plain[1]) == 100 - len(SEEDS) and len(asked[1]) < len(plain[1])  # no random population first
    with pytest.raises(ValueError, match="unknown setting 'initial_population' for strategy 'random'"):
        warm_start("random", bowl_space(), SEEDS, restart=True)


def test_restart_patience_ends_the_restarts_after_a_fresh_run_that_found_nothing_better():
    """With patience 1 the asks are the unlimited restart's, cut where the first fresh run that did not lower the best
    by RESTART_GAIN ended: after the seeded run, before the rest of the space."""
    space = bowl_space()
    seeded_only = drive(warm_start("pattern", bowl_space(), SEEDS, seed=3, initial_population=len(SEEDS)), 10_000)
    # fresh runs start from 8 random configs, so that one does not cover the 100 configs of the space at once
    unlimited = drive(warm_start("pattern", bowl_space(), SEEDS, seed=3, restart=True, initial_population=8), 10_000)
    patient = warm_start("pattern", bowl_space(), SEEDS, seed=3, restart=True, restart_patience=1,
                         initial_population=8)
    asked = drive(patient, 10_000)
    assert patient.done and asked == unlimited[:len(asked)]
    count = lambda batches: sum(map(len, batches))  # noqa: E731
    assert count(seeded_only) < count(asked) < count(unlimited)
    best = min(bowl(config).latency_ms for batch in asked for config in batch)
    assert best == min(bowl(config).latency_ms for batch in unlimited for config in batch) == 1.0
    for bad, named in ((dict(restart_patience=-1, restart=True), "restart_patience=-1"),
                       (dict(restart_patience=2), "restart_patience=2")):
        with pytest.raises(ValueError, match=f"{named}: it counts fresh runs"):
            warm_start("pattern", space, SEEDS, **bad)


def test_warm_start_tells_the_inner_strategy_the_seed_results():
    strategy = warm_start("pattern", bowl_space(), SEEDS, seed=1, initial_population=8)
    strategy.tell([bowl(config) for config in strategy.ask()])
    strategy.ask()  # hands over: the inner strategy asks its population, which holds the seeds
    assert strategy.inner.observed[bowl_space().key(SEEDS[0])] == bowl(SEEDS[0]).latency_ms


# -- transfer across GPUs ----------------------------------------------------------------------------------------

def other_gpu(dataset: Dataset) -> Dataset:
    """The same candidates on a made-up second GPU where 8 warps run 3 times slower."""
    frame = dataset.measurements.copy()
    slower = np.where(frame["num_warps"] == 8, 3.0, 1.0)
    frame["latency_ms"] = frame["latency_ms"] * slower
    frame["repeats_ms"] = [[value * factor for value in repeats] for repeats, factor in zip(frame["repeats_ms"], slower)]
    return replace(dataset, gpu="Other GPU", measurements=frame, provenance={"sm_count": 132, "gpu_name": "Other GPU"})


def test_transfer_scores_target_shapes_with_and_without_target_data(dataset, data):
    target = training_data(other_gpu(dataset), data.resources)
    table = transfer_efficiency(data, target, SMALL, added_shapes=(0, 4), n_splits=5)
    assert set(table["variant"]) == {"source only", "source + 4 target shapes", "target only"}
    assert table.groupby("variant").size().eq(len(SHAPES)).all(), "every target shape held out once per variant"
    assert table["efficiency"].between(0, 1).all()
    assert table.groupby("variant")["target shapes in training"].max().to_dict() == {
        "source only": 0, "source + 4 target shapes": 4, "target only": 8}
    # The target's shapes are the source's: each held-out one is left out of the source training data as well.
    held_out_per_fold = table[table["variant"] == "source only"].groupby("fold").size()
    source_counts = table[table["variant"] == "source only"].groupby("fold")["source shapes in training"].first()
    assert (source_counts == len(SHAPES) - held_out_per_fold).all()
    mean = table.groupby("variant")["efficiency"].mean()
    assert mean["target only"] > mean["source only"], "the source GPU's ranking misleads on the other GPU"


def test_transfer_needs_the_same_candidates(dataset, data):
    fewer = dataset.measurements[dataset.measurements["BLOCK_M"] != 16]
    with pytest.raises(ValueError, match="same candidate set"):
        combine(data, training_data(replace(dataset, measurements=fewer), data.resources))
