"""The hops: FiF's document- and component-level traversers and LILaC's late-interaction beam search.

Reads, through ``laminae.ranking.Sources``, the in-memory view (vectors, codes, parent pointers,
link adjacency), the full-text indexes and the query's vectors; writes nothing. The hybrid hops
rank with ``retrieve``'s fusion (``laminae.retrieval``) at their granularity.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from laminae.errors import ReaderArgumentError, UnknownIdError
from laminae.graph import Graph, group_max
from laminae.hits import BeamResult, Hit, top_hits
from laminae.ranking import (
    FUSION_DEPTH,
    Sources,
    checked_mode,
    component_max,
    component_query_max,
    fts,
    ranked,
    rows,
    rrf,
)
from laminae.retrieval import component_hits, fused_components
from laminae.vectors import shortlist_groups


def documents(sources: Sources, query, k: int, granularity: int, scope: str, anchors: Sequence[str] | None,
              mode: str, direction: str) -> list[Hit]:
    """FiF document-level hop (``Index.documents`` says how documents are scored; its arguments
    checked there, by ``laminae.moves``)."""
    mode = checked_mode(query, mode)
    g = sources.graph
    candidates = linked(g, anchors, direction) if scope == "local" else None
    if mode == "dense" or (granularity == 0 and mode == "auto" and not isinstance(query, str)):
        found, scores = dense_documents(g, sources.query.vector(query), granularity, candidates)
        return top_hits(g, 0, found, scores, k)
    doc_ids = None if candidates is None else [str(g.layers[0].ids[d]) for d in candidates]
    q = sources.query.vector(query)
    if granularity == 0:
        dense_rows, dense_scores = dense_documents(g, q, 0, candidates)
        by_text = np.array([r for r, _ in fts(sources, query, 0, FUSION_DEPTH, None, doc_ids)], dtype=np.int64)
        found, fused = rrf([ranked(dense_rows, dense_scores, FUSION_DEPTH), by_text])
        return top_hits(g, 0, found, fused, k)
    comp_rows = g.layers[1].rows_of_documents(candidates) if candidates is not None \
        else np.arange(len(g.layers[1].ids))
    fused = fused_components(sources, query, q, comp_rows, doc_ids, granularity)
    best: dict[int, float] = {}
    for row, score in zip(g.layers[1].doc[fused.rows].tolist(), fused.scores.tolist(), strict=True):
        best.setdefault(row, score)  # fused rows come best first
    rest: list[int] = []
    if len(best) < k:  # the dense scan of the fallback only when fused evidence runs short
        dense_rows, dense_scores = dense_documents(g, q, granularity, candidates)
        rest = [r for r in ranked(dense_rows, dense_scores, len(dense_rows)).tolist() if r not in best]
    order = [*best, *rest[:k]]
    return top_hits(g, 0, np.array(order, dtype=np.int64),
                    np.array([best.get(r, 0.0) for r in order], dtype=np.float32), k)


def linked(g: Graph, anchors: Sequence[str] | None, direction: str = "out") -> np.ndarray:
    """Document rows linked from (``out``), linking to (``in``) or either (``both``) the anchors
    (documents or components; ``in`` reads a component's document)."""
    if not anchors:
        raise ReaderArgumentError("scope='local' needs anchors: document or component ids")
    found: set[int] = set()
    for anchor in anchors:
        if anchor in g.doc_position:
            found |= g.doc_links(g.doc_position[anchor], direction)
        elif anchor in g.layers[1].position:
            row = g.layers[1].position[anchor]
            if direction != "in":  # a component's own links, not its document's
                found |= g.component_links.get(row, set())
            if direction != "out":
                found |= g.doc_links(int(g.layers[1].doc[row]), "in")
        else:
            raise UnknownIdError(f"anchor {anchor!r} is not a document or component of this index")
    return np.array(sorted(found), dtype=np.int64)


def dense_documents(g: Graph, q: np.ndarray, granularity: int,
                    candidates: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(document rows, max similarity over their layer-g nodes), documents without nodes left out."""
    lay = g.layers[granularity]
    if candidates is None and lay.compact:  # exact over the documents the codes shortlist
        candidates = shortlist_groups(lay.codes, lay.starts, q[None, :], prefix=lay.first_words())
    if candidates is None:
        if granularity == 0:
            return np.arange(len(lay.ids)), lay.vectors @ q
        best = group_max(lay.vectors @ q, lay.starts)
        keep = np.flatnonzero(np.isfinite(best))
        return keep, best[keep]
    if granularity == 0:
        return candidates, lay.vectors[candidates] @ q
    found = lay.rows_of_documents(candidates)
    sizes = lay.starts[candidates + 1] - lay.starts[candidates]
    best = group_max(lay.vectors[found] @ q, np.concatenate([[0], np.cumsum(sizes)]))
    keep = np.isfinite(best)
    return candidates[keep], best[keep]


def components(sources: Sources, query, documents: Sequence[str], k: int, granularity: int,
               mode: str) -> list[Hit]:
    """FiF component-level hop (``Index.components`` says how components are scored; its arguments
    checked there)."""
    mode = checked_mode(query, mode)
    g = sources.graph
    found = rows(g, 1, None, documents)
    if mode != "dense":
        return component_hits(g, fused_components(sources, query, None, found, documents, granularity), found, k)
    q = sources.query.vector(query)
    if granularity == 1:
        return top_hits(g, 1, found, g.layers[1].vectors[found] @ q, k)
    best = component_max(g, found, q[None, :])[:, 0]
    keep = np.isfinite(best)
    return top_hits(g, 1, found[keep], best[keep], k)


def hop(sources: Sources, query, k: int, anchors: Sequence[str] | None, start: int, linked_k: int,
        granularity: int, direction: str, mode: str) -> list[Hit]:
    """FiF's local hop (``Index.hop``): the best ``k`` components of the start documents (the
    anchors' or the best ``start`` for the query) and the ``linked_k`` best documents linked with
    them."""
    g = sources.graph
    if anchors:
        first = []
        for anchor in anchors:
            document = g.document_of(anchor)
            if document is None:
                raise UnknownIdError(f"anchor {anchor!r} is not a document or component of this index")
            first.append(document)
    else:
        first = [h.id for h in documents(sources, query, start, granularity, "global", None, mode, "both")]
        anchors = first
    if not first:
        return []
    near = documents(sources, query, linked_k, granularity, "local", anchors, mode, direction)
    return components(sources, query, list(dict.fromkeys([*first, *(h.id for h in near)])), k, granularity, mode)


def beam_search(sources: Sources, subqueries: Sequence, beam: int, iterations: int, k: int) -> BeamResult:
    """LILaC beam search over component pairs (``Index.beam_search`` says how edges are scored)."""
    if beam < 1 or iterations < 0 or k < 1:
        raise ReaderArgumentError("beam and k must be >= 1 and iterations >= 0")
    g = sources.graph
    comps = g.layers[1]
    queries = np.stack([sources.query.vector(q) for q in subqueries])
    m_all = component_query_max(g, queries)
    own = np.sum([m_all[:, j] for j in range(len(queries))], axis=0)  # axis=1 runs 3 columns at a time: slow
    start = top(own, beam)
    edges: dict[tuple[int, int], float] = {(int(c), int(c)): float(own[c]) for c in start}
    frontier = set(int(c) for c in start)
    for _ in range(iterations):
        candidates: dict[tuple[int, int], float] = dict(edges)
        hood: dict[int, np.ndarray] = {}
        for u in frontier:
            docs = np.array([comps.doc[u], *g.component_links.get(u, ())], dtype=np.int64)
            vs = comps.rows_of_documents(docs)
            hood[u] = vs[vs != u]
        reached = np.unique(np.concatenate([np.zeros(0, np.int64), *hood.values()]))
        unscored = reached[np.isneginf(m_all[reached, 0])]  # left out by a code shortlist: score exactly
        if len(unscored):  # at once: a document's components are adjacent rows, read together
            m_all[unscored] = component_query_max(g, queries, unscored, exact=True)
        for u, vs in hood.items():
            if len(vs) == 0:
                continue
            scores = np.maximum(m_all[u][None, :], m_all[vs]).sum(axis=1)
            for v, score in zip(vs.tolist(), scores.tolist(), strict=True):
                key = (u, v) if u < v else (v, u)
                candidates[key] = max(candidates.get(key, -np.inf), score)
        best_edges = sorted(candidates.items(), key=lambda kv: (-kv[1], kv[0]))[:beam]
        edges = dict(best_edges)
        frontier = {c for pair in edges for c in pair}
    ranked_edges = sorted(edges.items(), key=lambda kv: (-kv[1], kv[0]))
    best: dict[int, float] = {}
    for (u, v), score in ranked_edges:
        for c in (u, v):
            best.setdefault(c, score)
    order = sorted(best, key=lambda c: (-best[c], -own[c], comps.ids[c]))[:k]
    hits = top_hits(g, 1, np.array(order, dtype=np.int64), np.array([best[c] for c in order], dtype=np.float32), k)
    return BeamResult(
        edges=[(str(comps.ids[u]), str(comps.ids[v]), s) for (u, v), s in ranked_edges],
        components=hits,
    )


def top(scores: np.ndarray, n: int) -> np.ndarray:
    """Positions of the ``n`` highest scores, best first, ties by position (a stable sort's order)
    without sorting all of them."""
    if len(scores) <= n:
        return np.argsort(-scores, kind="stable")
    bound = np.partition(scores, len(scores) - n)[len(scores) - n]
    above = np.flatnonzero(scores >= bound)
    return above[np.lexsort((above, -scores[above]))][:n]
