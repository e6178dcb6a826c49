"""Refresh against a site on 127.0.0.1 that the test edits: only what changed is re-parsed and re-embedded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import laminae
from laminae.schemas import document_id
from tests.conftest import Route, page

pytestmark = pytest.mark.slow
SETTINGS = {"crawl": {"backoff": 0.01, "retries": 0, "timeout_read": 2.0}, "embed": {"device": "cpu", "threads": 1}}


def _etag_route(body: bytes, etag: str, hits: list):
    def handler(h):
        hits.append(h.headers.get("If-None-Match"))
        if h.headers.get("If-None-Match") == etag:
            h.send_response(304)
            h.send_header("ETag", etag)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.send_header("ETag", etag)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return handler


def _nodes(index, url: str) -> dict[str, set[str]]:
    opened = laminae.open(str(index))
    doc = document_id(url)
    return {name: set(opened.table(name).to_arrow().filter(
        opened.table(name).to_arrow().column("document_id").to_numpy(zero_copy_only=False) == doc
    ).column("id").to_pylist()) for name in ("components", "subcomponents", "edges")}


def test_refresh_reembeds_only_what_changed(server, tmp_path, prefect_harness):
    from laminae.flows.build import build_index, refresh_index

    s = server
    para = "Rye bread is dense. It keeps for days. Bakers sour the dough first."
    s.routes["/a"] = Route(body=page("A", f"<p>{para}</p><p>See <a href='/b'>B</a> and <a href='/c'>C</a>.</p>"))
    s.routes["/b"] = Route(body=page("B", "<p>Baguettes are long. They are crisp.</p><p>Back to <a href='/a'>A</a>.</p>"))
    table = "<table><tr><th>Loaf</th><th>Price</th></tr><tr><td>Rye</td><td>6.20</td></tr><tr><td>Bun</td><td>0.90</td></tr></table>"
    s.routes["/c"] = Route(body=page("C", f"<p>Prices at the stall.</p>{table}"))
    hits: list = []
    s.routes["/d"] = _etag_route(page("D", "<p>An unchanging page with an ETag.</p>"), '"v1"', hits)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join(s.url(p) for p in ("/a", "/b", "/c", "/d")) + "\n")
    index = str(tmp_path / "index")
    first = build_index(seeds=str(seeds), index=index, settings=SETTINGS)
    assert first["status"] == "success"

    from laminae.tasks.model_runtime import forget_models, loaded_models

    forget_models()
    again = build_index(seeds=str(seeds), index=index, settings=SETTINGS)
    assert again["embedded"] == 0 and again["documents_indexed"] == 4
    assert not loaded_models()  # nothing to embed or detect: no model was loaded
    first = again

    same = refresh_index(index=index)
    assert same["status"] == "success" and same["embedded"] == 0
    assert same["changes"] == {"unchanged": 4, "changed": 0, "added": 0, "removed": 0}
    assert hits[-1] == '"v1"'  # a conditional request, answered 304
    assert same["manifest_version"] == first["manifest_version"] + 1

    # an index parsed by an older parser: every page is parsed again, its texts from the embedding cache
    from laminae.tasks.parse import PARSER_VERSION

    meta_file = Path(index) / "index.json"
    assert json.loads(meta_file.read_text())["parser"] == PARSER_VERSION
    meta_file.write_text(json.dumps({**json.loads(meta_file.read_text()), "parser": PARSER_VERSION - 1}))
    reparsed = refresh_index(index=index)
    assert reparsed["changes"] == {"unchanged": 0, "changed": 4, "added": 0, "removed": 0}
    assert reparsed["status"] == "success" and reparsed["embedded"] == 0
    assert json.loads(meta_file.read_text())["parser"] == PARSER_VERSION
    assert refresh_index(index=index)["changes"]["unchanged"] == 4

    before_a, before_b, before_c = (_nodes(index, s.url(p)) for p in ("/a", "/b", "/c"))
    s.routes["/a"] = Route(body=page("A", f"<p>{para.replace('keeps for days', 'keeps for a week')}</p>"
                                          "<p>See <a href='/b'>B</a> and <a href='/c'>C</a>.</p>"))
    s.routes["/b"] = Route(body=page("B", "<p>A brand new first paragraph.</p><p>Baguettes are long. They are crisp.</p>"
                                          "<p>Back to <a href='/a'>A</a>.</p>"))
    s.routes["/c"] = Route(body=page("C", "<p>Prices at the stall.</p>" + table.replace("6.20", "6.40")))
    edited = refresh_index(index=index)
    assert edited["changes"] == {"unchanged": 1, "changed": 3, "added": 0, "removed": 0}
    after_a, after_b, after_c = (_nodes(index, s.url(p)) for p in ("/a", "/b", "/c"))
    # /a: one sentence (and its paragraph) changed; the other sentences keep their ids
    assert len(before_a["subcomponents"] - after_a["subcomponents"]) == 1
    assert len(after_a["subcomponents"] - before_a["subcomponents"]) == 1
    # /b: a paragraph inserted at the top; every earlier node keeps its id
    assert before_b["components"] < after_b["components"] and before_b["subcomponents"] < after_b["subcomponents"]
    # /c: one cell edited: one row and the table change, the other row keeps its id
    assert len(before_c["subcomponents"] - after_c["subcomponents"]) == 1
    # new texts only: /a's paragraph + sentence, /b's paragraph + sentence, /c's table + row, + changed documents
    assert 6 <= edited["embedded"] <= 9

    s.routes["/a"] = Route(status=404, body=b"gone")
    s.routes["/b"] = Route(status=500, body=b"down")
    broken = refresh_index(index=index)
    assert broken["status"] == "partial"
    assert broken["changes"]["removed"] == 1 and broken["embedded"] == 0
    assert _nodes(index, s.url("/a")) == {"components": set(), "subcomponents": set(), "edges": set()}
    assert _nodes(index, s.url("/b")) == after_b  # a transient failure keeps the page as it was
    opened = laminae.open(str(index))
    assert document_id(s.url("/a")) not in {d["id"] for d in opened.table("documents").to_arrow().to_pylist()}
    links = [e for e in opened.table("edges").to_arrow().to_pylist() if e["kind"] == "links_to"]
    assert links and all(not e["resolved"] for e in links if e["target_url"] == s.url("/a"))

    s.routes["/b"] = Route(body=page("B", "<p>Back.</p>"))
    fewer = tmp_path / "fewer.txt"
    fewer.write_text(s.url("/c") + "\n")
    dropped = refresh_index(index=index, seeds=str(fewer))
    assert dropped["changes"]["removed"] == 2  # /b and /d left the seed list
    assert {d["url"] for d in laminae.open(str(index)).table("documents").to_arrow().to_pylist()} == {s.url("/c")}


def test_a_page_whose_canonical_url_changes_leaves_no_old_document(server, tmp_path, prefect_harness):
    from laminae.flows.build import build_index, refresh_index

    s = server

    def with_canonical(title: str, canonical: str, text: str) -> bytes:
        return page(title, f"<p>{text}</p>", head=f"<link rel='canonical' href='{s.url(canonical)}'>")

    s.routes["/p"] = Route(body=with_canonical("P", "/p-old", "Proofing takes an hour. Then the loaf is shaped."))
    s.routes["/q"] = Route(body=with_canonical("Q", "/q", "Quiches need a blind-baked crust."))
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{s.url('/p')}\n{s.url('/q')}\n")
    index = str(tmp_path / "index")
    assert build_index(seeds=str(seeds), index=index, settings=SETTINGS)["status"] == "success"
    ids = lambda: {d["id"] for d in laminae.open(index).table("documents").to_arrow().to_pylist()}  # noqa: E731
    assert ids() == {document_id(s.url("/p-old")), document_id(s.url("/q"))}

    s.routes["/p"] = Route(body=with_canonical("P", "/p-new", "Proofing takes an hour. Then the loaf is baked."))
    moved = refresh_index(index=index)
    assert moved["changes"] == {"unchanged": 1, "changed": 1, "added": 0, "removed": 1}
    assert ids() == {document_id(s.url("/p-new")), document_id(s.url("/q"))}
    assert _nodes(index, s.url("/p-old")) == {"components": set(), "subcomponents": set(), "edges": set()}

    s.routes["/q"] = Route(body=with_canonical("Q", "/p-new", "Quiches need a blind-baked crust."))
    merged = refresh_index(index=index)  # /q now names /p's document: one document for both pages
    assert merged["changes"]["removed"] == 1
    assert ids() == {document_id(s.url("/p-new"))}

    s.routes["/p"] = Route(status=500, body=b"down")
    s.routes["/q"] = Route(body=with_canonical("Q", "/q2", "Quiches need a blind-baked crust."))
    kept = refresh_index(index=index)  # /q leaves the shared document while /p cannot be asked
    assert kept["status"] == "partial" and kept["changes"]["removed"] == 0
    assert ids() == {document_id(s.url("/p-new")), document_id(s.url("/q2"))}


def test_changing_the_model_moves_the_whole_index_to_a_new_space(server, tmp_path, tiny_clip, prefect_harness):
    import numpy as np

    from laminae.flows.build import build_index, refresh_index
    from laminae.tasks.storage.index_store import IndexConfigError

    server.routes["/a"] = Route(body=page("A", "<p>Rye bread keeps for days. It is dense.</p>"))
    server.routes["/b"] = Route(body=page("B", "<p>Baguettes are long.</p><table><tr><th>k</th></tr><tr><td>v</td></tr></table>"))
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(server.url("/a") + "\n" + server.url("/b") + "\n")
    index = str(tmp_path / "index")
    first = build_index(seeds=str(seeds), index=index, settings=SETTINGS)
    old = laminae.open(index)
    with pytest.raises(IndexConfigError, match="reembed"):
        build_index(seeds=str(seeds), index=index, settings={**SETTINGS, "embed": {"model": tiny_clip}})
    moved = refresh_index(index=index, model=tiny_clip)
    assert moved["status"] == "success"
    new = laminae.open(index)
    assert new.embedder == {"model_id": tiny_clip, "dim": 16, "image_mode": "pixels"}
    for name in ("documents", "components", "subcomponents"):
        vectors = np.stack(new.table(name).to_arrow().column("vector").to_numpy(zero_copy_only=False))
        assert vectors.shape[1] == 16 and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-4)
    # the reader pinned before keeps the old space
    assert old.embedder["dim"] == 384 and old.version == first["manifest_version"]
    assert len(old.table("components").to_arrow().column("vector")[0]) == 384
    again = refresh_index(index=index)
    assert again["embedded"] == 0


def test_a_reader_during_a_refresh_sees_old_or_new_never_a_mix(server, tmp_path, prefect_harness):
    from laminae.flows.build import build_index, refresh_index

    server.routes["/a"] = Route(body=page("A", "<p>Version one of the page.</p>"))
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(server.url("/a") + "\n")
    index = str(tmp_path / "index")
    build_index(seeds=str(seeds), index=index, settings=SETTINGS)
    before = laminae.open(index)
    snapshot = {n: before.table(n).to_arrow().sort_by("id") for n in ("documents", "components", "subcomponents")}
    server.routes["/a"] = Route(body=page("A", "<p>Version two, rewritten. With two sentences.</p>"))
    refresh_index(index=index)
    for name, table in snapshot.items():
        assert before.table(name).to_arrow().sort_by("id").equals(table)
    after = laminae.open(index)
    texts = after.table("subcomponents").to_arrow().column("text").to_pylist()
    assert sorted(texts) == ["Version two, rewritten.", "With two sentences."]
    assert before.search(before.graph.layers[1].vectors[0], layer=1, k=1)[0].text == "Version one of the page."


def test_superseded_documents_are_only_those_no_page_holds():
    from laminae.tasks.refresh import superseded_documents

    # as documents_by_url gives it: one recorded page per document (/e shares S but is not named)
    before = {"/a": "A", "/b": "B", "/c": "C", "/d": "S"}
    after = {"/a": "A2", "/b": "B", "/d": "D2", "/e": "S"}  # /a and /d moved; /c failed to parse
    reparsed = {"/a", "/b", "/c", "/d", "/e"}
    assert superseded_documents(before, after, reparsed, set()) == ["A"]  # S is still /e's
    assert superseded_documents(before, {**after, "/e": "D2"}, reparsed, set()) == ["A", "S"]
    assert superseded_documents(before, {"/a": "B"}, {"/a"}, set()) == ["A"]  # /a now names /b's document
    assert superseded_documents(before, {"/a": "C"}, {"/a", "/c"}, set()) == ["A"]  # /c failed: C stays
    # /e failed this time (a timeout): it may still hold S, or A; nothing goes
    assert superseded_documents(before, {"/a": "A2", "/d": "D2"}, {"/a", "/d"}, {"/e"}) == []


def test_the_embedding_cache_is_pruned_to_what_the_nodes_were_embedded_from(server, tmp_path, prefect_harness):
    from laminae.flows.build import build_index, refresh_index
    from laminae.tasks.embed.embedders import cache_key

    s = server
    s.routes["/a"] = Route(body=page("A", "<p>Rye bread is dense. It keeps for days.</p>"))
    s.routes["/b"] = Route(body=page("B", "<p>Baguettes are long. They are crisp.</p>"))
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"{s.url('/a')}\n{s.url('/b')}\n")
    index = str(tmp_path / "index")
    settings = {**SETTINGS, "embed": {**SETTINGS["embed"], "cache_slack": 0}}
    first = build_index(seeds=str(seeds), index=index, settings=settings)
    model = first["embedder"]["model_id"]

    def cache_and_nodes() -> tuple[set[str], set[str]]:
        opened = laminae.open(index)
        texts = [t for name in ("documents", "components", "subcomponents")
                 for t in opened.table(name).to_arrow().column("text").to_pylist()]
        cache = set(opened.table("embeddings").to_arrow().column("id").to_pylist())
        return cache, {cache_key(model, t or "") for t in texts}

    assert first["cache_pruned"] == 0
    s.routes["/a"] = Route(body=page("A", "<p>Rye bread is heavy. It keeps for a week.</p>"))
    edited = refresh_index(index=index)
    assert edited["embedded"] > 0 and edited["cache_pruned"] > 0
    cache, live = cache_and_nodes()
    assert cache == live  # the old sentences' vectors are gone, every current one is kept
    again = refresh_index(index=index)
    assert again["embedded"] == 0 and again["cache_pruned"] == 0


def test_a_stored_object_box_gives_the_key_it_was_embedded_under():
    import pyarrow as pa

    from laminae.tasks.embed.embedders import pixel_key, split_by_modality

    image = {"id": "c1", "kind": "image", "image_key": "k", "image_mime": "image/png"}
    fresh = {"id": "s1", "kind": "object", "parent_id": "c1", "bbox": [12.3, 40.1, 99.7, 120.9]}
    stored = {**fresh, "bbox": pa.array([fresh["bbox"]], pa.list_(pa.float32())).to_pylist()[0]}
    assert stored["bbox"] != fresh["bbox"]  # float32 in the table
    keys = [pixel_key("m", image_key, bbox) for row in (fresh, stored)
            for _, image_key, bbox in split_by_modality([image, row], "pixels")[1] if bbox]
    assert keys[0] == keys[1]


def test_refresh_plan_keeps_unchanged_pages_and_removes_gone_and_dropped_ones():
    from laminae.tasks.crawl.results import FetchResult
    from laminae.tasks.refresh import plan_refresh, unsettled_pages

    def ok(url: str, key: str) -> FetchResult:
        return FetchResult(url=url, content_type="text/html", raw_key=key)

    by_url = {"/same": "S", "/edited": "E", "/gone": "G", "/unreached": "U"}
    previous = {"/same": {"raw_key": "k1"}, "/edited": {"raw_key": "k2"}, "/gone": {"raw_key": "k3"}}
    results = [ok("/same", "k1"), ok("/edited", "k2-new"), ok("/new", "k4"),
               FetchResult(url="/gone", error="http_404"), FetchResult(url="/pic.png", content_type="image/png")]
    plan = plan_refresh(results, previous, by_url, follow_links=0, rebuild=False)
    assert [r.url for r in plan.unchanged] == ["/same"] and [r.url for r in plan.parse] == ["/edited", "/new"]
    assert plan.removed == ["G", "U"] and plan.gone == {"/gone"}
    assert plan.changes == {"unchanged": 1, "changed": 1, "added": 1, "removed": 2}
    rebuilt = plan_refresh(results, previous, by_url, follow_links=0, rebuild=True)
    assert [r.url for r in rebuilt.parse] == ["/same", "/edited", "/new"] and not rebuilt.unchanged
    # following links, a transient failure may be why a page was not reached: it stays
    flaky = [*results, FetchResult(url="/slow", error="timeout")]
    assert plan_refresh(flaky, previous, by_url, follow_links=1, rebuild=False).removed == ["G"]
    assert plan_refresh(flaky, previous, by_url, follow_links=0, rebuild=False).removed == ["G", "U"]
    assert plan_refresh(results, previous, by_url, follow_links=1, rebuild=False).removed == ["G", "U"]
    assert unsettled_pages(flaky, plan.parse, {"/edited": "E"}) == {"/slow", "/new"}
    # a host's robots.txt cut at its cap, a link refused as private: warnings, no page left unsettled
    warned = [*flaky, FetchResult(url="/robots.txt", kind="robots", error="robots_truncated", severity="warning"),
              FetchResult(url="/private", error="private_address", severity="warning")]
    assert unsettled_pages(warned, plan.parse, {"/edited": "E"}) == {"/slow", "/new"}
    assert plan_refresh(warned, previous, by_url, follow_links=0, rebuild=False).removed == ["G", "U"]
