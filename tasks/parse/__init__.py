"""Parse: fetched documents into pages of components, one parser a format, behind one entry point.

``parse(body, url, content_type)`` picks the format from the content type, the URL's extension and
the bytes (``laminae.tasks.crawl.formats``) and returns a ``ParsedPage``; a document that cannot be
indexed raises ``ParseError`` whose ``reason`` becomes its error row's. The build calls only it, in
worker processes killed at a deadline (``laminae.tasks.nodes.pages``). Each format's module imports
its library when it is first called, so a worker pays only for the formats it meets.

``PARSER_VERSION`` is recorded in an index's metadata by every run that publishes: a refresh of an
index parsed by another version parses every page again, changed or not (texts that did not change
come from the embedding cache), so an upgrade's parser reaches pages that never change.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING

from laminae.tasks.crawl.formats import format_of, sniff_content_type
from laminae.tasks.parse.document import ParsedPage, ParseError

if TYPE_CHECKING:
    from laminae.tasks.config import OcrConfig, ParseConfig

# 1: laminae before the version was recorded; 2: documentation generators parsed whole (issue 34),
# no silent truncation (deep trees, huge text nodes and attributes; issue 29); 3: PDF layout, HTML
# headings and spanning header cells, Markdown, text, CSV, Word, PowerPoint, Excel and EPUB (issue 43); 4: URLs normalised by RFC 3986 (dot-segments, escapes kept as
# bytes, no userinfo), text decoded BOM-first, per-page caps (issue 44); 5: an empty content root
# (Texinfo's <span id="content"></span>) skipped for the next rule (issue 45)
PARSER_VERSION = 5

# format -> (module, function); a function takes (body, url, cfg, ocr, charset)
PARSERS: dict[str, tuple[str, str]] = {
    "html": ("laminae.tasks.parse.html", "parse_document"),
    "pdf": ("laminae.tasks.parse", "_pdf"),
    "markdown": ("laminae.tasks.parse.markdown", "parse_markdown"),
    "text": ("laminae.tasks.parse.text", "parse_text"),
    "csv": ("laminae.tasks.parse.office.sheets", "parse_csv"),
    "xlsx": ("laminae.tasks.parse.office.sheets", "parse_xlsx"),
    "docx": ("laminae.tasks.parse.office.word", "parse_docx"),
    "pptx": ("laminae.tasks.parse.office.slides", "parse_pptx"),
    "epub": ("laminae.tasks.parse.epub", "parse_epub"),
}


def _pdf(body: bytes, url: str, cfg: ParseConfig, ocr: OcrConfig, charset: str | None) -> ParsedPage:
    from laminae.tasks.parse.pdf import parse_pdf

    return parse_pdf(body, url, cfg, ocr)


def parser_for(fmt: str) -> Callable[..., ParsedPage]:
    module, name = PARSERS[fmt]
    return getattr(import_module(module), name)


def parse(body: bytes, url: str, content_type: str | None = None, *, cfg: ParseConfig | None = None,
          ocr: OcrConfig | None = None, charset: str | None = None) -> ParsedPage:
    """One document's components. ``content_type`` is what the crawler sniffed (None: sniffed here
    from the bytes and the URL's extension); ``charset`` the one its server declared."""
    from laminae.tasks.config import OcrConfig, ParseConfig

    if content_type is None:
        content_type = sniff_content_type(body, None, url)
    fmt = format_of(content_type)
    if fmt is None or fmt not in PARSERS:
        raise ParseError(f"{content_type} is not a document format laminae reads", "unsupported_content_type")
    page = parser_for(fmt)(body, url, cfg or ParseConfig(), ocr or OcrConfig(), charset)
    page.kind = fmt
    return page
