"""Fit the learned fusion's weights and its gate (``laminae/fusion.py``) on questions of three kinds.

Reads ``../shared/bench/wtq-dev`` (table questions), ``../shared/bench/hybridqa-dev`` (multi-hop:
a table row, then the passage a cell links to) and the documentation sites of ``docs-dev`` and
``docs-more`` (how-to and concept questions: ``docs-django``, Sphinx; ``docs-postgresql``,
DocBook; ``docs-maxima``, Texinfo; ``docs-fltk``, Doxygen; ``bench.quality.DOCS``), their
questions, gold and the shared scorers' matchers, and their indexes (built with ``laminae build``
defaults as ``bench/quality.py`` builds them, or given with ``--index SET=DIR``); writes nothing
unless ``--write``, which puts the fitted weights into ``laminae/fusion.py`` (``--gathered FILE``
keeps the evidence gathered, to refit without the indexes). For every question the reader gathers
its evidence for every component any ranking found (``Index._fusion_evidence``, the code
``retrieve`` runs) and the set's gold labels which components are evidence (a docs question: any
component on a page that answers it); a multi-hop set's questions are gathered a second time as
the local hop's last move ranks them. A linear model is fitted to each question's ranking of its
candidates (``--loss listwise``: a softmax over the question's candidates, standardized
features, L2 with ``--c``), then calibrated (Platt) so that its scores stay probabilities;
``--loss pointwise`` is the logistic regression over every candidate fitted before. Two models:
the general one on the table and multi-hop questions (kinds weighing the same, times
``KIND_WEIGHT``), the how-to one on the docs sites' questions, each reading its own features
(``fusion.GENERAL_FEATURES``, ``fusion.HOWTO_FEATURES``); and the gate that picks one for a
question (``fit_gate``, over ``fusion.GATE_FEATURES``). Held-out quality per set (R@10 and MRR@10;
for a docs set Hit@10, MRR@10 and Hit@1 of the first answering page): wtq-dev and hybridqa-dev by 5 folds
that hold out whole pages, a docs site by leaving the whole site out (the fit and the gate never
saw the site, its generator or its questions; with one docs site only, by 5 folds of its
questions), for reciprocal rank fusion, the weights in ``laminae/fusion.py`` now and the refit.
``--ablate`` refits without each feature (and without the kind priors, and without each of the
gate's features) and prints what each one is worth per set, held out.

    .venv/bin/python bench/fusion_fit.py --index wtq-dev=DIR --index hybridqa-dev=DIR \
        --index docs-django=DIR --index docs-postgresql=DIR --index docs-maxima=DIR \
        --index docs-fltk=DIR [--ablate] [--gathered FILE] [--write VERSION [--write-general]]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pickle
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

if not __package__:  # run as a file: the repository's bench package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import laminae
from bench.quality import DOCS, build_index, docs_questions, local_hop_documents
from laminae import fusion
from laminae.index import rrf

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "bench"
SETS = {"wtq-dev": 0, "hybridqa-dev": 1}  # name: --follow-links
FOLDS = 5
# A docs question's gold is pages, and every component on them is evidence in the fit: its
# listwise loss is then -log of the softmax mass the answering pages' components get together,
# the likelihood of the answering pages when a page's probability is the sum of its components'
# (a page-level fit, as the question is scored by its first answering page). Fitted on a page's
# best three components by reciprocal rank fusion instead (the fit until 2026-11-28), held out
# by site (MRR@10 / Hit@1): Django 0.858 / 0.78, PostgreSQL 0.795 / 0.68, Maxima 0.704 / 0.56,
# FLTK 0.673 / 0.64; on every component: 0.927 / 0.89, 0.860 / 0.76, 0.772 / 0.68 and
# 0.608 / 0.56. The answering pages' other components carry page-level evidence (the page's
# BM25, its vector) more than the three best do, which Doxygen's class pages, heavy with
# inherited member lists, answer less (FLTK's whole-page BM25 is 0.445).
LOSSES = ("listwise", "pointwise")
# Weight of each kind of question in a fit, over the others' 1. Fitted to the ranking (listwise)
# with the kinds weighing the same, the general model gave up the multi-hop questions for the
# table questions (hybridqa-dev MRR@10 0.932 -> 0.880, its 2-hop local hop All@10 0.853 -> 0.794,
# while wtq-dev R@10 rose 0.840 -> 0.867); with its local hop fitted too (HOP) and weighing three
# times, the local hop keeps 0.853 and wtq-dev gets 0.870 (2: 0.824 and 0.874).
KIND_WEIGHT = {"hybridqa-dev": 3.0}
# A multi-hop set's questions are fitted twice, as retrieve ranks them and as the local hop's last
# move does (``gather(hop=True)``), in a set named with this suffix and counted in its kind.
HOP = " local hop"
DEFAULT_C = {"listwise": 0.3, "pointwise": 0.1}  # --c, chosen on held-out quality (0.03 to 1 tried)


def scorer_module(bench: Path):
    spec = importlib.util.spec_from_file_location(f"score_{bench.name.replace('-', '_')}", bench / "score.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gather(name: str, index_dir: Path, hop: bool = False) -> list[dict]:
    """Per question: candidate rows, their features and kinds, the RRF order, gold labels per gold
    item, the question's (first) gold page. The candidates are those of ``retrieve`` over every
    component; with ``hop``, those of the local hop's last move (``bench/quality.py``'s FiF local
    hop, ``local_hop_documents``, chosen with the weights in ``laminae/fusion.py`` now)."""
    bench = SHARED / name
    score = scorer_module(bench)
    pages = score.Pages(str(bench))
    index = laminae.open(str(index_dir))
    g = index.graph
    comps = g.layers[1]
    everything = np.arange(len(comps.ids))
    out = []
    for line in (bench / "questions.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        q = json.loads(line)
        text = q["question"]
        golds = score.gold_items(q, pages, "component")
        rows, documents = everything, None
        if hop:
            documents = local_hop_documents(index, text)
            rows = comps.rows_of_documents(np.array(sorted({g.doc_position[d] for d in documents}), dtype=np.int64))
        evidence = index._fusion_evidence(text, index._query_vector(text), rows, documents, 2, signals=True)
        if evidence is None:
            continue
        lists, ev, _ = evidence
        labels = np.zeros((len(ev.rows), len(golds)), dtype=bool)
        for i, row in enumerate(ev.rows.tolist()):
            doc = pages(g.urls[int(comps.doc[row])].as_py())
            labels[i] = [gold.hit(doc, comps.text[row].as_py() or "", None, strip=pages.title.get(doc))
                         for gold in golds]
        out.append(_item(ev, lists, labels, min(gold.doc or "" for gold in golds) if golds else q["qid"], text))
    return out


def _item(ev: fusion.Evidence, lists: list[np.ndarray], labels: np.ndarray, page: str, text: str) -> dict:
    fused_rows, _ = rrf(lists)
    rrf_rank = {r: i for i, r in enumerate(fused_rows.tolist())}
    return {"rows": ev.rows, "docs": ev.docs, "x": fusion.features(ev), "kinds": ev.kinds, "labels": labels,
            "rrf": -np.array([rrf_rank.get(r, len(rrf_rank)) for r in ev.rows.tolist()], dtype=np.float64),
            "page": page, "question": fusion.is_question(text), "procedural": ev.procedural,
            "gate_x": fusion.question_features(ev), "text": text}


def gather_docs(name: str, index_dir: Path) -> list[dict]:
    """``gather`` for a docs-dev site: one gold column per question, true for a component on any
    of the pages that answer it (docs-dev's score.py counts a hit the same way)."""
    _, root, _ = DOCS[name]
    root = root.rstrip("/") + "/"
    index = laminae.open(str(index_dir))
    g = index.graph
    comps = g.layers[1]
    rows = np.arange(len(comps.ids))
    page_of = [_relative(g.urls[d].as_py(), root) for d in range(len(g.urls))]
    out = []
    for q in docs_questions(name):
        lists, ev, _ = index._fusion_evidence(q["q"], index._query_vector(q["q"]), rows, None, 2, signals=True)
        gold = set(q["pages"])
        labels = np.array([[page_of[int(comps.doc[r])] in gold] for r in ev.rows.tolist()], dtype=bool)
        out.append(_item(ev, lists, labels.reshape(-1, 1), q["id"], q["q"]))
    return out


def _relative(url: str | None, root: str) -> str:
    """A page's path under the indexed folder, as docs-dev's gold names it."""
    u = (url or "").split("#")[0]
    u = u[len("file://"):] if u.startswith("file://") else u
    return u[len(root):] if u.startswith(root) else u


def design(item: dict, kinds: tuple[str, ...]) -> np.ndarray:
    """Features plus one indicator column per kind with a prior (all zero for a keyword query,
    which gets no prior when served)."""
    on = float(item.get("question", True))
    return np.column_stack([item["x"], *[on * (item["kinds"] == k) for k in kinds]])


def served(item: dict) -> np.ndarray:
    """The scores the reader gives the item's candidates with the shipped weights and gate
    (routed again here: an item's ``procedural`` is what the gate said when it was gathered)."""
    return served_by(item, (fusion.WEIGHTS, fusion.KIND_PRIOR, fusion.INTERCEPT),
                     (fusion.HOWTO_WEIGHTS, {}, fusion.HOWTO_INTERCEPT), (fusion.GATE_WEIGHTS, fusion.GATE_INTERCEPT))


Model = tuple[np.ndarray, dict[str, float], float]


Gate = tuple[np.ndarray, float]
Models = tuple[Model, Model | None, Gate | None]


def is_docs(name: str) -> bool:
    return name in DOCS


def fit_models(sets: dict[str, list[dict]], c: float, kinds: tuple[str, ...] = fusion.KINDS,
               drop: frozenset[str] = frozenset(), loss: str = "listwise",
               gate_drop: frozenset[str] = frozenset()) -> Models:
    """(the general model, fitted with kind priors on the questions of the table and multi-hop sets;
    the how-to model, fitted on the documentation sites' questions, without: None when there are
    none; the gate that tells which of the two serves a question (``fit_gate``), None without docs
    sites). A docs site's handful of questions in the general fit would weigh as much as a whole
    kind: six of them cost wtq-dev 0.025 MRR@10 and hybridqa-dev 0.2 held out. One model over every
    kind (the how-to features, the kind priors) held out by site: Django 0.816 -> 0.722 MRR@10,
    Maxima 0.660 -> 0.491, hybridqa-dev 0.886 -> 0.869 (2026-11-27, page BM25 features in both)."""
    general_sets = {name: items for name, items in sets.items() if not is_docs(name)} or sets
    general = fit(general_sets, c, kinds, drop | (set(fusion.FEATURES) - set(fusion.GENERAL_FEATURES)), loss)
    howto_sets = {name: items for name, items in sets.items() if is_docs(name)}
    if not howto_sets:
        return general, None, None
    howto = fit(howto_sets, c, (), drop | (set(fusion.FEATURES) - set(fusion.HOWTO_FEATURES)), loss)
    return general, howto, (fit_gate(sets, gate_drop) if len(howto_sets) < len(sets) else None)


def fit_gate(sets: dict[str, list[dict]], drop: frozenset[str] = frozenset()) -> Gate:
    """Weights over ``fusion.GATE_FEATURES`` (those in ``drop`` left at 0) and an intercept: a
    logistic regression telling a documentation site's question from a table or multi-hop one,
    each kind of question weighing the same in total (the docs sites share theirs)."""
    from sklearn.linear_model import LogisticRegression

    names = [name for name in sets if not name.endswith(HOP)]  # a local hop's questions are its set's again
    kind = {name: "docs" if is_docs(name) else name for name in names}
    keep = np.array([f not in drop for f in fusion.GATE_FEATURES])
    x = np.vstack([i["gate_x"] for name in names for i in sets[name]])[:, keep]
    y = np.array([is_docs(name) for name in names for _ in sets[name]])
    weight = np.concatenate([np.full(len(sets[name]), 1.0 / (len(sets[name]) * list(kind.values()).count(kind[name])))
                             for name in names])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    model = LogisticRegression(C=1.0, max_iter=5000).fit((x - mean) / scale, y, sample_weight=weight * len(y))
    coef = np.zeros(len(keep))
    coef[keep] = model.coef_[0] / scale
    return coef, float(model.intercept_[0] - coef[keep] @ mean)


def routed_howto(item: dict, gate: Gate | None) -> bool:
    """Whether ``gate`` sends the item's question to the how-to model (without a gate: as served now)."""
    if gate is None:
        return bool(item.get("procedural", False))
    return bool(item["gate_x"] @ gate[0] + gate[1] >= 0.0)


def served_by(item: dict, general: Model, howto: Model | None, gate: Gate | None = None) -> np.ndarray:
    """The scores the reader would give the item's candidates with these models: a question the
    gate sends to the how-to model also gets one component per page first (``fusion.one_per_page``)."""
    if howto is not None and routed_howto(item, gate):
        if "docs" not in item:
            raise ValueError("the gathered evidence lacks its candidates' documents (gathered before one_per_page): "
                             "gather it again (run without --gathered, or with a new file)")
        return fusion.one_per_page(item["rows"], item["docs"],
                                   fusion.scores(item["x"], item["kinds"], *howto, question=item.get("question", True)))
    return fusion.scores(item["x"], item["kinds"], *general, question=item.get("question", True))


def quality(items: list[dict], scores: list[np.ndarray]) -> tuple[float, float, float]:
    """(R@10 over gold items, MRR@10 of the first gold component, the share of questions whose
    first component is gold: a docs site's Hit@1)."""
    recall = mrr = hit = 0.0
    for item, s in zip(items, scores, strict=True):
        top = np.lexsort((item["rows"], -s))[:10]
        labels = item["labels"][top]
        recall += labels.any(axis=0).mean() if labels.shape[1] else 0.0
        first = np.flatnonzero(labels.any(axis=1))
        mrr += 1.0 / (first[0] + 1) if len(first) else 0.0
        hit += float(len(first) > 0 and first[0] == 0)
    return recall / len(items), mrr / len(items), hit / len(items)


def fit(sets: dict[str, list[dict]], c: float, kinds: tuple[str, ...] = fusion.KINDS,
        drop: frozenset[str] = frozenset(), loss: str = "listwise",
        weigh: dict[str, float] | None = None) -> tuple[np.ndarray, dict[str, float], float]:
    """(feature weights, kind priors, intercept) on the original feature scale; a feature in
    ``drop`` is left out of the fit (weight 0). Each kind of question weighs the same in total
    (the docs sites share theirs), times its ``weigh`` (default ``KIND_WEIGHT``). ``loss``:
    ``listwise`` fits the direction of the weights to the ranking (``listwise_direction``), then
    their scale and the intercept to the labels (``calibrated``), so that a score is still the
    probability that a candidate is evidence; ``pointwise`` fits one logistic regression over
    every candidate, the fit before 2026-11-27."""
    from sklearn.linear_model import LogisticRegression

    weigh = KIND_WEIGHT if weigh is None else weigh
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {', '.join(LOSSES)}; got {loss!r}")
    items = [(name, i) for name, its in sets.items() for i in its]
    xs = [design(i, kinds) for _, i in items]
    ys = [i["labels"] for _, i in items]
    kind = {name: "docs" if name in DOCS else name.removesuffix(HOP) for name in sets}  # docs sites share one kind
    share = {name: 1.0 / (len(set(kind.values())) * list(kind.values()).count(kind[name])) for name in sets}
    total = len(items)
    per_question = np.array([total * share[name] * weigh.get(kind[name], 1.0) / len(sets[name]) for name, _ in items])
    keep = np.array([f not in drop for f in fusion.FEATURES] + [True] * len(kinds))
    x = np.vstack(xs)[:, keep]
    y = np.concatenate([labels.any(axis=1) for labels in ys])
    weight = np.concatenate([np.full(len(labels), w) for labels, w in zip(ys, per_question, strict=True)])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    standard = (x - mean) / scale
    if loss == "pointwise":
        model = LogisticRegression(C=c, max_iter=5000).fit(standard, y, sample_weight=weight)
        direction, slope, offset = model.coef_[0], 1.0, float(model.intercept_[0])
    else:
        bounds = np.cumsum([0] + [len(labels) for labels in ys])
        direction = listwise_direction([standard[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)], ys,
                                       per_question, c)
        slope, offset = calibrated(standard @ direction, y, weight)
    coef = np.zeros(len(keep))
    coef[keep] = slope * direction / scale
    intercept = float(offset - coef[keep] @ mean)
    n = len(fusion.FEATURES)
    return coef[:n], dict(zip(kinds, coef[n:].tolist(), strict=True)), intercept


def listwise_direction(xs: list[np.ndarray], labels: list[np.ndarray], weights: np.ndarray,
                       c: float) -> np.ndarray:
    """Linear weights over each question's candidates ``xs`` (standardized features), fitted to
    the ranking: for every gold item of every question (a column of its ``labels``) the loss is
    -log of the softmax mass its candidates get among the question's candidates, the question's
    gold items sharing its ``weights``; ``c`` times their sum plus half the squared weights (the
    L2 of scikit-learn's ``LogisticRegression(C=c)``). A question none of whose gold any ranking
    found teaches nothing and is left out. Pointwise logistic regression
    over every candidate (``loss="pointwise"``) spends its fit on telling evidence from the
    thousands of candidates no ranking puts near the top; this fits what ``retrieve`` returns, the
    order of one question's candidates. Held out (int8 indexes of 2026-11-26, ``KIND_WEIGHT``):
    wtq-dev R@10 0.850 -> 0.857, the docs sites' MRR@10 0.786 -> 0.825 (Django) and 0.761 -> 0.791
    (PostgreSQL), hybridqa-dev's local hop R@10 0.942 either way."""
    from scipy.optimize import minimize

    objective = listwise_objective(xs, labels, weights, c)
    return minimize(objective, np.zeros(xs[0].shape[1]), jac=True, method="L-BFGS-B").x


def listwise_objective(xs: list[np.ndarray], labels: list[np.ndarray], weights: np.ndarray,
                       c: float) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """``listwise_direction``'s loss of weights ``beta``, and its gradient."""
    used = [(x, y[:, y.any(axis=0)], w) for x, y, w in zip(xs, labels, weights, strict=True) if y.any()]

    def objective(beta: np.ndarray) -> tuple[float, np.ndarray]:
        total, gradient = 0.5 * float(beta @ beta), beta.copy()
        for x, y, w in used:
            z = x @ beta
            p = np.exp(z - z.max())
            p /= p.sum()
            mass = np.maximum(p @ y, 1e-300)  # per gold item
            total -= c * w / y.shape[1] * float(np.log(mass).sum())
            on_gold = (y * p[:, None]) / mass  # the softmax within each gold item's candidates
            gradient += c * w / y.shape[1] * (x.T @ (y.shape[1] * p - on_gold.sum(axis=1)))
        return total, gradient

    return objective


def calibrated(z: np.ndarray, y: np.ndarray, weight: np.ndarray) -> tuple[float, float]:
    """(slope, offset) making the logistic of ``slope * z + offset`` the probability of ``y``
    (Platt scaling, weighted); the slope must come out positive, or the ranking fitted is not
    one the labels agree with."""
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=1e6, max_iter=5000).fit(z[:, None], y, sample_weight=weight)
    slope = float(model.coef_[0, 0])
    if slope <= 0:
        raise SystemExit(f"the listwise fit ranks evidence lower (calibration slope {slope:.3g}): check the labels")
    return slope, float(model.intercept_[0])


def page_folds(items: list[dict], rng: np.random.Generator) -> list[np.ndarray]:
    """``FOLDS`` folds of question positions, every question about one page in the same fold, so a
    held-out question's page was never seen in training."""
    pages = sorted({item.get("page", str(i)) for i, item in enumerate(items)})
    fold_of = dict(zip([pages[i] for i in rng.permutation(len(pages))], np.arange(len(pages)) % FOLDS, strict=True))
    return [np.array([i for i, item in enumerate(items) if fold_of[item.get("page", str(i))] == f], dtype=np.int64)
            for f in range(FOLDS)]


def held_out(sets: dict[str, list[dict]], c: float, kinds: tuple[str, ...] = fusion.KINDS,
             drop: frozenset[str] = frozenset(), loss: str = "listwise",
             gate_drop: frozenset[str] = frozenset()) -> dict[str, tuple[float, float, float]]:
    """Per set, (R@10, MRR@10) of refits on questions they never saw: wtq-dev and hybridqa-dev by
    ``FOLDS`` folds of whole pages (every other set fully in training), a docs site by leaving
    the whole site out when another docs site is there to learn the kind from, else by folds of
    its questions."""
    whole = [name for name in sets if name in DOCS] if sum(name in DOCS for name in sets) > 1 else []
    # one seed per set, so that a set and its local hop (the same questions, the same pages) share folds
    folds = {name: page_folds(items, np.random.default_rng(0)) for name, items in sets.items() if name not in whole}
    held: dict[str, tuple[list[dict], list[np.ndarray]]] = {name: ([], []) for name in sets}
    for f in range(FOLDS):
        train = {name: [items[i] for i in range(len(items)) if i not in set(folds[name][f].tolist())]
                 if name in folds else items for name, items in sets.items()}
        models = fit_models(train, c, kinds, drop, loss, gate_drop)
        for name in folds:
            for i in folds[name][f].tolist():
                held[name][0].append(sets[name][i])
                held[name][1].append(served_by(sets[name][i], *models))
    for name in whole:
        models = fit_models({n: items for n, items in sets.items() if n != name}, c, kinds, drop, loss, gate_drop)
        held[name] = (sets[name], [served_by(i, *models) for i in sets[name]])
    return {name: quality(*held[name]) for name in sets}


def cross_validate(sets: dict[str, list[dict]], c: float, kinds: tuple[str, ...] = fusion.KINDS,
                   loss: str = "listwise") -> dict[str, dict[str, tuple[float, float, float]]]:
    refit = held_out(sets, c, kinds, loss=loss)
    out = {}
    for name, items in sets.items():
        out[name] = {
            "reciprocal rank fusion": quality(items, [i["rrf"] for i in items]),
            f"fusion.py now ({fusion.WEIGHTS_VERSION})": quality(items, [served(i) for i in items]),
            "refit, held out" + (" (site)" if name in DOCS and sum(n in DOCS for n in sets) > 1
                                 else f" ({FOLDS} folds)"): refit[name],
        }
    return out


def ablation(sets: dict[str, list[dict]], c: float, kinds: tuple[str, ...],
             loss: str = "listwise") -> dict[str, dict[str, tuple[float, float, float]]]:
    """Held-out quality per set of the full refit, without each feature, and without the kind priors."""
    rows = {"all features": held_out(sets, c, kinds, loss=loss)}
    for feature in [f for f in fusion.FEATURES if f in fusion.GENERAL_FEATURES or f in fusion.HOWTO_FEATURES]:
        rows[f"- {feature}"] = held_out(sets, c, kinds, frozenset({feature}), loss)
    page = frozenset(fusion.FEATURES[fusion.FEATURES.index("log_chars"):])
    rows["- every feature read from its page (how-to)"] = held_out(sets, c, kinds, page, loss)
    if kinds:
        rows["- kind priors"] = held_out(sets, c, (), loss=loss)
    for feature in fusion.GATE_FEATURES:
        rows[f"- gate: {feature}"] = held_out(sets, c, kinds, loss=loss, gate_drop=frozenset({feature}))
    return rows


def write_weights(general: Model | None, howto: Model | None, version: str, gate: Gate | None = None) -> None:
    """Put the fitted models into laminae/fusion.py (any may be None: left as it is)."""
    path = ROOT / "laminae" / "fusion.py"
    text = path.read_text()
    if gate is not None:
        block = (f'GATE_VERSION = "{version}"\n'
                 f"GATE_WEIGHTS = np.array([{', '.join(f'{w:.6g}' for w in gate[0])}])\n"
                 f"GATE_INTERCEPT = {gate[1]:.6g}\n")
        text, count = re.subn(r'GATE_VERSION = .*?\nGATE_INTERCEPT = [^\n]*\n', lambda _: block, text, flags=re.S)
        if count != 1:
            raise SystemExit(f"could not find the gate block in {path}")
    if general is not None:
        weights, prior, intercept = general
        block = (f'WEIGHTS_VERSION = "{version}"\n'
                 f"WEIGHTS = np.array([{', '.join(f'{w:.6g}' for w in weights)}])\n"
                 f"KIND_PRIOR: dict[str, float] = {{{', '.join(f'{k!r}: {v:.6g}' for k, v in prior.items())}}}\n"
                 f"INTERCEPT = {intercept:.6g}\n")
        text, count = re.subn(r'WEIGHTS_VERSION = .*?\nINTERCEPT = [^\n]*\n', lambda _: block, text, flags=re.S)
        if count != 1:
            raise SystemExit(f"could not find the weights block in {path}")
    if howto is not None:
        weights, _, intercept = howto
        block = (f'HOWTO_WEIGHTS_VERSION = "{version}"\n'
                 f"HOWTO_WEIGHTS = np.array([{', '.join(f'{w:.6g}' for w in weights)}])\n"
                 f"HOWTO_INTERCEPT = {intercept:.6g}\n")
        text, count = re.subn(r'HOWTO_WEIGHTS_VERSION = .*?\nHOWTO_INTERCEPT = [^\n]*\n', lambda _: block, text,
                              flags=re.S)
        if count != 1:
            raise SystemExit(f"could not find the how-to weights block in {path}")
    path.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", action="append", default=[], metavar="SET=DIR",
                        help="the index built for SET (default: build one, as bench/quality.py does)")
    parser.add_argument("--sets", default=",".join([*SETS, *DOCS]), help="comma list of: " + ", ".join([*SETS, *DOCS]))
    parser.add_argument("--c", type=float, help="inverse L2 strength of the fit (default: 0.3 listwise, 0.1 pointwise)")
    parser.add_argument("--loss", choices=LOSSES, default="listwise",
                        help="listwise: fit each question's ranking, then calibrate (the default); pointwise: one "
                        "logistic regression over every candidate")
    parser.add_argument("--kinds", default=",".join(fusion.KINDS),
                        help="component kinds given a learned prior (comma list; empty: none)")
    parser.add_argument("--ablate", action="store_true", help="refit without each feature and print the held-out cost")
    parser.add_argument("--write", metavar="VERSION",
                        help="write the refitted how-to weights and gate into laminae/fusion.py")
    parser.add_argument("--write-general", action="store_true",
                        help="with --write: the general weights too (fitted on the questions that are not how-to)")
    parser.add_argument("--gathered", metavar="FILE", help="keep the gathered evidence in FILE and read it from "
                        "there next time (refits without asking the indexes again; delete FILE after changing them)")
    args = parser.parse_args()
    args.c = DEFAULT_C[args.loss] if args.c is None else args.c
    given = dict(item.split("=", 1) for item in args.index)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if set(kinds) != set(fusion.KINDS) and args.write:
        parser.error(f"--write keeps fusion.KINDS ({', '.join(fusion.KINDS) or 'none'}): edit KINDS first")
    sets = {}
    if args.gathered and Path(args.gathered).exists():
        with open(args.gathered, "rb") as fh:
            sets = pickle.load(fh)
    for name in [n for n in args.sets.split(",") if n and n not in sets]:
        if name in DOCS:
            if name not in given:
                parser.error(f"{name} needs --index {name}=DIR: build it with laminae build --seeds {DOCS[name][1]}"
                             f" (../shared/bench/{DOCS[name][2]}/README.md)")
            sets[name] = gather_docs(name, Path(given[name]))
        elif name in SETS:
            if not (SHARED / name / "questions.jsonl").exists():
                parser.error(f"{SHARED / name} is missing: the development sets live in ../shared/bench")
            index_dir = Path(given[name]) if name in given else None
            if index_dir is None:
                index_dir = Path(tempfile.mkdtemp(prefix="laminae-fit-")) / f"index-{name}"
                build_index(SHARED / name, index_dir, SETS[name])
            sets[name] = gather(name, index_dir)
            if SETS[name]:  # a multi-hop set: its local hop too
                sets[name + HOP] = gather(name, index_dir, hop=True)
        else:
            parser.error(f"unknown set {name!r}; sets are {', '.join([*SETS, *DOCS])}")
        print(f"{name}: {len(sets[name])} questions, {sum(len(i['rows']) for i in sets[name])} candidates",
              flush=True)
    if args.gathered:
        with open(args.gathered, "wb") as fh:
            pickle.dump(sets, fh)
    sets = {name: items for name, items in sets.items() if name.removesuffix(HOP) in args.sets.split(",")}
    for name, rows in cross_validate(sets, args.c, kinds, args.loss).items():
        print(f"\n{name:<36}R@10   MRR@10 Hit@1")
        for label, (recall, mrr, hit) in rows.items():
            print(f"  {label:<34}{recall:.3f}  {mrr:.3f}  {hit:.3f}")
    if args.ablate:
        print(f"\nablation, held out (R@10 / MRR@10 per set){'':<4}" + "".join(f"{n:>20}" for n in sets))
        for label, per in ablation(sets, args.c, kinds, args.loss).items():
            print(f"  {label:<42}" + "".join(f"{per[n][0]:>12.3f} / {per[n][1]:.3f}" for n in sets), flush=True)
    general, howto, gate = fit_models(sets, args.c, kinds, loss=args.loss)
    if gate is not None:
        print("\ngate, fitted on every question (the how-to model serves a question when its score is >= 0):")
        for feature, w in zip(fusion.GATE_FEATURES, gate[0].tolist(), strict=True):
            print(f"  {feature:<28}{w:+.4f}")
        print(f"  intercept{'':<19}{gate[1]:+.4f}")
        for name, items in sets.items():
            print(f"  {name:<28}{sum(routed_howto(i, gate) for i in items)} of {len(items)} to the how-to model")
    for label, model in (("general model (questions that are not how-to)", general), ("how-to model", howto)):
        if model is None:
            continue
        print(f"\n{label}, fitted on all its questions:")
        for feature, w in zip(fusion.FEATURES, model[0].tolist(), strict=True):
            print(f"  {feature:<28}{w:+.4f}")
        for kind, w in model[1].items():
            print(f"  prior {kind:<22}{w:+.4f}")
        print(f"  intercept{'':<19}{model[2]:+.4f}")
    if args.write:
        write_weights(general if args.write_general else None, howto, args.write, gate)
        print(f"written into laminae/fusion.py as version {args.write}"
              + ("" if args.write_general else " (the how-to model and the gate; the general one kept)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
