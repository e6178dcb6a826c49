"""A page's bytes as text and its text as an element tree no deeper than ``MAX_DEPTH``.

Reads page bytes (any encoding) and the decoded HTML; writes nothing but warning strings
("reason: message") for what was read other than as written. Raises ``ParseError`` (reason
``unparsable_html``) when no tree can be built.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import lxml.html
from lxml import etree

from laminae.tasks.parse.document import ParseError, decode_bytes
from laminae.tasks.parse.html.chrome import (
    BLOCK_TAGS,
    HEADINGS,
    LINE_NUMBER_CLASSES,
    admonition_title,
    classes_of,
    grid_columns,
    should_skip,
)

UNPARSABLE = "unparsable_html"  # the error row's reason for a page no tree can be built from


def decode_html(body: bytes, charset: str | None = None) -> str:
    """A page's text: BOM, declared charset (HTTP, then ``<meta>``), then detection
    (``decode_bytes``, which also says when bytes had to be replaced)."""
    return decode_bytes(body, charset, html=True)[0]


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
        raise ParseError(f"lxml could not build a tree: {exc}", UNPARSABLE) from None
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
            if node.tag not in PICKY_TAGS and grid_columns(node) is None:
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
        return not should_skip(el) and not (classes_of(el) & LINE_NUMBER_CLASSES)
    if tag not in WRAPPER_TAGS or len(el) != 1 or (el.text or "").strip() or el.get("id") or el.get("role"):
        return False
    child = el[0]
    if not isinstance(child.tag, str) or (child.tag not in BLOCK_TAGS and child.tag not in HEADINGS) or (
            child.tail or "").strip():
        return False
    return not (should_skip(el) or _WRAPPER_ROLES.search(el.get("class") or "") or grid_columns(el) is not None
                or admonition_title(el) is not False)


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
