"""Folders and ``file://`` URLs as seeds: real files in a temporary folder, read by the real crawler."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from laminae.schemas.ids import normalize_url
from laminae.tasks.batches import crawl_errors
from laminae.tasks.config import CrawlConfig
from laminae.tasks.crawl.fetch import crawl, fetch_images
from laminae.tasks.crawl.hosts import seed_scope
from laminae.tasks.crawl.hrefs import extract_links, resolve_href
from laminae.tasks.crawl.pictures import attach_images
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.crawl.seeds import Seed, SeedsError, read_seeds
from laminae.tasks.refresh import plan_refresh
from laminae.tasks.storage.rawstore import RawStore
from tests.conftest import page
from tests.support.synthetic_pdf import png, report_pdf

SECRET = b"the outside secret 7f3a"


def make_site(tmp_path: Path) -> Path:
    """site/ with two pages linking each other, a subfolder page, a PDF, a picture, a symlink out of
    the folder, a FIFO and a folder named like a page; outside/ beside it holds the secret."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.html").write_bytes(page("Secret", SECRET.decode()))
    (outside / "secret.png").write_bytes(png(seed=9))
    site = tmp_path / "site"
    (site / "sub").mkdir(parents=True)
    (site / "images").mkdir()
    (site / "a.html").write_bytes(page("A", "<p>Alpha links to <a href='sub/b.html#top'>B</a> and "
                                            "<a href='dir.html'>a folder</a>.</p>"
                                            "<img src='images/x.png' width='120' height='80' alt='x'>"))
    (site / "sub" / "b.html").write_bytes(page("B", "<p>Beta goes back to <a href='../a.html'>A</a> and out to "
                                                    "<a href='../../outside/secret.html'>S</a>.</p>"))
    (site / "doc.pdf").write_bytes(report_pdf(pages=1, links=False))
    (site / "images" / "x.png").write_bytes(png(seed=1))
    (site / "build.py").write_text("not a document")  # no format laminae reads: not listed
    (site / ".hidden").mkdir()
    (site / ".hidden" / "h.html").write_bytes(page("H", "<p>hidden</p>"))
    (site / "dir.html").mkdir()
    (site / "leak.html").symlink_to(outside / "secret.html")
    os.mkfifo(site / "pipe.html")
    return site


def fast(**kw) -> CrawlConfig:
    return CrawlConfig(**{"backoff": 0.01, **kw})


def by_path(results: list[FetchResult], site: Path) -> dict[str, FetchResult]:
    base = site.as_uri() + "/"
    return {r.url.removeprefix(base): r for r in results}


def raw_blobs(index: Path) -> list[bytes]:
    return [p.read_bytes() for p in (index / "raw").rglob("*") if p.is_file()]


def test_folder_seed_reads_its_pages_and_nothing_outside(tmp_path):
    site = make_site(tmp_path)
    seeds = read_seeds(site)
    assert [s.url for s in seeds] == [site.resolve().as_uri() + "/"]
    index = tmp_path / "index"
    got = by_path(crawl(seeds, fast(), RawStore(index)), site)
    assert set(got) == {"a.html", "sub/b.html", "doc.pdf", "leak.html", "pipe.html"}  # dir.html is a folder
    assert got["a.html"].ok and got["a.html"].content_type == "text/html"
    assert got["sub/b.html"].ok and got["doc.pdf"].content_type == "application/pdf"
    assert RawStore(index).get(got["a.html"].raw_key) == (site / "a.html").read_bytes()
    info = (site / "a.html").stat()
    assert got["a.html"].etag == f"{info.st_size}-{info.st_mtime_ns}"
    assert got["leak.html"].error == "out_of_scope" and "outside the seed folders" in got["leak.html"].message
    assert got["pipe.html"].error == "not_a_file" and str(site / "pipe.html") in got["pipe.html"].message
    assert not any(SECRET in blob for blob in raw_blobs(index))
    assert not any(SECRET.decode() in (r.message or "") for r in got.values())
    errors = {e["url"]: e for e in crawl_errors(list(got.values()), "run")}
    assert errors[got["leak.html"].url]["reason"] == "out_of_scope" and errors[got["leak.html"].url]["stage"] == "crawl"
    assert errors[got["pipe.html"].url]["reason"] == "not_a_file"


def test_relative_links_resolve_between_files_and_follow_stays_in_the_folder(tmp_path):
    site = make_site(tmp_path)
    a = (site / "a.html").as_uri()
    assert extract_links((site / "a.html").read_bytes(), a) == [(site / "sub" / "b.html").as_uri(),
                                                               (site / "dir.html").as_uri()]
    assert resolve_href("https://example.org/p", a) is None  # a web page never links into the disk
    assert resolve_href("https://example.org/p", "file:///etc/passwd") is None
    index = tmp_path / "index"
    got = by_path(crawl([Seed(a)], fast(follow_links=3), RawStore(index)), site)
    # b.html's link out of the folder is not followed; the folder named dir.html is no file
    assert set(got) == {"a.html", "sub/b.html", "dir.html"}
    assert got["sub/b.html"].ok and got["sub/b.html"].depth == 1
    assert got["dir.html"].error == "not_a_file" and "folder" in got["dir.html"].message
    assert not any(SECRET in blob for blob in raw_blobs(index))


def test_pictures_are_read_from_the_folder_only(tmp_path):
    site = make_site(tmp_path)
    scopes = {seed_scope(s.url) for s in read_seeds(site)}
    inside = resolve_href((site / "a.html").as_uri(), "images/x.png")
    outside = resolve_href((site / "a.html").as_uri(), "../outside/secret.png")
    got = fetch_images([inside, outside], fast(), RawStore(tmp_path / "index"), scopes)
    assert got[inside].ok and got[inside].content_type == "image/png"
    assert got[outside].error == "out_of_scope"
    components = [{"kind": "image", "image_url": u, "document_id": "d", "image_key": None, "image_mime": None,
                   "image_width": None, "image_height": None} for u in (inside, outside)]
    fetches, problems = attach_images(components, fast(), RawStore(tmp_path / "index"), scopes)
    assert components[0]["image_key"] and components[0]["image_mime"] == "image/png"
    assert components[1]["image_key"] is None
    assert [(url, reason) for _, url, reason, _ in problems] == [(outside, "out_of_scope")]
    assert [f.url for f in fetches] == [inside]


def test_an_unchanged_size_and_mtime_costs_no_read(tmp_path):
    site = make_site(tmp_path)
    seeds = read_seeds(site)
    store = RawStore(tmp_path / "index")
    first = by_path(crawl(seeds, fast(), store), site)["a.html"]
    previous = {first.url: {"etag": first.etag, "raw_key": first.raw_key, "content_type": first.content_type,
                            "final_url": first.final_url, "size": first.size, "last_modified": first.last_modified}}
    path = site / "a.html"
    info = path.stat()
    # same size, same mtime, other bytes: only a read would notice, and none happens
    path.write_bytes(path.read_bytes().replace(b"Alpha", b"Omega"))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    kept = by_path(crawl(seeds, fast(), store, previous=previous), site)["a.html"]
    assert kept.ok and kept.not_modified and kept.raw_key == first.raw_key
    # touched: the mtime moves, the file is read again
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
    read = by_path(crawl(seeds, fast(), store, previous=previous), site)["a.html"]
    assert read.ok and not read.not_modified and read.raw_key != first.raw_key
    assert b"Omega" in store.get(read.raw_key)


def test_size_caps_and_missing_files(tmp_path):
    site = make_site(tmp_path)
    (site / "big.html").write_bytes(page("Big", "<p>" + "x" * 5000 + "</p>"))
    (site / "empty.html").write_bytes(b"")
    (site / "gone.html").symlink_to(site / "never-written.html")
    got = by_path(crawl(read_seeds(site), fast(max_body_bytes=2048), RawStore(tmp_path / "index")), site)
    assert got["big.html"].error == "too_large" and "2048" in got["big.html"].message
    assert got["empty.html"].error == "empty_body"
    assert got["gone.html"].error == "not_found" and "never-written.html" in got["gone.html"].message
    missing = crawl([Seed((site / "nowhere").as_uri() + "/")], fast(), RawStore(tmp_path / "index"))
    assert [(r.kind, r.error) for r in missing] == [("folder", "not_found")]


def test_max_pages_bounds_a_folder_listing(tmp_path):
    site = tmp_path / "many"
    site.mkdir()
    for i in range(5):
        (site / f"p{i}.html").write_bytes(page(f"P{i}", f"<p>page {i}</p>"))
    got = crawl(read_seeds(site), fast(max_pages=3), RawStore(tmp_path / "index"))
    assert [r.url.rsplit("/", 1)[1] for r in got if r.kind == "page"] == ["p0.html", "p1.html", "p2.html"]
    cut = [r for r in got if r.kind == "folder"]
    assert len(cut) == 1 and cut[0].error == "max_pages" and cut[0].severity == "warning"
    assert crawl_errors(cut, "run")[0]["severity"] == "warning"


def test_seeds_file_with_file_urls(tmp_path):
    site = make_site(tmp_path)
    f = tmp_path / "seeds.txt"
    f.write_text(f"{site.as_uri()}\nfile://localhost{site}/sub/../a.html\n"
                 f'{{"url": "{site.as_uri()}/sub/", "team": "docs"}}\nhttps://a.test/x\n')
    seeds = read_seeds(f)
    assert [s.url for s in seeds] == [site.as_uri() + "/", (site / "a.html").as_uri(),
                                      (site / "sub").as_uri() + "/", "https://a.test/x"]
    assert seeds[2].annotations == {"team": "docs"}
    assert seed_scope(seeds[1].url) == site.as_uri() + "/"  # a file seed may read its own folder
    f.write_text("file://fileserver/share/docs/\n")
    with pytest.raises(SeedsError, match="file:///absolute/folder/"):
        read_seeds(f)
    f.write_text("ftp://nope\n")
    with pytest.raises(SeedsError, match="file:///absolute/folder/"):
        read_seeds(f)
    assert normalize_url("file://localhost/a%20b/c.html") == normalize_url("file:///a b/c.html") == "file:///a%20b/c.html"


def test_a_folder_that_cannot_be_listed_drops_nothing():
    folder = FetchResult(url="file:///s/sub/", kind="folder", error="unreadable", message="permission denied")
    page_a = FetchResult(url="file:///s/a.html", content_type="text/html", raw_key="k1")
    by_url = {"file:///s/a.html": "d1", "file:///s/sub/b.html": "d2"}
    previous = {"file:///s/a.html": {"raw_key": "k1"}}
    assert plan_refresh([folder, page_a], previous, by_url, 0, False).removed == []
    listed = plan_refresh([page_a], previous, by_url, 0, False)
    assert listed.removed == ["d2"] and listed.changes["unchanged"] == 1
    gone = FetchResult(url="file:///s/sub/b.html", error="not_found", message="gone")
    assert plan_refresh([page_a, gone], previous, by_url, 0, False).gone == {"file:///s/sub/b.html"}
