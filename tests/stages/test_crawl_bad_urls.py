"""The crawl meets bad URLs and stays up: a redirect to no URL, a seed that is none, a bad seed
line, a password kept to its origin, one page under two spellings, and a window of requests
instead of one task per seed. Real HTTP servers on 127.0.0.1, the real crawler."""

from __future__ import annotations

import asyncio
import base64
from http.server import BaseHTTPRequestHandler

from laminae.tasks.batches import crawl_errors
from laminae.tasks.config import CrawlConfig
from laminae.tasks.crawl.fetch import crawl, crawl_async
from laminae.tasks.crawl.seeds import Seed
from laminae.tasks.storage.rawstore import RawStore
from tests.conftest import Route, RouteServer, page


def fast(**kw) -> CrawlConfig:
    return CrawlConfig(**{"backoff": 0.01, "retries": 0, "timeout_connect": 2, "timeout_read": 2,
                          "timeout_total": 10, **kw})


def test_a_redirect_to_no_url_and_a_seed_that_is_none_are_rows(server, tmp_path):
    server.routes["/port"] = Route(status=302, headers={"Location": "http://127.0.0.1:99999/x"})
    server.routes["/ftp"] = Route(status=301, headers={"Location": "//[user@]host/path"})
    server.routes["/ok"] = Route(body=page("Ok", "<p>fine</p>"))
    seeds = [Seed(server.url("/port")), Seed(server.url("/ftp")), Seed("http://127.0.0.1:abc/"),
             Seed("seeds.txt:4", error="seeds.txt:4: 'javascript:x' is not an absolute http(s) or file URL"),
             Seed(server.url("/ok"))]
    results = crawl(seeds, fast(), RawStore(tmp_path))
    got = {r.url: (r.error, r.message) for r in results}
    assert got[server.url("/port")][0] == "bad_redirect" and "99999" in got[server.url("/port")][1]
    assert got[server.url("/ftp")][0] == "bad_redirect"
    assert got["http://127.0.0.1:abc/"][0] == "bad_url"
    assert got["seeds.txt:4"] == ("bad_seed", "seeds.txt:4: 'javascript:x' is not an absolute http(s) or file URL")
    assert got[server.url("/ok")][0] is None
    rows = {(r["url"], r["reason"]) for r in crawl_errors(results, "run")}
    assert ("seeds.txt:4", "bad_seed") in rows and ("http://127.0.0.1:abc/", "bad_url") in rows


def test_a_seeds_password_goes_to_its_origin_only(server, tmp_path):
    other = RouteServer()
    heard: dict[str, str | None] = {}

    def private(handler: BaseHTTPRequestHandler) -> None:
        heard[handler.path] = handler.headers.get("Authorization")
        body = page("Elsewhere", "<p>the other host</p>")
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    try:
        server.routes["/in"] = private
        server.routes["/away"] = Route(status=302, headers={"Location": other.url("/there")})
        other.routes["/there"] = private
        auth = ("reader", "s3cret")
        host = other.base.removeprefix("http://")
        results = crawl([Seed(server.url("/in"), auth=auth), Seed(server.url("/away"), auth=auth)],
                        fast(allow_hosts=[host], allow_private=["127.0.0.1"]), RawStore(tmp_path))
        assert all(r.ok for r in results), [(r.url, r.error, r.message) for r in results]
        assert heard["/in"] == "Basic " + base64.b64encode(b"reader:s3cret").decode()
        assert heard["/there"] is None  # the redirect led to another origin: no password (curl's rule)
        assert "s3cret" not in repr(results)
    finally:
        other.close()


def test_one_page_under_two_spellings_is_fetched_and_marked_once(server, tmp_path):
    body = page("P", "<p>One page. <a href='q.html'>Q</a></p>")  # from /p.html/ it would be /p.html/q.html
    server.routes["/p.html"] = Route(body=body)
    server.routes["/p.html/"] = Route(body=body)
    server.routes["/other.html"] = Route(body=page("Other", "<p>Other bytes, <a href='/q.html'>Q</a></p>"))
    server.routes["/q.html"] = Route(body=page("Q", "<p>q</p>"))
    results = crawl([Seed(server.url("/p.html")), Seed(server.url("/p.html/")), Seed(server.url("/other.html")),
                     Seed(server.url("/./p.html"))], fast(follow_links=1), RawStore(tmp_path))
    by_url = {r.url: r for r in results}
    assert [r.url for r in results][:3] == [server.url(p) for p in ("/p.html", "/p.html/", "/other.html")]
    assert by_url[server.url("/p.html")].same_as is None
    assert by_url[server.url("/p.html/")].same_as == server.url("/p.html")
    assert by_url[server.url("/other.html")].same_as is None  # other bytes: its own page
    assert server.requests.count("/p.html") == 1 and server.requests.count("/q.html") == 1
    assert "/p.html/q.html" not in server.requests  # the second spelling's links are not followed again


def test_a_crawl_holds_a_window_of_requests_not_one_task_per_seed(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    for i in range(600):
        (site / f"p{i}.html").write_bytes(page(f"P{i}", f"<p>page {i}</p>"))
    seeds = [Seed((site / f"p{i}.html").as_uri()) for i in range(600)]
    most = 0

    def count(_res) -> None:
        nonlocal most
        most = max(most, len(asyncio.all_tasks()))

    results = asyncio.run(crawl_async(seeds, fast(total_concurrency=4), RawStore(tmp_path / "index"),
                                      on_result=count))
    assert [r.url for r in results] == [s.url for s in seeds] and all(r.ok for r in results)
    assert 1 < most <= 4 * 4 + 1  # the window (4 x total_concurrency) and the crawl's own task


def test_a_sitemap_loc_that_is_no_url_is_one_warning_and_the_rest_is_fetched(server, tmp_path):
    from tests.stages.test_sitemaps import XML, urlset

    server.routes["/sitemap.xml"] = Route(body=urlset(server.url("/p1"), "http://127.0.0.1:99999/x",
                                                      server.url("/p2")), content_type=XML)
    server.routes["/p1"] = Route(body=page("P1", "<p>one</p>"))
    server.routes["/p2"] = Route(body=page("P2", "<p>two</p>"))
    results = crawl([Seed(server.url("/sitemap.xml"))], fast(), RawStore(tmp_path))
    assert {r.url for r in results if r.kind == "page" and r.ok} == {server.url("/p1"), server.url("/p2")}
    rows = {(r["url"], r["reason"]): r for r in crawl_errors(results, "run")}
    assert set(rows) == {(server.url("/sitemap.xml"), "bad_url")}
    assert "99999" in rows[server.url("/sitemap.xml"), "bad_url"]["message"]


def test_files_named_by_bytes_that_are_no_utf8_are_two_documents(tmp_path):
    from laminae.schemas.ids import document_id
    from laminae.tasks.crawl.seeds import read_seeds

    site = tmp_path / "site"
    site.mkdir()
    for byte in (b"\xff", b"\xfe"):
        path = bytes(site) + b"/bad" + byte + b".html"
        with open(path, "wb") as f:
            f.write(page("Bad", f"<p>the file named by byte {byte.hex()}</p>"))
    results = crawl(read_seeds(site), fast(), RawStore(tmp_path / "index"))
    urls = sorted(r.url for r in results if r.ok)
    assert urls == [site.as_uri() + "/bad%FE.html", site.as_uri() + "/bad%FF.html"]
    assert len({document_id(u) for u in urls}) == 2


def test_a_remembered_seed_with_userinfo_is_fetched_with_it_and_stored_without(server, tmp_path):
    heard: list[str | None] = []

    def private(handler: BaseHTTPRequestHandler) -> None:
        heard.append(handler.headers.get("Authorization"))
        body = page("Private", "<p>behind a password</p>")
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    server.routes["/in"] = private
    remembered = server.url("/in").replace("http://", "http://reader:s3cret@")  # as an older index kept it
    results = crawl([Seed(remembered)], fast(), RawStore(tmp_path))
    assert [r.url for r in results] == [server.url("/in")] and results[0].ok
    assert heard == ["Basic " + base64.b64encode(b"reader:s3cret").decode()]
