"""End-to-end: bad input stays one row. A real ``laminae build --follow-links 1`` (and the refresh
after it) of a site whose page holds hrefs and a canonical with a bad port, ``ftp://[user@]host``
and ``&#1;``, beside a seeds file with a full-width host, a NUL, a tab, port 99999, a 100 KB URL and
``javascript:``: every good page is indexed, each bad seed line is one error row, and nothing raises.
The same build checks names (``/%FF.html`` and ``/%FE.html`` two documents, one page under five
spellings one document), text decoding (a followed ``café.html`` link, a UTF-16 page, a Latin-1 page
that says it is UTF-8) and that a seed's password is in no table."""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

import laminae
from laminae.schemas import document_id
from tests.conftest import ROOT, Route, page

pytestmark = pytest.mark.slow
ENV = {"LAMINAE_DETECT__ENABLED": "false", "LAMINAE_EMBED__THREADS": "1", "LAMINAE_CRAWL__RETRIES": "0",
       "HF_HUB_OFFLINE": "1"}
SECRET = "s3cret-7f3a"
ONE_PAGE = "The one page under many spellings."


def _cli(args: list[str], log: Path) -> tuple[int, str]:
    """A ``laminae`` command in its own session; after it ends, what it left (its Prefect server) is killed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")} | ENV
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "laminae.flows.cli", *args], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=600)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    return code, log.read_text()


def _private(handler: BaseHTTPRequestHandler) -> None:
    """A page behind HTTP Basic: the seed's userinfo must reach it, and only it."""
    expected = "Basic " + base64.b64encode(f"reader:{SECRET}".encode()).decode()
    ok = handler.headers.get("Authorization") == expected
    body = page("Private", "<p>Behind a password lies the tide table.</p>") if ok else b"who are you"
    handler.send_response(200 if ok else 401)
    handler.send_header("Content-Type", "text/html; charset=utf-8")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def test_bad_links_and_bad_seed_lines_cost_one_row_each(server, tmp_path):
    s = server
    port = s.httpd.server_address[1]
    s.routes["/links.html"] = Route(  # no charset anywhere: UTF-8 bytes, which lxml alone read as Latin-1
        body=page("Links", "<p>Read <a href='http://127.0.0.1:99999/'>a bad port</a>, <a href='http://127.0.0.1:abc/'>"
                  "a worse one</a>, <a href='ftp://[user@]host/path'>an FTP host</a>, <a href='/ctl&#1;.html'>a "
                  "control</a>, <a href='café.html'>the café</a> and <a href='/good.html'>the good page</a>.</p>",
                  head="<link rel='canonical' href='http://127.0.0.1:99999/links.html'>"),
        content_type="text/html")
    s.routes["/caf%C3%A9.html"] = Route(body=page("Café", "<p>Coffee is poured at the harbour café.</p>"))
    s.routes["/good.html"] = Route(body=page("Good", "<p>The good page is reached through the others.</p>"))
    s.routes["/%FF.html"] = Route(body=page("FF", "<p>The page named by byte FF.</p>"))
    s.routes["/%FE.html"] = Route(body=page("FE", "<p>The page named by byte FE.</p>"))
    one = page("P", f"<p>{ONE_PAGE}</p>")
    for path in ("/p.html", "/p.html/"):  # a server that ignores a final slash
        s.routes[path] = Route(body=one)
    s.routes["/private.html"] = _private
    s.routes["/utf16.html"] = Route(body="<!doctype html><html><head><title>Sixteen</title></head><body><main>"
                                    "<p>Kelp forests grow fast in cold water.</p></main></body></html>".encode("utf-16"),
                                    content_type="text/html")
    s.routes["/latin.html"] = Route(body=page("Latin", "<p>Crème brûlée is served cold.</p>").decode().encode("latin-1"),
                                    content_type="text/html; charset=utf-8")
    base = s.base
    lines = [f"{base}/links.html", f"{base}/%FF.html", f"{base}/%FE.html", f"{base}/./p.html", f"{base}/a/../p.html",
             f"{base}//p.html", f"{base}/p.html/", f"http://localhost:{port}/p.html",
             f"http://reader:{SECRET}@127.0.0.1:{port}/private.html", f"{base}/utf16.html", f"{base}/latin.html",
             "http://ａ\u3000ｂ.test/", f"{base}/a\x00b", f"{base}/a\tb", "http://127.0.0.1:99999/",
             f"{base}/" + "x" * 100_000, "javascript:alert(1)"]
    seeds = tmp_path / "seeds.txt"
    seeds.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode() + b"\n")  # a BOM before the first line
    index = tmp_path / "index"

    code, output = _cli(["build", "--seeds", str(seeds), "--index", str(index), "--follow-links", "1"],
                        tmp_path / "build.log")
    assert code == 0 and ": partial" in output, output[-4000:]
    assert "Traceback" not in output, output[-4000:]

    opened = laminae.open(str(index))
    errors = opened.table("errors").to_arrow().to_pylist()
    bad_seeds = {r["url"]: r for r in errors if r["reason"] == "bad_seed"}
    assert set(bad_seeds) == {f"{seeds}:{n}" for n in range(12, 18)}
    assert all(r["stage"] == "crawl" and r["severity"] == "error" and len(r["message"]) < 600
               for r in bad_seeds.values())
    assert "99999" in bad_seeds[f"{seeds}:15"]["message"] and "100,0" in bad_seeds[f"{seeds}:16"]["message"]

    docs = opened.table("documents").to_arrow().select(["id", "url"]).to_pylist()
    ids = [d["id"] for d in docs]
    assert len(ids) == len(set(ids))
    for path in ("/links.html", "/caf%C3%A9.html", "/good.html", "/%FF.html", "/%FE.html", "/p.html", "/private.html",
                 "/utf16.html", "/latin.html"):
        assert document_id(base + path) in ids, path
    assert len(docs) == 9, sorted(d["url"] for d in docs)  # five spellings of /p.html are one document

    warned = {(r["url"], r["reason"]) for r in errors if r["severity"] == "warning"}
    assert (f"{base}/links.html", "bad_url") in warned
    assert {u for u, reason in warned if reason == "duplicate_document"} == {
        f"{base}//p.html", f"{base}/p.html/", f"http://localhost:{port}/p.html"}
    assert (f"{base}/latin.html", "undecodable_bytes") in warned
    # /./p.html and /a/../p.html were one request; //p.html (which http.server reads as /p.html, as nginx
    # merges slashes) and localhost's /p.html are the other two
    assert s.requests.count("/p.html") == 3 and not [r for r in s.requests if "/." in r], s.requests
    assert "/caf%C3%A9.html" in s.requests and "/caf%C3%83%C2%A9.html" not in s.requests

    texts: dict[str, str] = {}
    for comp in opened.table("components").to_arrow().select(["document_id", "text"]).to_pylist():
        texts[comp["document_id"]] = texts.get(comp["document_id"], "") + (comp["text"] or "")
    assert "Kelp forests grow fast" in texts[document_id(base + "/utf16.html")]
    assert "Cr\ufffdme br\ufffdl\ufffde" in texts[document_id(base + "/latin.html")]
    assert "tide table" in texts[document_id(base + "/private.html")]
    assert sum(ONE_PAGE in text for text in texts.values()) == 1
    edges = opened.table("edges").to_arrow().select(["kind", "src_id", "dst_id"]).to_pylist()
    linked = {e["dst_id"] for e in edges if e["kind"] == "links_to"}
    assert {document_id(base + "/caf%C3%A9.html"), document_id(base + "/good.html")} <= linked

    for name in ("documents", "components", "subcomponents", "edges", "fetches", "errors", "runs"):
        assert SECRET not in str(opened.table(name).to_arrow().to_pylist()), name
    assert SECRET not in output
    assert not [p for p in index.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]

    code, output = _cli(["refresh", "--index", str(index)], tmp_path / "refresh.log")
    assert code == 0 and "Traceback" not in output, output[-4000:]
    refreshed = laminae.open(str(index))
    assert {d["id"] for d in refreshed.table("documents").to_arrow().select(["id"]).to_pylist()} == set(ids)
