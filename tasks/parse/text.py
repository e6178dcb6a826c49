"""Plain text (``.txt``, and reStructuredText read as text) into a ``ParsedPage``.

Reads a text file's bytes and its URL; writes paragraphs split at blank lines. A paragraph of
wrapped prose is one line of text; one whose lines stand on their own (a log, an address, a list,
a table drawn in characters) keeps its line breaks, each line a segment (sentences are split line
by line). A block longer than ``MAX_COMPONENT_CHARS`` (a log with no blank line) is cut at line
ends into pieces of about ``SPLIT_TARGET_CHARS``, a single longer line at spaces, so nothing is
unbounded. An indented block after a paragraph that ends in "::" is code (reStructuredText's
literal block). A single line underlined (setext / reStructuredText: ``====``, ``----``, ``~~~~``...,
optionally overlined too) is a heading: its adornment's level is the order in which that
adornment first appeared, as reStructuredText has it. Title: the first line when it is short,
else the file name. Raises ``ParseError`` (``unparsable_text``) for bytes that are no text.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from laminae.tasks.config import OcrConfig, ParseConfig
from laminae.tasks.parse.document import Component, ParsedPage, ParseError, decode_text
from laminae.tasks.parse.html.text import MAX_COMPONENT_CHARS, SPLIT_TARGET_CHARS

UNPARSABLE = "unparsable_text"
MAX_HEADING_CHARS = 600  # a longer "underlined line" is a paragraph
MAX_TITLE_CHARS = 120  # a longer first line is prose, not a title
_ADORNMENT = re.compile(r"""^([=\-~^"'`#*+_:.])\1{2,}\s*$""")
_RECORD_LINE = re.compile(r"^\s*[\d\[<]")
_LIST_LINE = re.compile(r"^\s*(?:[-*+•‣◦]|\d{1,3}[.)]|[a-zA-Z][.)])\s+\S")


def file_name(url: str) -> str:
    """The last part of a URL's path (a document with no title is named by it)."""
    path = urlsplit(url).path.rstrip("/")
    return unquote(path.rsplit("/", 1)[-1]) or url


def parse_text(body: bytes, url: str, cfg: ParseConfig, ocr: OcrConfig, charset: str | None) -> ParsedPage:
    """One text file's page; an empty file has no components (the page stage records ``no_content``)."""
    text, warning = decode_text(body, charset)
    if "\x00" in text or text.count("\ufffd") > max(50, len(text) // 10):
        raise ParseError("binary content where plain text was expected", UNPARSABLE)
    reader = TextReader(cfg)
    reader.read(text.replace("\r\n", "\n").replace("\r", "\n"))
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    title = first if first and len(first) <= MAX_TITLE_CHARS and not _ADORNMENT.match(first) else ""
    if not title and reader.headings:
        title = reader.headings[0]
    page = ParsedPage(url, title or file_name(url), None, None, reader.components, kind="text")
    if warning:
        page.warnings.append(warning)
    return page


class TextReader:
    """Lines to paragraphs and headings; ``components`` once ``read`` returns."""

    def __init__(self, cfg: ParseConfig) -> None:
        self.cfg = cfg
        self.components: list[Component] = []
        self.sections: list[tuple[int, str]] = []
        self.styles: list[tuple[str, bool]] = []  # adornments (character, overlined) in order met
        self.headings: list[str] = []
        self.bare: tuple[int, str] | None = None
        self.literal = False  # the last paragraph ended in "::": an indented block next is code

    def read(self, text: str) -> None:
        lines = text.split("\n")
        block: list[str] = []
        i = 0
        while i < len(lines):
            heading = self.heading_at(lines, i, not block)
            if heading is not None:
                level, title, used = heading
                self.heading(level, title)
                i += used
                continue
            line = lines[i]
            if line.strip():
                block.append(line)
            else:
                self.paragraphs(block)
                block = []
            i += 1
        self.paragraphs(block)
        if self.bare is not None:
            self.emit(Component("paragraph", self.bare[1], self.path()[:-1]))

    def heading_at(self, lines: list[str], i: int, block_start: bool) -> tuple[int, str, int] | None:
        """(level, text, lines used) when ``lines[i]`` starts a heading: a lone line (after a blank
        one) under an adornment at least as long as its text or 3 characters, or between two alike."""
        if not block_start:
            return None
        over = _ADORNMENT.match(lines[i])
        if over and i + 2 < len(lines):
            title, under = lines[i + 1].strip(), _ADORNMENT.match(lines[i + 2])
            if title and under and under.group(1) == over.group(1) and not _ADORNMENT.match(lines[i + 1]):
                return self.level(over.group(1), True), title, 3
        if i + 1 >= len(lines) or not lines[i].strip() or over:
            return None
        under = _ADORNMENT.match(lines[i + 1])
        title = lines[i].strip()
        if under is None or len(title) > MAX_HEADING_CHARS:
            return None
        if len(lines[i + 1].strip()) < min(len(title), 3):
            return None
        return self.level(under.group(1), False), title, 2

    def level(self, char: str, overlined: bool) -> int:
        style = (char, overlined)
        if style not in self.styles:
            self.styles.append(style)
        return self.styles.index(style) + 1

    def path(self) -> list[str]:
        return [text for _, text in self.sections]

    def heading(self, level: int, text: str) -> None:
        self.literal = False
        if self.bare is not None and level <= self.bare[0]:
            self.emit(Component("paragraph", self.bare[1], self.path()[:-1]))
        while self.sections and self.sections[-1][0] >= level:
            self.sections.pop()
        self.sections.append((level, text))
        self.headings.append(text)
        self.bare = (level, text)

    def emit(self, comp: Component) -> None:
        self.bare = None
        self.components.append(comp)

    def paragraphs(self, block: list[str]) -> None:
        """A blank-line-separated block as one paragraph, or pieces of it when it is long; an
        indented block after a paragraph ending in "::" is code (reStructuredText's literal block)."""
        if not block:
            return
        if self.literal and all(line[:1] in (" ", "\t") for line in block):
            self.code(block)
            return
        self.literal = False
        size = sum(len(line) + 1 for line in block)
        if size <= MAX_COMPONENT_CHARS:
            self.paragraph(block)
            return
        piece: list[str] = []
        held = 0
        for line in block:
            for part in _line_parts(line):
                if piece and held + len(part) > SPLIT_TARGET_CHARS:
                    self.paragraph(piece)
                    piece, held = [], 0
                piece.append(part)
                held += len(part) + 1
        self.paragraph(piece)

    def code(self, lines: list[str]) -> None:
        """Literal lines, dedented; one code component through blank lines while it stays short."""
        indent = min(len(line) - len(line.lstrip()) for line in lines)
        text = "\n".join(line[indent:].rstrip() for line in lines)
        last = self.components[-1] if self.components else None
        if last is not None and last.kind == "code" and len(last.text) + len(text) + 2 <= MAX_COMPONENT_CHARS:
            last.text += "\n\n" + text
            return
        piece: list[str] = []
        held = 0
        for line in text.split("\n"):  # a long one in pieces of whole lines, as any block
            for part in _line_parts(line):
                if piece and held + len(part) > SPLIT_TARGET_CHARS:
                    self.emit(Component("code", "\n".join(piece), self.path()))
                    piece, held = [], 0
                piece.append(part)
                held += len(part) + 1
        if "".join(piece).strip():
            self.emit(Component("code", "\n".join(piece), self.path()))

    def paragraph(self, lines: list[str]) -> None:
        if _wrapped_prose(lines):
            text = " ".join(" ".join(line.split()) for line in lines)
            segments = None
        else:
            kept = [line.rstrip() for line in lines]
            indent = min(len(line) - len(line.lstrip()) for line in kept)
            kept = [line[indent:] for line in kept]
            text = "\n".join(kept)
            segments, pos = [], 0
            for line in kept:
                segments.append((pos, pos + len(line)))
                pos += len(line) + 1
        if len(text.strip()) >= max(self.cfg.min_paragraph_chars, 1):
            self.emit(Component("paragraph", text, self.path(), segments=segments))
        self.literal = text.rstrip().endswith("::")


def _wrapped_prose(lines: list[str]) -> bool:
    """Whether a block's lines are one text wrapped at a width (joined by spaces) rather than lines
    that stand on their own: most lines but the last reach near the longest, no two are list items,
    most do not start like a log's records."""
    if len(lines) < 2:
        return True
    if sum(1 for line in lines if _LIST_LINE.match(line)) >= 2:
        return False
    if sum(1 for line in lines if _RECORD_LINE.match(line)) >= 0.6 * len(lines):
        return False  # a log's lines, each a record that starts with a time stamp or a [tag]
    widths = [len(line.rstrip()) for line in lines]
    longest = max(widths)
    full = sum(1 for w in widths[:-1] if w >= 0.7 * longest)
    return longest >= 40 and full >= 0.75 * (len(lines) - 1)


def _line_parts(line: str) -> list[str]:
    """A line as pieces of at most ``SPLIT_TARGET_CHARS`` (cut at spaces where there are some)."""
    parts = []
    while len(line) > SPLIT_TARGET_CHARS:
        cut = line.rfind(" ", SPLIT_TARGET_CHARS // 2, SPLIT_TARGET_CHARS)
        cut = cut if cut > 0 else SPLIT_TARGET_CHARS
        parts.append(line[:cut])
        line = line[cut:].lstrip()
    if line or not parts:
        parts.append(line)
    return parts
