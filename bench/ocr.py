"""Benchmark OCR with the defaults a user gets: pictures/s, scanned pages/s and the share of words
read back, next to the cost of parsing the same pages with a text layer.

Generates (with a fixed seed) pictures of random dictionary lines at several font sizes, and A4
PDFs twice: scanned (each page a picture, no text layer) and born-digital (the same lines as
text). Reads each picture with ``read_lines`` and each PDF with ``parse_pdf`` under the default
``OcrConfig``; the reference, measured in the same run, is ``parse_pdf`` of the born-digital PDFs.
Word accuracy is the share of the expected words (as the full-text index splits them) found in
what was read, with the spacing repair on (the default) and off. Writes nothing.

    .venv/bin/python bench/ocr.py [--pictures 30] [--pdfs 4] [--pages 3]
"""

from __future__ import annotations

import random
import re
import sys
from collections import Counter
from pathlib import Path

if not __package__:  # run as a file: the repository's bench and tests packages
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import Timer, arguments
from laminae.schemas.pictures import load_image
from laminae.tasks.config import OcrConfig
from laminae.tasks.parse.ocr import read_lines, recognizer, repair_spacing
from laminae.tasks.parse.pdf import parse_pdf
from tests.support.scans import random_lines, scanned_pdf, text_picture


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def recall(expected: str, got: str) -> tuple[int, int]:
    """(expected words found, expected words), counting repeats."""
    want, have = Counter(words(expected)), Counter(words(got))
    return sum(min(n, have[w]) for w, n in want.items()), sum(want.values())


def text_pdf(pages: list[list[str]]) -> bytes:
    import pymupdf

    doc = pymupdf.open()
    for lines in pages:
        page = doc.new_page(width=595, height=842)
        y = 80.0
        for line in lines:
            if line:
                page.insert_text((72, y), line, fontsize=14)
            y += 24
    data = doc.tobytes()
    doc.close()
    return data


def main() -> None:
    parser = arguments(__doc__, seed=13)
    parser.add_argument("--pictures", type=int, default=30)
    parser.add_argument("--pdfs", type=int, default=4)
    parser.add_argument("--pages", type=int, default=3, help="pages per PDF")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    cfg = OcrConfig()
    raw = OcrConfig(repair_spacing=False)

    timer = Timer()
    with timer("load") as load:
        recognizer(cfg)
        repair_spacing("Loadthedictionary")
    print(f"load: recognizer and dictionary {load.seconds:.2f} s")

    pictures = []
    for i in range(args.pictures):
        lines = random_lines(rng, rng.randint(1, 4), words=rng.randint(3, 7))
        size = (18, 24, 30, 40)[i % 4]
        pictures.append((" ".join(lines), load_image(text_picture(lines, font_size=size, chart=i % 3 == 0))))
    found = [0, 0]
    unrepaired = [0, 0]
    with timer("pictures"):
        for expected, picture in pictures:
            got = " ".join(line.text for line in read_lines(picture, cfg))
            hit, total = recall(expected, got)
            found[0] += hit
            found[1] += total
    seconds = timer.last("pictures")
    for expected, picture in pictures:
        hit, total = recall(expected, " ".join(line.text for line in read_lines(picture, raw)))
        unrepaired[0] += hit
        unrepaired[1] += total
    pixels = sum(p.size[0] * p.size[1] for _, p in pictures) / len(pictures)
    print(f"pictures: {len(pictures)} (mean {pixels / 1e6:.2f} Mpx) in {seconds:.2f} s = "
          f"{len(pictures) / seconds:.2f} pictures/s; words read {found[0] / found[1]:.3f} "
          f"(spacing not repaired: {unrepaired[0] / unrepaired[1]:.3f}) of {found[1]}")

    documents = []
    for _ in range(args.pdfs):
        pages = []
        for _ in range(args.pages):
            lines = random_lines(rng, 6, words=7)
            pages.append([*lines[:3], "", *lines[3:]])
        documents.append(pages)
    scans = [scanned_pdf(pages) for pages in documents]
    texts = [text_pdf(pages) for pages in documents]
    total_pages = args.pdfs * args.pages

    with timer("text layer"):
        for body in texts:
            parse_pdf(body, "http://bench.test/text.pdf")
    reference = timer.last("text layer")
    read = [0, 0]
    with timer("scanned"):
        for body, pages in zip(scans, documents, strict=True):
            parsed = parse_pdf(body, "http://bench.test/scan.pdf", ocr=cfg)
            hit, total = recall(" ".join(" ".join(p) for p in pages), " ".join(c.text for c in parsed.components))
            read[0] += hit
            read[1] += total
    scanned = timer.last("scanned")
    print(f"scanned PDFs: {total_pages} pages in {scanned:.2f} s = {total_pages / scanned:.2f} pages/s; "
          f"words read {read[0] / read[1]:.3f} of {read[1]}")
    print(f"reference: the same pages with a text layer parse in {reference:.3f} s = "
          f"{total_pages / reference:.1f} pages/s; OCR costs {scanned / reference:.0f}x the parse without it")


if __name__ == "__main__":
    main()
