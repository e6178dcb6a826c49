"""PDFs of table shapes, and of shapes that look like tables and are not, each with its reference.

``DOCUMENTS`` maps a file name to a function returning (PDF bytes drawn with pymupdf, reference
Markdown): a heading, a paragraph before and after, and each table as a GFM pipe table with its
header row. Shapes: a fully ruled grid, horizontal rules only (booktabs, 8 body rows, a wrapped
cell), no rules at all, a dot-leader contents table, a check-box table (ZapfDingbats glyphs), a
merged header cell, a captioned table under a single header rule; negatives (no table in their
reference): a frame around a page of paragraphs, a syntax diagram of boxes and arrows, a box
holding a paragraph. Used by tests/unit/test_pdf_tables.py and the fidelity bench; writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable

WIDTH, HEIGHT, LEFT, RIGHT = 595.0, 842.0, 56.0, 539.0
BEFORE = ("The figures below were gathered by the harbour office during the spring survey and checked "
          "against the ledgers kept at each quay.")
AFTER = "Counts were rounded to the nearest whole unit before they were published in this report."


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A GFM pipe table."""
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                      *("| " + " | ".join(row) + " |" for row in rows)])


class _Page:
    """One A4 page written top to bottom; ``y`` is where the next block starts."""

    def __init__(self, heading: str) -> None:
        import pymupdf

        self.pymupdf = pymupdf
        self.doc = pymupdf.open()
        self.page = self.doc.new_page(width=WIDTH, height=HEIGHT)
        self.y = 60.0
        self.md: list[str] = []
        self.heading(heading)

    def heading(self, text: str) -> None:
        self.page.insert_text((LEFT, self.y + 16), text, fontsize=16, fontname="hebo")
        self.y += 34
        self.md.append(f"# {text}")

    def paragraph(self, text: str, x0: float = LEFT, x1: float = RIGHT, md: bool = True) -> None:
        rect = self.pymupdf.Rect(x0, self.y, x1, self.y + 200)
        left = self.page.insert_textbox(rect, text, fontsize=10, fontname="helv")
        self.y += 200 - left + 12
        if md:
            self.md.append(text)

    def text(self, x: float, y: float, s: str, bold: bool = False, size: float = 9,
             right: bool = False) -> None:
        """Write ``s`` with its baseline at ``y``, starting at ``x`` (ending there when ``right``)."""
        font = "hebo" if bold else "helv"
        if right:
            x -= self.pymupdf.get_text_length(s, fontname=font, fontsize=size)
        self.page.insert_text((x, y), s, fontsize=size, fontname=font)

    def line(self, y: float, x0: float = LEFT, x1: float = RIGHT, width: float = 0.6) -> None:
        self.page.draw_line((x0, y), (x1, y), width=width)

    def done(self) -> tuple[bytes, str]:
        return self.doc.tobytes(garbage=3, deflate=True), "\n\n".join(self.md) + "\n"


def _columns(p: _Page, top: float, xs: list[float], header: list[str], rows: list[list[str]],
             pitch: float = 15, numeric: set[int] | frozenset = frozenset(), width: float = 80) -> float:
    """Write a header (bold) and rows at column starts ``xs`` (numeric columns right-aligned at
    ``x + width``); returns the y below the last row."""
    for i, row in enumerate([header, *rows]):
        y = top + 11 + i * pitch
        for j, cell in enumerate(row):
            if j in numeric:
                p.text(xs[j] + width, y, cell, bold=i == 0, right=True)
            else:
                p.text(xs[j], y, cell, bold=i == 0)
    return top + (len(rows) + 1) * pitch + 4


def ruled_grid() -> tuple[bytes, str]:
    p = _Page("Stations on the coast line")
    p.paragraph(BEFORE)
    header = ["Station", "Line", "Platforms", "Opened"]
    rows = [["Portmere", "Coast", "4", "1871"], ["Saltby", "Coast", "2", "1874"],
            ["Wick Cross", "Valley", "3", "1880"], ["Holm", "Coast", "1", "1902"], ["Eastgate", "Valley", "6", "1911"]]
    top, row_h, col_w = p.y, 18.0, 110.0
    for i in range(len(rows) + 2):
        p.line(top + i * row_h, LEFT, LEFT + 4 * col_w)
    for j in range(5):
        p.page.draw_line((LEFT + j * col_w, top), (LEFT + j * col_w, top + (len(rows) + 1) * row_h), width=0.6)
    for i, row in enumerate([header, *rows]):
        for j, cell in enumerate(row):
            p.text(LEFT + j * col_w + 4, top + i * row_h + 13, cell, bold=i == 0)
    p.y = top + (len(rows) + 1) * row_h + 14
    p.md.append(md_table(header, rows))
    p.paragraph(AFTER)
    return p.done()


def booktabs() -> tuple[bytes, str]:
    """Top rule, a rule under the header, bottom rule; no vertical lines; the last column wraps once."""
    p = _Page("Birds counted at the marsh")
    p.paragraph(BEFORE)
    header = ["Species", "Site", "Count", "Habitat"]
    rows = [["Grey heron", "North pool", "14", "reed bed"], ["Little egret", "North pool", "9", "mud flat"],
            ["Curlew", "Salt field", "31", "wet grassland and the margins of the creek"],
            ["Redshank", "Salt field", "27", "creek"], ["Lapwing", "East meadow", "56", "grazing marsh"],
            ["Teal", "Lagoon", "112", "open water"], ["Shelduck", "Lagoon", "18", "mud flat"],
            ["Avocet", "Scrape", "7", "shallow scrape"]]
    xs, top = [LEFT + 4, 170.0, 260.0, 360.0], p.y
    p.line(top, width=1.0)
    for j, cell in enumerate(header):
        p.text(xs[j] + (60 if j == 2 else 0), top + 13, cell, bold=True, right=j == 2)
    p.line(top + 19)
    y = top + 33
    for row in rows:
        for j in range(3):
            p.text(xs[j] + (60 if j == 2 else 0), y, row[j], right=j == 2)
        if len(row[3]) > 30:
            p.text(xs[3], y, "wet grassland and the margins")
            y += 11
            p.text(xs[3], y, "of the creek")
        else:
            p.text(xs[3], y, row[3])
        y += 15
    p.line(y - 8, width=1.0)
    p.y = y + 6
    p.md.append(md_table(header, rows))
    p.paragraph(AFTER)
    return p.done()


def aligned_columns() -> tuple[bytes, str]:
    """No rules at all: a bold header and aligned columns, numbers right-aligned."""
    p = _Page("Supplies ordered for the depot")
    p.paragraph(BEFORE)
    header = ["Item", "Supplier", "Unit", "Qty", "Price"]
    rows = [["Rope", "Harbour Chandlers", "coil", "12", "18.40"], ["Paint", "Marsh & Sons", "tin", "30", "7.25"],
            ["Tar", "Harbour Chandlers", "barrel", "4", "52.00"], ["Canvas", "Wick Mills", "roll", "9", "33.10"],
            ["Nails", "Eastgate Forge", "box", "25", "3.60"], ["Lamp oil", "Marsh & Sons", "can", "16", "4.95"]]
    p.y = _columns(p, p.y, [LEFT, 140.0, 270.0, 300.0, 380.0], header, rows, numeric={3, 4}, width=60) + 10
    p.md.append(md_table(header, rows))
    p.paragraph(AFTER)
    return p.done()


def contents() -> tuple[bytes, str]:
    """A contents page: entries, dot leaders, right-aligned page numbers; a bold "Section ... Page" head."""
    p = _Page("Contents")
    p.paragraph("This report is set out in the sections listed below.")
    entries = [("1 Introduction", "3", 0), ("1.1 Scope", "3", 1), ("1.2 Sources", "4", 1), ("2 The harbour", "6", 0),
               ("2.1 Quays and berths", "7", 1), ("2.2 Cargo", "9", 1), ("3 The marsh", "12", 0),
               ("4 Outlook", "15", 0), ("Appendix: tables", "18", 0)]
    top = p.y
    p.text(LEFT, top + 11, "Section", bold=True)
    p.text(RIGHT, top + 11, "Page", bold=True, right=True)
    dot = p.pymupdf.get_text_length(" .", fontname="helv", fontsize=10)
    for i, (entry, page, level) in enumerate(entries):
        y = top + 30 + i * 17
        x = LEFT + 14 * level
        p.page.insert_text((x, y), entry, fontsize=10, fontname="helv")
        start = x + p.pymupdf.get_text_length(entry, fontname="helv", fontsize=10) + 4
        leader = " ." * int((RIGHT - 24 - start) / dot)
        p.page.insert_text((start, y), leader, fontsize=10, fontname="helv")
        p.text(RIGHT, y, page, size=10, right=True)
    p.y = top + 30 + len(entries) * 17
    p.md.append(md_table(["Section", "Page"], [[e, n] for e, n, _ in entries]))
    p.paragraph(AFTER)
    return p.done()


def checkboxes() -> tuple[bytes, str]:
    """A checklist: a rule between rows, no vertical lines; the Done column holds ZapfDingbats
    glyphs (❑ open, ✔ done) written with pymupdf's font so they keep their Unicode values."""
    p = _Page("Pre-sailing checklist")
    p.paragraph(BEFORE)
    header = ["Check", "Owner", "Done"]
    rows = [["Bilge pumped dry", "Mate", "✔"], ["Lights tested", "Mate", "✔"], ["Charts on board", "Master", "❑"],
            ["Radio check with harbour", "Master", "✔"], ["Life jackets counted", "Crew", "❑"]]
    font = p.pymupdf.Font("zadb")
    writer = p.pymupdf.TextWriter(p.page.rect)
    xs, top, pitch = [LEFT + 4, 260.0, 380.0], p.y, 20.0
    for i, row in enumerate([header, *rows]):
        p.line(top + i * pitch, LEFT, 440)
        y = top + i * pitch + 14
        for j in range(2 + (i == 0)):
            p.text(xs[j], y, row[j], bold=i == 0)
        if i:
            writer.append((xs[2] + 6, y), row[2], font=font, fontsize=10)
    p.line(top + (len(rows) + 1) * pitch, LEFT, 440)
    writer.write_text(p.page)
    p.y = top + (len(rows) + 1) * pitch + 14
    p.md.append(md_table(header, rows))
    p.paragraph(AFTER)
    return p.done()


def merged_header() -> tuple[bytes, str]:
    """A fully ruled table whose "Population" head spans two columns over "2020" and "2024"; "Region"
    and "Area" span both header rows."""
    p = _Page("Population of the districts")
    p.paragraph(BEFORE)
    rows = [["Portmere", "12,400", "13,050", "41"], ["Saltby", "3,210", "3,180", "27"],
            ["Wick", "5,990", "6,420", "55"], ["Holm", "870", "910", "12"]]
    top, row_h, xs = p.y, 18.0, [LEFT, 166.0, 266.0, 366.0, 456.0]
    bottom = top + (len(rows) + 2) * row_h
    p.page.draw_rect((xs[0], top, xs[-1], bottom), width=0.6)
    p.line(top + row_h, xs[1], xs[3])
    for i in range(2, len(rows) + 2):
        p.line(top + i * row_h, xs[0], xs[-1])
    for x, y in ((xs[1], top), (xs[3], top), (xs[2], top + row_h)):
        p.page.draw_line((x, y), (x, bottom), width=0.6)
    p.text(xs[0] + 4, top + 22, "Region", bold=True)
    p.text(xs[1] + 70, top + 13, "Population", bold=True)
    for x, year in ((xs[1], "2020"), (xs[2], "2024")):
        p.text(x + 4, top + row_h + 13, year, bold=True)
    p.text(xs[3] + 4, top + 22, "Area", bold=True)
    for i, row in enumerate(rows):
        for j, cell in enumerate(row):
            p.text(xs[j] + 4, top + (i + 2) * row_h + 13, cell)
    p.y = bottom + 14
    p.md.append(md_table(["Region", "Population 2020", "Population 2024", "Area"], rows))
    p.paragraph(AFTER)
    return p.done()


def captioned() -> tuple[bytes, str]:
    """"Table 1: ..." above a table whose only rule sits under its header."""
    p = _Page("Rainfall at the stations")
    p.paragraph(BEFORE)
    caption = "Table 1: Monthly rainfall by station (mm)"
    p.paragraph(caption)
    header = ["Station", "March", "April", "May"]
    rows = [["Portmere", "61", "48", "44"], ["Saltby", "73", "52", "47"], ["Wick Cross", "58", "41", "39"],
            ["Holm", "80", "66", "51"]]
    top = p.y
    p.y = _columns(p, top, [LEFT, 160.0, 240.0, 320.0], header, rows, numeric={1, 2, 3}, width=50) + 10
    p.line(top + 15)
    p.md.append(md_table(header, rows))
    p.paragraph(AFTER)
    return p.done()


def beside_prose() -> tuple[bytes, str]:
    """Two columns: a table with no rules in the left one, prose in the right one at the same
    height, its lines level with the table's rows."""
    p = _Page("Tides at the harbour mouth")
    mid = (LEFT + RIGHT) / 2
    top = p.y
    p.paragraph(BEFORE, x1=mid - 10)
    header = ["Day", "High", "Low"]
    rows = [["Monday", "06:12", "12:30"], ["Tuesday", "06:55", "13:14"], ["Wednesday", "07:41", "13:59"],
            ["Thursday", "08:30", "14:47"], ["Friday", "09:24", "15:40"]]
    p.y = _columns(p, p.y, [LEFT, 140.0, 200.0], header, rows, pitch=12.5) + 8
    p.md.append(md_table(header, rows))
    p.paragraph(AFTER, x1=mid - 10)
    p.y = top
    p.paragraph(" ".join(NOTES), x0=mid + 10)
    return p.done()


NOTES = ["The harbour board met four times this year and agreed a new schedule of dues for the quays, "
         "which takes effect in the spring once the ledgers have been closed.",
         "Dredging of the inner basin was finished in August, two weeks later than planned, because the "
         "spring tides kept the barges away from the north wall for most of July.",
         "The board thanks the pilots and the lock keepers, who kept the channel open through the worst "
         "of the winter storms without a single closure of the outer gates.",
         "Accounts for the year are kept at the harbour office and may be read there by any member on "
         "request; copies are sent to the town council each quarter."]


def page_frame() -> tuple[bytes, str]:
    """A frame around the page's text with a narrow margin strip down its left side, a rule under
    the heading and one under each paragraph: a regular lattice of two columns and six rows, every
    row a box of prose, not a table."""
    p = _Page("Report of the harbour board")
    p.page.draw_rect((40, 40, 555, 800), width=1.0)
    p.page.draw_line((50, 40), (50, 800), width=0.6)
    p.line(p.y - 8, 40, 555)
    for note in NOTES:
        p.paragraph(note)
        p.line(p.y - 6, 40, 555)
        p.y += 6
    return p.done()


def syntax_diagram() -> tuple[bytes, str]:
    """A railroad diagram: keywords in rounded boxes, names in square boxes, joined by arrows, with
    two alternatives stacked in a column (ASC over DESC)."""
    p = _Page("Query syntax")
    p.paragraph("A query names its columns, the table they come from and an optional order.")
    top = p.y + 10

    def box(x: float, y: float, word: str, rounded: bool) -> float:
        w = p.pymupdf.get_text_length(word, fontname="helv", fontsize=9) + 16
        p.page.draw_rect((x, y, x + w, y + 20), width=0.8, radius=0.4 if rounded else None)
        p.text(x + 8, y + 14, word)
        return x + w

    def arrow(x0: float, x1: float, y: float) -> None:
        p.page.draw_line((x0, y), (x1, y), width=0.8)
        p.page.draw_polyline([(x1 - 5, y - 3), (x1, y), (x1 - 5, y + 3)], width=0.8, closePath=True,
                             fill=(0, 0, 0))

    x = LEFT
    p.page.draw_line((x, top + 4), (x, top + 16), width=1.2)
    words = [("SELECT", True), ("column", False), ("FROM", True), ("table", False)]
    for word, rounded in words:
        arrow(x, x + 18, top + 10)
        x = box(x + 18, top, word, rounded)
    loop_y = top + 34
    p.page.draw_line((120, top + 10), (120, loop_y), width=0.8)
    box(140, loop_y - 10, ",", True)
    p.page.draw_line((120, loop_y), (140, loop_y), width=0.8)
    p.page.draw_line((158, loop_y), (200, loop_y), width=0.8)
    top2 = top + 70
    x = LEFT
    for word, rounded in [("ORDER BY", True), ("column", False)]:
        arrow(x, x + 18, top2 + 10)
        x = box(x + 18, top2, word, rounded)
    arrow(x, x + 18, top2 + 10)
    box(x + 18, top2, "ASC", True)
    box(x + 18, top2 + 30, "DESC", True)
    p.page.draw_line((x + 9, top2 + 10), (x + 9, top2 + 40), width=0.8)
    p.page.draw_line((x + 9, top2 + 40), (x + 18, top2 + 40), width=0.8)
    p.md.append("SELECT column FROM table , ORDER BY column ASC DESC")
    p.y = top2 + 70
    p.paragraph("Each name in a square box is replaced by a name from the schema.")
    return p.done()


def back_cover() -> tuple[bytes, str]:
    """A shaded, bordered box holding a paragraph and an address: one box of prose."""
    p = _Page("About the harbour press")
    p.paragraph(BEFORE)
    p.page.draw_rect((LEFT, 520, RIGHT, 700), color=(0, 0, 0), fill=(0.92, 0.92, 0.88), width=0.8)
    p.y = 536
    p.paragraph("The Harbour Press publishes the reports of the harbour board, the marsh survey and the "
                "station histories of the coast line. Its books are printed on paper made at Wick Mills "
                "and bound in Portmere.", x0=LEFT + 14, x1=RIGHT - 14)
    for line in ("12 Quay Street", "Portmere PM1 4QS", "www.example.org"):
        p.text(LEFT + 14, p.y + 9, line, size=9)
        p.y += 13
    p.md.append("12 Quay Street Portmere PM1 4QS www.example.org")
    return p.done()


def three_columns() -> tuple[bytes, str]:
    """A newsletter page: three columns of prose side by side, every line aligned with its
    neighbours across the gutters, and a numbered list with a wide gap after each number."""
    p = _Page("News from the quays")
    top = p.y
    width = (RIGHT - LEFT - 24) / 3
    for k in range(3):
        p.y = top
        x0 = LEFT + k * (width + 12)
        p.paragraph(" ".join(NOTES[k:k + 2]), x0=x0, x1=x0 + width)
    p.y = top + 230
    p.paragraph("The board agreed the following steps at its last meeting.")
    items = ["Publish the new schedule of dues at every quay before the spring tides.",
             "Ask the lock keepers for a report on the outer gates after each storm.",
             "Open the harbour office on Saturday mornings during the summer season.",
             "Send the accounts to the town council within a week of each quarter day."]
    for i, item in enumerate(items, 1):
        p.page.insert_text((LEFT, p.y + 9), f"{i}.", fontsize=10, fontname="helv")
        p.page.insert_text((LEFT + 22, p.y + 9), item, fontsize=10, fontname="helv")
        p.y += 14
    p.md.append("\n".join(f"{i}. {item}" for i, item in enumerate(items, 1)))
    return p.done()


DOCUMENTS: dict[str, Callable[[], tuple[bytes, str]]] = {
    "ruled_grid.pdf": ruled_grid,
    "booktabs.pdf": booktabs,
    "aligned_columns.pdf": aligned_columns,
    "contents.pdf": contents,
    "checkboxes.pdf": checkboxes,
    "merged_header.pdf": merged_header,
    "captioned.pdf": captioned,
    "beside_prose.pdf": beside_prose,
    "page_frame.pdf": page_frame,
    "syntax_diagram.pdf": syntax_diagram,
    "back_cover.pdf": back_cover,
    "three_columns.pdf": three_columns,
}
NEGATIVES = {"page_frame.pdf", "syntax_diagram.pdf", "back_cover.pdf", "three_columns.pdf"}


def reference_tables(markdown: str) -> list[tuple[list[str], list[list[str]]]]:
    """The (header, rows) of each GFM pipe table in a reference."""
    out: list[tuple[list[str], list[list[str]]]] = []
    for block in markdown.split("\n\n"):
        lines = block.strip().splitlines()
        if len(lines) >= 2 and lines[0].startswith("|") and lines[1].startswith("|---"):
            cells = [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in lines]
            out.append((cells[0], cells[2:]))
    return out
