"""The neighbour correction (predict/neighbours.py) by hand, its leave-one-shape-out choice, the inner partition that
gives it out-of-fold scores, and a predictor that carries it through best_config and a save/load round trip."""

from dataclasses import replace

import numpy as np
import pytest

from test_predict import SMALL, data, dataset, resources  # noqa: F401  (module fixtures)
from tunebench.predict import ConfigRanker, fit_predictor, load_predictor, save_predictor, select_ranker
from tunebench.predict.evaluation import grouped_folds
from tunebench.predict.model import FINAL_MODELS, INNER_SPLITS, inner_partition
from tunebench.predict.neighbours import (DISTANCE_OFFSET, CorrectionSettings, NeighbourCorrection, nearest_shapes,
                                          one_shape_coordinates, select_correction, shape_coordinates)

SHAPES = np.array([[16, 1024, 1024], [32, 1024, 1024], [4096, 1024, 1024], [16, 2050, 1024]])  # the last: N hinted 2
RESIDUALS = np.array([[1.0, 0.0], [0.0, 1.0], [5.0, 5.0], [-1.0, 2.0]])


def test_a_subset_of_candidates_gets_those_columns_of_the_correction():
    correction = NeighbourCorrection(SHAPES, RESIDUALS, CorrectionSettings(strength=0.5, neighbours=2))
    full = correction.for_shapes(SHAPES)
    np.testing.assert_allclose(correction.for_shapes(SHAPES, np.array([1, 0])), full[:, [1, 0]])
    np.testing.assert_allclose(correction.for_shape(SHAPES[2], np.array([1])), full[2, [1]])


def test_coordinates_are_log_sizes_and_log_alignment():
    np.testing.assert_array_equal(shape_coordinates([[8, 1026, 1028]]), [[3, np.log2(1026), np.log2(1028), 1, 2]])


def test_one_neighbour_gives_the_nearest_shapes_residuals_times_the_strength():
    correction = NeighbourCorrection(SHAPES, RESIDUALS, CorrectionSettings(strength=0.5, neighbours=1))
    np.testing.assert_allclose(correction.for_shape((20, 1024, 1024)), [0.5, 0.0])  # log2 20 is nearer 16 than 32
    np.testing.assert_allclose(correction.for_shape((3000, 1024, 1024)), [2.5, 2.5])


def test_the_class_penalty_keeps_a_differently_aligned_shape_away():
    near_in_size = CorrectionSettings(strength=1.0, neighbours=1, class_penalty=0.0)
    by_class = CorrectionSettings(strength=1.0, neighbours=1, class_penalty=10.0)
    query = (16, 1026, 1024)  # N hinted 2 like the last shape, an octave from it; next to the first in size
    np.testing.assert_allclose(NeighbourCorrection(SHAPES, RESIDUALS, near_in_size).for_shape(query), [1.0, 0.0])
    np.testing.assert_allclose(NeighbourCorrection(SHAPES, RESIDUALS, by_class).for_shape(query), [-1.0, 2.0])


def test_distance_weighted_mean_by_hand():
    settings = CorrectionSettings(strength=1.0, neighbours=2, class_penalty=10.0, distance_weighted=True)
    weights = np.array([1 / (1 + DISTANCE_OFFSET), 1 / (0 + DISTANCE_OFFSET)])  # (16, ...) is 1 octave from 32
    expected = (weights[0] * RESIDUALS[0] + weights[1] * RESIDUALS[1]) / weights.sum()
    np.testing.assert_allclose(NeighbourCorrection(SHAPES, RESIDUALS, settings).for_shape((32, 1024, 1024)), expected)


def brute_force_nearest(query, reference, settings, count, leave_one_out=False):
    """numpy's distances and a stable sort: the order `nearest_shapes` promises (nearest first, ties to the lower
    index)."""
    scale = np.array([settings.m_scale, 1.0, 1.0])
    size = np.sqrt(np.square((query[:, None, :3] - reference[None, :, :3]) * scale).sum(axis=-1))
    distance = size + settings.class_penalty * np.abs(query[:, None, 3:] - reference[None, :, 3:]).sum(axis=-1)
    if leave_one_out:
        np.fill_diagonal(distance, np.inf)
    order = np.argsort(distance, axis=1, kind="stable")[:, :count]
    return order, np.take_along_axis(distance, order, axis=1)


@pytest.mark.parametrize("settings", [CorrectionSettings(), CorrectionSettings(class_penalty=10.0, m_scale=0.5)])
def test_nearest_shapes_are_a_stable_sort_of_the_distances_ties_included(settings):
    rng = np.random.default_rng(0)
    # M, N and K on a coarse grid of powers of two and a few alignments: many equal distances
    shapes = np.column_stack([2 ** rng.integers(0, 6, 300), 1024 + 2 * rng.integers(0, 3, 300),
                              2 ** rng.integers(9, 12, 300)])
    coordinates = shape_coordinates(shapes)
    queries = shape_coordinates(np.column_stack([2 ** rng.integers(0, 6, 40), np.full(40, 1024),
                                                 np.full(40, 2048)]))
    for count in (1, 8, 12):
        nearest, distance = nearest_shapes(queries, coordinates, settings, count)
        expected, expected_distance = brute_force_nearest(queries, coordinates, settings, count)
        np.testing.assert_array_equal(nearest, expected)
        np.testing.assert_allclose(distance, expected_distance, rtol=1e-15, atol=0)
        nearest, _ = nearest_shapes(coordinates, coordinates, settings, count, leave_one_out=True)
        np.testing.assert_array_equal(nearest, brute_force_nearest(coordinates, coordinates, settings, count, True)[0])
    one_by_one = [nearest_shapes(queries[[row]], coordinates, settings, 8)[0][0] for row in range(len(queries))]
    np.testing.assert_array_equal(one_by_one, nearest_shapes(queries, coordinates, settings, 8)[0])


def test_nearest_shapes_take_every_reference_when_there_are_fewer_and_name_bad_requests():
    coordinates = shape_coordinates(SHAPES)
    assert nearest_shapes(coordinates[:1], coordinates, CorrectionSettings(), 10)[0].shape == (1, 4)
    assert nearest_shapes(coordinates, coordinates, CorrectionSettings(), 10, leave_one_out=True)[0].shape == (4, 3)
    with pytest.raises(ValueError, match="count >= 1"):
        nearest_shapes(coordinates, coordinates, CorrectionSettings(), 0)
    with pytest.raises(ValueError, match="2 queries, 4 references"):
        nearest_shapes(coordinates[:2], coordinates, CorrectionSettings(), 1, leave_one_out=True)


def random_shapes(rng, count):
    """Sizes over many octaves, a third of them multiples of 16 (the usual alignment), the rest any alignment."""
    shapes = np.column_stack([rng.integers(1, 2 ** rng.integers(1, 15, count)),
                              rng.integers(1, 2 ** rng.integers(4, 17, count)),
                              rng.integers(1, 2 ** rng.integers(4, 17, count))])
    shapes[::3, 1:] = 16 * (shapes[::3, 1:] // 16 + 1)
    return shapes


def test_one_shapes_coordinates_are_the_batchs_bits():
    rng = np.random.default_rng(1)
    shapes = np.concatenate([random_shapes(rng, 3000), rng.integers(1, 2 ** 40, (1000, 3))])
    batch = shape_coordinates(shapes)
    for shape, expected in zip(shapes.tolist(), batch):
        np.testing.assert_array_equal(one_shape_coordinates(shape), expected, strict=True)
    np.testing.assert_array_equal(one_shape_coordinates(np.array([8, 1026, 1028])),
                                  [3, np.log2(1026), np.log2(1028), 1, 2])  # numpy sizes as the dispatcher may get


@pytest.mark.parametrize("settings", [
    CorrectionSettings(strength=0.75, neighbours=12, class_penalty=10.0, distance_weighted=True),  # the deployed
    CorrectionSettings(strength=0.5, neighbours=12, class_penalty=3.0, distance_weighted=True),
    CorrectionSettings(strength=1.0, neighbours=3, class_penalty=1.0, m_scale=0.5),
    CorrectionSettings(strength=0.25, neighbours=8, class_penalty=0.0),
    CorrectionSettings(strength=1.0, neighbours=1, distance_weighted=True),
    CorrectionSettings(strength=1.0, neighbours=200, distance_weighted=True),
    CorrectionSettings(strength=0.5, neighbours=200),
    CorrectionSettings(neighbours=12, distance_weighted=True),  # strength 0
])
def test_one_shapes_correction_is_the_batchs_bit_for_bit(settings):
    """`for_shape` and `for_coordinates` (one compiled call: the neighbour search and the mean) against `for_shapes`
    (the batch's search, then the same mean), on shapes among and between the training shapes, with candidate lists
    of every kind: none (all), empty, one, negative indices and repeats."""
    rng = np.random.default_rng(2)
    training = random_shapes(rng, 400)
    training[200:260] = training[:60]  # equal shapes: tied distances
    residuals = rng.standard_normal((400, 40)) * 10.0 ** rng.integers(-4, 3, (400, 40))
    correction = NeighbourCorrection(training, residuals, settings)
    queries = np.concatenate([training[::7], random_shapes(rng, 150)])
    lists = [None, np.arange(0), np.array([5]), np.array([39, 0]), rng.integers(-40, 40, 17), rng.integers(0, 40, 40)]
    for shape in queries:
        for candidates in lists:
            expected = correction.for_shapes([shape], candidates)[0]
            np.testing.assert_array_equal(correction.for_shape(tuple(shape), candidates), expected, strict=True)
            np.testing.assert_array_equal(correction.for_coordinates(one_shape_coordinates(shape), candidates),
                                          expected, strict=True)


def test_one_shapes_correction_with_few_training_shapes_or_a_bad_index_is_the_batchs():
    correction = NeighbourCorrection(SHAPES[:2], RESIDUALS[:2], CorrectionSettings(strength=1.0, neighbours=5,
                                                                                   distance_weighted=True))
    np.testing.assert_array_equal(correction.for_shape((64, 1024, 1024)),
                                  correction.for_shapes([(64, 1024, 1024)])[0], strict=True)
    for candidates in (np.array([0, 2]), np.array([-3, 1])):
        with pytest.raises(IndexError):
            correction.for_shapes([(64, 1024, 1024)], candidates)
        with pytest.raises(IndexError):
            correction.for_shape((64, 1024, 1024), candidates)
    empty = NeighbourCorrection(SHAPES[:0], RESIDUALS[:0], CorrectionSettings(strength=1.0))
    with pytest.raises(ValueError, match="a reference to choose"):
        empty.for_shape((64, 1024, 1024))


def test_strength_zero_is_no_correction_and_bad_settings_are_errors():
    correction = NeighbourCorrection(SHAPES, RESIDUALS, CorrectionSettings())
    assert not correction.for_shapes(SHAPES).any()
    with pytest.raises(ValueError, match="neighbours must be >= 1"):
        CorrectionSettings(neighbours=0)
    with pytest.raises(ValueError, match=">= 0"):
        CorrectionSettings(strength=-1.0)
    with pytest.raises(ValueError, match="4 shapes but 3 rows"):
        NeighbourCorrection(SHAPES, RESIDUALS[:3], CorrectionSettings())


def _clustered(noise: float, shared_error: bool):
    """Two clusters of 6 shapes, 3 candidates; candidate 2 is the best everywhere. The 'model' (out-of-fold scores)
    prefers candidate 0; with shared_error, its error is the same on every shape of a cluster, so neighbours reveal
    it."""
    rng = np.random.default_rng(0)
    shapes = np.array([[2 ** (i % 6), 1024, 1024] if i < 6 else [2 ** (i % 6 + 7), 4096, 4096] for i in range(12)])
    targets = np.tile([0.8, 0.9, 1.0], (12, 1))
    scores = np.tile([1.0, 0.9, 0.8], (12, 1)) if shared_error else targets.copy()
    scores = scores + noise * rng.standard_normal(scores.shape)
    latency = 1 / targets
    return shapes, targets, scores, latency


def test_select_correction_turns_on_when_neighbours_share_the_models_error():
    shapes, targets, scores, latency = _clustered(0.0, shared_error=True)
    correction, tried = select_correction(shapes, targets, scores, latency, np.arange(3))
    assert tried[0]["strength"] == 0 and tried[0]["leave_one_out_efficiency"] == pytest.approx(0.8)
    assert correction.settings.strength > 0
    assert max(t["leave_one_out_efficiency"] for t in tried) == pytest.approx(1.0)
    assert np.argmax(scores[0] + correction.for_shape(shapes[0])) == 2


def test_select_correction_stays_off_when_the_model_is_already_right():
    shapes, targets, scores, latency = _clustered(0.0, shared_error=False)
    correction, tried = select_correction(shapes, targets, scores, latency, np.arange(3))
    assert correction.settings == CorrectionSettings() and tried[0]["leave_one_out_efficiency"] == 1.0


def test_leave_one_out_never_lets_a_shape_correct_itself():
    """Only shape 0's own residual would fix its pick; every other shape is right already, with zero residuals."""
    shapes, targets, scores, latency = _clustered(0.0, shared_error=False)
    scores[0] = [1.0, 0.9, 0.8]
    correction, tried = select_correction(shapes, targets, scores, latency, np.arange(3))
    assert max(t["leave_one_out_efficiency"] for t in tried) == pytest.approx(tried[0]["leave_one_out_efficiency"])
    assert correction.settings.strength == 0


def test_the_inner_partition_validates_every_training_shape_once():
    train = np.arange(10, 47)
    parts = inner_partition(train, seed=3)
    assert len(parts) == INNER_SPLITS
    validated = np.concatenate([validation for _, validation in parts])
    assert sorted(validated) == list(range(len(train)))
    for fit, validation in parts:
        assert not set(fit) & set(validation) and len(fit) + len(validation) == len(train)
    assert [v.tolist() for _, v in inner_partition(train, seed=3)] == [v.tolist() for _, v in parts]


def test_out_of_fold_scores_come_from_the_model_that_never_saw_the_shape(data):  # noqa: F811
    train, _ = grouped_folds(data.group, 5)[0]
    settings, info = select_ranker(data, train, "relative", grid={"max_leaf_nodes": (7,)}, iterations=(10,),
                                   portfolio_sizes=(0,))
    scores = info["out_of_fold_scores"]
    assert scores.shape == (len(train), len(data.candidates))
    assert settings.models == FINAL_MODELS  # the final fit's; each inner part's model is one
    fit, validation = inner_partition(train, seed=0)[1]
    ranker = ConfigRanker(replace(settings, portfolio_size=0, models=1)).fit(data, data.rows_of(train[fit]))
    expected = ranker.score(data.features[data.rows_of(train[validation])]).reshape(len(validation), -1)
    np.testing.assert_allclose(scores[validation], expected)


def test_a_predictor_with_a_correction_ranks_with_it_and_keeps_it_through_a_file(tmp_path, data):  # noqa: F811
    train = np.arange(len(data.shapes))
    settings, info = select_ranker(data, train, "relative", grid={"max_leaf_nodes": (7,)}, iterations=(10,),
                                   portfolio_sizes=(0,))
    predictor = fit_predictor(data, replace(SMALL, max_iter=10, max_leaf_nodes=7), train,
                              out_of_fold_scores=info["out_of_fold_scores"])
    predictor.correction = NeighbourCorrection(data.shapes[train], predictor.correction.residuals,
                                               CorrectionSettings(strength=1.0, neighbours=2))
    predictor.head = None  # the correction alone (tests/test_predict_head.py covers the head)
    for shape in map(tuple, data.shapes[:4]):
        expected = predictor.model_scores(shape) + predictor.correction.for_shape(shape)
        np.testing.assert_allclose(predictor.corrected_scores(shape), expected)
        np.testing.assert_allclose(predictor.scores(shape), expected)
        assert predictor.best_config(shape) == predictor.config(int(np.argmax(expected)))  # every candidate listed
    path = tmp_path / "corrected.predictor"
    save_predictor(predictor, path)
    loaded = load_predictor(path, gpu=data.gpu)
    assert loaded.correction.settings == predictor.correction.settings
    for shape in map(tuple, data.shapes[:4]):
        np.testing.assert_allclose(loaded.scores(shape), predictor.scores(shape))


def test_the_shortlist_grid_ranks_the_corrected_scores(data, monkeypatch):  # noqa: F811
    """A correction that reverses the model's order must reverse the grid's top lists: the dispatcher's shortlist is
    drawn from what it will score."""
    train = np.arange(len(data.shapes))
    count = len(data.candidates)
    residuals = np.tile(np.linspace(10.0, -10.0, count), (len(train), 1))  # raises the first candidates far above
    fixed = NeighbourCorrection(data.shapes[train], residuals, CorrectionSettings(strength=1.0, neighbours=1))
    monkeypatch.setattr("tunebench.predict.dispatch.select_correction", lambda *arguments: (fixed, []))
    predictor = fit_predictor(data, replace(SMALL, max_iter=10, max_leaf_nodes=7), train,
                              out_of_fold_scores=np.zeros((len(train), count)))
    for shape in map(tuple, data.shapes):
        shortlist = predictor.shortlist.for_shape(shape)
        assert shortlist[0] == 0  # every corner's first is the candidate the correction raises most
        scores = predictor.scores(shape)
        assert predictor.best_config(shape) == predictor.config(int(shortlist[np.argmax(scores[shortlist])]))
