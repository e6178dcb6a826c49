"""A site holding every hostile case of issue 29 at once, built by ``laminae build`` in a real process:
two servers on 127.0.0.1 (two seed hosts; ``localhost``, ``127.0.0.2`` and 169.254.169.254 are the
hosts out of scope) and a folder seed 1,100 levels deep. The build exits 0 with status ``partial``,
every case ends as the error or warning row it should (or is indexed whole), no trap path is asked
for, and it finishes within a few minutes.

The cases are the issue's sizes: a 2,000-page PDF sharing one content stream of 20,000 boxes, a
2 MB WebVTT file of 27,000 cues said at once (read whole, in seconds), a 2,000-fps video and one whose frames
outgrow the size its codec reported, 300 unclosed ``<font>``s, a 12 MB text node, a 12 MB href, an
11 MB log in one ``<pre>`` (issue 44: indexed whole, its runs of lines cut at the page's budget), a
3 MB page of 100,000 pictures, a page of 20,000 videos, 5,000 identical anchors, a robots.txt that
redirects to 169.254.169.254 and another that is a gzip bomb, seeds that redirect to other loopback
hosts, ``<base href="file:///...">`` on a web page and a name OCR would split. Deadlines are the
defaults (60 s) except that a PDF's does not grow with its pages (PDF_PAGE_TIMEOUT_S=0), so the PDF
ends as ``parse_timeout`` after 60 s instead of being parsed for two and a half minutes; with
LAMINAE_TEST_HOSTILE_DEFAULTS=1 every setting that bounds anything is the default one (the PDF is
indexed, its tables skipped with a warning).
Detection is off and embedded texts are cut to 64 characters: they change the cost, not the rows."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import laminae
from laminae.schemas import document_id
from laminae.tasks.crawl.files import file_url
from tests.conftest import ROOT, Route, RouteServer, page
from tests.stages.test_crawl_scope import gzip_bomb
from tests.stages.test_deadlines import ruled_pdf
from tests.stages.test_video_deadlines import many_cues
from tests.support.clips import Scene, scene_video
from tests.support.scans import text_picture

pytestmark = pytest.mark.slow
DEFAULTS = os.environ.get("LAMINAE_TEST_HOSTILE_DEFAULTS") == "1"
MB = 1_000_000
MINUTES = 5  # issue 44: "still finishes in under 5 minutes" on the shared 2-core machine


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (40, 30), (20, 90, 200)).save(buf, "PNG")
    return buf.getvalue()


def _outgrown_video() -> bytes:
    """An MPEG-TS whose codec reports 64 x 64 and whose later frames are 4096 x 2304 (over the default
    max_pixels): the size seen before decoding says nothing of what follows."""
    import av
    from PIL import Image

    def segment(width: int, height: int, frames: int) -> bytes:
        out = io.BytesIO()
        with av.open(out, mode="w", format="mpegts") as container:
            stream = container.add_stream("libx264", rate=10, options={"preset": "ultrafast"})
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            for i in range(frames):
                frame = av.VideoFrame.from_image(Image.new("RGB", (width, height), (i * 20, 50, 90)))
                for packet in stream.encode(frame):
                    container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
        return out.getvalue()

    return segment(64, 64, 10) + segment(4096, 2304, 3)


def _fake_log(size: int) -> str:
    """A server log of about ``size`` characters, no two lines alike, no blank line."""
    lines, chars, i = [], 0, 0
    while chars < size:
        lines.append(f"2026-11-27 14:{i // 60 % 60:02d}:{i % 60:02d} INFO worker[{i % 97}] request {i} served "
                     f"/item/{i * 7919 % 100003} in {i % 1000} ms")
        chars += len(lines[-1]) + 1
        i += 1
    return "\n".join(lines)


def _deep_folder(root: Path) -> tuple[Path, Path]:
    folder = root
    for _ in range(1100):  # level by level: os.makedirs recurses itself
        folder = folder / "d"
        folder.mkdir(parents=folder.parent == root)
    (folder / "bottom.html").write_text("<html><body><p>Rye grows at the bottom of the tree.</p></body></html>")
    (root / "top.html").write_text("<html><body><p>Oats grow at the top of the tree.</p></body></html>")
    (root / ".hidden.html").write_text("<html><body><p>DISK-SECRET</p></body></html>")
    return root, folder


def _remove_deep(root: Path, folder: Path) -> None:
    (folder / "bottom.html").unlink(missing_ok=True)
    while folder != root:  # bottom up: shutil.rmtree recurses too
        folder.rmdir()
        folder = folder.parent


def _cli(args: list[str], env: dict[str, str], log: Path) -> tuple[int, str, float]:
    """``laminae build`` in its own session; after it ends, kill what it left (its Prefect server)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    full.update(env)
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "laminae.flows.cli", *args], cwd=ROOT, env=full, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=MINUTES * 60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    return code, log.read_text(), time.monotonic() - start


def test_a_site_holding_every_hostile_case_builds_partial_within_minutes(server, tmp_path):
    a, b = server, RouteServer()
    port = a.httpd.server_address[1]
    root, bottom = _deep_folder(tmp_path / "deep")
    try:
        # -- deadlines: a PDF whose tables take hours, captions whose sentences take minutes, videos
        a.routes["/ruled.pdf"] = Route(body=ruled_pdf(2000), content_type="application/pdf")
        fast = scene_video([Scene(1, (200, 40, 40), "RYE"), Scene(1, (40, 160, 60), "OATS")], width=64, height=64,
                           fps=2000)
        a.routes["/lecture"] = Route(body=page("Lecture", "<p>A lecture on rye.</p>"
                                               "<video src='/fast.mp4' title='Fast'><track kind='captions' "
                                               "src='/big.vtt'></video><video src='/outgrown.ts' title='Big'></video>"))
        a.routes["/fast.mp4"] = Route(body=fast, content_type="video/mp4")
        cues = many_cues(27_000)
        assert 1.9 * MB < len(cues) <= 2 * MB  # just under max_caption_bytes
        a.routes["/big.vtt"] = Route(body=cues, content_type="text/vtt")
        a.routes["/outgrown.ts"] = Route(body=_outgrown_video(), content_type="video/mp2t")
        # -- silent truncation
        tail = "<p>The closing paragraph of the page.</p>"
        a.routes["/fonts"] = Route(body=page("Fonts", "<p>Old page.</p>" + "<font color='red'>" * 300
                                             + "<p>Under three hundred fonts.</p>" + tail))
        words = ("wheat rye oats barley " * 600_000)[:12_500_000]
        a.routes["/text"] = Route(body=page("Text", f"<p>{words}</p>" + tail))
        a.routes["/href"] = Route(body=page("Href", f"<p>A <a href='/{'a' * 12 * MB}'>huge link</a> and a "
                                            "<a href='/short'>short one</a>.</p>" + tail))
        a.routes["/short"] = Route(body=page("Short", "<p>The short link's page.</p>"))
        log = _fake_log(11 * MB)
        a.routes["/log"] = Route(body=page("Log", f"<p>The night's log.</p><pre>{log}</pre>" + tail))
        # -- per-page bounds and duplicate edges (default caps: 1000 images, 20 videos)
        gallery = "".join(f"<img src='/p/{i}.png' alt='p{i}'>" for i in range(100_000))
        a.routes["/gallery"] = Route(body=page("Gallery", f"<p>One hundred thousand pictures.</p>{gallery}"))
        assert len(a.routes["/gallery"].body) > 3 * MB
        picture = _png()
        for i in range(1000):  # the rest would be 404s: never asked for, as checked below
            a.routes[f"/p/{i}.png"] = Route(body=picture, content_type="image/png")
        a.routes["/films"] = Route(body=page("Films", "<p>Twenty thousand films.</p>" + "".join(
            f"<video src='/v/{i}.mp4' title='Film {i}'></video>" for i in range(20_000))))
        for i in range(20):
            a.routes[f"/v/{i}.mp4"] = Route(body=fast, content_type="video/mp4")
        a.routes["/anchors"] = Route(body=page("Same", "<p>" + " ".join(["<a href='/there'>there</a>"] * 5000)
                                               + ".</p>"))
        a.routes["/there"] = Route(body=page("There", "<p>The page linked five thousand times.</p>"))
        # -- scope: robots.txt to link-local, seeds to other loopback hosts, <base> into the disk
        a.routes["/robots.txt"] = Route(status=302, headers={"Location": "http://169.254.169.254/latest/robots.txt"})
        a.routes["/r1"] = Route(status=302, headers={"Location": f"http://127.0.0.2:{port}/secret1"})
        a.routes["/r2"] = Route(status=302, headers={"Location": f"http://localhost:{port}/secret2"})
        for trap in ("/secret1", "/secret2"):
            a.routes[trap] = Route(body=page("Secret", "<p>internal</p>"))
        a.routes["/base"] = Route(body=page("Base", "<p><a href='.hidden.html'>hidden</a></p>"
                                            "<img src='pic.png' alt='a picture'>",
                                            head=f"<base href='{file_url(root, folder=True)}'>"))
        a.routes["/.hidden.html"] = Route(body=page("Web hidden", "<p>The server's own page of that name.</p>"))
        a.routes["/pic.png"] = Route(body=picture, content_type="image/png")
        # -- OCR names
        a.routes["/harbour"] = Route(body=page("Harbour", "<p>Boats moor at Marblehead in winter.</p>"
                                               "<img src='/basin.png' alt='a map'>"))
        a.routes["/basin.png"] = Route(body=text_picture(["Marbleheadbasin"]), content_type="image/png")
        # -- the second seed host: its robots.txt is a gzip bomb whose first rules hold
        b.routes["/robots.txt"] = Route(body=gzip_bomb(b"User-agent: *\nDisallow: /private/\n", 200 * MB),
                                        headers={"Content-Encoding": "gzip"}, content_type="text/plain")
        b.routes["/p"] = Route(body=page("P", "<p>Barley on the second host.</p>"))
        b.routes["/private/q"] = Route(body=page("Q", "<p>disallowed</p>"))

        paths = ("/ruled.pdf", "/lecture", "/fonts", "/text", "/href", "/log", "/gallery", "/films", "/anchors", "/base",
                 "/r1", "/r2", "/harbour")
        seeds = [a.url(p) for p in paths] + [b.url("/p"), b.url("/private/q"), file_url(root, folder=True)]
        (tmp_path / "seeds.txt").write_text("\n".join(seeds) + "\n")
        index = tmp_path / "index"
        env = {"LAMINAE_DETECT__ENABLED": "false",  # cost only: 1,000 pictures through the detector
               "LAMINAE_EMBED__THREADS": "1", "LAMINAE_EMBED__MAX_CHARS": "64",  # the 12 MB page's 6,000 pieces
               "LAMINAE_CRAWL__RETRIES": "0", "LAMINAE_VIDEO__SIDECAR_CAPTIONS": "false", "HF_HUB_OFFLINE": "1"}
        if not DEFAULTS:
            env["LAMINAE_PARSE__PDF_PAGE_TIMEOUT_S"] = "0"
        code, output, seconds = _cli(["build", "--seeds", str(tmp_path / "seeds.txt"), "--index", str(index),
                                      "--follow-links", "1", "--allow-host", f"localhost:{port}",
                                      "--allow-host", "169.254.169.254"], env, tmp_path / "build.log")
        print(f"hostile site built in {seconds:.0f} s (exit {code})")
        assert code == 0, output[-4000:]
        assert f"index {index} (manifest" in output and ": partial" in output, output[-4000:]
        assert seconds < MINUTES * 60

        opened = laminae.open(str(index))
        rows = opened.table("errors").to_arrow().to_pylist()
        got = {(r["url"], r["stage"], r["reason"], r["severity"]) for r in rows}
        expected = {
            (a.url("/outgrown.ts"), "video", "video_too_large", "error"),
            (a.url("/r1"), "crawl", "out_of_scope", "error"),
            (a.url("/r2"), "crawl", "private_address", "error"),
            (b.url("/private/q"), "crawl", "robots_disallowed", "error"),
            (a.url("/robots.txt"), "crawl", "private_address", "warning"),
            (b.url("/robots.txt"), "crawl", "robots_truncated", "warning"),
            (a.url("/gallery"), "parse", "too_many_images", "warning"),
            (a.url("/films"), "parse", "too_many_videos", "warning"),
            (a.url("/href"), "parse", "truncated_html", "warning"),
            (a.url("/log"), "parse", "code_lines_cut", "warning"),
        }
        pdf = {(u, st, re, sev) for u, st, re, sev in got if u == a.url("/ruled.pdf")}
        if DEFAULTS:  # indexed whole, its tables given up on within their budget
            assert ((a.url("/ruled.pdf"), "parse", "tables_skipped", "warning") in pdf
                    and {re for _, _, re, _ in pdf} <= {"tables_skipped", "tables_timeout"}), pdf
        else:
            assert pdf == {(a.url("/ruled.pdf"), "parse", "parse_timeout", "error")}
        assert got - pdf == expected, sorted((got - pdf) ^ expected)
        warned = {(r["url"], r["reason"]): r["message"] for r in rows}
        assert "99000 of the page's 100000" in warned[a.url("/gallery"), "too_many_images"]
        assert "19980 of the page's 20000" in warned[a.url("/films"), "too_many_videos"]

        # what was asked for: nothing over a cap, no trap, robots.txt once per host
        assert {p for p in a.requests if p.startswith("/p/")} == {f"/p/{i}.png" for i in range(1000)}
        assert {p for p in a.requests if p.startswith("/v/")} == {f"/v/{i}.mp4" for i in range(20)}
        assert not {"/secret1", "/secret2"} & set(a.requests) and "/private/q" not in b.requests
        assert a.requests.count("/robots.txt") == 1 and b.requests.count("/robots.txt") == 1

        # what was indexed: every page's text after its hostile part, the deep folder, the name
        texts: dict[str, list[str]] = {}
        comps = opened.table("components").to_arrow().select(["id", "document_id", "text", "kind", "ordinal"]).to_pylist()
        for comp in comps:
            texts.setdefault(comp["document_id"], []).append(comp["text"] or "")
        for path in ("/fonts", "/text", "/href", "/log"):
            assert "The closing paragraph of the page." in "\n".join(texts[document_id(a.url(path))]), path
        assert sum(len(t) for t in texts[document_id(a.url("/text"))]) >= 12_400_000
        # the log: all of it in code components, runs of lines for the first ones only, as its warning says
        code = [c for c in comps if c["document_id"] == document_id(a.url("/log")) and c["kind"] == "code"]
        assert "".join(c["text"] for c in sorted(code, key=lambda c: c["ordinal"])).replace("\n", "") == \
            log.replace("\n", "")
        cut = re.match(r"(\d+) of the page's (\d+) code components", warned[a.url("/log"), "code_lines_cut"])
        assert cut and int(cut[2]) == len(code) and 0 < int(cut[1]) < len(code), warned[a.url("/log"), "code_lines_cut"]
        assert "LAMINAE_PARSE__MAX_CODE_LINES_CHARS" in warned[a.url("/log"), "code_lines_cut"]
        split = {c["id"] for c in sorted(code, key=lambda c: c["ordinal"])[:len(code) - int(cut[1])]}
        subs = opened.table("subcomponents").to_arrow().select(["document_id", "kind", "text", "parent_id"]).to_pylist()
        log_lines = {r["parent_id"] for r in subs if r["document_id"] == document_id(a.url("/log"))
                     and r["kind"] == "lines"}
        assert log_lines == split, (len(log_lines), len(split))
        transcripts = [t for t in texts[document_id(a.url("/lecture"))] if t.startswith("Cue 0 ")]
        assert transcripts[0].endswith("Cue 26999 is said here. And more words follow.")  # the captions read whole
        assert document_id(file_url(bottom / "bottom.html")) in texts and document_id(file_url(root / "top.html")) in texts
        lines = [r["text"] for r in subs if r["kind"] == "text" and r["document_id"] == document_id(a.url("/harbour"))]
        assert lines == ["Marblehead basin"]  # the name the page knows is not split
        edges = opened.table("edges").to_arrow().select(["kind", "document_id", "target_url", "anchors", "src_layer",
                                                         "src_id", "target_id"]).to_pylist()
        links = [e for e in edges if e["kind"] == "links_to"]
        same = [e for e in links if e["document_id"] == document_id(a.url("/anchors"))]
        assert len(same) < 50 and len({(e["src_id"], e["target_id"]) for e in same}) == len(same)
        assert sum(e["anchors"] for e in same if e["src_layer"] == 1) == 5000
        assert not any((e["target_url"] or "").startswith("file:") for e in links
                       if e["document_id"] == document_id(a.url("/base")))
        assert not any(b"DISK-SECRET" in p.read_bytes() for p in index.rglob("*") if p.is_file())
    finally:
        b.close()
        _remove_deep(root, bottom)
