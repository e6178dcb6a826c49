"""Crawl against real HTTP servers on 127.0.0.1: redirects, failures, limits, robots, link following."""

from __future__ import annotations

import threading
import time

import pytest

from laminae.tasks.batches import crawl_errors
from laminae.tasks.config import CrawlConfig
from laminae.tasks.crawl.fetch import crawl
from laminae.tasks.crawl.formats import sniff_content_type
from laminae.tasks.crawl.seeds import Seed, SeedsError, read_seeds
from laminae.tasks.storage.rawstore import RawStore
from tests.conftest import Route, page


def fast(**kw) -> CrawlConfig:
    base = {"backoff": 0.01, "timeout_connect": 2, "timeout_read": 2, "timeout_total": 10}
    return CrawlConfig(**{**base, **kw})


def run(server, paths, tmp_path, **cfg):
    results = crawl([Seed(server.url(p)) for p in paths], fast(**cfg), RawStore(tmp_path))
    return {r.url.removeprefix(server.base): r for r in results}


def test_ok_page_is_stored_content_addressed(server, tmp_path):
    body = page("A", "<p>hello</p>")
    server.routes["/a"] = Route(body=body, headers={"ETag": '"v1"'})
    server.routes["/b"] = Route(body=body)
    res = run(server, ["/a", "/b"], tmp_path)
    assert res["/a"].ok and res["/a"].content_type == "text/html" and res["/a"].etag == '"v1"'
    assert res["/a"].raw_key == res["/b"].raw_key
    assert RawStore(tmp_path).get(res["/a"].raw_key) == body


def test_redirects_are_followed_and_recorded(server, tmp_path):
    server.routes["/a"] = Route(status=301, headers={"Location": "/b"})
    server.routes["/b"] = Route(status=302, headers={"Location": server.url("/c")})
    server.routes["/c"] = Route(body=page("C", "<p>c</p>"))
    res = run(server, ["/a"], tmp_path)["/a"]
    assert res.ok and res.final_url == server.url("/c")
    assert res.redirects == [server.url("/a"), server.url("/b")]


def test_redirect_loop_and_too_many_redirects(server, tmp_path):
    server.routes["/l1"] = Route(status=302, headers={"Location": "/l2"})
    server.routes["/l2"] = Route(status=302, headers={"Location": "/l1"})
    for i in range(8):
        server.routes[f"/r{i}"] = Route(status=302, headers={"Location": f"/r{i + 1}"})
    res = run(server, ["/l1", "/r0"], tmp_path, max_redirects=5)
    assert res["/l1"].error == "redirect_loop"
    assert res["/r0"].error == "too_many_redirects"


def test_client_errors_are_not_retried_server_errors_are(server, tmp_path):
    server.routes["/flaky"] = Route(body=page("F", "<p>f</p>"), fail_times=2)
    server.routes["/down"] = Route(status=500, body=b"oops")
    res = run(server, ["/missing", "/flaky", "/down"], tmp_path, retries=2)
    assert res["/missing"].error == "http_404" and server.requests.count("/missing") == 1
    assert res["/flaky"].ok and server.routes["/flaky"].calls == 3
    assert res["/down"].error == "http_500" and server.routes["/down"].calls == 3


def test_slow_response_times_out(server, tmp_path):
    server.routes["/slow"] = Route(body=page("S", "<p>s</p>"), delay=1.5)
    res = run(server, ["/slow"], tmp_path, timeout_read=0.3, retries=0)["/slow"]
    assert res.error == "timeout"


def test_oversized_bodies_are_dropped(server, tmp_path):
    big = b"<html><body><p>" + b"x" * 5000 + b"</p></body></html>"
    server.routes["/declared"] = Route(body=big)

    def undeclared(handler):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(big)
        handler.close_connection = True

    server.routes["/undeclared"] = undeclared
    res = run(server, ["/declared", "/undeclared"], tmp_path, max_body_bytes=2048)
    assert res["/declared"].error == "too_large"
    assert res["/undeclared"].error == "too_large"


def test_binary_and_empty_bodies(server, tmp_path):
    server.routes["/bin"] = Route(body=b"\x00\x01\x02 not html \x00" * 20)
    server.routes["/empty"] = Route(body=b"")
    res = run(server, ["/bin", "/empty"], tmp_path)
    assert res["/bin"].ok and res["/bin"].content_type == "application/octet-stream"
    assert res["/empty"].error == "empty_body"
    errors = {e["url"]: e for e in crawl_errors(list(res.values()), "run")}
    assert errors[server.url("/bin")]["reason"] == "unsupported_content_type"
    assert errors[server.url("/bin")]["stage"] == "crawl"
    assert errors[server.url("/empty")]["reason"] == "empty_body"


def test_robots_txt(server, tmp_path):
    server.routes["/robots.txt"] = Route(body=b"User-agent: *\nDisallow: /private/\n", content_type="text/plain")
    server.routes["/private/p"] = Route(body=page("P", "<p>p</p>"))
    assert run(server, ["/private/p"], tmp_path)["/private/p"].error == "robots_disallowed"
    assert run(server, ["/private/p"], tmp_path, respect_robots=False)["/private/p"].ok


def test_robots_txt_wildcards_and_allow_precedence(server, tmp_path):
    from laminae.tasks.crawl.politeness import forget_robots

    forget_robots()  # another test's answer for this origin may still be cached
    server.routes["/robots.txt"] = Route(body=b"User-agent: *\nDisallow: /*?sort=\nDisallow: /*.pdf$\n"
                                              b"Disallow: /private/\nAllow: /private/public\n",
                                         content_type="text/plain")
    for path in ("/list", "/list?sort=a", "/report.pdf", "/report.pdf.html", "/private/x", "/private/public"):
        server.routes[path.split("?")[0]] = Route(body=page("x", "<p>x</p>"))
    got = run(server, ["/list", "/list?sort=a", "/report.pdf", "/report.pdf.html", "/private/x", "/private/public"],
              tmp_path)
    assert {p for p, r in got.items() if r.error == "robots_disallowed"} == {"/list?sort=a", "/report.pdf", "/private/x"}


def test_image_batches_of_a_run_reuse_its_robots_txt_answer(server, tmp_path):
    from laminae.tasks.crawl.fetch import fetch_images
    from laminae.tasks.crawl.hosts import host_of
    from tests.support.synthetic_pdf import png

    asked = []

    def robots(h):
        asked.append(h.path)
        body = b"User-agent: *\nDisallow: /private/\n"
        h.send_response(200)
        h.send_header("Content-Type", "text/plain")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    server.routes["/robots.txt"] = robots
    server.routes["/p"] = Route(body=page("P", "<p>p</p>"))
    server.routes["/a.png"] = Route(body=png(), content_type="image/png")
    server.routes["/private/b.png"] = Route(body=png(), content_type="image/png")
    assert run(server, ["/p"], tmp_path)["/p"].ok and len(asked) == 1
    hosts = {host_of(server.url("/p"))}
    for _ in range(2):  # two batches of the run
        got = fetch_images([server.url("/a.png"), server.url("/private/b.png")], fast(), RawStore(tmp_path), hosts)
        assert got[server.url("/a.png")].ok
        assert got[server.url("/private/b.png")].error == "robots_disallowed"
    assert len(asked) == 1
    run(server, ["/p"], tmp_path)  # the next run asks again
    assert len(asked) == 2


def test_follow_links_stays_in_scope_and_depth(server, tmp_path):
    other = f"http://localhost:{server.httpd.server_address[1]}"
    server.routes["/s"] = Route(body=page("S", f"<p><a href='/p2'>2</a> <a href='https://example.invalid/x'>x</a> "
                                               f"<a href='{other}/loop'>loopback alias</a> <a href='/img.png'>img</a></p>"))
    server.routes["/p2"] = Route(body=page("2", "<p><a href='/p3'>3</a></p>"))
    server.routes["/p3"] = Route(body=page("3", "<p>end</p>"))
    res = run(server, ["/s"], tmp_path, follow_links=1, allow_hosts=[f"localhost:{server.httpd.server_address[1]}"])
    # the allow-listed loopback alias is not followed, and a warning says why
    assert set(res) == {"/s", "/p2", f"{other}/loop"}
    assert res[f"{other}/loop"].error == "private_address" and res[f"{other}/loop"].severity == "warning"
    assert "/loop" not in server.requests
    assert res["/p2"].depth == 1
    res = run(server, ["/s"], tmp_path, follow_links=2)
    assert set(res) == {"/s", "/p2", "/p3"}


def test_per_host_concurrency_is_bounded(server, tmp_path):
    state = {"now": 0, "max": 0}
    lock = threading.Lock()

    def slow(handler):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.15)
        with lock:
            state["now"] -= 1
        body = page("x", "<p>x</p>")
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    for i in range(8):
        server.routes[f"/c{i}"] = slow
    res = run(server, [f"/c{i}" for i in range(8)], tmp_path, per_host_concurrency=2, respect_robots=False)
    assert all(r.ok for r in res.values())
    assert state["max"] == 2  # eight slow pages, two at a time: the bound is reached, never passed


def test_sniffing_trusts_bytes_over_headers():
    assert sniff_content_type(b"%PDF-1.7 ...", "text/html") == "application/pdf"
    assert sniff_content_type(b"\x89PNG\r\n\x1a\n....", "text/html") == "image/png"
    assert sniff_content_type(b"<!DOCTYPE html><html>", "application/octet-stream") == "text/html"
    assert sniff_content_type(b"plain words", None) == "text/plain"


def test_seeds_file_formats(tmp_path):
    f = tmp_path / "seeds.txt"
    f.write_text('# comment\nhttps://a.test/x\n\n{"url": "https://a.test/y", "team": "docs"}\nhttps://a.test/x\n')
    seeds = read_seeds(f)
    assert [s.url for s in seeds] == ["https://a.test/x", "https://a.test/y"]
    assert seeds[1].annotations == {"team": "docs"}
    f.write_text("ftp://nope\n")
    with pytest.raises(SeedsError, match="http"):
        read_seeds(f)
    with pytest.raises(SeedsError, match="does not exist"):
        read_seeds(tmp_path / "missing.txt")


def test_retry_after_is_honoured_and_bounded(server, tmp_path):
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    from laminae.tasks.crawl.request import retry_after_seconds

    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds(format_datetime(now + timedelta(seconds=30), usegmt=True), now) == 30.0
    assert retry_after_seconds(format_datetime(now - timedelta(seconds=30), usegmt=True), now) == 0.0
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None
    assert retry_after_seconds("²") is None  # a digit to str.isdigit, not to float()

    calls = {"busy": 0, "closed": 0}
    served_at: list[float] = []

    def busy(handler):  # 429 asking for one second, then the page
        calls["busy"] += 1
        served_at.append(time.monotonic())
        body = page("B", "<p>b</p>") if calls["busy"] > 1 else b""
        handler.send_response(200 if calls["busy"] > 1 else 429)
        handler.send_header("Retry-After", "1")
        handler.send_header("Content-Type", "text/html")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def closed(handler):  # 503 asking for an hour: not waited for
        calls["closed"] += 1
        handler.send_response(503)
        handler.send_header("Retry-After", "3600")
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    server.routes["/busy"] = busy
    server.routes["/closed"] = closed
    res = run(server, ["/busy", "/closed"], tmp_path, retries=2, backoff=0, max_retry_after=60)
    assert res["/busy"].ok and calls["busy"] == 2
    assert served_at[1] - served_at[0] >= 0.9  # the asked-for second, not the zero backoff
    assert res["/closed"].error == "http_503" and calls["closed"] == 1
    assert "max_retry_after" in res["/closed"].message
