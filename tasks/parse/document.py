"""In-memory document model that the parse stage produces and later stages consume.

Pure data: a ``ParsedPage`` holds its components in document order; each component keeps its
links with character offsets (paragraphs) or the data row they sit in (tables).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Link:
    url: str  # absolute target, fragment removed
    anchor: str
    start: int = -1  # [start, end) into the component's text; -1 when not inside the text
    end: int = -1
    row: int | None = None  # data-row index for links in table cells


@dataclass
class Component:
    kind: str  # paragraph | code | table | image | video
    text: str
    section_path: list[str]
    links: list[Link] = field(default_factory=list)
    # paragraphs made of list items: [start, end) of each item in ``text``
    segments: list[tuple[int, int]] | None = None
    # tables
    caption: str | None = None
    table_kind: str | None = None  # data | infobox
    header: list[str] | None = None
    rows: list[list[str]] | None = None
    # images
    image_url: str | None = None
    alt: str | None = None
    width: int | None = None
    height: int | None = None
    # PDFs: where the component starts (1-based page, x0 y0 x1 y1 in points) and embedded image bytes
    page: int | None = None
    bbox: list[float] | None = None
    image_data: bytes | None = None
    image_key: str | None = None  # raw-store key once ``image_data`` is stored
    image_mime: str | None = None
    # videos: the video's URL (its key once fetched: a video document's own bytes) and its captions'
    video_url: str | None = None
    video_key: str | None = None
    captions_url: str | None = None


@dataclass
class ParsedPage:
    url: str
    title: str
    canonical_url: str | None
    lang: str | None
    components: list[Component]
    warnings: list[str] = field(default_factory=list)
    kind: str = "html"  # html | pdf | video


def linearize_table(caption: str | None, header: list[str] | None, rows: list[list[str]]) -> str:
    """A table's text as embedded and searched: caption, header, then one line per row."""
    lines = [caption] if caption else []
    if header:
        lines.append(" | ".join(header))
    lines.extend(" | ".join(r) for r in rows)
    return "\n".join(lines)
