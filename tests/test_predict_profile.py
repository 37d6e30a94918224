"""Config profiles (predict/profile.py): fitted from the training shapes' relative speeds only, appended after a row's
features by the ranker, walked alike by sklearn and the compiled trees, and saved with the predictor."""

from dataclasses import replace

import numpy as np
import pytest

from test_predict import (SMALL, _rewrite_header, assert_dispatches_its_ranking_and_round_trips, data,  # noqa: F401
                          dataset, resources)  # module fixtures
from tunebench.predict import PredictorError, fit_predictor, load_predictor, read_header
from tunebench.predict.model import ConfigRanker, RankerSettings, relative_speed
from tunebench.predict.profile import RELATIVE_SPEED_FLOOR, ConfigProfile

PROFILED = replace(SMALL, profile_factors=3)


def test_a_profile_is_the_mean_log_speed_and_the_scaled_component_loadings():
    rng = np.random.default_rng(0)
    speed = rng.uniform(0.3, 1.0, size=(12, 5))
    profile = ConfigProfile.fit(speed, 2)
    logarithm = np.log(speed)
    np.testing.assert_allclose(profile.columns[:, 0], logarithm.mean(axis=0))
    centred = logarithm - logarithm.mean(axis=0)
    # two components and the mean rebuild the centred matrix as well as any rank-2 approximation does
    scores = centred @ profile.columns[:, 1:] / np.linalg.norm(profile.columns[:, 1:], axis=0) ** 2
    rebuilt = scores @ profile.columns[:, 1:].T
    singular = np.linalg.svd(centred, compute_uv=False)
    assert np.linalg.norm(centred - rebuilt) == pytest.approx(np.sqrt((singular[2:] ** 2).sum()))
    assert profile.names == ["profile_mean_log_speed", "profile_component_1", "profile_component_2"]


def test_failures_and_very_slow_configs_count_as_the_floor():
    speed = np.array([[1.0, 0.0, 0.001], [0.5, 0.0, 0.01]])
    profile = ConfigProfile.fit(speed, 1)
    np.testing.assert_allclose(profile.columns[1:, 0], np.log(RELATIVE_SPEED_FLOOR))


@pytest.mark.parametrize("factors", [0, 6, True, 1.5])
def test_a_factor_count_outside_one_to_the_matrix_rank_is_an_error(factors):
    with pytest.raises(ValueError, match=f"factors must be an integer from 1 to 4.*got {factors!r}"):
        ConfigProfile.fit(np.ones((4, 7)), factors)


def test_negative_profile_factors_is_an_error():
    with pytest.raises(ValueError, match="profile_factors must be an integer >= 0 .*got -1"):
        RankerSettings(profile_factors=-1)


def test_the_ranker_profiles_only_the_shapes_it_is_fitted_on(data):
    train = np.arange(6)
    ranker = ConfigRanker(PROFILED).fit(data, data.rows_of(train))
    rows = data.rows_of(train)
    speed = relative_speed(data.latency_ms[rows], data.group[rows]).reshape(len(train), -1)
    np.testing.assert_array_equal(ranker.profile_.columns, ConfigProfile.fit(speed, 3).columns)
    slower = replace(data, latency_ms=np.where(np.isin(data.group, train), data.latency_ms,
                                               data.latency_ms * np.linspace(1, 3, len(data.latency_ms))))
    again = ConfigRanker(PROFILED).fit(slower, slower.rows_of(train))
    np.testing.assert_array_equal(again.profile_.columns, ranker.profile_.columns)


def test_a_profiled_ranker_reads_the_profile_after_the_features(data):
    ranker = ConfigRanker(PROFILED).fit(data)
    rows = data.rows_of([2, 7])
    matrix = ranker.data_matrix(data, rows)
    width = data.features.shape[1]
    assert matrix.shape == (len(rows), width + 4)
    np.testing.assert_array_equal(matrix[:, :width], data.features[rows])
    np.testing.assert_array_equal(matrix[:, width:], ranker.profile_.columns[data.candidate_of(rows)])
    assert ranker.models_[0].n_features_in_ == width + 4
    with pytest.raises(ValueError, match=f"reads {width + 4} columns per row, got {width}.*ranker.matrix"):
        ranker.score(data.features[rows])


def test_a_profiled_predictor_dispatches_its_full_rankings_pick_and_round_trips(tmp_path, data):
    predictor = fit_predictor(data, replace(PROFILED, models=2))
    rows = np.arange(0, len(data.latency_ms), 4)
    ranked = predictor.ranker.data_matrix(data, rows)
    np.testing.assert_allclose(predictor.compiled_scores(ranked), predictor.ranker.score(ranked), rtol=1e-12,
                               atol=1e-12)
    path = tmp_path / "profiled.predictor"
    loaded = assert_dispatches_its_ranking_and_round_trips(predictor, data.shapes, path)
    assert read_header(path)["profile_names"] == predictor.ranker.profile_.names
    np.testing.assert_array_equal(loaded.ranker.profile_.columns, predictor.ranker.profile_.columns)
    single = predictor.with_models(1)
    np.testing.assert_array_equal(single.ranker.profile_.columns, predictor.ranker.profile_.columns)
    _rewrite_header(path, lambda header: header["settings"].__setitem__("profile_factors", 0))
    with pytest.raises(PredictorError, match="profile_factors is 0, but the payload has a config profile"):
        load_predictor(path)
