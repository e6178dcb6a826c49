"""URLs and text as laminae reads them: one parse-and-normalise function (``canonical_url``) that
never raises, links that drop only themselves, and text decoded BOM first, then by its declared
charset, then by detection."""

from __future__ import annotations

import pytest

from laminae.schemas.ids import MAX_URL_CHARS, canonical_url, document_id, normalize_url
from laminae.tasks.crawl.formats import sniff_content_type
from laminae.tasks.crawl.hosts import host_of, seed_scope
from laminae.tasks.crawl.hrefs import extract_links, resolve_href, resolve_link, same_page_key
from laminae.tasks.crawl.seeds import SeedsError, read_seeds
from laminae.tasks.parse.document import decode_bytes
from laminae.tasks.parse.html import parse_html

BAD = [
    "http://example.org:99999/", "http://example.org:abc/", "ftp://[user@]host/path", "http://[user@]host/path",
    "http://h.test/p\x01.html", "http://h.test/a\x00b", "http://a\u3000b.test/", "http://exa mple.test/",
    "http://h.test/" + "a" * MAX_URL_CHARS, "http:///nohost", "javascript:alert(1)", "mailto:a@b.test", "p.html",
    "http://[::1/", "http://" + "a" * 64 + ".test/", "file://localhost:8/x", "", "   ",
]


@pytest.mark.parametrize("url", BAD)
def test_what_is_no_url_is_none_and_its_identity_never_raises(url):
    assert canonical_url(url) is None
    assert normalize_url(url) == url.strip()
    assert document_id(url).startswith("d")
    host_of(url), seed_scope(url)  # never raise either


@pytest.mark.parametrize(("url", "canonical"), [
    ("HTTP://Example.COM:80/a b#frag", "http://example.com/a%20b"),
    ("https://example.com", "https://example.com/"),
    ("https://example.com:443?q=1", "https://example.com/?q=1"),
    ("http://h.test/./p.html", "http://h.test/p.html"),
    ("http://h.test/a/../p.html", "http://h.test/p.html"),
    ("http://h.test/a/b/..", "http://h.test/a/"),
    ("http://h.test/%2e%2E/%2E/p.html", "http://h.test/p.html"),
    ("http://h.test/%7e%61", "http://h.test/~a"),
    ("http://h.test/%ff.html", "http://h.test/%FF.html"),
    ("http://h.test/caf\u00e9.html", "http://h.test/caf%C3%A9.html"),
    ("http://h.test/a%2Fb/../c", "http://h.test/c"),  # %2F is no segment boundary
    ("http://h.test/a%2fb", "http://h.test/a%2Fb"),
    ("http://h.test/50%", "http://h.test/50%25"),
    ("http://h.test/?q=%c3%a9&x=a%26b&y=%7E", "http://h.test/?q=%C3%A9&x=a%26b&y=~"),
    ("http://user:pa%40ss@h.test/x", "http://h.test/x"),
    ("http://B\u00fccher.test/", "http://xn--bcher-kva.test/"),
    ("http://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45\uff0e\uff54\uff45\uff53\uff54/", "http://example.test/"),
    ("http://[0:0::1]:8080/", "http://[::1]:8080/"),
    ("http://h.test/a\tb\n", "http://h.test/ab"),
    ("http:\\\\h.test\\a\\b", "http://h.test/a/b"),
    ("file://localhost/a%20b/c.html", "file:///a%20b/c.html"),
    ("file:///a b/c%281%29.html?v=2", "file:///a%20b/c(1).html"),  # Path.as_uri escapes "(": the same file
    ("file:///tmp/bad%FF.html", "file:///tmp/bad%FF.html"),
])
def test_normalisation_follows_rfc_3986_and_keeps_escapes_as_bytes(url, canonical):
    assert canonical_url(url) == canonical
    assert canonical_url(canonical) == canonical  # idempotent
    assert document_id(url) == document_id(canonical)


def test_two_names_are_two_documents_and_one_page_one_spelling():
    assert document_id("http://h.test/%FF.html") != document_id("http://h.test/%FE.html")
    assert document_id("file:///d/bad%FF.html") != document_id("file:///d/bad%FE.html")
    assert len({document_id(u) for u in ("http://h.test/p.html", "http://h.test/./p.html",
                                         "http://h.test/a/../p.html", "HTTP://H.TEST:80/p.html#x")}) == 1
    # RFC 3986 and w3lib keep these distinct; the crawl makes them one page only when the bytes match
    assert len({canonical_url(u) for u in ("http://h.test/p.html", "http://h.test//p.html",
                                           "http://h.test/p.html/")}) == 3
    assert len({same_page_key(u) for u in ("http://127.0.0.1:8/p.html", "http://127.0.0.1:8//p.html",
                                           "http://127.0.0.1:8/p.html/", "http://localhost:8/p.html")}) == 1
    assert same_page_key("http://127.0.0.1:8/p.html") != same_page_key("http://127.0.0.1:9/p.html")


def test_a_bad_href_drops_only_itself_and_says_why():
    base = "http://h.test/dir/page.html"
    assert resolve_link(base, "caf\u00e9.html") == ("http://h.test/dir/caf%C3%A9.html", None)
    assert resolve_link(base, "../p.html#top") == ("http://h.test/p.html", None)
    assert resolve_link(base, "mailto:a@b.test") == (None, None)
    assert resolve_link(base, "ftp://[user@]host/path") == (None, None)  # another scheme: never followed
    assert resolve_link(base, "  JavaScript:alert(1)") == (None, None)
    for href in ("http://h.test:99999/", "http://h.test:abc/", "/p\x01.html", "//[user@]host/x", "x" * 9000):
        target, why = resolve_link(base, href)
        assert target is None and why, href
    assert resolve_href("http://h.test/", "file:///etc/passwd") is None
    assert resolve_link("http://[user@]host/page", "p.html")[0] is None  # a base that is no URL raises nothing
    assert resolve_href("file:///site/a.html", "b c.html") == "file:///site/b%20c.html"


def test_followed_links_are_read_with_the_parsers_decoding():
    body = ("<html><body><a href='caf\u00e9.html'>caf\u00e9</a> <a href='http://h.test:99999/'>bad</a> "
            "<a href='/p&#1;.html'>ctl</a> <a href='ftp://[user@]host/path'>ftp</a> "
            "<a href='/./q.html'>q</a></body></html>").encode()
    assert extract_links(body, "http://h.test/") == ["http://h.test/caf%C3%A9.html", "http://h.test/q.html"]
    latin = "<html><body><a href='caf\u00e9.html'>x</a></body></html>".encode("latin-1")
    assert extract_links(latin, "http://h.test/", "iso-8859-1") == ["http://h.test/caf%C3%A9.html"]


def test_the_html_parser_warns_of_bad_links_and_keeps_the_page():
    body = (b"<html><head><link rel=canonical href='http://h.test:99999/'></head><body><p>Rye "
            b"<a href='http://h.test:abc/'>one</a> <a href='ftp://[user@]host/path'>two</a> "
            b"<a href='/p&#1;.html'>three</a> <a href='/good.html'>good</a>.</p></body></html>")
    page = parse_html(body, "http://h.test/")
    assert page.canonical_url is None
    assert [link.url for comp in page.components for link in comp.links] == ["http://h.test/good.html"]
    warning = next(w for w in page.warnings if w.startswith("bad_url: "))
    assert "3 addresses" in warning and "99999" in warning


def test_text_is_decoded_bom_first_then_by_its_declared_charset_then_by_detection():
    latin = "<p>Cr\u00e8me br\u00fbl\u00e9e</p>".encode("latin-1")
    text, warning, codec = decode_bytes(latin, "utf-8", html=True)
    assert "Cr\ufffdme br\ufffdl\ufffde" in text and "undecodable_bytes: 3 bytes" in warning and codec == "utf-8"
    text, warning, _ = decode_bytes(b"<meta charset='utf-8'>" + latin, None, html=True)
    assert "Cr\ufffdme" in text and "the page declares" in warning
    assert decode_bytes(latin, "latin-1")[0] == "<p>Cr\u00e8me br\u00fbl\u00e9e</p>"
    assert decode_bytes(b"\x93q\x94", "iso-8859-1")[0] == "\u201cq\u201d"  # WHATWG: the label is windows-1252
    utf16 = "<!doctype html><html><body><p>Cr\u00e8me</p></body></html>".encode("utf-16")
    assert decode_bytes(utf16, "utf-8", html=True)[:2] == ("<!doctype html><html><body><p>Cr\u00e8me</p></body></html>",
                                                           None)  # the BOM wins over the header
    assert decode_bytes("caf\u00e9".encode(), None) == ("caf\u00e9", None, "utf-8")


def test_a_utf16_page_with_its_bom_is_an_html_page():
    body = "<!doctype html><html><body><p>Tidepools at low tide.</p></body></html>".encode("utf-16")
    assert sniff_content_type(body, None, "http://h.test/x") == "text/html"
    assert sniff_content_type(body, "application/octet-stream", "http://h.test/x") == "text/html"
    page = parse_html(body, "http://h.test/x")
    assert [c.text for c in page.components] == ["Tidepools at low tide."]


def test_a_seeds_file_keeps_its_good_lines_and_reports_each_bad_one(tmp_path):
    f = tmp_path / "seeds.txt"
    lines = ["http://a.test/first", "http://\uff41\u3000\uff42.test/", "http://a.test/a\x00b", "http://a.test/a\tb",
             "http://a.test:99999/", "http://a.test/" + "x" * 100_000, "javascript:alert(1)", "{\"url\": 3}",
             "http://user:s3cret@a.test/private", "http://a.test/./first"]
    f.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode() + b"\n")
    seeds = read_seeds(f)
    good = [s for s in seeds if not s.error]
    assert [s.url for s in good] == ["http://a.test/first", "http://a.test/private"]
    assert good[1].auth == ("user", "s3cret") and "s3cret" not in repr(good[1])
    bad = {s.url: s.error for s in seeds if s.error}
    assert list(bad) == [f"{f}:{n}" for n in (2, 3, 4, 5, 6, 7, 8)]
    assert "control character ('\\x00')" in bad[f"{f}:3"] and "('\\t')" in bad[f"{f}:4"]
    assert "Port out of range" in bad[f"{f}:5"] and "100,014 characters" in bad[f"{f}:6"]
    assert all(len(message) < 600 for message in bad.values())


def test_a_utf16_seeds_file_is_read_and_a_binary_one_refused(tmp_path):
    f = tmp_path / "seeds.txt"
    f.write_bytes("http://a.test/x\r\nhttp://a.test/y\r\n".encode("utf-16"))
    assert [s.url for s in read_seeds(f)] == ["http://a.test/x", "http://a.test/y"]
    f.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(SeedsError, match="not a text file"):
        read_seeds(f)
    f.write_text("javascript:alert(1)\nhttp://a.test:99999/\n")
    with pytest.raises(SeedsError, match=r"no usable URL: .*:1: 'javascript:alert\(1\)'.* \(1 more bad lines\)"):
        read_seeds(f)


def test_the_markdown_parser_warns_of_bad_links_and_keeps_the_others():
    from laminae.tasks.config import OcrConfig, ParseConfig
    from laminae.tasks.parse.markdown import parse_markdown

    text = "# Tides\n\nSee [a bad port](http://h.test:99999/), [the café](café.md) and <a href='http://h.test:abc/'>x</a>.\n"
    page = parse_markdown(text.encode(), "file:///site/readme.md", ParseConfig(), OcrConfig(), None)
    assert [link.url for comp in page.components for link in comp.links] == ["file:///site/caf%C3%A9.md"]
    assert any(w.startswith("bad_url: 2 link or image targets") for w in page.warnings)
