"""The walk over a page's tree: blocks become paragraphs, headings section paths, and each kind of
element goes to its reader (tables, lists, code, media); ``parse_html`` is the entry point.

Reads page bytes and the URL they came from; writes a ``ParsedPage``. Raises ``ParseError``
(reason ``unparsable_html``) for bytes that are not a usable HTML page.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from lxml import etree

from laminae.tasks.config import OcrConfig, ParseConfig
from laminae.tasks.crawl.hrefs import MAX_URL_CHARS, page_base, resolve_link
from laminae.tasks.parse.document import Component, Link, ParsedPage, ParseError, decode_bytes
from laminae.tasks.parse.html.chrome import (
    BLOCK_TAGS,
    HEADINGS,
    LIST_TAGS,
    admonition_title,
    classes_of,
    grid_columns,
    should_skip,
    table_of_contents,
)
from laminae.tasks.parse.html.code import CodeReader
from laminae.tasks.parse.html.lists import ListReader
from laminae.tasks.parse.html.media import MediaReader, image_text_proxy
from laminae.tasks.parse.html.tables import TableReader, line_table
from laminae.tasks.parse.html.text import MAX_COMPONENT_CHARS, TextBuilder, prefixed, split_paragraph
from laminae.tasks.parse.html.tree import UNPARSABLE, page_tree

CONTENT_ROOTS = (
    "//*[@id='mw-content-text']", "//main", "//*[@role='main']", "//article", "//*[@id='content']",
)


def _holds_content(element: etree._Element) -> bool:
    """Whether an element holds any text or a picture, video or table."""
    return bool(element.xpath("boolean(normalize-space(string(.)))")) or bool(
        element.xpath(".//img | .//video | .//table | .//svg"))


class Section(NamedTuple):
    """A heading (or a definition's term) above what follows it."""

    level: int
    name: str
    opened_at: int | None = None  # components when a heading opened it; None: no paragraph if it stays empty
    elsewhere: bool = False  # the heading is all one link to another page (a site's name over its pages)


MAX_HEADING_CHARS = 600  # a longer heading is also a paragraph of its own, its section name cut
MAX_TITLE_CHARS = 1000


class HtmlParser(TableReader, ListReader, CodeReader, MediaReader):
    """One parse of one page; ``parse()`` returns the components in document order."""

    def __init__(self, html: str, url: str, cfg: ParseConfig) -> None:
        self.url = url
        self.cfg = cfg
        self.root, self.warnings = page_tree(html)
        self.long_urls: dict[str, None] = {}  # href and src values over MAX_URL_CHARS, left out
        self.bad_urls: dict[str, str] = {}  # href and src values that are no URL, left out: why
        base = self.root.find(".//base[@href]")
        self.base_url = url
        if base is not None and self._short(base.get("href")):
            self.base_url = page_base(url, base.get("href"))
        self.components: list[Component] = []
        self.sections: list[Section] = []
        self.heading_paragraphs: list[Component] = []  # headings nothing followed, as paragraphs
        self.elsewhere_headings: list[Component] = []  # those of them that are all a link elsewhere
        self.consumed: set[etree._Element] = set()
        self.title = ""
        # a label waiting for the next paragraph: a note's "Warning", a definition's term
        self.prefix: tuple[str, list[Link]] | None = None
        self.dl_depth = 0

    # -- helpers -------------------------------------------------------------------------------
    def section_path(self) -> list[str]:
        return [s.name for s in self.sections]

    def resolve(self, href: str | None) -> str | None:
        if not self._short(href):
            return None
        target, problem = resolve_link(self.base_url, href)
        if problem:
            self.bad_urls.setdefault(href, problem)
        return target

    def _short(self, href: str | None) -> bool:
        if href is not None and len(href) > MAX_URL_CHARS:
            self.long_urls[href] = None
            return False
        return True

    def plain_text(self, el: etree._Element) -> str:
        tb = TextBuilder()
        self.inline(el, tb, collect_images=False, with_tail=False)
        return tb.text()

    # -- inline content ------------------------------------------------------------------------
    def inline(
        self,
        el: etree._Element,
        tb: TextBuilder,
        *,
        collect_images: bool = True,
        with_tail: bool = True,
        row: int | None = None,
        nested_tables: list[etree._Element] | None = None,
        in_cell: bool = False,
    ) -> None:
        """Append the text of ``el`` (and its tail) to ``tb``; images found become components. A table
        inside goes to ``nested_tables`` (read after as a table of its own), but a table of one row or
        one column inside a table's cell (``in_cell``) is a line of text and read where it stands."""
        tag = el.tag if isinstance(el.tag, str) else ""
        if not tag or should_skip(el) or el in self.consumed:
            if with_tail:
                tb.add(el.tail)
            return
        if tag == "img":
            if collect_images:
                self.image(el)
        elif tag == "video":
            if collect_images:
                self.video(el)
        elif tag == "br":
            tb.space()
        elif tag == "math":
            tb.add(el.get("alttext") or "")
        elif tag == "table" and nested_tables is not None and not (in_cell and line_table(el)):
            nested_tables.append(el)
        else:
            block = tag in BLOCK_TAGS
            if block:
                tb.space()
            link_url = self.resolve(el.get("href")) if tag == "a" else None
            start = tb.length
            tb.add(el.text)
            for child in el:
                self.inline(child, tb, collect_images=collect_images, row=row, nested_tables=nested_tables,
                            in_cell=in_cell)
            if link_url:
                tb.links.append(Link(link_url, "", start, tb.length, row))
            if block:
                tb.space()
        if with_tail and el.tail:
            tb.add(el.tail)

    # -- emitting ------------------------------------------------------------------------------
    def emit(self, comp: Component) -> None:
        """Add a component; a waiting label starts it when it is a paragraph, else stands before it."""
        if self.prefix is not None:
            text, links = self.prefix
            self.prefix = None
            if comp.kind == "paragraph":
                comp = prefixed(text, links, comp)
            else:
                self._append(Component("paragraph", text, self.section_path(), links))
        self._append(comp)

    def _append(self, comp: Component) -> None:
        if comp.kind == "paragraph" and len(comp.text) > MAX_COMPONENT_CHARS:
            self.components.extend(split_paragraph(comp))
        else:
            self.components.append(comp)

    def set_prefix(self, text: str, links: list[Link]) -> None:
        self.flush_prefix()
        if text.strip():
            self.prefix = (text.strip(), links)

    def flush_prefix(self) -> None:
        """A label nothing followed is a paragraph of its own."""
        if self.prefix is not None:
            text, links = self.prefix
            self.prefix = None
            self._append(Component("paragraph", text, self.section_path(), links))

    # -- blocks --------------------------------------------------------------------------------
    def flush(self, tb: TextBuilder) -> None:
        text, links = tb.finish()
        if len(text.strip()) >= max(self.cfg.min_paragraph_chars, 1):
            self.emit(Component("paragraph", text, self.section_path(), links))

    def block(self, el: etree._Element) -> None:
        """Walk a block container: runs of inline content become paragraphs."""
        tb = TextBuilder()
        tb.add(el.text)
        for child in el:
            tag = child.tag if isinstance(child.tag, str) else ""
            if not tag:  # comment or processing instruction
                tb.add(child.tail)
                continue
            if should_skip(child) or child in self.consumed:
                tb.add(child.tail)
                continue
            if tag in BLOCK_TAGS or tag in HEADINGS:
                self.flush(tb)
                tb = TextBuilder()
                self.dispatch(child)
                tb.add(child.tail)
            else:
                self.inline(child, tb)
        self.flush(tb)

    def dispatch(self, el: etree._Element) -> None:
        tag = el.tag
        if tag in HEADINGS:
            self.heading(el)
        elif tag == "p":
            tb = TextBuilder()
            self.inline(el, tb, with_tail=False)
            self.flush(tb)
        elif tag == "pre":
            self.code(el)
        elif tag == "dl":
            self.definitions(el)
        elif tag in LIST_TAGS:
            self.list_(el)
        elif tag == "table":
            self.table(el)
        elif tag == "figure":
            self.figure(el)
        elif (columns := grid_columns(el)) is not None:
            self.grid_table(el, columns)
        elif "caption" in classes_of(el) and (after := el.getnext()) is not None and grid_columns(after):
            pass  # the grid table's caption, read with it
        elif (title := admonition_title(el)) is not False:
            self.admonition(el, title)
        else:
            self.block(el)

    def heading(self, el: etree._Element) -> None:
        level = HEADINGS[el.tag]
        text = self.plain_text(el).strip()
        if not text:
            return
        self.flush_prefix()
        while self.sections and self.sections[-1].level >= level:
            self.close_section()
        if len(text) > MAX_HEADING_CHARS:  # every component below repeats its section path: a
            # paragraph-long "heading" is read as the paragraph it is, and names its section cut
            self.emit(Component("paragraph", text, self.section_path(), []))
            self.sections.append(Section(level, text[:MAX_HEADING_CHARS].rsplit(" ", 1)[0] + " …"))
            return
        self.sections.append(Section(level, text, len(self.components), self._links_elsewhere(el, text)))

    def _links_elsewhere(self, el: etree._Element, text: str) -> bool:
        """Is the heading's text all links to pages (another, or this one's top: ``href="#"``), not
        to a part of this page (docutils' "toc-backref" headings)?"""
        anchors = [a for a in el.iter("a") if not should_skip(a)]
        if not anchors or " ".join(" ".join(a.text_content().split()) for a in anchors) != text:
            return False
        return all((a.get("href") or "").strip() == "#" or self.resolve(a.get("href")) for a in anchors)

    def close_section(self) -> None:
        """End the innermost section. A heading with nothing under it (the next heading of its
        level or higher, or the page's end, came first) is text all the same: a paragraph of its
        own, under the headings above it (else a page of headings alone would index nothing)."""
        self.flush_prefix()
        section = self.sections.pop()
        if section.opened_at is not None and section.opened_at == len(self.components):
            comp = Component("paragraph", section.name, self.section_path(), [])
            self._append(comp)
            self.heading_paragraphs.append(comp)
            if section.elsewhere:
                self.elsewhere_headings.append(comp)

    def open_section(self, level: int, name: str) -> None:
        """A section under a name that is text already (a definition's term, its paragraph's label)."""
        self.sections.append(Section(level, name))

    def restore_sections(self, saved: list[Section]) -> None:
        """Back to the sections before a note or a definition: those opened inside it end there."""
        while self.sections and not any(self.sections[-1] is s for s in saved):
            self.close_section()
        self.sections = saved

    def admonition(self, el: etree._Element, title: etree._Element | None) -> None:
        """A note, tip or warning: its label starts its first paragraph ("Warning: ..."); a heading
        inside it (DocBook's "Note" is an ``<h3>``) does not become the section of what follows."""
        saved = list(self.sections)
        body = el
        if "admonitionblock" in classes_of(el):  # Asciidoctor: a table of an icon cell and a content cell
            icon = el.xpath(".//td[contains(concat(' ', @class, ' '), ' icon ')]")
            content = el.xpath(".//td[contains(concat(' ', @class, ' '), ' content ')]")
            if icon and content:
                label = self.plain_text(icon[0]).strip() or " ".join(
                    (img.get("alt") or img.get("title") or "") for img in icon[0].iter("img")).strip()
                self.set_prefix(label, [])
                body = content[0]
        elif title is not None:
            tb = TextBuilder()
            self.inline(title, tb, collect_images=False, with_tail=False)
            self.consumed.add(title)
            self.set_prefix(*tb.finish())
        self.block(body)
        self.flush_prefix()
        self.restore_sections(saved)


    def parse(self) -> ParsedPage:
        root = self.root
        head_title = root.find(".//title")
        title = " ".join(head_title.text_content().split()) if head_title is not None else ""
        if not title:
            og = root.xpath("//meta[@property='og:title']/@content")
            h1 = root.find(".//h1")
            title = (og[0].strip() if og else "") or (self.plain_text(h1).strip() if h1 is not None else "")
        if len(title) > MAX_TITLE_CHARS:  # every image's text repeats it
            self.warnings.append(f"truncated_html: the title ({len(title):,} characters) was cut to its first "
                                 f"{MAX_TITLE_CHARS:,}")
            title = title[:MAX_TITLE_CHARS]
        self.title = title or self.url
        canonical = None
        for link in root.xpath("//link[@href]"):
            if "canonical" in (link.get("rel") or "").lower().split():
                canonical = self.resolve(link.get("href"))
                break
        content = None
        for xpath in CONTENT_ROOTS:
            # an empty element is no content root: Texinfo's single-page manuals open with an
            # anchor <span id="content"></span> before the whole manual
            found = [e for e in root.xpath(xpath) if _holds_content(e)]
            if found:
                content = found[0]
                break
        if content is None:
            content = root.find("body") if root.find("body") is not None else root
        header = content.getprevious()
        while header is not None and not isinstance(header.tag, str):
            header = header.getprevious()
        if content.get("id") == "content" and header is not None and header.get("id") == "header":
            self.block(header)  # Asciidoctor: the title and a manual page's NAME line sit before #content
        self.block(content)
        self.flush_prefix()
        while self.sections:
            self.close_section()
        self._keep_heading_paragraphs(content)
        for comp in self.components:
            if comp.kind in ("image", "video"):
                comp.text = image_text_proxy(comp, self.title)
        page = ParsedPage(self.url, self.title, canonical, root.get("lang"), self.components)
        page.warnings.extend(self.warnings)
        if self.long_urls:
            n, first = len(self.long_urls), next(iter(self.long_urls))
            page.warnings.append(
                f"truncated_html: {n} address{'es' if n > 1 else ''} (href or src) longer than {MAX_URL_CHARS:,} "
                f"characters {'were' if n > 1 else 'was'} left out, the page's text kept; the first is "
                f"{len(first):,} characters long and starts {first[:80]!r}")
        if self.bad_urls:
            n, (first, why) = len(self.bad_urls), next(iter(self.bad_urls.items()))
            page.warnings.append(
                f"bad_url: {n} address{'es' if n > 1 else ''} (href or src) {'are' if n > 1 else 'is'} no usable "
                f"URL and {'were' if n > 1 else 'was'} left out, the page's other links kept; the first, "
                f"{first[:200]!r}, is {why}")
        if not self.components and table_of_contents(content):
            page.warnings.append("navigation_only: the page holds only a table of contents (a chapter's or a "
                                 "part's index page of a documentation site); nothing to index")
        return page

    def _keep_heading_paragraphs(self, content: etree._Element) -> None:
        """Headings nothing followed stay text where the page has more, but for those that are all one
        link to another page (a site's name above its page: navigation, as before); where the page
        has nothing else, all of them, unless it holds a table of contents (a chapter's title over
        its index: ``navigation_only``)."""
        if not self.heading_paragraphs:
            return
        drop = set(map(id, self.elsewhere_headings))
        if len(self.components) == len(self.heading_paragraphs):
            drop = set(map(id, self.components)) if table_of_contents(content) else set()
        if drop:
            self.components = [c for c in self.components if id(c) not in drop]


def parse_html(body: bytes, url: str, cfg: ParseConfig | None = None, charset: str | None = None) -> ParsedPage:
    """Parse one page; raises ``ParseError`` for input that is not a usable HTML page."""
    cfg = cfg or ParseConfig()
    if not body.strip():
        raise ParseError("the page is empty", UNPARSABLE)
    html, decoding, _ = decode_bytes(body, charset, html=True)
    if "\x00" in html[:4096]:  # after decoding: a UTF-16 page's zero bytes are half its characters
        raise ParseError("binary content (NUL bytes) where HTML was expected", UNPARSABLE)
    if html.count("\ufffd") > max(50, len(html) // 10):
        raise ParseError("the bytes do not decode as text in any likely encoding", UNPARSABLE)
    # lxml refuses str input that carries an encoding declaration
    html = re.sub(r"^\s*<\?xml[^>]*\?>", "", html)
    page = HtmlParser(html, url, cfg).parse()
    if decoding:
        page.warnings.append(decoding)
    return page


def parse_document(body: bytes, url: str, cfg: ParseConfig, ocr: OcrConfig, charset: str | None) -> ParsedPage:
    """``parse_html`` with the signature of the entry point's parsers (``laminae.tasks.parse.PARSERS``),
    which name it by module, so that no module of ``laminae.tasks.parse`` imports this package back."""
    return parse_html(body, url, cfg, charset)
