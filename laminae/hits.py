"""What the moves return: ``Hit`` (a scored node with what a model reads of it) and ``BeamResult``.

Reads the in-memory view (``laminae.graph``: ids, kinds, texts, titles and urls of the rows
ranked); writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from laminae.graph import Graph


@dataclass
class Hit:
    """A scored node: its id, score and enough content to show a model."""

    id: str
    score: float
    layer: int
    kind: str
    document_id: str
    text: str | None = None
    extra: dict = field(default_factory=dict)


@dataclass
class BeamResult:
    """LILaC beam search: the best component pairs (edges) and the components they rank."""

    edges: list[tuple[str, str, float]]
    components: list[Hit]


def top_hits(graph: Graph, layer: int, rows: np.ndarray | None, scores: np.ndarray, k: int) -> list[Hit]:
    """The top-``k`` of ``scores`` (over ``rows`` of ``layer``, or the whole layer when None) as
    hits, best first, ties by id."""
    if len(scores) == 0 or k <= 0:
        return []
    lay = graph.layers[layer]
    rows = np.arange(len(scores)) if rows is None else rows
    if len(scores) > k:  # every row tied with the k-th best competes on its id
        top = np.flatnonzero(scores >= scores[np.argpartition(-scores, k - 1)[k - 1]])
    else:
        top = np.arange(len(scores))
    top = top[np.lexsort((lay.ids[rows[top]], -scores[top]))][:k]
    hits = []
    for i in top:
        row = int(rows[i])
        doc = int(lay.doc[row])
        hits.append(Hit(str(lay.ids[row]), float(scores[i]), layer, str(lay.kinds[row]), str(graph.layers[0].ids[doc]),
                        text=lay.text[row].as_py(),
                        extra={"title": graph.titles[doc].as_py(), "url": graph.urls[doc].as_py()}))
    return hits


def with_similarity(graph: Graph, hits: list[Hit], rows: np.ndarray, similarity: np.ndarray) -> list[Hit]:
    """Component ``hits`` with ``extra["similarity"]``: their dense score, of ``similarity`` (one per
    component row of ``rows``)."""
    comps = graph.layers[1]
    by_row = np.empty(len(comps.ids), dtype=np.float32)
    by_row[rows] = similarity
    for hit in hits:
        hit.extra["similarity"] = float(by_row[comps.position[hit.id]])
    return hits
