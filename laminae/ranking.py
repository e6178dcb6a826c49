"""Ranking nodes for one query: dense similarity, full-text (BM25), both fused by reciprocal rank,
term coverage, and a component's best similarity over its subcomponents.

Reads the in-memory view (vectors, codes, parent pointers: ``laminae.graph``), the full-text
indexes (``laminae.fulltext``) and the query's vector (``laminae.query``), all through ``Sources``;
writes nothing. ``search`` is the ``search`` move for a chosen mode; ``laminae.retrieval`` and
``laminae.hops`` rank with the rest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from laminae.errors import ReaderArgumentError
from laminae.fulltext import FullText
from laminae.graph import Graph, group_max, similarities
from laminae.hits import Hit, top_hits
from laminae.query import QueryEncoder, query_terms
from laminae.vectors import rescored_rows, shortlist_groups, spans

LAYER_NAMES = ("documents", "components", "subcomponents")  # layers 0, 1 and 2 by name
MODES = ("auto", "dense", "fts", "hybrid")
RRF_K = 60
FUSION_DEPTH = 100  # candidates each ranked list contributes to a fusion
COVERAGE_DEPTH = 1000  # at least this many components are read per question term (a tenth of them when more)
PAGE_K1, PAGE_B = 1.2, 0.75  # page_bm25: BM25's usual saturation and length normalization

Rows = list[tuple[int, float]]  # (row, score), best first


@dataclass(frozen=True)
class Sources:
    """What a move reads: the in-memory view (``view()``, loaded on first use), the full-text
    indexes and the query model."""

    view: Callable[[], Graph]
    text: FullText
    query: QueryEncoder

    @property
    def graph(self) -> Graph:
        return self.view()


def layer_number(layer: int | str) -> int:
    """Layer 0, 1 or 2 of a layer given as a number or a name (``laminae.moves`` has checked it)."""
    return LAYER_NAMES.index(layer) if isinstance(layer, str) else int(layer)


def checked_mode(query, mode: str) -> str:
    """``mode`` (one of ``MODES``, as ``laminae.moves`` has checked) against the query: ``auto`` is
    ``dense`` for a vector, and a vector cannot be searched ``fts`` or ``hybrid``."""
    if mode == "auto" and not isinstance(query, str):
        return "dense"
    if mode in ("fts", "hybrid") and not isinstance(query, str):
        raise ReaderArgumentError(f"mode={mode} needs the query text, not a vector")
    return mode


def search(sources: Sources, query, layer: int, k: int, kinds: Sequence[str] | None,
           documents: Sequence[str] | None, mode: str) -> list[Hit]:
    """Top-``k`` nodes of one layer by dense similarity, BM25 or both fused by reciprocal rank
    (``hybrid``, also what ``auto`` means here); ``mode`` as ``checked_mode`` returns it."""
    if mode == "dense":
        found = rows(sources.graph, layer, kinds, documents)
        return top_hits(sources.graph, layer, found, dense(sources.graph, layer, found, sources.query.vector(query)), k)
    if not isinstance(query, str):
        raise ReaderArgumentError(f"mode={mode} needs the query text, not a vector")
    depth = max(k * 4, 50)
    matches = fts(sources, query, layer, depth, kinds, documents)
    if mode == "fts":
        found = np.array([r for r, _ in matches], dtype=np.int64)
        return top_hits(sources.graph, layer, found, np.array([s for _, s in matches], dtype=np.float32), k)
    found = rows(sources.graph, layer, kinds, documents)
    scores = dense(sources.graph, layer, found, sources.query.vector(query))
    by_dense = ranked(np.arange(len(scores)) if found is None else found, scores, depth)
    fused_rows, fused = rrf([by_dense, np.array([r for r, _ in matches], dtype=np.int64)])
    return top_hits(sources.graph, layer, fused_rows, fused, k)


def rows(graph: Graph, layer: int, kinds: Sequence[str] | None, documents: Sequence[str] | None) -> np.ndarray | None:
    """Rows of a layer passing the filters; None means every row (no copy of the vectors)."""
    lay = graph.layers[layer]
    if documents is None and kinds is None:
        return None
    if documents is not None:
        docs = np.array(sorted({graph.doc_position[d] for d in documents if d in graph.doc_position}), dtype=np.int64)
        found = lay.rows_of_documents(docs) if layer else docs
    else:
        found = np.arange(len(lay.ids))
    if kinds is not None:
        found = found[np.isin(lay.kinds[found], list(kinds))]
    return found


def dense(graph: Graph, layer: int, found: np.ndarray | None, q: np.ndarray) -> np.ndarray:
    """Similarity of ``q`` to rows ``found`` of a layer (every row when None; of a compact layer,
    exact for the codes' shortlist and -inf elsewhere)."""
    lay = graph.layers[layer]
    if found is None and lay.compact:
        return rescored_rows(lay.vectors, lay.codes, q, prefix=lay.first_words())
    return lay.vectors @ q if found is None else lay.vectors[found] @ q


def ranked(found: np.ndarray, scores: np.ndarray, depth: int) -> np.ndarray:
    """The ``depth`` best of ``found`` by ``scores`` (ties by row), best first; -inf never ranks."""
    keep = np.isfinite(scores)
    found, scores = found[keep], scores[keep]
    if len(found) > depth:
        top = np.argpartition(-scores, depth - 1)[:depth]
        found, scores = found[top], scores[top]
    return found[np.lexsort((found, -scores))]


def rrf(rankings: Sequence[np.ndarray], k: int = RRF_K) -> tuple[np.ndarray, np.ndarray]:
    """Reciprocal rank fusion: every row scores Σ 1 / (k + rank) over the rankings it appears in
    (rank from 1). Returns (rows, scores), best first, ties by row."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, row in enumerate(np.asarray(ranking).tolist(), start=1):
            fused[row] = fused.get(row, 0.0) + 1.0 / (k + rank)
    order = np.array(sorted(fused, key=lambda r: (-fused[r], r)), dtype=np.int64)
    return order, np.array([fused[r] for r in order.tolist()], dtype=np.float32)


# -- full text ---------------------------------------------------------------------------------
def fts(sources: Sources, text: str, layer: int, k: int, kinds: Sequence[str] | None,
        documents: Sequence[str] | None) -> Rows:
    """(row, BM25 score) of the ``k`` best matches of ``text`` in one layer, best first."""
    data = sources.text.search(text, layer, k, kinds, documents)
    return view_rows(sources.graph, layer, data)


def view_rows(graph: Graph, layer: int, data: pa.Table) -> Rows:
    """(row, score) of the ids and ``_score`` of a full-text answer, ids not in the view left out."""
    position = graph.layers[layer].position
    return [(position[i], float(s)) for i, s in zip(data.column("id").to_pylist(),
                                                      data.column("_score").to_pylist(), strict=True)
            if i in position]


def fts_components(sources: Sources, text: str, found: np.ndarray, documents) -> tuple[np.ndarray, np.ndarray]:
    """Component rows of ``found`` ranked by BM25 over their subcomponents (best match + half the
    second), and those scores."""
    subs = sources.graph.layers[2]
    matches = fts(sources, text, 2, FUSION_DEPTH * 2, None, documents)
    best: dict[int, list[float]] = {}
    for row, score in matches:
        parent = int(subs.parent[row])
        if parent >= 0:
            best.setdefault(parent, []).append(score)
    allowed = None
    if len(found) != len(sources.graph.layers[1].ids):
        allowed = np.zeros(len(sources.graph.layers[1].ids), dtype=bool)
        allowed[found] = True
    scored = {c: s[0] + 0.5 * (s[1] if len(s) > 1 else 0.0) for c, s in best.items()
              if allowed is None or allowed[c]}  # scores arrive best first
    order = sorted(scored, key=lambda c: (-scored[c], c))
    return np.array(order, dtype=np.int64), np.array([scored[c] for c in order], dtype=np.float64)


def coverage_lookups(sources: Sources, text: str) -> Callable[[], list[Rows]]:
    """Send term coverage's full-text lookups (``FullText.send_each``); the function returned
    waits for them."""
    graph = sources.graph
    depth = max(COVERAGE_DEPTH, len(graph.layers[1].ids) // 10)
    answers = sources.text.send_each(query_terms(text), 1, depth)
    return lambda: [view_rows(graph, 1, data) for data in answers()]


def term_coverage(sources: Sources, text: str, found: np.ndarray,
                  lookups: Callable[[], list[Rows]] | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """Component rows of ``found`` ranked by how much of the question's vocabulary they hold
    anywhere in their search text (title, section, caption and every sentence or row): the sum of
    the idf of the question's terms they contain, with no term frequency and no length
    normalization, so a table that names both entities of a question in different rows outranks
    a short passage that repeats one. The full-text index decides what a term is (stemming, stop
    words); a term in more than ``max(COVERAGE_DEPTH, components / 10)`` components counts for its
    best-matching ones only, with the idf of that many. The question's terms are ``query_terms``:
    at most ``MAX_QUERY_TERMS``, one full-text query each, sent at once (``coverage_lookups``, or
    ``lookups`` sent earlier). Returns (the ranking, the coverage of every component, the summed
    idf of the terms found in any component)."""
    comps = sources.graph.layers[1]
    n = len(comps.ids)
    score = np.zeros(n, np.float64)
    if n == 0:
        return np.zeros(0, np.int64), score, 0.0
    total = 0.0
    for matches in (lookups or coverage_lookups(sources, text))():
        if matches:
            idf = math.log((n + 1) / (len(matches) + 0.5))
            score[[r for r, _ in matches]] += idf
            total += idf
    candidates = found[score[found] > 0]
    return ranked(candidates, score[candidates], FUSION_DEPTH), score, total


def page_bm25(graph: Graph, matches: Sequence[Rows], counted: np.ndarray | None) -> np.ndarray:
    """Per document row: the whole page's BM25 for the question's terms (``matches``: the
    components each term's full-text lookup found, as ``term_coverage`` reads them). A page's
    frequency of a term is how many of its components hold it in their search text (the page's
    title and section names count in every component under them), its length its number of
    components; Lucene's idf over pages, ``PAGE_K1`` and ``PAGE_B``. Only components ``counted``
    (a mask over every component; None: all) count. A whole-page BM25 prefers the short page where
    the question's words gather over the long one that also holds them, which a component's own
    scores cannot see."""
    comps = graph.layers[1]
    n_docs = len(graph.layers[0].ids)
    out = np.zeros(n_docs, np.float64)
    length = np.diff(np.asarray(comps.starts, dtype=np.int64)).astype(np.float64)
    if n_docs == 0 or not (length > 0).any():
        return out
    norm = PAGE_K1 * (1.0 - PAGE_B + PAGE_B * length / length[length > 0].mean())
    for found in matches:
        rows = np.fromiter((r for r, _ in found), np.int64, len(found))
        if counted is not None:
            rows = rows[counted[rows]]
        doc = comps.doc[rows].astype(np.int64)
        pages, tf = np.unique(doc[doc >= 0], return_counts=True)
        if len(pages):
            idf = math.log(1.0 + (n_docs - len(pages) + 0.5) / (len(pages) + 0.5))
            out[pages] += idf * tf * (PAGE_K1 + 1.0) / (tf + norm[pages])
    return out


def best_of_pages(graph: Graph, pages: np.ndarray, score: np.ndarray, counted: np.ndarray | None) -> np.ndarray:
    """The component row of each of ``pages`` with the highest ``score`` (a value per component;
    the first row on ties), among those ``counted``; pages with none left out."""
    starts = graph.layers[1].starts
    out = []
    for page in np.asarray(pages, dtype=np.int64).tolist():
        rows = np.arange(starts[page], starts[page + 1])
        if counted is not None:
            rows = rows[counted[rows]]
        if len(rows):
            out.append(int(rows[np.argmax(score[rows])]))
    return np.array(out, dtype=np.int64)


# -- components through their subcomponents ----------------------------------------------------
def component_max(graph: Graph, found: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Per component row of ``found``: max similarity over its subcomponents for each query (-inf
    if none)."""
    subs = graph.layers[2]
    starts = subs.parent_starts
    sizes = starts[found + 1] - starts[found]
    if len(found) == 0:
        return np.zeros((0, len(queries)), dtype=np.float32)
    sub_rows = spans(starts[found], sizes)
    return group_max((queries @ subs.vectors[sub_rows].T).T, np.concatenate([[0], np.cumsum(sizes)]))


def component_query_max(graph: Graph, queries: np.ndarray, found: np.ndarray | None = None,
                        exact: bool = False) -> np.ndarray:
    """M[c, q]: max similarity of subquery q over component c's subcomponents (the component's
    own vector when it has none), for the component rows ``found`` (default: all). When the
    subcomponents are searched through their codes (``laminae.vectors``), only the components the
    codes shortlist for some subquery (and those without subcomponents) are scored, exactly;
    the others are -inf; ``exact`` scores every one of ``found``."""
    comps, subs = graph.layers[1], graph.layers[2]
    rows_all = np.arange(len(comps.ids)) if found is None else found
    if exact and found is not None:
        out = component_max(graph, rows_all, queries)
    elif len(rows_all) * 4 >= len(comps.ids) and subs.compact:
        allowed = None
        if found is not None:
            allowed = np.zeros(len(comps.ids), dtype=bool)
            allowed[found] = True
        picked = shortlist_groups(subs.codes, subs.parent_starts, queries, allowed=allowed,
                                  prefix=subs.first_words())
        position = np.full(len(comps.ids), -1, dtype=np.int64)
        position[rows_all] = np.arange(len(rows_all))
        out = np.full((len(rows_all), len(queries)), -np.inf, dtype=np.float32)
        out[position[picked]] = component_max(graph, picked, queries)
    elif len(rows_all) * 4 >= len(comps.ids):  # a blocked scan of every subcomponent beats gathering most of them
        out = group_max(similarities(subs.vectors, queries), subs.parent_starts)
        out = out if found is None else out[found]
    else:
        out = component_max(graph, rows_all, queries)
    starts = subs.parent_starts
    lonely = np.flatnonzero(starts[rows_all + 1] == starts[rows_all])
    if len(lonely):
        out[lonely] = comps.vectors[rows_all[lonely]] @ queries.T
    return out
