"""Aggregate pages and whole-page evidence in the reader: which copy of a repeated component a
fusion keeps (``laminae.copies``), and the whole page's BM25 (``laminae.ranking.page_bm25``),
each against a reference computed on its own."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pyarrow as pa

from laminae.copies import MIN_CHARS, copies, left_out
from laminae.ranking import PAGE_B, PAGE_K1, best_of_pages, page_bm25

A = "To remove an entry from the cache before its timeout, call delete() with its key."
B = "Sessions keep data about each visitor between requests, in a store the settings name."
C = "A receiver is a function called each time a signal is sent."


def test_a_repeated_component_defers_to_the_copy_on_the_page_with_least_around_it():
    texts = [
        A, B, C, "What only the print view holds, a foreword of its own.", "Note",  # doc 0: the print view
        "  to remove an ENTRY from the cache before its timeout,\n call delete() with its key.  ",  # doc 1
        "Note", B, "The rest of the sessions chapter, which the print view also leaves out, and much else besides.",  # doc 2
        C,  # doc 3: a page of one paragraph
        B, B,  # doc 4: twice the same paragraph, and nothing else
    ]
    doc = np.array([0, 0, 0, 0, 0, 1, 2, 2, 2, 3, 4, 4])
    out = copies(pa.array(texts), doc)
    # A -> its copy on doc 1 (case and white space aside); C -> doc 3; B -> doc 4 (less text than doc 2)
    assert out.tolist() == [5, 10, 9, 3, 4, 5, 6, 10, 8, 9, 10, 11]
    assert len("Note") < MIN_CHARS  # too short to be a passage: never defers
    # a copy is left out only when the copy it defers to may be returned
    moved = np.flatnonzero(out != np.arange(len(out)))
    assert left_out(out, moved, None).nonzero()[0].tolist() == [0, 1, 2, 7]
    only_print_view = np.zeros(len(out), dtype=bool)
    only_print_view[:5] = True
    assert left_out(out, moved, only_print_view) is None
    some = only_print_view.copy()
    some[9] = True
    assert left_out(out, moved, some).nonzero()[0].tolist() == [2]
    assert copies(pa.array([], pa.string()), np.zeros(0, np.int64)).tolist() == []
    assert copies(pa.array([A, A]), np.array([-1, 0])).tolist() == [0, 1]  # a component of no document stays


def _graph(doc: list[int], n_docs: int) -> SimpleNamespace:
    doc_array = np.array(doc, dtype=np.int32)
    starts = np.searchsorted(doc_array, np.arange(n_docs + 1)).astype(np.int64)
    return SimpleNamespace(layers=[SimpleNamespace(ids=np.arange(n_docs)),
                                   SimpleNamespace(doc=doc_array, starts=starts)])


def test_page_bm25_is_bm25_over_pages_with_components_as_term_frequency():
    doc = [0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 3, 3]
    graph = _graph(doc, 5)  # page 4 has no component
    matches = [[(0, 3.0), (1, 2.0), (2, 1.0), (6, 1.0)], [(8, 2.0), (9, 1.0)], []]  # per term: the rows holding it
    got = page_bm25(graph, matches, None)
    length = np.array([6, 2, 1, 3, 0], dtype=float)
    avg = length[length > 0].mean()
    expected = np.zeros(5)
    for found in matches:
        pages = [doc[r] for r, _ in found]
        for page in set(pages):
            tf = pages.count(page)
            idf = math.log(1 + (5 - len(set(pages)) + 0.5) / (len(set(pages)) + 0.5))
            expected[page] += idf * tf * (PAGE_K1 + 1) / (tf + PAGE_K1 * (1 - PAGE_B + PAGE_B * length[page] / avg))
    assert np.allclose(got, expected)
    assert got[1] > 0 and got[4] == 0
    # components not counted (copies that defer, rows outside the move's scope) add nothing
    counted = np.ones(len(doc), dtype=bool)
    counted[[0, 1, 2]] = False
    fewer = page_bm25(graph, matches, counted)
    assert fewer[0] == 0 and fewer[1] > got[1]  # the term is now on one page only: rarer
    # each page's best component by a score, among those counted
    score = np.array([0, 5, 1, 0, 0, 0, 2, 2, 1, 0, 3, 3], dtype=float)
    assert best_of_pages(graph, np.array([3, 1, 0]), score, None).tolist() == [10, 6, 1]
    assert best_of_pages(graph, np.array([0, 4]), score, counted).tolist() == [3]


def test_a_snapshot_holds_the_copies_and_a_reader_uses_them(tmp_path):
    import laminae
    from laminae.copies import COPIES_FILE, of_graph
    from laminae.graph import Graph
    from laminae.snapshots import snapshot_problem
    from tests.support.synthetic import make_synthetic_index

    make_synthetic_index(str(tmp_path / "ix"), documents=6, components_per_document=3, subcomponents_per_component=2,
                         dim=16, seed=2)
    graph = laminae.open(str(tmp_path / "ix")).graph
    comps = graph.layers[1]
    text = comps.text.to_pylist()
    text[0] = text[4] = A  # the first document's first component repeats one of the second's
    text[1] = B  # and the first document holds more besides
    graph.layers[1].text = pa.array(text)
    graph.save(tmp_path / "snap")
    saved = np.load(tmp_path / "snap" / COPIES_FILE)
    assert saved.tolist() == copies(pa.array(text), comps.doc).tolist() and saved[0] == 4
    loaded = Graph.load(tmp_path / "snap")
    assert of_graph(loaded)[0].tolist() == saved.tolist() and of_graph(loaded)[1].tolist() == np.flatnonzero(
        saved != np.arange(len(saved))).tolist()
    assert snapshot_problem(tmp_path / "snap", 16) is None
    np.save(tmp_path / "snap" / COPIES_FILE, saved[:-1])  # a short file is damage, named
    assert COPIES_FILE in (snapshot_problem(tmp_path / "snap", 16) or "")
    (tmp_path / "snap" / COPIES_FILE).unlink()  # a snapshot written before issue 45: computed on first use
    assert snapshot_problem(tmp_path / "snap", 16) is None
    assert Graph.load(tmp_path / "snap").saved_copies is None
