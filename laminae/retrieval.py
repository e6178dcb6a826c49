"""The ``retrieve`` move: components ranked by the learned fusion of every ranking that found them.

Reads, through ``laminae.ranking.Sources``, the in-memory view, the full-text indexes and the
query's vector; gathers one dense ranking per component kind, the BM25 ranking of components
through their subcomponents and the term-coverage ranking, and the evidence ``laminae.fusion``
scores (``fusion_evidence``; ``bench/fusion_fit.py`` fits the weights on the same evidence).
Writes nothing. The hybrid hops (``laminae.hops``) fuse the same way at granularity 1 and 2.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from laminae import fusion
from laminae.errors import ReaderArgumentError
from laminae.graph import Graph
from laminae.hits import Hit, top_hits, with_similarity
from laminae.ranking import (
    FUSION_DEPTH,
    Sources,
    component_query_max,
    coverage_lookups,
    dense,
    fts,
    fts_components,
    ranked,
    rows,
    rrf,
    term_coverage,
)

RANKINGS = ("learned", "rrf")  # how retrieve orders what its rankings found

Evidence = tuple[list[np.ndarray], fusion.Evidence | None, np.ndarray]


def retrieve(sources: Sources, query, k: int, documents: Sequence[str] | None, kinds: Sequence[str] | None,
             ranking: str) -> list[Hit]:
    """The best ``k`` components for ``query`` (``Index.retrieve`` says how they are ranked)."""
    if ranking not in RANKINGS:
        raise ReaderArgumentError(f"ranking must be one of {', '.join(RANKINGS)}; got {ranking!r}")
    graph = sources.graph
    found = rows(graph, 1, kinds, documents)
    found = np.arange(len(graph.layers[1].ids)) if found is None else found
    fused_rows, fused, similarity = fused_components(sources, query, None, found, documents, granularity=2,
                                                     learned=ranking == "learned")
    return with_similarity(graph, top_hits(graph, 1, fused_rows, fused, k), found, similarity)


def fused_components(sources: Sources, query, q: np.ndarray | None, found: np.ndarray, documents, granularity: int,
                     learned: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``retrieve``'s fusion over component rows ``found``: (fused rows best first, their fused
    scores, the dense similarity of every row of ``found``). Granularity 2 scores a component by
    its subcomponents (dense max, BM25 over layer 2); granularity 1 by its own vector and text.
    ``q`` is the query's vector (None: embedded here, while the term-coverage lookups, sent
    first, run). A text ``query`` adds the full-text and term-coverage rankings; at granularity 2
    every component found by any ranking is then scored by the learned fusion
    (``laminae.fusion``) unless ``learned`` is False; elsewhere by reciprocal rank fusion."""
    evidence = fusion_evidence(sources, query, q, found, documents, granularity)
    if evidence is None:
        return np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(0, np.float32)
    lists, ev, similarity = evidence
    if ev is None or not learned:
        fused_rows, fused = rrf(lists)
        return fused_rows, fused, similarity
    probability = fusion.scores(fusion.features(ev), ev.kinds, question=fusion.is_question(query),
                                procedural=ev.procedural)
    order = np.lexsort((ev.rows, -probability))
    return ev.rows[order], probability[order], similarity


def fusion_evidence(sources: Sources, query, q: np.ndarray | None, found: np.ndarray, documents, granularity: int,
                    signals: bool = False) -> Evidence | None:
    """The rankings ``fused_components`` fuses, and for a text query at granularity 2 the
    ``fusion.Evidence`` of every component they hold (None otherwise); None when ``found`` is
    empty. Returns (rankings, evidence, dense similarity of every row of ``found``). The evidence
    holds ``fusion.component_signals`` when the question's weights read them or ``signals`` asks
    for them (fitting), zeros otherwise."""
    graph = sources.graph
    comps = graph.layers[1]
    if len(found) == 0:
        return None
    lookups = coverage_lookups(sources, query) if isinstance(query, str) else None  # they run meanwhile
    q = sources.query.vector(query) if q is None else q
    similarity = (component_query_max(graph, q[None, :], found)[:, 0] if granularity == 2
                  else dense(graph, 1, found, q))
    kinds = comps.kinds[found]
    lists = [ranked(found[kinds == kind], similarity[kinds == kind], FUSION_DEPTH) for kind in sorted(set(kinds))]
    if not isinstance(query, str):
        return lists, None, similarity
    if granularity != 2:
        allowed = set(found.tolist())
        lists.append(np.array([r for r, _ in fts(sources, query, 1, FUSION_DEPTH, None, documents)
                               if r in allowed], dtype=np.int64))
        lists.append(term_coverage(sources, query, found, lookups)[0])
        return lists, None, similarity
    bm25_rows, bm25 = fts_components(sources, query, found, documents)
    coverage_rows, coverage, coverage_total = term_coverage(sources, query, found, lookups)
    candidates = np.array(sorted(set(np.concatenate([*lists, bm25_rows, coverage_rows]).tolist())),
                          dtype=np.int64)
    by_row = np.empty(len(comps.ids), dtype=np.float32)
    by_row[found] = similarity
    unscored = candidates[~np.isfinite(by_row[candidates])]
    if len(unscored):  # found by text but outside the compact scan's shortlist: score them exactly
        by_row[unscored] = component_query_max(graph, q[None, :], unscored, exact=True)[:, 0]
        similarity = by_row[found]
    bm25_by_row = dict(zip(bm25_rows.tolist(), bm25.tolist(), strict=True))
    procedural = fusion.is_procedural(query)
    ev = fusion.Evidence(
        rows=candidates, kinds=comps.kinds[candidates], similarity=by_row[candidates].astype(np.float64),
        own_similarity=(comps.vectors[candidates] @ q).astype(np.float64),
        dense_rank=fusion.ranks(lists, candidates),
        bm25=np.array([bm25_by_row.get(r, 0.0) for r in candidates.tolist()]),
        bm25_rank=fusion.ranks([bm25_rows], candidates),
        coverage=coverage[candidates].astype(np.float64),
        coverage_rank=fusion.ranks([coverage_rows], candidates), coverage_total=coverage_total,
        signals=(fusion.component_signals(graph, candidates) if signals or fusion.reads_signals(procedural)
                 else np.zeros((len(candidates), len(fusion.SIGNALS)))),
        docs=comps.doc[candidates], procedural=procedural,
        page_similarity=page_similarity(graph, q, comps.doc[candidates]))
    return [*lists, bm25_rows, coverage_rows], ev, similarity


def page_similarity(graph: Graph, q: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """The query against the document vectors (title and summary) of ``docs`` (0 outside any)."""
    docs = np.asarray(docs, dtype=np.int64)
    out = np.zeros(len(docs), np.float64)
    inside = docs >= 0
    if inside.any():
        unique, back = np.unique(docs[inside], return_inverse=True)
        out[inside] = (np.asarray(graph.layers[0].vectors[unique], np.float32) @ q)[back]
    return out
