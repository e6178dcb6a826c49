"""Crawl scope against a real HTTP server on 127.0.0.1 (the seeds' host): every fetch (robots.txt,
sitemaps, pages, pictures, videos, captions) checks each redirect hop, refuses private and loopback
addresses that are not a seed's host (here ``localhost`` and other names of this machine stand for
them) unless allowed, and streams bodies under their caps; ``<base>`` cannot lead a web page into
the disk; a folder listing has no recursion limit. Each test asserts on the rows and on what the
server was asked for."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import pytest
from pydantic import ValidationError

from laminae.tasks.batches import crawl_errors
from laminae.tasks.config import CrawlConfig
from laminae.tasks.crawl import hosts
from laminae.tasks.crawl.fetch import crawl, fetch_images
from laminae.tasks.crawl.files import file_url, list_folder, real_roots, scope_of
from laminae.tasks.crawl.hosts import host_of
from laminae.tasks.crawl.hrefs import extract_links
from laminae.tasks.crawl.pictures import attach_images
from laminae.tasks.crawl.politeness import ROBOTS_MAX_BYTES, forget_robots
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.crawl.seeds import Seed
from laminae.tasks.parse.html import parse_html
from laminae.tasks.storage.rawstore import RawStore
from tests.conftest import Route, page

MB = 1_000_000


def fast(**kw) -> CrawlConfig:
    return CrawlConfig(**{"backoff": 0.01, "retries": 0, "timeout_connect": 2, "timeout_read": 2,
                          "timeout_total": 20, **kw})


def port(server) -> int:
    return server.httpd.server_address[1]


def other(server, host: str = "localhost") -> str:
    """The same server under another name: a host that is not the seed's."""
    return f"http://{host}:{port(server)}"


def rows(results: list[FetchResult], server) -> dict[tuple[str, str], dict]:
    """(url, reason) → the error row, URLs on the server's seed host without their origin."""
    return {(e["url"].removeprefix(server.base), e["reason"]): e for e in crawl_errors(results, "run")}


def gzip_bomb(head: bytes, inflated: int) -> bytes:
    """``head`` and then spaces, ``inflated`` bytes in all, gzipped without ever holding them."""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [z.compress(head)]
    block = b" " * MB
    for _ in range((inflated - len(head)) // MB):
        out.append(z.compress(block))
    out.append(z.flush())
    return b"".join(out)


def peak_while(call):
    """``call()`` and the peak of Python's allocations meanwhile, in bytes."""
    tracemalloc.start()
    try:
        got = call()
        return got, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(autouse=True)
def fresh_robots():
    forget_robots()  # robots.txt answers are shared by a process's crawlers for an hour
    yield
    forget_robots()


@pytest.mark.parametrize(("target", "allow", "reason"), [
    ("localhost", True, "private_address"),  # a name that resolves to loopback, allow-listed
    ("169.254.169.254", True, "private_address"),  # link-local (cloud metadata): refused before any connection
    ("127.0.0.2", False, "out_of_scope"),  # another host, not allow-listed
])
def test_a_robots_txt_redirect_leaves_no_scope(server, tmp_path, target, allow, reason):
    host = f"{target}:{port(server)}"
    server.routes["/robots.txt"] = Route(status=302, headers={"Location": f"http://{host}/internal-robots"})
    server.routes["/internal-robots"] = Route(body=b"User-agent: *\nDisallow: /\n", content_type="text/plain")
    server.routes["/p"] = Route(body=page("P", "<p>p</p>"))
    results = crawl([Seed(server.url("/p"))], fast(allow_hosts=[host] if allow else []), RawStore(tmp_path))
    got = rows(results, server)
    row = got[("/robots.txt", reason)]
    assert row["stage"] == "crawl" and row["severity"] == "warning" and "robots.txt unreadable" in row["message"]
    assert [r for r in results if r.url == server.url("/p")][0].ok  # crawled as if it had no robots.txt
    assert "/internal-robots" not in server.requests
    assert server.requests.count("/robots.txt") == 1


def test_a_robots_txt_gzip_bomb_is_cut_at_the_cap(server, tmp_path):
    rules = b"User-agent: *\nDisallow: /private/\n"
    bomb = gzip_bomb(rules, 200 * MB)
    assert len(bomb) < 300_000  # a small download...
    server.routes["/robots.txt"] = Route(body=bomb, headers={"Content-Encoding": "gzip"}, content_type="text/plain")
    server.routes["/p"] = Route(body=page("P", "<p>p</p>"))
    server.routes["/private/q"] = Route(body=page("Q", "<p>q</p>"))
    results, peak = peak_while(lambda: crawl([Seed(server.url("/p")), Seed(server.url("/private/q"))], fast(),
                                             RawStore(tmp_path)))
    got = rows(results, server)
    assert got[("/robots.txt", "robots_truncated")]["severity"] == "warning"
    assert str(ROBOTS_MAX_BYTES) in got[("/robots.txt", "robots_truncated")]["message"]
    assert ("/private/q", "robots_disallowed") in got  # the rules before the cap hold
    assert "/private/q" not in server.requests
    assert peak < 30 * MB  # ...that never inflates whole (200 MB)


def test_a_page_gzip_bomb_is_refused_within_its_cap(server, tmp_path):
    server.routes["/bomb"] = Route(body=gzip_bomb(b"<html><body><p>bomb", 200 * MB), headers={"Content-Encoding": "gzip"})
    server.routes["/deflate"] = Route(body=zlib.compress(page("D", "<p>deflated</p>")),
                                      headers={"Content-Encoding": "deflate"})
    server.routes["/raw-deflate"] = Route(body=zlib.compress(page("R", "<p>raw</p>"), wbits=-15)[:],
                                          headers={"Content-Encoding": "deflate"})
    server.routes["/gzip"] = Route(body=gzip.compress(page("G", "<p>zipped</p>")), headers={"Content-Encoding": "gzip"})
    server.routes["/br"] = Route(body=b"\x0b\x02\x80hello\x03", headers={"Content-Encoding": "br"})
    store = RawStore(tmp_path)
    paths = ["/bomb", "/deflate", "/raw-deflate", "/gzip", "/br"]
    results, peak = peak_while(lambda: crawl([Seed(server.url(p)) for p in paths], fast(max_body_bytes=MB), store))
    by = {r.url.removeprefix(server.base): r for r in results}
    assert by["/bomb"].error == "too_large" and "gzip-decoded" in by["/bomb"].message
    assert peak < 16 * MB
    assert b"deflated" in store.get(by["/deflate"].raw_key)
    assert b"raw" in store.get(by["/raw-deflate"].raw_key)
    assert b"zipped" in store.get(by["/gzip"].raw_key)
    assert by["/br"].error == "bad_encoding"  # never asked for: refused, not stored undecoded


@pytest.mark.parametrize("target", ["localhost", "127.0.0.2", "2130706433"])  # a name, an address, a number
def test_a_seed_redirect_to_another_loopback_host_is_refused(server, tmp_path, target):
    host = f"{target}:{port(server)}"
    server.routes["/r"] = Route(status=302, headers={"Location": f"http://{host}/secret"})
    server.routes["/secret"] = Route(body=page("Secret", "<p>internal</p>"))
    res = crawl([Seed(server.url("/r"))], fast(), RawStore(tmp_path))
    assert rows(res, server)[("/r", "out_of_scope")]["stage"] == "crawl"  # not allow-listed
    res = crawl([Seed(server.url("/r"))], fast(allow_hosts=[host]), RawStore(tmp_path))
    row = rows(res, server)[("/r", "private_address")]
    assert row["stage"] == "crawl" and row["severity"] == "error" and "--allow-private" in row["message"]
    assert "/secret" not in server.requests
    assert not any(RawStore(tmp_path).get(r.raw_key) for r in res if r.raw_key)


def test_allow_private_lets_a_host_or_network_through(server, tmp_path):
    server.routes["/r"] = Route(status=302, headers={"Location": f"{other(server)}/secret"})
    server.routes["/secret"] = Route(body=page("Secret", "<p>internal</p>"))
    host = f"localhost:{port(server)}"
    for allowed in (["localhost"], ["127.0.0.0/8", "::1"]):
        res = crawl([Seed(server.url("/r"))], fast(allow_hosts=[host], allow_private=allowed), RawStore(tmp_path))
        assert res[0].ok and res[0].final_url == f"{other(server)}/secret"
    assert server.requests.count("/secret") == 2
    with pytest.raises(ValidationError, match="neither a host name"):
        CrawlConfig(allow_private=["http://10.0.0.1/"])
    assert CrawlConfig(allow_private=[" Intranet.Example ", "[fd00::1]"]).allow_private == ["intranet.example",
                                                                                            "fd00::1"]


def test_a_name_that_rebinds_to_loopback_is_refused_at_the_connection(server, tmp_path, monkeypatch):
    # the name resolves to a public address when checked, then connects to loopback (DNS rebinding)
    monkeypatch.setattr(hosts, "addresses_of", lambda host: ["93.184.216.34"])
    server.routes["/r"] = Route(status=302, headers={"Location": f"{other(server)}/secret"})
    server.routes["/secret"] = Route(body=page("Secret", "<p>rebound secret</p>"))
    store = RawStore(tmp_path)
    res = crawl([Seed(server.url("/r"))], fast(allow_hosts=[f"localhost:{port(server)}"]), store)
    row = rows(res, server)[("/r", "private_address")]
    assert "its body was not read" in row["message"]
    assert not any(b"rebound secret" in p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())


def test_a_followed_link_to_a_private_host_is_a_warning(server, tmp_path):
    server.routes["/s"] = Route(body=page("S", f"<p><a href='{other(server)}/inner'>inner</a> <a href='/ok'>ok</a></p>"))
    server.routes["/ok"] = Route(body=page("OK", "<p>ok</p>"))
    server.routes["/inner"] = Route(body=page("Inner", "<p>inner</p>"))
    res = crawl([Seed(server.url("/s"))], fast(follow_links=1, allow_hosts=[f"localhost:{port(server)}"]),
                RawStore(tmp_path))
    row = rows(res, server)[(f"{other(server)}/inner", "private_address")]
    assert row["severity"] == "warning" and row["stage"] == "crawl"
    assert "/ok" in server.requests and "/inner" not in server.requests


@pytest.mark.parametrize("kind", ["image", "video", "captions"])
def test_pictures_videos_and_captions_keep_the_scope(server, tmp_path, kind):
    from tests.support.synthetic_pdf import png

    hosts = {host_of(server.base)}
    cfg = fast(allow_hosts=[f"localhost:{port(server)}"])
    server.routes["/hop"] = Route(status=302, headers={"Location": f"{other(server)}/inner.bin"})
    server.routes["/inner.bin"] = Route(body=png(), content_type="image/png")
    server.routes["/fine.png"] = Route(body=png(), content_type="image/png")
    urls = [server.url("/hop"), f"{other(server)}/inner.bin", server.url("/fine.png")]
    got = fetch_images(urls, cfg, RawStore(tmp_path), hosts, kind=kind)
    assert got[urls[0]].error == "private_address" and got[urls[1]].error == "private_address"
    assert got[urls[2]].ok
    assert "/inner.bin" not in server.requests
    if kind == "image":  # the picture stage makes each refusal an error row of its own
        comps = [{"kind": "image", "image_url": u, "document_id": "d", "image_key": None, "image_mime": None,
                  "image_width": None, "image_height": None} for u in urls]
        _, problems = attach_images(comps, cfg, RawStore(tmp_path), hosts)
        assert [(url, reason) for _, url, reason, _ in problems] == [(urls[0], "private_address"),
                                                                     (urls[1], "private_address")]
        assert comps[2]["image_key"] and "/inner.bin" not in server.requests


def test_a_sitemap_keeps_the_scope(server, tmp_path):
    ns = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
    inner = f"{other(server)}/inner.xml"
    server.routes["/sitemap_index.xml"] = Route(
        body=(f'<?xml version="1.0"?><sitemapindex {ns}><sitemap><loc>{server.url("/hop.xml")}</loc></sitemap>'
              f'<sitemap><loc>{server.url("/pages.xml")}</loc></sitemap></sitemapindex>').encode(),
        content_type="application/xml")
    server.routes["/hop.xml"] = Route(status=302, headers={"Location": inner})
    server.routes["/pages.xml"] = Route(
        body=(f'<?xml version="1.0"?><urlset {ns}><url><loc>{server.url("/a")}</loc></url>'
              f'<url><loc>{other(server)}/private-page</loc></url></urlset>').encode(), content_type="application/xml")
    server.routes["/a"] = Route(body=page("A", "<p>a</p>"))
    res = crawl([Seed(server.url("/sitemap_index.xml"))], fast(allow_hosts=[f"localhost:{port(server)}"]),
                RawStore(tmp_path))
    got = rows(res, server)
    assert got[("/hop.xml", "private_address")]["stage"] == "sitemap"
    assert got[("/pages.xml", "out_of_scope")]["severity"] == "warning"  # the private page: skipped and counted
    assert [r.url for r in res if r.kind == "page"] == [server.url("/a")]
    assert "/inner.xml" not in server.requests and "/private-page" not in server.requests


def test_base_href_cannot_lead_a_web_page_into_the_disk(server, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<html><body><p>the folder's page</p></body></html>")
    (site / ".hidden.html").write_text("<html><body><p>HIDDEN-SECRET</p></body></html>")
    base = file_url(site, folder=True)
    body = page("Web", "<p><a href='.hidden.html'>hidden</a> <a href='/next'>next</a></p>"
                "<img src='pic.png' alt='a picture' width='100' height='100'>", head=f"<base href='{base}'>")
    server.routes["/web"] = Route(body=body)
    server.routes["/next"] = Route(body=page("Next", "<p>next</p>"))
    # the <base> is ignored: the links resolve against the page itself
    assert extract_links(body, server.url("/web")) == [server.url("/.hidden.html"), server.url("/next")]
    parsed = parse_html(body, server.url("/web"))
    targets = [link.url for c in parsed.components for link in c.links]
    images = [c.image_url for c in parsed.components if c.image_url]
    assert server.url("/next") in targets and images == [server.url("/pic.png")]
    assert not any(u.startswith("file:") for u in targets + images)
    index = tmp_path / "index"
    res = crawl([Seed(base), Seed(server.url("/web"))], fast(follow_links=1), RawStore(index))
    assert {r.url for r in res} == {file_url(site / "index.html"), server.url("/web"), server.url("/next"),
                                    server.url("/.hidden.html")}  # asked of the server (a 404), not the disk
    assert not any(b"HIDDEN-SECRET" in p.read_bytes() for p in index.rglob("*") if p.is_file())


def test_base_href_cannot_change_a_pages_scheme(server):
    body = page("Web", "<p><a href='next'>next</a></p>", head="<base href='https://elsewhere.example/docs/'>")
    # an http page's https base is ignored (the links resolve against the page), a same-scheme one is kept
    assert extract_links(body, server.url("/a/web")) == [server.url("/a/next")]
    assert [link.url for c in parse_html(body, server.url("/a/web")).components for link in c.links] == [
        server.url("/a/next")]
    same = body.replace(b"https://elsewhere.example/docs/", server.url("/b/").encode())
    assert extract_links(same, server.url("/a/web")) == [server.url("/b/next")]


def test_a_folder_1100_levels_deep_is_listed_and_read(tmp_path):
    site = tmp_path / "deep"
    folder = site
    for _ in range(1100):  # level by level: pathlib's and os's makedirs recurse themselves
        folder = folder / "d"
        folder.mkdir(parents=folder.parent == site)
    try:
        (folder / "bottom.html").write_text("<html><body><p>at the bottom</p></body></html>")
        (site / "top.html").write_text("<html><body><p>at the top</p></body></html>")
        seed = file_url(site, folder=True)
        pages, problems = list_folder(seed, real_roots([scope_of(seed)]))
        assert pages == [file_url(folder / "bottom.html"), file_url(site / "top.html")] and problems == []
        res = crawl([Seed(seed)], fast(), RawStore(tmp_path / "index"))
        assert [r.ok for r in res] == [True, True]
    finally:  # bottom up, as shutil.rmtree (pytest's clean-up of old temporary folders) recurses too
        (folder / "bottom.html").unlink(missing_ok=True)
        while folder != site:
            folder.rmdir()
            folder = folder.parent


def test_links_after_a_huge_href_or_a_deep_nest_are_still_followed():
    base = "http://127.0.0.1:9/page"
    huge = b"<html><body><p><a href='/a'>a</a> <a href='/" + b"x" * 12 * MB + b"'>huge</a> <a href='/b'>b</a></p></body></html>"
    assert extract_links(huge, base) == ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"]
    deep = (b"<html><body>" + b"<font>" * 300 + b"<a href='/deep'>deep</a>" + b"</font>" * 300
            + b"<p><a href='/after'>after</a></p></body></html>")
    assert extract_links(deep, base) == ["http://127.0.0.1:9/deep", "http://127.0.0.1:9/after"]
