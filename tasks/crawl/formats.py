"""Document formats: which content types become documents, and what a body really is.

Reads bytes (and, for zip containers, the names of their members); writes nothing. The crawler
records ``sniff_content_type`` of every body it fetches or reads; ``laminae.tasks.parse.parse``
picks its parser with ``format_of``. Magic numbers are trusted over a server's header, and the
header over a file name's extension, except where servers are known to be vague: a body served as
``text/plain`` or ``application/octet-stream`` whose name ends ``.md`` is Markdown, ``.csv`` CSV.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from urllib.parse import unquote, urlsplit

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
PDF_TYPE = "application/pdf"
MARKDOWN_TYPE = "text/markdown"
TEXT_TYPE = "text/plain"
CSV_TYPE = "text/csv"
TSV_TYPE = "text/tab-separated-values"
DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX_TYPE = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
EPUB_TYPE = "application/epub+zip"
VIDEO_TYPES = frozenset({"video/mp4", "video/quicktime", "video/webm", "video/x-matroska", "video/ogg",
                         "video/x-msvideo"})

# the format (a parser, and the documents table's ``kind``) of each content type that becomes a document
FORMATS: dict[str, str] = {
    **dict.fromkeys(HTML_TYPES, "html"),
    PDF_TYPE: "pdf",
    MARKDOWN_TYPE: "markdown",
    TEXT_TYPE: "text",
    CSV_TYPE: "csv",
    TSV_TYPE: "csv",
    DOCX_TYPE: "docx",
    PPTX_TYPE: "pptx",
    XLSX_TYPE: "xlsx",
    EPUB_TYPE: "epub",
    **dict.fromkeys(VIDEO_TYPES, "video"),
}
PAGE_TYPES = frozenset(FORMATS)  # what becomes a document
DOCUMENT_TYPES = frozenset(t for t, f in FORMATS.items() if f not in ("html", "pdf", "video"))

# file names a folder listing yields, and what their extension says when the bytes do not
EXTENSIONS: dict[str, str] = {
    ".html": "text/html", ".htm": "text/html", ".xhtml": "application/xhtml+xml", ".pdf": PDF_TYPE,
    ".md": MARKDOWN_TYPE, ".markdown": MARKDOWN_TYPE, ".mdown": MARKDOWN_TYPE, ".txt": TEXT_TYPE,
    ".rst": TEXT_TYPE, ".csv": CSV_TYPE, ".tsv": TSV_TYPE, ".docx": DOCX_TYPE, ".pptx": PPTX_TYPE,
    ".xlsx": XLSX_TYPE, ".xlsm": XLSX_TYPE, ".epub": EPUB_TYPE,
}
PAGE_SUFFIXES = tuple(EXTENSIONS)
ALIASES = {"text/x-markdown": MARKDOWN_TYPE, "text/prs.fallenstein.rst": TEXT_TYPE, "text/x-rst": TEXT_TYPE, "application/csv": CSV_TYPE, "text/x-csv": CSV_TYPE,
           "application/x-epub+zip": EPUB_TYPE}
# each Office Open XML format's main part: the member it usually is, and the content types
# [Content_Types].xml gives it (templates, slide shows and macro-enabled variants included), which tell
# a package that keeps it under another name; the sniffing here and the parsers' checks read both
OFFICE_MAIN_MEMBERS = {"docx": "word/document.xml", "pptx": "ppt/presentation.xml", "xlsx": "xl/workbook.xml"}
OFFICE_MAIN_TYPES = {
    "docx": (b"wordprocessingml.document.main+xml", b"wordprocessingml.template.main+xml",
             b"ms-word.document.macroEnabled.main+xml", b"ms-word.template.macroEnabledTemplate.main+xml"),
    "pptx": (b"presentationml.presentation.main+xml", b"presentationml.slideshow.main+xml",
             b"presentationml.template.main+xml", b"ms-powerpoint.presentation.macroEnabled.main+xml"),
    "xlsx": (b"spreadsheetml.sheet.main+xml", b"spreadsheetml.template.main+xml",
             b"ms-excel.sheet.macroEnabled.main+xml"),
}
OFFICE_TYPES = {"docx": DOCX_TYPE, "pptx": PPTX_TYPE, "xlsx": XLSX_TYPE}
CONTENT_TYPES_MAX_BYTES = 1 << 20
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # a compound file: legacy Office, or an encrypted OOXML package
ZIPPED_TYPES = frozenset({DOCX_TYPE, PPTX_TYPE, XLSX_TYPE, EPUB_TYPE})
VAGUE_TYPES = frozenset({TEXT_TYPE, "application/octet-stream", "binary/octet-stream", "application/zip",
                         "application/x-zip-compressed"})


def extension_type(url: str) -> str | None:
    """The content type a URL's file name announces (``.md``, ``.docx``...), or None."""
    name = unquote(urlsplit(url).path).rsplit("/", 1)[-1].lower()
    dot = name.rfind(".")
    return EXTENSIONS.get(name[dot:]) if dot > 0 else None


def zip_type(body: bytes) -> str | None:
    """What a zip container holds (Word, PowerPoint, Excel, EPUB), from its member names; "" for
    another zip, None for one that cannot be listed (truncated, damaged)."""
    if body[30:58] == b"mimetypeapplication/epub+zip":  # the EPUB rule: an uncompressed first member
        return EPUB_TYPE
    try:
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            names = set(archive.namelist())
            if "mimetype" in names and any(n.endswith(".opf") for n in names):
                return EPUB_TYPE
            fmt = next((fmt for fmt, main in OFFICE_MAIN_MEMBERS.items() if main in names), None)
            if fmt is None and "[Content_Types].xml" in names \
                    and archive.getinfo("[Content_Types].xml").file_size <= CONTENT_TYPES_MAX_BYTES:
                declared = archive.read("[Content_Types].xml")  # the main part under another name
                fmt = next((fmt for fmt, mains in OFFICE_MAIN_TYPES.items() if any(m in declared for m in mains)),
                           None)
            return OFFICE_TYPES[fmt] if fmt else ""
    except (zipfile.BadZipFile, zlib.error, OSError, ValueError, EOFError, NotImplementedError):
        return None


def sniff_content_type(body: bytes, declared: str | None, url: str | None = None) -> str:
    """The content type the bytes really are, trusting magic numbers over the header and the header
    over the name; a vague header (text/plain, octet-stream, zip) defers to the name's extension."""
    declared = ALIASES.get(declared or "", declared)
    head = body[:2048]
    stripped = head.lstrip()
    if stripped.startswith(b"%PDF-"):
        return PDF_TYPE
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    video = sniff_video(head)
    if video:
        return video
    named = extension_type(url) if url else None
    said = next((t for t in (declared, named) if t in ZIPPED_TYPES), None)  # what the header or name claims
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):  # a zip's first member, or the end of an empty one
        # a damaged or empty zip: the format claimed, whose parser says what is wrong with it
        return zip_type(body) or said or (declared if declared and declared not in DOCUMENT_TYPES
                                          else "application/zip")
    if head.startswith(OLE_MAGIC) and said and said != EPUB_TYPE:
        return said  # a password-protected .docx is a compound file: its parser says encrypted_document
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 text: its tags are read as characters
        stripped = head[2:].decode("utf-16-le" if head[0] == 0xFF else "utf-16-be", "replace").encode("utf-8").lstrip()
    lowered = stripped[:512].lower()
    if lowered.startswith(b"<svg") or (lowered.startswith(b"<?xml") and b"<svg" in head.lower()):
        return "image/svg+xml"
    if b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 text has zero bytes
        return "application/octet-stream"
    if named in (MARKDOWN_TYPE, CSV_TYPE, TSV_TYPE) and (declared is None or declared in VAGUE_TYPES
                                                         or declared == named):
        return named  # a README.md may well open with an HTML comment or a <p align=center>
    if any(tag in lowered for tag in (b"<!doctype html", b"<html", b"<head", b"<body")):
        return "text/html"
    if declared and declared not in VAGUE_TYPES:
        return declared
    if named:
        return named  # a .docx that is no zip: its parser says what is wrong with it
    if any(tag in lowered for tag in (b"<p", b"<div", b"<h1", b"<table")):
        return "text/html"
    return declared if declared and declared != "application/zip" else TEXT_TYPE


def sniff_video(head: bytes) -> str | None:
    """The video container the first bytes announce (ISO BMFF, Matroska/WebM, Ogg, AVI), or None."""
    if head[4:8] == b"ftyp":
        return "video/quicktime" if head[8:10] == b"qt" else "video/mp4"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "video/webm" if b"webm" in head[:64] else "video/x-matroska"
    if head.startswith(b"OggS") and b"theora" in head[:64]:
        return "video/ogg"
    if head[:4] == b"RIFF" and head[8:12] == b"AVI ":
        return "video/x-msvideo"
    return None


def format_of(content_type: str | None) -> str | None:
    """The parser (``html``, ``pdf``, ``markdown``...) of a content type; None if it is not a document."""
    return FORMATS.get(ALIASES.get(content_type or "", content_type or ""))
