"""The reader's moves against brute-force numpy references on small indexes."""

from __future__ import annotations

import numpy as np
import pytest

import laminae
from tests.support.synthetic import make_synthetic_index


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("synthetic")
    make_synthetic_index(str(path), documents=40, components_per_document=5, subcomponents_per_component=4,
                         dim=16, links_per_document=3, seed=7)
    index = laminae.open(str(path))
    tables = {name: index.table(name).to_arrow().to_pylist() for name in
              ("documents", "components", "subcomponents", "edges")}
    return index, tables


def _vec(rows):
    return {r["id"]: np.asarray(r["vector"], dtype=np.float32) for r in rows}


def _query(seed: int, dim: int = 16) -> np.ndarray:
    q = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return q / np.linalg.norm(q)


def _top(scores: dict[str, float], k: int) -> list[tuple[str, float]]:
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def _same(hits, expected):
    assert [h.id for h in hits] == [i for i, _ in expected]
    assert np.allclose([h.score for h in hits], [s for _, s in expected], atol=1e-5)


def test_dense_search_matches_brute_force(small):
    index, t = small
    q = _query(1)
    for layer, name in enumerate(("documents", "components", "subcomponents")):
        scores = {i: float(v @ q) for i, v in _vec(t[name]).items()}
        _same(index.search(q, layer=layer, k=7), _top(scores, 7))
    rows = [r for r in t["subcomponents"] if r["kind"] == "row"]
    scores = {r["id"]: float(np.asarray(r["vector"]) @ q) for r in rows}
    _same(index.search(q, layer=2, k=5, kinds=["row"]), _top(scores, 5))
    some = [d["id"] for d in t["documents"][:3]]
    scores = {r["id"]: float(np.asarray(r["vector"]) @ q) for r in t["components"] if r["document_id"] in some}
    _same(index.search(q, layer="components", k=4, documents=some), _top(scores, 4))


@pytest.mark.parametrize("granularity", [0, 1, 2])
def test_global_document_hop(small, granularity):
    index, t = small
    q = _query(2)
    name = ("documents", "components", "subcomponents")[granularity]
    best: dict[str, float] = {}
    for r in t[name]:
        doc = r["id"] if granularity == 0 else r["document_id"]
        best[doc] = max(best.get(doc, -np.inf), float(np.asarray(r["vector"]) @ q))
    _same(index.documents(q, k=10, granularity=granularity), _top(best, 10))


@pytest.mark.parametrize("granularity", [0, 1, 2])
@pytest.mark.parametrize("direction", ["out", "in", "both"])
def test_local_document_hop(small, granularity, direction):
    index, t = small
    q = _query(3)
    anchor = t["documents"][0]["id"]
    comp_doc = {c["id"]: c["document_id"] for c in t["components"]}
    out = {e["dst_id"] for e in t["edges"] if comp_doc[e["src_id"]] == anchor and e["dst_id"] != anchor}
    into = {comp_doc[e["src_id"]] for e in t["edges"] if e["dst_id"] == anchor and comp_doc[e["src_id"]] != anchor}
    linked = {"out": out, "in": into, "both": out | into}[direction]
    assert out and into and set(index.neighbors([anchor], direction)) == linked
    name = ("documents", "components", "subcomponents")[granularity]
    best: dict[str, float] = {}
    for r in t[name]:
        doc = r["id"] if granularity == 0 else r["document_id"]
        if doc in linked:
            best[doc] = max(best.get(doc, -np.inf), float(np.asarray(r["vector"]) @ q))
    hop = index.documents(q, k=5, granularity=granularity, scope="local", anchors=[anchor], direction=direction)
    _same(hop, _top(best, 5))
    with pytest.raises(ValueError, match="anchors"):
        index.documents(q, scope="local")
    with pytest.raises(ValueError, match="direction"):
        index.documents(q, scope="local", anchors=[anchor], direction="sideways")


@pytest.mark.parametrize("granularity", [1, 2])
def test_component_hop(small, granularity):
    index, t = small
    q = _query(4)
    docs = [d["id"] for d in t["documents"][5:9]]
    best: dict[str, float] = {}
    if granularity == 1:
        best = {c["id"]: float(np.asarray(c["vector"]) @ q) for c in t["components"] if c["document_id"] in docs}
    else:
        for s in t["subcomponents"]:
            if s["document_id"] in docs:
                best[s["parent_id"]] = max(best.get(s["parent_id"], -np.inf), float(np.asarray(s["vector"]) @ q))
    _same(index.components(q, docs, k=6, granularity=granularity), _top(best, 6))


def test_beam_search_scores_edges_by_late_interaction(small):
    index, t = small
    queries = [_query(5), _query(6), _query(7)]
    subs_of: dict[str, list[np.ndarray]] = {}
    for s in t["subcomponents"]:
        subs_of.setdefault(s["parent_id"], []).append(np.asarray(s["vector"]))
    m = {c: np.array([max(float(v @ q) for v in vs) for q in queries]) for c, vs in subs_of.items()}
    result = index.beam_search(queries, beam=5, iterations=1, k=5)
    comp_doc = {c["id"]: c["document_id"] for c in t["components"]}
    links = {(e["src_id"], e["dst_id"]) for e in t["edges"]}
    for u, v, score in result.edges:
        expected = float(np.maximum(m[u], m[v]).sum())
        assert abs(score - expected) < 1e-4
        if u != v:  # an edge is intra-document or follows a link
            assert comp_doc[u] == comp_doc[v] or (u, comp_doc[v]) in links or (v, comp_doc[u]) in links
    assert len(result.edges) == 5 and len(result.components) == 5
    assert result.edges == sorted(result.edges, key=lambda e: -e[2])
    # the start beam: components by their own late-interaction score
    own = {c: float(vs.sum()) for c, vs in m.items()}
    zero = index.beam_search(queries, beam=3, iterations=0, k=3)
    assert [h.id for h in zero.components] == [c for c, _ in _top(own, 3)]
    # expansion can only improve on the best self-pair
    assert result.edges[0][2] >= zero.edges[0][2] - 1e-6


def test_navigation(small):
    index, t = small
    doc = t["documents"][0]["id"]
    comps = index.children(doc)
    assert sorted(comps) == sorted(c["id"] for c in t["components"] if c["document_id"] == doc)
    subs = index.children(comps[0])
    assert sorted(subs) == sorted(s["id"] for s in t["subcomponents"] if s["parent_id"] == comps[0])
    assert index.parent(subs[0]) == comps[0] and index.parent(comps[0]) == doc
    assert index.document_of(subs[0]) == doc
    nodes = index.get([subs[0], doc, "missing"])
    assert [n["id"] for n in nodes] == [subs[0], doc] and nodes[0]["layer"] == 2
    incoming = index.neighbors([doc], direction="in")
    assert all(doc in index.neighbors([d]) for d in incoming)


def test_bad_queries_fail_with_a_fix(small):
    index, _ = small
    with pytest.raises(ValueError, match="16-d"):
        index.search(np.ones(5), layer=1)
    with pytest.raises(ValueError, match="layer"):
        index.search(_query(1), layer=3)
    with pytest.raises(ValueError, match="granularity"):
        index.documents(_query(1), granularity=3)


def test_fts_finds_a_rare_keyword(small):
    index, t = small
    hits = index.search("keyword10", layer=2, k=3, mode="fts")
    assert [h.text.split()[-1] for h in hits] == ["keyword10"]
    assert not index.search("keyword10", layer=2, k=3, mode="fts", kinds=["nothing"])


def test_hybrid_finds_a_rare_keyword_that_dense_misses(tmp_path):
    from laminae.schemas.ids import document_id
    from laminae.tasks.config import EmbedConfig, ParseConfig
    from laminae.tasks.crawl.results import FetchResult
    from laminae.tasks.embed.embedders import embed_rows, load_embedder
    from laminae.tasks.nodes.document_nodes import build_nodes
    from laminae.tasks.parse.html import parse_html
    from laminae.tasks.storage.index_store import IndexStore

    embedder = load_embedder(EmbedConfig(device="cpu", threads=1))
    store = IndexStore(tmp_path)
    store.prepare(embedder.info.as_metadata())
    codes = ["QX72219", "QX27291", "QX72921", "XQ72291", "QX92291", "QX72290"]
    pages = [(f"http://t.test/p{i}", f"<p>The stall keeps a ledger where code {codes[i % 6]} marks a delivery.</p>")
             for i in range(24)]
    pages.append(("http://t.test/target", "<p>A customer returned a loaf from batch QX72291 because the crust "
                                          "was burnt.</p>"))
    docs = []
    for url, body in pages:
        fetch = FetchResult(url=url, final_url=url, raw_key="k", content_type="text/html")
        docs.append(build_nodes(parse_html(f"<html><body>{body}</body></html>".encode(), url), document_id(url),
                                fetch, ParseConfig()))
    embed_rows([r for d in docs for r in [d.document, *d.components, *d.subcomponents]], embedder, {})
    store.replace_documents({"documents": [d.document for d in docs],
                             "components": [c for d in docs for c in d.components],
                             "subcomponents": [s for d in docs for s in d.subcomponents],
                             "edges": [e for d in docs for e in d.edges]}, [d.document["id"] for d in docs])
    store.build_text_indexes()
    store.publish("test", {})
    index = laminae.open(str(tmp_path), embed=embedder.embed_query)
    target = document_id("http://t.test/target")
    dense = index.search("QX72291", layer=1, k=3, mode="dense")
    assert target not in {h.document_id for h in dense}
    assert index.search("QX72291", k=3)[0].document_id == target  # the default fuses full text in
    assert index.retrieve("QX72291", k=3)[0].document_id == target
    assert index.search("QX72291", layer=1, k=3, mode="fts")[0].document_id == target
    assert index.search("QX72291", layer=1, k=3, mode="hybrid")[0].document_id == target
    with pytest.raises(ValueError, match="query text"):
        index.search(np.ones(384, np.float32), layer=1, mode="hybrid")


def test_a_reader_keeps_its_pinned_version(tmp_path):
    make_synthetic_index(str(tmp_path), documents=5, components_per_document=2, subcomponents_per_component=2,
                         dim=8, seed=1)
    before = laminae.open(str(tmp_path))
    q = _query(9, dim=8)
    hits_before = [h.id for h in before.search(q, layer=1, k=10)]
    assert before.stats()["documents"] == 5
    make_synthetic_index(str(tmp_path), documents=5, components_per_document=2, subcomponents_per_component=2,
                         dim=8, seed=2)  # a second "build" into the same index
    after = laminae.open(str(tmp_path))
    assert after.version == before.version + 1 and after.stats()["documents"] == 10
    assert before.stats()["documents"] == 5
    fresh = laminae.open(str(tmp_path), version=before.version)
    assert [h.id for h in fresh.search(q, layer=1, k=10)] == hits_before


def test_snapshot_loads_the_same_view(tmp_path):
    from laminae.graph import Graph
    from laminae.schemas.storage import snapshot_dir

    make_synthetic_index(str(tmp_path), documents=12, components_per_document=3, subcomponents_per_component=2,
                         dim=8, seed=4, snapshot=False)
    index = laminae.open(str(tmp_path))
    assert not snapshot_dir(str(tmp_path), index.version).exists()
    from_tables = index.graph
    path = index.save_snapshot()
    loaded = Graph.load(path)
    for a, b in zip(from_tables.layers, loaded.layers, strict=True):
        assert list(a.ids) == list(b.ids) and list(a.kinds) == list(b.kinds) and a.text.equals(b.text)
        assert np.array_equal(a.vectors, b.vectors) and np.array_equal(a.doc, b.doc)
        assert np.array_equal(a.parent, b.parent) and np.array_equal(a.starts, b.starts)
    assert from_tables.out_links == loaded.out_links and from_tables.component_links == loaded.component_links
    fresh = laminae.open(str(tmp_path))  # now served from the snapshot
    q = _query(11, dim=8)
    assert [(h.id, h.score) for h in fresh.documents(q, k=5, granularity=2)] == \
        [(h.id, h.score) for h in index.documents(q, k=5, granularity=2)]
    assert fresh.beam_search([q], beam=4, k=3).edges == index.beam_search([q], beam=4, k=3).edges


@pytest.mark.parametrize("run_rows", [1, 3, 1000])  # ranges of a scan for every run, for some, for none
def test_streamed_snapshot_equals_the_view_of_reordered_tables(tmp_path, monkeypatch, run_rows):
    """A refresh leaves tables out of document order (rewritten rows go to the end): the streamed
    snapshot must put rows, pointers and links where the view read from the tables has them."""
    import pyarrow as pa

    from laminae import graph
    from laminae.graph import Graph, write_snapshot
    from laminae.tasks.storage.index_store import IndexStore

    monkeypatch.setattr(graph, "RUN_ROWS", run_rows)

    make_synthetic_index(str(tmp_path), documents=9, components_per_document=3, subcomponents_per_component=4,
                         dim=8, seed=6, snapshot=False, text_index=False)
    store = IndexStore(str(tmp_path))
    docs = store.table("documents").search().limit(None).to_arrow()
    moved = docs.column("id").to_pylist()[1:6:2]  # three documents rewritten: their rows now come last
    for name in ("subcomponents", "components", "documents"):
        tbl = store.table(name)
        key = "id" if name == "documents" else "document_id"
        rows = tbl.search().where(f"{key} IN ({', '.join(repr(d) for d in moved)})").limit(None).to_arrow()
        tbl.delete(f"{key} IN ({', '.join(repr(d) for d in moved)})")
        tbl.add(rows.take(np.random.default_rng(0).permutation(rows.num_rows)))
    sub = store.table("subcomponents").search().limit(3).to_arrow().to_pylist()[2]
    edges = store.table("edges")
    link = {f.name: None for f in edges.schema}
    link.update(id="e-sub", kind="links_to", src_id=sub["id"], src_layer=2, dst_id=moved[0],
                document_id=sub["document_id"], target_url="http://synthetic.test/x", target_id=moved[0], resolved=True)
    edges.add(pa.Table.from_pylist([link], schema=edges.schema))
    store.publish("reordered", {})
    index = laminae.open(str(tmp_path))
    tables = {name: index.table(name) for name in ("documents", "components", "subcomponents", "edges")}
    view = Graph(tables, 8)
    write_snapshot(tables, 8, tmp_path / "streamed", batch_rows=5)
    loaded = Graph.load(tmp_path / "streamed")
    stored = tables["subcomponents"].search().select(["id"]).limit(None).to_arrow().column("id").to_pylist()
    assert list(view.layers[2].ids) != stored and sorted(view.layers[2].ids) == sorted(stored)  # reordered
    for a, b in zip(view.layers, loaded.layers, strict=True):
        assert list(a.ids) == list(b.ids) and list(a.kinds) == list(b.kinds) and a.text.equals(b.text)
        assert np.array_equal(a.vectors, b.vectors) and np.array_equal(a.doc, b.doc)
        assert np.array_equal(a.parent, b.parent) and np.array_equal(a.starts, b.starts)
    assert np.array_equal(view.layers[2].parent_starts, loaded.layers[2].parent_starts)
    assert view.out_links == loaded.out_links and view.component_links == loaded.component_links
    sub_comp = view.layers[2].parent[view.layers[2].position[sub["id"]]]
    assert view.doc_position[moved[0]] in loaded.component_links[int(sub_comp)]
    assert view.titles.equals(loaded.titles) and view.urls.equals(loaded.urls)


@pytest.mark.parametrize("block", [1, 7, 2048])
@pytest.mark.parametrize("n_queries", [1, 3])
def test_blocked_scan_matches_the_matrix_product(block, n_queries):
    from laminae.graph import similarities

    rng = np.random.default_rng(block)
    vectors = rng.standard_normal((100, 16)).astype(np.float32)
    queries = rng.standard_normal((n_queries, 16)).astype(np.float32)
    got = similarities(vectors, queries, block=block)
    assert got.shape == (100, n_queries)
    assert np.allclose(got, vectors @ queries.T, atol=1e-5)


def _sorted_rows(table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def test_a_frame_holds_the_rows_of_its_pinned_version(tmp_path):
    import polars as pl

    from laminae.tasks.storage.index_store import IndexStore

    make_synthetic_index(str(tmp_path), documents=6, components_per_document=3, subcomponents_per_component=2,
                         dim=8, seed=1)
    before = laminae.open(str(tmp_path))
    expected = {name: _sorted_rows(before.table(name).to_arrow().drop_columns(["vector"]))
                for name in ("documents", "components", "subcomponents")}
    expected["edges"] = _sorted_rows(before.table("edges").to_arrow())
    frames = {name: before.frame(layer) for name, layer in
              (("documents", 0), ("components", "components"), ("subcomponents", 2), ("edges", "edges"))}
    assert all(isinstance(f, pl.LazyFrame) for f in frames.values())
    # a second build, and a document deleted: the frames made before still read the old version
    make_synthetic_index(str(tmp_path), documents=4, components_per_document=3, subcomponents_per_component=2,
                         dim=8, seed=2)
    store = IndexStore(str(tmp_path))
    gone = expected["documents"][0]["id"]
    store.delete_documents([gone])
    store.publish("test", {})
    for name, lazy in frames.items():
        got = sorted(lazy.collect().to_dicts(), key=lambda r: r["id"])
        assert got == expected[name] and got, name
    assert before.frame(1).select(pl.len()).collect().item() == 18
    after = laminae.open(str(tmp_path))
    now = after.frame("documents").select("id").collect()["id"].to_list()
    assert len(now) == 9 and gone not in now and gone in {r["id"] for r in expected["documents"]}
    assert sorted(after.frame(2).select("id").collect()["id"].to_list()) == \
        sorted(after.table("subcomponents").to_arrow().column("id").to_pylist())


def test_frame_filters_and_groups_lazily(small):
    import polars as pl

    index, t = small
    rows = [s for s in t["subcomponents"] if s["kind"] == "row"]
    per_doc: dict[str, int] = {}
    for s in rows:
        per_doc[s["document_id"]] = per_doc.get(s["document_id"], 0) + 1
    query = (index.frame("subcomponents").filter(pl.col("kind") == "row")
             .group_by("document_id").agg(pl.len().alias("rows")).sort("document_id"))
    for engine in ("auto", "streaming"):
        got = query.collect(engine=engine)
        assert dict(zip(got["document_id"].to_list(), got["rows"].to_list(), strict=True)) == per_doc
    # a join of two layers: each component's kind beside its subcomponents' count
    subs = index.frame(2).group_by("parent_id").agg(pl.len().alias("n"))
    joined = index.frame(1).join(subs, left_on="id", right_on="parent_id").select("id", "kind", "n").collect()
    assert joined.height == len(t["components"])
    assert set(joined["n"].to_list()) == {4}
    # a filter on a column that is not selected, and a row limit
    first = index.frame(2, batch_size=7).filter(pl.col("kind") == "sentence").select("text").head(9).collect()
    sentences = [s["text"] for s in t["subcomponents"] if s["kind"] == "sentence"]
    assert first.columns == ["text"] and first.height == 9 and set(first["text"].to_list()) <= set(sentences)


def test_frame_vectors_only_when_asked(small):
    index, t = small
    assert "vector" not in index.frame(1).collect_schema().names()
    assert "vector" not in index.frame(1).collect().columns
    with_vectors = index.frame(1, vectors=True).select("id", "vector").collect()
    got = dict(zip(with_vectors["id"].to_list(), with_vectors["vector"].to_numpy(), strict=True))
    expected = _vec(t["components"])
    assert got.keys() == expected.keys()
    assert all(np.array_equal(got[i], expected[i]) for i in expected)


def test_frame_rejects_a_bad_layer_and_says_what_to_install(small, monkeypatch):
    import sys

    index, _ = small
    for bad in (3, "edge", "fetches", True, None):
        with pytest.raises(laminae.ReaderArgumentError, match="0, 1, 2, documents, components, subcomponents or edges"):
            index.frame(bad)
    monkeypatch.setitem(sys.modules, "polars", None)  # as without polars installed
    with pytest.raises(ImportError, match=r"laminae\[frames\]"):
        index.frame(1)


def test_only_a_long_querys_head_is_embedded(small):
    from laminae.query import MAX_EMBEDDED_QUERY_CHARS, embedded_part

    seen: list[str] = []

    def embed(text: str) -> np.ndarray:
        seen.append(text)
        return _query(3)

    index = laminae.open(small[0].root, embed=embed)
    question = "which ledger notes the delivery of batch seven"
    words = " ".join(f"term{i}" for i in range(400))
    index.embed_query(question)
    index.embed_query(words)
    assert seen[0] == question  # a question is embedded whole
    assert len(seen[1]) <= MAX_EMBEDDED_QUERY_CHARS and words.startswith(seen[1])
    assert seen[1] == embedded_part(words) and not seen[1].endswith(" ") and words[len(seen[1])] == " "
