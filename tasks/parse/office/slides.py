"""Parse a PowerPoint deck (PPTX) into components, with python-pptx: a slide a section.

Reads the PPTX's bytes; returns a ``ParsedPage``. Each slide's title is its section (section path
[title], or ["Slide N"] for a slide without one; a slide with nothing but its title keeps the title
as a paragraph). Its shapes are read in reading order, top to bottom and left to right by their
position (shapes whose tops are within half a shape's height of each other are a row), group
shapes descended: a text frame is one paragraph, each of its paragraphs (bullets at any level) a
segment; a table is a table component (merged cells repeated into each cell they cover, the first
row its header); a picture is an image component with its bytes and the alt text of its
``cNvPr/@descr``; a SmartArt diagram's texts are a paragraph, an item a segment. Hyperlinks on runs
(``run.hyperlink.address``) are links with character offsets (a row index in a table). Speaker
notes are a paragraph in the slide's section, marked: section path [title, "Notes"]. Hidden slides
are read like the others (backup slides are the deck's content). Charts are not read (a warning
counts them).

Title: the core properties' title (unless a template's "PowerPoint Presentation"), else the first
slide's title, else the file name. A file that
is not a PPTX, is damaged, encrypted or a zip bomb raises ``ParseError``.
"""

from __future__ import annotations

import io

from laminae.tasks.config import OcrConfig, ParseConfig
from laminae.tasks.parse.document import Component, Link, ParsedPage, ParseError
from laminae.tasks.parse.html import image_text_proxy
from laminae.tasks.parse.office.common import (
    Cell,
    Outline,
    file_title,
    link_to,
    list_components,
    open_office_zip,
    table_component,
)

A = "http://schemas.openxmlformats.org/drawingml/2006/main"
P = "http://schemas.openxmlformats.org/presentationml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
DIAGRAM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
EMU_PER_PX = 9525
MAX_GROUP_DEPTH = 32
PROPERTIES = ("title", "author", "subject", "keywords", "comments", "category", "created", "modified")
META_KEYS = {"comments": "description"}
GENERIC_TITLES = {"presentation", "powerpoint presentation", "slide 1"}  # what templates leave as the title


def parse_pptx(body: bytes, url: str, cfg: ParseConfig, ocr: OcrConfig, charset: str | None) -> ParsedPage:
    """A deck's components, slide by slide (see the module docstring)."""
    open_office_zip(body, "pptx", cfg).close()
    try:
        from pptx import Presentation

        deck = Presentation(io.BytesIO(body))
        slides = list(deck.slides)
        for slide in slides:  # the parts a slide's reading reaches, resolved while a failure is the package's
            _ = slide.slide_layout.placeholders, slide.shapes, slide.has_notes_slide
        props = deck.core_properties
        props_read = {key: getattr(props, key) for key in PROPERTIES}
    except Exception as exc:  # python-pptx raises KeyError, ValueError, lxml errors... on a damaged package
        raise ParseError(f"python-pptx cannot open the PPTX file: {type(exc).__name__}: {exc}",
                         "unparsable_pptx") from None
    reader = DeckReader(url, cfg)
    first_title = None
    for number, slide in enumerate(slides, 1):
        title = reader.slide(slide, number)
        first_title = first_title or title
    reader.outline.close()
    own = (props_read["title"] or "").strip()
    title = (own if own.lower() not in GENERIC_TITLES else "") or first_title or file_title(url)
    for comp in reader.components:
        if comp.kind == "image":
            comp.text = image_text_proxy(comp, title)
    if reader.charts:
        reader.warnings.append(f"drawing_skipped: {reader.charts} charts are not read")
    meta = {META_KEYS.get(key, key): str(value).strip() for key, value in props_read.items()
            if key != "title" and value not in (None, "")}
    components = [c for c in reader.components
                  if c.kind != "paragraph" or len(c.text) >= max(cfg.min_paragraph_chars, 1)]
    return ParsedPage(url=url, title=title, canonical_url=None, lang=None, components=components,
                      warnings=reader.warnings, kind="pptx", meta=meta)


class DeckReader:
    """The walk over a deck's slides; components in order and warnings."""

    def __init__(self, url: str, cfg: ParseConfig) -> None:
        self.url = url
        self.cfg = cfg
        self.components: list[Component] = []
        self.warnings: list[str] = []
        self.outline = Outline(self.components)
        self.charts = 0

    def slide(self, slide, number: int) -> str | None:
        """Read one slide; its title, if it has one."""
        title_shape = slide.shapes.title
        title = " ".join(title_shape.text_frame.text.split()) if title_shape is not None else ""
        self.outline.heading(1, title or f"Slide {number}", named=bool(title))
        self.shapes(slide.shapes, slide.part, title_shape, 0)
        if slide.has_notes_slide:
            frame = slide.notes_slide.notes_text_frame
            if frame is not None:
                items = self.frame_items(frame)
                if items:
                    self.outline.heading(2, "Notes")
                    for comp in list_components(items, self.outline.path()):
                        self.outline.emit(comp)
        return title or None

    def shapes(self, shapes, part, skip, depth: int) -> None:
        from pptx.enum.shapes import MSO_SHAPE_TYPE

        for shape in reading_order([s for s in shapes if skip is None or s.shape_id != skip.shape_id]):
            if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
                if depth < MAX_GROUP_DEPTH:
                    self.shapes(shape.shapes, part, None, depth + 1)
            elif getattr(shape, "has_table", False) and shape.has_table:
                self.table(shape.table)
            elif getattr(shape, "has_chart", False) and shape.has_chart:
                self.charts += 1
            elif hasattr(shape, "image"):
                self.picture(shape)
            elif shape.has_text_frame:
                items = self.frame_items(shape.text_frame)
                for comp in list_components(items, self.outline.path()):
                    self.outline.emit(comp)
            else:
                self.diagram(shape, part)

    def frame_items(self, frame) -> list[tuple[str, list[Link]]]:
        """A text frame's non-empty paragraphs, each with its links."""
        items = []
        for para in frame.paragraphs:
            text, links = self.paragraph(para)
            if text:
                items.append((text, links))
        return items

    def paragraph(self, para) -> tuple[str, list[Link]]:
        text = para.text.replace("\v", "\n").strip()
        links, cursor = [], 0
        for run in para.runs:
            at = text.find(run.text.strip(), cursor) if run.text.strip() else -1
            if at < 0:
                continue
            cursor = at + len(run.text.strip())
            address = run.hyperlink.address
            if address:
                link = link_to(self.url, address, text[at:cursor], at, cursor)
                if link is not None:
                    links.append(link)
        return text, links

    def table(self, table) -> None:
        rows, cols = len(table.rows), len(table.columns)
        grid: list[list[Cell]] = [[("", []) for _ in range(cols)] for _ in range(rows)]
        for r in range(rows):
            for c in range(cols):
                cell = table.cell(r, c)
                if cell.is_spanned:
                    continue
                parts, links = [], []
                for para in cell.text_frame.paragraphs:
                    text, para_links = self.paragraph(para)
                    if text:
                        parts.append(text)
                        links.extend(para_links)
                value: Cell = (" ".join(" ".join(parts).split()), links)
                height = cell.span_height if cell.is_merge_origin else 1
                width = cell.span_width if cell.is_merge_origin else 1
                for dr in range(min(height, rows - r)):
                    for dc in range(min(width, cols - c)):
                        grid[r + dr][c + dc] = value if (dr, dc) == (0, 0) else (value[0], [])
        corner = table.cell(0, 0) if rows and cols else None
        title_row = corner is not None and corner.is_merge_origin and corner.span_width == cols
        comp = table_component(grid, 1, None, self.outline.path(), title_row=title_row)
        if comp is not None:
            self.outline.emit(comp)

    def picture(self, shape) -> None:
        try:
            image = shape.image
            data, mime = image.blob, image.content_type
        except (ValueError, KeyError, AttributeError):  # a linked picture (no bytes in the file) or an empty placeholder
            return
        width = (shape.width or 0) // EMU_PER_PX
        height = (shape.height or 0) // EMU_PER_PX
        if width and height and min(width, height) < self.cfg.min_image_side:
            return
        descr = next((el.get("descr") or el.get("title") for el in shape.element.iter(f"{{{P}}}cNvPr")), None)
        self.outline.emit(Component("image", "", self.outline.path(), alt=(descr or "").strip() or None,
                                    image_data=data, image_mime=mime, width=width or None, height=height or None))

    def diagram(self, shape, part) -> None:
        """A SmartArt diagram's texts (its data part's paragraphs), a paragraph of segments."""
        rel_ids = next(shape.element.iter(f"{{{DIAGRAM}}}relIds"), None)
        rid = rel_ids.get(f"{{{R}}}dm") if rel_ids is not None else None
        target = part.related_part(rid) if rid and rid in part.rels else None
        if target is None:
            return
        from lxml import etree

        try:
            root = etree.fromstring(target.blob, etree.XMLParser(resolve_entities=False, no_network=True))
        except etree.XMLSyntaxError as exc:
            self.warnings.append(f"diagram_unreadable: {type(exc).__name__}: {exc}")
            return
        items = []
        for para in root.iter(f"{{{A}}}p"):
            text = " ".join("".join(t.text or "" for t in para.iter(f"{{{A}}}t")).split())
            if text:
                items.append((text, []))
        for comp in list_components(items, self.outline.path()):
            self.outline.emit(comp)


def reading_order(shapes: list) -> list:
    """Shapes top to bottom, left to right: a shape whose top is within half the smaller height of
    a row's first shape's top is in that row."""
    placed = sorted(shapes, key=lambda s: (s.top or 0, s.left or 0))
    rows: list[list] = []
    for shape in placed:
        if rows:
            first = rows[-1][0]
            reach = min(first.height or 0, shape.height or 0) / 2
            if (shape.top or 0) - (first.top or 0) < max(reach, 1):
                rows[-1].append(shape)
                continue
        rows.append([shape])
    return [s for row in rows for s in sorted(row, key=lambda s: s.left or 0)]
