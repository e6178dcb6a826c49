"""Inline text as it reaches a component: whitespace collapsed, link offsets kept, labels put
before a paragraph and paragraphs over ``MAX_COMPONENT_CHARS`` cut at sentence ends.

Reads text pieces and links; writes ``Component`` paragraphs (pure functions and a builder).
"""

from __future__ import annotations

import re

from laminae.tasks.parse.document import Component, Link

INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))

_SENTENCE_END = re.compile(r"[.!?…][\"')\]»”’]*\s+")

MAX_COMPONENT_CHARS = 4000  # a longer paragraph is cut at sentence ends (tables and code are not cut)
SPLIT_TARGET_CHARS = 2000  # the size such pieces aim at


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
        text = text.translate(INVISIBLE)
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


def labelled(label: str, label_links: list[Link], text: str, links: list[Link]) -> tuple[str, list[Link]]:
    """``label: text`` (no colon after a label ending in punctuation), links moved along."""
    label, text = label.strip(), text.strip()
    if not label or not text:
        return (label or text), (label_links if label else links)
    sep = " " if label[-1] in ":.?!;,—–-" else ": "
    shift = len(label) + len(sep)
    moved = [Link(lk.url, lk.anchor, lk.start + shift if lk.start >= 0 else -1,
                  lk.end + shift if lk.end >= 0 else -1, lk.row) for lk in links]
    return label + sep + text, [*label_links, *moved]


def prefixed(label: str, label_links: list[Link], comp: Component) -> Component:
    """A paragraph with a label before its text (its first segment grows to hold the label)."""
    text, links = labelled(label, label_links, comp.text, comp.links)
    shift = len(text) - len(comp.text)
    segments = None
    if comp.segments:
        segments = [(s + shift, e + shift) for s, e in comp.segments]
        segments[0] = (0, segments[0][1])
    return Component("paragraph", text, comp.section_path, links, segments=segments)


def split_paragraph(comp: Component) -> list[Component]:
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
