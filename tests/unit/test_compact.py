"""The compact path of the reader (laminae/vectors.py): sign codes scanned, a shortlist re-scored
exactly, against brute force over the same vectors; the switch between exact and compact; the
streamed snapshot; snapshots written before codes existed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import laminae
from laminae import vectors
from laminae.graph import Graph
from laminae.schemas.storage import snapshot_dir
from laminae.schemas.tables import NODE_TABLES
from tests.support.synthetic import make_synthetic_index, query_near

DIM = 384  # the default embedder's size: the recall bounds below hold for 384-bit codes


@pytest.fixture(scope="module")
def clustered(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("clustered")
    make_synthetic_index(str(path), documents=120, components_per_document=4, subcomponents_per_component=5,
                         dim=DIM, seed=3, topics=6, text_index=False, chunk_documents=50)
    return str(path)


def _queries(path: str, n: int = 12) -> np.ndarray:
    subs = np.load(snapshot_dir(path, 1) / "vectors2.npy")
    return query_near(np.random.default_rng(5), subs, n)


def test_hamming_counts_the_differing_bits():
    rng = np.random.default_rng(0)
    v = rng.standard_normal((300, 70)).astype(np.float32)  # 70 bits: two words, the second padded
    q = rng.standard_normal((3, 70)).astype(np.float32)
    codes = vectors.sign_codes(v)
    assert codes.shape == (300, 2) and codes.dtype == np.uint64
    expected = ((v[:, None, :] > 0) != (q[None, :, :] > 0)).sum(axis=2)
    assert np.array_equal(vectors.hamming(codes, vectors.sign_codes(q)), expected)


def test_threaded_scan_equals_one_pass(monkeypatch):
    rng = np.random.default_rng(1)
    codes = vectors.sign_codes(rng.standard_normal((5000, 384)).astype(np.float32))
    q = vectors.sign_codes(rng.standard_normal((2, 384)).astype(np.float32))
    one = np.empty((2, 5000), np.uint16)
    vectors._scan_part(codes, q, one, 0, 5000)
    monkeypatch.setattr(vectors, "CODE_BLOCK", 64)  # 5000 rows >= 4 blocks: two threads
    assert np.array_equal(vectors.hamming(codes, q), one.T)
    assert np.array_equal(vectors.hamming(np.ascontiguousarray(codes.T), q, columns=True), one.T)


def test_code_prefix_holds_the_first_words_word_by_word(monkeypatch):
    codes = vectors.sign_codes(np.random.default_rng(2).standard_normal((1000, 384)).astype(np.float32))
    monkeypatch.setattr(vectors, "PREFILTER_WORDS", 2)
    prefix = vectors.code_prefix(codes, block=300)
    assert prefix.shape == (2, 1000) and np.array_equal(prefix, codes[:, :2].T)
    q = vectors.sign_codes(np.random.default_rng(3).standard_normal((1, 384)).astype(np.float32))
    assert np.array_equal(vectors.hamming(prefix, q[:, :2], columns=True), vectors.hamming(codes[:, :2], q[:, :2]))


def test_snapshot_codes_are_memory_mapped_and_compact_vectors_read_by_row(clustered):
    graph = laminae.open(clustered, search="compact").graph
    for i, lay in enumerate(graph.layers):
        assert lay.compact and isinstance(lay.codes, np.memmap) and isinstance(lay.vectors, vectors.RowFile)
        mapped = np.load(snapshot_dir(clustered, 1) / f"vectors{i}.npy", mmap_mode="r")
        assert np.array_equal(np.asarray(lay.codes), vectors.sign_codes(np.asarray(mapped)))
        rows = np.array([5, 3, 4, len(mapped) - 1, 3, 0])  # unsorted, repeated, runs of consecutive rows
        assert np.array_equal(lay.vectors[rows], mapped[rows])
        assert np.array_equal(lay.vectors[2:9], mapped[2:9]) and np.array_equal(lay.vectors[7], mapped[7])
        assert lay.vectors[np.zeros(0, np.int64)].shape == (0, DIM)
    assert isinstance(laminae.open(clustered, search="exact").graph.layers[2].vectors, np.memmap)


def test_auto_is_exact_below_the_limit_and_compact_above(clustered, monkeypatch):
    monkeypatch.delenv(vectors.EXACT_LIMIT_ENV, raising=False)
    assert not any(lay.compact for lay in laminae.open(clustered).graph.layers)
    assert not any(lay.compact for lay in laminae.open(clustered, search="exact").graph.layers)
    monkeypatch.setenv(vectors.EXACT_LIMIT_ENV, "0")
    assert all(lay.compact for lay in laminae.open(clustered).graph.layers)
    assert not any(lay.compact for lay in laminae.open(clustered, search="exact").graph.layers)
    monkeypatch.setenv(vectors.EXACT_LIMIT_ENV, "lots")
    with pytest.raises(vectors.SearchSettingError, match="number of GiB"):
        laminae.open(clustered).graph  # noqa: B018
    with pytest.raises(laminae.ReaderArgumentError, match="auto, exact, compact"):
        laminae.open(clustered, search="fast")


def _exact_document_scores(path: str, q: np.ndarray) -> dict[str, float]:
    g = laminae.open(path, search="exact").graph
    subs = np.asarray(g.layers[2].vectors)
    best = np.maximum.reduceat(subs @ q, g.layers[2].starts[:-1])
    return {str(d): float(s) for d, s in zip(g.layers[0].ids, best, strict=True)}


@pytest.mark.parametrize("prefilter", [0, 2])
def test_compact_global_hop_returns_exact_scores_within_a_recall_bound(clustered, monkeypatch, prefilter):
    monkeypatch.setattr(vectors, "SHORTLIST_GROUPS", 30)  # 30 of 120 documents re-scored exactly
    monkeypatch.setattr(vectors, "PREFILTER_WORDS", prefilter)  # 2: 60 documents by 128 bits, then 30 by 384 bits
    monkeypatch.setattr(vectors, "PREFILTER_FACTOR", 2)
    exact, compact = laminae.open(clustered, search="exact"), laminae.open(clustered, search="compact")
    recalls = []
    for q in _queries(clustered):
        reference = _exact_document_scores(clustered, q)
        got = compact.documents(q, k=10, granularity=2, mode="dense")
        want = exact.documents(q, k=10, granularity=2, mode="dense")
        assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
        for hit in got:  # re-scored: the exact max over the document's subcomponents
            assert hit.score == pytest.approx(reference[hit.id], abs=1e-5)
        assert got[0].id == want[0].id  # a question with an answer: its document comes first
        recalls.append(len({h.id for h in got} & {h.id for h in want}) / 10)
    assert np.mean(recalls) >= 0.9


@pytest.mark.parametrize("prefilter", [0, 2])
def test_compact_dense_search_rescores_the_shortlist(clustered, monkeypatch, prefilter):
    monkeypatch.setattr(vectors, "SHORTLIST_ROWS", 100)  # 100 of 2400 subcomponents
    monkeypatch.setattr(vectors, "PREFILTER_WORDS", prefilter)  # 2: 1,000 rows by 128 bits, then 100 by 384
    monkeypatch.setattr(vectors, "PREFILTER_FACTOR", 10)
    exact, compact = laminae.open(clustered, search="exact"), laminae.open(clustered, search="compact")
    subs = np.asarray(exact.graph.layers[2].vectors)
    position = exact.graph.layers[2].position
    recalls = []
    for q in _queries(clustered):
        got = compact.search(q, layer=2, k=10, mode="dense")
        want = exact.search(q, layer=2, k=10, mode="dense")
        for hit in got:
            assert hit.score == pytest.approx(float(subs[position[hit.id]] @ q), abs=1e-5)
        assert got[0].id == want[0].id
        recalls.append(len({h.id for h in got} & {h.id for h in want}) / 10)
    assert np.mean(recalls) >= 0.9


def test_compact_beam_search_scores_its_edges_exactly(clustered, monkeypatch):
    monkeypatch.setattr(vectors, "SHORTLIST_GROUPS", 40)  # 40 of 480 components per subquery
    exact, compact = laminae.open(clustered, search="exact"), laminae.open(clustered, search="compact")
    qs = list(_queries(clustered, 3))
    m = exact.component_query_max(np.stack(qs))
    position = exact.graph.layers[1].position
    got = compact.beam_search(qs, beam=10, iterations=1, k=5)
    for u, v, score in got.edges:
        pair = np.maximum(m[position[u]], m[position[v]]).sum()
        assert score == pytest.approx(float(pair), abs=1e-4)
    want = exact.beam_search(qs, beam=10, iterations=1, k=5)
    assert got.components[0].id == want.components[0].id


def test_a_snapshot_without_codes_still_opens(tmp_path, monkeypatch):
    """Snapshots written before codes existed: auto and exact search the vectors as before;
    compact computes the codes from the vectors when the view loads."""
    make_synthetic_index(str(tmp_path), documents=30, components_per_document=3, subcomponents_per_component=4,
                         dim=DIM, seed=2, topics=3, text_index=False)
    snapshot = snapshot_dir(str(tmp_path), 1)
    for codes in snapshot.glob("codes*.npy"):
        codes.unlink()
    monkeypatch.setenv(vectors.EXACT_LIMIT_ENV, "0")
    old = laminae.open(str(tmp_path))
    assert all(lay.codes is None and not lay.compact for lay in old.graph.layers)
    q = _queries(str(tmp_path), 1)[0]
    compact = laminae.open(str(tmp_path), search="compact")
    assert all(lay.compact for lay in compact.graph.layers)
    assert [h.id for h in compact.documents(q, k=5, granularity=2)] == [h.id for h in old.documents(q, k=5, granularity=2)]


def test_the_streamed_snapshot_is_the_view_read_from_the_tables(clustered):
    index = laminae.open(clustered)
    streamed = index.graph
    tables = Graph({name: index.table(name) for name in (*NODE_TABLES, "edges")}, DIM)
    for a, b in zip(streamed.layers, tables.layers, strict=True):
        assert list(a.ids) == list(b.ids) and list(a.kinds) == list(b.kinds)
        assert a.text.to_pylist() == b.text.to_pylist()
        assert np.array_equal(np.asarray(a.vectors), b.vectors)
        for name in ("doc", "parent", "starts"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert np.array_equal(streamed.layers[2].parent_starts, tables.layers[2].parent_starts)
    assert streamed.out_links == tables.out_links and streamed.component_links == tables.component_links
    assert streamed.titles.to_pylist() == tables.titles.to_pylist()


def test_graph_save_writes_codes(tmp_path):
    make_synthetic_index(str(tmp_path), documents=8, components_per_document=2, subcomponents_per_component=3,
                         dim=16, seed=1, snapshot=False, text_index=False)
    index = laminae.open(str(tmp_path))
    path = Path(index.save_snapshot())
    assert sorted(p.name for p in path.glob("codes*.npy")) == ["codes0.npy", "codes1.npy", "codes2.npy"]
    loaded = laminae.open(str(tmp_path), search="compact").graph
    assert np.array_equal(np.asarray(loaded.layers[2].codes), vectors.sign_codes(index.graph.layers[2].vectors))


def test_compact_retrieve_scores_components_found_only_by_text_exactly(tmp_path):
    make_synthetic_index(str(tmp_path), documents=120, components_per_document=4, subcomponents_per_component=5,
                         dim=DIM, seed=4, topics=6, chunk_documents=50)
    q = _queries(str(tmp_path), 1)[0]
    exact = laminae.open(str(tmp_path), search="exact", embed=lambda text: q)
    compact = laminae.open(str(tmp_path), search="compact", embed=lambda text: q)
    text = "keyword10 keyword20 keyword30 keyword40 sentence"
    hits = compact.retrieve(text, k=120)  # deep enough to hold what full text alone found
    truth = {h.id: h.extra["similarity"] for h in exact.retrieve(text, k=480)}
    comps = compact.graph.layers[1]
    shortlisted = compact.component_query_max(q[None, :])[:, 0]
    outside = [h for h in hits if not np.isfinite(shortlisted[comps.position[h.id]])]
    assert outside  # some hits come from full text alone, outside the codes' shortlist
    for hit in hits:  # every hit's similarity is the exact best over its subcomponents
        assert np.isfinite(hit.score) and 0 < hit.score < 1
        assert hit.extra["similarity"] == pytest.approx(truth[hit.id], abs=1e-5)


@pytest.mark.parametrize("select_min", [1 << 40, 64])  # 64: the sampled threshold on every call
def test_selections_equal_brute_force(monkeypatch, select_min):
    monkeypatch.setattr(vectors, "SELECT_MIN", select_min)
    monkeypatch.setattr(vectors, "SELECT_SAMPLE", 50)
    rng = np.random.default_rng(7)
    distances = rng.integers(0, 400, size=(20_000, 2)).astype(np.uint16)
    picked = vectors.smallest(distances[:, 0], 37)
    assert len(picked) == 37 and distances[picked, 0].max() <= np.sort(distances[:, 0])[36]
    sizes = rng.integers(0, 40, size=1000)  # some groups empty
    starts = np.concatenate([[0], np.cumsum(sizes)])
    rows = distances[: starts[-1]]
    allowed = rng.random(1000) < 0.7
    got = vectors.nearest_groups(rows, starts, 25, allowed)
    nearest = vectors.group_min(rows, starts, np.iinfo(np.uint16).max)
    for j in range(2):
        mins = np.where(allowed & (sizes > 0), nearest[:, j], np.iinfo(np.uint16).max)
        bound = np.sort(mins)[24]
        assert (mins < bound).sum() <= 25 and set(np.flatnonzero(mins < bound)) <= set(got.tolist())
    assert allowed[got].all() and (sizes[got] > 0).all()
    assert len(got) <= 50 and np.array_equal(got, np.unique(got))

