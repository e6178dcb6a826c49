"""Components that repeat another document's: the copy each one defers to.

Reads a view's components (their texts and documents, layer 1 of ``laminae.graph.Graph``); writes
nothing (``laminae.snapshot_writer`` saves the answer in each snapshot as ``copies1.npy`` when the
build publishes, so that a reader loads it; ``of_graph`` computes it on first use for a view
without it).
A page made of other pages' components (a print view, a single-page manual, an archive, a
tag page) holds the same paragraphs as the pages it repeats, and every ranking finds both copies
with the same score; what tells them apart is the page around them, and the bigger page gathers
more evidence (more candidates, more matched terms) for a reason that says nothing about the
question. A component whose text (case and runs of white space aside) is held by another
document defers to the copy on the document with the least text (the fewest characters, then the
first row): ``retrieve`` and the hybrid hops leave a deferring copy out of their candidates when
the copy it defers to may be returned, so the page that holds the passage with the least else
around it is the one found. Texts shorter than ``MIN_CHARS`` (a "Note", an "Example:") are not
passages and never defer; nor do copies within one document.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

COPIES_FILE = "copies1.npy"  # in a snapshot: per component row, the row of the copy it defers to
MIN_CHARS = 20
_OF_GRAPH: weakref.WeakKeyDictionary[Any, tuple[np.ndarray, np.ndarray]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def copies(text: pa.Array | pa.ChunkedArray, doc: np.ndarray) -> np.ndarray:
    """Per component row (texts ``text``, document rows ``doc``, -1 for none), the row of the copy
    it defers to: itself, or the first row of the same text on the document with the least text."""
    doc = np.asarray(doc, dtype=np.int64)
    n = len(doc)
    out = np.arange(n, dtype=np.int64)
    if n == 0:
        return out
    text = text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
    chars = pc.fill_null(pc.utf8_length(text), 0).to_numpy(zero_copy_only=False).astype(np.float64)
    inside = doc >= 0
    page_chars = np.bincount(doc[inside], weights=chars[inside], minlength=int(doc.max()) + 1 if inside.any() else 0)
    rows = np.flatnonzero(inside & (chars >= MIN_CHARS))
    if len(rows) < 2:
        return out
    words = pc.utf8_trim_whitespace(pc.replace_substring_regex(pc.utf8_lower(text.take(pa.array(rows))),
                                                               pattern=r"\s+", replacement=" "))
    key = pc.dictionary_encode(pc.fill_null(words, "")).indices.to_numpy(zero_copy_only=False)
    order = np.lexsort((rows, page_chars[doc[rows]], key))
    key, rows = key[order], rows[order]
    first = np.r_[True, key[1:] != key[:-1]]
    group = np.cumsum(first) - 1
    start = np.flatnonzero(first)
    docs_of = doc[rows]
    several = np.minimum.reduceat(docs_of, start) != np.maximum.reduceat(docs_of, start)
    defer = several[group] & (docs_of != docs_of[start[group]])
    out[rows[defer]] = rows[start[group[defer]]]
    return out


def left_out(copy_of: np.ndarray, moved: np.ndarray, allowed: np.ndarray | None) -> np.ndarray | None:
    """A mask over every component, true for the rows a move leaves out: the ``moved`` rows (those
    whose ``copy_of`` is another row) whose copy may be returned (``allowed``: a mask over every
    component, None: any); None when it leaves none out."""
    if len(moved) == 0:
        return None
    targets = copy_of[moved]
    drop = moved if allowed is None else moved[allowed[targets] & allowed[moved]]
    if len(drop) == 0:
        return None
    mask = np.zeros(len(copy_of), dtype=bool)
    mask[drop] = True
    return mask


def of_graph(graph: Any) -> tuple[np.ndarray, np.ndarray]:
    """(``copies`` of a ``laminae.graph.Graph``'s components: its snapshot's ``saved_copies``, or
    computed on first use for a view without them; the rows that defer), kept with the graph."""
    with _LOCK:
        found = _OF_GRAPH.get(graph)
        if found is None:
            comps = graph.layers[1]
            copy_of = graph.saved_copies
            copy_of = copies(comps.text, comps.doc) if copy_of is None else np.asarray(copy_of)
            found = _OF_GRAPH[graph] = (copy_of, np.flatnonzero(copy_of != np.arange(len(copy_of))))
        return found
