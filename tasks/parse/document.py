"""In-memory document model that the parse stage produces and later stages consume.

Pure data: a ``ParsedPage`` holds its components in document order; each component keeps its
links with character offsets (paragraphs) or the data row they sit in (tables).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from laminae.schemas.errors import LaminaeError


class ParseError(LaminaeError):
    """A document that cannot be indexed; ``reason`` is its error row's reason (``unparsable_docx``,
    ``zip_bomb``...). Every format's parser raises this (or a subclass) for bad input."""

    def __init__(self, message: str, reason: str = "unparsable") -> None:
        super().__init__(message)
        self.reason = reason


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
    kind: str = "html"  # html | pdf | video | markdown | text | csv | docx | pptx | xlsx | epub
    # what the document says of itself (Markdown front matter, Office properties): kept beside the seed's
    # annotations in the documents table, never as body text
    meta: dict[str, str] = field(default_factory=dict)


def items_paragraph(items: list[tuple[str, list[Link]]], section_path: list[str]) -> Component:
    """One paragraph of list items, each a segment (sentences are split item by item); an item's
    links keep their offsets, moved to where the item starts."""
    parts, links, segments, pos = [], [], [], 0
    for text, item_links in items:
        segments.append((pos, pos + len(text)))
        links.extend(Link(lk.url, lk.anchor, lk.start + pos, lk.end + pos) for lk in item_links)
        parts.append(text)
        pos += len(text) + 1
    return Component("paragraph", "\n".join(parts), section_path, links, segments=segments)


def header_labels(rows: list[list[str]]) -> list[str]:
    """A table's header from its header rows: each column's distinct labels, top first, " / " between
    them ("Population / 2020")."""
    header = []
    for col in range(len(rows[0]) if rows else 0):
        labels: list[str] = []
        for row in rows:
            if row[col] and row[col] not in labels:
                labels.append(row[col])
        header.append(" / ".join(labels))
    return header


def linearize_table(caption: str | None, header: list[str] | None, rows: list[list[str]]) -> str:
    """A table's text as embedded and searched: caption, header, then one line per row."""
    lines = [caption] if caption else []
    if header:
        lines.append(" | ".join(header))
    lines.extend(" | ".join(r) for r in rows)
    return "\n".join(lines)


_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
# WHATWG's Encoding standard reads these labels as windows-1252 (browsers have since the 1990s:
# pages labelled latin-1 use the 0x80-0x9F quotes and dashes), and a <meta> naming UTF-16 as UTF-8
_WHATWG_LABELS = {"latin1": "cp1252", "latin-1": "cp1252", "iso-8859-1": "cp1252", "iso8859-1": "cp1252",
                  "l1": "cp1252", "ascii": "cp1252", "us-ascii": "cp1252", "windows-1252": "cp1252",
                  "x-user-defined": "cp1252"}


def _codec(label: str | None, *, meta: bool = False) -> str | None:
    """The Python codec of a declared charset label, or None for a label no codec reads."""
    import codecs

    label = (label or "").strip().strip("\"'").lower()
    if not label:
        return None
    label = _WHATWG_LABELS.get(label, label)
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    return "utf-8" if meta and name.startswith("utf-16") else name


def decode_bytes(body: bytes, charset: str | None = None, *, html: bool = False) -> tuple[str, str | None, str]:
    """A text's characters, decoded in WHATWG's order: its byte-order mark (UTF-8, UTF-16LE/BE);
    else the charset declared (by HTTP, else for HTML by a ``<meta>`` or XML declaration near the
    top), decoded with replacement characters, never second-guessed; else, with nothing declared,
    UTF-8 when it is valid UTF-8, else detection (HTML: ``bs4``'s ``UnicodeDammit``) and
    Windows-1252 last. Returns the text, a warning (``undecodable_bytes``) when bytes had to be
    replaced, and the encoding used."""
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return _decoded(body[len(bom):], codec, "its byte-order mark")
    codec, how = _codec(charset), "the HTTP header"
    if codec is None and html:
        from bs4.dammit import EncodingDetector

        codec, how = _codec(EncodingDetector.find_declared_encoding(body, is_html=True), meta=True), "the page"
    if codec is not None:
        return _decoded(body, codec, f"the charset {how} declares")
    try:
        return body.decode("utf-8"), None, "utf-8"
    except UnicodeDecodeError:
        pass
    if html:
        from bs4.dammit import UnicodeDammit

        dammit = UnicodeDammit(body, is_html=True, exclude_encodings=["utf-8"])
        if dammit.unicode_markup is not None and dammit.original_encoding:
            return _decoded(body, dammit.original_encoding, "detection")
    return _decoded(body, "cp1252", "UTF-8 nor")


def _decoded(body: bytes, codec: str, how: str) -> tuple[str, str | None, str]:
    text = body.decode(codec, errors="replace")
    bad = text.count("\ufffd") - (body.count("\ufffd".encode()) if codec == "utf-8" else 0)  # one written as such
    if bad <= 0:
        return text, None, codec
    said = "are not UTF-8 or Windows-1252" if how == "UTF-8 nor" else f"do not decode as {codec} ({how})"
    return text, f"undecodable_bytes: {bad} bytes {said}; replaced", codec


def decode_text(body: bytes, charset: str | None = None) -> tuple[str, str | None]:
    """A text file's characters (Markdown, plain text, CSV) and a warning when bytes had to be
    replaced (``decode_bytes``)."""
    text, warning, _ = decode_bytes(body, charset)
    return text, warning
