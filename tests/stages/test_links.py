"""Link resolution over a real LanceDB index: aliases of a document (its URLs, redirect hops) and
the edges rewritten when a target resolves differently; the store's bulk reads and row deletes
a refresh does its bookkeeping with."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from laminae.schemas.ids import document_id
from laminae.schemas.tables import table_schemas
from laminae.tasks.nodes.link_resolution import alias_map, resolve_links
from laminae.tasks.refresh import documents_by_url, previous_fetches
from laminae.tasks.storage.index_store import IndexStore


def _store(tmp_path) -> IndexStore:
    store = IndexStore(tmp_path / "index")
    store.prepare({"model_id": "m", "dim": 2, "image_mode": "text_proxy"})
    schemas = table_schemas(2)
    docs = [
        {"id": "A", "url": "http://x.test/a", "final_url": "http://x.test/a-final", "canonical_url": "http://x.test/shared"},
        {"id": "B", "url": "http://x.test/b", "final_url": "http://x.test/b", "canonical_url": "http://x.test/shared"},
        {"id": "C", "url": "http://x.test/c", "final_url": None, "canonical_url": None},
    ]
    store.table("documents").add(pa.Table.from_pylist(
        [{**d, "kind": "html", "vector": [1.0, 0.0]} for d in docs], schema=schemas["documents"]))
    fetches = [{"id": "f1", "url": "http://x.test/old-b", "final_url": "http://x.test/b",
                "redirects": ["http://x.test/hop-b", "http://x.test/b"]},
               {"id": "f2", "url": "http://x.test/a", "final_url": "http://x.test/a-final", "redirects": [], "error": "x"}]
    store.table("fetches").add(pa.Table.from_pylist(fetches, schema=schemas["fetches"]))
    targets = {"e1": "http://x.test/old-b", "e2": "http://x.test/shared", "e3": "http://x.test/gone",
               "e4": "http://X.test/a-final#top"}
    edges = [{"id": k, "kind": "links_to", "src_id": "cC", "src_layer": 1, "dst_id": document_id(t), "document_id": "C",
              "target_url": t, "target_id": document_id(t), "resolved": False} for k, t in targets.items()]
    edges.append({"id": "e5", "kind": "links_to", "src_id": "cC", "src_layer": 1, "dst_id": "A", "document_id": "C",
                  "target_url": "http://x.test/b", "target_id": "B", "resolved": True})  # target_id is B's own id
    store.table("edges").add(pa.Table.from_pylist(edges, schema=schemas["edges"]))
    return store


def test_aliases_name_a_document_by_its_urls_and_the_redirect_hops_that_end_at_it(tmp_path):
    store = _store(tmp_path)
    aliases = dict(alias_map(store).iter_rows())
    assert aliases[document_id("http://x.test/a")] == "A"
    assert aliases[document_id("http://x.test/a-final")] == "A"
    assert aliases[document_id("http://x.test/shared")] == "A"  # both claim it: the first document wins
    assert aliases[document_id("http://x.test/old-b")] == "B"  # a redirect chain ending at B's final URL
    assert aliases[document_id("http://x.test/hop-b")] == "B"
    assert aliases[document_id("http://x.test/c")] == "C"
    assert {aliases[d] for d in "ABC"} == {"A", "B", "C"} and all(aliases[d] == d for d in "ABC")
    assert len(aliases) == 10  # the 3 ids and a, a-final, shared, b, c, old-b, hop-b: nothing else


def test_resolve_links_rewrites_only_the_edges_whose_target_resolves_differently(tmp_path):
    store = _store(tmp_path)
    assert resolve_links(store) == {"changed": 4, "resolved": 4, "unresolved": 1}
    edges = {r["id"]: r for r in store.table("edges").to_arrow().to_pylist()}
    assert (edges["e1"]["dst_id"], edges["e1"]["resolved"]) == ("B", True)
    assert (edges["e2"]["dst_id"], edges["e2"]["resolved"]) == ("A", True)
    assert (edges["e3"]["dst_id"], edges["e3"]["resolved"]) == (document_id("http://x.test/gone"), False)
    assert (edges["e4"]["dst_id"], edges["e4"]["resolved"]) == ("A", True)  # the same URL, normalized
    assert (edges["e5"]["dst_id"], edges["e5"]["resolved"]) == ("B", True)
    assert edges["e5"]["target_url"] == "http://x.test/b" and edges["e1"]["anchor_text"] is None
    assert resolve_links(store) == {"changed": 0, "resolved": 4, "unresolved": 1}  # settled


def test_previous_fetches_and_documents_by_url(tmp_path):
    store = _store(tmp_path)
    previous = previous_fetches(store)
    assert list(previous) == ["http://x.test/old-b"]  # the fetch that failed is no validator
    assert previous["http://x.test/old-b"]["final_url"] == "http://x.test/b"
    assert set(previous["http://x.test/old-b"]) == {"url", "final_url", "etag", "last_modified", "raw_key",
                                                     "content_type", "size", "fetched_at", "error"}
    assert previous_fetches(store, ["http://x.test/a"]) == {} and previous_fetches(store, []) == {}
    assert documents_by_url(store) == {"http://x.test/a": "A", "http://x.test/b": "B", "http://x.test/c": "C"}


def test_delete_rows_deletes_exactly_the_rows_a_scan_named(tmp_path):
    store = _store(tmp_path)
    scanned = store.table("edges").search().select(["id"]).with_row_id(True).limit(None).to_arrow()
    doomed = np.array([r for r, i in zip(scanned.column("_rowid").to_pylist(), scanned.column("id").to_pylist(),
                                         strict=True) if i in ("e2", "e4")], np.uint64)
    store.delete_rows("edges", doomed, chunk=1)
    assert sorted(store.table("edges").to_arrow().column("id").to_pylist()) == ["e1", "e3", "e5"]
