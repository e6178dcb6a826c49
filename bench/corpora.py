"""Corpora the benchmarks share: real-world pages (fetched from package registries, cached) and
the sample site's texts.

Writes the unpacked packages into the cache folder it is given; imports nothing heavy.
"""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path


def fetch_htmlparser_benchmark(cache: Path) -> Path:
    """The 258 pages of the npm package ``htmlparser-benchmark@1.1.3`` (news and blog articles
    saved in 2013), fetched once with ``npm pack`` into ``cache``; returns their folder."""
    target = cache / "htmlparser-benchmark"
    if not (target / "package" / "files").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "pack", "htmlparser-benchmark@1.1.3", "--silent"], cwd=target, check=True)
        with tarfile.open(next(target.glob("htmlparser-benchmark-*.tgz"))) as tar:
            tar.extractall(target, filter="data")
    return target / "package" / "files"


SITE = Path(__file__).resolve().parent.parent / "examples" / "site"


def site_texts(n: int) -> list[str]:
    """The sample site's component and subcomponent texts, made unique per copy, ``n`` of them."""
    from laminae.schemas.ids import document_id
    from laminae.tasks.config import ParseConfig
    from laminae.tasks.crawl.results import FetchResult
    from laminae.tasks.nodes.document_nodes import build_nodes
    from laminae.tasks.parse.html import parse_html

    base = []
    for path in sorted(SITE.glob("*.html")):
        url = "http://site.test/" + path.name
        fetch = FetchResult(url=url, final_url=url, raw_key="k", content_type="text/html")
        nodes = build_nodes(parse_html(path.read_bytes(), url), document_id(url), fetch, ParseConfig())
        base.extend(r["text"] for r in nodes.components + nodes.subcomponents)
    out, copy = [], 0
    while len(out) < n:
        out.extend(f"{text} (copy {copy})" for text in base)
        copy += 1
    return out[:n]
