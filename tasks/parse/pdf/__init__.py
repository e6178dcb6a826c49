"""Parse one PDF into the same components as an HTML page, with pymupdf: the page layout.

Reads the PDF's bytes; returns a ``ParsedPage`` whose components carry their page and bbox:
paragraphs (text blocks in reading order, line-end hyphens repaired, running headers, footers and
page numbers dropped), tables (header + rows, ``laminae.tasks.parse.pdf.tables``) and figures (an
embedded image, image tiles merged, or a vector drawing rendered; with its nearest "Figure N"
caption and its callout labels as alt text). The jobs live in their own modules: a line's text
from its spans (``text``: spaces, word gaps, ligatures, dingbats, characters without a Unicode
map), a page's blocks (``page``), columns found wherever their gutter lies (``order``),
headings from the outline or from type size, weight and slant (``headings``), figures
(``figures``, ``drawings``), and, with ``pdf_layout=model``, pymupdf's layout model
(``layout``: section headers, page headers and footers, picture and table regions). URI links
keep their character offsets (or table row) so the node stage makes ``links_to`` edges from
components and sentences. A page without a text layer (a scan), and text in a font without a
Unicode map, is rendered and read by OCR (``laminae.tasks.parse.pdf.scans``): its lines become
paragraphs with page and bbox like any text, and the document's warnings say ``ocr_used`` or
``unmapped_font``.

Bounded: in a worker process (``laminae.tasks.parse.isolated``) the PDF's deadline becomes
``timeout_s`` plus ``pdf_page_timeout_s`` a page once its pages are counted, and ``find_tables``
gets at most ``pdf_table_timeout_s`` a page and ``pdf_tables_budget_s`` a document: a page over
either keeps its text and loses only the tables ``find_tables`` would have found, with a warning.
OCR reads at most ``ocr.max_pages`` pages a document (scans and unmapped text together).
"""

from __future__ import annotations

import re
from collections import Counter

from laminae.schemas.pictures import MAX_PIXELS
from laminae.tasks.config import OcrConfig, ParseConfig
from laminae.tasks.crawl.hrefs import link_target
from laminae.tasks.parse.document import Component, Link, ParsedPage, linearize_table
from laminae.tasks.parse.html import ParseError, image_text_proxy
from laminae.tasks.parse.isolated import extend_deadline
from laminae.tasks.parse.pdf.blocks import Block, Words, cell_text, within
from laminae.tasks.parse.pdf.drawings import drawings
from laminae.tasks.parse.pdf.figures import figures, take_captions, take_labels
from laminae.tasks.parse.pdf.headings import assign_headings
from laminae.tasks.parse.pdf.layout import MARGIN_REGIONS, available, boxes, label_blocks, page_regions
from laminae.tasks.parse.pdf.order import reading_order
from laminae.tasks.parse.pdf.page import page_blocks
from laminae.tasks.parse.pdf.scans import Scans
from laminae.tasks.parse.pdf.tables import TableBudget, find_page_tables

MARGIN = 0.08  # top and bottom share of a page where running headers and footers sit
PAGE_NUMBER = re.compile(r"^(page\s*)?(\d{1,4}|[ivxlcdm]{1,6})(\s*(of|/)\s*\d{1,4})?$", re.IGNORECASE)
FIGURE_CAPTION = re.compile(r"^(figure|fig\.?)\s*\d+", re.IGNORECASE)
TABLE_CAPTION = re.compile(r"^table\s*\d+", re.IGNORECASE)


class PdfError(ParseError):
    """A PDF that cannot be indexed; ``reason`` is the error row's reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _norm(text: str) -> str:
    return re.sub(r"\d+", "#", " ".join(text.lower().split()))


def _drop_running_text(pages: list[list[Block]], heights: list[float]) -> None:
    """Remove page numbers and text repeated in the top or bottom margin of many pages, or of two
    or more with a page number at its start or end (a chapter's running head: "Chapter 4: Function
    reference 12")."""
    def in_margin(b: Block) -> bool:
        h = heights[b.page - 1]
        return b.bbox[3] <= h * MARGIN or b.bbox[1] >= h * (1 - MARGIN)

    def running(b: Block) -> bool:
        key = _norm(b.text)
        return seen[key] >= repeat or (seen[key] >= 2 and (key.startswith("# ") or key.endswith(" #")))

    seen = Counter(key for blocks in pages for key in {_norm(b.text) for b in blocks if in_margin(b)})
    repeat = max(2, (len(pages) + 1) // 2)
    for blocks in pages:
        blocks[:] = [b for b in blocks if not (in_margin(b) and (PAGE_NUMBER.match(b.text) or running(b)))]


def _text_flags(page, number: int, warnings: list[str]) -> int:
    """pymupdf's dict flags: with vector boxes, and images unless one is too large to decode safely."""
    import pymupdf

    flags = pymupdf.TEXTFLAGS_DICT | pymupdf.TEXT_COLLECT_VECTORS
    huge = [(w, h) for _, _, w, h, *_ in page.get_images(full=True) if w * h > MAX_PIXELS]
    if not huge:
        return flags
    warnings.extend(f"image_skipped: page {number}: {w}x{h} pixels is too large" for w, h in huge)
    return flags & ~pymupdf.TEXT_PRESERVE_IMAGES


def _links(page, url: str, words: Words) -> list[tuple[tuple, str, str]]:
    """(box, target URL, anchor text) of each web link on a page."""
    out = []
    for link in page.get_links():
        target = link_target(link, url)
        if target:
            rect = link["from"]
            box = (rect.x0, rect.y0, rect.x1, rect.y1)
            out.append((box, target, cell_text(words(), box).rstrip(".,;:")))
    return out


def _attach_links(links: list[tuple[tuple, str, str]], blocks: list[Block]) -> None:
    for box, target, anchor in links:
        for b in blocks:
            if within(box, b.bbox):
                row = None
                if b.kind == "table":
                    cy = (box[1] + box[3]) / 2
                    row = next((i for i, (top, bottom) in enumerate(b.row_bounds) if top <= cy <= bottom), None)
                b.links.append(Link(url=target, anchor=anchor, row=row))
                break


def _continues(previous: Component | None, prev_block: Block | None, block: Block) -> bool:
    """Whether a text block carries on the paragraph before it (across a column or page break)."""
    if previous is None or prev_block is None or previous.kind != "paragraph" or block.gap_before:
        return False
    mid_sentence = previous.text[-1:].isalnum() or previous.text.endswith((",", "-", "–", "—"))
    if abs(prev_block.size - block.size) > 0.6 or not mid_sentence:
        return False
    column_break = block.bbox[1] < prev_block.bbox[1]  # it starts higher up: the next column
    if prev_block.page == block.page and not column_break and block.bbox[1] - prev_block.bbox[3] > block.size:
        return False  # a paragraph's gap between them
    first = block.text[:1]
    caseless = first.isalpha() and not first.isupper() and not first.islower()  # Arabic, Hebrew, CJK
    return first.islower() or caseless or prev_block.page != block.page or column_break


def _title(doc, pages: list[list[Block]], url: str) -> str:
    meta = " ".join((doc.metadata or {}).get("title", "").split())
    if meta and not meta.lower().startswith(("untitled", "microsoft word")) and not meta.lower().endswith(".pdf"):
        return meta
    headings = [b for blocks in pages for b in blocks if b.heading]
    if headings:
        return min(headings, key=lambda b: (b.heading, b.page, b.bbox[1])).text
    first = next((b.text for blocks in pages for b in blocks if b.kind == "text"), "")
    return first[:120] or url.rstrip("/").rsplit("/", 1)[-1]


def _open(body: bytes, cfg: ParseConfig):
    import pymupdf

    pymupdf.TOOLS.mupdf_display_errors(False)
    pymupdf.TOOLS.mupdf_display_warnings(False)
    if not body.lstrip()[:5].startswith(b"%PDF"):
        raise PdfError("unparsable_pdf", "the bytes do not start with a PDF header")
    try:
        doc = pymupdf.open(stream=body, filetype="pdf")
    except Exception as exc:  # pymupdf raises several types (FileDataError, EmptyFileError, RuntimeError)
        raise PdfError("unparsable_pdf", f"pymupdf could not open it: {type(exc).__name__}: {exc}") from None
    if doc.needs_pass or doc.is_encrypted:
        doc.close()
        raise PdfError("encrypted_pdf", "the PDF is password-protected; laminae does not decrypt documents")
    if doc.page_count == 0:
        doc.close()
        raise PdfError("empty_pdf", "the PDF has no pages")
    if doc.page_count > cfg.pdf_max_pages:
        n = doc.page_count
        doc.close()
        raise PdfError("pdf_too_large", f"{n} pages exceeds the limit of {cfg.pdf_max_pages} "
                                        "(raise LAMINAE_PARSE__PDF_MAX_PAGES to index it)")
    return doc


def parse_pdf(body: bytes, url: str, cfg: ParseConfig | None = None, ocr: OcrConfig | None = None) -> ParsedPage:
    """Parse one PDF; raises ``PdfError`` (with a reason) for a PDF that cannot be indexed. Pages
    without a text layer are rendered and read by OCR (``ocr``; default settings when None, off when
    ``ocr.enabled`` or ``ocr.pdf_pages`` is false)."""
    cfg = cfg or ParseConfig()
    ocr = ocr or OcrConfig()
    scans = Scans(ocr)
    doc = _open(body, cfg)
    extend_deadline(cfg.timeout_s + cfg.pdf_page_timeout_s * doc.page_count)
    budget = TableBudget(cfg)
    warnings: list[str] = []
    if doc.is_repaired:
        warnings.append("repaired_pdf: the file was damaged (truncated or broken cross-references) and repaired")
    model = _use_model(cfg)
    unreadable = 0
    try:
        pages: list[list[Block]] = []
        extras: list[tuple[list[Block], list[Block], list]] = []  # tables, images, links per page
        heights: list[float] = []
        for number in range(1, doc.page_count + 1):
            blocks: list[Block] = []
            extra: tuple[list[Block], list[Block], list] = ([], [], [])
            try:
                page = doc.load_page(number - 1)
                heights.append(page.rect.height)
                blocks, extra = _read_page(page, number, url, cfg, scans, budget, model, warnings)
            except Exception as exc:  # one unreadable page must not lose the others
                warnings.append(f"page_unreadable: page {number}: {type(exc).__name__}: {exc}")
                unreadable += 1
                blocks, extra = [], ([], [], [])  # what a later step had made of the page is dropped too
                if len(heights) < number:  # the page's size was not read
                    heights.append(heights[-1] if heights else 792.0)
            pages.append(blocks)
            extras.append(extra)
        if unreadable == doc.page_count:
            raise PdfError("unparsable_pdf", "no page of the PDF could be read")
        has_text = any(pages)
        _drop_running_text(pages, heights)
        try:
            toc = doc.get_toc(simple=True) if has_text else []
        except Exception as exc:  # a broken outline must not lose the text
            warnings.append(f"outline_unreadable: {type(exc).__name__}: {exc}")
            toc = []
        assign_headings(pages, toc)
        title = _title(doc, pages, url)
        for blocks, (tables, images, links) in zip(pages, extras, strict=True):
            blocks[:] = [b for b in blocks if not any(within(b.bbox, t.bbox) for t in tables)]
            take_captions(tables, blocks, TABLE_CAPTION)
            take_captions(images, blocks, FIGURE_CAPTION)
            blocks[:] = reading_order(blocks + tables + images)
            _attach_links(links, blocks)
        warnings.extend(scans.summary(doc.page_count, has_text))
        warnings.extend(budget.warnings())
        components = _components(pages, title, cfg)
    finally:
        doc.close()
    return ParsedPage(url, title, None, None, components, warnings, kind="pdf")


def _use_model(cfg: ParseConfig) -> bool:
    """Whether pages are read with the layout model: ``model`` asks for it (where it is installed);
    ``auto`` uses the rules, which measured as good or better on every shape and 20-40 times
    cheaper (bench/pdf.py --shapes)."""
    return cfg.pdf_layout == "model" and available()


def _read_page(page, number: int, url: str, cfg: ParseConfig, scans: Scans, budget: TableBudget, model: bool,
               warnings: list[str]) -> tuple[list[Block], tuple[list[Block], list[Block], list]]:
    """One page's text blocks, and its tables, figures and links."""
    textpage = page.get_textpage(flags=_text_flags(page, number, warnings))
    blocks, raw_images, rules = page_blocks(page, number, textpage)
    garbled = [b for b in blocks if b.garbled]
    if garbled:
        blocks = [b for b in blocks if not b.garbled] + scans.read_garbled(page, number, garbled, warnings)
    images = figures(page, number, raw_images, cfg, warnings)
    if not blocks and not garbled:
        blocks, images = scans.read(page, number, images, warnings)
    regions = page_regions(page) if model and blocks else []
    if regions:
        label_blocks(blocks, regions)
        margin = 0.15 * page.rect.height
        blocks = [b for b in blocks if not (b.region in MARGIN_REGIONS and (
            b.bbox[3] <= margin or b.bbox[1] >= page.rect.height - margin))]
    take_labels(images, blocks, page.rect.width * page.rect.height, boxes(regions, "picture"))
    words = Words(page, textpage)
    tables = (find_page_tables(page, number, rules, words, budget, cfg, boxes(regions, "table") if regions else None)
              if cfg.pdf_tables and blocks else [])
    images += drawings(page, number, rules, blocks, tables, images, warnings, boxes(regions, "picture"))
    return blocks, (tables, images, _links(page, url, words))


def _components(pages: list[list[Block]], title: str, cfg: ParseConfig) -> list[Component]:
    components: list[Component] = []
    sections: list[tuple[int, str]] = []
    prev_block: Block | None = None
    for blocks in pages:
        for b in blocks:
            path = [text for _, text in sections]
            if b.heading:
                while sections and sections[-1][0] >= b.heading:
                    sections.pop()
                sections.append((b.heading, b.text))
                prev_block = None
                continue
            if b.kind != "text":
                comp = b.component
                comp.section_path = path
                comp.links = b.links
                if comp.kind == "table":
                    comp.text = linearize_table(comp.caption, comp.header, comp.rows or [])
                else:
                    comp.text = image_text_proxy(comp, title)
                components.append(comp)
                prev_block = None
                continue
            last = components[-1] if components else None
            if _continues(last, prev_block, b):
                b.offset = len(last.text) + 1
                last.text = f"{last.text} {b.text}"
                b.component = last
            else:
                b.component = Component(kind="paragraph", text=b.text, section_path=path, page=b.page,
                                        bbox=[float(v) for v in b.bbox])
                components.append(b.component)
            _place_links(b)
            prev_block = b
    return [c for c in components if c.kind != "paragraph" or len(c.text) >= max(cfg.min_paragraph_chars, 1)]


def _place_links(b: Block) -> None:
    """Give a paragraph's links the character offsets of their anchors."""
    comp = b.component
    cursor = b.offset
    for link in b.links:
        at = comp.text.find(link.anchor, cursor) if link.anchor else -1
        if at < 0 and link.anchor:
            at = comp.text.find(link.anchor, b.offset)
        if at >= 0:
            link.start, link.end = at, at + len(link.anchor)
            cursor = link.end
        comp.links.append(link)
