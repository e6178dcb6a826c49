"""Per-page bounds (issue 29 part 4): builds from pages served on 127.0.0.1 that hold too many
pictures, videos, tables and links; each cap is a warning row naming the page, the cap and the
count dropped, and what is over a cap is never fetched. Repeated anchors make one edge each."""

from __future__ import annotations

import io

import pytest

import laminae
from laminae.schemas import document_id
from laminae.tasks.storage.index_store import IndexStore
from tests.conftest import Route, page
from tests.e2e.test_flow import SETTINGS, build

pytestmark = pytest.mark.slow
LIGHT = {**SETTINGS, "detect": {"enabled": False}, "ocr": {"enabled": False}}


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (40, 30), (20, 90, 200)).save(buf, "PNG")
    return buf.getvalue()


def _warnings(opened, run_id: str) -> dict[tuple[str, str], dict]:
    rows = opened.table("errors").to_arrow().to_pylist()
    return {(r["url"], r["reason"]): r for r in rows if r["run_id"] == run_id and r["severity"] == "warning"}


def test_pages_over_the_caps_keep_the_first_components_and_fetch_nothing_more(server, tmp_path, prefect_harness):
    s = server
    gallery = "".join(f"<img src='/p/{i}.png' alt='p{i}'>" for i in range(100_000))
    s.routes["/gallery"] = Route(body=page("Gallery", f"<p>One hundred thousand pictures.</p>{gallery}"))
    assert len(s.routes["/gallery"].body) > 3_000_000
    picture = _png()
    for i in range(40):
        s.routes[f"/p/{i}.png"] = Route(body=picture, content_type="image/png")
    s.routes["/films"] = Route(body=page("Films", "<p>Thirty films.</p>" + "".join(
        f"<video src='/v/{i}.mp4' title='Film {i}'></video>" for i in range(30))))
    s.routes["/tables"] = Route(body=page("Tables", "<p>Forty tables.</p>" + "".join(
        f"<table><tr><th>Year</th><th>Crop</th></tr><tr><td>{1900 + i}</td><td>Rye {i}</td></tr></table>"
        for i in range(40))))
    s.routes["/links"] = Route(body=page("Links", "<p>" + " ".join(
        f"<a href='/t/{i}'>target {i}</a>" for i in range(300)) + ".</p>"))
    settings = {**LIGHT, "parse": {"max_images": 40, "max_videos": 3, "max_tables": 10, "max_links": 100},
                "crawl": {**LIGHT["crawl"], "retries": 0}, "video": {"sidecar_captions": False}}
    index = tmp_path / "index"

    summary = build([s.url(p) for p in ("/gallery", "/films", "/tables", "/links")], index, tmp_path,
                    settings=settings)

    opened = laminae.open(str(index))
    assert opened.stats()["documents"] == 4
    kinds: dict[tuple[str, str], int] = {}
    for comp in opened.table("components").to_arrow().to_pylist():
        key = (comp["document_id"], comp["kind"])
        kinds[key] = kinds.get(key, 0) + 1
    assert kinds[(document_id(s.url("/gallery")), "image")] == 40
    assert kinds[(document_id(s.url("/films")), "video")] == 3
    assert kinds[(document_id(s.url("/tables")), "table")] == 10
    # nothing over a cap was asked for: the first 40 pictures and the first 3 videos only
    pictures = {p for p in s.requests if p.startswith("/p/")}
    assert pictures == {f"/p/{i}.png" for i in range(40)}
    videos = [p for p in s.requests if p.startswith("/v/")]
    assert sorted(set(videos)) == [f"/v/{i}.mp4" for i in range(3)]
    warned = _warnings(opened, summary["run_id"])
    cases = [("/gallery", "too_many_images", "99960 of the page's 100000", "cap of 40"),
             ("/films", "too_many_videos", "27 of the page's 30", "cap of 3"),
             ("/tables", "too_many_tables", "30 of the page's 40", "cap of 10"),
             ("/links", "too_many_links", "200 link targets (200 anchors)", "cap of 100")]
    for path, reason, count, cap in cases:
        row = warned[(s.url(path), reason)]
        assert count in row["message"] and cap in row["message"], row["message"]
        assert row["stage"] == "parse" and row["document_id"] == document_id(s.url(path))
    links = [e for e in opened.table("edges").to_arrow().to_pylist()
             if e["kind"] == "links_to" and e["document_id"] == document_id(s.url("/links"))]
    assert {e["target_url"] for e in links} == {s.url(f"/t/{i}") for i in range(100)}
    docs = {d["id"]: d for d in opened.table("documents").to_arrow().to_pylist()}
    assert any(w.startswith("too_many_links") for w in docs[document_id(s.url("/links"))]["warnings"])
    # the videos are missing on the server: their 404s are the run's only errors
    errors = [r for r in opened.table("errors").to_arrow().to_pylist()
              if r["run_id"] == summary["run_id"] and r["severity"] == "error"]
    assert {r["url"] for r in errors} == {s.url(f"/v/{i}.mp4") for i in range(3)}
    assert summary["status"] == "partial"


def test_identical_anchors_make_one_edge_per_source_and_target(server, tmp_path, prefect_harness):
    s = server
    s.routes["/same"] = Route(body=page("Same", "<p>" + " ".join(["<a href='/there'>there</a>"] * 5000)
                                        + " and <a href='/else#part'>else</a>, <a href='/else'>else again</a>.</p>"))
    s.routes["/there"] = Route(body=page("There", "<p>The page linked five thousand times.</p>"))
    index = tmp_path / "index"
    summary = build([s.url("/same"), s.url("/there")], index, tmp_path, settings=LIGHT)
    assert summary["status"] == "success"
    opened = laminae.open(str(index))
    edges = [e for e in opened.table("edges").to_arrow().to_pylist()
             if e["kind"] == "links_to" and e["document_id"] == document_id(s.url("/same"))]
    pairs = [(e["src_id"], e["target_id"]) for e in edges]
    assert len(pairs) == len(set(pairs))
    there = [e for e in edges if e["target_url"] == s.url("/there")]
    # every anchor is counted once among the components (and once among their sentences)
    assert sum(e["anchors"] for e in there if e["src_layer"] == 1) == 5000
    assert sum(e["anchors"] for e in there if e["src_layer"] == 2) == 5000
    assert len(edges) < 50
    elsewhere = [e for e in edges if e["target_id"] == document_id(s.url("/else")) and e["src_layer"] == 1]
    assert len(elsewhere) == 1 and elsewhere[0]["anchors"] == 2
    assert all(e["resolved"] for e in there)
    assert opened.neighbors([document_id(s.url("/same"))]) == [document_id(s.url("/there"))]

    # an index built before the anchors column stays readable, and builds go on into it
    store = IndexStore(str(index))
    store.table("edges").drop_columns(["anchors"])
    store.publish("old", {})
    old = laminae.open(str(index))
    assert "anchors" not in old.table("edges").schema.names
    assert old.neighbors([document_id(s.url("/same"))]) == [document_id(s.url("/there"))]
    again = build([s.url("/same"), s.url("/there")], index, tmp_path, settings=LIGHT)
    assert again["status"] == "success"
    new = laminae.open(str(index))
    assert new.neighbors([document_id(s.url("/same"))]) == [document_id(s.url("/there"))]
