"""The ``retrieve`` move: components ranked by the learned fusion of every ranking that found them.

Reads, through ``laminae.ranking.Sources``, the in-memory view, the full-text indexes and the
query's vector; gathers one dense ranking per component kind, the BM25 ranking of components
through their subcomponents and the term-coverage ranking, and the evidence ``laminae.fusion``
scores (``fusion_evidence``; ``bench/fusion_fit.py`` fits the weights on the same evidence).
Writes nothing. The hybrid hops (``laminae.hops``) fuse the same way at granularity 1 and 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from laminae import fusion
from laminae.copies import left_out, of_graph
from laminae.graph import Graph
from laminae.hits import Hit, top_hits, with_similarity
from laminae.query import query_terms
from laminae.ranking import (
    FUSION_DEPTH,
    Sources,
    best_of_pages,
    component_query_max,
    coverage_lookups,
    dense,
    fts,
    fts_components,
    page_bm25,
    ranked,
    rows,
    rrf,
    term_coverage,
)

RANKINGS = ("learned", "rrf")  # how retrieve orders what its rankings found
# how many components of one page may come before every other page's best: "auto" one for a
# question the gate sends to the how-to weights (a page answers it), any for the others
PAGES = ("auto", "one", "any")

Evidence = tuple[list[np.ndarray], fusion.Evidence | None, np.ndarray]


class Fused(NamedTuple):
    """What ``fused_components`` returns."""

    rows: np.ndarray  # component rows, best first
    scores: np.ndarray  # their fused scores
    similarity: np.ndarray  # the dense similarity of each component row the fusion was asked to rank (found)
    probability: np.ndarray | None = None  # the learned fusion's probability of each of rows (None: rrf)


def retrieve(sources: Sources, query, k: int, documents: Sequence[str] | None, kinds: Sequence[str] | None,
             ranking: str, pages: str = "auto") -> list[Hit]:
    """The best ``k`` components for ``query`` (``Index.retrieve`` says how they are ranked; it has
    checked the arguments against ``laminae.moves.MOVES``)."""
    graph = sources.graph
    found = rows(graph, 1, kinds, documents)
    found = np.arange(len(graph.layers[1].ids)) if found is None else found
    fused = fused_components(sources, query, None, found, documents, granularity=2, learned=ranking == "learned",
                             pages=pages)
    return component_hits(graph, fused, found, k)


def component_hits(graph: Graph, fused: Fused, found: np.ndarray, k: int) -> list[Hit]:
    """The best ``k`` of ``fused`` (over component rows ``found``) as hits, with
    ``extra["similarity"]`` and, where the learned fusion scored them, ``extra["probability"]``:
    the probability that the component is evidence (for a question the how-to weights serve: that
    its page answers it), which is its score unless one component per page came first
    (``fusion.one_per_page``)."""
    hits = with_similarity(graph, top_hits(graph, 1, fused.rows, fused.scores, k), found, fused.similarity)
    if fused.probability is not None:
        position = graph.layers[1].position
        by_row = dict(zip(fused.rows.tolist(), fused.probability.tolist(), strict=True))
        for hit in hits:
            hit.extra["probability"] = by_row[position[hit.id]]
    return hits


def fused_components(sources: Sources, query, q: np.ndarray | None, found: np.ndarray, documents, granularity: int,
                     learned: bool = True, pages: str = "auto") -> Fused:
    """``retrieve``'s fusion over component rows ``found``: the fused rows best first, their fused
    scores, the dense similarity of every row of ``found`` and, where the learned fusion scored
    them, their probability. Granularity 2 scores a component by its subcomponents (dense max,
    BM25 over layer 2); granularity 1 by its own vector and text.
    ``q`` is the query's vector (None: embedded here, while the term-coverage lookups, sent
    first, run). A text ``query`` adds the full-text and term-coverage rankings; at granularity 2
    every component found by any ranking is then scored by the learned fusion
    (``laminae.fusion``) unless ``learned`` is False; elsewhere by reciprocal rank fusion. ``pages``
    ("auto", "one", "any"): whether each page's best component ranks before any page's second
    (``fusion.one_per_page``): for a text question the gate sends to the how-to weights (with
    either ranking), always, never."""
    evidence = fusion_evidence(sources, query, q, found, documents, granularity)
    if evidence is None:
        return Fused(np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(0, np.float32))
    lists, ev, similarity = evidence
    spread = pages == "one" or (pages == "auto" and ev is not None and ev.procedural)
    probability = None
    if ev is None or not learned:
        fused_rows, fused = rrf(lists)
        if not spread:
            return Fused(fused_rows, fused, similarity)
        docs = sources.graph.layers[1].doc[fused_rows]
    else:
        fused_rows, docs = ev.rows, ev.docs
        fused = probability = fusion.scores(fusion.features(ev), ev.kinds, question=fusion.is_question(query),
                                            procedural=ev.procedural)
    if spread:
        fused = fusion.one_per_page(fused_rows, docs, fused)
    order = np.lexsort((fused_rows, -fused))
    return Fused(fused_rows[order], fused[order], similarity, None if probability is None else probability[order])


def fusion_evidence(sources: Sources, query, q: np.ndarray | None, found: np.ndarray, documents, granularity: int,
                    signals: bool = False) -> Evidence | None:
    """The rankings ``fused_components`` fuses, and for a text query at granularity 2 the
    ``fusion.Evidence`` of every component they hold (None otherwise); None when ``found`` is
    empty. Returns (rankings, evidence, dense similarity of every row of ``found``). A copy that
    defers to another one in ``found`` (``laminae.copies``) is in no ranking. The evidence holds
    ``fusion.component_signals`` when the question's weights read them or ``signals`` asks for
    them (fitting), zeros otherwise; its candidates are those of the rankings and the best
    component (by term coverage) of each of the ``FUSION_DEPTH`` pages with the best whole-page
    BM25 (``page_bm25``)."""
    graph = sources.graph
    comps = graph.layers[1]
    if len(found) == 0:
        return None
    every = found
    lookups = coverage_lookups(sources, query) if isinstance(query, str) else None  # they run meanwhile
    q = sources.query.vector(query) if q is None else q
    similarity = (component_query_max(graph, q[None, :], found)[:, 0] if granularity == 2
                  else dense(graph, 1, found, q))
    kinds = comps.kinds[found]
    counted = counted_rows(graph, found)
    kept_similarity = similarity
    if counted is not None and not (kept := counted[found]).all():
        found, kinds, kept_similarity = found[kept], kinds[kept], similarity[kept]
    lists = [ranked(found[kinds == kind], kept_similarity[kinds == kind], FUSION_DEPTH)
             for kind in sorted(set(kinds))]
    if not isinstance(query, str):
        return lists, None, similarity
    if granularity != 2:
        allowed = set(found.tolist())
        lists.append(np.array([r for r, _ in fts(sources, query, 1, FUSION_DEPTH, None, documents)
                               if r in allowed], dtype=np.int64))
        lists.append(term_coverage(sources, query, found, lookups)[0])
        return lists, None, similarity
    bm25_rows, bm25 = fts_components(sources, query, found, documents)
    matches = lookups()
    coverage_rows, coverage, coverage_total = term_coverage(sources, query, found, lambda: matches)
    pages = page_bm25(graph, matches, counted)
    scored = np.flatnonzero(pages > 0)
    page_order = scored[np.lexsort((scored, -pages[scored]))]
    page_rank = np.full(len(pages), float(fusion.ABSENT_RANK))
    page_rank[page_order] = np.arange(1, len(page_order) + 1)
    page_rows = best_of_pages(graph, page_order[:FUSION_DEPTH], coverage, counted)
    candidates = np.array(sorted(set(np.concatenate([*lists, bm25_rows, coverage_rows, page_rows]).tolist())),
                          dtype=np.int64)
    by_row = np.empty(len(comps.ids), dtype=np.float32)
    by_row[every] = similarity
    unscored = candidates[~np.isfinite(by_row[candidates])]
    if len(unscored):  # found by text but outside the compact scan's shortlist: score them exactly
        by_row[unscored] = component_query_max(graph, q[None, :], unscored, exact=True)[:, 0]
        similarity = by_row[every]
    bm25_by_row = dict(zip(bm25_rows.tolist(), bm25.tolist(), strict=True))
    docs = comps.doc[candidates]
    best_page = pages.max() if len(pages) else 0.0
    ev = fusion.Evidence(
        rows=candidates, kinds=comps.kinds[candidates], similarity=by_row[candidates].astype(np.float64),
        own_similarity=(comps.vectors[candidates] @ q).astype(np.float64),
        dense_rank=fusion.ranks(lists, candidates),
        bm25=np.array([bm25_by_row.get(r, 0.0) for r in candidates.tolist()]),
        bm25_rank=fusion.ranks([bm25_rows], candidates),
        coverage=coverage[candidates].astype(np.float64),
        coverage_rank=fusion.ranks([coverage_rows], candidates), coverage_total=coverage_total,
        signals=np.zeros((len(candidates), len(fusion.SIGNALS))), docs=docs, procedural=False,
        page_similarity=page_similarity(graph, q, docs),
        page_bm25=np.where(docs >= 0, pages[docs] / best_page if best_page > 0 else 0.0, 0.0),
        page_bm25_rank=np.where(docs >= 0, page_rank[docs], float(fusion.ABSENT_RANK)),
        shape=fusion.question_shape(query, len(query_terms(query))))
    ev.procedural = fusion.howto_probability(ev) >= 0.5
    if signals or fusion.reads_signals(ev.procedural):
        ev.signals = fusion.component_signals(graph, candidates)
    return [*lists, bm25_rows, coverage_rows], ev, similarity


def counted_rows(graph: Graph, found: np.ndarray) -> np.ndarray | None:
    """A mask over every component: true for the rows of ``found`` a fusion counts, all but the
    copies that defer to another copy also in ``found`` (``laminae.copies``); None when that is
    every component."""
    copy_of, moved = of_graph(graph)
    n = len(copy_of)
    allowed = None
    if len(found) != n:
        allowed = np.zeros(n, dtype=bool)
        allowed[found] = True
    out = left_out(copy_of, moved, allowed)
    if out is None:
        return allowed
    return ~out if allowed is None else allowed & ~out


def page_similarity(graph: Graph, q: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """The query against the document vectors (title and summary) of ``docs`` (0 outside any)."""
    docs = np.asarray(docs, dtype=np.int64)
    out = np.zeros(len(docs), np.float64)
    inside = docs >= 0
    if inside.any():
        unique, back = np.unique(docs[inside], return_inverse=True)
        out[inside] = (np.asarray(graph.layers[0].vectors[unique], np.float32) @ q)[back]
    return out
