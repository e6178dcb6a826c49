"""What the Word, PowerPoint and Excel parsers share: opening an Office file, sections, lists, tables.

Reads a document's bytes (the first bytes, the zip's member names) and the pieces the format
parsers hand over; writes components. ``open_office_zip`` refuses what no library should be given:
an OLE compound file (a password-protected OOXML file, or a legacy .doc/.xls/.ppt), a damaged zip,
a zip bomb, a zip that holds another format. ``Outline`` keeps the headings above the current
point and turns a heading with nothing under it into a paragraph of its own; ``list_components``
and ``table_component`` build list paragraphs (an item a segment) and tables (header + rows).
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from laminae.tasks.config import ParseConfig
from laminae.tasks.crawl.formats import OFFICE_MAIN_MEMBERS, OFFICE_MAIN_TYPES, OLE_MAGIC
from laminae.tasks.crawl.hrefs import resolve_href
from laminae.tasks.parse.archive import check_zip, read_member
from laminae.tasks.parse.document import Component, Link, ParseError, header_labels, linearize_table

# the stream an encrypted OOXML file keeps its package in, as an OLE directory entry names it (UTF-16)
ENCRYPTED_STREAM = "EncryptedPackage".encode("utf-16-le")
LEGACY = {"docx": "Word 97-2003 (.doc)", "pptx": "PowerPoint 97-2003 (.ppt)", "xlsx": "Excel 97-2003 (.xls)"}
LIST_CHUNK_CHARS = 2000  # a list's items are grouped into components up to this size (as HTML's lists)
MAX_HEADING_CHARS = 600  # a longer heading names its section cut (as HTML's)


def open_office_zip(body: bytes, fmt: str, cfg: ParseConfig) -> zipfile.ZipFile:
    """The document's zip once it is known to be the format's: ``ParseError`` with reason
    ``encrypted_document``, ``zip_bomb`` or ``unparsable_<fmt>`` otherwise."""
    if body.startswith(OLE_MAGIC):
        if ENCRYPTED_STREAM in body:
            raise ParseError(f"the {fmt.upper()} file is password-protected (an encrypted OLE package); "
                             "it cannot be read without its password", "encrypted_document")
        raise ParseError(f"an OLE compound file, not {fmt.upper()}: a legacy {LEGACY[fmt]} file, which laminae "
                         "does not read (save it as the Open XML format)", f"unparsable_{fmt}")
    archive = check_zip(body, fmt, cfg.max_unzipped_bytes)
    names = set(archive.namelist())
    if OFFICE_MAIN_MEMBERS[fmt] in names:
        return archive
    try:
        types = read_member(archive, "[Content_Types].xml", fmt) if "[Content_Types].xml" in names else b""
    except ParseError:
        archive.close()
        raise
    if not any(t in types for t in OFFICE_MAIN_TYPES[fmt]):
        archive.close()
        raise ParseError(f"the zip holds no {OFFICE_MAIN_MEMBERS[fmt]} nor another part of a {fmt.upper()} file's main "
                         f"content type: it is not a {fmt.upper()} file", f"unparsable_{fmt}")
    return archive


def file_title(url: str) -> str:
    """A document's file name, the title of last resort."""
    name = unquote(urlsplit(url).path).rstrip("/").rsplit("/", 1)[-1]
    return name or url


def link_to(base_url: str, href: str | None, anchor: str, start: int, end: int) -> Link | None:
    """A link of ``anchor`` at [start, end) to ``href`` resolved against the document's URL; None for
    one that does not navigate (an anchor in the document, mailto:, a malformed URL: ``resolve_href``
    never raises)."""
    target = resolve_href(base_url, href)
    return Link(target, anchor, start, end) if target else None


class TextBuilder:
    """A component's text built piece by piece, with its links' character offsets."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.links: list[Link] = []

    def add(self, text: str) -> None:
        if text:
            self.parts.append(text)
            self.size += len(text)

    def text(self) -> str:
        return "".join(self.parts)

    def finish(self) -> tuple[str, list[Link]]:
        """The text stripped of outer white space, links moved to match and clipped to it."""
        raw = self.text()
        lead = len(raw) - len(raw.lstrip())
        text = raw.strip()
        links = []
        for lk in self.links:
            start, end = max(lk.start - lead, 0), min(lk.end - lead, len(text))
            if end > start:
                links.append(Link(lk.url, text[start:end], start, end, lk.row))
        return text, links


@dataclass
class Outline:
    """The headings above the current point; a heading nothing was written under (before the next
    heading of its level or higher) becomes a paragraph of its own text, so no heading's words are lost."""

    components: list[Component]
    stack: list[list] = field(default_factory=list)  # [level, text, filled]

    def path(self) -> list[str]:
        return [entry[1] for entry in self.stack]

    def heading(self, level: int, text: str, named: bool = True) -> None:
        """Open a section; one not ``named`` by the document ("Slide 3") never becomes a paragraph."""
        while self.stack and self.stack[-1][0] >= level:
            self._pop()
        if len(text) > MAX_HEADING_CHARS:
            self.emit(Component("paragraph", text, self.path()))
            text = text[:MAX_HEADING_CHARS].rsplit(" ", 1)[0] + " …"
        self.stack.append([level, text, not named])

    def emit(self, comp: Component) -> Component:
        for entry in self.stack:
            entry[2] = True
        self.components.append(comp)
        return comp

    def close(self) -> None:
        while self.stack:
            self._pop()

    def _pop(self) -> None:
        _, text, filled = self.stack.pop()
        if not filled:
            self.emit(Component("paragraph", text, self.path()))


def list_components(items: list[tuple[str, list[Link]]], section_path: list[str]) -> list[Component]:
    """List items as paragraphs of up to ``LIST_CHUNK_CHARS``, an item a segment (sentences are split
    item by item), links moved to the item's place."""
    out: list[Component] = []
    parts: list[str] = []
    links: list[Link] = []
    segments: list[tuple[int, int]] = []
    pos = 0
    for text, item_links in items:
        if parts and pos + len(text) > LIST_CHUNK_CHARS:
            out.append(Component("paragraph", "\n".join(parts), list(section_path), links, segments=segments))
            parts, links, segments, pos = [], [], [], 0
        segments.append((pos, pos + len(text)))
        links.extend(Link(lk.url, lk.anchor, lk.start + pos, lk.end + pos) for lk in item_links)
        parts.append(text)
        pos += len(text) + 1
    if parts:
        out.append(Component("paragraph", "\n".join(parts), list(section_path), links, segments=segments))
    return out


Cell = tuple[str, list[Link]]


def table_component(grid: list[list[Cell]], n_head: int, caption: str | None, section_path: list[str],
                    title_row: bool = False) -> Component | None:
    """A table of ``grid`` (rows of (text, links), merged cells already repeated) whose first
    ``n_head`` rows label its columns: a ``title_row`` (the first row is one merged cell across
    every column) is its title, put in the caption; several header rows are joined per column
    ("Year / Q1"); empty rows and columns are dropped; a table of header rows only is read as data.
    None for an empty grid."""
    width = max((len(r) for r in grid), default=0)
    grid = [r + [("", [])] * (width - len(r)) for r in grid]
    if title_row and len(grid) > 1 and width > 1 and grid[0][0][0] and len({c[0] for c in grid[0]}) == 1:
        title = grid[0][0][0]
        caption = f"{caption} / {title}" if caption else title
        grid = grid[1:]
        n_head = max(n_head - 1, 1 if n_head else 0)
    grid = [r for r in grid if any(c[0] for c in r)]
    keep = [i for i in range(width) if any(r[i][0] for r in grid)]
    grid = [[r[i] for i in keep] for r in grid]
    width = len(keep)
    if not grid or not width:
        return None
    if n_head >= len(grid):
        n_head = 0
    header = header_labels([[c[0] for c in r] for r in grid[:n_head]]) if n_head else None
    rows: list[list[str]] = []
    links: list[Link] = []
    for r in grid[n_head:]:
        for text, cell_links in r:
            links.extend(Link(lk.url, lk.anchor or text, row=len(rows)) for lk in cell_links)
        rows.append([c[0] for c in r])
    return Component("table", linearize_table(caption, header, rows), list(section_path), links, caption=caption,
                     table_kind="data", header=header, rows=rows)
