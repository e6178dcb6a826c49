"""Parse one PDF into the same components as an HTML page, with pymupdf.

Reads the PDF's bytes; returns a ``ParsedPage`` whose components carry their page and bbox:
paragraphs (text blocks in reading order, two columns included, line-end hyphens repaired,
running headers, footers and page numbers dropped), tables (header + rows of ruled tables:
a regular grid is read straight from the page's strokes and words, other ruling by pymupdf's
``find_tables``), and embedded images (bytes kept on the component, with a nearby
"Figure N" caption). Headings come from the PDF outline when it has one, else from font size and
weight, and give each component its section path. URI links keep their character offsets (or
table row) so the node stage makes ``links_to`` edges from components and sentences. A page
without a text layer (a scan) is rendered and read by OCR (``laminae.tasks.parse.ocr``): its lines
become paragraphs with page and bbox like any text, and the document's warnings say ``ocr_used``.

Bounded: in a worker process (``laminae.tasks.parse.isolated``) the PDF's deadline becomes
``timeout_s`` plus ``pdf_page_timeout_s`` a page once its pages are counted, and ``find_tables``
gets at most ``pdf_table_timeout_s`` a page and ``pdf_tables_budget_s`` a document: a page over
either keeps its text and loses only the tables ``find_tables`` would have found, with a warning.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from bisect import bisect_right
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

from laminae.schemas.pictures import MAX_PIXELS
from laminae.tasks.config import OcrConfig, ParseConfig
from laminae.tasks.crawl.links import link_target
from laminae.tasks.parse.document import Component, Link, ParsedPage, linearize_table
from laminae.tasks.parse.html import ParseError, image_text_proxy
from laminae.tasks.parse.isolated import extend_deadline, in_worker
from laminae.tasks.parse.ocr import OcrUnavailable, TextLine, read_lines

MARGIN = 0.08  # top and bottom share of a page where running headers and footers sit
PAGE_NUMBER = re.compile(r"^(page\s*)?(\d{1,4}|[ivxlcdm]{1,6})(\s*(of|/)\s*\d{1,4})?$", re.IGNORECASE)
FIGURE_CAPTION = re.compile(r"^(figure|fig\.?)\s*\d+", re.IGNORECASE)
TABLE_CAPTION = re.compile(r"^table\s*\d+", re.IGNORECASE)
NUMBER = re.compile(r"^[-+]?[\d.,% ]+$")
WEB_IMAGE_EXT = {"png": "image/png", "jpeg": "image/jpeg", "jpg": "image/jpeg", "gif": "image/gif"}
SNAP = 3.0  # points: strokes closer than this are one line; thinner boxes are lines (as find_tables)
MAX_RULES = 2000  # more vector boxes than this (a chart or a drawing): leave the page to find_tables


class PdfError(ParseError):
    """A PDF that cannot be indexed; ``reason`` is the error row's reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class _Block:
    """A run of text lines with one style, or a table or an image, on one page."""

    page: int
    bbox: tuple[float, float, float, float]
    kind: str = "text"  # text | table | image
    lines: list[str] = field(default_factory=list)
    size: float = 0.0
    bold: bool = False
    gap_before: bool = False  # a paragraph break inside a pymupdf block
    heading: int = 0  # heading level, 0 for body text
    text: str = ""
    links: list[Link] = field(default_factory=list)
    component: Component | None = None
    offset: int = 0  # where this block's text starts in its component's text
    row_bounds: list[tuple[float, float]] = field(default_factory=list)  # tables: y-range of each data row


def _join_lines(lines: list[str]) -> str:
    out = ""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        if out.endswith("\xad"):
            out = out[:-1] + line
        elif len(out) > 1 and out[-1] == "-" and out[-2].isalpha() and line[:1].islower():
            out = out[:-1] + line  # a word hyphenated at the line end
        else:
            out = f"{out} {line}" if out else line
    return " ".join(out.split())


def _page_blocks(page, number: int, textpage, cfg: ParseConfig,
                 warnings: list[str]) -> tuple[list[_Block], list[_Block], list[tuple]]:
    """Text blocks (split where the font size changes or a wide gap opens), image blocks, and the
    boxes of vector paths ``(x0, y0, x1, y1, stroked, is_rectangle)``; lines are thin rectangles."""
    out: list[_Block] = []
    images: list[_Block] = []
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
        current: _Block | None = None
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
                current = _Block(number, (x0, y0, x1, y1), size=size, bold=bold, gap_before=gap)
                out.append(current)
            else:
                b = current.bbox
                current.bbox = (min(b[0], x0), min(b[1], y0), max(b[2], x1), max(b[3], y1))
            current.lines.append(text)
            previous_bottom = y1
    for b in out:
        b.text = _join_lines(b.lines)
    return [b for b in out if b.text], images, rules


def _image_block(block: dict, number: int, cfg: ParseConfig, warnings: list[str]) -> _Block | None:
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
    out = _Block(number, (x0, y0, x1, y1), kind="image")
    out.component = Component(kind="image", text="", section_path=[], width=width, height=height, page=number,
                              bbox=[x0, y0, x1, y1], image_data=data, image_mime=mime)
    return out


def _norm(text: str) -> str:
    return re.sub(r"\d+", "#", " ".join(text.lower().split()))


def _drop_running_text(pages: list[list[_Block]], heights: list[float]) -> None:
    """Remove page numbers and text repeated in the top or bottom margin of many pages."""
    def in_margin(b: _Block) -> bool:
        h = heights[b.page - 1]
        return b.bbox[3] <= h * MARGIN or b.bbox[1] >= h * (1 - MARGIN)

    seen = Counter(key for blocks in pages for key in {_norm(b.text) for b in blocks if in_margin(b)})
    repeat = max(2, (len(pages) + 1) // 2)
    for blocks in pages:
        blocks[:] = [b for b in blocks if not (in_margin(b) and (PAGE_NUMBER.match(b.text)
                                                                 or seen[_norm(b.text)] >= repeat))]


def _assign_headings(pages: list[list[_Block]], toc: list) -> None:
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

    def candidate(b: _Block) -> bool:
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


def _reading_order(blocks: list[_Block], width: float) -> list[_Block]:
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
    out: list[_Block] = []
    top = float("-inf")
    for cut in [*spanning, None]:
        bottom = cut.bbox[1] if cut else float("inf")
        for column in (left, right):
            out.extend(sorted((b for b in column if top <= b.bbox[1] < bottom), key=lambda b: b.bbox[1]))
        if cut:
            out.append(cut)
            top = cut.bbox[1]
    return out


@dataclass
class _Grid:
    """A regular lattice of ruled lines: every row line spans every column and vice versa."""

    xs: list[float]
    ys: list[float]

    @property
    def bbox(self) -> tuple[float, float, float, float]:
        return self.xs[0], self.ys[0], self.xs[-1], self.ys[-1]


def _segments(rules: list[tuple]) -> tuple[list[tuple], list[tuple]]:
    """Horizontal ``(y, x0, x1, shaded)`` and vertical ``(x, y0, y1, shaded)`` segments of a page's
    straight strokes and boxes; ``shaded`` marks the sides of a filled box."""
    hs: list[tuple] = []
    vs: list[tuple] = []
    for x0, y0, x1, y1, stroked, rect in rules:
        if not rect:
            continue
        w, h = x1 - x0, y1 - y0
        if h <= SNAP < w:
            hs.append(((y0 + y1) / 2, x0, x1, False))
        elif w <= SNAP < h:
            vs.append(((x0 + x1) / 2, y0, y1, False))
        elif w > SNAP and h > SNAP:
            hs += [(y0, x0, x1, not stroked), (y1, x0, x1, not stroked)]
            vs += [(x0, y0, y1, not stroked), (x1, y0, y1, not stroked)]
    return hs, vs


def _clusters(hs: list[tuple], vs: list[tuple]) -> list[tuple[list[tuple], list[tuple]]]:
    """Groups of horizontal and vertical segments that touch one another (one table each)."""
    parent = list(range(len(hs) + len(vs)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, (y, hx0, hx1, _) in enumerate(hs):
        for j, (x, vy0, vy1, _) in enumerate(vs):
            if hx0 - SNAP <= x <= hx1 + SNAP and vy0 - SNAP <= y <= vy1 + SNAP:
                parent[root(i)] = root(len(hs) + j)
    groups: dict[int, tuple[list[tuple], list[tuple]]] = {}
    for i, h in enumerate(hs):
        groups.setdefault(root(i), ([], []))[0].append(h)
    for j, v in enumerate(vs):
        groups.setdefault(root(len(hs) + j), ([], []))[1].append(v)
    return [g for g in groups.values() if len(g[0]) >= 2 and len(g[1]) >= 2]


def _lines(segments: list[tuple]) -> dict[float, list[tuple[float, float]]]:
    """Segments snapped onto shared lines: line position → its sorted ``(start, end)`` pieces."""
    out: dict[float, list[tuple[float, float]]] = {}
    for at, start, end, _ in sorted(segments):
        key = next((k for k in out if abs(k - at) <= SNAP), at)
        out.setdefault(key, []).append((start, end))
    return {k: sorted(v) for k, v in out.items()}


def _spans(pieces: list[tuple[float, float]], start: float, end: float) -> bool:
    """Whether the pieces of one line cover ``[start, end]`` without a gap and no further."""
    if pieces[0][0] > start + SNAP or pieces[0][0] < start - SNAP:
        return False
    reach = pieces[0][1]
    for s, e in pieces[1:]:
        if s > reach + SNAP:
            return False
        reach = max(reach, e)
    return abs(reach - end) <= SNAP


def _grid(hs: list[tuple], vs: list[tuple]) -> _Grid | None:
    """The cluster's lattice when it is regular (no merged cells, no line running past the
    table), else None."""
    rows, cols = _lines(hs), _lines(vs)
    ys, xs = sorted(rows), sorted(cols)
    if len(ys) < 3 or len(xs) < 3:  # one row or one column: a frame or a box, for find_tables to judge
        return None
    if all(_spans(rows[y], xs[0], xs[-1]) for y in ys) and all(_spans(cols[x], ys[0], ys[-1]) for x in xs):
        return _Grid(xs, ys)
    return None


def _table_areas(rules: list[tuple]) -> tuple[list[_Grid], tuple | None]:
    """The page's regular ruled grids, and the one area of ruling that only ``find_tables`` can
    read (merged cells, shading, partial lines, curved paths), or None.

    Only horizontal rules (underlines, a line under a header) or only vertical ones cannot make
    a grid, so such pages have neither."""
    if len(rules) < 4:
        return [], None
    if len(rules) > MAX_RULES:
        return [], _around([r[:4] for r in rules])
    curves = [r[:4] for r in rules if not r[5]]
    grids: list[_Grid] = []
    irregular: list[tuple] = []
    for ch, cv in _clusters(*_segments(rules)):
        grid = None if any(s[3] for s in ch + cv) else _grid(ch, cv)
        if grid is not None and not any(_overlap(grid.bbox, c) for c in curves):
            grids.append(grid)
        else:
            irregular += [(x0, y, x1, y) for y, x0, x1, _ in ch] + [(x, y0, x, y1) for x, y0, y1, _ in cv]
    return grids, _around(irregular) if irregular else None


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _around(boxes: list[tuple]) -> tuple[float, float, float, float]:
    """The box around ``boxes``, 4 points wider on every side."""
    return (min(b[0] for b in boxes) - 4, min(b[1] for b in boxes) - 4,
            max(b[2] for b in boxes) + 4, max(b[3] for b in boxes) + 4)


class _Words:
    """A page's words, extracted on first use (only pages with tables or links need them)."""

    def __init__(self, page, textpage) -> None:
        self.page, self.textpage, self.words = page, textpage, None

    def __call__(self) -> list:
        if self.words is None:
            self.words = self.page.get_text("words", textpage=self.textpage)
        return self.words


def _text_flags(page, number: int, warnings: list[str]) -> int:
    """pymupdf's dict flags: with vector boxes, and images unless one is too large to decode safely."""
    import pymupdf

    flags = pymupdf.TEXTFLAGS_DICT | pymupdf.TEXT_COLLECT_VECTORS
    huge = [(w, h) for _, _, w, h, *_ in page.get_images(full=True) if w * h > MAX_PIXELS]
    if not huge:
        return flags
    warnings.extend(f"image_skipped: page {number}: {w}x{h} pixels is too large" for w, h in huge)
    return flags & ~pymupdf.TEXT_PRESERVE_IMAGES


def _words_in(words: list, box) -> list:
    """The words whose centre lies in ``box``, in reading order (block, line, word number)."""
    x0, y0, x1, y1 = box
    inside = [w for w in words if x0 <= (w[0] + w[2]) / 2 <= x1 and y0 <= (w[1] + w[3]) / 2 <= y1]
    inside.sort(key=lambda w: (w[5], w[6], w[7]))
    return inside


def _cell_text(words: list, cell) -> str:
    return " ".join(w[4] for w in _words_in(words, cell))


class _OverBudget(BaseException):  # not Exception: find_tables catches those and returns None
    """Raised by the alarm when find_tables runs past its time on a page."""


@contextmanager
def _alarm(seconds: float):
    """Raise ``_OverBudget`` in the block after ``seconds``: only in a worker process's main thread
    (the flow's own process keeps its signals; there the deadline is the document's budget alone)."""
    if not in_worker() or threading.current_thread() is not threading.main_thread():
        yield
        return

    def ring(signum, frame):
        raise _OverBudget

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _TableBudget:
    """The seconds ``find_tables`` may take on a page and in the whole document, and the pages that
    lost their tables to them (their text is kept)."""

    def __init__(self, cfg: ParseConfig) -> None:
        self.page_s, self.left = cfg.pdf_table_timeout_s, cfg.pdf_tables_budget_s
        self.budget_s = cfg.pdf_tables_budget_s
        self.timed_out: list[int] = []
        self.skipped: list[int] = []

    def find(self, page, number: int, area: tuple) -> list:
        """``find_tables``' tables over ``area``, or none when the page's or the document's time runs out."""
        import pymupdf

        if self.left <= 0:
            self.skipped.append(number)
            return []
        limit = min(self.page_s, self.left)
        start = time.perf_counter()
        try:
            with _alarm(limit):
                finder = page.find_tables(clip=pymupdf.Rect(area), use_layout=False)
        except _OverBudget:
            (self.timed_out if limit == self.page_s else self.skipped).append(number)
            return []
        finally:
            self.left -= time.perf_counter() - start
        return finder.tables if finder is not None else []  # None: find_tables failed (and logged it)

    def warnings(self) -> list[str]:
        out = []
        if self.timed_out:
            out.append(f"tables_timeout: pages {_page_list(self.timed_out)}: finding their tables took longer than "
                       f"{self.page_s:g} s a page (LAMINAE_PARSE__PDF_TABLE_TIMEOUT_S); their text is kept, the "
                       "tables pymupdf's find_tables would have read are not")
        if self.skipped:
            out.append(f"tables_skipped: pages {_page_list(self.skipped)}: the PDF's table-finding budget of "
                       f"{self.budget_s:g} s (LAMINAE_PARSE__PDF_TABLES_BUDGET_S) was spent; their text is kept, "
                       "the tables pymupdf's find_tables would have read are not")
        return out


def _tables(page, number: int, grids: list[_Grid], area: tuple | None, words: _Words,
            budget: _TableBudget) -> list[_Block]:
    """Table blocks: regular grids read straight from the page's words, other ruling by
    ``find_tables`` (one call over the area around all of it, within ``budget``)."""
    found: list[tuple[tuple, list[tuple[list[str], tuple[float, float]]]]] = []
    for grid in grids:
        found.append((grid.bbox, _grid_rows(grid, words())))
    for tab in budget.find(page, number, area) if area else []:
        if any(_inside(tab.bbox, grid.bbox) for grid in grids):
            continue  # a regular grid inside the area, read above
        inside = _words_in(words(), tab.bbox)
        found.append((tuple(tab.bbox), [([_cell_text(inside, c) if c else "" for c in row.cells],
                                         (row.bbox[1], row.bbox[3])) for row in tab.rows]))
    return [block for bbox, rows in sorted(found, key=lambda f: (f[0][1], f[0][0]))
            if (block := _table_block(number, bbox, rows)) is not None]


def _grid_rows(grid: _Grid, words: list) -> list[tuple[list[str], tuple[float, float]]]:
    """Each grid row's cell texts (words placed by their centre) and its y-range."""
    xs, ys = grid.xs, grid.ys
    cells: list[list[list]] = [[[] for _ in xs[1:]] for _ in ys[1:]]
    for w in words:
        cx, cy = (w[0] + w[2]) / 2, (w[1] + w[3]) / 2
        if xs[0] <= cx <= xs[-1] and ys[0] <= cy <= ys[-1]:
            i = min(bisect_right(ys, cy), len(ys) - 1) - 1
            j = min(bisect_right(xs, cx), len(xs) - 1) - 1
            cells[i][j].append(w)
    return [([" ".join(w[4] for w in sorted(cell, key=lambda w: (w[5], w[6], w[7]))) for cell in row],
             (ys[i], ys[i + 1])) for i, row in enumerate(cells)]


def _table_block(number: int, bbox: tuple, rows: list[tuple[list[str], tuple[float, float]]]) -> _Block | None:
    """A table block from ruled rows: the first is the header unless it holds numbers (pymupdf's
    own header search, ``tab.header``, looks for text above the table and costs more than finding
    the table); None when no row has text."""
    first = rows[0][0] if rows else []
    if any(first) and not any(NUMBER.match(cell) for cell in first if cell):
        header, rows = first, rows[1:]
    else:
        header = []
    rows = [(cells, bounds) for cells, bounds in rows if any(cell.strip() for cell in cells)]
    if not rows:
        return None
    block = _Block(number, tuple(bbox), kind="table", row_bounds=[bounds for _, bounds in rows])
    block.component = Component(kind="table", text="", section_path=[], table_kind="data",
                                header=header if any(header) else None, rows=[cells for cells, _ in rows],
                                page=number, bbox=[float(v) for v in bbox])
    return block


def _take_caption(target: _Block, blocks: list[_Block], pattern: re.Pattern) -> str | None:
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


def _inside(inner, outer, slack: float = 2.0) -> bool:
    cx, cy = (inner[0] + inner[2]) / 2, (inner[1] + inner[3]) / 2
    return outer[0] - slack <= cx <= outer[2] + slack and outer[1] - slack <= cy <= outer[3] + slack


def _links(page, url: str, words: _Words) -> list[tuple[tuple, str, str]]:
    """(box, target URL, anchor text) of each web link on a page."""
    out = []
    for link in page.get_links():
        target = link_target(link, url)
        if target:
            rect = link["from"]
            box = (rect.x0, rect.y0, rect.x1, rect.y1)
            out.append((box, target, _cell_text(words(), box).rstrip(".,;:")))
    return out


def _attach_links(links: list[tuple[tuple, str, str]], blocks: list[_Block]) -> None:
    for box, target, anchor in links:
        for b in blocks:
            if _inside(box, b.bbox):
                row = None
                if b.kind == "table":
                    cy = (box[1] + box[3]) / 2
                    row = next((i for i, (top, bottom) in enumerate(b.row_bounds) if top <= cy <= bottom), None)
                b.links.append(Link(url=target, anchor=anchor, row=row))
                break


def _continues(previous: Component | None, prev_block: _Block | None, block: _Block) -> bool:
    """Whether a text block carries on the paragraph before it (across a column or page break)."""
    if previous is None or prev_block is None or previous.kind != "paragraph" or block.gap_before:
        return False
    mid_sentence = previous.text[-1:].isalnum() or previous.text.endswith((",", "-", "–", "—"))
    if abs(prev_block.size - block.size) > 0.6 or not mid_sentence:
        return False
    column_break = block.bbox[1] < prev_block.bbox[1]  # it starts higher up: the next column
    return block.text[:1].islower() or prev_block.page != block.page or column_break


def _title(doc, pages: list[list[_Block]], url: str) -> str:
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
    scans = _Scans(ocr)
    doc = _open(body, cfg)
    extend_deadline(cfg.timeout_s + cfg.pdf_page_timeout_s * doc.page_count)
    budget = _TableBudget(cfg)
    warnings: list[str] = []
    if doc.is_repaired:
        warnings.append("repaired_pdf: the file was damaged (truncated or broken cross-references) and repaired")
    unreadable = 0
    try:
        pages: list[list[_Block]] = []
        extras: list[tuple[list[_Block], list[_Block], list]] = []  # tables, images, links per page
        widths: list[float] = []
        heights: list[float] = []
        for number in range(1, doc.page_count + 1):
            blocks: list[_Block] = []
            extra: tuple[list[_Block], list[_Block], list] = ([], [], [])
            try:
                page = doc.load_page(number - 1)
                widths.append(page.rect.width)
                heights.append(page.rect.height)
                textpage = page.get_textpage(flags=_text_flags(page, number, warnings))
                blocks, images, rules = _page_blocks(page, number, textpage, cfg, warnings)
                if not blocks:
                    blocks, images = scans.read(page, number, images, warnings)
                words = _Words(page, textpage)
                grids, area = _table_areas(rules) if cfg.pdf_tables and blocks else ([], None)
                extra = (_tables(page, number, grids, area, words, budget) if grids or area else [], images,
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
            blocks[:] = [b for b in blocks if not any(_inside(b.bbox, t.bbox) for t in tables)]
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


class _Scans:
    """Pages without a text layer, rendered and read by OCR, up to ``max_pages`` per PDF."""

    def __init__(self, cfg: OcrConfig) -> None:
        self.cfg = cfg
        self.on = cfg.enabled and cfg.pdf_pages and cfg.max_pages > 0
        self.read_pages: list[int] = []
        self.unread: list[int] = []  # over max_pages, or OCR failed or unavailable
        self.reason = ""

    def read(self, page, number: int, images: list[_Block],
             warnings: list[str]) -> tuple[list[_Block], list[_Block]]:
        """(text blocks read from the page, its images less those that are the scan itself)."""
        if not self.on or len(self.read_pages) >= self.cfg.max_pages:
            self.unread.append(number)
            self.reason = self.reason or ("OCR is off" if not self.on else f"over max_pages ({self.cfg.max_pages})")
            return [], images
        try:
            picture, scale = _render(page, self.cfg)
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

    def summary(self, page_count: int, has_text: bool) -> list[str]:
        out = []
        if self.read_pages and has_text:
            out.append(f"ocr_used: {len(self.read_pages)} of the {page_count} pages have no text layer and were "
                       f"read by OCR (pages {_page_list(self.read_pages)})")
        if not has_text:
            why = (f"they were not read: {self.reason}" if self.unread and not self.read_pages
                   else "OCR found no text on them")
            out.append(f"no_text_layer: none of the {page_count} pages has a text layer (a scan?) and {why}; "
                       "only its images are indexed")
        elif self.unread and self.read_pages:
            out.append(f"ocr_skipped: pages {_page_list(self.unread)} have no text layer and were not read: "
                       f"{self.reason}")
        return out


def _page_list(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers[:10])) + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")


def _area(bbox: tuple[float, float, float, float]) -> float:
    return max(bbox[2] - bbox[0], 0.0) * max(bbox[3] - bbox[1], 0.0)


def _render(page, cfg: OcrConfig):
    """The page as a PIL picture at ``render_dpi`` (less when that would pass ``max_render_pixels``),
    and the factor from its pixels to the page's points."""
    from PIL import Image

    points = page.rect.width * page.rect.height
    dpi = min(cfg.render_dpi, int((cfg.max_render_pixels / max(points, 1.0)) ** 0.5 * 72))
    pix = page.get_pixmap(dpi=max(dpi, 1), alpha=False)
    picture = Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
    return picture, page.rect.width / pix.width


def _scan_blocks(lines: list[TextLine], number: int, scale: float) -> list[_Block]:
    """OCR lines (in reading order) as paragraph blocks in page points: a new block where the gap
    above a line is wider than 0.8 of a line height, the line starts above the previous one (a new
    column) or its type size changes. A line's box height varies with its letters (ascenders,
    descenders), so lines up to 1.45 times the page's median height count as body text; taller
    ones keep their own size and can become headings."""
    blocks: list[_Block] = []
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
            blocks.append(_Block(number, (x0, y0, x1, y1), size=size))
        else:
            b = blocks[-1].bbox
            blocks[-1].bbox = (min(b[0], x0), min(b[1], y0), max(b[2], x1), max(b[3], y1))
        blocks[-1].lines.append(line.text)
        previous = line
    for b in blocks:
        b.text = _join_lines(b.lines)
    return [b for b in blocks if b.text]


def _components(pages: list[list[_Block]], title: str, cfg: ParseConfig) -> list[Component]:
    components: list[Component] = []
    sections: list[tuple[int, str]] = []
    prev_block: _Block | None = None
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


def _place_links(b: _Block) -> None:
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
