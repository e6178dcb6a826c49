"""Code blocks: a ``<pre>`` becomes one ``code`` component (longer ones cut at blank lines), its
lines kept as they are, line-number gutters and copy buttons left out.

Reads ``<pre>`` elements; writes ``code`` components through the walker's ``emit``.
"""

from __future__ import annotations

import bisect

from lxml import etree

from laminae.tasks.parse.document import Component, Link
from laminae.tasks.parse.html.chrome import (
    DISPLAY_NONE,
    LINE_NUMBER_CLASSES,
    SKIP_CLASSES,
    SKIP_TAGS,
    class_names,
    tag_of,
)
from laminae.tasks.parse.html.text import INVISIBLE, MAX_COMPONENT_CHARS, SPLIT_TARGET_CHARS

CODE_TABLE_CLASSES = frozenset({"highlighttable", "lntable"})


def _code_skip(el: etree._Element, tag: str) -> bool:
    """Inside a ``<pre>``: buttons, hidden text and line-number gutters (no chrome lives there)."""
    if tag in SKIP_TAGS:
        return True
    attr = el.get("class")
    if attr and class_names(attr) & (LINE_NUMBER_CLASSES | SKIP_CLASSES):
        return True
    style = el.get("style")
    return bool(style and DISPLAY_NONE.search(style)) or el.get("hidden") is not None


class CodeReader:
    """Code blocks; mixed into ``HtmlParser`` (walker.py), whose state (consumed) and walk
    (emit, resolve, section_path) it uses."""

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
        for start, end in code_pieces(text, SPLIT_TARGET_CHARS):  # a whole module's source, say
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
            tag = tag_of(node)
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


def _clean_code(raw: str, links: list[Link]) -> tuple[str, list[Link]]:
    """A code block's text with its lines kept: no zero-width characters, no trailing blanks, no
    blank lines before or after; link offsets follow."""
    raw = raw.replace("\r\n", "\n").replace("\r", "\n").replace("\u00a0", " ")
    old_lines = raw.split("\n")
    new_lines = [line.translate(INVISIBLE).rstrip() for line in old_lines]
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


def code_pieces(text: str, size: int) -> list[tuple[int, int]]:
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
