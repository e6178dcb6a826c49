"""The learned fusion's features and scores (pure numpy), and the fitting bench's weight writer."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench import fusion_fit
from laminae import fusion


def _evidence() -> fusion.Evidence:
    return fusion.Evidence(
        rows=np.array([4, 7, 9]), kinds=np.array(["table", "paragraph", "table"]),
        similarity=np.array([0.5, 0.8, 0.3]), own_similarity=np.array([0.1, 0.2, 0.3]),
        dense_rank=np.array([1.0, 1.0, 2.0]), bm25=np.array([6.0, 0.0, 3.0]), bm25_rank=np.array([1.0, 1000.0, 2.0]),
        coverage=np.array([2.0, 1.0, 0.0]), coverage_rank=np.array([1.0, 2.0, 1000.0]), coverage_total=4.0)


def test_features_follow_their_definitions():
    x = fusion.features(_evidence())
    assert x.shape == (3, len(fusion.FEATURES))
    expected = [
        [0.5, 0.0, 0.5 - 0.8, 1 / 61, 1.0, 1 / 61, 0.5, 1 / 61, 0.1],
        [0.8, 0.0, 0.0, 1 / 61, 0.0, 1 / 1060, 0.25, 1 / 62, 0.2],
        [0.3, 0.3 - 0.5, 0.3 - 0.8, 1 / 62, 0.5, 1 / 62, 0.0, 1 / 1060, 0.3],
    ]
    assert np.allclose(x, expected)


def test_features_of_a_question_nothing_matched_lexically_are_finite():
    ev = _evidence()
    ev.bm25[:] = 0.0
    ev.coverage[:] = 0.0
    ev.coverage_total = 0.0
    x = fusion.features(ev)
    assert np.isfinite(x).all() and (x[:, 4] == 0).all() and (x[:, 6] == 0).all()
    empty = fusion.Evidence(*(np.zeros(0) for _ in range(9)), coverage_total=0.0)
    assert fusion.features(empty).shape == (0, len(fusion.FEATURES))


def test_scores_are_the_logistic_of_weights_and_kind_priors():
    x = np.array([[1.0, 2.0], [0.0, -1.0]])
    got = fusion.scores(x, ["table", "video"], weights=np.array([0.5, 1.0]), prior={"table": 2.0}, intercept=-1.0)
    z = [0.5 + 2.0 + 2.0 - 1.0, -1.0 - 1.0]  # a kind without a prior gets none
    assert np.allclose(got, [1 / (1 + math.exp(-v)) for v in z])
    keyword = fusion.scores(x, ["table", "video"], weights=np.array([0.5, 1.0]), prior={"table": 2.0}, intercept=-1.0,
                            question=False)  # a keyword query gets no kind prior
    assert np.allclose(keyword, [1 / (1 + math.exp(-v)) for v in (0.5 + 2.0 - 1.0, -1.0 - 1.0)])


def test_the_shipped_weights_rank_more_evidence_higher():
    x = fusion.features(_evidence())
    base = fusion.scores(x, ["table"] * 3)
    for feature in ("dense_rank", "bm25_rank", "coverage_rank", "similarity_below_kind_best"):
        bumped = x.copy()
        bumped[:, fusion.FEATURES.index(feature)] += 0.01
        assert (fusion.scores(bumped, ["table"] * 3) > base).all(), feature


def test_ranks_of_rows_in_a_ranking():
    assert fusion.ranks([np.array([9, 4])], np.array([4, 7, 9])).tolist() == [2, fusion.ABSENT_RANK, 1]
    # several rankings holding different rows (the per-kind dense lists): each row's rank in its own
    assert fusion.ranks([np.array([9, 4]), np.array([7])], np.array([4, 7, 9, 5])).tolist() == \
        [2, 1, 1, fusion.ABSENT_RANK]


def test_the_fit_recovers_which_feature_marks_evidence_and_writes_it(tmp_path, monkeypatch):
    pytest.importorskip("sklearn", reason="scikit-learn comes with the ml extra")
    rng = np.random.default_rng(3)
    items = []
    for i in range(40):
        x = rng.normal(size=(30, len(fusion.FEATURES)))
        labels = (x[:, 4] > 1.2)[:, None]  # evidence is what scores high on bm25
        items.append({"rows": np.arange(30), "x": x, "kinds": np.array(["paragraph"] * 30), "labels": labels,
                      "rrf": -np.arange(30.0), "page": f"p{i % 13}"})
    weights, prior, intercept = fusion_fit.fit({"a": items[:20], "b": items[20:]}, c=1.0)
    assert np.argmax(weights) == 4 and weights[4] > 1.0
    held = fusion_fit.cross_validate({"a": items[:20], "b": items[20:]}, c=1.0)
    assert held["a"]["refit, held-out pages (5 folds)"][1] > held["a"]["reciprocal rank fusion"][1]
    folds = fusion_fit.page_folds(items, np.random.default_rng(0))
    assert sorted(np.concatenate(folds).tolist()) == list(range(40))
    for fold in folds:  # a page's questions never straddle two folds
        assert not {items[i]["page"] for i in fold} & {items[i]["page"] for i in range(40) if i not in set(fold.tolist())}
    (tmp_path / "laminae").mkdir()
    target = tmp_path / "laminae" / "fusion.py"
    target.write_text((fusion_fit.ROOT / "laminae" / "fusion.py").read_text())
    monkeypatch.setattr(fusion_fit, "ROOT", tmp_path)
    fusion_fit.write_weights(weights, prior, intercept, "test-fit")
    written = {}
    exec(compile(target.read_text(), str(target), "exec"), written)
    assert written["WEIGHTS_VERSION"] == "test-fit"
    assert np.allclose(written["WEIGHTS"], weights, rtol=1e-5)
    assert written["KIND_PRIOR"].keys() == set(fusion.KINDS)
    assert math.isclose(written["INTERCEPT"], intercept, rel_tol=1e-5)


@pytest.mark.parametrize(("text", "question"), [
    ("what team had the first pick in round 17?", True), ("Which bread bakes longest", True),
    ("name the only stage that sean kelly won.", True), ("is rye a grass", True), ("rye bread?", True),
    ("rye bread", False), ("rye bread baked for a whole day", False), ("first home opponent", False),
    ("whatever sourdough", False), ("this island", False),
])
def test_questions_are_told_from_keyword_queries(text, question):
    assert fusion.is_question(text) is question
