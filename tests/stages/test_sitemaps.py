"""Sitemap seeds against a real HTTP server on 127.0.0.1: indexes, gzip, scope, loops, bounds, lastmod."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta

import pytest

from laminae.tasks.batches import crawl_errors
from laminae.tasks.config import CrawlConfig
from laminae.tasks.crawl.fetch import crawl
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.crawl.seeds import Seed, SeedsError, looks_like_sitemap, read_seeds
from laminae.tasks.crawl.sitemaps import SitemapTooLarge, inflate
from laminae.tasks.refresh import plan_refresh
from laminae.tasks.storage.rawstore import RawStore
from tests.conftest import Route, page

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
XML = "application/xml"


def urlset(*entries: str | tuple[str, str]) -> bytes:
    rows = []
    for entry in entries:
        loc, lastmod = (entry, None) if isinstance(entry, str) else entry
        rows.append(f"<url><loc>{loc}</loc>{f'<lastmod>{lastmod}</lastmod>' if lastmod else ''}</url>")
    return f'<?xml version="1.0" encoding="UTF-8"?><urlset {NS}>{"".join(rows)}</urlset>'.encode()


def index(*locs: str) -> bytes:
    rows = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?><sitemapindex {NS}>{rows}</sitemapindex>'.encode()


def fast(**kw) -> CrawlConfig:
    return CrawlConfig(**{"backoff": 0.01, "retries": 0, "timeout_read": 2, "timeout_total": 10, **kw})


def serve_pages(server, *paths: str) -> None:
    for path in paths:
        server.routes[path] = Route(body=page(path, f"<p>The page at {path}.</p>"))


def sitemap_crawl(server, seed_path: str, tmp_path, previous=None, **cfg) -> list[FetchResult]:
    return crawl([Seed(server.url(seed_path))], fast(**cfg), RawStore(tmp_path), previous=previous)


def pages(results: list[FetchResult], server) -> dict[str, FetchResult]:
    return {r.url.removeprefix(server.base): r for r in results if r.kind == "page"}


def problems(results: list[FetchResult], server) -> dict[tuple[str, str], dict]:
    return {(e["url"].removeprefix(server.base), e["reason"]): e for e in crawl_errors(results, "run")}


def test_an_index_of_two_urlsets_one_gzipped_expands_to_in_scope_pages(server, tmp_path):
    s = server
    s.routes["/sitemap_index.xml"] = Route(body=index(s.url("/maps/a.xml"), s.url("/maps/b.xml.gz")),
                                           content_type=XML)
    s.routes["/maps/a.xml"] = Route(body=urlset(s.url("/p1"), s.url("/p2"), "https://elsewhere.invalid/x"),
                                    content_type=XML)
    s.routes["/maps/b.xml.gz"] = Route(body=gzip.compress(urlset(s.url("/p3"), s.url("/p1"))),
                                       content_type="application/gzip")
    serve_pages(s, "/p1", "/p2", "/p3")
    results = sitemap_crawl(s, "/sitemap_index.xml", tmp_path)
    got = pages(results, s)
    assert set(got) == {"/p1", "/p2", "/p3"} and all(r.ok and r.depth == 0 for r in got.values())
    assert s.requests.count("/p1") == 1  # listed twice, fetched once
    errors = problems(results, s)
    assert set(errors) == {("/maps/a.xml", "out_of_scope")}
    skipped = errors[("/maps/a.xml", "out_of_scope")]
    assert skipped["stage"] == "sitemap" and skipped["severity"] == "warning"
    assert "1 URLs" in skipped["message"] and "elsewhere.invalid" in skipped["message"]
    assert not any("elsewhere" in r for r in s.requests)


def test_plain_text_sitemap_and_the_seed_rule(server, tmp_path):
    s = server
    s.routes["/sitemap.txt"] = Route(body=f"{s.url('/t1')}\n{s.url('/t2')}\n".encode(), content_type="text/plain")
    serve_pages(s, "/t1", "/t2")
    assert set(pages(sitemap_crawl(s, "/sitemap.txt", tmp_path), s)) == {"/t1", "/t2"}
    assert all(looks_like_sitemap(u) for u in ("https://a.test/sitemap.xml", "https://a.test/sitemap_index.xml",
                                                "https://a.test/news-sitemap.xml.gz", "https://a.test/feeds/x.xml.gz",
                                                "https://a.test/SITEMAP.TXT"))
    assert not any(looks_like_sitemap(u) for u in ("https://a.test/feed.xml", "https://a.test/sitemap.html",
                                                    "https://a.test/sitemap", "file:///srv/sitemap.xml"))
    f = tmp_path / "seeds.jsonl"
    f.write_text(json.dumps({"url": "https://a.test/feed.xml", "sitemap": True, "team": "docs"}) + "\n"
                 + json.dumps({"url": "https://a.test/sitemap.xml", "sitemap": False}) + "\n")
    feed, plain = read_seeds(f)
    assert feed.is_sitemap and feed.annotations == {"team": "docs"} and not plain.is_sitemap
    f.write_text(json.dumps({"url": "https://a.test/x", "sitemap": "yes"}) + "\n")
    with pytest.raises(SeedsError, match="true"):
        read_seeds(f)


def test_loops_are_cut_and_each_sitemap_is_fetched_once(server, tmp_path):
    s = server
    s.routes["/sitemap.xml"] = Route(body=index(s.url("/sitemap.xml"), s.url("/inner.xml")), content_type=XML)
    s.routes["/inner.xml"] = Route(body=index(s.url("/sitemap.xml"), s.url("/leaf.xml")), content_type=XML)
    s.routes["/leaf.xml"] = Route(body=urlset(s.url("/p1")), content_type=XML)
    serve_pages(s, "/p1")
    results = sitemap_crawl(s, "/sitemap.xml", tmp_path)
    assert set(pages(results, s)) == {"/p1"}
    assert [s.requests.count(p) for p in ("/sitemap.xml", "/inner.xml", "/leaf.xml")] == [1, 1, 1]
    errors = problems(results, s)
    assert set(errors) == {("/sitemap.xml", "loop"), ("/inner.xml", "loop")}
    assert all(e["severity"] == "warning" for e in errors.values())


def test_a_malformed_sitemap_is_an_error_row_and_the_rest_is_read(server, tmp_path):
    s = server
    s.routes["/sitemap.xml"] = Route(body=index(*(s.url(p) for p in ("/good.xml", "/bad.xml", "/html.xml",
                                                                      "/missing.xml"))), content_type=XML)
    s.routes["/good.xml"] = Route(body=urlset(s.url("/p1"), s.url("/p2")), content_type=XML)
    s.routes["/bad.xml"] = Route(body=urlset(s.url("/p3"))[:-20], content_type=XML)  # cut off mid-document
    s.routes["/html.xml"] = Route(body=page("Not a sitemap", "<p>hello</p>"))
    serve_pages(s, "/p1", "/p2", "/p3")
    results = sitemap_crawl(s, "/sitemap.xml", tmp_path)
    assert {"/p1", "/p2"} <= set(pages(results, s))
    errors = problems(results, s)
    assert set(errors) == {("/bad.xml", "malformed"), ("/html.xml", "malformed"), ("/missing.xml", "http_404")}
    assert "not well-formed" in errors[("/bad.xml", "malformed")]["message"]
    assert all(e["stage"] == "sitemap" and e["severity"] == "error" for e in errors.values())
    # a sitemap that could not be read drops no page on refresh: its pages were not reached, not removed
    by_url = {s.url("/p1"): "d1", s.url("/p9"): "d9"}
    previous = {s.url("/p1"): {"raw_key": pages(results, s)["/p1"].raw_key}}
    assert plan_refresh(results, previous, by_url, 0, False).removed == []
    readable = [r for r in results if r.kind == "page" or r.severity == "warning"]
    assert plan_refresh(readable, previous, by_url, 0, False).removed == ["d9"]


def test_size_is_capped_once_decompressed(server, tmp_path):
    s = server
    inflated = urlset(*(s.url(f"/p{i}") for i in range(2000)))  # about 80 kB of XML
    bomb = gzip.compress(inflated + b" " * 5_000_000)  # a few kB that inflate to 5 MB
    assert len(bomb) < 20_000
    s.routes["/sitemap.xml.gz"] = Route(body=bomb, content_type="application/gzip")

    def encoded(handler):  # the same bytes as a gzip Content-Encoding of an XML sitemap
        handler.send_response(200)
        handler.send_header("Content-Type", XML)
        handler.send_header("Content-Encoding", "gzip")
        handler.send_header("Content-Length", str(len(bomb)))
        handler.end_headers()
        handler.wfile.write(bomb)

    s.routes["/encoded-sitemap.xml"] = encoded
    for seed in ("/sitemap.xml.gz", "/encoded-sitemap.xml"):
        results = sitemap_crawl(s, seed, tmp_path, sitemap_max_bytes=200_000)
        assert pages(results, s) == {}
        [row] = crawl_errors(results, "run")
        assert (row["url"], row["reason"], row["stage"]) == (s.url(seed), "too_large", "sitemap")
    with pytest.raises(SitemapTooLarge):
        inflate(bomb, 200_000)
    assert inflate(gzip.compress(inflated), 200_000) == inflated
    with pytest.raises(ValueError, match="truncated"):
        inflate(gzip.compress(inflated)[:-100], 200_000)


def test_depth_file_count_and_page_bounds(server, tmp_path):
    s = server
    s.routes["/sitemap.xml"] = Route(body=index(*(s.url(p) for p in ("/l1.xml", "/a.xml", "/b.xml"))),
                                     content_type=XML)
    s.routes["/l1.xml"] = Route(body=index(s.url("/l2.xml")), content_type=XML)
    s.routes["/l2.xml"] = Route(body=urlset(s.url("/deep")), content_type=XML)
    s.routes["/a.xml"] = Route(body=urlset(s.url("/p1"), s.url("/p2")), content_type=XML)
    s.routes["/b.xml"] = Route(body=urlset(s.url("/p3")), content_type=XML)
    serve_pages(s, "/deep", "/p1", "/p2", "/p3")

    results = sitemap_crawl(s, "/sitemap.xml", tmp_path, sitemap_max_depth=1)
    assert set(pages(results, s)) == {"/p1", "/p2", "/p3"} and "/l2.xml" not in s.requests
    assert set(problems(results, s)) == {("/l1.xml", "too_deep")}

    results = sitemap_crawl(s, "/sitemap.xml", tmp_path, sitemap_max_files=3)
    assert set(pages(results, s)) == {"/p1", "/p2"}  # the index, l1.xml and a.xml
    assert set(problems(results, s)) == {("/sitemap.xml", "too_many_sitemaps")}

    results = sitemap_crawl(s, "/sitemap.xml", tmp_path, max_pages=2)
    assert len(pages(results, s)) == 2
    assert {k[1] for k in problems(results, s)} == {"max_pages"}


def test_robots_txt_applies_to_sitemaps(server, tmp_path):
    s = server
    s.routes["/robots.txt"] = Route(body=b"User-agent: *\nDisallow: /private/\n", content_type="text/plain")
    s.routes["/sitemap.xml"] = Route(body=index(s.url("/private/sitemap.xml"), s.url("/open.xml")),
                                     content_type=XML)
    s.routes["/open.xml"] = Route(body=urlset(s.url("/p1"), s.url("/private/p2")), content_type=XML)
    serve_pages(s, "/p1", "/private/p2")
    results = sitemap_crawl(s, "/sitemap.xml", tmp_path)
    assert "/private/sitemap.xml" not in s.requests and "/private/p2" not in s.requests
    assert pages(results, s)["/p1"].ok and pages(results, s)["/private/p2"].error == "robots_disallowed"
    assert problems(results, s)[("/private/sitemap.xml", "robots_disallowed")]["stage"] == "sitemap"


def test_lastmod_no_later_than_the_last_fetch_skips_the_request(server, tmp_path):
    s = server
    then = datetime.now(UTC) - timedelta(days=30)
    serve_pages(s, "/old", "/new", "/plain", "/dated")
    store = RawStore(tmp_path)
    s.routes["/sitemap.xml"] = Route(body=urlset(s.url("/old"), s.url("/new"), s.url("/plain"), s.url("/dated")),
                                     content_type=XML)
    first = pages(sitemap_crawl(s, "/sitemap.xml", tmp_path), s)
    previous = {r.url: {"raw_key": r.raw_key, "content_type": r.content_type, "final_url": r.final_url,
                        "size": r.size, "etag": r.etag, "last_modified": r.last_modified, "fetched_at": then}
                for r in first.values()}
    s.requests.clear()
    s.routes["/sitemap.xml"] = Route(body=urlset(
        (s.url("/old"), (then - timedelta(days=1)).isoformat()), (s.url("/new"), datetime.now(UTC).isoformat()),
        s.url("/plain"), (s.url("/dated"), (then - timedelta(days=2)).date().isoformat())), content_type=XML)
    again = pages(sitemap_crawl(s, "/sitemap.xml", tmp_path, previous=previous), s)
    assert s.requests.count("/sitemap.xml") == 1
    assert "/old" not in s.requests and "/dated" not in s.requests  # unchanged by their lastmod: not asked
    assert {"/new", "/plain"} <= set(s.requests)
    for path in ("/old", "/dated"):
        assert again[path].not_modified and again[path].raw_key == first[path].raw_key
        assert store.get(again[path].raw_key) == store.get(first[path].raw_key)
    assert not again["/new"].not_modified and again["/new"].ok
    changes = plan_refresh(list(again.values()), previous, {r.url: r.url for r in first.values()}, 0, False).changes
    assert changes["unchanged"] == 4  # /new and /plain were fetched: same bytes
