"""One PDF page's raw parts, from pymupdf's ``dict`` text: text blocks, image blocks and the boxes
of vector paths.

Reads a pymupdf page and its text page; returns ``Block``s in page points. Writes nothing. Text
lines (``laminae.tasks.parse.pdf.text``) join into blocks of one style; a new block starts where
the type size or weight changes, the slant changes around a short line (an italic heading; an
italic phrase that fills a line of a paragraph stays in it), a gap wider than 0.8 of a line opens,
or a line opens a "Figure N:" / "Table N." caption. Lines whose characters have no Unicode map gather in blocks of
their own, marked ``garbled``.
"""

from __future__ import annotations

import re

from laminae.tasks.config import ParseConfig
from laminae.tasks.parse.document import Component
from laminae.tasks.parse.pdf.blocks import Block, join_lines
from laminae.tasks.parse.pdf.text import read_line

CAPTION = re.compile(r"^(figure|fig\.|table)\s*\d+(\.\d+)*\s*[.:\u2013\u2014|-]\s", re.IGNORECASE)
WEB_IMAGE_EXT = {"png": "image/png", "jpeg": "image/jpeg", "jpg": "image/jpeg", "gif": "image/gif"}


def page_blocks(page, number: int, textpage) -> tuple[list[Block], list[dict], list[tuple]]:
    """Text blocks (garbled ones included, marked), pymupdf's image blocks (undecoded: tiles of one
    figure are merged first, ``laminae.tasks.parse.pdf.figures``), and the boxes of vector paths
    ``(x0, y0, x1, y1, stroked, is_rectangle)``; lines are thin rectangles."""
    out: list[Block] = []
    images: list[dict] = []
    rules: list[tuple] = []
    for block in _rejoin(page.get_text("dict", textpage=textpage)["blocks"]):
        if block["type"] == 3:
            rules.append((*block["bbox"], block.get("stroked", True), bool(block.get("isrect"))))
            continue
        if block["type"] == 1:
            images.append(block)
            continue
        current: Block | None = None
        previous_bottom = None
        for raw in block["lines"]:
            line = read_line(raw)
            if line is None:
                continue
            x0, y0, x1, y1 = line.bbox
            gap = previous_bottom is not None and y0 - previous_bottom > 0.8 * max(y1 - y0, 1.0)
            if not line.text:  # only symbols (a row of check boxes): keeps its block from being a heading
                if current is not None and not gap:
                    current.symbols = True
                continue
            caption = bool(CAPTION.match(line.text))
            # an italic line alone may be a heading; an italic stretch inside a paragraph stays in it
            slant = current is not None and line.italic != current.italic and _short(line.text if line.italic
                                                                                      else current.text_so_far())
            if (current is None or abs(line.size - current.size) > 0.6 or line.weight != current.weight
                    or slant or gap or caption or line.garbled != current.garbled):
                current = Block(number, line.bbox, size=line.size, bold=line.weight == 2, weight=line.weight,
                                italic=line.italic, gap_before=gap, garbled=line.garbled)
                out.append(current)
            else:
                b = current.bbox
                current.bbox = (min(b[0], x0), min(b[1], y0), max(b[2], x1), max(b[3], y1))
            current.symbols = current.symbols or line.symbols
            current.lines.append(line.text)
            previous_bottom = y1
    for b in out:
        b.text = join_lines(b.lines)
    return [b for b in out if b.text], images, rules


def _same_line(a: dict, b: dict) -> bool:
    """Whether line ``b`` carries on line ``a`` (same height, just right of it)."""
    (_, ay0, ax1, ay1), (bx0, by0, _, by1) = a["bbox"], b["bbox"]
    size = max((s["size"] for s in a["spans"]), default=10.0)
    return abs(ay1 - by1) < 0.25 * size and abs(ay0 - by0) < 0.5 * size and -1 <= bx0 - ax1 < 1.5 * size


def _rejoin(blocks: list[dict]) -> list[dict]:
    """Text blocks that MuPDF split at a vector path drawn inside a line joined again: Texinfo and
    others draw "_" as a short rule on the baseline ("asn1_delete_structure2" came out as three
    blocks), which becomes "_" again."""
    out: list[dict] = []
    last: dict | None = None  # the last text block
    rules: list[tuple] = []  # vector boxes since it
    for block in blocks:
        if block["type"] == 3:
            rules.append(block["bbox"])
        elif block["type"] == 0 and block["lines"]:
            if last is not None and _same_line(last["lines"][-1], block["lines"][0]):
                line, first = last["lines"][-1], block["lines"][0]
                x1, baseline = line["bbox"][2], line["bbox"][3]
                if any(r[3] - r[1] < 3 and r[0] >= x1 - 1 and r[2] <= first["bbox"][0] + 1
                       and abs(r[3] - baseline) < 4 for r in rules):
                    line["spans"].append({**line["spans"][-1], "text": "_", "flags": line["spans"][-1]["flags"],
                                          "bbox": (x1, line["bbox"][1], first["bbox"][0], baseline)})
                line["spans"].extend(first["spans"])
                line["bbox"] = (line["bbox"][0], min(line["bbox"][1], first["bbox"][1]), first["bbox"][2],
                                max(baseline, first["bbox"][3]))
                last["lines"].extend(block["lines"][1:])
                last["bbox"] = tuple(f(a, b) for f, a, b in zip((min, min, max, max), last["bbox"], block["bbox"],
                                                                strict=True))
                rules = []
                continue
            last, rules = block, []
        out.append(block)
    return out


def _short(text: str) -> bool:
    return len(text.split()) <= 10 and not text.rstrip().endswith((".", ",", ";"))


def image_block(block: dict, number: int, cfg: ParseConfig, warnings: list[str]) -> Block | None:
    """An image block of pymupdf's dict as an image component; None for decorations."""
    x0, y0, x1, y1 = block["bbox"]
    width, height = block["width"], block["height"]
    if min(width, height, x1 - x0, y1 - y0) < cfg.min_image_side:
        return None
    data, mime = block["image"], WEB_IMAGE_EXT.get(block.get("ext", ""))
    if mime is None or block.get("mask"):
        try:
            import pymupdf

            pix = pymupdf.Pixmap(data)
            if block.get("mask"):
                pix = pymupdf.Pixmap(pix, pymupdf.Pixmap(block["mask"]))
            if pix.n - pix.alpha >= 4:
                pix = pymupdf.Pixmap(pymupdf.csRGB, pix)
            data, mime = pix.tobytes("png"), "image/png"
        except Exception as exc:  # a broken image stream must not lose the rest of the page
            warnings.append(f"image_unreadable: page {number}: {type(exc).__name__}: {exc}")
            return None
    out = Block(number, (x0, y0, x1, y1), kind="image")
    out.component = Component(kind="image", text="", section_path=[], width=width, height=height, page=number,
                              bbox=[x0, y0, x1, y1], image_data=data, image_mime=mime)
    return out
