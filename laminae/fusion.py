"""Learned score fusion: the ranking ``retrieve`` (and the hybrid component hops at granularity 2) return.

Reads the evidence ``laminae.retrieval.fusion_evidence`` gathers for one text question over a set of
candidate components (dense similarities per kind, BM25 over their subcomponents, term coverage,
each component's own vector) and writes nothing: ``features`` turns that evidence into one row of
numbers per candidate and ``scores`` weighs them with a linear model. Reciprocal rank fusion keeps
only ranks, so a component far ahead in one list and one barely ahead count the same; the linear
model also sees the scores' margins (a similarity against the best of its kind, a BM25 score
against the best, the share of the question's vocabulary covered) and a prior per component kind.

The weights are fitted by ``bench/fusion_fit.py`` to each question's ranking of its candidates
(a softmax over them per gold item), over both development sets: table questions, and multi-hop
passage questions as ``retrieve`` and the local hop rank them, weighed so that neither kind of
evidence is sacrificed to the other; then scaled so that a score is the probability that a
candidate is evidence (Platt). ``WEIGHTS_VERSION`` names the fit. The kind priors apply to questions only
(``is_question``): the fit saw only questions, and a keyword query says nothing about wanting a table.
Documentation sites' how-to and concept questions are scored by weights of their own, fitted on
the questions of four documentation sites (each held out in turn: the fit never saw the site it
is judged on), over the same evidence plus facts about the component's page: how much of what the
question found is on that page, how close the page's own vector (its title and summary) is to the
question, and the whole page's BM25 (``laminae.ranking.page_bm25``). Which weights serve a
question is decided by a gate (``howto_probability``), a logistic model over the question's shape
(its terms, a final "?", an asker speaking of themselves, numbers) and what its first rankings
found (which kinds, how many pages, how close the best component and the best page are), fitted
held out by site as well; no list of question phrasings decides it. ``component_signals`` (a
page's function words, table and code shares) are computed for the fit to weigh, but neither
model uses them now (``GENERAL_FEATURES``, ``HOWTO_FEATURES``).
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

QUESTION = re.compile(r"\?\s*$|\b(?:who|whom|whose|what|when|where|which|why|how)\b|"
                      r"^\s*(?:is|are|was|were|do|does|did|can|could|has|have|had|name|list|give|tell|find|identify)\b",
                      re.IGNORECASE)
RANK_K = 60  # 1 / (RANK_K + rank), as in reciprocal rank fusion
ABSENT_RANK = 1000  # the rank a candidate missing from a list is given

FEATURES = (
    "similarity",  # best similarity of the component's subcomponents (its own vector when it has none)
    "similarity_below_kind_best",  # similarity minus the best similarity among candidates of its kind
    "similarity_below_best",  # similarity minus the best similarity among all candidates
    "dense_rank",  # 1 / (RANK_K + rank) in its kind's dense ranking
    "bm25",  # best BM25 of its subcomponents + half the second, over the best component's
    "bm25_rank",  # 1 / (RANK_K + rank) in the BM25 ranking
    "coverage",  # idf of the question's terms it holds, over the idf of all terms found anywhere
    "coverage_rank",  # 1 / (RANK_K + rank) in the coverage ranking
    "own_similarity",  # similarity of the component's own vector
    # what the component and its page are, read from the page itself (``component_signals``)
    "log_chars",  # ln(1 + characters of the component's text)
    "page_prose",  # share of the page's words that are function words ("the", "of", "is"...)
    "prose",  # the same share in the component's own text
    "page_in_tables",  # share of its page's characters in tables (a generated index: all of them)
    "page_in_code",  # share of its page's characters in code blocks (a generated source listing: all of them)
    "table_procedural",  # a table, for a question the gate sends to the how-to weights
    # how much of what the question found is on the component's page
    "page_candidates",  # ln(1 + candidates on its page)
    "page_evidence",  # its page's summed 1 / (RANK_K + rank) over every ranking, over the best page's
    # how close the component's page (its title and summary, the layer-0 vector) is to the question
    "page_similarity",
    "page_similarity_below_best",  # minus the best among the candidates' pages
    # the whole page's BM25 for the question (laminae.ranking.page_bm25)
    "page_bm25",  # over the best page's
    "page_bm25_rank",  # 1 / (RANK_K + rank) of its page in the page BM25 ranking
)
SIGNALS = FEATURES[9:14]  # the columns of component_signals
# The features each model reads (the others weigh 0). Held out by site (bench/fusion_fit.py
# --ablate, the other site's questions only in training), the how-to model gained most from where
# the question's evidence gathers (page_evidence: Django 0.620 -> 0.791 MRR@10, PostgreSQL 0.692 ->
# 0.784) and how close the page's title and summary are to the question (then 0.813 and 0.816);
# the page's and the component's own signals (function words, table and code shares, size) and
# the table-for-a-how-to-question column each moved the two sites in opposite directions and
# together cost PostgreSQL 0.03, so they are measured but not used. With four sites, each held out
# in turn (2026-11-27): the whole page's BM25 added 0.02 on Maxima and FLTK and cost Django 0.017;
# the signals cost every site 0.01-0.04 (mean MRR@10 0.727 -> 0.701). Fitted at the page level
# (2026-11-28: every component of an answering page is evidence), the page's rank in the page
# BM25 ranking beside its score cost PostgreSQL 0.013 and Maxima 0.018 and moved no other site
# by more than 0.001, so it is measured but not used.
GENERAL_FEATURES = FEATURES[:9]
HOWTO_FEATURES = (*FEATURES[:9], "page_evidence", "page_similarity", "page_similarity_below_best", "page_bm25")
FUNCTION_WORDS = (r"\b(?:the|a|an|of|to|in|is|are|be|been|that|this|it|its|for|with|as|on|by|or|and|if|"
                  r"you|your|can|will|not|which|from|at|when|into|than|then|there|these|so|we|has|have|was|"
                  r"were|but|do|does|should|must|may|each|any|all|how|what)\b")
# What decides which model scores a question (``howto_probability``): facts about the question
# and about what its first rankings found, one value per question. Fitted by bench/fusion_fit.py
# on which set a question comes from (a documentation site's how-to and concept questions against
# table and multi-hop questions over Wikipedia pages), held out by site.
GATE_FEATURES = (
    "code_found",  # share of code blocks among the 10 candidates reciprocal rank fusion puts first
    "best_similarity",  # the best candidate's dense similarity
    "best_page_similarity",  # the best similarity of a candidate's page (title and summary) to the question
    "question_terms",  # ln(1 + the question's distinct terms)
    "question_mark",  # 1 when the question ends with "?"
    "first_person",  # 1 when the asker speaks of themselves (I, my, we...): a user's question about their work
    "digits",  # share of the question's words holding a digit (a year, a count, a round)
)
GATE_TOP = 10
FIRST_PERSON = frozenset({"i", "i'm", "me", "my", "mine", "myself", "we", "us", "our"})
# Kinds with a learned prior; any other kind gets none. Only tables: a question's words spread over
# a table's caption, header and one row, so each of its parts sits further from the question than
# a sentence that states the same fact; priors for paragraphs and images as well added nothing on
# held-out pages and pushed pictures down with no picture questions to fit them on.
KINDS: tuple[str, ...] = ("table",)

# Fitted by bench/fusion_fit.py (see its output for the cross-validated quality of this fit).
WEIGHTS_VERSION = "2026-11-27-listwise"
WEIGHTS = np.array([0.18208, 1.07218, 0.137313, 183.309, -0.510026, 140.915, 2.18908, 156.7, 3.18796, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
KIND_PRIOR: dict[str, float] = {'table': 2.08566}
INTERCEPT = -11.7868

# The documentation sites' questions (those the gate sends here) get weights of their own, fitted
# by bench/fusion_fit.py on the questions of the four docs sites (no kind prior): the general
# weights were fitted on table and multi-hop questions, and one model over every kind, held out
# by site, cost Django 0.09 MRR@10, Maxima 0.17 and hybridqa-dev 0.02 (bench/fusion_fit.py,
# 2026-11-27). Fitted at the page level (every component of an answering page is evidence, so a
# page's probability is the sum of its components'; bench/fusion_fit.py) and written with
# --c 0.1: held out by site, the mean MRR@10 over the four sites is 0.792 with 0.1 against 0.756
# (0.03), 0.771 (0.05), 0.778 (0.2), 0.764 (0.3) and 0.746 (1.0).
HOWTO_WEIGHTS_VERSION = "2026-11-28-pages"
HOWTO_WEIGHTS = np.array([2.23984, 1.06756, 2.08648, 61.2812, -0.15943, 3.24452, 1.00305, 54.2226, 2.6926, 0, 0, 0, 0, 0, 0, 0, 0.691247, 2.23313, 2.38846, 2.50962, 0])
HOWTO_INTERCEPT = -5.83025

# The gate (howto_probability): a logistic regression over GATE_FEATURES telling a documentation
# site's question from a table or multi-hop question over Wikipedia pages, fitted by
# bench/fusion_fit.py with each kind weighing the same; fitted on every question it sends 27 of 27 Django,
# 21 of 25 PostgreSQL, 23 of 25 Maxima and 22 of 25 FLTK questions to the how-to weights (the
# phrase list it replaces: 24, 22, 21 and 17), 7 of 293 wtq-dev and none of hybridqa-dev. The
# share of tables and the distinct pages among the first candidates were features too: held out
# by site (bench/fusion_fit.py --ablate) the pages counted for nothing anywhere and the tables cost
# FLTK, whose Doxygen class pages are member tables, MRR@10 0.658 -> 0.631 and Hit@1 0.64 -> 0.60,
# while every other set scored the same without them.
GATE_VERSION = "2026-11-27-gate7"
GATE_WEIGHTS = np.array([27.0634, 11.1013, -7.88296, 1.74146, -1.93897, 6.41032, -12.2662])
GATE_INTERCEPT = -8.51732


@dataclass
class Evidence:
    """What one question found for candidate components (arrays aligned with ``rows``)."""

    rows: np.ndarray  # candidate component rows
    kinds: np.ndarray  # their kinds
    similarity: np.ndarray  # dense: best subcomponent similarity
    own_similarity: np.ndarray  # dense: the component's own vector
    dense_rank: np.ndarray  # rank in its kind's dense list (from 1), ABSENT_RANK if not there
    bm25: np.ndarray  # component BM25 (0 when no subcomponent matched)
    bm25_rank: np.ndarray
    coverage: np.ndarray  # summed idf of the question's terms the component holds
    coverage_rank: np.ndarray
    coverage_total: float  # summed idf of the question's terms found in any component
    signals: np.ndarray  # component_signals of the candidates, one row each
    docs: np.ndarray  # the candidates' document rows
    procedural: bool  # served by the how-to weights (howto_probability >= 0.5)
    page_similarity: np.ndarray | None = None  # the question against each candidate's document vector
    page_bm25: np.ndarray | None = None  # its page's whole-page BM25, over the best page's
    page_bm25_rank: np.ndarray | None = None  # its page's rank in the page BM25 ranking, ABSENT_RANK if not there
    shape: np.ndarray | None = None  # question_shape(the question)


def features(ev: Evidence) -> np.ndarray:
    """One row of ``FEATURES`` per candidate."""
    if ev.signals.shape != (len(ev.rows), len(SIGNALS)):
        raise ValueError(f"Evidence.signals must hold {len(SIGNALS)} columns per candidate (component_signals of "
                         f"its rows); got shape {ev.signals.shape} for {len(ev.rows)} candidates")
    n = len(ev.rows)
    if n == 0:
        return np.zeros((0, len(FEATURES)))
    kind_best = np.empty(n)
    for kind in set(ev.kinds.tolist()):
        mask = ev.kinds == kind
        kind_best[mask] = ev.similarity[mask].max()
    best_bm25 = ev.bm25.max()
    evidence = (1.0 / (RANK_K + ev.dense_rank) + 1.0 / (RANK_K + ev.bm25_rank)
                + 1.0 / (RANK_K + ev.coverage_rank))
    _, page, count = np.unique(ev.docs, return_inverse=True, return_counts=True)
    page_evidence = np.bincount(page, weights=evidence)
    page_similarity = np.zeros(n) if ev.page_similarity is None else np.asarray(ev.page_similarity, np.float64)
    return np.column_stack([
        ev.similarity,
        ev.similarity - kind_best,
        ev.similarity - ev.similarity.max(),
        1.0 / (RANK_K + ev.dense_rank),
        ev.bm25 / best_bm25 if best_bm25 > 0 else np.zeros(n),
        1.0 / (RANK_K + ev.bm25_rank),
        ev.coverage / ev.coverage_total if ev.coverage_total > 0 else np.zeros(n),
        1.0 / (RANK_K + ev.coverage_rank),
        ev.own_similarity,
        ev.signals,
        (ev.kinds == "table") * float(ev.procedural),
        np.log1p(count[page]),
        page_evidence[page] / page_evidence.max(),
        page_similarity,
        page_similarity - page_similarity.max(),
        np.zeros(n) if ev.page_bm25 is None else ev.page_bm25,
        1.0 / (RANK_K + (np.full(n, float(ABSENT_RANK)) if ev.page_bm25_rank is None else ev.page_bm25_rank)),
    ]).astype(np.float64)


def is_question(text: str) -> bool:
    """A question or request (a question word, a leading auxiliary verb or request verb such as
    "name" or "list", or a final question mark) rather than a keyword query: the weights were
    fitted on questions, so only questions get the kind priors."""
    return bool(QUESTION.search(text))


def kind_prior(kinds: Sequence[str] | np.ndarray, prior: dict[str, float] | None = None) -> np.ndarray:
    prior = KIND_PRIOR if prior is None else prior
    return np.array([prior.get(k, 0.0) for k in np.asarray(kinds).tolist()], dtype=np.float64)


def scores(x: np.ndarray, kinds: Sequence[str] | np.ndarray, weights: np.ndarray | None = None,
           prior: dict[str, float] | None = None, intercept: float | None = None,
           question: bool = True, procedural: bool = False) -> np.ndarray:
    """Probability of being evidence, per candidate: the logistic of the weighted features plus
    the kind's prior (for a ``question`` only; see ``is_question``). A ``procedural`` question
    (``howto_probability`` >= 0.5) is scored with the how-to weights and no kind prior, unless ``weights``
    are given."""
    if procedural and weights is None:
        weights, prior, intercept = HOWTO_WEIGHTS, {}, HOWTO_INTERCEPT
    w = WEIGHTS if weights is None else weights
    b = INTERCEPT if intercept is None else intercept
    z = x @ w + b
    if question:
        z = z + kind_prior(kinds, prior)
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic, without overflow


def one_per_page(rows: np.ndarray, docs: np.ndarray, probability: np.ndarray) -> np.ndarray:
    """Scores that rank each page's best candidate (by ``probability``, ties by row) before any
    page's second: a how-to question is answered by a page, so ten results should be ten pages
    while there are ten. The best of each page keep their probability; the others are scaled
    by one factor below the lowest of those (below 0 when that is 0), so their order among
    themselves is kept and their score is no longer a probability. A candidate outside any
    document (``docs`` -1) is a page of its own. Held out by site, it raised MRR@10 on all four
    documentation sites (Django 0.836 -> 0.858, PostgreSQL 0.777 -> 0.795, Maxima 0.664 -> 0.704,
    FLTK 0.658 -> 0.673); applied to table and multi-hop questions it would cost them (wtq-dev
    0.629 -> 0.572), so the reader applies it to how-to questions only."""
    out = np.asarray(probability, dtype=np.float64).copy()
    if len(out) == 0:
        return out
    docs = np.asarray(docs, dtype=np.int64)
    docs = np.where(docs >= 0, docs, -1 - np.arange(len(docs)))
    order = np.lexsort((rows, -out))
    _, first = np.unique(docs[order], return_index=True)
    best = np.zeros(len(out), dtype=bool)
    best[order[first]] = True
    if best.all():
        return out
    floor, top_rest = out[best].min(), out[~best].max()
    if top_rest >= floor > 0:
        out[~best] *= floor / top_rest * (1.0 - 1e-6)
    elif top_rest >= floor:  # the lowest best underflowed to 0: the others go below 0, in their order
        out[~best] = (out[~best] / top_rest if top_rest > 0 else 0.0) - 1.0 - 1e-6
    return out


def ranks(rankings: Sequence[np.ndarray], rows: np.ndarray) -> np.ndarray:
    """Rank (from 1) of each of ``rows`` in the one of ``rankings`` (each best first, none sharing
    a row, as the per-kind dense rankings) that holds it; ABSENT_RANK where none does."""
    where: dict[int, int] = {}
    for ranking in rankings:
        where.update((int(r), i + 1) for i, r in enumerate(np.asarray(ranking).tolist()))
    return np.array([where.get(int(r), ABSENT_RANK) for r in rows.tolist()], dtype=np.float64)


def reads_signals(procedural: bool) -> bool:
    """Whether the weights a question is scored with read any of ``component_signals`` (when not,
    the reader skips counting the candidates' pages)."""
    weights = HOWTO_WEIGHTS if procedural else WEIGHTS
    start = FEATURES.index(SIGNALS[0])
    return bool(np.any(weights[start:start + len(SIGNALS)] != 0))


def question_shape(text: str, terms: int) -> np.ndarray:
    """The last four ``GATE_FEATURES``, read from the question's words (``terms``: its distinct
    terms, ``laminae.query.query_terms``)."""
    words = text.lower().replace("?", " ").split()
    words = [w.strip(".,;:!()[]\"'") for w in words]
    return np.array([np.log1p(terms), float(text.rstrip().endswith("?")),
                     float(any(w in FIRST_PERSON for w in words)),
                     sum(any(c.isdigit() for c in w) for w in words) / max(len(words), 1)])


def question_features(ev: Evidence) -> np.ndarray:
    """``GATE_FEATURES`` of the question whose evidence ``ev`` is: one row."""
    n = len(ev.rows)
    shape = np.zeros(4) if ev.shape is None else ev.shape
    if n == 0:
        return np.concatenate([np.zeros(3), shape])
    fused = (1.0 / (RANK_K + ev.dense_rank) + 1.0 / (RANK_K + ev.bm25_rank)
             + 1.0 / (RANK_K + ev.coverage_rank))
    top = np.lexsort((ev.rows, -fused))[:GATE_TOP]
    page_similarity = np.zeros(n) if ev.page_similarity is None else np.asarray(ev.page_similarity, np.float64)
    return np.concatenate([[float(np.mean(ev.kinds[top] == "code")), float(ev.similarity.max()),
                            float(page_similarity.max())], shape])


def howto_probability(ev: Evidence, weights: np.ndarray | None = None, intercept: float | None = None) -> float:
    """The probability that the question is one the how-to weights serve (a documentation site's
    how-to or concept question: its answer is a passage on the page about its subject), from
    ``question_features``: no list of question words decides it."""
    w = GATE_WEIGHTS if weights is None else weights
    b = GATE_INTERCEPT if intercept is None else intercept
    z = float(question_features(ev) @ w + b)
    return 0.5 * (1.0 + np.tanh(0.5 * z))


_PAGES: weakref.WeakKeyDictionary[Any, dict[int, np.ndarray]] = weakref.WeakKeyDictionary()
_PAGES_LOCK = threading.Lock()


def component_signals(graph: Any, rows: np.ndarray) -> np.ndarray:
    """``SIGNALS`` of component ``rows`` of ``graph`` (a ``laminae.graph.Graph``), one row each, from
    their text and their pages'. A generated index page (a general index, a module index) is a
    big table of names with few function words, a generated source listing is all code, while a
    page that answers a how-to question is mostly prose. (Links per word, of the component and
    of its page, were tried and added nothing held out: a general index links to few distinct
    pages per word, as it links to each page many times.) A page's totals
    are computed the first time one of its components is a candidate and kept with the graph,
    so that opening a large index costs nothing more."""
    comps = graph.layers[1]
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return np.zeros((0, len(SIGNALS)))
    chars, words, function = _counts(comps.text.take(pa.array(rows)))
    doc = np.asarray(comps.doc, dtype=np.int64)[rows]
    page = np.zeros((len(rows), 5))  # words, function words, characters, in tables, in code
    inside = doc >= 0
    if inside.any():
        totals = _page_totals(graph, np.unique(doc[inside]))
        page[inside] = np.array([totals[d] for d in doc[inside].tolist()])
    page_words, page_chars = np.maximum(page[:, 0], 1.0), np.maximum(page[:, 2], 1.0)
    return np.column_stack([
        np.log1p(chars),
        page[:, 1] / page_words,
        function / np.maximum(words, 1.0),
        page[:, 3] / page_chars,
        page[:, 4] / page_chars,
    ])


def _counts(text: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(characters, words, function words) of each string (0 for a null)."""
    def numbers(values: pa.Array) -> np.ndarray:
        return pc.fill_null(values, 0).to_numpy(zero_copy_only=False).astype(np.float64)

    return (numbers(pc.utf8_length(text)), numbers(pc.count_substring_regex(text, pattern=r"\w+")),
            numbers(pc.count_substring_regex(pc.utf8_lower(text), pattern=FUNCTION_WORDS)))


def _page_totals(graph: Any, docs: np.ndarray) -> dict[int, np.ndarray]:
    """Per document row: (words, function words, characters, characters in tables, in code) of
    all its components, from the graph's cache or counted now."""
    with _PAGES_LOCK:
        cache = _PAGES.setdefault(graph, {})
        missing = [d for d in docs.tolist() if d not in cache]
    if missing:
        comps = graph.layers[1]
        starts = np.asarray(comps.starts)
        spans = [np.arange(starts[d], starts[d + 1]) for d in missing]
        rows = np.concatenate(spans) if spans else np.zeros(0, np.int64)
        owner = np.repeat(np.arange(len(missing)), [len(span) for span in spans])
        chars, words, function = _counts(comps.text.take(pa.array(rows, pa.int64())))
        kinds = np.asarray(comps.kinds[rows], dtype=object)
        sums = np.column_stack([np.bincount(owner, weights=w, minlength=len(missing)) for w in (
            words, function, chars, chars * (kinds == "table"), chars * (kinds == "code"))])
        with _PAGES_LOCK:
            cache.update(zip(missing, sums, strict=True))
    with _PAGES_LOCK:
        return {d: cache[d] for d in docs.tolist()}
