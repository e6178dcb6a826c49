"""Benchmark refreshes against a full build on a generated corpus served from 127.0.0.1.

Generates ``--pages`` linked pages (paragraphs, a table, links; deterministic text), serves them
with ETags (304 on a matching If-None-Match), runs a full build, then refreshes after changing
0 %, 1 % and 10 % of the pages (one sentence each), and prints each run's wall time, its ratio to
the full build, and how many items it embedded (also as a share of all nodes). Writes only
temporary files.

    .venv/bin/python bench/refresh.py [--pages 1000] [--threads 1]
"""

from __future__ import annotations

import hashlib
import random
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

if not __package__:  # run as a file: the repository's bench package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import Timer, arguments, table
from laminae import flows  # noqa: F401 - Prefect's offline defaults before anything imports prefect

WORDS = ["bread", "rye", "wheat", "flour", "oven", "crust", "crumb", "dough", "yeast", "salt", "water", "starter", "loaf", "baker", "market", "stall", "morning", "night", "village", "city", "grain", "mill", "stone", "steam", "heat", "shape", "proof", "bake", "knead", "rise", "sour", "sweet"]


def sentence(rng: random.Random, i: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 14))]
    return f"{' '.join(words).capitalize()} number {i}."


def make_page(n: int, pages: int, version: int) -> bytes:
    rng = random.Random(n)
    paras = []
    for p in range(3):
        sents = [sentence(rng, n * 100 + p * 10 + s) for s in range(3)]
        if version and p == 1:
            sents[1] = f"This sentence was edited in revision {version}."
        paras.append("<p>" + " ".join(sents) + "</p>")
    links = " ".join(f"<a href='/p{(n * 7 + k * 13) % pages}.html'>page {(n * 7 + k * 13) % pages}</a>" for k in range(3))
    table = ("<table><tr><th>Item</th><th>Value</th></tr>"
             + "".join(f"<tr><td>item {n}-{r}</td><td>{rng.randint(1, 999)}</td></tr>" for r in range(3)) + "</table>")
    html = (f"<!doctype html><html><head><title>Page {n}</title></head><body><main><h1>Page {n}</h1>"
            f"{''.join(paras)}<p>See {links}.</p>{table}</main></body></html>")
    return html.encode()


class Site:
    def __init__(self, pages: int) -> None:
        self.pages = pages
        self.version = dict.fromkeys(range(pages), 0)
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                name = self.path.strip("/")
                if not (name.startswith("p") and name.endswith(".html") and name[1:-5].isdigit()):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                n = int(name[1:-5])
                body = make_page(n, site.pages, site.version[n])
                etag = '"' + hashlib.sha1(body).hexdigest() + '"'
                if self.headers.get("If-None-Match") == etag:
                    self.send_response(304)
                    self.send_header("ETag", etag)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("ETag", etag)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, n: int) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/p{n}.html"


def main() -> int:
    parser = arguments(__doc__, threads=1)
    parser.add_argument("--pages", type=int, default=1000)
    args = parser.parse_args()

    from laminae.flows.build import build_index, refresh_index

    site = Site(args.pages)
    with tempfile.TemporaryDirectory() as tmp:
        seeds = Path(tmp) / "seeds.txt"
        seeds.write_text("\n".join(site.url(n) for n in range(args.pages)) + "\n")
        index = str(Path(tmp) / "index")
        settings = {"embed": {"threads": args.threads}, "crawl": {"respect_robots": False, "per_host_concurrency": 8}}
        timer = Timer()
        with timer("full build"):
            full = build_index(seeds=str(seeds), index=index, settings=settings)
        counts = full["counts"]
        nodes = counts["documents"] + sum(counts["components"].values()) + sum(counts["subcomponents"].values())
        runs = [("full build", full)]
        rng = random.Random(0)
        for revision, share in enumerate((0.0, 0.01, 0.10), 1):
            for n in rng.sample(range(args.pages), int(args.pages * share)):
                site.version[n] = revision
            name = f"refresh, {share:.0%} changed"
            with timer(name):
                runs.append((name, refresh_index(index=index)))
    print(f"{args.pages} pages, {nodes} nodes (documents + components + subcomponents), torch threads {args.threads}")
    rows = []
    for name, summary in runs:
        stages = summary["seconds_by_stage"]
        top = sorted(((k, v) for k, v in stages.items() if k != "total"), key=lambda kv: -kv[1])[:3]
        rows.append((name, timer.last(name), summary["embedded"], 100 * summary["embedded"] / nodes,
                     ", ".join(f"{k} {v:.1f}" for k, v in top)))
    print(table(["run", "seconds", "embedded", "% nodes", "main stages"], rows,
                formats={"seconds": ".1f"}, ratio_of="seconds", ratio_title="× full"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
