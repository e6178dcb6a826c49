"""End-to-end: a folder of files as the seed, built then refreshed as the files are touched,
edited, added and deleted; the folder is listed again at every refresh."""

from __future__ import annotations

import os

import pytest

import laminae
from laminae.schemas import document_id
from tests.conftest import page
from tests.support.synthetic_pdf import png, report_pdf

pytestmark = pytest.mark.slow
SETTINGS = {"crawl": {"backoff": 0.01, "retries": 0}, "embed": {"device": "cpu", "threads": 1}}
SECRET = b"the outside secret 7f3a"


def documents(index) -> dict[str, dict]:
    return {d["url"]: d for d in laminae.open(str(index)).table("documents").to_arrow().to_pylist()}


def test_a_folder_builds_and_refreshes(tmp_path, prefect_harness):
    from laminae.flows.build import build_index, refresh_index

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.html").write_bytes(page("Secret", SECRET.decode()))
    site = tmp_path / "site"
    (site / "guide").mkdir(parents=True)
    (site / "img").mkdir()
    (site / "a.html").write_bytes(page("Sourdough", "<p>Sourdough needs a starter. See <a href='guide/b.html'>"
                                                    "shaping</a>.</p><figure><img src='img/loaf.png' width='240' "
                                                    "height='160'><figcaption>A loaf</figcaption></figure>"))
    (site / "guide" / "b.html").write_bytes(page("Shaping", "<p>Shape the loaf gently. Back to "
                                                            "<a href='../a.html'>sourdough</a>.</p>"))
    (site / "guide" / "c.html").write_bytes(page("Scoring", "<p>Score the top with a blade.</p>"))
    (site / "report.pdf").write_bytes(report_pdf(pages=1, links=False))
    (site / "img" / "loaf.png").write_bytes(png(seed=3))
    (site / "leak.html").symlink_to(outside / "secret.html")
    (site / "broken.html").mkdir()  # a folder with a page's name: listed as a folder, not read
    os.mkfifo(site / "pipe.html")
    index = tmp_path / "index"
    url = {name: (site / name).as_uri() for name in ("a.html", "guide/b.html", "guide/c.html", "guide/d.html",
                                                     "report.pdf", "leak.html", "pipe.html")}

    first = build_index(seeds=str(site), index=str(index), settings=SETTINGS)
    assert first["status"] == "partial"  # two files could not be used; the rest is indexed
    assert first["documents_indexed"] == 4
    assert first["errors_by_stage"] == {"crawl:out_of_scope": 1, "crawl:not_a_file": 1}
    assert set(documents(index)) == {url["a.html"], url["guide/b.html"], url["guide/c.html"], url["report.pdf"]}
    opened = laminae.open(str(index))
    edges = [e for e in opened.table("edges").to_arrow().to_pylist() if e["kind"] == "links_to"]
    assert {(e["document_id"], e["dst_id"]) for e in edges if e["resolved"]} >= {
        (document_id(url["a.html"]), document_id(url["guide/b.html"])),
        (document_id(url["guide/b.html"]), document_id(url["a.html"]))}
    images = [c for c in opened.table("components").to_arrow().to_pylist() if c["kind"] == "image"]
    assert images and all(c["image_key"] and c["image_mime"] == "image/png" for c in images
                          if c["document_id"] == document_id(url["a.html"]))
    errors = {e["url"]: e for e in opened.table("errors").to_arrow().to_pylist()}
    assert errors[url["leak.html"]]["reason"] == "out_of_scope"
    assert str(site / "pipe.html") in errors[url["pipe.html"]]["message"]

    a, b = site / "a.html", site / "guide" / "b.html"
    info = a.stat()
    os.utime(a, ns=(info.st_atime_ns, info.st_mtime_ns + 5_000_000_000))  # touched, not changed
    b.write_bytes(page("Shaping", "<p>Shape the loaf gently, then let it rest. Back to "
                                  "<a href='../a.html'>sourdough</a>.</p>"))
    os.utime(b, ns=(info.st_atime_ns, info.st_mtime_ns + 5_000_000_000))
    (site / "guide" / "c.html").unlink()
    (site / "guide" / "d.html").write_bytes(page("Baking", "<p>Bake with steam for the first twenty minutes.</p>"))
    refreshed = refresh_index(index=str(index))
    assert refreshed["changes"] == {"unchanged": 2, "changed": 1, "added": 1, "removed": 1}
    assert set(documents(index)) == {url["a.html"], url["guide/b.html"], url["guide/d.html"], url["report.pdf"]}
    components = laminae.open(str(index)).table("components").to_arrow().to_pylist()
    assert any("let it rest" in (c["text"] or "") for c in components
               if c["document_id"] == document_id(url["guide/b.html"]))

    same = refresh_index(index=str(index))
    assert same["changes"] == {"unchanged": 4, "changed": 0, "added": 0, "removed": 0}
    assert not any(SECRET in p.read_bytes() for p in (index / "raw").rglob("*") if p.is_file())
