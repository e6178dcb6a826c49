"""What the PDF modules share: a page's ``Block`` (a run of text, a table or an image with its
page and bbox), line joining, and a page's words by box.

Reads pymupdf pages (their words); writes nothing. Used by ``pdf`` (page layout) and the modules
it calls: ``page``, ``order``, ``headings``, ``figures``, ``drawings``,
``tables`` and ``scans`` (pages read by OCR).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from laminae.tasks.parse.document import Component, Link


@dataclass
class Block:
    """A run of text lines with one style, or a table or an image, on one page."""

    page: int
    bbox: tuple[float, float, float, float]
    kind: str = "text"  # text | table | image
    lines: list[str] = field(default_factory=list)
    size: float = 0.0
    bold: bool = False
    weight: int = 0  # 0 regular, 1 medium / semibold, 2 bold
    italic: bool = False
    symbols: bool = False  # dingbats or private-use glyphs (check boxes): never a heading
    garbled: bool = False  # characters without a Unicode map: read by OCR or dropped
    gap_before: bool = False  # a paragraph break inside a pymupdf block
    heading: int = 0  # heading level, 0 for body text
    text: str = ""
    links: list[Link] = field(default_factory=list)
    component: Component | None = None
    offset: int = 0  # where this block's text starts in its component's text
    row_bounds: list[tuple[float, float]] = field(default_factory=list)  # tables: y-range of each data row
    region: str = ""  # the layout model's class of the region it lies in, when the model ran

    def text_so_far(self) -> str:
        return " ".join(self.lines)


def join_lines(lines: list[str]) -> str:
    out = ""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        if out.endswith("\xad"):
            out = out[:-1] + line
        elif len(out) > 1 and out[-1] == "-" and out[-2].isalpha() and line[:1].islower():
            out = out[:-1] + line  # a word hyphenated at the line end
        else:
            out = f"{out} {line}" if out else line
    return " ".join(out.split())


def page_list(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers[:10])) + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")


def within(inner, outer, slack: float = 2.0) -> bool:
    cx, cy = (inner[0] + inner[2]) / 2, (inner[1] + inner[3]) / 2
    return outer[0] - slack <= cx <= outer[2] + slack and outer[1] - slack <= cy <= outer[3] + slack


class Words:
    """A page's words, extracted on first use (only pages with tables or links need them)."""

    def __init__(self, page, textpage) -> None:
        self.page, self.textpage, self.words = page, textpage, None

    def __call__(self) -> list:
        if self.words is None:
            self.words = self.page.get_text("words", textpage=self.textpage)
        return self.words


def words_in(words: list, box) -> list:
    """The words whose centre lies in ``box``, in reading order (block, line, word number)."""
    x0, y0, x1, y1 = box
    inside = [w for w in words if x0 <= (w[0] + w[2]) / 2 <= x1 and y0 <= (w[1] + w[3]) / 2 <= y1]
    inside.sort(key=lambda w: (w[5], w[6], w[7]))
    return inside


def cell_text(words: list, cell) -> str:
    return " ".join(w[4] for w in words_in(words, cell))
