"""Figures of a PDF page: image tiles merged into one figure, callout labels kept with their figure,
and each figure or table given its nearest caption.

Reads pymupdf image blocks and the page (to render a figure drawn as several images); returns
image ``Block``s and changes the page's text blocks in place. Writes nothing. A drawing stored as
abutting or overlapping image tiles (a 4x8 grid, a picture with its mask) is one figure: the area
they cover is rendered as one PNG, at the tiles' own resolution within ``MAX_PIXELS``. Short text
inside a figure's box (the labels of a diagram) becomes the figure's ``alt`` instead of loose
paragraphs. Captions are matched to figures and tables nearest first, so that two figures side by
side each take their own.
"""

from __future__ import annotations

import re

from laminae.schemas.pictures import MAX_PIXELS
from laminae.tasks.config import ParseConfig
from laminae.tasks.parse.document import Component
from laminae.tasks.parse.pdf.blocks import Block
from laminae.tasks.parse.pdf.page import image_block

TOUCH = 1.5  # points between two image tiles that still abut
CAPTION_REACH = 60.0  # points between a figure or table and its caption, at most
MAX_LABEL = 60  # characters of a callout label


def _touch(a: tuple, b: tuple, slack: float = TOUCH) -> bool:
    return a[0] <= b[2] + slack and b[0] <= a[2] + slack and a[1] <= b[3] + slack and b[1] <= a[3] + slack


def groups(boxes: list[tuple], slack: float = TOUCH) -> list[list[int]]:
    """Indices of boxes that touch (within ``slack`` points), transitively (union-find)."""
    parent = list(range(len(boxes)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    order = sorted(range(len(boxes)), key=lambda i: boxes[i][0])
    for n, i in enumerate(order):
        for j in order[n + 1:]:
            if boxes[j][0] > boxes[i][2] + slack:
                break
            if _touch(boxes[i], boxes[j], slack):
                parent[find(i)] = find(j)
    out: dict[int, list[int]] = {}
    for i in range(len(boxes)):
        out.setdefault(find(i), []).append(i)
    return list(out.values())


def figures(page, number: int, raw: list[dict], cfg: ParseConfig, warnings: list[str]) -> list[Block]:
    """The page's figures: single images as they are stored, tiles merged and rendered as one."""
    boxes = [tuple(b["bbox"]) for b in raw]
    out: list[Block] = []
    for group in groups(boxes):
        if len(group) == 1:
            image = image_block(raw[group[0]], number, cfg, warnings)
            if image is not None:
                out.append(image)
            continue
        box = (min(boxes[i][0] for i in group), min(boxes[i][1] for i in group),
               max(boxes[i][2] for i in group), max(boxes[i][3] for i in group))
        if min(box[2] - box[0], box[3] - box[1]) < cfg.min_image_side:
            continue
        out.append(_render(page, number, box, [raw[i] for i in group], warnings))
    return [b for b in out if b is not None]


def _render(page, number: int, box: tuple, tiles: list[dict], warnings: list[str]) -> Block | None:
    """The area of several image tiles rendered as one PNG."""
    import pymupdf

    width, height = box[2] - box[0], box[3] - box[1]
    scale = max(t["width"] / max(t["bbox"][2] - t["bbox"][0], 1e-3) for t in tiles)  # pixels a point
    scale = min(max(scale, 1.0), 300 / 72, (MAX_PIXELS / max(width * height, 1.0)) ** 0.5)
    try:
        pix = page.get_pixmap(matrix=pymupdf.Matrix(scale, scale), clip=pymupdf.Rect(box), alpha=False)
        data = pix.tobytes("png")
    except Exception as exc:  # a broken image stream must not lose the rest of the page
        warnings.append(f"image_unreadable: page {number}: {type(exc).__name__}: {exc}")
        return None
    out = Block(number, box, kind="image")
    out.component = Component(kind="image", text="", section_path=[], width=pix.width, height=pix.height,
                              page=number, bbox=list(box), image_data=data, image_mime="image/png")
    return out


def take_labels(images: list[Block], blocks: list[Block], page_area: float, regions: list[tuple] = ()) -> None:
    """Short text inside a figure's box (or a picture region the layout model found) joins that
    figure's ``alt`` and leaves ``blocks``. A picture behind half the page or more, or behind any
    paragraph, is a background: the text over it stays text."""
    for im in images:
        areas = [im.bbox] + [r for r in regions if _inside(im.bbox, r)]
        if _area(im.bbox) > 0.5 * page_area:
            continue
        over = [b for b in blocks if b.kind == "text" and any(_inside(b.bbox, a) for a in areas)]
        if not over or any(len(b.text) > MAX_LABEL for b in over):
            continue
        over.sort(key=lambda b: (round(b.bbox[1]), b.bbox[0]))
        im.component.alt = ", ".join(b.text for b in over)
        taken = {id(b) for b in over}
        blocks[:] = [b for b in blocks if id(b) not in taken]


def _area(box: tuple) -> float:
    return max(box[2] - box[0], 0.0) * max(box[3] - box[1], 0.0)


def _inside(inner: tuple, outer: tuple, slack: float = 2.0) -> bool:
    return (inner[0] >= outer[0] - slack and inner[1] >= outer[1] - slack and inner[2] <= outer[2] + slack
            and inner[3] <= outer[3] + slack)


def take_captions(targets: list[Block], blocks: list[Block], pattern: re.Pattern) -> None:
    """Give each target (figure or table) the caption block nearest below (else above) it, nearest
    pairs first so that no caption serves two targets; taken captions leave ``blocks``."""
    pairs = []
    for t, target in enumerate(targets):
        x0, y0, x1, y1 = target.bbox
        for c, b in enumerate(blocks):
            if b.kind != "text" or not pattern.match(b.text) or b.bbox[2] < x0 or b.bbox[0] > x1:
                continue
            below = b.bbox[1] >= y1 - 2
            d = b.bbox[1] - y1 if below else y0 - b.bbox[3]
            if -2 <= d < CAPTION_REACH:
                pairs.append((d + (0 if below else 0.5), t, c))
    taken_targets: set[int] = set()
    taken: set[int] = set()
    for _, t, c in sorted(pairs):
        if t in taken_targets or c in taken:
            continue
        targets[t].component.caption = blocks[c].text
        taken_targets.add(t)
        taken.add(c)
    blocks[:] = [b for i, b in enumerate(blocks) if i not in taken]
