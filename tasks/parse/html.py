"""Parse: HTML bytes → a ``ParsedPage`` of paragraphs, code blocks, lists, tables and images with their links.

Reads raw page bytes (any encoding) and the URL they came from; writes nothing. Keeps the section
path (heading hierarchy) of every component; expands table colspan/rowspan, detects header rows
and infobox key/value tables, handles nested tables once; resolves image ``src`` and finds
captions; ``<video>`` elements become video components with their source and caption track.

Written for the shapes documentation generators give pages as much as for Wikipedia's: a
``<pre>`` is a ``code`` component with its lines kept (line-number gutters and copy buttons left
out); a definition list is a list of term + description items (an API signature with its
description), each item its own component once the list is longer than a short one, the term
then the section of what its description holds; lists are cut into components of about
``LIST_CHUNK_CHARS``; a note or warning keeps its label ("Warning: ..."), and headings inside it
do not leak into the section path after it; no paragraph is longer than ``MAX_COMPONENT_CHARS``
(longer text is cut at sentence ends). Leaves out navigation chrome (``nav``, ARIA navigation,
search and banner landmarks, sidebars, breadcrumbs, tables of contents, previous/next bars, by
the class and id words generators use for them), footers, scripts, styles, permalink signs
("¶"), edit links and MediaWiki's citation markers and reference lists.
"""

from __future__ import annotations

import bisect
import re
from functools import lru_cache
from html.parser import HTMLParser
from urllib.parse import urlsplit

import lxml.html
from bs4.dammit import UnicodeDammit
from lxml import etree

from laminae.tasks.config import ParseConfig
from laminae.tasks.crawl.links import MAX_URL_CHARS, page_base, resolve_href
from laminae.tasks.parse.document import Component, Link, ParsedPage, linearize_table


class ParseError(ValueError):
    """The page cannot be parsed; the message says why."""


SKIP_TAGS = frozenset({
    "script", "style", "noscript", "template", "nav", "footer", "form", "button", "select",
    "input", "textarea", "svg", "iframe", "object", "embed", "canvas", "audio", "map",
    "link", "meta", "head", "title",
})
SKIP_CLASSES = frozenset({
    # MediaWiki's furniture (none of these names is a content class elsewhere)
    "navbox", "vertical-navbox", "navbox-styles", "mw-editsection", "reflist", "references",
    "mw-references-wrap", "refbegin", "mw-jump-link", "catlinks", "printfooter", "noprint",
    "mw-indicators", "sistersitebox", "ambox", "mbox-small", "navigation-not-searchable", "mw-cite-backlink",
    # generic chrome
    "site-footer", "footer", "skip-link", "skip-to-content", "cookie-banner", "edit-link", "editlink",
    "visually-hidden", "sr-only", "table-of-contents",
    # Sphinx's "[source]" links (viewcode); rustdoc's "source" links and "Expand description" toggles
    "viewcode-link", "viewcode-back", "hideme", "rightside", "out-of-band",
})
# MediaWiki's citation marker is ``sup.reference``; Sphinx puts ``reference`` on every link and
# DocBook on a whole part of a book, so the class alone is no reason to leave anything out
SKIP_TAG_CLASSES = frozenset({("sup", "reference"), ("a", "src")})
_TAG_CLASS_TAGS = frozenset(tag for tag, _ in SKIP_TAG_CLASSES)
_NO_CLASSES: frozenset[str] = frozenset()
# words of class names (split at - and _) that generators give navigation chrome: Bootstrap's and
# Django's ``nav``, DocBook's ``navheader``, MkDocs' ``md-sidebar``, Docusaurus' ``theme-doc-toc-*``
# and ``tableOfContents_*``, Hugo's ``td-toc``, Asciidoctor's ``toc2``, ``pagination-nav``...
CHROME_WORDS = frozenset({
    "nav", "navbar", "navigation", "navheader", "navfooter", "navlinks", "breadcrumb", "breadcrumbs",
    "sidebar", "sidenav", "menu", "toc", "toc2", "tocify", "tableofcontents", "pagination", "pager",
    "searchbox",
})
_WORD_SPLIT = re.compile(r"[-_]+")
# ids are compared whole (a section's id is often its title's slug, so never by word), and only
# on elements that are not sections
SKIP_IDS = frozenset({
    "toc", "footer", "catlinks", "mw-navigation", "mw-panel", "mw-head", "sitesub", "contentsub",
    "jump-to-nav", "mw-page-base", "mw-head-base", "siteNotice".lower(), "references", "sidebar",
    "global-nav", "searchbox", "breadcrumbs", "tableofcontents",
})
SKIP_ROLES = frozenset({"navigation", "contentinfo", "search", "complementary", "banner"})
# an <aside> (skipped as complementary) that holds content: notes, footnotes, docutils' sidebars
ADMONITION_WORDS = frozenset({
    "admonition", "admonitionblock", "note", "tip", "warning", "caution", "danger", "important", "hint",
    "attention", "seealso", "callout", "alert",
})
CONTENT_ASIDE_WORDS = ADMONITION_WORDS | {"footnote", "footnotes", "topic", "sidebar"}
CONTENT_ASIDE_ROLES = frozenset({"note", "doc-footnote", "doc-endnotes", "doc-tip", "doc-notice"})
ADMONITION_TAGS = frozenset({"div", "aside", "section", "details", "blockquote"})
# permalink anchors next to headings and signatures: Sphinx and MkDocs "¶", Docusaurus "#",
# rustdoc "§"
PERMALINK_CLASSES = frozenset({
    "headerlink", "hash-link", "anchorjs-link", "doc-anchor", "header-anchor", "heading-anchor",
    "anchor-link", "permalink",
})
PERMALINK_SIGNS = frozenset({"", "¶", "#", "§", "🔗", "\u2693"})
# line-number gutters of highlighted code (Pygments, Chroma, Prism)
LINE_NUMBER_CLASSES = frozenset({
    "linenos", "lineno", "linenodiv", "lnt", "ln", "gutter", "line-numbers-rows", "line-number", "linenumber",
})
CODE_TABLE_CLASSES = frozenset({"highlighttable", "lntable"})
CONTENT_ROOTS = (
    "//*[@id='mw-content-text']", "//main", "//*[@role='main']", "//article", "//*[@id='content']",
)
HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
BLOCK_TAGS = frozenset({
    "p", "div", "section", "article", "main", "blockquote", "pre", "ul", "ol", "dl", "li", "dt", "dd",
    "table", "figure", "figcaption", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "header", "details",
    "summary", "center", "address", "fieldset", "body", "html", "caption", "tr", "td", "th", "tbody",
    "thead", "tfoot", "aside",
})
LIST_TAGS = frozenset({"ul", "ol", "dl"})
# what makes a list item or a description more than a run of text: it is then read as blocks
STRUCTURE_TAGS = frozenset({
    "pre", "table", "dl", "h1", "h2", "h3", "h4", "h5", "h6", "section", "blockquote", "figure", "details",
})
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))
_DISPLAY_NONE = re.compile(r"display\s*:\s*none", re.I)
_SENTENCE_END = re.compile(r"[.!?…][\"')\]»”’]*\s+")
MAX_SPAN = 200
MAX_COMPONENT_CHARS = 4000  # a longer paragraph is cut at sentence ends (tables and code are not cut)
SPLIT_TARGET_CHARS = 2000  # the size such pieces aim at
LIST_CHUNK_CHARS = 2000  # a list's items are grouped into components up to this size
SHORT_DL_CHARS = 1000  # a definition list up to this size (plain descriptions only) stays one component
TERM_LEVEL = 7  # a definition's term is a section below every heading level
MAX_TERM_SECTION_CHARS = 600
MAX_HEADING_CHARS = 600  # a longer heading is also a paragraph of its own, its section name cut
MAX_TITLE_CHARS = 1000


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


def _classes(el: etree._Element) -> frozenset[str]:
    return _class_names(el.get("class") or "")


@lru_cache(maxsize=8192)
def _class_names(attr: str) -> frozenset[str]:
    return frozenset(attr.lower().split())


@lru_cache(maxsize=8192)
def _class_words(classes: frozenset[str]) -> frozenset[str]:
    return frozenset(word for name in classes for word in _WORD_SPLIT.split(name) if word)


def _tag(el: etree._Element) -> str:
    return el.tag if isinstance(el.tag, str) else ""


def _is_chrome(el: etree._Element, tag: str, classes: frozenset[str]) -> bool:
    """Navigation chrome by its class words: a block element (inline ones carry such words as
    links of the content), not a section, a note or a docutils sidebar (``.. sidebar::``, content
    with a title of its own)."""
    words = _class_words(classes)
    if not words & CHROME_WORDS:
        return False
    if tag not in BLOCK_TAGS or "admonition" in words or "title" in words or tag == "section":
        return False  # a heading's "toc-backref" link is the heading's text; a sidebar's title is its own
    if "sidebar" in words and not (words & CHROME_WORDS - {"sidebar"}):
        first = next((c for c in el if isinstance(c.tag, str)), None)
        if first is not None and _classes(first) & {"sidebar-title", "title", "titlepage"}:
            return False
    return True


def _is_permalink(el: etree._Element, classes: frozenset[str]) -> bool:
    if classes & PERMALINK_CLASSES:
        return True
    href = el.get("href") or ""
    return href.startswith("#") and el.text_content().strip() in PERMALINK_SIGNS - {""} and not len(el)


def _content_aside(el: etree._Element, classes: frozenset[str]) -> bool:
    return bool(_class_words(classes) & CONTENT_ASIDE_WORDS) or (el.get("role") or "").lower() in CONTENT_ASIDE_ROLES


def _should_skip(el: etree._Element) -> bool:
    tag = el.tag if isinstance(el.tag, str) else ""
    if tag in SKIP_TAGS:
        return True
    attr = el.get("class")
    classes = _class_names(attr) if attr else _NO_CLASSES
    if tag == "aside" and not _content_aside(el, classes):
        return True
    if classes:
        if classes & SKIP_CLASSES or (tag in _TAG_CLASS_TAGS and any((tag, c) in SKIP_TAG_CLASSES for c in classes)):
            return True
        if _is_chrome(el, tag, classes):
            return True
    if tag == "a" and _is_permalink(el, classes):
        return True
    el_id = el.get("id")
    if el_id and el_id.lower() in SKIP_IDS and tag not in HEADINGS and tag != "section" and not any(
            c.startswith(("section", "sect", "refsect", "chapter")) for c in classes):
        return True
    role = el.get("role")
    if role:
        role = role.lower()
        if role in SKIP_ROLES and not (role == "banner" and tag != "header") and not (
                role == "complementary" and _content_aside(el, classes)):
            return True
    if tag == "header" and el.find(".//nav") is not None:
        return True
    style = el.get("style")
    return bool(style and _DISPLAY_NONE.search(style)) or el.get("hidden") is not None


_GRID_COLUMNS = {"two-column-summary": 2, "three-column-summary": 3, "four-column-summary": 4}


def _grid_columns(el: etree._Element) -> int | None:
    """Columns of a ``<div>`` grid table (Javadoc's ``summary-table three-column-summary``)."""
    if _tag(el) != "div":
        return None
    classes = _classes(el)
    if "summary-table" not in classes:
        return None
    return next((n for name, n in _GRID_COLUMNS.items() if name in classes), None)


def _code_skip(el: etree._Element, tag: str) -> bool:
    """Inside a ``<pre>``: buttons, hidden text and line-number gutters (no chrome lives there)."""
    if tag in SKIP_TAGS:
        return True
    attr = el.get("class")
    if attr and _class_names(attr) & (LINE_NUMBER_CLASSES | SKIP_CLASSES):
        return True
    style = el.get("style")
    return bool(style and _DISPLAY_NONE.search(style)) or el.get("hidden") is not None


def _admonition_title(el: etree._Element) -> etree._Element | None | bool:
    """For a note, warning, tip... (by its class words): its title element (None when it has
    none); False for anything else."""
    if _tag(el) not in ADMONITION_TAGS:
        return False
    words = _class_words(_classes(el))
    first = next((c for c in el if isinstance(c.tag, str) and not _should_skip(c)), None)
    if not words & ADMONITION_WORDS and not (  # docutils' sidebar and topic have titles too
            words & {"sidebar", "topic"} and first is not None and _classes(first) & {"sidebar-title", "topic-title"}):
        return False
    if first is None:
        return None
    tag = _tag(first)
    label = (first.get("class") or "").lower()
    if tag in HEADINGS or tag == "summary" or "title" in label or "heading" in label:
        return first if len(" ".join(first.text_content().split())) <= 80 else None
    return None


def _has_structure(el: etree._Element) -> bool:
    """Does a list item or a description hold blocks that are more than a run of text (code, a
    table, a definition list, headings, several paragraphs, a note)?"""
    for d in el.iterdescendants():
        tag = _tag(d)
        if tag in STRUCTURE_TAGS or (tag == "div" and _admonition_title(d) is not False):
            return True
    return sum(1 for c in el if _tag(c) in ("p", "div") and c.text_content().strip()) > 1


def _int_attr(el: etree._Element, name: str) -> int | None:
    value = (el.get(name) or "").strip().lower().removesuffix("px")
    return int(value) if value.isdigit() else None


# -- the tree ------------------------------------------------------------------------------------
# The walk below recurses once or a few times per level of the tree (block -> dispatch -> block,
# an admonition's three calls): a tree is made no deeper than MAX_DEPTH first, so that no page can
# exhaust Python's stack (1,000 frames). Real pages are far shallower (wtq-dev's 200 Wikipedia
# pages at most 14 levels). Past UNWRAP_DEPTH, formatting elements that mean nothing to the walk
# (a run of unclosed <font> tags, the usual cause) and bare wrapper divs are unwrapped in a deep
# part, so the content under them keeps its structure; what is still deeper than MAX_DEPTH is
# lifted up, text kept in document order.
MAX_DEPTH = 100
UNWRAP_DEPTH = 50
UNWRAP_TAGS = frozenset({
    "font", "span", "b", "i", "u", "s", "strike", "em", "strong", "small", "big", "tt", "mark", "ins", "del",
    "abbr", "acronym", "cite", "dfn", "kbd", "samp", "var", "code", "q", "bdi", "bdo", "nobr", "blink", "time",
    "data", "label",
})
WRAPPER_TAGS = frozenset({"div", "section", "center"})
_WRAPPER_ROLES = re.compile(r"thumb|caption|gallery", re.I)  # classes an image's caption is found by
# containers whose walk reads only some kinds of children (a row's cells, a list's items): what is
# lifted goes into an element that is none of these
PICKY_TAGS = frozenset({"table", "thead", "tbody", "tfoot", "tr", "colgroup", "ul", "ol", "menu", "dl", "figure"})
# libxml2 stops at 2,048 open elements even with huge_tree and drops the rest of the page; such a
# page is read again by html.parser into a tree that opens at most this many
FALLBACK_DEPTH = 512
VOID_TAGS = frozenset({
    "area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link", "meta", "param", "source",
    "track", "wbr",
})
_XML_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_NOT_XML_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def page_tree(html: str) -> tuple[etree._Element, list[str]]:
    """The page's element tree, no deeper than ``MAX_DEPTH`` + 1, and warnings ("reason: message")
    for what was read other than as written.

    lxml parses with ``huge_tree``: without it libxml2 stops at a text node or attribute over
    10 MB or 256 open elements and silently drops the rest of the page (our bodies are bounded
    by ``crawl.max_body_bytes``). Where libxml2 still stops (2,048 open elements), the page is
    read by html.parser instead, with every text kept."""
    parser = lxml.html.HTMLParser(huge_tree=True)
    try:
        root = lxml.html.document_fromstring(html, parser=parser)
    except (etree.ParserError, ValueError) as exc:
        raise ParseError(f"lxml could not build a tree: {exc}") from None
    notes: list[str] = []
    fatal = next((e for e in parser.error_log if e.level >= etree.ErrorLevels.FATAL), None)
    if fatal is not None:
        builder = _CappedTreeBuilder()
        builder.feed(html)
        builder.close()
        root = builder.root
        notes.append(f"lxml stopped at line {fatal.line}, column {fatal.column} ({fatal.message.strip()}), which "
                     f"drops the rest of the page, so html.parser read it (at most {FALLBACK_DEPTH} elements open)")
    flattened = _shallow(root)
    if flattened:
        many = flattened > 1
        notes.append(f"{flattened} element{'s' if many else ''} nested more than {MAX_DEPTH} levels deep "
                     f"{'were' if many else 'was'} lifted {MAX_DEPTH // 4} or more levels up with what is in "
                     f"{'them' if many else 'it'} (the elements left, a table row say, lose what followed)")
    if not notes:
        return root, []
    reason = "html_fallback" if fatal is not None and "depth" not in fatal.message.lower() else "deep_html"
    return root, [f"{reason}: " + "; ".join(notes) + "; all the text is kept, in order"]


def _shallow(root: etree._Element) -> int:
    """Make a tree deeper than ``MAX_DEPTH`` shallow in place (see ``_rebuild``); returns how many
    elements were lifted. Costs one XPath evaluation on a tree that is not that deep."""
    deep = "/".join(["*"] * (MAX_DEPTH - UNWRAP_DEPTH + 1))
    tops = root.xpath("/".join(["*"] * UNWRAP_DEPTH) + f"[{deep}]")
    return sum(_rebuild(top, MAX_DEPTH - UNWRAP_DEPTH) for top in tops)


def _rebuild(top: etree._Element, room: int) -> int:
    """Rebuild the subtree of ``top`` no more than ``room`` + 1 levels deep, text kept in document
    order. Formatting elements (``UNWRAP_TAGS``) and bare wrappers (a ``div`` holding one block
    and nothing else) are unwrapped; an element that still has no room is lifted, with what is in
    it, to be a child of the deepest ancestor in the upper half of the room that reads any child
    (not ``PICKY_TAGS``); the ancestors it skipped lose what follows it, which goes after it.
    Iterative, linear in the subtree's size; returns how many elements were lifted."""
    chain = [top]  # the new tree's open elements, by depth below top
    holders = [0]  # indices in chain of those that are not PICKY_TAGS
    unwrapping: list[bool] = []  # per open element of the old tree
    placed: list[tuple[etree._Element, etree._Element]] = []  # (element, its new parent), in document order
    moved: list[etree._Element] = []  # every node below top, in document order
    texts: dict[etree._Element, str | None] = {}
    tails: dict[etree._Element, str | None] = {}
    slot, slot_is_text, pieces = top, True, [top.text or ""]
    lifted = unwrapped = 0

    def flush() -> None:
        (texts if slot_is_text else tails)[slot] = "".join(pieces) or None

    for event, node in etree.iterwalk(top, events=("start", "end", "comment", "pi")):
        if node is top:
            continue
        if event in ("comment", "pi"):  # not text: only what follows it is
            moved.append(node)
            pieces.append(node.tail or "")
        elif event == "start":
            moved.append(node)
            if _unwrappable(node):
                unwrapping.append(True)
                unwrapped += 1
                pieces.append(node.text or "")
                continue
            unwrapping.append(False)
            flush()
            if len(chain) > room:
                at = next(i for i in reversed(holders) if i <= room // 2)
                del chain[at + 1:]
                while holders[-1] > at:
                    holders.pop()
                lifted += 1
            placed.append((node, chain[-1]))
            chain.append(node)
            if node.tag not in PICKY_TAGS and _grid_columns(node) is None:
                holders.append(len(chain) - 1)
            slot, slot_is_text, pieces = node, True, [node.text or ""]
        else:
            if unwrapping.pop():
                pieces.append(node.tail or "")
                continue
            if chain[-1] is node:  # (else it was lifted out of the chain already)
                chain.pop()
                if holders[-1] == len(chain):
                    holders.pop()
            flush()
            slot, slot_is_text, pieces = node, False, [node.tail or ""]
    flush()
    if not lifted and not unwrapped:
        return 0
    for node in reversed(moved):  # children before parents: each is a leaf when it goes
        node.getparent().remove(node)
    top.text = texts.get(top)
    for node, parent in placed:
        parent.append(node)
        node.text, node.tail = texts.get(node), tails.get(node)
    return lifted


def _unwrappable(el: etree._Element) -> bool:
    """A formatting element, or a bare wrapper ``div`` around one block (neither a landmark, a
    note, a grid table nor an image's frame), that the walk reads the same without."""
    tag = el.tag
    if tag in UNWRAP_TAGS:
        return not _should_skip(el) and not (_classes(el) & LINE_NUMBER_CLASSES)
    if tag not in WRAPPER_TAGS or len(el) != 1 or (el.text or "").strip() or el.get("id") or el.get("role"):
        return False
    child = el[0]
    if not isinstance(child.tag, str) or (child.tag not in BLOCK_TAGS and child.tag not in HEADINGS) or (
            child.tail or "").strip():
        return False
    return not (_should_skip(el) or _WRAPPER_ROLES.search(el.get("class") or "") or _grid_columns(el) is not None
                or _admonition_title(el) is not False)


class _CappedTreeBuilder(HTMLParser):
    """A page's tree from html.parser's tokens, for a page libxml2 gives up on: never more than
    ``FALLBACK_DEPTH`` elements open (past that a formatting tag is left out and another element
    closes the innermost ones, up to one that is not ``PICKY_TAGS``, before it opens); end tags close the innermost open element of their
    name; all text is kept, in order. html.parser applies none of HTML's implied end tags, which
    the later walk does not need."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = lxml.html.Element("html")
        self.stack: list[etree._Element] = [self.root]
        self.open_tags: dict[str, int] = {}
        self.left_out: dict[str, int] = {}
        self.pending: list[str] = []

    def _flush(self) -> None:
        if not self.pending:
            return
        text = _NOT_XML_TEXT.sub("", "".join(self.pending))
        self.pending.clear()
        parent = self.stack[-1]
        if len(parent):
            parent[-1].tail = (parent[-1].tail or "") + text
        else:
            parent.text = (parent.text or "") + text

    def handle_data(self, data: str) -> None:
        self.pending.append(data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        # text goes on flowing into the same place past a tag left out (no flush: a run of them
        # must not copy the text gathered so far again and again)
        attrib = {name: _NOT_XML_TEXT.sub("", value or "") for name, value in attrs if _XML_NAME.fullmatch(name)}
        if tag == "html" and len(self.stack) == 1 and not len(self.root):
            self.root.attrib.update(attrib)
            return
        full = len(self.stack) > FALLBACK_DEPTH
        if not _XML_NAME.fullmatch(tag) or (full and tag in UNWRAP_TAGS and not attrib):
            self.left_out[tag] = self.left_out.get(tag, 0) + 1
            return
        self._flush()
        if full:  # it opens in the deepest open element that reads any child (not in a row, a list)
            at = len(self.stack) - 1
            while at > 1 and self.stack[at - 1].tag in PICKY_TAGS:
                at -= 1
            self._pop(at)
        el = lxml.html.Element(tag, attrib)
        self.stack[-1].append(el)
        if tag not in VOID_TAGS:
            self.stack.append(el)
            self.open_tags[tag] = self.open_tags.get(tag, 0) + 1

    def handle_endtag(self, tag: str) -> None:
        if self.left_out.get(tag):
            self.left_out[tag] -= 1
        elif self.open_tags.get(tag):
            self._flush()
            at = len(self.stack) - 1
            while self.stack[at].tag != tag:
                at -= 1
            self._pop(at)

    def _pop(self, at: int) -> None:
        for el in self.stack[at:]:
            self.open_tags[el.tag] -= 1
        del self.stack[at:]

    def close(self) -> None:
        super().close()
        self._flush()


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
        self.root, self.warnings = page_tree(html)
        self.long_urls: dict[str, None] = {}  # href and src values over MAX_URL_CHARS, left out
        base = self.root.find(".//base[@href]")
        self.base_url = url
        if base is not None and self._short(base.get("href")):
            self.base_url = page_base(url, base.get("href"))
        self.components: list[Component] = []
        self.sections: list[tuple[int, str]] = []
        self.consumed: set[etree._Element] = set()
        self.title = ""
        # a label waiting for the next paragraph: a note's "Warning", a definition's term
        self.prefix: tuple[str, list[Link]] | None = None
        self.dl_depth = 0

    # -- helpers -------------------------------------------------------------------------------
    def section_path(self) -> list[str]:
        return [text for _, text in self.sections]

    def resolve(self, href: str | None) -> str | None:
        return resolve_href(self.base_url, href) if self._short(href) else None

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

    # -- emitting ------------------------------------------------------------------------------
    def emit(self, comp: Component) -> None:
        """Add a component; a waiting label starts it when it is a paragraph, else stands before it."""
        if self.prefix is not None:
            text, links = self.prefix
            self.prefix = None
            if comp.kind == "paragraph":
                comp = _prefixed(text, links, comp)
            else:
                self._append(Component("paragraph", text, self.section_path(), links))
        self._append(comp)

    def _append(self, comp: Component) -> None:
        if comp.kind == "paragraph" and len(comp.text) > MAX_COMPONENT_CHARS:
            self.components.extend(_split_paragraph(comp))
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
        elif (columns := _grid_columns(el)) is not None:
            self.grid_table(el, columns)
        elif "caption" in _classes(el) and (after := el.getnext()) is not None and _grid_columns(after):
            pass  # the grid table's caption, read with it
        elif (title := _admonition_title(el)) is not False:
            self.admonition(el, title)
        else:
            self.block(el)

    def heading(self, el: etree._Element) -> None:
        level = HEADINGS[el.tag]
        text = self.plain_text(el).strip()
        if not text:
            return
        self.flush_prefix()
        while self.sections and self.sections[-1][0] >= level:
            self.sections.pop()
        if len(text) > MAX_HEADING_CHARS:  # every component below repeats its section path: a
            # paragraph-long "heading" is read as the paragraph it is, and names its section cut
            self.emit(Component("paragraph", text, self.section_path(), []))
            text = text[:MAX_HEADING_CHARS].rsplit(" ", 1)[0] + " …"
        self.sections.append((level, text))

    def admonition(self, el: etree._Element, title: etree._Element | None) -> None:
        """A note, tip or warning: its label starts its first paragraph ("Warning: ..."); a heading
        inside it (DocBook's "Note" is an ``<h3>``) does not become the section of what follows."""
        saved = list(self.sections)
        body = el
        if "admonitionblock" in _classes(el):  # Asciidoctor: a table of an icon cell and a content cell
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
        self.sections = saved

    def code(self, el: etree._Element) -> None:
        """A ``<pre>``: one ``code`` component, its lines as they are (no gutter, no buttons)."""
        if el in self.consumed:
            return
        self.consumed.add(el)
        text, links = self.code_text(el)
        if len(text) <= MAX_COMPONENT_CHARS:
            if text:
                self.emit(Component("code", text, self.section_path(), links))
            return
        for start, end in _code_pieces(text, SPLIT_TARGET_CHARS):  # a whole module's source, say
            piece_links = [Link(lk.url, lk.anchor, lk.start - start, min(lk.end, end) - start, lk.row)
                           for lk in links if start <= lk.start < end]
            self.emit(Component("code", text[start:end], self.section_path(), piece_links))

    def code_text(self, el: etree._Element) -> tuple[str, list[Link]]:
        parts: list[str] = []
        links: list[Link] = []
        size = 0

        def add(text: str | None) -> None:
            nonlocal size
            if text:
                parts.append(text)
                size += len(text)

        def walk(node: etree._Element, top: bool = False) -> None:
            tag = _tag(node)
            if not top and (not tag or _code_skip(node, tag)):
                add(node.tail)
                return
            if tag == "br":
                add("\n")
            elif tag == "img" or tag == "video":
                pass
            else:
                start = size
                add(node.text)
                for child in node:
                    walk(child)
                url = self.resolve(node.get("href")) if tag == "a" else None
                if url:
                    links.append(Link(url, "", start, size))
            if not top:
                add(node.tail)

        walk(el, top=True)
        return _clean_code("".join(parts), links)

    def list_(self, el: etree._Element) -> None:
        """A list (nested lists flattened): its items, each a segment, in components of up to
        ``LIST_CHUNK_CHARS``; an item that holds blocks (code, a table, headings, paragraphs) is
        read as blocks where it stands."""
        items: list[tuple[str, list[Link]]] = []
        tables: list[etree._Element] = []
        size = 0

        def emit_items() -> None:
            nonlocal size
            if items:
                self.emit_items(items)
                items.clear()
                size = 0

        def walk(lst: etree._Element) -> None:
            nonlocal size
            for item in lst:
                tag = item.tag if isinstance(item.tag, str) else ""
                if tag in ("ul", "ol") and not _should_skip(item):  # a list straight in a list
                    walk(item)
                    continue
                if tag != "li" or _should_skip(item) or item in self.consumed:
                    continue
                if _has_structure(item):
                    emit_items()
                    self.block(item)
                    continue
                tb = TextBuilder()
                tb.add(item.text)
                sublists = []
                for child in item:
                    ctag = child.tag if isinstance(child.tag, str) else ""
                    if ctag in ("ul", "ol") and not _should_skip(child):
                        sublists.append(child)
                        tb.add(child.tail)
                    else:
                        self.inline(child, tb, nested_tables=tables)
                text, links = tb.finish()
                if text.strip():
                    if items and size + len(text) > LIST_CHUNK_CHARS:
                        emit_items()
                    items.append((text, links))
                    size += len(text) + 1
                for sub in sublists:
                    walk(sub)

        walk(el)
        emit_items()
        for table in tables:
            self.table(table)

    def emit_items(self, items: list[tuple[str, list[Link]]]) -> None:
        """One paragraph of items, each a segment (sentences are split item by item)."""
        parts, links, segments, pos = [], [], [], 0
        for text, item_links in items:
            segments.append((pos, pos + len(text)))
            links.extend(Link(lk.url, lk.anchor, lk.start + pos, lk.end + pos) for lk in item_links)
            parts.append(text)
            pos += len(text) + 1
        self.emit(Component("paragraph", "\n".join(parts), self.section_path(), links, segments=segments))

    def definitions(self, el: etree._Element) -> None:
        """A definition list: items of term(s) + description(s). A short list of plain descriptions
        is one component (an item a segment); otherwise each item is a component of its own, and
        an item whose description holds blocks (an API entry: paragraphs, code, parameters) puts
        its term in the section path of those blocks and before the first of them."""
        groups = _definition_groups(el)
        if not groups:
            return
        structured = [any(_has_structure(dd) for dd in dds) for _, dds in groups]
        tables: list[etree._Element] = []
        if not any(structured) and len(el.text_content()) <= SHORT_DL_CHARS:
            items = [item for dts, dds in groups if (item := self.definition_text(dts, dds, tables))[0].strip()]
            if items:
                self.emit_items(items)
        else:
            self.dl_depth += 1
            for (dts, dds), rich in zip(groups, structured, strict=True):
                if rich:
                    self.definition_blocks(dts, dds)
                else:
                    text, links = self.definition_text(dts, dds, tables)
                    if text.strip():
                        self.emit(Component("paragraph", text, self.section_path(), links))
            self.dl_depth -= 1
        for table in tables:
            self.table(table)

    def term_text(self, dts: list[etree._Element], tb: TextBuilder, tables: list[etree._Element]) -> None:
        for i, dt in enumerate(dts):
            if i and tb.length:
                tb.pending_space = False
                tb.add(", ")
            self.inline(dt, tb, with_tail=False, nested_tables=tables)

    def definition_text(self, dts: list[etree._Element], dds: list[etree._Element],
                        tables: list[etree._Element]) -> tuple[str, list[Link]]:
        """"term: description" (terms joined by commas; no colon after a term that ends in one)."""
        tb = TextBuilder()
        self.term_text(dts, tb, tables)
        term, term_links = tb.finish()
        tb = TextBuilder()
        for dd in dds:
            tb.space()
            self.inline(dd, tb, with_tail=False, nested_tables=tables)
        return _labelled(term, term_links, *tb.finish())

    def definition_blocks(self, dts: list[etree._Element], dds: list[etree._Element]) -> None:
        tb = TextBuilder()
        tables: list[etree._Element] = []
        self.term_text(dts, tb, tables)
        term, links = tb.finish()
        saved = list(self.sections)
        if term.strip():
            self.flush_prefix()
            if len(term) <= MAX_TERM_SECTION_CHARS:  # a "term" that is a paragraph is no section name
                self.sections.append((TERM_LEVEL + self.dl_depth, term.strip()))
            self.set_prefix(term, links)
        for dd in dds:
            self.block(dd)
        self.flush_prefix()
        self.sections = saved
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
    def grid_table(self, el: etree._Element, columns: int) -> None:
        """A table laid out as a CSS grid of ``<div>`` cells (Javadoc's summary tables): its
        ``table-header`` cells are the header, the others fill rows of ``columns`` cells."""
        self.consumed.add(el)
        cells = [c for c in el if _tag(c) == "div" and not _should_skip(c)]
        grid: list[list[tuple[str, list[Link], bool] | None]] = []
        in_head: list[bool] = []
        for at in range(0, len(cells), columns):
            row = []
            for cell in cells[at:at + columns]:
                tb = TextBuilder()
                self.inline(cell, tb, with_tail=False)
                text, links = tb.finish()
                row.append((text, links, "table-header" in _classes(cell)))
            row.extend([None] * (columns - len(row)))
            grid.append(row)
            in_head.append(all(c is not None and c[2] for c in row))
        caption_el = el.getprevious()
        caption = None
        if caption_el is not None and "caption" in _classes(caption_el):
            caption = self.plain_text(caption_el).strip() or None
        if grid:
            self._data_table(grid, in_head, caption)

    def table(self, el: etree._Element) -> None:
        if el in self.consumed:
            return
        self.consumed.add(el)
        if _classes(el) & CODE_TABLE_CLASSES:  # a code block beside its line numbers
            pres = [p for p in el.iter("pre") if not any(
                _classes(a) & LINE_NUMBER_CLASSES for a in p.iterancestors() if a is not el)]
            if pres:
                self.code(pres[-1])
                return
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
            found = root.xpath(xpath)
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
        if not self.components and _table_of_contents(content):
            page.warnings.append("navigation_only: the page holds only a table of contents (a chapter's or a "
                                 "part's index page of a documentation site); nothing to index")
        return page


def _table_of_contents(content: etree._Element) -> bool:
    """Whether ``content`` holds a table of contents with links (DocBook's ``div.toc``, Sphinx's
    ``toctree-wrapper``, ``nav#toc``...): a page that is nothing else is a generator's index of
    its chapter, not a page that failed to parse."""
    for el in content.iter("div", "nav", "dl", "ul", "section"):
        words = _class_words(_classes(el)) | {(el.get("id") or "").lower()}
        if words & {"toc", "toc2", "toctree", "tableofcontents", "contents"} and el.find(".//a[@href]") is not None:
            return True
    return False


def _definition_groups(dl: etree._Element) -> list[tuple[list[etree._Element], list[etree._Element]]]:
    """(terms, descriptions) of a ``<dl>``, in order; ``<div>`` wrappers around pairs are looked into."""
    groups: list[tuple[list[etree._Element], list[etree._Element]]] = []

    def walk(parent: etree._Element) -> None:
        for child in parent:
            tag = _tag(child)
            if not tag or _should_skip(child):
                continue
            if tag == "div":
                walk(child)
            elif tag == "dt":
                if not groups or groups[-1][1]:
                    groups.append(([], []))
                groups[-1][0].append(child)
            elif tag == "dd":
                if not groups:
                    groups.append(([], []))
                groups[-1][1].append(child)

    walk(dl)
    return groups


def _labelled(label: str, label_links: list[Link], text: str, links: list[Link]) -> tuple[str, list[Link]]:
    """``label: text`` (no colon after a label ending in punctuation), links moved along."""
    label, text = label.strip(), text.strip()
    if not label or not text:
        return (label or text), (label_links if label else links)
    sep = " " if label[-1] in ":.?!;,—–-" else ": "
    shift = len(label) + len(sep)
    moved = [Link(lk.url, lk.anchor, lk.start + shift if lk.start >= 0 else -1,
                  lk.end + shift if lk.end >= 0 else -1, lk.row) for lk in links]
    return label + sep + text, [*label_links, *moved]


def _prefixed(label: str, label_links: list[Link], comp: Component) -> Component:
    """A paragraph with a label before its text (its first segment grows to hold the label)."""
    text, links = _labelled(label, label_links, comp.text, comp.links)
    shift = len(text) - len(comp.text)
    segments = None
    if comp.segments:
        segments = [(s + shift, e + shift) for s, e in comp.segments]
        segments[0] = (0, segments[0][1])
    return Component("paragraph", text, comp.section_path, links, segments=segments)


def _split_paragraph(comp: Component) -> list[Component]:
    """A paragraph over ``MAX_COMPONENT_CHARS`` as pieces of about ``SPLIT_TARGET_CHARS``, cut after
    a sentence's end where one is near (else at a space); links and item segments go with their piece."""
    text = comp.text
    cuts = [0]
    while len(text) - cuts[-1] > MAX_COMPONENT_CHARS:
        start = cuts[-1]
        window = text[start:start + SPLIT_TARGET_CHARS]
        ends = [m.end() for m in _SENTENCE_END.finditer(window) if m.end() >= SPLIT_TARGET_CHARS // 4]
        cut = ends[-1] if ends else (window.rfind(" ") + 1 or len(window))
        if comp.segments:  # prefer an item's end
            items = [e + 1 for s, e in comp.segments if start + SPLIT_TARGET_CHARS // 4 <= e < start + len(window)]
            if items:
                cut = items[-1] - start
        cuts.append(start + cut)
    cuts.append(len(text))
    out = []
    for start, end in zip(cuts, cuts[1:], strict=False):
        piece = text[start:end]
        lead = len(piece) - len(piece.lstrip())
        piece = piece.strip()
        if not piece:
            continue
        at = start + lead
        links = [Link(lk.url, lk.anchor, lk.start - at, min(lk.end, at + len(piece)) - at, lk.row)
                 for lk in comp.links if lk.start >= 0 and at <= lk.start < at + len(piece)]
        segments = None
        if comp.segments:
            segments = [(max(s, at) - at, min(e, at + len(piece)) - at) for s, e in comp.segments
                        if s < at + len(piece) and e > at]
        out.append(Component("paragraph", piece, comp.section_path, links, segments=segments or None))
    return out


def _clean_code(raw: str, links: list[Link]) -> tuple[str, list[Link]]:
    """A code block's text with its lines kept: no zero-width characters, no trailing blanks, no
    blank lines before or after; link offsets follow."""
    raw = raw.replace("\r\n", "\n").replace("\r", "\n").replace("\u00a0", " ")
    old_lines = raw.split("\n")
    new_lines = [line.translate(_INVISIBLE).rstrip() for line in old_lines]
    joined = "\n".join(new_lines)
    text = joined.strip("\n")
    lead = len(joined) - len(joined.lstrip("\n"))
    old_starts, new_starts = _line_starts(old_lines), _line_starts(new_lines)

    def move(offset: int) -> int:
        i = max(0, bisect.bisect_right(old_starts, offset) - 1)
        column = min(offset - old_starts[i], len(new_lines[i]))
        return min(max(new_starts[i] + column - lead, 0), len(text))

    moved: list[Link] = []
    for lk in links:
        start, end = move(lk.start), move(lk.end)
        if end > start:
            moved.append(Link(lk.url, text[start:end].strip() or lk.anchor, start, end, lk.row))
    return text, moved


def _code_pieces(text: str, size: int) -> list[tuple[int, int]]:
    """Spans of whole lines of a long code block, cut at a blank line where one lies between
    ``size / 4`` and ``size`` characters on, else at the last line end before ``size`` (a line
    longer than that is a piece of its own); blank lines at a piece's ends left out."""
    pieces: list[tuple[int, int]] = []
    start = 0
    while start < len(text):
        if len(text) - start <= size:
            end = len(text)
        else:
            window = text[start:start + size]
            blank = window.rfind("\n\n")
            end = start + (blank if blank >= size // 4 else window.rfind("\n"))
            if end <= start:  # one line longer than size
                nl = text.find("\n", start + 1)
                end = len(text) if nl < 0 else nl
        piece = text[start:end]
        lead = len(piece) - len(piece.lstrip("\n"))
        if piece.strip():
            pieces.append((start + lead, start + len(piece.rstrip())))
        start = end + 1
    return pieces


def _line_starts(lines: list[str]) -> list[int]:
    starts, at = [], 0
    for line in lines:
        starts.append(at)
        at += len(line) + 1
    return starts


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
