"""PDFs in the shapes that real documents take and that a PDF parser gets wrong, each with its
reference text.

``DOCUMENTS`` maps a file name to a function that returns ``(PDF bytes written with pymupdf, the
reference text as Markdown)``: ``# Heading`` lines for headings, paragraphs separated by blank
lines, in reading order. Running headers, footers and page numbers are on the pages and not in the
reference (they run on the documents of two pages); a figure is ``![its labels](name.png)`` (the
words drawn on it, callout and axis labels, as its alt text) followed by its caption as a
paragraph. Shapes: spaces stored as their own spans (as TeX writes them), words placed apart with
no space characters at all, ligature glyphs, two columns whose gutter sits off the page centre, italic
headings at body size and "Medium" subheadings one point larger, a line of ZapfDingbats check
boxes, a figure drawn as 4x8 abutting image tiles beside a second figure (each with its caption)
with callout labels over it, a paragraph in an embedded font whose ToUnicode map was removed (its
characters extract as glyph ids: garbage), right-to-left Arabic and Hebrew paragraphs, three
columns above and below a figure that spans them, a bar chart drawn with vector paths whose
tick and axis labels lie inside it, and subsections numbered in the body's font on a one-page
document with a header line.

Fonts: pymupdf's base-14 fonts and DejaVu Sans (``/usr/share/fonts``; it has the ligature, Arabic and
Hebrew glyphs). Writes nothing but the bytes it returns.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
W, H, LEFT, RIGHT = 595.0, 842.0, 56.0, 539.0
BODY = 10.0
HEADER = "Field handbook - revision 4"


class Doc:
    """A PDF written line by line, with its reference Markdown beside it."""

    def __init__(self, running: bool = False) -> None:
        import pymupdf

        self.pymupdf = pymupdf
        self.doc = pymupdf.open()
        self.running = running
        self.fonts = {"tiro": pymupdf.Font("tiro"), "helv": pymupdf.Font("helv"), "hebo": pymupdf.Font("hebo"),
                      "tiit": pymupdf.Font("tiit"), "zadb": pymupdf.Font("zadb")}
        self.fonts["dejavu"] = pymupdf.Font(fontfile=str(DEJAVU))
        self.reference: list[str] = []
        self.page = None
        self.y = 0.0
        self.new_page()

    def new_page(self) -> None:
        self.page = self.doc.new_page(width=W, height=H)
        self.page.insert_font(fontname="dejavu", fontfile=str(DEJAVU))
        number = self.doc.page_count
        if self.running:
            self.page.insert_text((LEFT, 30), HEADER, fontsize=8, fontname="helv")
            self.page.insert_text((W / 2 - 4, H - 24), str(number), fontsize=8, fontname="helv")
        self.y = 70.0

    def width(self, text: str, font: str, size: float) -> float:
        return self.fonts[font].text_length(text, size)

    def words(self, x: float, y: float, words: list[str], font: str, size: float, mode: str) -> None:
        """One line: ``plain`` (one string), ``spans`` (each space its own span in another font,
        as TeX writes them) or ``gaps`` (no space characters, words placed 0.3 em apart)."""
        if mode == "plain":
            self.page.insert_text((x, y), " ".join(words), fontname=font, fontsize=size)
            return
        space = self.width(" ", "helv", size)
        for i, word in enumerate(words):
            self.page.insert_text((x, y), word, fontname=font, fontsize=size)
            x += self.width(word, font, size)
            if i + 1 < len(words):
                if mode == "spans":
                    self.page.insert_text((x, y), " ", fontname="helv", fontsize=size)
                    x += space
                else:
                    x += 0.3 * size

    def wrap(self, text: str, font: str, size: float, width: float) -> list[list[str]]:
        lines: list[list[str]] = [[]]
        for word in text.split():
            if lines[-1] and self.width(" ".join([*lines[-1], word]), font, size) > width:
                lines.append([])
            lines[-1].append(word)
        return lines

    def paragraph(self, text: str, x0: float = LEFT, x1: float = RIGHT, font: str = "tiro", size: float = BODY,
                  mode: str = "plain", reference: str | None = None, y: float | None = None) -> float:
        """Write ``text`` wrapped between x0 and x1 from ``y`` (else the cursor); returns the bottom."""
        top = self.y if y is None else y
        lines = self.wrap(text, font, size, x1 - x0)
        if top + len(lines) * size * 1.3 > H - 70:
            self.new_page()
            top = self.y
        for i, line in enumerate(lines):
            self.words(x0, top + size + i * size * 1.3, line, font, size, mode)
        bottom = top + len(lines) * size * 1.3
        if y is None:
            self.y = bottom + size
        self.reference.append(reference if reference is not None else text)
        return bottom

    def heading(self, text: str, size: float = 16, font: str = "hebo", x0: float = LEFT,
                y: float | None = None, level: int = 1) -> float:
        top = self.y if y is None else y
        self.page.insert_text((x0, top + size), text, fontname=font, fontsize=size)
        if y is None:
            self.y = top + size * 1.3 + 8
        self.reference.append("#" * level + " " + text)
        return top + size * 1.3 + 8

    def tobytes(self) -> tuple[bytes, str]:
        return self.doc.tobytes(garbage=3, deflate=True), "\n\n".join(self.reference) + "\n"


PROSE = [
    "The pump station draws water from the lower basin and lifts it to the treatment hall, where "
    "sand filters remove the silt that the spring floods carry down from the hills.",
    "Operators check the intake screens every morning and note the pressure on each gauge, because a "
    "slow fall in pressure is the first sign that a screen has begun to clog.",
    "In winter the outdoor pipes are drained before the first frost, and the valves are left half open "
    "so that trapped water can expand without splitting the castings.",
    "Spare seals, gaskets and bearings are kept in the store beside the workshop, sorted by the size "
    "printed on the pump's plate, with a list of what was taken and when.",
    "A new operator shadows an experienced one for two full weeks before taking a shift alone, and "
    "signs the log book at the end of every shift they work.",
    "The alarm panel reports a fault by its zone number; the zone map hangs beside the panel and a "
    "copy is kept in the binder on the operator's desk.",
]

LIGATURES = ("The conﬁguration ﬁle sets the ﬂow limits for each oﬃce; an eﬀective ﬁlter keeps the "
             "ﬂuid clean, and the baﬄe plates stop the ﬁnest grit.")


def tex_spaces() -> tuple[bytes, str]:
    """Spaces as their own spans in another font, as TeX writes them; ligature glyphs; two pages."""
    d = Doc(running=True)
    d.heading("Space spans in typeset text")
    for text in PROSE[:3]:
        d.paragraph(text, mode="spans")
    d.paragraph(LIGATURES, font="dejavu", mode="spans", reference=LIGATURES.replace("ﬁ", "fi").replace(
        "ﬂ", "fl").replace("ﬃ", "ffi").replace("ﬀ", "ff").replace("ﬄ", "ffl"))
    d.new_page()
    d.heading("Second page", size=14, level=2)
    for text in PROSE[3:]:
        d.paragraph(text, mode="spans")
    return d.tobytes()


def glyph_gaps() -> tuple[bytes, str]:
    """No space characters at all: words stand apart only by where their glyphs are placed."""
    d = Doc()
    d.heading("Words placed by position")
    for text in PROSE[:4]:
        d.paragraph(text, mode="gaps")
    return d.tobytes()


def _rename_font(doc, old: str, new: str) -> None:
    """Give an embedded font another name (a "Medium" weight that pymupdf does not flag bold)."""
    for xref in range(1, doc.xref_length()):
        for key in ("BaseFont", "FontName"):
            kind, value = doc.xref_get_key(xref, key)
            if kind == "name" and old in value:
                doc.xref_set_key(xref, key, f"/{new}")


def offcentre_columns() -> tuple[bytes, str]:
    """Two columns whose gutter sits at 52 % of the page width (left column to x=300, right from
    x=322); italic headings at body size, "Medium" subheadings one point larger; two pages."""
    d = Doc(running=True)
    d.heading("Operating the pump station", size=18)
    d.paragraph("This handbook describes the daily work at the station, from the morning checks to the "
                "shutdown in winter, for operators and their supervisors.")
    for page in range(2):
        if page:
            d.new_page()
        top = d.y
        y = d.heading(f"Checks of part {page + 1}", size=BODY, font="tiit", y=top, level=2)
        for text in PROSE[page * 2:page * 2 + 2]:
            y = d.paragraph(text, x0=LEFT, x1=311, y=y) + BODY
        y = d.heading(f"Records of part {page + 1}", size=BODY + 1, font="dejavu", y=y, level=3)
        y = d.paragraph(PROSE[page + 4], x0=LEFT, x1=311, y=y) + BODY
        y = d.heading(f"Repairs of part {page + 1}", size=BODY, font="tiit", x0=325, y=top, level=2)
        for text in PROSE[(page * 2 + 2) % 6:(page * 2 + 2) % 6 + 2]:
            y = d.paragraph(text, x0=325, x1=RIGHT, y=y) + BODY
        y = d.heading(f"Parts of part {page + 1}", size=BODY + 1, font="dejavu", x0=325, y=y, level=3)
        d.paragraph(PROSE[5 - page], x0=325, x1=RIGHT, y=y)
    body, reference = d.tobytes()
    import pymupdf

    doc = pymupdf.open(stream=body, filetype="pdf")
    _rename_font(doc, "DejaVu", "DejaVuSans-Medium")
    return doc.tobytes(garbage=3, deflate=True), reference


def checkboxes() -> tuple[bytes, str]:
    """A line of ZapfDingbats check boxes with their labels between a heading and the paragraphs."""
    d = Doc()
    d.heading("Inspection form")
    d.paragraph(PROSE[0])
    x, y = LEFT, d.y + 12
    for label in ("Passed", "Failed", "Skipped"):
        d.page.insert_text((x, y), "q", fontname="zadb", fontsize=12)
        d.page.insert_text((x + 14, y), label, fontname="helv", fontsize=BODY)
        x += 90
    d.reference.append("Passed Failed Skipped")
    d.y = y + 14
    for text in PROSE[1:3]:
        d.paragraph(text)
    return d.tobytes()


def _picture(width: int, height: int) -> object:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (width, height), (235, 240, 248))
    draw = ImageDraw.Draw(img)
    for i in range(9):
        draw.ellipse((i * width // 10, (i * 37) % max(height - 40, 1), i * width // 10 + 60,
                      (i * 37) % max(height - 40, 1) + 60), fill=(40 + i * 20, 120, 200 - i * 15))
    return img


def _png(img) -> bytes:
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def figures() -> tuple[bytes, str]:
    """A figure drawn as 4x8 abutting image tiles and a second figure beside it, each with its
    caption below; callout labels over the second figure."""
    d = Doc()
    d.heading("Station layout")
    d.paragraph(PROSE[0])
    top, rows, cols = d.y + 6, 4, 8
    tile_w, tile_h = 208 / cols, 150 / rows
    picture = _picture(cols * 40, rows * 40)
    for r in range(rows):
        for c in range(cols):
            tile = picture.crop((c * 40, r * 40, c * 40 + 40, r * 40 + 40))
            box = (LEFT + c * tile_w, top + r * tile_h, LEFT + (c + 1) * tile_w, top + (r + 1) * tile_h)
            d.page.insert_image(d.pymupdf.Rect(*box), stream=_png(tile), keep_proportion=False)
    second = d.pymupdf.Rect(322, top, RIGHT, top + 150)
    d.page.insert_image(second, stream=_png(_picture(300, 208)), keep_proportion=False)
    for label, (dx, dy) in (("Valve", (20, 30)), ("Pump", (120, 70)), ("Outlet", (60, 120))):
        d.page.insert_text((second.x0 + dx, second.y0 + dy), label, fontname="helv", fontsize=8)
    caption_y = top + 150 + 14
    first_caption = "Figure 1: the treatment hall seen from the gallery"
    second_caption = "Figure 2: the intake pump and its valves"
    d.page.insert_text((LEFT, caption_y), first_caption, fontname="helv", fontsize=9)
    d.page.insert_text((322, caption_y), second_caption, fontname="helv", fontsize=9)
    d.reference += ["![](treatment-hall.png)", first_caption, "![Valve, Pump, Outlet](intake-pump.png)",
                    second_caption]
    d.y = caption_y + 20
    d.paragraph(PROSE[1])
    return d.tobytes()


GARBLED = ("The overflow channel must be kept clear of branches and leaves at all times, and it is "
           "checked after every storm.")


def unmapped_font() -> tuple[bytes, str]:
    """A paragraph in an embedded font whose ToUnicode map is removed: its characters extract as
    glyph ids (garbage), though the page shows them right."""
    d = Doc()
    d.heading("Overflow channel")
    d.paragraph(PROSE[2])
    d.paragraph(GARBLED, font="dejavu")
    d.paragraph(PROSE[3])
    body, reference = d.tobytes()
    import pymupdf

    doc = pymupdf.open(stream=body, filetype="pdf")
    for xref in range(1, doc.xref_length()):
        if doc.xref_get_key(xref, "ToUnicode")[0] != "null" and "DejaVu" in doc.xref_get_key(xref, "BaseFont")[1]:
            doc.xref_set_key(xref, "ToUnicode", "null")
    return doc.tobytes(garbage=3, deflate=True), reference


ARABIC = ("تعمل محطة الضخ على مدار الساعة لنقل المياه من الحوض السفلي إلى قاعة المعالجة حيث تزيل "
          "المرشحات الرملية الطمي لا سيما بعد فيضانات الربيع")
HEBREW = "המפעילים בודקים את מסנני הכניסה בכל בוקר ורושמים את הלחץ בכל מד ביומן המשמרת של התחנה"


def rtl() -> tuple[bytes, str]:
    """Right-to-left paragraphs (Arabic and Hebrew), right aligned, several lines each."""
    d = Doc()
    d.heading("Station notes")
    d.paragraph(PROSE[0])
    font = d.fonts["dejavu"]
    for text in (ARABIC, HEBREW):
        writer = d.pymupdf.TextWriter(d.page.rect)
        lines = d.wrap(text, "dejavu", 11, 300)
        for i, line in enumerate(lines):
            s = " ".join(line)
            writer.append((RIGHT - font.text_length(s, 11), d.y + 11 + i * 14.3), s, font=font, fontsize=11,
                          right_to_left=True)
        writer.write_text(d.page)
        d.y += len(lines) * 14.3 + 12
        d.reference.append(text)
    d.paragraph(PROSE[1])
    return d.tobytes()


def three_columns() -> tuple[bytes, str]:
    """A newsletter page: a title across the page, three columns, a figure across all three with its
    caption, then three more columns below it."""
    d = Doc()
    d.heading("Station newsletter", size=18)
    width = (RIGHT - LEFT - 2 * 16) / 3
    xs = [LEFT + i * (width + 16) for i in range(3)]
    top = d.y
    bottom = top
    for i, x in enumerate(xs):
        bottom = max(bottom, d.paragraph(PROSE[i], x0=x, x1=x + width, y=top))
    figure_top = bottom + 14
    d.page.insert_image(d.pymupdf.Rect(LEFT, figure_top, RIGHT, figure_top + 120), stream=_png(_picture(480, 120)),
                        keep_proportion=False)
    caption = "Figure 1: the valley seen from the dam"
    d.page.insert_text((LEFT, figure_top + 136), caption, fontname="helv", fontsize=9)
    d.reference += ["![](valley.png)", caption]
    top = figure_top + 150
    for i, x in enumerate(xs):
        d.paragraph(PROSE[3 + i], x0=x, x1=x + width, y=top)
    return d.tobytes()


def vector_chart() -> tuple[bytes, str]:
    """A bar chart drawn with vector paths (no image) over a white page background: axes, bars, tick
    and axis labels inside it; its caption below."""
    d = Doc()
    d.page.draw_rect(d.page.rect, color=None, fill=(1, 1, 1))  # a page background, as many writers paint
    d.heading("Water drawn each month")
    d.paragraph(PROSE[3])
    x0, top, height = LEFT + 30, d.y + 10, 160.0
    bottom = top + height
    d.page.draw_line((x0, top), (x0, bottom))
    d.page.draw_line((x0, bottom), (x0 + 300, bottom))
    months = ("Jan", "Feb", "Mar", "Apr", "May", "Jun")
    for i, month in enumerate(months):
        value = 40 + (i * 37) % 110
        bx = x0 + 12 + i * 48
        d.page.draw_rect((bx, bottom - value, bx + 30, bottom), color=None, fill=(0.2, 0.45, 0.7))
        d.page.insert_text((bx + 4, bottom + 12), month, fontname="helv", fontsize=8)
    for tick in range(0, 160, 50):
        d.page.draw_line((x0 - 4, bottom - tick), (x0, bottom - tick))
        d.page.insert_text((x0 - 22, bottom - tick + 3), str(tick), fontname="helv", fontsize=8)
    d.page.insert_text((x0 + 90, top + 8), "Megalitres drawn", fontname="helv", fontsize=8)
    caption = "Figure 3: water drawn from the lower basin by month"
    d.page.insert_text((LEFT, bottom + 32), caption, fontname="helv", fontsize=9)
    d.reference += [f"![Megalitres drawn, 150, 100, 50, 0, {', '.join(months)}](water-drawn.png)", caption]
    d.y = bottom + 46
    d.paragraph(PROSE[4])
    return d.tobytes()


def numbered_headings() -> tuple[bytes, str]:
    """Subsections numbered "1.1", "1.2" in the body's own font and size; a one-page document whose
    header line and "Page 1 of 1" footer are not part of its text (no repeat tells them apart)."""
    d = Doc()
    d.page.insert_text((LEFT, 30), "Pump station handbook", fontsize=8, fontname="helv")
    d.page.insert_text((W - 100, H - 24), "Page 1 of 1", fontsize=8, fontname="helv")
    d.heading("Intake and filters")
    for i, name in enumerate(["Intake screens", "Sand filters", "Winter care"]):
        d.y += 4
        d.heading(f"1.{i + 1} {name}", size=BODY, font="tiro", level=2)
        d.paragraph(PROSE[i])
    return d.tobytes()


DOCUMENTS: dict[str, Callable[[], tuple[bytes, str]]] = {
    "tex_spaces.pdf": tex_spaces,
    "glyph_gaps.pdf": glyph_gaps,
    "offcentre_columns.pdf": offcentre_columns,
    "checkboxes.pdf": checkboxes,
    "figures.pdf": figures,
    "unmapped_font.pdf": unmapped_font,
    "rtl.pdf": rtl,
    "three_columns.pdf": three_columns,
    "vector_chart.pdf": vector_chart,
    "numbered_headings.pdf": numbered_headings,
}
