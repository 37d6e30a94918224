"""First-stage models split by alignment class (predict/split.py): rows routed by their divisibility features as
`evaluation.alignment` classes shapes, each group's regressor fitted on its rows only, the dispatcher walking its
group's compiled trees, and a predictor file that carries the split."""

from dataclasses import replace

import numpy as np
import pytest

from test_predict import (SMALL, assert_dispatches_its_ranking_and_round_trips, data, dataset,  # noqa: F401
                          resources)  # module fixtures
from tunebench.predict import RankerSettings, features, fit_predictor, read_header
from tunebench.predict.dispatch import compiled_forests
from tunebench.predict.evaluation import ALIGNMENTS, alignment
from tunebench.predict.model import ConfigRanker
from tunebench.predict.split import ALIGNMENT_SPLITS, SplitModel, row_alignments, row_groups, shape_group

SPLIT = replace(SMALL, alignment_split="aligned")
# One shape per divisibility pattern: aligned, hinted (8, 4, 2 on N or K) and odd (on N, on K, on both)
CLASS_SHAPES = [(8, 4096, 4096), (8, 4104, 4096), (8, 4096, 4100), (8, 4098, 4098), (8, 4097, 4096),
                (8, 4096, 4099), (8, 4101, 4103), (8, 4104, 4097)]


def test_row_classes_are_evaluations_alignment_classes(data):
    shapes = np.array(CLASS_SHAPES)
    rows = features(shapes, np.repeat(data.candidates[:1], len(shapes), axis=0), data.space, "bfloat16",
                    data.resources, data.hardware)
    expected = [ALIGNMENTS.index(alignment(n, k)) for _, n, k in CLASS_SHAPES]
    assert row_alignments(rows).tolist() == expected
    assert sorted(set(expected)) == [0, 1, 2]
    for split in ALIGNMENT_SPLITS:
        assert row_groups(split, rows).tolist() == [shape_group(split, shape) for shape in CLASS_SHAPES]
    assert row_groups("aligned", rows).tolist() == [0, 1, 1, 1, 1, 1, 1, 1]


def test_an_unknown_split_is_an_error_that_names_the_allowed_ones():
    with pytest.raises(ValueError, match="'by_m'.*none, aligned, class"):
        RankerSettings(alignment_split="by_m")


def test_each_groups_regressor_is_fitted_on_its_rows_only(data):
    settings = replace(SPLIT, subsample_keep=1.0)  # every row kept: the fit on a group's rows alone draws alike
    ranker = ConfigRanker(settings).fit(data)
    member = ranker.models_[0]
    assert isinstance(member, SplitModel) and len(member.models) == 2
    groups = row_groups("aligned", data.features)
    assert set(groups.tolist()) == {0, 1}  # the synthetic shapes hold aligned and hinted ones
    for index in (0, 1):
        alone = ConfigRanker(replace(settings, alignment_split="none")).fit(data, np.flatnonzero(groups == index))
        rows = data.features[groups == index]
        np.testing.assert_array_equal(member.models[index].predict(rows), alone.score(rows))
        np.testing.assert_array_equal(ranker.score(rows), alone.score(rows))


def test_staged_scores_end_at_the_scores_and_route_every_row(data):
    ranker = ConfigRanker(SPLIT).fit(data)
    rows = data.features[::5]
    stages = ranker.staged_scores(rows)
    assert len(stages) == SPLIT.max_iter
    np.testing.assert_allclose(stages[-1], ranker.score(rows), rtol=1e-12, atol=1e-12)


def test_a_split_needs_training_shapes_of_every_group(data):
    with pytest.raises(ValueError, match="'class'.*no shape of the group odd"):
        ConfigRanker(replace(SMALL, alignment_split="class")).fit(data)


def test_the_dispatcher_walks_its_groups_compiled_trees(data):
    ranker = ConfigRanker(replace(SPLIT, models=2)).fit(data)
    forests = compiled_forests(ranker)
    groups = row_groups("aligned", data.features)
    for index, forest in enumerate(forests):
        rows = data.features[groups == index][::3]
        np.testing.assert_allclose(forest.predict(rows), ranker.score(rows), rtol=1e-12, atol=1e-12)


def test_a_split_predictor_picks_as_its_ranking_and_survives_a_round_trip(tmp_path, data):
    predictor = fit_predictor(data, replace(SPLIT, models=2))
    mixed = data.features[::4]  # rows of every shape, both groups
    np.testing.assert_allclose(predictor.compiled_scores(mixed), predictor.ranker.score(mixed), rtol=1e-12, atol=1e-12)
    path = tmp_path / "split.predictor"
    assert_dispatches_its_ranking_and_round_trips(predictor, data.shapes, path)
    assert read_header(path)["settings"]["alignment_split"] == "aligned"
