"""The prediction benchmarks' own logic: benchmarks/head_ablation.py's re-implemented head and fold cache, and
benchmarks/config_prediction_cv.py's per-class table, benchmarks/config_prediction_learning_curve.py's draws,
benchmarks/pooled_training.py's arms, benchmarks/h200_training_shapes.py's replay,
benchmarks/warm_start_tail.py's tail, benchmarks/warm_start_variants.py's seeded replays and
benchmarks/profile_frozen_check.py's frozen picks and judgement, benchmarks/config_prediction_retime.py's noise mode
and benchmarks/flush_ceiling.py's two-sitting ceiling."""

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from test_predict import SMALL, data, dataset, predictor, resources  # noqa: F401  (module fixtures)
from test_predict_head import synthetic_lists
from tunebench.predict import fit_predictor, grouped_folds, load_predictor, save_predictor, training_data
from tunebench.predict.evidence import COLUMNS as EVIDENCE_COLUMNS
from tunebench.predict.head import HeadSettings, fit_head, head_efficiency

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # the scripts import their siblings
import config_prediction_cv  # noqa: E402
import config_prediction_learning_curve  # noqa: E402
import head_ablation  # noqa: E402
import stand_in_bench  # noqa: E402
import h200_held_out  # noqa: E402
import h200_training_shapes  # noqa: E402
import pooled_training  # noqa: E402
import profile_frozen_check  # noqa: E402
import twin_floor  # noqa: E402
import twin_noise  # noqa: E402
import warm_start_tail  # noqa: E402
import warm_start_variants  # noqa: E402
import sitting_ceiling  # noqa: E402


def test_the_head_ablations_deployed_variant_is_the_deployed_head(tmp_path, data):  # noqa: F811
    """benchmarks/head_ablation.py re-implements the head to vary it: unvaried, it must pick as `fit_head` does; and a
    cached fold must hold both sides' lists, disjoint, LIST_SIZE long."""
    train, test = synthetic_lists(seed=0), synthetic_lists(seed=1)
    deployed = head_efficiency(test, fit_head(train, HeadSettings(max_leaf_nodes=31, size=6)))
    np.testing.assert_array_equal(head_ablation.pairwise(size=6)(train, test), deployed)

    folds = grouped_folds(data.group, 5)
    path = head_ablation.cache_fold(data, SMALL, 0, *folds[0], tmp_path / "fold0.npz")
    held_out, train_lists, test_lists = head_ablation.load_fold(path)
    np.testing.assert_array_equal(held_out, folds[0][1])
    assert train_lists.rows.shape[:2] == (len(folds[0][0]), head_ablation.LIST_SIZE)
    assert test_lists.rows.shape[:2] == (len(folds[0][1]), head_ablation.LIST_SIZE)
    np.testing.assert_array_equal(test_lists.best_ms, data.latency_ms[data.rows_of(held_out)].reshape(
        len(held_out), -1).min(axis=1))
    # both sides' rows: the features, then the neighbour evidence, which the ablation's variant strips
    assert train_lists.rows.shape[-1] == test_lists.rows.shape[-1] == data.features.shape[1] + len(EVIDENCE_COLUMNS)
    width = head_ablation.without_evidence(lambda train, test: (train.rows.shape[-1], test.rows.shape[-1]))
    assert width(train_lists, test_lists) == (data.features.shape[1],) * 2
    efficiency = head_ablation.pairwise(context=True)(train_lists, test_lists)
    assert efficiency.shape == (len(held_out),) and ((0 < efficiency) & (efficiency <= 1)).all()


def test_the_cross_validation_scripts_class_table_reads_mean_p10_and_min_of_each_class():
    efficiency = np.array([1.0, 0.9, 0.8, 0.95, 0.5])
    table = pd.DataFrame({"alignment": ["aligned", "aligned", "aligned", "odd", "odd"],
                          "real_model_layer": [True, True, False, False, False],
                          **{f"{column}_efficiency": efficiency for column, _ in config_prediction_cv.PIPELINE_ROWS}})
    rows = config_prediction_cv.class_table(table)
    assert rows["shapes"].tolist() == ["aligned (3)", "odd (2)", "real-model layers (2)"]  # no hinted row: none
    full = config_prediction_cv.PIPELINE_ROWS[0][1]
    assert rows[full].tolist() == ["90.00 / 82.00 / 80.00 %", "72.50 / 54.50 / 50.00 %", "95.00 / 91.00 / 90.00 %"]


def test_the_deployed_fit_chooses_among_the_objectives_given_and_records_the_metrics(data):  # noqa: F811
    """`config_prediction.fit_deployed`, shared by both scripts: the objective is one of those given, the head reads
    the neighbour evidence of every shape, and the header carries the cross-validation's metrics."""
    import config_prediction  # noqa: E402  (a sibling script)
    predictor = config_prediction.fit_deployed(data, ("relative",), {"mean": 0.5}, threads=1)
    assert predictor.ranker.settings.objective == "relative"
    assert predictor.head is not None and len(predictor.evidence.coordinates) == len(data.shapes)
    metrics = predictor.header["metrics"]
    assert metrics["mean"] == 0.5 and "objective (relative)" in metrics["protocol"]


def test_the_fit_only_script_saves_a_predictor_carrying_the_cross_validations_metrics(dataset, tmp_path,  # noqa: F811
                                                                                       monkeypatch):
    """`fit_deployed_predictor.py` on a saved dataset and a per-shape CSV of its shapes: the predictor reloads with
    the CSV's full-ranking summary in its header, and the report says so; a CSV of other shapes is refused."""
    import fit_deployed_predictor  # noqa: E402  (a sibling script)
    from tunebench.measure.dataset import save_dataset
    path, csv = tmp_path / "data.parquet", tmp_path / "cv_per_shape.csv"
    save_dataset(dataset, path)
    shapes = dataset.measurements[["M", "N", "K"]].drop_duplicates()
    efficiency = np.linspace(0.9, 1.0, len(shapes))
    shapes.assign(selected_efficiency=efficiency).to_csv(csv, index=False)
    out, report = tmp_path / "deployed.predictor", tmp_path / "deployed.md"
    monkeypatch.setattr(sys, "argv", ["fit_deployed_predictor.py", "--dataset", str(path), "--cv-per-shape", str(csv),
                                      "--threads", "1", "--out", str(out), "--report", str(report)])
    assert fit_deployed_predictor.main() == 0
    metrics = load_predictor(out, kernel="matmul", gpu="Test GPU").header["metrics"]
    assert metrics["mean"] == pytest.approx(efficiency.mean()) and metrics["min"] == pytest.approx(0.9)
    assert metrics["top1_hit_rate"] == pytest.approx(1 / len(shapes))
    assert f"mean {100 * efficiency.mean():.2f} %, P10" in report.read_text()
    shapes.iloc[1:].assign(selected_efficiency=1.0).to_csv(csv, index=False)
    with pytest.raises(SystemExit, match="scores 9 shapes, the dataset has 10; 1 of the dataset's are not in it"):
        fit_deployed_predictor.main()


def test_pooled_re_timings_are_every_sittings_shapes_together(tmp_path):
    """`config_prediction_retime.py pool` over two recorded checks: the pooled mean is that of both sittings' shapes
    judged one by one; a sitting with an untimed frozen shape is refused."""
    import argparse

    import config_prediction_retime as retime  # noqa: E402  (a sibling script)
    from tunebench.predict.evaluation import retimed_efficiency
    results = Path(__file__).resolve().parents[1] / "results" / "config_prediction"
    journals = [results / "retime_h100_thirteenth.csv", results / "retime_h100_fourteenth.csv"]
    out = tmp_path / "pooled.md"
    retime.pool(argparse.Namespace(journals=journals, out=out))
    judged = pd.concat([retimed_efficiency(pd.read_csv(j), pd.read_csv(retime.picks_path(j)), retime.TOP_K)
                        for j in journals])
    assert len(judged) == 96
    assert f"| prediction | {judged['prediction'].mean():.2%} | {np.percentile(judged['prediction'], 10):.2%} |" in (
        out.read_text())
    unfinished = tmp_path / "unfinished.csv"
    unfinished.write_text(journals[0].read_text())
    picks = pd.read_csv(retime.picks_path(journals[0]))
    pd.concat([picks, picks.iloc[:1].assign(M=7)]).to_csv(retime.picks_path(unfinished), index=False)
    with pytest.raises(SystemExit, match="1 of its 49 frozen shapes were not timed"):
        retime.pool(argparse.Namespace(journals=[unfinished], out=out))


def test_compared_re_timings_judge_the_first_journals_picks_by_each_sitting_per_family(tmp_path):
    """`config_prediction_retime.py compare`: a recorded check and a copy of it whose M < 8 shapes' non-best configs
    ran 8 us slower, labelled as timed under the read flush, judge the same picks; the copy
    says its flush, its efficiencies move only where the latencies did (the paired difference says by how much), and a
    journal of other shapes is refused."""
    import argparse
    import json

    import config_prediction_retime as retime  # noqa: E402  (a sibling script)
    from tunebench.predict.evaluation import retimed_efficiency
    results = Path(__file__).resolve().parents[1] / "results" / "config_prediction"
    zero = results / "retime_h100_thirteenth.csv"
    frame = pd.read_csv(zero)
    read = tmp_path / "read.csv"
    slower = (frame["M"] < 8) & (frame["latency_ms"] > frame.groupby(["M", "N", "K"])["latency_ms"].transform("min"))
    frame.assign(latency_ms=frame["latency_ms"] + 0.008 * slower).to_csv(read, index=False)
    provenance = json.loads(zero.with_suffix(".provenance.json").read_text())
    read.with_suffix(".provenance.json").write_text(json.dumps({**provenance, "timing": {"flush": "read"}}))
    out = tmp_path / "compared.md"
    retime.compare(argparse.Namespace(journals=[zero, read], out=out))
    text = out.read_text()
    picks = pd.read_csv(retime.picks_path(zero))
    judged = {name: retimed_efficiency(pd.read_csv(journal), picks, retime.TOP_K)
              for name, journal in (("zero", zero), ("read", read))}
    for name, table in judged.items():
        large = table[table["M"] >= 1024]["prediction"]
        assert f"| M >= 1024 | {len(large)} |" in text
        assert f"{large.mean():.2%} / {np.percentile(large, 10):.2%} / {large.min():.2%}" in text
    small = {name: table[table["M"] < 8]["prediction"].mean() for name, table in judged.items()}
    assert small["read"] < small["zero"]
    paired = (judged["read"]["prediction"] - judged["zero"]["prediction"])[judged["zero"]["M"] < 8]
    assert f"| {retime.paired_difference(paired)} |" in text and retime.paired_difference(paired).startswith("-")
    assert retime.paired_difference(paired.iloc[:1]).endswith("(n/a)")
    moved = f"| {100 * paired.abs().median():.2f}, {int((100 * paired.abs() > retime.SPREAD_POINTS).sum())} |"
    assert moved in text and not moved.startswith("| 0.00, 0")
    assert "retime_h100_thirteenth (flush zero)" in text and "read (flush read)" in text
    with pytest.raises(SystemExit, match="two or more"):
        retime.compare(argparse.Namespace(journals=[zero], out=out))
    other = tmp_path / "other.csv"
    frame.assign(M=frame["M"] + 100_000).to_csv(other, index=False)
    other.with_suffix(".provenance.json").write_text("{}")
    with pytest.raises(SystemExit, match="other.csv timed none of the shapes of retime_h100_thirteenth.picks.csv"):
        retime.compare(argparse.Namespace(journals=[zero, other], out=out))


def test_the_unaligned_learning_curve_keeps_every_aligned_shape_and_draws_the_others():
    shapes = np.array([(64, 4096, 4096), (8, 4100, 4096), (8, 4096, 4097), (2, 1024, 512), (3, 1000, 511),
                       (5, 4104, 1024)])
    classes = config_prediction_learning_curve.shape_classes(shapes)
    assert classes.tolist() == ["aligned", "hinted", "odd", "aligned", "odd", "hinted"]
    train = np.arange(len(shapes))
    draw = config_prediction_learning_curve.training_draw
    assert draw(train, classes, 0, None, "unaligned").tolist() == train.tolist()
    assert draw(train, classes, 0, 0, "unaligned").tolist() == [0, 3]
    two = draw(train, classes, 0, 2, "unaligned")
    assert {0, 3} < set(two.tolist()) and len(two) == 4 and two.tolist() == sorted(two.tolist())
    np.testing.assert_array_equal(two, draw(train, classes, 0, 2, "unaligned"))  # seeded
    assert len(draw(train, classes, 0, 3, "all")) == 3


def test_the_twin_floor_compares_the_twin_and_the_predictors_on_the_shapes_both_tables_hold():
    floor = pd.DataFrame({"M": [1, 2, 300], "N": [64, 64, 64], "K": [32, 32, 32], "twin_efficiency": [0.9, 1.0, 0.8]})
    per_shape = pd.DataFrame({"M": [1, 2, 5], "N": [64, 64, 64], "K": [32, 32, 32], "family": ["M < 8"] * 3,
                              "alignment": ["aligned", "odd", "odd"], "dispatcher_efficiency": [1.0, 0.5, 0.7],
                              "top10_timed_efficiency": [1.0, 1.0, 1.0]})
    overall = twin_floor.comparison(floor, per_shape, None)
    assert overall[["shapes", "count"]].values.tolist() == [["all", 2]]
    assert overall["the twin (the best's own kernel, timed again)"].item() == "95.00 / 91.00 / 90.00 %"
    assert overall["`best_config`"].item() == "75.00 / 55.00 / 50.00 %"
    by_class = twin_floor.comparison(floor, per_shape, "alignment")
    assert by_class[["shapes", "count"]].values.tolist() == [["aligned", 1], ["odd", 1]]


def test_the_twin_noise_summary_pools_rounds_and_flags_a_pair_that_differs_in_every_round(tmp_path):
    rows = []
    jitter = np.random.default_rng(0)
    for pair in range(4):
        for round_index in range(6):
            for group_m in (1, 8):
                slower = 1.10 if pair == 0 and group_m == 8 else 1.0  # pair 0 is no pair of equals
                rows.append({"policy": "default", "round": round_index, "M": 4, "N": 4096, "K": 4096, "pair": pair,
                             "BLOCK_M": 16, "BLOCK_N": 64, "GROUP_M": group_m, "status": "ok",
                             "latency_ms": 0.02 * slower * (1 + 0.001 * jitter.standard_normal()), "repeats": 30,
                             "gpu": "stand-in"})
    out = tmp_path / "twin_noise.csv"
    pd.DataFrame(rows).to_csv(out, index=False)
    text = twin_noise.summarize(out, "command")
    row = next(line for line in text.splitlines() if line.startswith("| default"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[:4] == ["default", "30", "4", "6"]
    assert cells[-1] == "1 of 4"


def test_the_sitting_ceiling_judges_the_rounds_fastest_by_the_recording_and_the_recorded_best_by_the_rounds():
    rows = []
    # recorded: rank 0 at 1.00, rank 1 at 1.02; the rounds find rank 1 faster (medians 0.99 against 1.10)
    for round_index, (first, second) in enumerate([(1.10, 0.99), (1.09, 0.98), (1.12, 1.00)]):
        for rank, recorded, latency in ((0, 1.00, first), (1, 1.02, second)):
            rows.append({"policy": "default", "round": round_index, "M": 1, "N": 4096, "K": 4096,
                         "recorded_rank": rank, "recorded_ms": recorded, "status": "ok", "latency_ms": latency})
    table = sitting_ceiling.per_shape(pd.DataFrame(rows))
    row = table.iloc[0]
    assert row["rounds_best_by_recording"] == pytest.approx(1.00 / 1.02)
    assert row["recorded_best_by_rounds"] == pytest.approx(0.99 / 1.10)
    assert not row["recorded_best_stays_best"] and row["rounds_best_recorded_rank"] == 1
    assert (row["family"], row["alignment"]) == ("M < 8", "aligned")


def test_timing_in_rounds_refuses_no_rounds_and_a_plan_without_the_columns(tmp_path):
    from tunebench.measure.rounds import time_in_rounds
    from tunebench.measure.timing import TimingPolicy

    plan = pd.DataFrame({"M": [1], "N": [64], "K": [64], "BLOCK_M": [16]})
    with pytest.raises(ValueError, match="rounds=0"):
        time_in_rounds(tmp_path / "t.csv", plan, ["M", "N", "K"], ["BLOCK_M"], {"default": TimingPolicy()}, 0, 0)
    with pytest.raises(ValueError, match="BLOCK_N"):
        time_in_rounds(tmp_path / "t.csv", plan, ["M", "N", "K"], ["BLOCK_M", "BLOCK_N"], {"default": TimingPolicy()},
                       1, 0)


class RoundsBench(stand_in_bench.StandInBench):
    def latency_ms(self, config, shape):
        return config["BLOCK_M"] * 0.001 + shape[0] * 0.1


def test_timing_in_rounds_appends_each_round_and_a_rerun_times_only_the_missing_ones(tmp_path, monkeypatch):
    from tunebench.measure import live
    from tunebench.measure.rounds import time_in_rounds
    from tunebench.measure.timing import TimingPolicy

    monkeypatch.setattr(live, "GpuBench", RoundsBench)
    plan = pd.DataFrame({"M": [1, 1, 2, 2], "N": [64] * 4, "K": [64] * 4, "BLOCK_M": [16, 32, 16, 32],
                         "tag": ["a", "b", "c", "d"]})
    out = tmp_path / "rounds.csv"
    args = (plan, ["M", "N", "K"], ["BLOCK_M"], {"default": TimingPolicy()})
    first = time_in_rounds(out, *args, 2, 7)
    assert len(first) == 8 and sorted(first["round"].unique()) == [0, 1]
    assert (first["latency_ms"] == first["BLOCK_M"] * 0.001 + first["M"] * 0.1).all()
    assert set(first["tag"]) == {"a", "b", "c", "d"} and (first["gpu"] == "stand-in").all()
    resumed = time_in_rounds(out, *args, 3, 7)
    assert len(resumed) == 12 and (pd.read_csv(out)["round"] == 2).sum() == 4
    fresh = time_in_rounds(tmp_path / "fresh.csv", *args, 3, 7)
    assert resumed["tag"].tolist() == fresh["tag"].tolist()  # the same shuffled orders


def test_the_h200_picks_come_from_a_predictor_that_saw_none_of_those_shapes(tmp_path, dataset, resources):  # noqa: F811
    """`h200_held_out.py`: the held-out shapes leave the training set whole; the frozen picks are the predictor's,
    each replayed on the recorded sittings; a predictor trained on a held-out shape and an existing file are refused."""
    held_out = set(dataset.shapes()[:3])
    training = h200_held_out.without_shapes(dataset, held_out)
    assert set(training.shapes()) == set(dataset.shapes()) - held_out
    assert not set(zip(training.vendor["M"], training.vendor["N"], training.vendor["K"])) & held_out
    second_gpu = h200_held_out.without_shapes(dataset, set(dataset.shapes()) - held_out)
    predictor = fit_predictor(training_data(training, resources), SMALL)
    path, picks = tmp_path / "held_out.predictor", tmp_path / "picks.csv"
    save_predictor(predictor, path)
    h200_held_out.freeze(path, picks, dataset, second_gpu)
    frame = pd.read_csv(picks)
    assert set(zip(frame["M"], frame["N"], frame["K"])) == held_out
    for row in frame.itertuples(index=False):
        shape = (row.M, row.N, row.K)
        assert row.dispatcher_config == h200_held_out.config_text(predictor.best_config(shape))
        speed = h200_held_out.recorded_speed(dataset, shape)
        task = dataset.task(shape)
        picked = task[(task[list(dataset.parameter_names)] == list(predictor.best_config(shape).values())).all(axis=1)]
        assert row.dispatcher_h200_replay == pytest.approx(dataset.optimum_ms(shape) / picked["latency_ms"].item())
        assert speed[row.best_config] == 1.0
        assert row.selected_top10_timed_efficiency == pytest.approx(speed[row.top10_configs.split(";")].max())
    with pytest.raises(SystemExit, match="never overwritten"):
        h200_held_out.freeze(path, picks, dataset, second_gpu)
    save_predictor(fit_predictor(training_data(dataset, resources), SMALL), path)
    with pytest.raises(SystemExit, match="trained on H200 shapes"):
        h200_held_out.freeze(path, tmp_path / "other.csv", dataset, second_gpu)


def test_pooled_training_scores_every_primary_shape_and_changes_are_paired_by_seed(monkeypatch, data):  # noqa: F811
    """Every primary shape is scored, the same way again for the same seed, differently with extra data to train on;
    the summary's change per seed is the arm's mean minus the H100-only arm's mean of that seed."""
    monkeypatch.setattr(pooled_training, "SETTINGS", SMALL)
    alone = pooled_training.run_arm(data, [], seed=0, workers=1)
    assert alone.shape == (len(data.shapes),) and ((alone > 0) & (alone <= 1)).all()
    pooled = pooled_training.run_arm(data, [data], seed=0, workers=2)
    np.testing.assert_array_equal(pooled_training.run_arm(data, [data], seed=0, workers=1), pooled)
    assert (pooled != alone).any()

    (base, _), (extra, _), _ = pooled_training.ARMS
    shapes = [(8, 512, 513), (16, 512, 512)]
    rows = [{"arm": arm, "seed": seed, "M": m, "N": n, "K": k, "efficiency": value}
            for arm, seed, values in ((base, 0, (0.9, 1.0)), (extra, 0, (1.0, 1.0)), (base, 1, (0.8, 0.8)),
                                      (extra, 1, (0.8, 0.7)))
            for (m, n, k), value in zip(shapes, values)]
    table = pd.DataFrame(rows).assign(alignment=["odd", "aligned"] * 4)
    summary = pooled_training.summary(table).set_index("training data")
    assert summary.loc[extra, "mean's change per seed (points)"] == "+5.00, -5.00"
    assert summary.loc[base, "hinted or odd, M >= 8"].startswith("85.00 / ")


def test_pooled_training_reads_only_rows_of_the_extra_datas_current_size():
    """Rows trained with an extra dataset since grown stay in the CSV but leave the report and are run again."""
    (base, _), (extra, _), _ = pooled_training.ARMS
    table = pd.DataFrame({"arm": [base, extra, extra, "an arm no longer run"], "seed": 0,
                          "extra_shapes": [0, 48, 138, 5], "M": 8, "N": 512, "K": 513,
                          "efficiency": [0.9, 0.8, 0.95, 1.0]})
    current = pooled_training.current_rows(table, {base: 0, extra: 138})
    assert current["efficiency"].tolist() == [0.9, 0.95]


def test_best_config_agreement_judges_the_other_gpus_fastest_by_the_primarys_latencies(data):  # noqa: F811
    
    same = pooled_training.best_config_agreement(data, data)
    assert len(same) == len(data.shapes) and (same["efficiency"] == 1).all()
    count = len(data.candidates)
    reversed_latency = data.latency_ms.reshape(-1, count)[:, ::-1].ravel()  # each candidate timed as its mirror is
    other = replace(data, latency_ms=reversed_latency, shapes=data.shapes[:2], group=data.group[:2 * count])
    judged = pooled_training.best_config_agreement(data, other)
    latency = data.latency_ms.reshape(-1, count)[:2]
    expected = latency.min(axis=1) / latency[np.arange(2), np.argmin(latency[:, ::-1], axis=1)]  # the other's pick
    np.testing.assert_allclose(judged["efficiency"], expected)
    summary = pooled_training.agreement_summary(judged)
    assert summary["count"].sum() == 2
    with pytest.raises(ValueError, match="other candidate configs"):
        pooled_training.best_config_agreement(data, replace(data, candidates=data.candidates[:-1]))


def test_the_profile_check_freezes_each_arms_picks_times_their_union_and_judges_each_by_the_rounds(
        tmp_path, monkeypatch, dataset, resources):  # noqa: F811
    """`profile_frozen_check.py`: each arm's frozen picks are its predictor's, written once; the timed set holds both
    arms' top 10 and `best_config`; the re-timing judges each arm's pick by the rounds after the first, and refuses a
    journal that never timed a pick or a predictor that saw a held-out shape."""
    held_out = set(dataset.shapes()[:3])
    training = training_data(h200_held_out.without_shapes(dataset, held_out), resources)
    second_gpu = h200_held_out.without_shapes(dataset, set(dataset.shapes()) - held_out)
    paths = {arm: tmp_path / f"{arm}.predictor" for arm in profile_frozen_check.ARMS}
    predictors = {"without": fit_predictor(training, SMALL),
                  "with": fit_predictor(training, replace(SMALL, profile_factors=2))}
    for arm, predictor in predictors.items():
        save_predictor(predictor, paths[arm])
    monkeypatch.setattr(profile_frozen_check, "PICKS", {arm: tmp_path / f"picks_{arm}.csv" for arm in paths})
    monkeypatch.setattr(profile_frozen_check, "TIMED_SET", tmp_path / "timed.csv")
    frozen = profile_frozen_check.freeze(paths, second_gpu, "the command")
    timed = {(row.M, row.N, row.K): row.top10_configs.split(";")
             for row in pd.read_csv(tmp_path / "timed.csv").itertuples(index=False)}
    picked = {arm: {(row.M, row.N, row.K): row for row in frame.itertuples(index=False)}
              for arm, frame in frozen.items()}
    assert set(timed) == {shape for shape, row in picked["without"].items()
                          if row.dispatcher_config != picked["with"][shape].dispatcher_config}
    union = {shape: [] for shape in held_out}
    for arm, predictor in predictors.items():
        assert set(picked[arm]) == held_out
        assert json.loads((tmp_path / f"picks_{arm}.provenance.json").read_text())["profile_factors"] == \
            profile_frozen_check.ARMS[arm]
        for shape, row in picked[arm].items():
            assert row.dispatcher_config == h200_held_out.config_text(predictor.best_config(shape))
            assert shape not in timed or {*row.top10_configs.split(";"), row.dispatcher_config} <= set(timed[shape])
            union[shape] += [*row.top10_configs.split(";"), row.dispatcher_config, row.best_config]
    assert frozen["with"]["top10_configs"].tolist() != frozen["without"]["top10_configs"].tolist()
    changed = frozen["with"].copy()  # frozen picks whose best_config differs at the first shape
    changed.loc[0, "dispatcher_config"] = other = next(config for config in changed.loc[0, "top10_configs"].split(";")
                                                        if config != frozen["without"].loc[0, "dispatcher_config"])
    changed.to_csv(tmp_path / "picks_with.csv", index=False)
    monkeypatch.setattr(profile_frozen_check, "TIMED_SET", tmp_path / "timed_differs.csv")
    profile_frozen_check.freeze(paths, second_gpu, "the command")
    differs = pd.read_csv(tmp_path / "timed_differs.csv")
    assert differs[["M", "N", "K"]].values.tolist() == [changed.loc[0, ["M", "N", "K"]].tolist()]
    assert {other, frozen["without"].loc[0, "dispatcher_config"]} <= set(differs.loc[0, "top10_configs"].split(";"))
    save_predictor(fit_predictor(training_data(dataset, resources), SMALL), paths["without"])
    assert profile_frozen_check.freeze(paths, second_gpu, "again")["without"].equals(frozen["without"])  # kept
    with pytest.raises(SystemExit, match="not held out"):
        h200_held_out.held_out_picks(load_predictor(paths["without"]), second_gpu, "all-shape predictor")

    rows = []
    for shape, configs in union.items():  # every shape timed, whether or not the arms' picks differ there
        speed = h200_held_out.recorded_speed(dataset, shape)
        for round_index in range(3):
            rows += [{"round": round_index, "M": shape[0], "N": shape[1], "K": shape[2], "config": config,
                      "status": "ok", "latency_ms": (1 + 0.01 * round_index) / speed[config]}
                     for config in dict.fromkeys(configs)]
    journal = tmp_path / "retime.csv"
    pd.DataFrame(rows).to_csv(journal, index=False)
    journal.with_suffix(".provenance.json").write_text(json.dumps(
        {"command": "timed", "gpu_name": "Test GPU", "triton": "3.6.0", "date": "today"}))
    text, table = profile_frozen_check.retimed(frozen, journal)
    for arm, frame in frozen.items():
        np.testing.assert_allclose(table[f"{arm}: best_config"], frame["dispatcher_replay"])  # each round alike
    assert (table["recorded best"] == 1).all() and "| all | 3 |" in text
    first = rows[0]
    pd.DataFrame([row for row in rows if (row["M"], row["N"], row["K"], row["config"]) !=
                  (first["M"], first["N"], first["K"], first["config"])]).to_csv(journal, index=False)
    with pytest.raises(SystemExit, match="never timed"):
        profile_frozen_check.retimed(frozen, journal)


def test_the_h200_training_replay_judges_pick_and_top_10_by_the_recorded_latencies(dataset, predictor):  # noqa: F811
    table = h200_training_shapes.replay(predictor, dataset)
    assert len(table) == len(dataset.shapes())
    names = list(predictor.space.names)
    for row in table.itertuples(index=False):
        shape = (row.M, row.N, row.K)
        measured = dataset.measurements.set_index(["M", "N", "K"]).loc[shape].set_index(names)["latency_ms"]
        pick = predictor.best_config(shape)
        assert row.best_config == measured.min() / measured.loc[tuple(pick[name] for name in names)]
        assert row.split_k == pick["SPLIT_K"]
    assert (table["top 10 timed"] >= table["best_config"]).all() and (table["top 10 timed"] <= 1).all()
    report = h200_training_shapes.replay_report(table, "the command", h200_training_shapes.DATASET)
    assert f"| all | {len(table)} |" in report and "the command" in report
    for value, count in table["split_k"].value_counts().items():
        assert f"| picks of SPLIT_K {value} | {count} |" in report


def test_the_warm_start_tail_keeps_the_runs_the_seeds_did_not_finish_and_counts_never_as_infinite():
    rows = []
    for shape, warm, warm30, cold in (((8, 64, 64), 3.0, 3.0, 90.0), ((9, 64, 64), 40.0, 25.0, 80.0),
                                      ((10, 64, 64), np.nan, 12.0, np.nan), ((11, 64, 64), 10.0, 10.0, 50.0)):
        for variant, evals in (("warm", warm), ("warm-30", warm30), ("cold", cold)):
            rows.append({"M": shape[0], "N": shape[1], "K": shape[2], "strategy": "lfbo", "variant": variant,
                         "seed": 0, "evals_to_target": evals, "evaluations": 200})
    tail = warm_start_tail.tail_runs(pd.DataFrame(rows))
    assert sorted(tail["M"]) == [9, 10]  # 10 evaluations are still the seeds
    table = warm_start_tail.tail_table(tail, ["warm", "warm-30", "cold"]).set_index("variant")
    assert table.loc["warm", "reached"] == "1 (50%)" and table.loc["warm", "median evals"] == "inf"
    assert table.loc["warm-30", "within 20"] == "50%" and table.loc["warm-30", "within 50"] == "100%"
    assert table.loc["cold", "reached"] == "1 (50%)"
    with pytest.raises(ValueError, match="no 'warm' runs"):
        warm_start_tail.tail_runs(pd.DataFrame(rows).query("variant != 'warm'"))


def test_warm_start_variants_find_the_seeds_share_and_replay_each_variant(dataset, tmp_path):  # noqa: F811
    from tunebench.measure.dataset import save_dataset

    path = tmp_path / "preregistered.parquet"
    save_dataset(dataset, path)
    names = [parameter.name for parameter in dataset.parameters]
    frame = dataset.measurements
    shape = (200, 3000, 5000)
    rows = frame[(frame.M == shape[0]) & (frame.N == shape[1]) & (frame.K == shape[2])].sort_values("latency_ms")
    as_text = [",".join(str(int(value)) for value in row) for row in rows[names].itertuples(index=False)]
    picks = pd.DataFrame({"M": [shape[0], 7], "N": [shape[1], 64], "K": [shape[2], 64], "batch": 1,
                          "best_config": [as_text[5], as_text[5]],
                          "top10_configs": [";".join(as_text[5:15]), ";".join(as_text[5:15])]})
    shapes = warm_start_variants.seeded_shapes(picks, [path])
    assert len(shapes) == 1, "a shape without a recorded dataset is left out"
    assert shapes.seeds_share.iloc[0] == pytest.approx(rows.latency_ms.iloc[0] / rows.latency_ms.iloc[5])
    seeds = shapes.seeds.iloc[0]
    runs = pd.DataFrame([warm_start_variants.search_run(str(path), shape, "lfbo", variant, seeds, 0)
                         for variant in warm_start_variants.VARIANTS])
    assert runs.evaluations.gt(0).all() and runs.evals_to_target.dropna().ge(1).all()
    table = warm_start_variants.variant_table(runs).set_index("variant")
    assert list(table.index) == list(warm_start_variants.VARIANTS) and table["runs"].eq(1).all()
    # past the target, a run spends the budget it is given: cold LFBO's first population alone is 100 configs
    assert warm_start_variants.search_run(str(path), shape, "lfbo", "cold", seeds, 0, False, 30)["evaluations"] == 30
    with pytest.raises(SystemExit):
        warm_start_variants.main(["--budget", "0", "--out", str(tmp_path / "variants.md")])


def test_the_round_noise_judges_each_rounds_fastest_by_the_other_rounds_and_compares_journals(tmp_path):
    """`config_prediction_retime.py noise`: in a stand-in journal, config b wins round 2 by luck though a is faster in
    every other judged round; one-round ceiling and spread follow by hand, and a second journal of steadier timings
    reads a higher ceiling, the paired difference positive. A journal of fewer than three judged rounds is refused."""
    import argparse
    import json

    import config_prediction_retime as retime  # noqa: E402  (a sibling script)
    latencies = {"a": [9.0, 1.00, 1.00, 1.00], "b": [9.0, 1.10, 0.90, 1.10], "c": [9.0, 1.20, 1.26, 1.20]}
    rows = [{"round": r, "M": 4, "N": 4096, "K": 4096, "config": config, "status": "ok", "latency_ms": values[r]}
            for config, values in latencies.items() for r in range(4)]
    noisy = pd.DataFrame(rows)
    table = retime.round_noise(noisy)
    # rounds 1 and 3 pick a (judged 1.0), round 2 picks b, judged by rounds 1 and 3: 1.00 / 1.10
    assert table.loc[0, "one-round ceiling"] == pytest.approx((1 + 1 + 1.00 / 1.10) / 3)
    # spreads: a 0, b 11 %, c 2.8 %: the median is c's
    assert table.loc[0, "spread"] == pytest.approx(np.std([1.2, 1.26, 1.2], ddof=1) / np.mean([1.2, 1.26, 1.2]))
    steady = noisy.assign(latency_ms=noisy["latency_ms"].where(noisy["config"] != "b", 1.10))
    journals = []
    for name, frame in (("zero", noisy), ("read", steady)):
        path = tmp_path / f"{name}.csv"
        frame.to_csv(path, index=False)
        path.with_suffix(".provenance.json").write_text(json.dumps({"timing": {"flush": name}}))
        journals.append(path)
    out = tmp_path / "noise.md"
    retime.noise(argparse.Namespace(journals=journals, out=out))
    text = out.read_text()
    gain = 1 - table.loc[0, "one-round ceiling"]
    assert f"| all | 1 | {table.loc[0, 'spread']:.2%} |" in text and "| 0.00% | 100.00% / 100.00% / 100.00% |" in text
    assert f"+{100 * gain:.2f} (n/a)" in text and "read (flush read)" in text
    short = tmp_path / "short.csv"
    noisy[noisy["round"] < 3].to_csv(short, index=False)
    short.with_suffix(".provenance.json").write_text("{}")
    with pytest.raises(SystemExit, match="short.csv has no shape timed ok in three or more rounds"):
        retime.noise(argparse.Namespace(journals=[short], out=out))


def test_the_flush_ceiling_judges_each_sittings_best_by_the_other_and_refuses_a_sitting_of_the_other_flush(
        tmp_path, monkeypatch):
    """benchmarks/flush_ceiling.py: two stand-in sittings where the first's best is the second's slowest; the ceiling
    and the configs' change follow by hand, so do the split and unsplit configs' ratios, a predictor's picks judged
    (0 for a failed or untimed pick) and the time a timed run; a sitting recorded under the other flush is refused
    by name."""
    import flush_ceiling

    keys = ["M", "N", "K", "BLOCK_M"]
    first = pd.DataFrame({"M": 4, "N": 64, "K": 64, "BLOCK_M": [16, 32, 64], "status": "ok",
                          "latency_ms": [1.0, 1.1, 1.2]})
    second = first.assign(latency_ms=[1.3, 1.1, 1.2])
    table = flush_ceiling.two_sittings(first, second, keys)
    row = table.loc[(4, 64, 64)]
    assert row["first_best_judged_by_second"] == pytest.approx(1.1 / 1.3)
    assert row["second_best_judged_by_first"] == pytest.approx(1.0 / 1.1)
    assert row["ceiling"] == pytest.approx((1.1 / 1.3 + 1.0 / 1.1) / 2)
    assert row["change_median"] == pytest.approx(0.0)  # two of the three configs did not move
    summary = flush_ceiling.summary_row("stand-in", table)
    assert summary["ceiling mean / P10 / min (both directions)"].endswith(f"/ {1.1 / 1.3:.2%}")

    later = pd.DataFrame({"M": 4, "N": 64, "K": 64, "BLOCK_M": 16, "SPLIT_K": [1, 1, 4, 8], "status": "ok",
                          "latency_ms": [1.0, 2.0, 1.0, 1.0], "bench_s": 0.0, "repeats_ms": [[1.0]] * 4})
    recorded = later.assign(latency_ms=[1.0, 2.0, 1.5, 1.3])
    keys = ["M", "N", "K", "BLOCK_M", "SPLIT_K"]
    assert flush_ceiling.split_ratios(recorded, later, keys) == {
        "recorded / sitting, median config: unsplit": "1.000", "recorded / sitting, median config: split": "1.400"}


    timed = pd.DataFrame({"M": 4, "N": 64, "K": 64, "BLOCK_M": [16, 32, 64], "status": ["ok", "ok", "error"],
                          "latency_ms": [1.0, 1.25, np.nan]})
    judged = flush_ceiling.picks_judged(timed, {(4, 64, 64): {"BLOCK_M": 32}, (8, 64, 64): {"BLOCK_M": 16}})
    assert judged.loc[(4, 64, 64)] == pytest.approx(0.8) and judged.loc[(8, 64, 64)] == 0.0  # a shape not timed
    assert flush_ceiling.picks_judged(timed, {(4, 64, 64): {"BLOCK_M": 64}}).loc[(4, 64, 64)] == 0.0  # a failed pick

    class Timed:
        measurements = later.assign(bench_s=[0.003, 0.006, 0.003, 0.003])  # one repeat, a warm-up, an estimate

    assert flush_ceiling.per_run_ms(Timed()) == pytest.approx(1.0)

    class Recorded:
        provenance = {"timing": {"flush": "zero"}}

    monkeypatch.setattr(flush_ceiling, "load_dataset", lambda path, kernel: Recorded())
    assert flush_ceiling.sitting(tmp_path / "z.parquet", "zero") is not None
    with pytest.raises(SystemExit, match="z.parquet was timed with flush 'zero', given as a 'read' sitting"):
        flush_ceiling.sitting(tmp_path / "z.parquet", "read")
