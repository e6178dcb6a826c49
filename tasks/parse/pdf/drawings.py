"""Figures drawn with vector paths (charts, diagrams): found, rendered as pictures, their labels kept
with them.

Reads a page's vector boxes (``laminae.tasks.parse.pdf.page``), its text, table and image blocks,
and the layout model's picture regions when it ran; returns image ``Block``s (the drawing's area
rendered as a PNG) and removes the drawing's labels from the text blocks. Writes nothing. A drawing
is a group of touching paths (at least three, one of them an area, not only thin lines: a table's
ruling or a signature line is not a drawing; a box behind half the page is a background, not part
of one) at least 40 points on each side, outside every table,
smaller than most of the page, with no paragraph inside it (a shaded box around text is a frame,
not a figure). Short text in and just around it (tick marks' numbers, axis titles, callouts) is its
labels: they join the figure's ``alt`` and leave the paragraphs.
"""

from __future__ import annotations

import re
from collections import Counter

from laminae.schemas.pictures import MAX_PIXELS
from laminae.tasks.parse.document import Component
from laminae.tasks.parse.pdf.blocks import Block
from laminae.tasks.parse.pdf.figures import MAX_LABEL, groups

MIN_SIDE = 40.0  # points: a drawing at least this wide and high
LABEL_REACH = 24.0  # points around a drawing where its labels may sit
SCALE = 2.0  # pixels a point when rendered (144 dpi)
NUMBERED_CAPTION = re.compile(r"^(figure|fig\.|table)\s*\d", re.IGNORECASE)  # a caption, not a label
MAX_PATHS = 3000  # a page with more vector paths is one drawing, not grouped path by path


def _overlaps(a: tuple, b: tuple) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _union(boxes: list[tuple]) -> tuple[float, float, float, float]:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def _centre_in(inner: tuple, outer: tuple) -> bool:
    cx, cy = (inner[0] + inner[2]) / 2, (inner[1] + inner[3]) / 2
    return outer[0] <= cx <= outer[2] and outer[1] <= cy <= outer[3]


def _body_size(blocks: list[Block]) -> float:
    sizes: Counter[float] = Counter()
    for b in blocks:
        sizes[round(b.size * 2) / 2] += len(b.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def drawings(page, number: int, rules: list[tuple], blocks: list[Block], tables: list[Block], images: list[Block],
             warnings: list[str], regions: list[tuple] = ()) -> list[Block]:
    """The page's vector drawings as image blocks; their labels leave ``blocks``."""
    page_area = page.rect.width * page.rect.height
    paths = [r[:4] for r in rules if (r[2] - r[0]) * (r[3] - r[1]) <= 0.5 * page_area]  # not a page background
    areas = []
    if len(paths) > MAX_PATHS:  # a map or a plan: its paths are one drawing (and grouping them would be slow)
        areas.append(_union(paths))
    for group in groups(paths, slack=4.0) if len(paths) <= MAX_PATHS else []:
        if len(group) < 3 or not any(min(paths[i][2] - paths[i][0], paths[i][3] - paths[i][1]) > 3 for i in group):
            continue
        areas.append(_union([paths[i] for i in group]))
    areas += [tuple(r) for r in regions if not any(_overlaps(tuple(r), im.bbox) for im in images)]
    body = _body_size(blocks)
    out: list[Block] = []
    for box in sorted(areas, key=lambda b: (b[2] - b[0]) * (b[3] - b[1]), reverse=True):
        w, h = box[2] - box[0], box[3] - box[1]
        if w < MIN_SIDE or h < MIN_SIDE or w * h > 0.7 * page_area:
            continue
        if any(_overlaps(box, t.bbox) for t in tables) or any(_overlaps(box, f.bbox) for f in out + images):
            continue
        inside = [b for b in blocks if b.kind == "text" and _centre_in(b.bbox, box)]
        if any(len(b.text) > MAX_LABEL for b in inside):
            continue  # a frame around prose
        reach = (box[0] - LABEL_REACH, box[1] - LABEL_REACH, box[2] + LABEL_REACH, box[3] + LABEL_REACH)
        labels = [b for b in blocks if b.kind == "text" and len(b.text) <= MAX_LABEL and b.size <= body + 0.5
                  and _centre_in(b.bbox, reach) and not NUMBERED_CAPTION.match(b.text)]
        figure = _render(page, number, _union([box, *(b.bbox for b in labels)]), warnings)
        if figure is None:
            continue
        if labels:
            labels.sort(key=lambda b: (round(b.bbox[1]), b.bbox[0]))
            figure.component.alt = ", ".join(b.text for b in labels)
            taken = {id(b) for b in labels}
            blocks[:] = [b for b in blocks if id(b) not in taken]
        out.append(figure)
    return out


def _render(page, number: int, box: tuple, warnings: list[str]) -> Block | None:
    import pymupdf

    rect = pymupdf.Rect(box) & page.rect
    if rect.is_empty:
        return None
    scale = min(SCALE, (MAX_PIXELS / max(rect.width * rect.height, 1.0)) ** 0.5)
    try:
        pix = page.get_pixmap(matrix=pymupdf.Matrix(scale, scale), clip=rect, alpha=False)
    except Exception as exc:  # a broken drawing must not lose the rest of the page
        warnings.append(f"image_unreadable: page {number}: {type(exc).__name__}: {exc}")
        return None
    out = Block(number, tuple(rect), kind="image")
    out.component = Component(kind="image", text="", section_path=[], width=pix.width, height=pix.height,
                              page=number, bbox=list(rect), image_data=pix.tobytes("png"), image_mime="image/png")
    return out
