"""End-to-end: the Prefect flow builds real indexes from sites served on 127.0.0.1."""

from __future__ import annotations

import io
import json
import struct
import zlib

import numpy as np
import pyarrow as pa
import pytest

import laminae
from laminae.flows.demo import SiteServer
from laminae.schemas import TABLES, document_id
from tests.conftest import ROOT, Route, page

pytestmark = pytest.mark.slow
SETTINGS = {"crawl": {"backoff": 0.01, "retries": 1, "timeout_read": 1.0, "timeout_total": 5},
            "embed": {"device": "cpu", "threads": 1}}


def build(seeds: list[str], index, tmp_path, **kw) -> dict:
    from laminae.flows.build import build_index

    seeds_file = tmp_path / "seeds.txt"
    seeds_file.write_text("\n".join(seeds) + "\n")
    return build_index(seeds=str(seeds_file), index=str(index), settings=kw.pop("settings", SETTINGS), **kw)


def contents(index, name: str) -> pa.Table:
    tbl = laminae.open(str(index)).table(name).to_arrow()
    return tbl.sort_by("id")


@pytest.fixture(scope="module")
def site_index(tmp_path_factory, prefect_harness):
    tmp = tmp_path_factory.mktemp("site")
    with SiteServer() as site:
        first = build(site.seeds(), tmp / "index", tmp)
        snapshot = {name: contents(tmp / "index", name) for name in ("documents", "components", "subcomponents", "edges")}
        second = build(site.seeds(), tmp / "index", tmp)
    return tmp / "index", first, second, snapshot


def test_sample_site_builds_every_layer(site_index):
    index, first, _, _ = site_index
    assert first["status"] == "success", first["errors_by_stage"]
    stats = laminae.open(str(index)).stats()
    assert stats["documents"] == 14
    assert all(stats["components"][k] > 0 for k in ("paragraph", "table", "image"))
    assert stats["subcomponents"]["sentence"] > 0 and stats["subcomponents"]["row"] > 0
    assert stats["edges"]["contains"] == sum(stats["components"].values()) + sum(stats["subcomponents"].values())
    assert stats["links_to_resolved"] > 20
    assert stats["links_to_unresolved"] >= 2  # the missing page and the off-site link
    assert stats["embedder"] == {"model_id": "sentence-transformers/all-MiniLM-L6-v2#onnx-int8", "dim": 384,
                                 "image_mode": "text_proxy"}


def test_every_node_has_a_real_vector(site_index):
    index = site_index[0]
    for name in ("documents", "components", "subcomponents"):
        tbl = contents(index, name)
        assert tbl.column("vector").null_count == 0
        vectors = np.stack(tbl.column("vector").to_numpy(zero_copy_only=False))
        assert vectors.shape[1] == 384
        assert np.all(np.abs(np.linalg.norm(vectors, axis=1) - 1) < 1e-3)


def test_graph_is_consistent(site_index):
    index = site_index[0]
    docs = set(contents(index, "documents").column("id").to_pylist())
    comps = contents(index, "components").to_pylist()
    subs = contents(index, "subcomponents").to_pylist()
    comp_ids = {c["id"] for c in comps}
    assert all(c["document_id"] in docs and c["parent_id"] == c["document_id"] for c in comps)
    assert all(s["parent_id"] in comp_ids for s in subs)
    edges = contents(index, "edges").to_pylist()
    links = [e for e in edges if e["kind"] == "links_to"]
    resolved = [e for e in links if e["resolved"]]
    assert all(e["dst_id"] in docs for e in resolved)
    assert all(e["dst_id"] not in docs for e in links if not e["resolved"])
    missing = [e for e in links if e["target_url"].endswith("/starter-recipes.html")]
    assert missing and not missing[0]["resolved"]
    layers = {e["src_layer"] for e in links}
    assert layers == {1, 2}  # components and the sentences/rows holding the anchors
    images = [c for c in comps if c["kind"] == "image"]
    assert all(c["image_key"] and c["image_width"] > 0 for c in images)
    bus = [c for c in images if (c["image_url"] or "").endswith("/photos/bus.jpg")]
    assert bus and bus[0]["image_mime"] == "image/jpeg"


def test_second_build_changes_nothing(site_index):
    index, _, second, snapshot = site_index
    assert second["status"] == "success"
    assert second["embedded"] == 0
    for name, before in snapshot.items():
        assert contents(index, name).equals(before), f"{name} changed on a rebuild"


def test_runs_and_manifests_are_recorded(site_index):
    index, first, second, _ = site_index
    opened = laminae.open(str(index))
    assert opened.version == second["manifest_version"] == first["manifest_version"] + 1
    runs = opened.table("runs").to_arrow().to_pylist()
    assert {r["id"] for r in runs} >= {first["run_id"], second["run_id"]}
    assert set(first["seconds_by_stage"]) >= {"crawl", "parse", "embed", "write", "total"}
    assert laminae.open(str(index), version=first["manifest_version"]).version == first["manifest_version"]
    assert set(opened.manifest["tables"]) == set(TABLES)


def _png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 10)) + chunk(b"IEND", b"")


def _good_png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (40, 30), (200, 10, 10)).save(buf, "PNG")
    return buf.getvalue()


def test_bad_input_is_recorded_and_the_run_goes_on(server, tmp_path, prefect_harness):
    s = server
    s.routes["/good"] = Route(body=page("Good", "<p>Good page with <a href='/keep'>a link</a>.</p>"
                                        "<img src='/ok.png' alt='ok'>"))
    s.routes["/pics"] = Route(body=page("Pics", "<p>Broken pictures.</p><img src='/broken.png' alt='broken'>"
                                        "<img src='/bomb.png' alt='bomb'><img src='/zero.png' alt='zero'>"))
    s.routes["/keep"] = Route(body=page("Keep", "<p>This page is indexed first and fails later.</p>"))
    s.routes["/malformed"] = Route(body=b"<html><body><p>Unclosed <b>tags <table><tr><td>cell")
    s.routes["/latin1"] = Route(body="<html><head><meta charset='iso-8859-1'></head><body><p>Crème</p></body></html>"
                                .encode("latin-1"), content_type="text/html")
    s.routes["/binary"] = Route(body=b"\x00\xff\x00binary" * 50)
    s.routes["/empty"] = Route(body=b"")
    s.routes["/script-only"] = Route(body=b"<html><body><div id='app'></div><script>render()</script></body></html>")
    s.routes["/error"] = Route(status=500, body=b"boom")
    s.routes["/gone"] = Route(status=404, body=b"gone")
    s.routes["/slow"] = Route(body=page("Slow", "<p>slow</p>"), delay=2.0)
    s.routes["/loop"] = Route(status=302, headers={"Location": "/loop2"})
    s.routes["/loop2"] = Route(status=302, headers={"Location": "/loop"})
    s.routes["/huge"] = Route(body=b"<html><body><p>" + b"x" * 300_000 + b"</p></body></html>")
    s.routes["/ok.png"] = Route(body=_good_png(), content_type="image/png")
    s.routes["/broken.png"] = Route(body=b"\x89PNG\r\n\x1a\nnot really a png", content_type="image/png")
    s.routes["/bomb.png"] = Route(body=_png(200_000, 200_000), content_type="image/png")
    s.routes["/zero.png"] = Route(body=b"", content_type="image/png")
    index = tmp_path / "index"
    settings = {**SETTINGS, "crawl": {**SETTINGS["crawl"], "max_body_bytes": 100_000}}

    first = build([s.url("/good"), s.url("/keep")], index, tmp_path, settings=settings)
    assert first["status"] == "success"
    keep_id = document_id(s.url("/keep"))
    keep_before = laminae.open(str(index)).table("components").count_rows(f"document_id = '{keep_id}'")
    assert keep_before == 1

    s.routes["/keep"] = Route(status=503, body=b"down")
    paths = ["/good", "/pics", "/keep", "/malformed", "/latin1", "/binary", "/empty", "/error", "/gone", "/slow",
             "/loop", "/huge", "/script-only"]
    summary = build([s.url(p) for p in paths], index, tmp_path, settings=settings)
    assert summary["status"] == "partial"
    opened = laminae.open(str(index))
    errors = [e for e in opened.table("errors").to_arrow().to_pylist() if e["run_id"] == summary["run_id"]]
    reasons = {(e["url"].removeprefix(s.base), e["stage"], e["reason"]) for e in errors if e["severity"] == "error"}
    assert reasons == {
        ("/keep", "crawl", "http_503"),
        ("/binary", "crawl", "unsupported_content_type"),
        ("/empty", "crawl", "empty_body"),
        ("/error", "crawl", "http_500"),
        ("/gone", "crawl", "http_404"),
        ("/slow", "crawl", "timeout"),
        ("/loop", "crawl", "redirect_loop"),
        ("/huge", "crawl", "too_large"),
        ("/script-only", "parse", "no_content"),
        ("/broken.png", "image", "undecodable_image"),
        ("/bomb.png", "image", "decompression_bomb"),
        ("/zero.png", "image", "empty_body"),
    }
    assert all(e["message"] for e in errors)
    # what was indexed before is kept; good pages of this run are indexed
    assert opened.table("components").count_rows(f"document_id = '{keep_id}'") == keep_before
    docs = {d["url"].removeprefix(s.base) for d in opened.table("documents").to_arrow().to_pylist()}
    assert docs == {"/good", "/pics", "/keep", "/malformed", "/latin1"}
    texts = " ".join(opened.table("components").to_arrow().column("text").to_pylist())
    assert "Crème" in texts and "Unclosed tags" in texts
    images = {c["image_url"].removeprefix(s.base): c for c in opened.table("components").to_arrow().to_pylist()
              if c["kind"] == "image"}
    assert images["/ok.png"]["image_key"] and images["/ok.png"]["image_width"] == 40
    assert images["/broken.png"]["image_key"] is None and images["/broken.png"]["vector"] is not None


def test_links_resolve_through_redirects_and_canonical_urls(server, tmp_path, prefect_harness):
    s = server
    s.routes["/a"] = Route(body=page("A", "<p>To <a href='/old'>old</a>, <a href='/canonical-b'>canonical</a>, "
                                          "<a href='/b'>final</a> and <a href='/nowhere'>nowhere</a>.</p>"))
    s.routes["/old"] = Route(status=301, headers={"Location": "/b"})
    s.routes["/b"] = Route(body=page("B", "<p>B text.</p>", head="<link rel='canonical' href='/canonical-b'>"))
    seeds_file = tmp_path / "seeds.jsonl"
    seeds_file.write_text(f'{{"url": "{s.url("/a")}", "team": "docs"}}\n{s.url("/old")}\n')
    from laminae.flows.build import build_index

    summary = build_index(seeds=str(seeds_file), index=str(tmp_path / "i"), settings=SETTINGS)
    assert summary["status"] == "success"
    opened = laminae.open(str(tmp_path / "i"))
    docs = {d["url"].removeprefix(s.base): d for d in opened.table("documents").to_arrow().to_pylist()}
    assert set(docs) == {"/a", "/old"}
    b = docs["/old"]
    assert b["id"] == document_id(s.url("/canonical-b")) and b["final_url"] == s.url("/b")
    assert docs["/a"]["annotations"] == '{"team": "docs"}'
    links = [e for e in opened.table("edges").to_arrow().to_pylist()
             if e["kind"] == "links_to" and e["src_layer"] == 1]
    by_target = {e["target_url"].removeprefix(s.base): e for e in links}
    for target in ("/old", "/canonical-b", "/b"):
        assert by_target[target]["dst_id"] == b["id"] and by_target[target]["resolved"]
    assert not by_target["/nowhere"]["resolved"]
    assert by_target["/nowhere"]["dst_id"] == document_id(s.url("/nowhere"))


def test_cli_stats_demo_and_bad_seeds(site_index, tmp_path, capsys, prefect_harness, monkeypatch):
    from laminae.flows.cli import main

    index = site_index[0]
    assert main(["stats", "--index", str(index), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["documents"] == 14 and stats["edges"]["links_to"] > 0
    assert main(["stats", "--index", str(tmp_path / "none")]) == 2
    assert "laminae build" in capsys.readouterr().err
    assert main(["build", "--seeds", str(tmp_path / "missing.txt"), "--index", str(tmp_path / "x")]) == 2
    assert "does not exist" in capsys.readouterr().err
    seeds = tmp_path / "one.txt"
    seeds.write_text("http://127.0.0.1:9/x\n")
    monkeypatch.setenv("LAMINAE_DETECT__WEIGHTS", str(tmp_path / "nope.pt"))
    assert main(["build", "--seeds", str(seeds), "--index", str(tmp_path / "y")]) == 2
    assert "never downloaded" in capsys.readouterr().err
    monkeypatch.delenv("LAMINAE_DETECT__WEIGHTS")
    monkeypatch.delenv("LAMINAE_PROGRESS", raising=False)
    assert main(["demo", "--index", str(tmp_path / "demo"), "--port", "0", "--progress", "on"]) == 0
    captured = capsys.readouterr()
    assert "success" in captured.out and "documents       14" in captured.out
    assert f"report          {tmp_path / 'demo' / 'report.html'}" in captured.out  # the demo ends with its report
    assert (tmp_path / "demo" / "report.html").exists()
    for stage in ("fetch", "parse", "embed", "write"):  # the bars, drawn because --progress on
        assert f"{stage:<6}: 100%" in captured.err, stage


def test_sample_site_has_summaries_and_people(site_index):
    index = site_index[0]
    docs = contents(index, "documents").to_pylist()
    assert all(d["summary"] and d["text"].startswith(d["title"]) for d in docs)
    subs = contents(index, "subcomponents").to_pylist()
    sentences = {s["text"] for s in subs if s["kind"] == "sentence"}
    for d in docs:
        assert any(s in d["summary"] for s in sentences)
    comps = {c["id"]: c for c in contents(index, "components").to_pylist()}
    objects = [s for s in subs if s["kind"] == "object"]
    photos = {comps[o["parent_id"]]["image_url"].rsplit("/", 1)[1] for o in objects if o["label"] == "person"}
    assert photos == {"bus.jpg", "zidane.jpg"}
    for o in objects:
        x0, y0, x1, y1 = o["bbox_norm"]
        assert 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1
        assert o["text"].startswith("person in Image:")


def test_embedding_cache_survives_id_changes_and_endpoint_falls_back(server, tmp_path, prefect_harness):
    body = page("Moved", "<p>The same paragraph, twice served. It has two sentences.</p>")
    server.routes["/a"] = Route(body=body)
    index = tmp_path / "index"
    first = build([server.url("/a")], index, tmp_path)
    assert first["embedded"] > 0
    server.routes["/b"] = Route(body=body)
    settings = {**SETTINGS, "summarize": {"mode": "endpoint", "base_url": "http://127.0.0.1:9/v1",
                                          "endpoint_model": "none", "timeout": 1, "retries": 0}}
    moved = build([server.url("/b")], index, tmp_path, settings=settings)
    assert moved["status"] == "success"
    assert moved["embedded"] == 0 and moved["reused_vectors"] > 0
    assert moved["warnings_by_stage"] == {"summarize:endpoint_failed": 1}
    docs = {d["url"]: d for d in contents(index, "documents").to_pylist()}
    assert docs[server.url("/b")]["summary"] == docs[server.url("/a")]["summary"]


def test_image_capable_model_embeds_pixels(tiny_clip, tmp_path, prefect_harness):
    with SiteServer() as site:
        settings = {**SETTINGS, "embed": {"model": tiny_clip, "device": "cpu", "threads": 1}}
        summary = build(site.seeds(), tmp_path / "clip", tmp_path, settings=settings)
    assert summary["status"] == "success"
    opened = laminae.open(str(tmp_path / "clip"))
    assert opened.embedder == {"model_id": tiny_clip, "dim": 16, "image_mode": "pixels"}
    comps = opened.table("components").to_arrow().to_pylist()
    from laminae.schemas.pictures import load_image
    from laminae.tasks.config import EmbedConfig
    from laminae.tasks.embed.embedders import load_embedder
    from laminae.tasks.storage.rawstore import RawStore

    embedder = load_embedder(EmbedConfig(model=tiny_clip, device="cpu"))
    bus = next(c for c in comps if c["image_url"] and c["image_url"].endswith("bus.jpg"))
    pixels = embedder.embed_images([load_image(RawStore(tmp_path / "clip").get(bus["image_key"]))])[0]
    assert np.allclose(bus["vector"], pixels, atol=1e-4)
    assert not np.allclose(bus["vector"], embedder.embed([bus["text"]])[0], atol=1e-3)
    from laminae.tasks.storage.index_store import IndexConfigError

    with pytest.raises(IndexConfigError, match="never mixed"):
        build(site.seeds(), tmp_path / "clip", tmp_path)  # the default text model into a CLIP index


def test_agent_loop_example_runs_on_the_demo_index(site_index, capsys):
    import importlib.util

    path = ROOT / "examples" / "agent_loop.py"
    spec = importlib.util.spec_from_file_location("agent_loop", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    index = laminae.open(str(site_index[0]))
    evidence = module.run(index, "Which bread bakes for a whole day at low heat?", max_steps=4, threshold=0.99)
    assert evidence and evidence == sorted(evidence, key=lambda h: -module.similarity(h))
    assert any("Pumpernickel" in h.text for h in evidence)
    out = capsys.readouterr().out
    assert "step 0  retrieve" in out and "local g=1" in out
    # the demo index answers FiF hops and LILaC beam search with string queries (the index's own model)
    hop = index.documents("rye bread", k=3, granularity=2)
    assert "Rye" in hop[0].extra["title"]
    beam = index.beam_search(["rye bread", "baked for hours"], beam=5, k=3)
    assert beam.components and beam.edges[0][2] >= beam.edges[-1][2]
    image = index.search("people waiting by a bus", layer=1, k=1, kinds=["image"])[0]
    node = index.get([image.id])[0]
    assert node["image"][:3] == b"\xff\xd8\xff"
    obj = index.search("person", layer=2, k=1, kinds=["object"])[0]
    crop = index.get([obj.id])[0]["crop"]
    assert crop.startswith(b"\x89PNG")
    # words only drawn into a picture (the market poster) or scanned (the report's last page) are found
    poster = index.search("Millbrook harvest fair", layer=2, k=1, kinds=["text"])[0]
    assert "Millbrook" in poster.text and index.get([poster.id])[0]["crop"].startswith(b"\x89PNG")
    assert "Millbrook" in index.get([index.parent(poster.id)])[0]["text"]
    letter = index.search("hailstorm near Ashford", layer=1, k=1, mode="fts")[0]
    assert letter.extra["url"].endswith("guild-report.pdf") and index.get([letter.id])[0]["page"] == 3


def test_follow_links_builds_the_linked_pages(tmp_path, prefect_harness):
    with SiteServer() as site:
        summary = build([site.base_url + "index.html"], tmp_path / "f", tmp_path, follow_links=3)
    assert summary["status"] == "partial"  # the site links to one missing page: a 404 error row
    assert summary["errors_by_stage"] == {"crawl:http_404": 1}
    opened = laminae.open(str(tmp_path / "f"))
    assert opened.stats()["documents"] == 14  # baguette.html and the PDF are 3 links from the start page
    fetches = opened.table("fetches").to_arrow().to_pylist()
    assert not any("wikipedia" in (f["url"] or "") for f in fetches)  # the off-site link is not followed


def test_pdfs_become_documents_and_bad_pdfs_are_recorded(server, tmp_path, prefect_harness):
    import pymupdf

    from tests.support.synthetic_pdf import PdfWriter, png, report_pdf

    s = server
    w = PdfWriter(title="Quay report")
    w.heading("Quay report", 1)
    w.paragraph("The new quay opened in June. The harbour page has the timetable.", links={"harbour page": "/good"})
    w.table(["Berth", "Ships"], [["North", "1,204"], ["South", "986"]], links={"South": "/good"})
    w.image(png(seed=5), caption="Figure 1: the quay")
    pdf = pymupdf.open(stream=w.tobytes(), filetype="pdf")
    s.routes["/good"] = Route(body=page("Good", "<p>Harbour timetable; the <a href='/quay.pdf'>quay report</a>.</p>"))
    s.routes["/quay.pdf"] = Route(body=w.tobytes(), content_type="application/pdf")
    s.routes["/download"] = Route(body=report_pdf(pages=2), content_type="application/octet-stream")
    s.routes["/truncated.pdf"] = Route(body=report_pdf(pages=2)[:5000], content_type="application/pdf")
    s.routes["/locked.pdf"] = Route(body=pdf.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u"),
                                    content_type="application/pdf")
    s.routes["/garbage.pdf"] = Route(body=b"%PDF-1.4\nnot really a pdf", content_type="application/pdf")
    blank = pymupdf.open()
    blank.new_page()
    s.routes["/blank.pdf"] = Route(body=blank.tobytes(), content_type="application/pdf")
    s.routes["/long.pdf"] = Route(body=report_pdf(pages=5), content_type="application/pdf")
    settings = {**SETTINGS, "parse": {"pdf_max_pages": 4}}
    paths = ["/good", "/quay.pdf", "/download", "/truncated.pdf", "/locked.pdf", "/garbage.pdf", "/blank.pdf",
             "/long.pdf"]
    summary = build([s.url(p) for p in paths], tmp_path / "index", tmp_path, settings=settings)
    assert summary["status"] == "partial"
    opened = laminae.open(str(tmp_path / "index"))
    errors = [e for e in opened.table("errors").to_arrow().to_pylist() if e["run_id"] == summary["run_id"]]
    reasons = {(e["url"].removeprefix(s.base), e["stage"], e["reason"], e["severity"]) for e in errors}
    assert {r for r in reasons if r[3] == "error"} == {
        ("/locked.pdf", "parse", "encrypted_pdf", "error"),
        ("/garbage.pdf", "parse", "unparsable_pdf", "error"),
        ("/blank.pdf", "parse", "no_text_layer", "error"),
        ("/long.pdf", "parse", "pdf_too_large", "error"),
    }
    assert ("/truncated.pdf", "parse", "repaired_pdf", "warning") in reasons
    docs = {d["url"].removeprefix(s.base): d for d in opened.table("documents").to_arrow().to_pylist()}
    assert set(docs) == {"/good", "/quay.pdf", "/download", "/truncated.pdf"}
    assert docs["/quay.pdf"]["kind"] == "pdf" and docs["/quay.pdf"]["title"] == "Quay report"
    assert docs["/download"]["kind"] == "pdf"  # sniffed from the bytes, not the declared type
    quay = document_id(s.url("/quay.pdf"))
    comps = [c for c in opened.table("components").to_arrow().to_pylist() if c["document_id"] == quay]
    assert sorted(c["kind"] for c in comps) == ["image", "paragraph", "table"]
    assert all(c["page"] == 1 and len(c["bbox"]) == 4 for c in comps)
    image = next(c for c in comps if c["kind"] == "image")
    assert image["image_key"] and image["image_mime"] == "image/png" and image["caption"] == "Figure 1: the quay"
    assert opened.get([image["id"]])[0]["image"].startswith(b"\x89PNG")
    rows = [r for r in opened.table("subcomponents").to_arrow().to_pylist() if r["document_id"] == quay
            and r["kind"] == "row"]
    assert sorted(r["cells"] for r in rows) == [["North", "1,204"], ["South", "986"]]
    links = [e for e in opened.table("edges").to_arrow().to_pylist() if e["document_id"] == quay
             and e["kind"] == "links_to"]
    good = document_id(s.url("/good"))
    assert {(e["src_layer"], e["dst_id"], e["resolved"]) for e in links} == {(1, good, True), (2, good, True)}
    assert opened.neighbors([good], direction="out") == [quay]


def test_sample_site_indexes_its_pdf_report(site_index):
    index = laminae.open(str(site_index[0]))
    [report] = [d for d in index.table("documents").to_arrow().to_pylist() if d["kind"] == "pdf"]
    assert report["title"] == "Guild of Bakers: Annual Report 2025" and report["url"].endswith("/guild-report.pdf")
    comps = [c for c in index.table("components").to_arrow().to_pylist() if c["document_id"] == report["id"]]
    kinds = [c["kind"] for c in comps]
    assert kinds.count("paragraph") >= 5 and kinds.count("table") == 1 and kinds.count("image") == 1
    rows = [s for s in index.table("subcomponents").to_arrow().to_pylist()
            if s["document_id"] == report["id"] and s["kind"] == "row"]
    assert ["Baguette", "2,102,650", "-2%"] in [r["cells"] for r in rows]
    links = [e for e in index.table("edges").to_arrow().to_pylist()
             if e["document_id"] == report["id"] and e["kind"] == "links_to"]
    assert len(links) >= 10 and all(e["resolved"] for e in links)
    assert any(e["target_url"].endswith("/sourdough.html") and e["src_layer"] == 2 for e in links)  # from a row
    bakers = document_id(next(d["url"] for d in index.table("documents").to_arrow().to_pylist()
                              if d["url"].endswith("/bakers.html")))
    assert report["id"] in index.neighbors([bakers], direction="out")


def test_report_renders_the_index_and_its_history(site_index, tmp_path, capsys):
    from laminae.flows.cli import main
    from laminae.tasks.report.run_report import write_report

    index = site_index[0]
    assert (index / "report.html").exists()  # written by every build
    path = write_report(str(index), tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert path == str(tmp_path / "r.html")
    stats = laminae.open(str(index)).stats()
    for title in ("Nodes per layer and kind", "Seconds per stage", "Throughput", "Errors by stage and reason",
                  "Subcomponents per document", "Out-degree", "In-degree", "Seconds per run"):
        assert title in page
    assert page.count("<svg") >= 8 and "<script" not in page and "src=" not in page
    assert f">{stats['components']['paragraph']}</text>" in page  # the bar's value
    assert "document (pdf)" in page and "Guild of Bakers" in page  # the largest documents name the PDF
    runs = laminae.open(str(index)).table("runs").to_arrow().to_pylist()
    assert sum(r["id"] in page for r in runs) == len(runs) == 2
    assert main(["report", "--index", str(index), "--out", str(tmp_path / "cli.html")]) == 0
    assert (tmp_path / "cli.html").read_text().startswith("<!doctype html>")
    assert main(["report", "--index", str(tmp_path / "nothing")]) == 2
    assert "not a laminae index" in capsys.readouterr().err


def test_each_run_publishes_a_markdown_artifact(site_index):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    _, first, second, _ = site_index
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["laminae-build"])))
    by_run = {run["run_id"]: next((a for a in found if run["run_id"] in a.data), None) for run in (first, second)}
    assert all(by_run.values()), [a.data[:80] for a in found]
    text = by_run[first["run_id"]].data
    assert f"| 1 | paragraph | {first['counts']['components']['paragraph']} |" in text
    assert "| links_to |" in text and "| embed |" in text and "**Errors**: none" in text
    assert by_run[first["run_id"]].flow_run_id is not None


def test_a_duplicate_in_a_later_batch_is_dropped_with_its_problems(server, tmp_path, prefect_harness):
    s = server
    head = f"<link rel='canonical' href='{s.url('/canon')}'>"
    body = "<p>Same story under two addresses.</p><img src='/missing.png' alt='lost'>"
    s.routes["/a"] = Route(body=page("A", body, head))
    s.routes["/b"] = Route(body=page("B", body, head))
    settings = {**SETTINGS, "batch_documents": 1}
    summary = build([s.url("/a"), s.url("/b")], tmp_path / "index", tmp_path, settings=settings)
    opened = laminae.open(str(tmp_path / "index"))
    docs = opened.table("documents").to_arrow().to_pylist()
    assert [d["url"] for d in docs] == [s.url("/a")] and docs[0]["id"] == document_id(s.url("/canon"))
    errors = [e for e in opened.table("errors").to_arrow().to_pylist() if e["run_id"] == summary["run_id"]]
    assert sorted((e["url"].removeprefix(s.base), e["reason"]) for e in errors) == [
        ("/b", "duplicate_document"), ("/missing.png", "http_404")]  # the copy's image error is dropped
