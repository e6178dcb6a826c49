"""An index built before its tables gained nullable columns (edges.anchors, search_terms) gets them
on its next build or refresh, before anything is written, so the values of that run land: the
refresh that reuses the index's embedder (no model loaded) used to skip the step and wrote the
rows with the tables' old schema, dropping the new columns' values."""

from __future__ import annotations

import lancedb
import pytest

import laminae
from laminae.schemas import document_id
from laminae.schemas.tables import table_schemas
from laminae.tasks.storage.index_store import IndexStore
from tests.conftest import Route, page

SETTINGS = {"crawl": {"backoff": 0.01, "retries": 0, "timeout_read": 2.0}, "embed": {"device": "cpu", "threads": 1},
            "detect": {"enabled": False}, "ocr": {"enabled": False}}
NEW = {"edges": ["anchors"], "components": ["search_terms"], "subcomponents": ["search_terms"]}


def _as_built_before_the_columns(index: str) -> None:
    store = IndexStore(index)
    for name, columns in NEW.items():
        store.table(name).drop_columns(columns)
    store.publish("old", {})
    for name, columns in NEW.items():
        assert not set(columns) & set(store.table(name).schema.names)


def _anchors(index: str, url: str) -> dict[str, int | None]:
    edges = laminae.open(index).table("edges").to_arrow().to_pylist()
    return {e["target_url"]: e["anchors"] for e in edges
            if e["kind"] == "links_to" and e["document_id"] == document_id(url) and e["src_layer"] == 1}


@pytest.mark.slow
def test_a_refresh_adds_the_missing_columns_and_their_values_land(server, tmp_path, prefect_harness):
    from laminae.flows.build import build_index, refresh_index

    s = server
    s.routes["/a"] = Route(body=page("A", "<p>See <a href='/b'>B</a>, <a href='/b'>B again</a> and <a href='/c'>C</a>.</p>"))
    s.routes["/b"] = Route(body=page("B", "<p>Baguettes are long.</p>"))
    s.routes["/c"] = Route(body=page("C", "<p>Rye is dense.</p>"))
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join(s.url(p) for p in ("/a", "/b", "/c")) + "\n")
    index = str(tmp_path / "index")
    assert build_index(seeds=str(seeds), index=index, settings=SETTINGS)["status"] == "success"
    assert _anchors(index, s.url("/a")) == {s.url("/b"): 2, s.url("/c"): 1}
    _as_built_before_the_columns(index)

    s.routes["/a"] = Route(body=page("A", "<p>Now <a href='/b'>B</a>, <a href='/c'>C</a> and <a href='/c'>C</a>"
                                          " twice.</p>"))
    refreshed = refresh_index(index=index)

    assert refreshed["status"] == "success" and refreshed["changes"]["changed"] == 1
    store = IndexStore(index)
    for name, columns in NEW.items():
        assert set(columns) <= set(store.table(name).schema.names), name
    assert _anchors(index, s.url("/a")) == {s.url("/b"): 1, s.url("/c"): 2}
    # the pages the refresh did not rewrite keep their rows, the new columns null
    components = laminae.open(index).table("components").to_arrow().to_pylist()
    assert {c["document_id"] for c in components} == {document_id(s.url(p)) for p in ("/a", "/b", "/c")}

    # a build (not a refresh) into it with the same model goes the same way
    _as_built_before_the_columns(index)
    s.routes["/a"] = Route(body=page("A", "<p>Last: <a href='/b'>B</a>.</p>"))
    assert build_index(seeds=str(seeds), index=index, settings=SETTINGS)["status"] == "success"
    assert _anchors(index, s.url("/a")) == {s.url("/b"): 1}


def test_a_move_to_another_model_adds_the_missing_columns_too(tmp_path):
    index = str(tmp_path)
    store = IndexStore(index)
    store.prepare({"model_id": "m", "dim": 4, "image_mode": "text"})
    db = lancedb.connect(index)
    for name, columns in NEW.items():
        db.open_table(name).drop_columns(columns)

    assert IndexStore(index).prepare({"model_id": "other", "dim": 8, "image_mode": "text"}, reembed=True) is True

    for name, columns in NEW.items():
        assert set(columns) <= set(db.open_table(name).schema.names)
        assert db.open_table(name).schema.field(columns[0]).type == table_schemas(8)[name].field(columns[0]).type
