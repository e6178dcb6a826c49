"""Benchmark the PDF parse stage against pymupdf's bare ``get_text()`` on the same pages.

Generates a corpus of multi-page reports in memory (``tests.support.synthetic_pdf.report_pdf``: headings,
body text with links, two-column parts, ruled tables and captioned images; running headers and
page numbers), then times, in the same run and on one core:

- reference: open each PDF and call ``page.get_text()`` on every page (plain text, nothing else);
- parse: ``parse_pdf``, the PDF parser (reading order, headings, tables, images, links), the
  design's "parse" stage for a PDF; issue 6 asks for at least 0.3x the reference;
- parse + split + explode + edges: ``parse_pdf`` and ``build_nodes`` (pysbd sentence splitting,
  table-row explosion, edges), everything a build does to a PDF before embedding.

Each is run ``--repeats`` times, interleaved; the best run counts. Prints pages/s, the ratio to
the reference and what was found.

``--shapes`` instead reads the PDFs of ``tests.support.pdf_shapes`` (spaces as spans, glyph gaps,
off-centre and three columns, italic and Medium headings, check boxes, tiled figures, a font
without a Unicode map, right-to-left text) with each ``pdf_layout`` setting (rules, then pymupdf's
layout model) and prints, against each file's reference text, ``bench/fidelity_score.py``'s
measures: reference words found (pooled and the mean of the files), found words in reading order,
precision, headings found as section names, figures (laminae's / the reference's), seconds a page,
and the layout model's own seconds a page.

    .venv/bin/python bench/pdf.py [--documents 40 --pages 10 --table-every 3 --image-every 2]
    .venv/bin/python bench/pdf.py --shapes
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

if not __package__:  # run as a file: the repository's bench and tests packages
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import Timer, arguments, table
from laminae.schemas import document_id
from laminae.tasks.config import ParseConfig
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.nodes.document_nodes import build_nodes
from laminae.tasks.parse.pdf import parse_pdf
from tests.support.synthetic_pdf import report_pdf


def main() -> int:
    parser = arguments(__doc__, repeats=3)
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--pages", type=int, default=10, help="at least this many pages per document")
    parser.add_argument("--table-every", type=int, default=3, help="a ruled table in every Nth section")
    parser.add_argument("--image-every", type=int, default=2, help="an image in every Nth section")
    parser.add_argument("--no-tables", action="store_true", help="parse with pdf_tables off")
    parser.add_argument("--shapes", action="store_true", help="score the fixture shapes, rules against the model")
    args = parser.parse_args()
    if args.shapes:
        return shapes()

    import pymupdf

    timer = Timer()
    with timer("corpus") as generated:
        corpus = [report_pdf(pages=args.pages, seed=i, table_every=args.table_every, image_every=args.image_every)
                  for i in range(args.documents)]
    n_pages = sum(pymupdf.open(stream=body, filetype="pdf").page_count for body in corpus)
    size = sum(len(body) for body in corpus)
    print(f"corpus: {len(corpus)} PDFs, {n_pages} pages, {size / 1e6:.1f} MB, generated in "
          f"{generated.seconds:.1f} s (a table in every {args.table_every}. section, "
          f"an image in every {args.image_every}.; a section is about 1.7 pages)")
    cfg = ParseConfig(pdf_tables=not args.no_tables)
    urls = [f"http://127.0.0.1/reports/{i}.pdf" for i in range(len(corpus))]

    def bare() -> Counter:
        chars = 0
        for body in corpus:
            with pymupdf.open(stream=body, filetype="pdf") as doc:
                for page in doc:
                    chars += len(page.get_text())
        return Counter(chars=chars)

    def parse_only() -> Counter:
        counts: Counter = Counter()
        for body, url in zip(corpus, urls, strict=True):
            page = parse_pdf(body, url, cfg)
            counts.update(c.kind for c in page.components)
            counts["links"] += sum(len(c.links) for c in page.components)
            counts["table rows"] += sum(len(c.rows or []) for c in page.components)
        return counts

    def stage() -> Counter:
        counts: Counter = Counter()
        for body, url in zip(corpus, urls, strict=True):
            page = parse_pdf(body, url, cfg)
            fetch = FetchResult(url=url, final_url=url, content_type="application/pdf", raw_key="bench")
            nodes = build_nodes(page, document_id(url), fetch, cfg)
            counts.update(s["kind"] for s in nodes.subcomponents)
            counts["edges"] += len(nodes.edges)
        return counts

    runs = {"reference: pymupdf get_text()": bare, "parse (parse_pdf)": parse_only,
            "parse + split + explode + edges": stage}
    found: dict[str, Counter] = {}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            with timer(name):
                found[name] = fn()
    print(table(["run", "pages/s"], [(name, n_pages / timer.best(name)) for name in runs],
                formats={"pages/s": ".1f"}, ratio_of="pages/s", ratio_title="× ref"))
    split = timer.best("parse + split + explode + edges") - timer.best("parse (parse_pdf)")
    print(f"split + explode + edges alone: {n_pages / split:.1f} pages/s")
    print("found by parse_pdf:", dict(found["parse (parse_pdf)"]))
    print("found by build_nodes:", dict(found["parse + split + explode + edges"]))
    return 0


def shapes() -> int:
    """Score ``tests.support.pdf_shapes`` with each ``pdf_layout`` setting (``bench/fidelity_score.py``'s
    measures)."""
    import pymupdf

    from bench.fidelity_score import Score, score
    from laminae.tasks.parse.pdf.layout import LayoutClock
    from tests.support.pdf_shapes import DOCUMENTS

    corpus = {name: make() for name, make in DOCUMENTS.items()}
    n_pages = sum(pymupdf.open(stream=body, filetype="pdf").page_count for body, _ in corpus.values())
    rows = []
    for mode in ("rules", "model"):
        cfg = ParseConfig(pdf_layout=mode)
        total, recalls = Score(), []
        LayoutClock.pages, LayoutClock.seconds = 0, 0.0
        start = time.perf_counter()
        for name, (body, reference) in corpus.items():
            one = score(parse_pdf(body, f"http://127.0.0.1/shapes/{name}", cfg), reference)
            recalls.append(one.shares()["words"] or 0.0)
            total = total + one
        seconds = time.perf_counter() - start
        shares = total.shares()
        rows.append((mode, shares["words"], sum(recalls) / len(recalls), shares["in_order"], shares["precision"],
                     f"{total.headings_found}/{total.ref_headings}", f"{total.images}/{total.ref_images}",
                     seconds / n_pages, LayoutClock.seconds / LayoutClock.pages if LayoutClock.pages else 0.0))
    print(f"{len(corpus)} shapes, {n_pages} pages")
    print(table(["pdf_layout", "words", "words (mean)", "in order", "precision", "headings", "figures", "s/page",
                 "model s/page"], rows,
                formats={k: ".3f" for k in ("words", "words (mean)", "in order", "precision", "s/page",
                                            "model s/page")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
