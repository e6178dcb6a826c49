"""Parse one PDF into the same components as an HTML page, with pymupdf: the page layout.

Reads the PDF's bytes; returns a ``ParsedPage`` whose components carry their page and bbox:
paragraphs (text blocks in reading order, two columns included, line-end hyphens repaired,
running headers, footers and page numbers dropped), tables (header + rows of ruled tables, read
by ``laminae.tasks.parse.pdf_tables``), and embedded images (bytes kept on the component, with a
nearby "Figure N" caption). Headings come from the PDF outline when it has one, else from font
size and weight, and give each component its section path. URI links keep their character
offsets (or table row) so the node stage makes ``links_to`` edges from components and sentences.
A page without a text layer (a scan) is rendered and read by OCR (``laminae.tasks.parse.pdf_scans``):
its lines become paragraphs with page and bbox like any text, and the document's warnings say
``ocr_used``.

Bounded: in a worker process (``laminae.tasks.parse.isolated``) the PDF's deadline becomes
``timeout_s`` plus ``pdf_page_timeout_s`` a page once its pages are counted, and ``find_tables``
gets at most ``pdf_table_timeout_s`` a page and ``pdf_tables_budget_s`` a document: a page over
either keeps its text and loses only the tables ``find_tables`` would have found, with a warning.
"""

from __future__ import annotations

import re
from collections import Counter

from laminae.schemas.pictures import MAX_PIXELS
from laminae.tasks.config import OcrConfig, ParseConfig
from laminae.tasks.crawl.links import link_target
from laminae.tasks.parse.document import Component, Link, ParsedPage, linearize_table
from laminae.tasks.parse.html import ParseError, image_text_proxy
from laminae.tasks.parse.isolated import extend_deadline
from laminae.tasks.parse.pdf_blocks import Block, Words, cell_text, join_lines, within
from laminae.tasks.parse.pdf_scans import Scans
from laminae.tasks.parse.pdf_tables import TableBudget, read_tables, table_areas

MARGIN = 0.08  # top and bottom share of a page where running headers and footers sit
PAGE_NUMBER = re.compile(r"^(page\s*)?(\d{1,4}|[ivxlcdm]{1,6})(\s*(of|/)\s*\d{1,4})?$", re.IGNORECASE)
FIGURE_CAPTION = re.compile(r"^(figure|fig\.?)\s*\d+", re.IGNORECASE)
TABLE_CAPTION = re.compile(r"^table\s*\d+", re.IGNORECASE)
WEB_IMAGE_EXT = {"png": "image/png", "jpeg": "image/jpeg", "jpg": "image/jpeg", "gif": "image/gif"}


class PdfError(ParseError):
    """A PDF that cannot be indexed; ``reason`` is the error row's reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _page_blocks(page, number: int, textpage, cfg: ParseConfig,
                 warnings: list[str]) -> tuple[list[Block], list[Block], list[tuple]]:
    """Text blocks (split where the font size changes or a wide gap opens), image blocks, and the
    boxes of vector paths ``(x0, y0, x1, y1, stroked, is_rectangle)``; lines are thin rectangles."""
    out: list[Block] = []
    images: list[Block] = []
    rules: list[tuple] = []
    for block in page.get_text("dict", textpage=textpage)["blocks"]:
        if block["type"] == 3:
            rules.append((*block["bbox"], block.get("stroked", True), bool(block.get("isrect"))))
            continue
        if block["type"] == 1:
            image = _image_block(block, number, cfg, warnings)
            if image is not None:
                images.append(image)
            continue
        current: Block | None = None
        previous_bottom = None
        for line in block["lines"]:
            spans = [s for s in line["spans"] if not s["text"].isspace()]
            if not spans:
                continue
            text = "".join(s["text"] for s in spans)
            size = round(sum(s["size"] * len(s["text"]) for s in spans) / len(text), 1)
            bold = all(s["flags"] & 16 or "Bold" in s["font"] or "bold" in s["font"] for s in spans)
            x0, y0, x1, y1 = line["bbox"]
            gap = previous_bottom is not None and y0 - previous_bottom > 0.8 * max(y1 - y0, 1.0)
            if current is None or abs(size - current.size) > 0.6 or bold != current.bold or gap:
                current = Block(number, (x0, y0, x1, y1), size=size, bold=bold, gap_before=gap)
                out.append(current)
            else:
                b = current.bbox
                current.bbox = (min(b[0], x0), min(b[1], y0), max(b[2], x1), max(b[3], y1))
            current.lines.append(text)
            previous_bottom = y1
    for b in out:
        b.text = join_lines(b.lines)
    return [b for b in out if b.text], images, rules


def _image_block(block: dict, number: int, cfg: ParseConfig, warnings: list[str]) -> Block | None:
    """An image block of pymupdf's dict as an image component; None for decorations."""
    x0, y0, x1, y1 = block["bbox"]
    width, height = block["width"], block["height"]
    if min(width, height, x1 - x0, y1 - y0) < cfg.min_image_side:
        return None
    data, mime = block["image"], WEB_IMAGE_EXT.get(block.get("ext", ""))
    if mime is None or block.get("mask"):
        try:
            import pymupdf

            pix = pymupdf.Pixmap(data)
            if block.get("mask"):
                pix = pymupdf.Pixmap(pix, pymupdf.Pixmap(block["mask"]))
            if pix.n - pix.alpha >= 4:
                pix = pymupdf.Pixmap(pymupdf.csRGB, pix)
            data, mime = pix.tobytes("png"), "image/png"
        except Exception as exc:  # a broken image stream must not lose the rest of the page
            warnings.append(f"image_unreadable: page {number}: {type(exc).__name__}: {exc}")
            return None
    out = Block(number, (x0, y0, x1, y1), kind="image")
    out.component = Component(kind="image", text="", section_path=[], width=width, height=height, page=number,
                              bbox=[x0, y0, x1, y1], image_data=data, image_mime=mime)
    return out


def _norm(text: str) -> str:
    return re.sub(r"\d+", "#", " ".join(text.lower().split()))


def _drop_running_text(pages: list[list[Block]], heights: list[float]) -> None:
    """Remove page numbers and text repeated in the top or bottom margin of many pages."""
    def in_margin(b: Block) -> bool:
        h = heights[b.page - 1]
        return b.bbox[3] <= h * MARGIN or b.bbox[1] >= h * (1 - MARGIN)

    seen = Counter(key for blocks in pages for key in {_norm(b.text) for b in blocks if in_margin(b)})
    repeat = max(2, (len(pages) + 1) // 2)
    for blocks in pages:
        blocks[:] = [b for b in blocks if not (in_margin(b) and (PAGE_NUMBER.match(b.text)
                                                                 or seen[_norm(b.text)] >= repeat))]


def _assign_headings(pages: list[list[Block]], toc: list) -> None:
    """Mark heading blocks and their levels: the outline's levels, else font size and weight."""
    sizes: Counter[float] = Counter()
    for blocks in pages:
        for b in blocks:
            sizes[round(b.size * 2) / 2] += len(b.text)
    if not sizes:
        return
    body = sizes.most_common(1)[0][0]
    outline = {" ".join(title.lower().split()): level for level, title, *_ in toc if title.strip()}
    texts = {" ".join(b.text.lower().split()) for blocks in pages for b in blocks}
    if outline and sum(1 for key in outline if key in texts) < len(outline) / 2:
        outline = {}  # bookmarks that do not name the headings on the page: use the fonts

    def candidate(b: Block) -> bool:
        short = len(b.text) <= 200 and len(b.lines) <= 3 and not b.text.endswith(".")
        return short and (b.size >= body * 1.2 or (b.bold and b.size >= body - 0.1 and len(b.text) <= 120))

    levels = sorted({round(b.size) for blocks in pages for b in blocks if candidate(b)}, reverse=True)
    for blocks in pages:
        for b in blocks:
            key = " ".join(b.text.lower().split())
            if key in outline and len(b.text) <= 200:
                b.heading = outline[key]
            elif candidate(b) and not outline:
                b.heading = min(levels.index(round(b.size)) + 1, 6)


def _reading_order(blocks: list[Block], width: float) -> list[Block]:
    """Blocks top to bottom; where a page has two columns, the left column before the right."""
    mid, tol = width / 2, width * 0.02
    left = [b for b in blocks if b.bbox[2] <= mid + tol]
    in_left = {id(b) for b in left}
    right = [b for b in blocks if b.bbox[0] >= mid - tol and id(b) not in in_left]
    side_by_side = any(a.bbox[1] < b.bbox[3] and b.bbox[1] < a.bbox[3] for a in left for b in right)
    if not side_by_side or len(left) + len(right) < 3:
        return sorted(blocks, key=lambda b: (round(b.bbox[1]), b.bbox[0]))
    sided = in_left | {id(b) for b in right}
    spanning = sorted((b for b in blocks if id(b) not in sided), key=lambda b: b.bbox[1])
    out: list[Block] = []
    top = float("-inf")
    for cut in [*spanning, None]:
        bottom = cut.bbox[1] if cut else float("inf")
        for column in (left, right):
            out.extend(sorted((b for b in column if top <= b.bbox[1] < bottom), key=lambda b: b.bbox[1]))
        if cut:
            out.append(cut)
            top = cut.bbox[1]
    return out


def _text_flags(page, number: int, warnings: list[str]) -> int:
    """pymupdf's dict flags: with vector boxes, and images unless one is too large to decode safely."""
    import pymupdf

    flags = pymupdf.TEXTFLAGS_DICT | pymupdf.TEXT_COLLECT_VECTORS
    huge = [(w, h) for _, _, w, h, *_ in page.get_images(full=True) if w * h > MAX_PIXELS]
    if not huge:
        return flags
    warnings.extend(f"image_skipped: page {number}: {w}x{h} pixels is too large" for w, h in huge)
    return flags & ~pymupdf.TEXT_PRESERVE_IMAGES


def _take_caption(target: Block, blocks: list[Block], pattern: re.Pattern) -> str | None:
    """The caption block just below (else above) a figure or table; removed from ``blocks``."""
    x0, y0, x1, y1 = target.bbox
    best, distance = None, 60.0
    for b in blocks:
        if b.kind != "text" or not pattern.match(b.text) or b.bbox[2] < x0 or b.bbox[0] > x1:
            continue
        d = b.bbox[1] - y1 if b.bbox[1] >= y1 - 2 else y0 - b.bbox[3]
        if -2 <= d < distance:
            best, distance = b, d
    if best is None:
        return None
    blocks.remove(best)
    return best.text


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
    return block.text[:1].islower() or prev_block.page != block.page or column_break


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
    unreadable = 0
    try:
        pages: list[list[Block]] = []
        extras: list[tuple[list[Block], list[Block], list]] = []  # tables, images, links per page
        widths: list[float] = []
        heights: list[float] = []
        for number in range(1, doc.page_count + 1):
            blocks: list[Block] = []
            extra: tuple[list[Block], list[Block], list] = ([], [], [])
            try:
                page = doc.load_page(number - 1)
                widths.append(page.rect.width)
                heights.append(page.rect.height)
                textpage = page.get_textpage(flags=_text_flags(page, number, warnings))
                blocks, images, rules = _page_blocks(page, number, textpage, cfg, warnings)
                if not blocks:
                    blocks, images = scans.read(page, number, images, warnings)
                words = Words(page, textpage)
                grids, area = table_areas(rules) if cfg.pdf_tables and blocks else ([], None)
                extra = (read_tables(page, number, grids, area, words, budget) if grids or area else [], images,
                         _links(page, url, words))
            except Exception as exc:  # one unreadable page must not lose the others
                warnings.append(f"page_unreadable: page {number}: {type(exc).__name__}: {exc}")
                unreadable += 1
                blocks, extra = [], ([], [], [])  # what a later step had made of the page is dropped too
                if len(widths) < number:  # the page's size was not read
                    widths.append(widths[-1] if widths else 612.0)
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
        _assign_headings(pages, toc)
        title = _title(doc, pages, url)
        for blocks, (tables, images, links), width in zip(pages, extras, widths, strict=True):
            blocks[:] = [b for b in blocks if not any(within(b.bbox, t.bbox) for t in tables)]
            for t in tables:
                t.component.caption = _take_caption(t, blocks, TABLE_CAPTION)
            for im in images:
                im.component.caption = _take_caption(im, blocks, FIGURE_CAPTION)
            blocks.extend(tables + images)
            blocks[:] = _reading_order(blocks, width)
            _attach_links(links, blocks)
        warnings.extend(scans.summary(doc.page_count, has_text))
        warnings.extend(budget.warnings())
        components = _components(pages, title, cfg)
    finally:
        doc.close()
    return ParsedPage(url, title, None, None, components, warnings, kind="pdf")


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
