"""The pairwise head (predict/head.py): its pair features by hand, its compiled classifier against sklearn's, that it
learns an order the first stage got wrong, its sizing on inner parts, and a predictor that carries it."""

import numpy as np
import pytest

from test_predict import SMALL, data, dataset, resources  # noqa: F401  (module fixtures)
from tunebench.predict import fit_predictor, load_predictor, read_header, save_predictor, select_ranker
from tunebench.predict.evidence import COLUMNS as EVIDENCE_COLUMNS
from tunebench.predict.head import (LEAF_CHOICES, HeadLists, HeadSettings, fit_head, head_efficiency, head_lists,
                                    pair_features, select_head)


def synthetic_lists(shapes: int = 80, size: int = 6, seed: int = 0) -> HeadLists:
    """Lists whose true speed rises with feature 0 while the first-stage scores rank them the other way round."""
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(shapes, size, 3))
    relative = 1.0 / (1.0 + np.exp(-rows[..., 0]))
    relative /= relative.max(axis=1, keepdims=True)
    scores = -rows[..., 0] + 0.01 * rng.normal(size=(shapes, size))
    order = np.argsort(-scores, axis=1)  # a list comes best first by the first stage's scores
    take = lambda array: np.take_along_axis(array, order, axis=1)  # noqa: E731
    return HeadLists(np.take_along_axis(rows, order[..., None], axis=1), take(scores), take(relative),
                     1.0 / take(relative), np.ones((shapes, size)), np.ones(shapes), order)


def test_pair_features_are_row_differences_with_the_score():
    rows = np.array([[[1.0, 10.0], [2.0, 20.0], [4.0, 40.0]]])
    differences, first, second = pair_features(rows, np.array([[3.0, 2.0, 1.0]]))
    assert first.tolist() == [0, 0, 1] and second.tolist() == [1, 2, 2]
    np.testing.assert_allclose(differences[0], [[-1, -10, 1], [-3, -30, 2], [-2, -20, 1]])


def test_head_lists_take_each_shapes_top_in_score_order():
    scores = np.array([[0.1, 0.9, 0.5, -np.inf]])
    features = np.arange(8, dtype=float).reshape(1, 4, 2)
    latency = np.array([[4.0, 2.0, 1.0, np.inf]])
    lists = head_lists(scores, features, latency, np.ones((1, 4)), size=3)
    np.testing.assert_allclose(lists.scores, [[0.9, 0.5, 0.1]])
    np.testing.assert_allclose(lists.rows[0], features[0, [1, 2, 0]])
    np.testing.assert_allclose(lists.relative, [[0.5, 1.0, 0.25]])
    assert lists.best_ms.tolist() == [1.0] and lists.candidates.tolist() == [[1, 2, 0]]
    wider = lists.with_columns(np.full((1, 3, 1), 7.0))
    assert wider.rows.shape == (1, 3, 3) and (wider.rows[..., -1] == 7).all() and wider.scores is lists.scores


def test_the_head_learns_the_order_the_first_stage_got_wrong():
    train, test = synthetic_lists(seed=0), synthetic_lists(seed=1)
    head = fit_head(train, HeadSettings(max_leaf_nodes=7, size=6))
    assert head_efficiency(test, None).mean() < 0.8  # the first stage picks the slowest
    assert head_efficiency(test, head).mean() > 0.97


def test_wins_are_the_compiled_classifiers_probabilities_summed():
    lists = synthetic_lists()
    head = fit_head(lists, HeadSettings(max_leaf_nodes=7, size=6))
    differences, first, second = pair_features(lists.rows[:3], lists.scores[:3])
    flat = differences.reshape(-1, differences.shape[-1])
    np.testing.assert_allclose(head.forest.predict(flat), head.model.decision_function(flat))
    won = head.model.predict_proba(flat)[:, 1].reshape(3, -1)  # the probability that the first is faster
    expected = np.zeros((3, 6))
    for pair, (i, j) in enumerate(zip(first, second)):
        expected[:, i] += won[:, pair]
        expected[:, j] += 1.0 - won[:, pair]
    wins = head.wins(lists.rows[:3], lists.scores[:3])
    np.testing.assert_allclose(wins, expected)
    np.testing.assert_allclose(wins.sum(axis=1), 15.0)  # every one of the 6 * 5 / 2 pairs is won by one side


def test_select_head_sizes_it_on_inner_parts_and_reports_off():
    head, tried = select_head(synthetic_lists(shapes=40))
    assert [entry["head"] for entry in tried][0] == "off"
    assert [entry["head"]["max_leaf_nodes"] for entry in tried[1:]] == list(LEAF_CHOICES)
    assert head.settings.max_leaf_nodes in LEAF_CHOICES
    assert all(entry["inner_mean_efficiency"] > tried[0]["inner_mean_efficiency"] for entry in tried[1:])


def test_bad_head_settings_are_errors():
    with pytest.raises(ValueError, match="size and max_leaf_nodes must be >= 2"):
        HeadSettings(size=1)


def test_a_predictor_re_ranks_its_top_with_the_head_and_keeps_it_through_a_file(tmp_path, data):  # noqa: F811
    train = np.arange(len(data.shapes))
    settings, info = select_ranker(data, train, "relative", grid={"max_leaf_nodes": (7,)}, iterations=(10,),
                                   portfolio_sizes=(0,))
    predictor = fit_predictor(data, SMALL, train, out_of_fold_scores=info["out_of_fold_scores"])
    assert predictor.head is not None and predictor.header["head_tried"][0]["head"] == "off"
    size = predictor.head.settings.size
    for shape in map(tuple, data.shapes[:4]):
        corrected = predictor.corrected_scores(shape)
        ranked = predictor.scores(shape)
        top = np.argsort(-corrected, kind="stable")[:size]
        assert set(np.argsort(-ranked, kind="stable")[:size]) == set(top)  # the head re-orders, never replaces
        assert ranked[top].min() > np.delete(ranked, top).max()
        # best_config: the head (through sklearn here) on the top of the shortlist by the corrected scores, each
        # listed candidate's feature row followed by the neighbour evidence on it
        shortlist = predictor.shortlist.for_shape(shape)
        listed = shortlist[np.argsort(-corrected[shortlist], kind="stable")[:size]]
        rows = np.concatenate([predictor._features(shape, None, listed),
                               predictor.evidence.for_shapes(np.array([shape]), listed[None])[0]], axis=-1)
        wins = predictor.head.wins(rows[None], corrected[listed][None])[0]
        assert predictor.best_config(shape) == predictor.config(int(listed[np.argmax(wins)]))
    path = tmp_path / "headed.predictor"
    save_predictor(predictor, path)
    loaded = load_predictor(path, gpu=data.gpu)
    assert loaded.head.settings == predictor.head.settings
    np.testing.assert_array_equal(loaded.evidence.relative, predictor.evidence.relative)
    assert read_header(path)["head_evidence"] == list(EVIDENCE_COLUMNS)
    for shape in map(tuple, data.shapes[:4]):
        np.testing.assert_allclose(loaded.scores(shape), predictor.scores(shape))
        assert loaded.best_config(shape) == predictor.best_config(shape)

