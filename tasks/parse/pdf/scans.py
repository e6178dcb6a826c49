"""PDF pages without a text layer (scans), and text blocks whose font has no Unicode map: rendered
and read by OCR (``laminae.tasks.parse.ocr``).

Reads a pymupdf page; returns its OCR lines as paragraph ``Block``s in page points (page and bbox
like any text) and the document's ``ocr_used``, ``ocr_skipped`` or ``no_text_layer`` warnings. A
garbled block (``read_garbled``) is rendered alone and read; when OCR is off, unavailable or over
its budget the block is dropped with an ``unmapped_font`` warning, never indexed as text.
"""

from __future__ import annotations

from laminae.tasks.config import OcrConfig
from laminae.tasks.parse.ocr import OcrUnavailable, TextLine, read_lines, repair_spacing
from laminae.tasks.parse.pdf.blocks import Block, join_lines, page_list, within


class Scans:
    """Pages without a text layer, rendered and read by OCR, up to ``max_pages`` per PDF."""

    def __init__(self, cfg: OcrConfig) -> None:
        self.cfg = cfg
        self.on = cfg.enabled and cfg.pdf_pages and cfg.max_pages > 0
        self.read_pages: list[int] = []
        self.unread: list[int] = []  # over max_pages, or OCR failed or unavailable
        self.reason = ""
        self.garbled_pages: list[int] = []  # pages whose text without a Unicode map was read

    def read(self, page, number: int, images: list[Block],
             warnings: list[str]) -> tuple[list[Block], list[Block]]:
        """(text blocks read from the page, its images less those that are the scan itself)."""
        if not self.on or len(self.read_pages) >= self.cfg.max_pages:
            self.unread.append(number)
            self.reason = self.reason or ("OCR is off" if not self.on else f"over max_pages ({self.cfg.max_pages})")
            return [], images
        try:
            picture, scale = render_page(page, self.cfg)
            lines = read_lines(picture, self.cfg)
        except OcrUnavailable as exc:
            self.on, self.reason = False, str(exc)
            self.unread.append(number)
            return [], images
        except Exception as exc:  # one unreadable page must not lose the others
            warnings.append(f"ocr_failed: page {number}: {type(exc).__name__}: {exc}")
            self.unread.append(number)
            return [], images
        self.read_pages.append(number)
        area = page.rect.width * page.rect.height
        kept = [im for im in images if _area(im.bbox) < 0.5 * area]  # the scan itself is now text
        return _scan_blocks(lines, number, scale), kept

    def read_garbled(self, page, number: int, blocks: list[Block], warnings: list[str]) -> list[Block]:
        """Text blocks whose characters have no Unicode map, read again by OCR: the area they cover
        is rendered once and its lines go to the block they lie in. A page read so counts against
        ``max_pages`` like a scanned page; what is not read is dropped with an ``unmapped_font``
        warning."""
        sample = " ".join(blocks[0].text.split())[:40]
        chars = sum(len(b.text) for b in blocks)
        if not self.on or len(self.read_pages) + len(self.garbled_pages) >= self.cfg.max_pages:
            reason = self.reason or ("OCR is off" if not self.on else f"over max_pages ({self.cfg.max_pages})")
            warnings.append(f"unmapped_font: page {number}: {len(blocks)} text blocks ({chars} characters) in fonts "
                            f"without a Unicode map were dropped, not read ({reason}): {sample!r}")
            return []
        box = (min(b.bbox[0] for b in blocks), min(b.bbox[1] for b in blocks),
               max(b.bbox[2] for b in blocks), max(b.bbox[3] for b in blocks))
        try:
            picture, scale = render_page(page, self.cfg, clip=box)
            lines = read_lines(picture, self.cfg)
        except OcrUnavailable as exc:
            self.on, self.reason = False, str(exc)
            warnings.append(f"unmapped_font: page {number}: {len(blocks)} text blocks ({chars} characters) in fonts "
                            f"without a Unicode map were dropped, not read ({exc}): {sample!r}")
            return []
        except Exception as exc:  # one unreadable area must not lose the page
            warnings.append(f"unmapped_font: page {number}: OCR failed on text without a Unicode map, "
                            f"{len(blocks)} blocks dropped: {type(exc).__name__}: {exc}")
            return []
        self.garbled_pages.append(number)
        x0, y0 = max(box[0] - 4, page.rect.x0), max(box[1] - 4, page.rect.y0)
        out: list[Block] = []
        for b in blocks:
            texts = [repair_spacing(line.text) if self.cfg.repair_spacing else line.text for line in lines
                     if within(_to_page(line.bbox, x0, y0, scale), b.bbox, 0.0)]  # not a neighbour's edge
            if text := join_lines(texts):
                out.append(Block(number, b.bbox, size=b.size, weight=b.weight, bold=b.bold, italic=b.italic,
                                 lines=texts, text=text, gap_before=b.gap_before))
        return out

    def summary(self, page_count: int, has_text: bool) -> list[str]:
        out = []
        if self.read_pages and has_text:
            out.append(f"ocr_used: {len(self.read_pages)} of the {page_count} pages have no text layer and were "
                       f"read by OCR (pages {page_list(self.read_pages)})")
        if not has_text:
            why = (f"they were not read: {self.reason}" if self.unread and not self.read_pages
                   else "OCR found no text on them")
            out.append(f"no_text_layer: none of the {page_count} pages has a text layer (a scan?) and {why}; "
                       "only its images are indexed")
        elif self.unread and self.read_pages:
            out.append(f"ocr_skipped: pages {page_list(self.unread)} have no text layer and were not read: "
                       f"{self.reason}")
        if self.garbled_pages:
            out.append(f"unmapped_font: text in fonts without a Unicode map was read by OCR on "
                       f"{len(self.garbled_pages)} pages ({page_list(self.garbled_pages)})")
        return out


def _to_page(bbox: tuple, x0: float, y0: float, scale: float) -> tuple[float, float, float, float]:
    """A box in a rendered clip's pixels as page points (the clip's top left at ``x0, y0``)."""
    return x0 + bbox[0] * scale, y0 + bbox[1] * scale, x0 + bbox[2] * scale, y0 + bbox[3] * scale


def _area(bbox: tuple[float, float, float, float]) -> float:
    return max(bbox[2] - bbox[0], 0.0) * max(bbox[3] - bbox[1], 0.0)


def render_page(page, cfg: OcrConfig, clip: tuple | None = None):
    """The page (or the ``clip`` of it, padded by 4 points, at 300 dpi or more) as a PIL picture at
    ``render_dpi`` (less when that would pass ``max_render_pixels``), and the factor from its pixels to
    the page's points."""
    from PIL import Image

    area = page.rect if clip is None else (page.rect & (clip[0] - 4, clip[1] - 4, clip[2] + 4, clip[3] + 4))
    points = area.width * area.height
    # a block alone is small: rendered finer, the recognizer keeps its word spaces (150 dpi ran them together)
    wanted = cfg.render_dpi if clip is None else max(cfg.render_dpi, 300)
    dpi = min(wanted, int((cfg.max_render_pixels / max(points, 1.0)) ** 0.5 * 72))
    pix = page.get_pixmap(dpi=max(dpi, 1), alpha=False, clip=None if clip is None else area)
    picture = Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
    return picture, area.width / pix.width


def _scan_blocks(lines: list[TextLine], number: int, scale: float) -> list[Block]:
    """OCR lines (in reading order) as paragraph blocks in page points: a new block where the gap
    above a line is wider than 0.8 of a line height, the line starts above the previous one (a new
    column) or its type size changes. A line's box height varies with its letters (ascenders,
    descenders), so lines up to 1.45 times the page's median height count as body text; taller
    ones keep their own size and can become headings."""
    blocks: list[Block] = []
    heights = sorted(line.bbox[3] - line.bbox[1] for line in lines)
    median = heights[len(heights) // 2] if heights else 0.0
    previous: TextLine | None = None
    for line in lines:
        x0, y0, x1, y1 = (v * scale for v in line.bbox)
        height = line.bbox[3] - line.bbox[1]
        size = round((height if height > 1.45 * median else median) * scale * 0.75, 1)
        if previous is not None:
            gap = y0 - previous.bbox[3] * scale
            if gap > 0.8 * (y1 - y0) or y0 < previous.bbox[1] * scale - (y1 - y0) or size != blocks[-1].size:
                previous = None
        if previous is None:
            blocks.append(Block(number, (x0, y0, x1, y1), size=size))
        else:
            b = blocks[-1].bbox
            blocks[-1].bbox = (min(b[0], x0), min(b[1], y0), max(b[2], x1), max(b[3], y1))
        blocks[-1].lines.append(line.text)
        previous = line
    for b in blocks:
        b.text = join_lines(b.lines)
    return [b for b in blocks if b.text]
