"""Benchmark a full build of a folder of real HTML pages served from 127.0.0.1.

Reads a folder of ``*.html`` files (``--pages DIR``, repeatable) and/or the 258 real-world pages
of the npm package ``htmlparser-benchmark`` (``--htmlparser-benchmark``, fetched with ``npm pack``
into the cache); serves them on 127.0.0.1, runs the ``build_index`` flow into a temporary index
and prints pages/s, seconds per stage (with each stage's share), the counts per layer, and two
plausibility checks computed independently from the raw HTML with lxml: table data rows and
in-corpus links. Writes only temporary files.

    .venv/bin/python bench/build.py --htmlparser-benchmark --pages /path/to/wikipedia/pages
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urljoin

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import flows  # noqa: E402,F401 - Prefect defaults before Prefect is imported
from bench.corpora import fetch_htmlparser_benchmark  # noqa: E402
from flows.demo import SiteServer  # noqa: E402


def make_mirror(article: Path, corpus: Path, pages: int) -> list[str]:
    """Serve one real article at ``pages`` of its own ``/wiki/`` link targets (a linked corpus).

    Each copy gets one distinct first paragraph naming its path; the rest is the article's HTML
    as published but for absolute article links made site-relative (what a mirror does), so its
    ``/wiki/`` links between copies resolve inside the corpus.
    """
    import re

    html = article.read_text(encoding="utf-8", errors="replace")
    html = re.sub(r'href="https?://en\.wikipedia\.org/wiki/', 'href="/wiki/', html)
    targets = []
    for href in re.findall(r'href="(/wiki/[^"#?:]+)"', html):
        if href not in targets:
            targets.append(href)
    names = []
    for href in targets[:pages]:
        name = href.lstrip("/")
        path = corpus / name
        path.parent.mkdir(parents=True, exist_ok=True)
        marker = f'<p>Mirror copy served at {href} for the laminae link benchmark.</p>'
        own = re.sub(r'<link rel="canonical" href="[^"]*"', f'<link rel="canonical" href="{href}"', html)
        path.write_text(re.sub(r"(<div[^>]*id=\"mw-content-text\"[^>]*>)", r"\1" + marker, own, count=1),
                        encoding="utf-8")
        names.append(name)
    return names


def independent_counts(root: Path, names: list[str], base: str) -> dict:
    """Data rows and in-corpus links counted straight from the HTML (no laminae code)."""
    import lxml.html

    corpus = {base + n for n in names}
    rows = links = 0
    for name in names:
        try:
            tree = lxml.html.fromstring((root / name).read_bytes())
        except (ValueError, lxml.etree.ParserError):
            continue
        for tr in tree.iter("tr"):
            if tr.find("td") is not None:
                rows += 1
        for a in tree.iterfind(".//a[@href]"):
            target = urljoin(base + name, a.get("href")).split("#", 1)[0]
            if target in corpus and target != base + name:
                links += 1
    return {"td_rows_in_html": rows, "in_corpus_links_in_html": links}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", action="append", default=[], help="folder of .html files (repeatable)")
    parser.add_argument("--htmlparser-benchmark", action="store_true", help="add the 258 pages of that npm package")
    parser.add_argument("--mirror", help="a real Wikipedia article (.html) to serve at its own /wiki/ link targets")
    parser.add_argument("--mirror-pages", type=int, default=300, help="how many link targets serve the mirror")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--batch-documents", type=int, default=64)
    parser.add_argument("--parse-workers", type=int, default=0, help="processes that parse each batch (0: in-process)")
    parser.add_argument("--keep", help="keep the index in this directory")
    args = parser.parse_args()

    corpus = Path(tempfile.mkdtemp(prefix="laminae-bench-site-"))
    sources = [Path(p) for p in args.pages]
    if args.htmlparser_benchmark:
        sources.append(fetch_htmlparser_benchmark(flows.cache_dir() / "bench"))
    names = []
    for i, folder in enumerate(sources):
        for path in sorted(folder.rglob("*.html")):
            name = f"s{i}-{path.name}"
            shutil.copyfile(path, corpus / name)
            names.append(name)
    if args.mirror:
        names.extend(make_mirror(Path(args.mirror), corpus, args.mirror_pages))
    if not names:
        parser.error("no pages: pass --pages DIR and/or --htmlparser-benchmark")
    size_mb = sum((corpus / n).stat().st_size for n in names) / 1e6

    from flows.build import build_index

    index = args.keep or tempfile.mkdtemp(prefix="laminae-bench-index-")
    with SiteServer(corpus) as site, tempfile.TemporaryDirectory() as tmp:
        seeds = Path(tmp) / "seeds.txt"
        seeds.write_text("\n".join(site.base_url + n for n in names) + "\n")
        settings = {"embed": {"threads": args.threads}, "batch_documents": args.batch_documents,
                    "crawl": {"respect_robots": False}, "runner": {"parse_workers": args.parse_workers}}
        started = time.perf_counter()
        summary = build_index(seeds=str(seeds), index=index, settings=settings)
        wall = time.perf_counter() - started
        check = independent_counts(corpus, names, site.base_url)

    secs = summary["seconds_by_stage"]
    total = secs["total"]
    counts = summary["counts"]
    print(f"corpus: {len(names)} pages, {size_mb:.1f} MB; status {summary['status']}, "
          f"{summary['documents_indexed']} documents indexed")
    print(f"wall {wall:.1f} s (incl. Prefect start-up), flow {total:.1f} s → "
          f"{summary['documents_indexed'] / total:.2f} pages/s; without model load "
          f"{summary['documents_indexed'] / (total - secs.get('load_model', 0)):.2f} pages/s")
    print("stage         seconds   share")
    for stage, value in sorted(secs.items(), key=lambda kv: -kv[1]):
        if stage != "total":
            print(f"{stage:<13} {value:8.2f}  {100 * value / total:5.1f}%")
    print("counts:", json.dumps({k: counts[k] for k in ("documents", "components", "subcomponents", "edges")}))
    print(f"links_to: {counts['links_to_resolved']} resolved in corpus, {counts['links_to_unresolved']} outside")
    print(f"embedded {summary['embedded']} texts, reused {summary['reused_vectors']}")
    print(f"errors: {summary['errors_by_stage']}; warnings: {summary['warnings_by_stage']}")
    print(f"check: table rows {counts['subcomponents'].get('row', 0)} vs <tr> with <td> in the HTML "
          f"{check['td_rows_in_html']} (the HTML count includes layout tables and navboxes laminae drops)")
    print(f"check: in-corpus <a href> in the HTML {check['in_corpus_links_in_html']} (all, incl. navigation); "
          "resolved link edges count component + sentence/row sources")
    if not args.keep:
        shutil.rmtree(index, ignore_errors=True)
    shutil.rmtree(corpus, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
