"""Write PDFs with known content (headings, paragraphs, two columns, ruled tables, images, links).

Used by the tests, ``bench/pdf.py`` and the sample site's generator; writes nothing but the bytes
it returns. Text is laid out with pymupdf's base-14 fonts; a block that does not fit moves to
the next column or page.
"""

from __future__ import annotations

import io

HEADING_SIZES = {1: 18.0, 2: 14.0, 3: 12.0}
BODY_SIZE = 10.0


def png(width: int = 240, height: int = 160, seed: int = 0) -> bytes:
    """A small PNG with a few coloured shapes (Pillow)."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (width, height), (230, 236, 245))
    draw = ImageDraw.Draw(img)
    for i in range(4):
        x = (seed * 37 + i * 53) % max(width - 40, 1)
        y = (seed * 23 + i * 31) % max(height - 40, 1)
        draw.ellipse((x, y, x + 40, y + 40), fill=((seed * 60 + i * 40) % 255, 90 + i * 30, 160))
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


class PdfWriter:
    """Lays out blocks top to bottom in one or two columns; ``tobytes()`` returns the PDF."""

    def __init__(self, title: str | None = None, running_header: str | None = None, page_numbers: bool = True,
                 width: float = 595, height: float = 842, margin: float = 56) -> None:
        import pymupdf

        self.pymupdf = pymupdf
        self.doc = pymupdf.open()
        self.title, self.running_header, self.page_numbers = title, running_header, page_numbers
        self.width, self.height, self.margin = width, height, margin
        self.toc: list[list] = []
        self.n_columns, self.column, self.region_top = 1, 0, margin
        self.page = None
        self.y = margin
        self.new_page()

    # -- layout --------------------------------------------------------------------------------
    def new_page(self) -> None:
        self.page = self.doc.new_page(width=self.width, height=self.height)
        number = self.doc.page_count
        if self.running_header:
            self.page.insert_text((self.margin, 30), self.running_header, fontsize=8, fontname="helv")
        if self.page_numbers:
            self.page.insert_text((self.width / 2 - 4, self.height - 24), str(number), fontsize=8, fontname="helv")
        self.column, self.region_top, self.y = 0, self.margin, self.margin

    def columns(self, n: int) -> None:
        """Lay out what follows in ``n`` columns, starting below what is already on the page."""
        if self.column or self._bottom() - self.y < 60:
            self.new_page()
        self.n_columns, self.column, self.region_top = n, 0, self.y

    def _x(self) -> tuple[float, float]:
        gutter = 18.0
        usable = self.width - 2 * self.margin
        w = (usable - gutter * (self.n_columns - 1)) / self.n_columns
        x0 = self.margin + self.column * (w + gutter)
        return x0, x0 + w

    def _advance(self) -> None:
        if self.column + 1 < self.n_columns:
            self.column += 1
            self.y = self.region_top
        else:
            self.new_page()

    def _bottom(self) -> float:
        return self.height - self.margin

    def _textbox(self, text: str, size: float, font: str, gap: float):
        pymupdf = self.pymupdf
        for _ in range(4):
            while self._bottom() - self.y < 3 * size:
                self._advance()
            x0, x1 = self._x()
            rect = pymupdf.Rect(x0, self.y, x1, self._bottom())
            left = self.page.insert_textbox(rect, text, fontsize=size, fontname=font)
            if left >= 0:
                used = pymupdf.Rect(x0, self.y, x1, self._bottom() - left)
                self.y = used.y1 + gap
                return used
            self._advance()
        raise ValueError(f"block too tall for a column: {text[:40]!r}")

    def _link(self, rect, anchor: str, url: str) -> None:
        hits = self.page.search_for(anchor, clip=rect)
        if not hits:
            raise ValueError(f"anchor {anchor!r} not found on the page")
        self.page.insert_link({"kind": self.pymupdf.LINK_URI, "from": hits[0], "uri": url})

    # -- blocks --------------------------------------------------------------------------------
    def heading(self, text: str, level: int = 1) -> None:
        size = HEADING_SIZES[level]
        if self.y + 3 * size > self._bottom():
            self._advance()
        self._textbox(text, size, "hebo", gap=6)
        self.toc.append([level, text, self.doc.page_count])

    def paragraph(self, text: str, links: dict[str, str] | None = None) -> None:
        rect = self._textbox(text, BODY_SIZE, "helv", gap=9)
        for anchor, url in (links or {}).items():
            self._link(rect, anchor, url)

    def lines(self, lines: list[str]) -> None:
        """A paragraph written exactly as these lines (to test hyphens at line ends)."""
        step = BODY_SIZE * 1.2
        if self.y + step * len(lines) > self._bottom():
            self._advance()
        x0, _ = self._x()
        for line in lines:
            self.page.insert_text((x0, self.y + BODY_SIZE), line, fontsize=BODY_SIZE, fontname="helv")
            self.y += step
        self.y += 9

    def table(self, header: list[str], rows: list[list[str]], caption: str | None = None,
              links: dict[str, str] | None = None) -> None:
        row_h = 18.0
        height = row_h * (len(rows) + 1)
        if self.y + height + 30 > self._bottom():
            self._advance()
        if caption:
            self._textbox(caption, BODY_SIZE, "helv", gap=4)
        x0, x1 = self._x()
        col_w = (x1 - x0) / len(header)
        top = self.y
        for i in range(len(rows) + 2):
            self.page.draw_line((x0, top + i * row_h), (x1, top + i * row_h))
        for j in range(len(header) + 1):
            self.page.draw_line((x0 + j * col_w, top), (x0 + j * col_w, top + height))
        for i, row in enumerate([header, *rows]):
            for j, cell in enumerate(row):
                font = "hebo" if i == 0 else "helv"
                self.page.insert_text((x0 + j * col_w + 3, top + i * row_h + 13), cell, fontsize=9, fontname=font)
        area = self.pymupdf.Rect(x0, top, x1, top + height)
        for anchor, url in (links or {}).items():
            self._link(area, anchor, url)
        self.y = top + height + 12

    def image(self, data: bytes, caption: str | None = None, width: float = 200, height: float = 130) -> None:
        if self.y + height + 30 > self._bottom():
            self._advance()
        x0, x1 = self._x()
        width = min(width, x1 - x0)
        self.page.insert_image(self.pymupdf.Rect(x0, self.y, x0 + width, self.y + height), stream=data)
        self.y += height + 4
        if caption:
            self._textbox(caption, 9, "helv", gap=10)
        else:
            self.y += 8

    def tobytes(self, outline: bool = True) -> bytes:
        if outline and self.toc:
            self.doc.set_toc(self.toc)
        if self.title:
            self.doc.set_metadata({"title": self.title})
        return self.doc.tobytes(garbage=3, deflate=True)


LOREM = ("Regional rail ridership grew steadily as new timetables linked the valley towns. "
         "Operators reported fewer delays after the signalling upgrade, and freight volumes held "
         "their level through the winter months. ")


def report_pdf(pages: int = 4, seed: int = 0, links: bool = True, image: bytes | None = None,
               table_every: int = 1, image_every: int = 1) -> bytes:
    """A multi-page report of sections (about 1.7 pages each): a heading, body text with a link,
    a two-column part, and in every ``table_every``-th / ``image_every``-th section a ruled table /
    a captioned image."""
    w = PdfWriter(title=f"Transit report {seed}", running_header=f"Transit report {seed} - internal")
    w.heading(f"Transit report {seed}", 1)
    section = 0
    while w.doc.page_count < pages:
        section += 1
        w.columns(1)
        w.heading(f"Section {section}: network {seed}-{section}", 2)
        w.paragraph(LOREM * 3, links={"signalling upgrade": f"https://example.org/signals/{seed}"} if links else None)
        w.columns(2)
        for k in range(6):
            w.paragraph(f"Column note {k} of section {section}. " + LOREM * 2)
        w.columns(1)
        if section % table_every == 0:
            w.table(["Line", "Riders", "Delay"], [[f"L{seed}-{i}", f"{(i + 1) * 1234:,}", f"{i % 7} min"]
                                                  for i in range(6)], caption=f"Table {section}: ridership by line")
        if section % image_every == 0:
            w.image(image or png(seed=seed + section), caption=f"Figure {section}: network map {seed}-{section}")
        w.paragraph(LOREM * 2)
    return w.tobytes()
