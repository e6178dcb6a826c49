"""Parse: HTML bytes → a ``ParsedPage`` of paragraphs, lists, tables and images with their links.

Reads raw page bytes (any encoding) and the URL they came from; writes nothing. Keeps the section
path (heading hierarchy) of every component; expands table colspan/rowspan, detects header rows
and infobox key/value tables, handles nested tables once; resolves image ``src`` and finds
captions; ``<video>`` elements become video components with their source and caption track.
Leaves out navigation, footers, scripts, styles, edit links and reference lists.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

import lxml.html
from bs4.dammit import UnicodeDammit
from lxml import etree

from laminae.tasks.config import ParseConfig
from laminae.tasks.crawl.links import resolve_href
from laminae.tasks.parse.document import Component, Link, ParsedPage, linearize_table


class ParseError(ValueError):
    """The page cannot be parsed; the message says why."""


SKIP_TAGS = frozenset({
    "script", "style", "noscript", "template", "nav", "footer", "aside", "form", "button", "select",
    "input", "textarea", "svg", "iframe", "object", "embed", "canvas", "audio", "map",
    "link", "meta", "head", "title", "sup_reference",
})
SKIP_CLASSES = frozenset({
    "navbox", "vertical-navbox", "navbox-styles", "mw-editsection", "reference", "reflist", "references",
    "mw-references-wrap", "refbegin", "toc", "mw-jump-link", "catlinks", "printfooter", "noprint",
    "mw-indicators", "sistersitebox", "ambox", "mbox-small", "navigation-not-searchable", "site-footer",
    "footer", "breadcrumb", "breadcrumbs", "skip-link", "cookie-banner", "sidebar", "edit-link",
    "editlink", "mw-cite-backlink", "visually-hidden", "sr-only",
})
SKIP_IDS = frozenset({
    "toc", "footer", "catlinks", "mw-navigation", "mw-panel", "mw-head", "sitesub", "contentsub",
    "jump-to-nav", "mw-page-base", "mw-head-base", "siteNotice".lower(), "references",
})
SKIP_ROLES = frozenset({"navigation", "contentinfo", "search", "complementary", "banner"})
CONTENT_ROOTS = (
    "//*[@id='mw-content-text']", "//main", "//*[@role='main']", "//article", "//*[@id='content']",
)
HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
BLOCK_TAGS = frozenset({
    "p", "div", "section", "article", "main", "blockquote", "pre", "ul", "ol", "dl", "li", "dt", "dd",
    "table", "figure", "figcaption", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "header", "details",
    "summary", "center", "address", "fieldset", "body", "html", "caption", "tr", "td", "th", "tbody",
    "thead", "tfoot",
})
LIST_TAGS = frozenset({"ul", "ol", "dl"})
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))
_DISPLAY_NONE = re.compile(r"display\s*:\s*none", re.I)
MAX_SPAN = 200


def decode_html(body: bytes, charset: str | None = None) -> str:
    """Decode page bytes: declared charset first, then meta/BOM sniffing, then guessing."""
    if charset:
        try:
            return body.decode(charset)
        except (LookupError, UnicodeDecodeError):
            pass
    dammit = UnicodeDammit(body, is_html=True)
    if dammit.unicode_markup is None:
        return body.decode("utf-8", errors="replace")
    return dammit.unicode_markup


def _classes(el: etree._Element) -> set[str]:
    return set((el.get("class") or "").lower().split())


def _should_skip(el: etree._Element) -> bool:
    tag = el.tag if isinstance(el.tag, str) else ""
    if tag in SKIP_TAGS:
        return True
    if _classes(el) & SKIP_CLASSES:
        return True
    if (el.get("id") or "").lower() in SKIP_IDS:
        return True
    role = (el.get("role") or "").lower()
    if role in SKIP_ROLES and not (role == "banner" and tag != "header"):
        return True
    if tag == "header" and el.find(".//nav") is not None:
        return True
    style = el.get("style")
    return bool(style and _DISPLAY_NONE.search(style)) or el.get("hidden") is not None


def _int_attr(el: etree._Element, name: str) -> int | None:
    value = (el.get(name) or "").strip().lower().removesuffix("px")
    return int(value) if value.isdigit() else None


class TextBuilder:
    """Collects inline text with collapsed whitespace and records link offsets into it."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.pending_space = False
        self.links: list[Link] = []

    def add(self, text: str | None) -> None:
        if not text:
            return
        text = text.translate(_INVISIBLE)
        words = text.split()
        if not words:
            self.pending_space = self.pending_space or bool(text)
            return
        chunk = " ".join(words)
        if (self.pending_space or text[0].isspace()) and self.length:
            chunk = " " + chunk
        self.parts.append(chunk)
        self.length += len(chunk)
        self.pending_space = text[-1].isspace()

    def space(self) -> None:
        self.pending_space = True

    def text(self) -> str:
        return "".join(self.parts)

    def finish(self) -> tuple[str, list[Link]]:
        """The text and its links, each link's span trimmed to its visible characters."""
        text = self.text()
        links = []
        for link in self.links:
            start, end = link.start, min(link.end, len(text))
            while start < end and text[start] == " ":
                start += 1
            links.append(Link(link.url, text[start:end].strip() or link.anchor, start, end, link.row))
        return text, links


class HtmlParser:
    """One parse of one page; ``parse()`` returns the components in document order."""

    def __init__(self, html: str, url: str, cfg: ParseConfig) -> None:
        self.url = url
        self.cfg = cfg
        try:
            self.root = lxml.html.document_fromstring(html)
        except (etree.ParserError, ValueError) as exc:
            raise ParseError(f"lxml could not build a tree: {exc}") from None
        base = self.root.find(".//base[@href]")
        self.base_url = urljoin(url, base.get("href")) if base is not None else url
        self.components: list[Component] = []
        self.sections: list[tuple[int, str]] = []
        self.consumed: set[etree._Element] = set()
        self.title = ""

    # -- helpers -------------------------------------------------------------------------------
    def section_path(self) -> list[str]:
        return [text for _, text in self.sections]

    def resolve(self, href: str | None) -> str | None:
        return resolve_href(self.base_url, href)

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
    ) -> None:
        """Append the text of ``el`` (and its tail) to ``tb``; images found become components."""
        tag = el.tag if isinstance(el.tag, str) else ""
        if not tag or _should_skip(el) or el in self.consumed:
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
        elif tag == "table" and nested_tables is not None:
            nested_tables.append(el)
        else:
            block = tag in BLOCK_TAGS
            if block:
                tb.space()
            link_url = self.resolve(el.get("href")) if tag == "a" else None
            start = tb.length
            tb.add(el.text)
            for child in el:
                self.inline(child, tb, collect_images=collect_images, row=row, nested_tables=nested_tables)
            if link_url:
                tb.links.append(Link(link_url, "", start, tb.length, row))
            if block:
                tb.space()
        if with_tail and el.tail:
            tb.add(el.tail)

    # -- blocks --------------------------------------------------------------------------------
    def flush(self, tb: TextBuilder) -> None:
        text, links = tb.finish()
        if len(text.strip()) >= max(self.cfg.min_paragraph_chars, 1):
            self.components.append(Component("paragraph", text, self.section_path(), links))

    def block(self, el: etree._Element) -> None:
        """Walk a block container: runs of inline content become paragraphs."""
        tb = TextBuilder()
        tb.add(el.text)
        for child in el:
            tag = child.tag if isinstance(child.tag, str) else ""
            if not tag:  # comment or processing instruction
                tb.add(child.tail)
                continue
            if _should_skip(child) or child in self.consumed:
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
        elif tag == "p" or tag == "pre":
            tb = TextBuilder()
            self.inline(el, tb, with_tail=False)
            self.flush(tb)
        elif tag in LIST_TAGS:
            self.list_(el)
        elif tag == "table":
            self.table(el)
        elif tag == "figure":
            self.figure(el)
        else:
            self.block(el)

    def heading(self, el: etree._Element) -> None:
        level = HEADINGS[el.tag]
        text = self.plain_text(el).strip()
        if not text:
            return
        while self.sections and self.sections[-1][0] >= level:
            self.sections.pop()
        self.sections.append((level, text))

    def list_(self, el: etree._Element) -> None:
        """A list (ul/ol/dl, nested lists flattened) is one paragraph; each item is a segment."""
        items: list[tuple[str, list[Link]]] = []
        tables: list[etree._Element] = []

        def walk(lst: etree._Element, depth: int) -> None:
            for item in lst:
                tag = item.tag if isinstance(item.tag, str) else ""
                if tag not in ("li", "dt", "dd") or _should_skip(item):
                    continue
                tb = TextBuilder()
                tb.add(item.text)
                sublists = []
                for child in item:
                    ctag = child.tag if isinstance(child.tag, str) else ""
                    if ctag in LIST_TAGS and not _should_skip(child):
                        sublists.append(child)
                        tb.add(child.tail)
                    else:
                        self.inline(child, tb, nested_tables=tables)
                text, links = tb.finish()
                if text.strip():
                    items.append((text, links))
                for sub in sublists:
                    walk(sub, depth + 1)

        walk(el, 0)
        if items:
            parts, links, segments, pos = [], [], [], 0
            for text, item_links in items:
                segments.append((pos, pos + len(text)))
                links.extend(Link(lk.url, lk.anchor, lk.start + pos, lk.end + pos) for lk in item_links)
                parts.append(text)
                pos += len(text) + 1
            self.components.append(
                Component("paragraph", "\n".join(parts), self.section_path(), links, segments=segments)
            )
        for table in tables:
            self.table(table)

    def figure(self, el: etree._Element) -> None:
        caption_el = el.find(".//figcaption")
        imgs = [img for img in el.iter("img") if not _should_skip(img)]
        if not imgs:
            self.block(el)
            return
        for img in imgs:
            self.image(img)
        if caption_el is not None:
            self.consumed.add(caption_el)
        for child in el:
            if isinstance(child.tag, str) and child.tag in ("table", "p", "ul", "ol") and child not in self.consumed:
                self.dispatch(child)

    # -- images --------------------------------------------------------------------------------
    def caption_for(self, img: etree._Element) -> tuple[str | None, list[Link]]:
        """The figcaption, thumbnail caption or caption-classed sibling near an image."""
        node = img.getparent()
        for _ in range(5):
            if node is None:
                break
            if node.tag == "figure":
                cap = node.find(".//figcaption")
                if cap is not None:
                    return self._caption(cap)
                break
            if "thumb" in (node.get("class") or "") or "thumbinner" in _classes(node):
                for cap in node.iter():
                    if isinstance(cap.tag, str) and ({"thumbcaption", "gallerytext"} & _classes(cap)):
                        return self._caption(cap)
            node = node.getparent()
        sibling = img.getparent().getnext() if img.getparent() is not None else None
        if sibling is not None and "caption" in (sibling.get("class") or "").lower():
            return self._caption(sibling)
        return None, []

    def _caption(self, cap: etree._Element) -> tuple[str | None, list[Link]]:
        tb = TextBuilder()
        self.inline(cap, tb, collect_images=False, with_tail=False)
        self.consumed.add(cap)
        text, links = tb.finish()
        return (text.strip() or None), links

    def image(self, img: etree._Element) -> None:
        if img in self.consumed or _should_skip(img):
            return
        self.consumed.add(img)
        if img.get("aria-hidden") == "true" or (img.get("role") or "").lower() == "presentation":
            return
        src = img.get("src") or img.get("data-src") or ""
        url = self.resolve(src)
        if url is None:
            return
        width, height = _int_attr(img, "width"), _int_attr(img, "height")
        side = self.cfg.min_image_side
        if (width is not None and width < side) or (height is not None and height < side):
            return
        alt = (img.get("alt") or "").strip() or None
        caption, cap_links = self.caption_for(img)
        links = [Link(lk.url, lk.anchor) for lk in cap_links]
        parent = img.getparent()
        while parent is not None and parent.tag != "a" and parent.tag not in BLOCK_TAGS:
            parent = parent.getparent()
        if parent is not None and parent.tag == "a":
            target = self.resolve(parent.get("href"))
            if target and not _looks_like_file_page(target):
                links.append(Link(target, alt or ""))
        self.components.append(
            Component(
                "image", "", self.section_path(), links, caption=caption,
                image_url=url, alt=alt, width=width, height=height,
            )
        )

    def video(self, el: etree._Element) -> None:
        """A ``<video>``: its ``src`` or first ``<source>``, and its captions ``<track>`` (the default
        one first); the fallback text inside it is not the page's."""
        if el in self.consumed:
            return
        self.consumed.add(el)
        sources = [el.get("src"), *(s.get("src") for s in el.iter("source"))]
        url = next((u for u in map(self.resolve, sources) if u), None)
        if url is None:
            return
        tracks = [t for t in el.iter("track")
                  if (t.get("kind") or "subtitles").lower() in ("captions", "subtitles") and t.get("src")]
        tracks.sort(key=lambda t: t.get("default") is None)
        captions = next((u for u in (self.resolve(t.get("src")) for t in tracks) if u), None)
        caption, _ = self.caption_for(el)
        label = (el.get("title") or el.get("aria-label") or "").strip() or None
        self.components.append(Component(
            "video", "", self.section_path(), caption=caption, alt=label, video_url=url, captions_url=captions,
            width=_int_attr(el, "width"), height=_int_attr(el, "height"),
        ))

    # -- tables --------------------------------------------------------------------------------
    def table(self, el: etree._Element) -> None:
        if el in self.consumed:
            return
        self.consumed.add(el)
        rows = el.xpath("./tr | ./thead/tr | ./tbody/tr | ./tfoot/tr")
        if (el.get("role") or "").lower() == "presentation" or not rows:
            self.block(el)
            return
        nested: list[etree._Element] = []
        grid: list[list[tuple[str, list[Link], bool] | None]] = []
        in_head: list[bool] = []
        pending: dict[int, tuple[int, tuple[str, list[Link], bool]]] = {}  # col -> (rows left, cell)
        for tr in rows:
            if _should_skip(tr):
                continue
            out: list[tuple[str, list[Link], bool] | None] = []
            col = 0
            for td in tr:
                if not isinstance(td.tag, str) or td.tag not in ("td", "th") or _should_skip(td):
                    continue
                col = _fill_spanned(out, col, pending)
                tb = TextBuilder()
                self.inline(td, tb, with_tail=False, nested_tables=nested)
                text, links = tb.finish()
                cell = (text, links, td.tag == "th")
                colspan = min(_int_attr(td, "colspan") or 1, MAX_SPAN)
                rowspan = min(_int_attr(td, "rowspan") or 1, MAX_SPAN)
                for i in range(colspan):
                    out.append(cell if i == 0 else (text, [], td.tag == "th"))
                    if rowspan > 1:
                        pending[col] = (rowspan - 1, (text, [], td.tag == "th"))
                    col += 1
            _fill_spanned(out, col, pending)
            if out:
                grid.append(out)
                in_head.append(tr.getparent().tag == "thead")
        caption_el = el.find("./caption")
        caption = self.plain_text(caption_el).strip() if caption_el is not None else None
        if grid:
            width = max(len(r) for r in grid)
            for r in grid:
                r.extend([None] * (width - len(r)))
            if "infobox" in (el.get("class") or "").lower() or _is_key_value(grid):
                self._infobox(grid, caption)
            else:
                self._data_table(grid, in_head, caption)
        for table in nested:
            self.table(table)

    def _data_table(self, grid, in_head: list[bool], caption: str | None) -> None:
        n_head = 0
        for r, head in zip(grid, in_head, strict=True):
            cells = [c for c in r if c is not None]
            if head or (cells and all(c[2] for c in cells)):
                n_head += 1
            else:
                break
        if n_head == len(grid):  # only header-like rows: read them as data
            n_head = 0
        width = len(grid[0])
        while n_head and width > 1 and _spans_all(grid[0]):
            # a title row ("Climate data for Bari") is the table's caption, not a column label
            title = grid[0][0][0].strip() if grid[0][0] else ""
            if title and title != caption:
                caption = f"{caption} / {title}" if caption else title
            grid, in_head, n_head = grid[1:], in_head[1:], n_head - 1
        header: list[str] | None = None
        if n_head:
            header = []
            for col in range(width):
                labels: list[str] = []
                for r in grid[:n_head]:
                    label = r[col][0].strip() if r[col] else ""
                    if label and label not in labels:
                        labels.append(label)
                header.append(" / ".join(labels))
        rows, links = [], []
        for r in grid[n_head:]:
            cells = [c[0].strip() if c else "" for c in r]
            if not any(cells):
                continue
            for c in r:
                if c:
                    links.extend(Link(lk.url, lk.anchor, row=len(rows)) for lk in c[1])
            rows.append(cells)
        for r in grid[:n_head]:
            for c in r:
                if c:
                    links.extend(Link(lk.url, lk.anchor) for lk in c[1])
        if not rows:
            return
        self.components.append(Component(
            "table", linearize_table(caption, header, rows), self.section_path(), _dedupe_links(links), caption=caption,
            table_kind="data", header=header, rows=rows,
        ))

    def _infobox(self, grid, caption: str | None) -> None:
        rows, links, title, group = [], [], caption, None
        for r in grid:
            cells = [c for i, c in enumerate(r) if c is not None and (i == 0 or c is not r[i - 1])]
            texts = [c[0].strip() for c in cells]
            if len(cells) == 1 or len(set(texts)) == 1:
                text = texts[0] if texts else ""
                if not text:
                    continue
                if not rows and cells[0][2]:
                    title = title or text
                elif cells[0][2]:
                    group = text
                else:
                    rows.append(["", text])
                    links.extend(Link(lk.url, lk.anchor, row=len(rows) - 1) for lk in cells[0][1])
                continue
            key, value = texts[0], " ".join(texts[1:])
            if group and key:
                key = f"{group} / {key}"
            if not (key or value):
                continue
            rows.append([key, value])
            for c in cells:
                links.extend(Link(lk.url, lk.anchor, row=len(rows) - 1) for lk in c[1])
        if not rows:
            return
        lines = [title] if title else []
        lines.extend(f"{k}: {v}" if k else v for k, v in rows)
        self.components.append(Component(
            "table", "\n".join(lines), self.section_path(), _dedupe_links(links), caption=title,
            table_kind="infobox", header=None, rows=rows,
        ))

    # -- page ----------------------------------------------------------------------------------
    def parse(self) -> ParsedPage:
        root = self.root
        head_title = root.find(".//title")
        title = " ".join(head_title.text_content().split()) if head_title is not None else ""
        if not title:
            og = root.xpath("//meta[@property='og:title']/@content")
            h1 = root.find(".//h1")
            title = (og[0].strip() if og else "") or (self.plain_text(h1).strip() if h1 is not None else "")
        self.title = title or self.url
        canonical = None
        for link in root.xpath("//link[@href]"):
            if "canonical" in (link.get("rel") or "").lower().split():
                canonical = self.resolve(link.get("href"))
                break
        content = None
        for xpath in CONTENT_ROOTS:
            found = root.xpath(xpath)
            if found:
                content = found[0]
                break
        if content is None:
            content = root.find("body") if root.find("body") is not None else root
        self.block(content)
        for comp in self.components:
            if comp.kind in ("image", "video"):
                comp.text = image_text_proxy(comp, self.title)
        return ParsedPage(self.url, self.title, canonical, root.get("lang"), self.components)


def _fill_spanned(out: list, col: int, pending: dict) -> int:
    """Copy cells of earlier rows' rowspans into ``out`` from column ``col``; returns the next column."""
    while col in pending:
        left, cell = pending[col]
        out.append(cell)
        if left <= 1:
            del pending[col]
        else:
            pending[col] = (left - 1, cell)
        col += 1
    return col


def _looks_like_file_page(url: str) -> bool:
    path = urlsplit(url).path
    return "/File:" in path or path.lower().endswith((".jpg", ".jpeg", ".png", ".gif", ".svg", ".webp"))


def _spans_all(row: list) -> bool:
    """A header row whose one cell spans the whole width (colspan repeats it in every column)."""
    texts = {c[0].strip() for c in row if c}
    return len(texts) == 1 and all(c is not None for c in row)


def _is_key_value(grid) -> bool:
    """Two columns where every row with two distinct cells starts with a ``<th>`` key."""
    if len(grid[0]) != 2 or len(grid) < 2:
        return False
    pairs = [r for r in grid if r[0] is not None and r[1] is not None and r[0] is not r[1]]
    return bool(pairs) and all(r[0][2] and not r[1][2] for r in pairs)


def _dedupe_links(links: list[Link]) -> list[Link]:
    seen, out = set(), []
    for lk in links:
        key = (lk.url, lk.anchor, lk.row)
        if key not in seen:
            seen.add(key)
            out.append(lk)
    return out


def image_text_proxy(comp: Component, title: str) -> str:
    """What a text-only model reads for an image (or a video): alt text (its title), caption,
    section and page title."""
    what = "Video" if comp.kind == "video" else "Image"
    parts = [f"{what}: {comp.alt}" if comp.alt else what]
    if comp.caption:
        parts.append(f"Caption: {comp.caption}")
    where = " > ".join([title, *comp.section_path[-1:]]) if title else " > ".join(comp.section_path[-1:])
    if where:
        parts.append(f"In: {where}")
    return ". ".join(part.rstrip(" .") for part in parts) + "."


def parse_html(body: bytes, url: str, cfg: ParseConfig | None = None, charset: str | None = None) -> ParsedPage:
    """Parse one page; raises ``ParseError`` for input that is not a usable HTML page."""
    cfg = cfg or ParseConfig()
    if not body.strip():
        raise ParseError("the page is empty")
    if b"\x00" in body[:4096]:
        raise ParseError("binary content (NUL bytes) where HTML was expected")
    html = decode_html(body, charset)
    if html.count("\ufffd") > max(50, len(html) // 10):
        raise ParseError("the bytes do not decode as text in any likely encoding")
    # lxml refuses str input that carries an encoding declaration
    html = re.sub(r"^\s*<\?xml[^>]*\?>", "", html)
    return HtmlParser(html, url, cfg).parse()
