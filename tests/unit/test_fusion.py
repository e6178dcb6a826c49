"""The learned fusion's features and scores (pure numpy), and the fitting bench's weight writer."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from bench import fusion_fit
from laminae import fusion


def _evidence() -> fusion.Evidence:
    return fusion.Evidence(
        rows=np.array([4, 7, 9]), kinds=np.array(["table", "paragraph", "table"]),
        similarity=np.array([0.5, 0.8, 0.3]), own_similarity=np.array([0.1, 0.2, 0.3]),
        dense_rank=np.array([1.0, 1.0, 2.0]), bm25=np.array([6.0, 0.0, 3.0]), bm25_rank=np.array([1.0, 1000.0, 2.0]),
        coverage=np.array([2.0, 1.0, 0.0]), coverage_rank=np.array([1.0, 2.0, 1000.0]), coverage_total=4.0,
        signals=np.arange(3.0 * len(fusion.SIGNALS)).reshape(3, -1), docs=np.array([0, 1, 0]), procedural=True,
        page_similarity=np.array([0.2, 0.4, 0.2]), page_bm25=np.array([1.0, 0.25, 1.0]),
        page_bm25_rank=np.array([1.0, 2.0, 1.0]))


def test_features_follow_their_definitions():
    x = fusion.features(_evidence())
    assert x.shape == (3, len(fusion.FEATURES))
    signals = np.arange(3.0 * len(fusion.SIGNALS)).reshape(3, -1).tolist()
    # candidates 4 and 9 share page 0: its evidence is both their reciprocal ranks summed
    page_0 = 3 / 61 + (1 / 62 + 1 / 62 + 1 / 1060)
    page_1 = 1 / 61 + 1 / 1060 + 1 / 62
    expected = [
        [0.5, 0.0, 0.5 - 0.8, 1 / 61, 1.0, 1 / 61, 0.5, 1 / 61, 0.1, *signals[0], 1.0, math.log(3), 1.0, 0.2, -0.2,
         1.0, 1 / 61],
        [0.8, 0.0, 0.0, 1 / 61, 0.0, 1 / 1060, 0.25, 1 / 62, 0.2, *signals[1], 0.0, math.log(2), page_1 / page_0, 0.4, 0.0,
         0.25, 1 / 62],
        [0.3, 0.3 - 0.5, 0.3 - 0.8, 1 / 62, 0.5, 1 / 62, 0.0, 1 / 1060, 0.3, *signals[2], 1.0, math.log(3), 1.0, 0.2, -0.2,
         1.0, 1 / 61],
    ]
    assert np.allclose(x, expected)
    ev = _evidence()
    ev.procedural = False  # the table-for-a-how-to-question column is off for any other question
    assert (fusion.features(ev)[:, fusion.FEATURES.index("table_procedural")] == 0).all()
    ev.signals = ev.signals[:, :2]
    with pytest.raises(ValueError, match="component_signals"):
        fusion.features(ev)


def test_features_of_a_question_nothing_matched_lexically_are_finite():
    ev = _evidence()
    ev.bm25[:] = 0.0
    ev.coverage[:] = 0.0
    ev.coverage_total = 0.0
    x = fusion.features(ev)
    assert np.isfinite(x).all() and (x[:, 4] == 0).all() and (x[:, 6] == 0).all()
    empty = fusion.Evidence(*(np.zeros(0) for _ in range(9)), coverage_total=0.0,
                            signals=np.zeros((0, len(fusion.SIGNALS))), docs=np.zeros(0, np.int32), procedural=False)
    assert fusion.features(empty).shape == (0, len(fusion.FEATURES))


class _Layer:
    def __init__(self, ids, kinds, text, doc):
        self.ids, self.kinds, self.text, self.doc = ids, np.array(kinds, dtype=object), pa.array(text), np.array(doc)
        self.starts = np.searchsorted(self.doc, np.arange(len(set(doc)) + 1))


class _Graph:
    """The parts of ``laminae.graph.Graph`` that ``component_signals`` reads."""

    def __init__(self):
        index_words = " ".join(f"term{i}() (Class{i} method), [1]" for i in range(40))
        self.layers = [
            _Layer(["d0", "d1"], ["html", "html"], [None, None], [0, 1]),
            _Layer(["c0", "c1", "c2", "c3"], ["paragraph", "code", "table", "paragraph"],
                   ["To remove an entry from the cache, call the delete method with its key.",
                    "cache.delete('key')", index_words, None],
                   [0, 0, 1, 1]),
        ]


def test_component_signals_tell_a_generated_index_from_prose():
    graph = _Graph()
    signals = fusion.component_signals(graph, np.arange(4))
    assert signals.shape == (4, len(fusion.SIGNALS))
    assert np.array_equal(fusion.component_signals(graph, np.array([2, 0])), signals[[2, 0]])  # pages cached
    assert fusion.component_signals(graph, np.zeros(0, np.int64)).shape == (0, len(fusion.SIGNALS))
    col = {name: signals[:, i] for i, name in enumerate(fusion.SIGNALS)}
    prose, code, index, empty = range(4)
    assert math.isclose(col["log_chars"][prose], math.log1p(len(graph.layers[1].text[0].as_py())))
    assert col["log_chars"][empty] == 0.0
    assert col["prose"][prose] > 0.4 and col["prose"][index] == 0.0  # "to", "an", "from", "the", "with", "its"
    assert col["page_prose"][index] == col["prose"][index]  # the index is its page's only text
    assert col["page_in_tables"][index] == 1.0 and col["page_in_tables"][prose] == 0.0
    chars = [len(t) for t in (graph.layers[1].text[0].as_py(), graph.layers[1].text[1].as_py())]
    assert math.isclose(col["page_in_code"][prose], chars[1] / sum(chars))


def test_the_gate_reads_the_question_and_what_its_first_rankings_found():
    ev = _evidence()
    text = "My window flickers when I redraw it 60 times a second: how do I stop it?"
    ev.shape = fusion.question_shape(text, 6)
    got = fusion.question_features(ev)
    # reciprocal rank fusion's order of the three candidates: 4 (ranks 1, 1, 1), 9 (2, 2, -), 7 (1, -, 2);
    # the question: 6 terms, a final "?", its asker speaks of their window, 1 of 16 words a number
    expected = [0.0, 0.8, 0.4, math.log(7), 1.0, 1.0, 1 / 16]
    assert got.shape == (len(fusion.GATE_FEATURES),) and np.allclose(got, expected)
    weights = np.linspace(-1.0, 1.0, len(fusion.GATE_FEATURES))
    assert math.isclose(fusion.howto_probability(ev, weights, 0.5), 1 / (1 + math.exp(-(got @ weights + 0.5))))
    empty = fusion.Evidence(*(np.zeros(0) for _ in range(9)), coverage_total=0.0,
                            signals=np.zeros((0, len(fusion.SIGNALS))), docs=np.zeros(0, np.int32), procedural=False)
    assert np.isfinite(fusion.question_features(empty)).all()
    assert fusion.question_shape("how many medals did norway win in 1994", 5).tolist() == [math.log(6), 0.0, 0.0, 0.125]


def test_scores_are_the_logistic_of_weights_and_kind_priors():
    x = np.array([[1.0, 2.0], [0.0, -1.0]])
    got = fusion.scores(x, ["table", "video"], weights=np.array([0.5, 1.0]), prior={"table": 2.0}, intercept=-1.0)
    z = [0.5 + 2.0 + 2.0 - 1.0, -1.0 - 1.0]  # a kind without a prior gets none
    assert np.allclose(got, [1 / (1 + math.exp(-v)) for v in z])
    keyword = fusion.scores(x, ["table", "video"], weights=np.array([0.5, 1.0]), prior={"table": 2.0}, intercept=-1.0,
                            question=False)  # a keyword query gets no kind prior
    assert np.allclose(keyword, [1 / (1 + math.exp(-v)) for v in (0.5 + 2.0 - 1.0, -1.0 - 1.0)])


def test_a_how_to_question_is_scored_by_the_how_to_weights_without_kind_priors():
    x = fusion.features(_evidence())
    kinds = ["table", "paragraph", "table"]
    z = x @ fusion.HOWTO_WEIGHTS + fusion.HOWTO_INTERCEPT
    assert np.allclose(fusion.scores(x, kinds, procedural=True), 1 / (1 + np.exp(-z)))
    general = x @ fusion.WEIGHTS + fusion.INTERCEPT + fusion.kind_prior(kinds)
    assert np.allclose(fusion.scores(x, kinds), 1 / (1 + np.exp(-general)))


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
        gate_x = rng.normal(size=len(fusion.GATE_FEATURES))
        gate_x[2] += 8.0 * (i >= 20)  # the questions of the docs sites below find more pages
        items.append({"rows": np.arange(30), "docs": np.arange(30), "x": x, "kinds": np.array(["paragraph"] * 30),
                      "labels": labels,
                      "rrf": -np.arange(30.0), "page": f"p{i % 13}", "gate_x": gate_x})
    weights, prior, intercept = fusion_fit.fit({"a": items[:20], "b": items[20:]}, c=1.0)
    assert np.argmax(weights) == 4 and weights[4] > 1.0
    held = fusion_fit.cross_validate({"a": items[:20], "docs-postgresql": items[20:30], "docs-django": items[30:]},
                                     c=1.0)
    assert held["a"]["refit, held out (5 folds)"][1] > held["a"]["reciprocal rank fusion"][1]
    # a docs site is held out whole: scored by a fit on the other sets only
    assert held["docs-django"]["refit, held out (site)"][1] > held["docs-django"]["reciprocal rank fusion"][1]
    general, howto, gate = fusion_fit.fit_models({"a": items[:20], "docs-postgresql": items[20:30],
                                                  "docs-django": items[30:]}, c=1.0)
    assert howto is not None and np.argmax(gate[0]) == 2  # the gate learned what tells the docs questions apart
    assert [fusion_fit.routed_howto(i, gate) for i in items] == [i >= 20 for i in range(40)]
    ablation = fusion_fit.ablation({"a": items[:20], "b": items[20:]}, c=1.0, kinds=("table",))
    assert ablation["- bm25"]["a"][1] < ablation["all features"]["a"][1]  # the one feature that marks evidence
    folds = fusion_fit.page_folds(items, np.random.default_rng(0))
    assert sorted(np.concatenate(folds).tolist()) == list(range(40))
    for fold in folds:  # a page's questions never straddle two folds
        assert not {items[i]["page"] for i in fold} & {items[i]["page"] for i in range(40) if i not in set(fold.tolist())}
    (tmp_path / "laminae").mkdir()
    target = tmp_path / "laminae" / "fusion.py"
    target.write_text((fusion_fit.ROOT / "laminae" / "fusion.py").read_text())
    monkeypatch.setattr(fusion_fit, "ROOT", tmp_path)
    fusion_fit.write_weights(None, (weights * 2, {}, intercept - 1), "test-howto")  # the how-to model alone
    written = {}
    exec(compile(target.read_text(), str(target), "exec"), written)
    assert written["HOWTO_WEIGHTS_VERSION"] == "test-howto" and written["WEIGHTS_VERSION"] == fusion.WEIGHTS_VERSION
    assert np.allclose(written["HOWTO_WEIGHTS"], weights * 2, rtol=1e-5)
    assert math.isclose(written["HOWTO_INTERCEPT"], intercept - 1, rel_tol=1e-5)
    fusion_fit.write_weights((weights, prior, intercept), None, "test-fit", gate)
    written = {}
    exec(compile(target.read_text(), str(target), "exec"), written)
    assert written["WEIGHTS_VERSION"] == "test-fit" and written["HOWTO_WEIGHTS_VERSION"] == "test-howto"
    assert np.allclose(written["WEIGHTS"], weights, rtol=1e-5)
    assert written["KIND_PRIOR"].keys() == set(fusion.KINDS)
    assert math.isclose(written["INTERCEPT"], intercept, rel_tol=1e-5)
    assert written["GATE_VERSION"] == "test-fit" and np.allclose(written["GATE_WEIGHTS"], gate[0], rtol=1e-5)
    assert math.isclose(written["GATE_INTERCEPT"], gate[1], rel_tol=1e-5)


def test_one_per_page_ranks_every_page_best_before_any_page_second():
    rows = np.array([10, 11, 12, 13, 14, 15])
    docs = np.array([0, 0, 0, 1, 2, 1])
    probability = np.array([0.9, 0.8, 0.7, 0.3, 0.2, 0.25])
    out = fusion.one_per_page(rows, docs, probability)
    order = rows[np.argsort(-out, kind="stable")].tolist()
    assert order == [10, 13, 14, 11, 12, 15]  # the pages' best (0.9, 0.3, 0.2), then the rest in their own order
    assert np.array_equal(out[[0, 3, 4]], probability[[0, 3, 4]])  # a page's best keeps its probability
    assert (out[[1, 2, 5]] < 0.2).all() and (out[[1, 2, 5]] > 0).all()
    assert np.allclose(out[[1, 2, 5]] / probability[[1, 2, 5]], out[1] / probability[1])  # one common factor
    one_each = np.array([0, 1, 2, 3, 4, 5])
    assert np.array_equal(fusion.one_per_page(rows, one_each, probability), probability)
    assert len(fusion.one_per_page(rows[:0], docs[:0], probability[:0])) == 0
    tied = fusion.one_per_page(rows[:2], docs[:2], np.array([0.5, 0.5]))  # ties go to the lower row
    assert tied[0] == 0.5 and tied[1] < 0.5
    # a page's best whose probability underflowed to 0 still comes before another page's second
    zero = fusion.one_per_page(rows[:4], np.array([0, 0, 1, 0]), np.array([0.9, 0.8, 0.0, 0.7]))
    assert np.argsort(-zero, kind="stable").tolist() == [0, 2, 1, 3] and zero[2] == 0.0 and zero[1] > zero[3]
    # candidates outside any document (-1) are pages of their own
    outside = np.array([0.5, 0.4, 0.3])
    assert np.array_equal(fusion.one_per_page(rows[:3], np.array([-1, -1, 0]), outside), outside)


def test_a_question_the_gate_sends_to_the_how_to_model_is_served_one_component_per_page():
    x = np.zeros((8, len(fusion.FEATURES)))
    x[:, 0] = [4.0, 3.5, 3.0, 2.5, 1.0, 0.5, 0.0, -0.5]  # page 0's four components score best
    item = {"rows": np.arange(8), "docs": np.array([0, 0, 0, 0, 1, 1, 2, 3]), "x": x,
            "kinds": np.array(["paragraph"] * 8), "gate_x": np.zeros(len(fusion.GATE_FEATURES))}
    model = (np.ones(len(fusion.FEATURES)), {}, 0.0)
    plain = fusion.scores(x, item["kinds"], *model)
    to_howto, to_general = (np.zeros(len(fusion.GATE_FEATURES)), 1.0), (np.zeros(len(fusion.GATE_FEATURES)), -1.0)
    howto = fusion_fit.served_by(item, model, model, to_howto)
    assert np.allclose(fusion_fit.served_by(item, model, model, to_general), plain)
    assert item["docs"][np.argsort(-plain, kind="stable")[:4]].tolist() == [0, 0, 0, 0]
    assert item["docs"][np.argsort(-howto, kind="stable")[:4]].tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize(("text", "question"), [
    ("what team had the first pick in round 17?", True), ("Which bread bakes longest", True),
    ("name the only stage that sean kelly won.", True), ("is rye a grass", True), ("rye bread?", True),
    ("rye bread", False), ("rye bread baked for a whole day", False), ("first home opponent", False),
    ("whatever sourdough", False), ("this island", False),
])
def test_questions_are_told_from_keyword_queries(text, question):
    assert fusion.is_question(text) is question


def test_reads_signals_follows_the_weights(monkeypatch):
    start = fusion.FEATURES.index(fusion.SIGNALS[0])
    for procedural, name in ((False, "WEIGHTS"), (True, "HOWTO_WEIGHTS")):
        weights = getattr(fusion, name).copy()
        weights[start:start + len(fusion.SIGNALS)] = 0.0
        monkeypatch.setattr(fusion, name, weights)
        assert not fusion.reads_signals(procedural)
        weights = weights.copy()
        weights[start + 1] = 0.5
        monkeypatch.setattr(fusion, name, weights)
        assert fusion.reads_signals(procedural)


def test_the_listwise_fit_ranks_what_pointwise_regression_gets_wrong():
    """Evidence is the candidate with the highest feature 4 *within its question*, while feature 4
    shifts from question to question: a pointwise regression over all candidates sees that shift
    as noise, the ranking fit does not; its calibrated scores are still probabilities."""
    pytest.importorskip("sklearn", reason="scikit-learn comes with the ml extra")
    rng = np.random.default_rng(5)
    items = []
    for i in range(60):
        x = rng.normal(size=(25, len(fusion.FEATURES)))
        x[:, 4] += rng.normal(scale=4.0)  # the question's shift
        labels = (x[:, 4] == x[:, 4].max())[:, None]
        items.append({"rows": np.arange(25), "x": x, "kinds": np.array(["paragraph"] * 25), "labels": labels,
                      "rrf": -np.arange(25.0), "page": f"p{i % 17}"})
    sets = {"a": items[:30], "b": items[30:]}
    listwise = fusion_fit.fit(sets, c=1.0)
    pointwise = fusion_fit.fit(sets, c=1.0, loss="pointwise")
    assert np.argmax(listwise[0]) == 4

    def mrr(model):
        return fusion_fit.quality(items, [fusion_fit.served_by(i, model, None) for i in items])[1]

    assert mrr(listwise) > mrr(pointwise) and mrr(listwise) > 0.9
    probability = np.concatenate([fusion_fit.served_by(i, listwise, None) for i in items])
    assert abs(probability.mean() - 1 / 25) < 0.01  # one evidence in 25 candidates
    with pytest.raises(ValueError, match="loss must be one of"):
        fusion_fit.fit(sets, c=1.0, loss="pairwise")


def test_the_listwise_gradient_is_the_loss_derivative():
    from scipy.optimize import approx_fprime

    rng = np.random.default_rng(2)
    xs = [rng.normal(size=(6, 3)) for _ in range(4)]
    labels = [np.zeros((6, 2), dtype=bool) for _ in range(4)]
    for y in labels:
        y[0, 0] = y[3, 1] = y[4, 1] = True
    labels[2][:, 1] = False  # a gold item no ranking found: left out of its question's loss
    objective = fusion_fit.listwise_objective(xs, labels, np.array([1.0, 2.0, 0.5, 1.0]), c=0.7)
    beta = rng.normal(size=3)
    assert np.allclose(objective(beta)[1], approx_fprime(beta, lambda b: objective(b)[0], 1e-7), atol=1e-4)
