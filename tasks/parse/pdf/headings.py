"""Headings of a PDF: which text blocks are section names, and their levels.

Reads the text ``Block``s of every page and the PDF outline; sets ``Block.heading``. Writes nothing.
The outline's titles win when most of them name text on the pages; else a block is a heading by
its type: larger than the body text, bold at body size, a "Medium"/"Semibold" weight at least a
point larger than the body, a single italic line at body size that reads like a title (short,
capitalised, no full stop), or a single line numbered like a subsection ("2.1 Intake screens", not a
table of contents' line that ends in its page number). The layout model's section-header and title regions (when it ran) make
their short blocks headings too. A block with check boxes or other dingbats is never a heading.
A line ending in a colon is a label ("Returns:"), not a heading. Levels follow size, then weight
(bold over medium over italic).
"""

from __future__ import annotations

import re
from collections import Counter

from laminae.tasks.parse.pdf.blocks import Block

HEADING_REGIONS = {"section-header", "title"}
NUMBERED = re.compile(r"^\d{1,2}(\.\d{1,2})+\.?\s+[A-Z]")  # "2.1 Intake screens", "3.2.1 Seals"
TOC_LINE = re.compile(r"(\.{3,}|\s)\d+$")  # "2.1 Intake screens ..... 14": a table of contents


def _strength(b: Block) -> int:
    return 3 if b.weight == 2 else 2 if b.weight == 1 else 1 if b.italic else 0


def _candidate(b: Block, body: float) -> bool:
    text = b.text
    if b.kind != "text" or b.symbols or b.garbled or len(text) > 200 or len(b.lines) > 3:
        return False
    if text.endswith((".", ",", ";", ":")) or sum(c.isalpha() for c in text) < 2:  # "Returns:" is a label
        return False
    if b.size >= body * 1.2:
        return True
    if b.region in HEADING_REGIONS and len(text) <= 120 and b.size >= body - 0.6:
        return True
    if b.weight == 2 and b.size >= body - 0.1 and len(text) <= 120:
        return True
    if b.weight == 1 and b.size >= body + 0.9 and len(text) <= 120:
        return True
    if NUMBERED.match(text) and len(b.lines) == 1 and len(text) <= 80 and not TOC_LINE.search(text):
        return True
    titled = text[:1].isupper() or text[:1].isdigit()
    return b.italic and len(b.lines) == 1 and b.size >= body - 0.1 and len(text.split()) <= 10 and titled


def assign_headings(pages: list[list[Block]], toc: list) -> None:
    """Mark heading blocks and their levels: the outline's levels, else type size and weight."""
    sizes: Counter[float] = Counter()
    for blocks in pages:
        for b in blocks:
            sizes[round(b.size * 2) / 2] += len(b.text)
    if not sizes:
        return
    body = sizes.most_common(1)[0][0]
    outline = {" ".join(title.lower().split()): level for level, title, *_ in toc if title.strip()}
    texts = {" ".join(b.text.lower().split()) for blocks in pages for b in blocks}
    if outline and sum(1 for key in outline if key in texts) < len(outline) / 2:
        outline = {}  # bookmarks that do not name the headings on the page: use the fonts

    def key(b: Block) -> tuple[int, int]:
        return round(b.size), _strength(b)

    levels = sorted({key(b) for blocks in pages for b in blocks if _candidate(b, body)}, reverse=True)
    for blocks in pages:
        for b in blocks:
            name = " ".join(b.text.lower().split())
            if name in outline and len(b.text) <= 200 and not b.symbols:
                b.heading = outline[name]
            elif not outline and _candidate(b, body):
                b.heading = min(levels.index(key(b)) + 1, 6)
