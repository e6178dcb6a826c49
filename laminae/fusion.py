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
How-to questions (``is_procedural``: "how do I...", "how to...") are scored by weights of their own,
fitted on the how-to questions of documentation sites, over the same evidence plus two facts about
the component's page: how much of what the question found is on that page, and how close the
page's own vector (its title and summary) is to the question. ``component_signals`` (a page's
function words, table and code shares) are computed for the fit to weigh, but neither model
uses them now (``GENERAL_FEATURES``, ``HOWTO_FEATURES``).
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
    "table_procedural",  # a table, for a procedural question ("how do I...", "how to...")
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
# together cost PostgreSQL 0.03, so they are measured but not used.
GENERAL_FEATURES = FEATURES[:9]
HOWTO_FEATURES = (*FEATURES[:9], "page_evidence", "page_similarity", "page_similarity_below_best", "page_bm25",
                  "page_bm25_rank")
FUNCTION_WORDS = (r"\b(?:the|a|an|of|to|in|is|are|be|been|that|this|it|its|for|with|as|on|by|or|and|if|"
                  r"you|your|can|will|not|which|from|at|when|into|than|then|there|these|so|we|has|have|was|"
                  r"were|but|do|does|should|must|may|each|any|all|how|what)\b")
PROCEDURAL = re.compile(r"\bhow\s+(?:do|does|can|could|should|would|to|is|are)\b|^\s*(?:can|could|should)\s+i\b|"
                        r"\b(?:what|which)\s+(?:command|option|setting|function|method|parameter|class|module)\b",
                        re.IGNORECASE)
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

# How-to questions (is_procedural) get weights of their own, fitted by bench/fusion_fit.py on the
# how-to questions of the documentation sets (no kind prior): the general weights were fitted on
# table and multi-hop questions, and fitting one model on all three kinds cost the table questions
# 0.03 MRR@10 held out while the how-to questions still ranked generated index tables and source
# listings first.
HOWTO_WEIGHTS_VERSION = "2026-11-27-listwise"
HOWTO_WEIGHTS = np.array([3.27583, 0.411448, 3.00754, 139.733, 0.545276, 67.2642, 2.36506, 108.92, 0.2084, 0, 0, 0, 0, 0, 0, 0, 1.82823, 2.45768, 2.63732, 0, 0])
HOWTO_INTERCEPT = -10.9224


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
    procedural: bool  # is_procedural(the question)
    page_similarity: np.ndarray | None = None  # the question against each candidate's document vector
    page_bm25: np.ndarray | None = None  # its page's whole-page BM25, over the best page's
    page_bm25_rank: np.ndarray | None = None  # its page's rank in the page BM25 ranking, ABSENT_RANK if not there


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
    (``is_procedural``) is scored with the how-to weights and no kind prior, unless ``weights``
    are given."""
    if procedural and weights is None:
        weights, prior, intercept = HOWTO_WEIGHTS, {}, HOWTO_INTERCEPT
    w = WEIGHTS if weights is None else weights
    b = INTERCEPT if intercept is None else intercept
    z = x @ w + b
    if question:
        z = z + kind_prior(kinds, prior)
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic, without overflow


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


def is_procedural(text: str) -> bool:
    """A how-to question ("how do I...", "how to...", "can I...", "which option..."): its answer is
    usually a passage, whatever kind of component the collection is made of."""
    return bool(PROCEDURAL.search(text))


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
