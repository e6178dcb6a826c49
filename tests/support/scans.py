"""Pictures and scanned PDFs with known text, for the OCR tests, ``bench/ocr.py`` and the demo site.

Reads nothing (Pillow's bundled scalable font draws the text, so no system font is needed);
returns PNG bytes and PDF bytes (each page a picture only: no text layer).
"""

from __future__ import annotations

import io
import random

WORDS = (
    "wheat", "rye", "barley", "oats", "flour", "bread", "loaf", "crust", "crumb", "oven", "bakery",
    "miller", "harvest", "guild", "market", "yeast", "starter", "dough", "knead", "proof", "bake", "steam",
    "stone", "deck", "village", "valley", "river", "bridge", "winter", "summer", "spring", "autumn",
    "record", "yield", "price", "bushel", "shilling", "ledger", "report", "chart", "annual", "rainfall",
)


def text_picture(
    lines: list[str],
    width: int | None = None,
    font_size: int = 30,
    margin: int = 30,
    background: str = "white",
    ink: str = "black",
    chart: bool = False,
    height: int | None = None,
) -> bytes:
    """A PNG showing ``lines`` one under the other (and, with ``chart``, bars below them); its
    width and height fit the lines unless given."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=font_size)
    step = int(font_size * 1.7)
    height = height or margin * 2 + step * len(lines) + (160 if chart else 0)
    width = width or int(max((font.getlength(line) for line in lines), default=0)) + 2 * margin
    picture = Image.new("RGB", (width, height), background)
    draw = ImageDraw.Draw(picture)
    for i, line in enumerate(lines):
        draw.text((margin, margin + i * step), line, fill=ink, font=font)
    if chart:
        base = height - margin
        for i, value in enumerate((60, 110, 85, 130)):
            x = margin + 40 + i * 120
            draw.rectangle((x, base - value, x + 70, base), fill=(70, 110, 170))
    out = io.BytesIO()
    picture.save(out, "PNG")
    return out.getvalue()


def scanned_pdf(pages: list[list[str]], dpi: int = 150, font_size: int = 30) -> bytes:
    """A PDF whose A4 pages are pictures of ``pages`` (lines of text; an empty line between
    paragraphs): what a scanner makes, with no text layer."""
    import pymupdf

    doc = pymupdf.open()
    width, height = int(8.27 * dpi), int(11.69 * dpi)
    for lines in pages:
        page = doc.new_page(width=595, height=842)
        page.insert_image(
            page.rect,
            stream=text_picture(lines, width=width, height=height, font_size=font_size, margin=dpi // 2),
        )
    data = doc.tobytes()
    doc.close()
    return data


def random_lines(rng: random.Random, count: int, words: int = 6) -> list[str]:
    """``count`` lines of ``words`` dictionary words each (known text to read back)."""
    return [" ".join(rng.choice(WORDS) for _ in range(words)).capitalize() for _ in range(count)]
