"""EPUB: an e-book (a zip of XHTML chapters listed by an OPF package) into one ``ParsedPage``.

Reads the book's bytes and its URL; writes one page for the whole book (a reader's moves go from
chapter to chapter of one document): the zip is checked (``check_zip``: a zip bomb is an error
row), ``META-INF/container.xml`` names the OPF package, whose metadata give the title and language
and whose spine the chapters' order. Each chapter is read by the HTML parser, so its headings are
section paths and its tables, lists, code and figures are what they are on a web page; the
navigation document (EPUB 3 ``nav``) is the table of contents, not a chapter, and its labels (or
the NCX's, EPUB 2) name the sections of chapters that have no heading. A link from one chapter to
another (``chapter2.xhtml#sec``) is a link to the book's own URL; links to the web are kept; an
image the book holds keeps its bytes (``image_data``, its type from the manifest). Bounded:
chapters past ``MAX_CHAPTERS`` or ``MAX_BOOK_HTML_BYTES`` are cut with a ``truncated_epub``
warning. Raises ``ParseError``: ``zip_bomb``, or ``unparsable_epub`` for a damaged zip, a missing
package or spine, or an encrypted (DRM) book.
"""

from __future__ import annotations

import mimetypes
import posixpath
import re
import zipfile
from dataclasses import dataclass, field
from urllib.parse import quote, unquote, urlsplit

from lxml import etree

from laminae.tasks.config import OcrConfig, ParseConfig
from laminae.tasks.parse.archive import check_zip, read_member
from laminae.tasks.parse.document import Component, Link, ParsedPage, ParseError
from laminae.tasks.parse.html import image_text_proxy, parse_html
from laminae.tasks.parse.markdown.html import whole_body
from laminae.tasks.parse.text import file_name

FMT = "epub"
UNPARSABLE = "unparsable_epub"
MAX_CHAPTERS = 5000
MAX_BOOK_HTML_BYTES = 64_000_000  # chapters' XHTML read in all
MAX_IMAGE_BYTES = 20_000_000
MAX_TITLE_CHARS = 1000  # every picture's text repeats the title
# chapters are read at this root, so that links between them resolve to paths in the zip
BOOK_ROOT = "file:///epub-book/"
XHTML_TYPES = ("application/xhtml+xml", "text/html", "application/x-dtbook+xml")
FONT_OBFUSCATION = ("http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC")
VOID_TAGS = "area|base|br|col|embed|hr|img|input|link|meta|param|source|track|wbr"
# XHTML's <a id="x"/> or <script src="..."/> would open an element the HTML parser never closes
_SELF_CLOSED = re.compile(rb"<(?!(?:" + VOID_TAGS.encode() + rb")\b)([a-zA-Z][\w:.-]*)(\s[^<>]*?)?\s*/>")



@dataclass
class Book:
    title: str = ""
    lang: str | None = None
    # manifest: member path -> media type
    types: dict[str, str] = field(default_factory=dict)
    spine: list[str] = field(default_factory=list)  # member paths in reading order
    nav: str | None = None  # the EPUB 3 navigation document
    ncx: str | None = None  # the EPUB 2 table of contents


def parse_epub(body: bytes, url: str, cfg: ParseConfig, ocr: OcrConfig, charset: str | None) -> ParsedPage:
    """One book's page: its chapters in spine order; ``ParseError`` for a book that cannot be read."""
    with check_zip(body, FMT, cfg.max_unzipped_bytes) as archive:
        return BookReader(archive, url, cfg).read()


class BookReader:
    """One read of one EPUB archive."""

    def __init__(self, archive: zipfile.ZipFile, url: str, cfg: ParseConfig) -> None:
        self.archive = archive
        self.names = set(archive.namelist())
        self.url = url
        self.cfg = cfg
        self.warnings: list[str] = []
        self.missing_images: list[str] = []

    def read(self) -> ParsedPage:
        self.refuse_drm()
        book = self.package()
        labels = self.labels(book)
        chapters = [path for path in book.spine if path != book.nav]
        if len(chapters) > MAX_CHAPTERS:
            self.warnings.append(f"truncated_epub: the spine lists {len(chapters):,} chapters; the first "
                                 f"{MAX_CHAPTERS:,} were read")
            chapters = chapters[:MAX_CHAPTERS]
        components: list[Component] = []
        read_bytes, first_heading = 0, ""
        for n, path in enumerate(chapters):
            if path not in self.names:
                self.warnings.append(f"chapter_missing: {path} is in the spine but not in the EPUB file")
                continue
            size = self.archive.getinfo(path).file_size
            if read_bytes + size > MAX_BOOK_HTML_BYTES:
                self.warnings.append(f"truncated_epub: chapters hold more than {MAX_BOOK_HTML_BYTES:,} bytes of XHTML; "
                                     f"{n:,} of {len(chapters):,} were read, the rest left out")
                break
            read_bytes += size
            found = self.chapter(path, book, labels.get(path))
            if not first_heading:
                first_heading = next((c.section_path[0] for c in found if c.section_path), "")
            components.extend(found)
        title = (book.title or first_heading or file_name(self.url))[:MAX_TITLE_CHARS]
        for comp in components:
            if comp.kind in ("image", "video"):
                comp.text = image_text_proxy(comp, title)
        if self.missing_images:
            n = len(self.missing_images)
            self.warnings.append(f"image_missing: {n} image{'s' if n > 1 else ''} the chapters show "
                                 f"{'are' if n > 1 else 'is'} not in the EPUB file; the first is {self.missing_images[0]}")
        return ParsedPage(self.url, title, None, book.lang, components, self.warnings, kind=FMT)

    # -- the package -------------------------------------------------------------------------
    def refuse_drm(self) -> None:
        """An encrypted book's chapters are noise: refused, unless only its fonts are obfuscated."""
        if "META-INF/encryption.xml" not in self.names:
            return
        root = _xml(read_member(self.archive, "META-INF/encryption.xml", FMT), "META-INF/encryption.xml")
        methods = [m.get("Algorithm") or "" for m in root.iter("{*}EncryptionMethod")]
        if any(method not in FONT_OBFUSCATION for method in methods):
            raise ParseError("the EPUB is encrypted (DRM): its chapters cannot be read", UNPARSABLE)

    def package(self) -> Book:
        """The OPF package's metadata, manifest and spine."""
        opf_path = None
        if "META-INF/container.xml" in self.names:
            container = _xml(read_member(self.archive, "META-INF/container.xml", FMT), "META-INF/container.xml")
            opf_path = next((unquote(r.get("full-path") or "") for r in container.iter("{*}rootfile")
                             if r.get("full-path")), None)
        if opf_path not in self.names:  # an old or careless writer: the first package file there is
            opf_path = next((n for n in sorted(self.names) if n.lower().endswith(".opf")), None)
        if opf_path is None:
            raise ParseError("the EPUB file has no OPF package (META-INF/container.xml names none)", UNPARSABLE)
        opf = _xml(read_member(self.archive, opf_path, FMT), opf_path)
        base = posixpath.dirname(opf_path)
        book = Book()
        book.title = " ".join(next((t.text or "" for t in opf.iter("{*}title") if (t.text or "").strip()), "").split())
        book.lang = next(((t.text or "").strip() for t in opf.iter("{*}language") if (t.text or "").strip()), None)
        ids: dict[str, str] = {}
        for item in opf.iter("{*}item"):
            href, item_id = item.get("href"), item.get("id")
            if not href:
                continue
            path = _member(base, href)
            book.types[path] = item.get("media-type") or ""
            if item_id:
                ids[item_id] = path
            if "nav" in (item.get("properties") or "").split():
                book.nav = path
        spine = next(opf.iter("{*}spine"), None)
        if spine is None:
            raise ParseError(f"the EPUB's package {opf_path} has no spine (no reading order)", UNPARSABLE)
        book.ncx = ids.get(spine.get("toc") or "")
        for ref in spine.iter("{*}itemref"):
            path = ids.get(ref.get("idref") or "")
            if path is None:
                self.warnings.append(f"chapter_missing: the spine names {ref.get('idref')!r}, which the manifest "
                                     "does not list")
            elif book.types.get(path, "application/xhtml+xml") in XHTML_TYPES and path not in book.spine:
                book.spine.append(path)
        if not book.spine:
            raise ParseError(f"the EPUB's spine ({opf_path}) lists no chapter", UNPARSABLE)
        return book

    def labels(self, book: Book) -> dict[str, str]:
        """Chapter path -> its label in the table of contents (the nav document's, else the NCX's)."""
        labels: dict[str, str] = {}
        for path, kind in ((book.nav, "nav"), (book.ncx, "ncx")):
            if not path or path not in self.names:
                continue
            try:
                root = _xml(read_member(self.archive, path, FMT), path)
            except ParseError as exc:
                self.warnings.append(f"toc_unreadable: {path}: {exc}")
                continue
            base = posixpath.dirname(path)
            if kind == "nav":
                pairs = [(a.get("href"), " ".join("".join(a.itertext()).split())) for a in root.iter("{*}a")]
            else:
                pairs = [(next((c.get("src") for c in p.iter("{*}content")), None),
                          " ".join("".join(next(p.iter("{*}text"), etree.Element("x")).itertext()).split()))
                         for p in root.iter("{*}navPoint")]
            for href, label in pairs:
                if href and label and not href.startswith(("http:", "https:")):
                    labels.setdefault(_member(base, href.split("#", 1)[0]), label)
            if labels:
                break
        return labels

    # -- chapters ----------------------------------------------------------------------------
    def chapter(self, path: str, book: Book, label: str | None) -> list[Component]:
        """One chapter's components: links into the book are links to the book, images it holds
        keep their bytes; a chapter with no heading is under its table-of-contents label."""
        try:  # one damaged chapter (a bad CRC, say) costs that chapter, not the book
            html = read_member(self.archive, path, FMT)
            if not html.strip():
                return []
            page = parse_html(whole_body(_SELF_CLOSED.sub(rb"<\1\2></\1>", html)), BOOK_ROOT + quote(path), self.cfg)
        except ParseError as exc:
            self.warnings.append(f"chapter_unreadable: {path}: {exc}")
            return []
        for warning in page.warnings:
            reason, _, message = warning.partition(": ")
            if reason != "navigation_only":
                self.warnings.append(f"{reason}: {path}: {message}")
        out: list[Component] = []
        headed = any(comp.section_path for comp in page.components)
        for comp in page.components:
            comp.links = [lk for lk in (self.link(lk) for lk in comp.links) if lk is not None]
            if comp.kind == "image" and not self.image(comp, book):
                continue
            if label and not headed:
                comp.section_path = [label, *comp.section_path]
            out.append(comp)
        return out

    def link(self, link: Link) -> Link | None:
        """A link as the book's page has it: into the book -> the book's URL; to the web -> kept."""
        if link.url.startswith(BOOK_ROOT):
            link.url = self.url
            return link
        return link if urlsplit(link.url).scheme in ("http", "https") else None

    def image(self, comp: Component, book: Book) -> bool:
        """An image the book holds: its bytes and type in the component (no URL to fetch); False
        for one it names and does not hold, or one on the disk outside it."""
        url = comp.image_url or ""
        if not url.startswith(BOOK_ROOT):
            return urlsplit(url).scheme in ("http", "https")
        path = unquote(url[len(BOOK_ROOT):])
        if path not in self.names:
            self.missing_images.append(path)
            return False
        size = self.archive.getinfo(path).file_size
        if size > MAX_IMAGE_BYTES:
            self.warnings.append(f"image_too_large: {path}: {size:,} bytes, more than {MAX_IMAGE_BYTES:,}; left out")
            return False
        try:
            comp.image_data = read_member(self.archive, path, FMT)
        except ParseError as exc:
            self.warnings.append(f"image_unreadable: {path}: {exc}")
            return False
        comp.image_mime = book.types.get(path) or mimetypes.guess_type(path)[0]
        comp.image_url = None
        return True


def _member(base: str, href: str) -> str:
    """The zip member an href relative to ``base`` names."""
    return posixpath.normpath(posixpath.join(base, unquote(href))).lstrip("/")


def _xml(data: bytes, name: str) -> etree._Element:
    """A package file's XML (no entities resolved, nothing fetched); ``ParseError`` when unreadable."""
    parser = etree.XMLParser(resolve_entities=False, no_network=True, recover=True, huge_tree=False)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        raise ParseError(f"{name} in the EPUB file is not XML: {exc}", UNPARSABLE) from None
    if root is None:
        raise ParseError(f"{name} in the EPUB file is not XML", UNPARSABLE)
    return root
