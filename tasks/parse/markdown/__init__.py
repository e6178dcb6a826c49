"""Markdown: a README or a docs/*.md page (CommonMark with GFM tables, strikethrough, bare-URL
autolinks and footnotes, read by markdown-it-py) into a ``ParsedPage``.

Reads a Markdown file's bytes and its URL; writes components in document order: paragraphs (a
block quote's too), lists (one paragraph a list, its items ``segments``, cut at about
``LIST_CHUNK_CHARS`` like the HTML parser's), ``code`` components for fenced and indented code
(the info string's language has no field to go to and is left out), GFM tables (header and rows,
inline markup stripped, a cell's links carry their row), images (``![alt](src "title")``, the
title their caption, the URL resolved against the document's: a folder seed's relative image is a
``file://`` URL; a ``data:`` image keeps its bytes). Headings (ATX and setext) are section paths; a
heading with nothing under it is a paragraph of its own. Links keep character offsets into their
paragraph and are resolved against the document's URL without their fragment, so
``docs/other.md#part`` joins the repository's other page. Raw HTML blocks are read by the HTML
parser, their components placed under the Markdown's section path, their headings joining it
(``html``). YAML (``---``) or TOML (``+++``) front matter is never body text: its
``title`` is the page's title, the rest ``ParsedPage.meta`` (``front``). Title: front matter's, else the first level-1 heading, else the file name.
"""

from __future__ import annotations

import base64
import binascii
import re
from functools import cache

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.front_matter import front_matter_plugin
from mdit_py_plugins.gfm_autolink import gfm_autolink_plugin

from laminae.tasks.config import OcrConfig, ParseConfig
from laminae.tasks.crawl.hrefs import resolve_link
from laminae.tasks.parse.document import (
    Component,
    Link,
    ParsedPage,
    ParseError,
    decode_text,
    items_paragraph,
    linearize_table,
)
from laminae.tasks.parse.html import (
    LIST_CHUNK_CHARS,
    MAX_COMPONENT_CHARS,
    TextBuilder,
    image_text_proxy,
)
from laminae.tasks.parse.html.code import code_pieces
from laminae.tasks.parse.html.text import SPLIT_TARGET_CHARS, split_paragraph
from laminae.tasks.parse.markdown.front import TOML_FRONT, read_front_matter
from laminae.tasks.parse.markdown.html import HtmlBlocks
from laminae.tasks.parse.text import file_name

UNPARSABLE = "unparsable_markdown"
MAX_NESTING = 50  # lists and quotes deeper than this are cut by markdown-it (its CommonMark preset: 20)
MAX_HEADING_CHARS = 600  # a longer heading is also a paragraph of its own, its section name cut
_ATTR = re.compile(r"""\b(src|alt|title|href)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)


def parse_markdown(body: bytes, url: str, cfg: ParseConfig, ocr: OcrConfig, charset: str | None) -> ParsedPage:
    """One Markdown file's page; ``ParseError`` (``unparsable_markdown``) for bytes that are no text.
    An empty file is no error: it has no components (the page stage records ``no_content``)."""
    text, warning = decode_text(body, charset)
    if "\x00" in text or text.count("\ufffd") > max(50, len(text) // 10):
        raise ParseError("binary content where Markdown text was expected", UNPARSABLE)
    return MarkdownReader(url, cfg).read(text, [warning] if warning else [])


@cache
def markdown_parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"maxNesting": MAX_NESTING}).enable(["table", "strikethrough"])
    return md.use(front_matter_plugin).use(gfm_autolink_plugin).use(footnote_plugin)


class MarkdownReader(HtmlBlocks):
    """One read of one Markdown text: ``read()`` walks markdown-it's token stream."""

    def __init__(self, url: str, cfg: ParseConfig) -> None:
        self.url = url
        self.cfg = cfg
        self.components: list[Component] = []
        self.sections: list[tuple[int, str]] = []
        self.bare: tuple[int, str] | None = None  # the last heading, while nothing stands under it
        self.first_h1: str | None = None
        self.note: str | None = None  # the label of the footnote whose first paragraph comes next
        self.warnings: list[str] = []
        self.bad_urls: dict[str, str] = {}  # link and image targets that are no URL, left out: why
        self.meta: dict[str, str] = {}
        self.title: str | None = None
        self.lang: str | None = None

    def resolve(self, href: str) -> str | None:
        """A link's or image's target (``resolve_link``); one that is no URL is noted for the warning."""
        target, problem = resolve_link(self.url, href)
        if problem:
            self.bad_urls.setdefault(href, problem)
        return target

    def front_matter(self, source: str, syntax: str) -> bool:
        """Front matter's title and language the page's, the rest ``meta``; False when it is no
        mapping of keys (then it is body text)."""
        front = read_front_matter(source, syntax)
        if front is None:
            return False
        self.title = front.title or self.title
        self.lang = front.lang or self.lang
        self.meta.update(front.meta)
        self.warnings.extend(front.warnings)
        return True

    # -- the document ------------------------------------------------------------------------
    def read(self, text: str, warnings: list[str]) -> ParsedPage:
        self.warnings.extend(warnings)
        toml = TOML_FRONT.match(text)
        if toml:
            text = text[toml.end():]
            self.front_matter(toml.group(1), "toml")
        tokens = markdown_parser().parse(text)
        if tokens and max(t.level for t in tokens) >= MAX_NESTING - 1:
            self.warnings.append(f"truncated_markdown: blocks nested {MAX_NESTING} deep (quotes in quotes, lists in "
                                 "lists) were cut where the Markdown parser stops reading them")
        i = 0
        while i < len(tokens):
            i = self.block(tokens, i)
        self.close_bare()
        if self.bad_urls:
            n, (first, why) = len(self.bad_urls), next(iter(self.bad_urls.items()))
            self.warnings.append(f"bad_url: {n} link or image target{'s' if n > 1 else ''} {'are' if n > 1 else 'is'} "
                                 f"no usable URL and {'were' if n > 1 else 'was'} left out, the other links kept; the "
                                 f"first, {first[:200]!r}, is {why}")
        title = self.title or self.first_h1 or file_name(self.url)
        for comp in self.components:
            if comp.kind in ("image", "video"):
                comp.text = image_text_proxy(comp, title)
        page = ParsedPage(self.url, title, None, self.lang, self.components, self.warnings, kind="markdown")
        page.meta = self.meta
        return page

    def section_path(self) -> list[str]:
        return [text for _, text in self.sections]

    def emit(self, comp: Component) -> None:
        self.bare = None
        if comp.kind == "paragraph" and len(comp.text) > MAX_COMPONENT_CHARS:
            self.components.extend(split_paragraph(comp))
        else:
            self.components.append(comp)

    def close_bare(self) -> None:
        """A heading nothing stood under is a paragraph of its own, under the headings above it (as
        the HTML parser has it)."""
        if self.bare is not None:
            self.emit(Component("paragraph", self.bare[1], self.section_path()[:-1]))

    # -- blocks ------------------------------------------------------------------------------
    def block(self, tokens: list[Token], i: int) -> int:
        """Read the block starting at ``tokens[i]``; the index of the token after it."""
        tok = tokens[i]
        kind = tok.type
        if kind == "front_matter":
            if not self.front_matter(tok.content, "yaml"):  # rules around prose: text after all
                body = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(tok.content)
                j = 0
                while j < len(body):
                    j = self.block(body, j)
        elif kind == "heading_open":
            text, _, _ = self.inline(tokens[i + 1])
            self.heading(int(tok.tag[1:]), text.strip())
            return i + 3
        elif kind == "footnote_block_open":  # the notes, gathered at the end: in no section
            self.close_bare()
            self.sections = []
        elif kind == "footnote_open":
            self.note = str((tok.meta or {}).get("label") or (tok.meta or {}).get("id", 0) + 1)
        elif kind == "paragraph_open":
            self.paragraph(tokens[i + 1])
            return i + 3
        elif kind in ("bullet_list_open", "ordered_list_open"):
            return self.list_(tokens, i)
        elif kind in ("fence", "code_block"):
            self.code(tok.content)
        elif kind == "table_open":
            return self.table(tokens, i)
        elif kind == "html_block":
            end = i + 1
            while end < len(tokens) and tokens[end].type == "html_block":
                end += 1
            self.html("".join(t.content for t in tokens[i:end]))
            return end
        return i + 1  # block quotes open and close around blocks read as any other; rules say nothing

    def heading(self, level: int, text: str, *, bare: bool = True) -> None:
        """A heading: the section of what follows; ``bare`` while nothing stands under it."""
        if not text:
            return
        if self.bare is not None and level <= self.bare[0]:
            self.close_bare()
        while self.sections and self.sections[-1][0] >= level:
            self.sections.pop()
        if len(text) > MAX_HEADING_CHARS:  # every component below repeats its section path
            self.emit(Component("paragraph", text, self.section_path()))
            text = text[:MAX_HEADING_CHARS].rsplit(" ", 1)[0] + " …"
        self.sections.append((level, text))
        self.bare = (level, text) if bare else None
        if level == 1 and self.first_h1 is None:
            self.first_h1 = text

    def paragraph(self, inline: Token) -> None:
        text, links, images = self.inline(inline)
        if self.note is not None and text.strip():  # a footnote's first paragraph: "[1] The note."
            label, self.note = f"[{self.note}] ", None
            text = label + text
            links = [Link(lk.url, lk.anchor, lk.start + len(label), lk.end + len(label)) for lk in links]
        if len(text.strip()) >= max(self.cfg.min_paragraph_chars, 1):
            self.emit(Component("paragraph", text, self.section_path(), links))
        for image in images:
            self.emit(image)

    def code(self, content: str) -> None:
        text = "\n".join(line.rstrip() for line in content.split("\n")).strip("\n")
        if not text.strip():
            return
        if len(text) <= MAX_COMPONENT_CHARS:
            self.emit(Component("code", text, self.section_path()))
            return
        for start, end in code_pieces(text, SPLIT_TARGET_CHARS):
            self.emit(Component("code", text[start:end], self.section_path()))

    def list_(self, tokens: list[Token], i: int) -> int:
        """A list, nested lists flattened: each item (its paragraphs joined) a segment of one
        paragraph of up to ``LIST_CHUNK_CHARS``; code, a table or HTML in an item is read where it
        stands, the items before it emitted first."""
        depth = tokens[i].level
        items: list[tuple[str, list[Link]]] = []
        images: list[Component] = []
        size = 0
        tb = TextBuilder()

        def end_item() -> None:
            nonlocal tb, size
            text, links = tb.finish()
            tb = TextBuilder()
            if not text.strip():
                return
            if items and size + len(text) > LIST_CHUNK_CHARS:
                emit_items()
            items.append((text, links))
            size += len(text) + 1

        def emit_items() -> None:
            nonlocal size
            if items:
                self.emit(items_paragraph(items, self.section_path()))
                items.clear()
                size = 0
            for image in images:
                self.emit(image)
            images.clear()

        j = i + 1
        while j < len(tokens):
            tok = tokens[j]
            if tok.level == depth and tok.type in ("bullet_list_close", "ordered_list_close"):
                break
            if tok.type in ("list_item_open", "list_item_close"):
                end_item()
            elif tok.type == "inline":
                text, links, found = self.inline(tok)
                tb.space()
                at = tb.length + (1 if tb.length else 0)
                tb.add(text)
                tb.links.extend(Link(lk.url, lk.anchor, lk.start + at, lk.end + at) for lk in links)
                images.extend(found)
            elif tok.type in ("fence", "code_block", "table_open", "html_block"):
                end_item()
                emit_items()
                j = self.block(tokens, j)
                continue
            j += 1
        end_item()
        emit_items()
        return j + 1

    def table(self, tokens: list[Token], i: int) -> int:
        """A GFM table: the header row's cells, then the body's rows; a cell's links carry the
        index of its data row, the header's none; images in cells follow the table."""
        header: list[str] | None = None
        rows: list[list[str]] = []
        links: list[Link] = []
        images: list[Component] = []
        row: list[str] = []
        in_head = False
        j = i + 1
        while j < len(tokens) and tokens[j].type != "table_close":
            tok = tokens[j]
            if tok.type == "thead_open":
                in_head = True
            elif tok.type == "thead_close":
                in_head = False
            elif tok.type == "tr_open":
                row = []
            elif tok.type == "tr_close":
                if in_head:
                    header = row
                elif any(row):
                    rows.append(row)
            elif tok.type == "inline":
                text, cell_links, found = self.inline(tok)
                row.append(text.strip())
                index = None if in_head else len(rows)
                links.extend(Link(lk.url, lk.anchor, row=index) for lk in cell_links)
                images.extend(found)
            j += 1
        if rows or header:
            if not rows:  # a table of one row: its cells are data
                rows, header = [header or []], None
                links = [Link(lk.url, lk.anchor, row=0) for lk in links]
            self.emit(Component("table", linearize_table(None, header, rows), self.section_path(), links,
                                table_kind="data", header=header, rows=rows))
        for image in images:
            self.emit(image)
        return j + 1

    # -- inline content ----------------------------------------------------------------------
    def inline(self, token: Token) -> tuple[str, list[Link], list[Component]]:
        """An inline run's text (markup stripped, white space collapsed), its links with offsets
        into the text and the images in it as components."""
        tb = TextBuilder()
        images: list[Component] = []
        opened: list[tuple[str | None, int]] = []
        for child in token.children or []:
            kind = child.type
            if kind in ("text", "code_inline"):
                tb.add(child.content)
            elif kind == "footnote_ref":
                tb.add(f"[{(child.meta or {}).get('label') or (child.meta or {}).get('id', 0) + 1}]")
            elif kind in ("softbreak", "hardbreak"):
                tb.space()
            elif kind == "link_open":
                opened.append((self.resolve(str(child.attrs.get("href") or "")), tb.length))
            elif kind == "link_close" and opened:
                target, start = opened.pop()
                if target:
                    tb.links.append(Link(target, "", start, tb.length))
            elif kind == "image":
                around = next((target for target, _ in reversed(opened) if target), None)
                image = self.image(str(child.attrs.get("src") or ""), child.content,
                                   str(child.attrs.get("title") or ""), around)
                if image is not None:
                    images.append(image)
            elif kind == "html_inline":
                tag = child.content[:5].lower()
                if tag.startswith("<img"):
                    attrs = _attributes(child.content)
                    around = next((target for target, _ in reversed(opened) if target), None)
                    image = self.image(attrs.get("src", ""), attrs.get("alt", ""), attrs.get("title", ""), around)
                    if image is not None:
                        images.append(image)
                elif tag.startswith("<br"):
                    tb.space()
                elif tag.startswith("<a ") or tag == "<a\n":  # an HTML link inside Markdown text
                    opened.append((self.resolve(_attributes(child.content).get("href", "")), tb.length))
                elif tag.startswith("</a") and opened:
                    target, start = opened.pop()
                    if target:
                        tb.links.append(Link(target, "", start, tb.length))
        text, links = tb.finish()
        return text, [lk for lk in links if lk.end > lk.start], images

    def image(self, src: str, alt: str, title: str, around: str | None) -> Component | None:
        """An image component: its URL resolved (a ``data:`` image's bytes kept), alt text, its
        title as caption and the link around it."""
        data, mime = _data_image(src)
        url = None if data is not None else self.resolve(src)
        if url is None and data is None:
            return None
        links = [Link(around, alt.strip())] if around and around != url else []
        return Component("image", "", self.section_path(), links, caption=title.strip() or None,
                         image_url=url, alt=alt.strip() or None, image_data=data, image_mime=mime)

    # -- front matter ------------------------------------------------------------------------


def _attributes(tag: str) -> dict[str, str]:
    """An inline HTML tag's src, alt, title and href values."""
    return {m.group(1).lower(): next(g for g in m.groups()[1:] if g is not None) for m in _ATTR.finditer(tag)}


def _data_image(src: str) -> tuple[bytes | None, str | None]:
    """A ``data:image/...;base64,`` URL's bytes and type; (None, None) for any other source."""
    if not src.startswith("data:image/"):
        return None, None
    head, _, payload = src.partition(",")
    if not head.endswith(";base64"):
        return None, None
    try:
        return base64.b64decode(payload, validate=False), head[5:].split(";", 1)[0]
    except (binascii.Error, ValueError):
        return None, None
