"""Word, PowerPoint, Excel and CSV documents written by their own libraries, each with its reference.

``DOCUMENTS`` maps a file name to a function returning (the file's bytes, reference Markdown: "#"
headings, paragraphs, list items, GFM pipe tables with their header rows, ``![alt](...)`` for a
picture). python-docx writes the DOCX files (a merged-cell table through ``cell.merge``, a nested
table, hyperlinks and a text box through small XML helpers, footnotes and endnotes as parts added
to the zip: python-docx writes neither), python-pptx the PPTX, openpyxl the XLSX (cached formula
values written into the sheet XML, as Excel does: openpyxl writes the formula only), the csv module
the CSV files; pictures are drawn with Pillow. Used by tests/unit/test_parse_office.py, the
fidelity bench (bench/fidelity.py) and the folder-seed tests; writes nothing.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
import zipfile
from collections.abc import Callable

from lxml import etree

NS = {
    "w": "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "wp": "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing",
    "a": "http://schemas.openxmlformats.org/drawingml/2006/main",
    "wps": "http://schemas.microsoft.com/office/word/2010/wordprocessingShape",
    "mc": "http://schemas.openxmlformats.org/markup-compatibility/2006",
    "v": "urn:schemas-microsoft-com:vml",
    "p": "http://schemas.openxmlformats.org/presentationml/2006/main",
}
DECLS = " ".join(f'xmlns:{k}="{v}"' for k, v in NS.items())
RT_HYPERLINK = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink"


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A GFM pipe table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def png(seed: int = 1, width: int = 120, height: int = 80) -> bytes:
    """A small picture of coloured bands (Pillow)."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (width, height), (240, 240, 235))
    draw = ImageDraw.Draw(image)
    for i in range(6):
        colour = ((seed * 50 + i * 37) % 256, (seed * 90 + i * 23) % 256, (seed * 20 + i * 61) % 256)
        draw.rectangle([i * width // 6, (i * 7) % height, (i + 1) * width // 6, height - 1], fill=colour)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


# -- Word --------------------------------------------------------------------------------------
def xml_element(text: str) -> etree._Element:
    tag_end = re.search(r"[\s/>]", text[1:]).start() + 1  # type: ignore[union-attr]
    return etree.fromstring(f"{text[:tag_end]} {DECLS}{text[tag_end:]}")


def add_hyperlink(paragraph, url: str, text: str) -> None:
    """A run of ``text`` linking to ``url`` (python-docx has no API for writing hyperlinks)."""
    rid = paragraph.part.relate_to(url, RT_HYPERLINK, is_external=True)
    paragraph._p.append(xml_element(f'<w:hyperlink r:id="{rid}"><w:r><w:t xml:space="preserve">{text}</w:t>'
                                    "</w:r></w:hyperlink>"))


def add_note_reference(paragraph, kind: str, note_id: int) -> None:
    paragraph._p.append(xml_element(f'<w:r><w:{kind}Reference w:id="{note_id}"/></w:r>'))


def add_text_box(paragraph, text: str) -> None:
    """A floating text box as Word writes it: a DrawingML shape, with a VML copy as its fallback."""
    body = f'<w:txbxContent><w:p><w:r><w:t xml:space="preserve">{text}</w:t></w:r></w:p></w:txbxContent>'
    paragraph._p.append(xml_element(
        '<w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><wp:anchor distT="0" distB="0" '
        'distL="0" distR="0" simplePos="0" relativeHeight="2" behindDoc="0" locked="0" layoutInCell="1" '
        'allowOverlap="1"><wp:simplePos x="0" y="0"/><wp:extent cx="2286000" cy="457200"/>'
        '<wp:docPr id="90" name="Text Box 1"/><a:graphic><a:graphicData '
        'uri="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"><wps:wsp><wps:txbx>'
        f"{body}</wps:txbx><wps:bodyPr/></wps:wsp></a:graphicData></a:graphic></wp:anchor></w:drawing>"
        '</mc:Choice><mc:Fallback><w:pict><v:rect style="width:180pt;height:36pt"><v:textbox>'
        f"{body}</v:textbox></v:rect></w:pict></mc:Fallback></mc:AlternateContent></w:r>"))


def mark_header_row(row) -> None:
    """Mark a table row as a header row repeated on each page (``w:tblHeader``)."""
    tr = row._tr
    props = tr.find(f"{{{NS['w']}}}trPr")
    if props is None:
        props = xml_element("<w:trPr/>")
        tr.insert(1 if tr.find(f"{{{NS['w']}}}tblPrEx") is not None else 0, props)
    props.append(xml_element("<w:tblHeader/>"))


def set_alt_text(run, descr: str) -> None:
    for doc_pr in run._r.iter(f"{{{NS['wp']}}}docPr"):
        doc_pr.set("descr", descr)


def add_notes_parts(data: bytes, notes: dict[str, dict[int, str]]) -> bytes:
    """The DOCX with footnotes.xml / endnotes.xml parts holding ``notes`` (kind -> id -> text),
    their relationships and content types (python-docx cannot write notes)."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            body = src.read(item.filename)
            if item.filename == "[Content_Types].xml":
                overrides = "".join(
                    f'<Override PartName="/word/{kind}s.xml" ContentType="application/vnd.openxmlformats-'
                    f'officedocument.wordprocessingml.{kind}s+xml"/>' for kind in notes)
                body = body.replace(b"</Types>", overrides.encode() + b"</Types>")
            elif item.filename == "word/_rels/document.xml.rels":
                rels = "".join(
                    f'<Relationship Id="rIdNote{kind}" Type="http://schemas.openxmlformats.org/officeDocument/'
                    f'2006/relationships/{kind}s" Target="{kind}s.xml"/>' for kind in notes)
                body = body.replace(b"</Relationships>", rels.encode() + b"</Relationships>")
            dst.writestr(item, body)
        for kind, texts in notes.items():
            parts = [f'<w:{kind} w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:{kind}>',
                     f'<w:{kind} w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/>'
                     f"</w:r></w:p></w:{kind}>"]
            parts += [f'<w:{kind} w:id="{nid}"><w:p><w:r><w:{kind}Ref/></w:r><w:r><w:t xml:space="preserve"> '
                      f"{text}</w:t></w:r></w:p></w:{kind}>" for nid, text in texts.items()]
            dst.writestr(f"word/{kind}s.xml", f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
                         f'<w:{kind}s xmlns:w="{NS["w"]}">{"".join(parts)}</w:{kind}s>')
    return out.getvalue()


def _docx_bytes(document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def report_docx() -> tuple[bytes, str]:
    """Headings, a hyperlink, a footnote and an endnote, lists, a merged-cell table with a marked
    header row, a picture with alt text and caption, a text box, a nested table, a running header
    and footer (not in the reference: page furniture), a heading with nothing under it."""
    import docx
    from docx.shared import Inches

    d = docx.Document()
    d.core_properties.title = "Harbour operations review"
    d.core_properties.author = "Harbour office"
    d.sections[0].header.paragraphs[0].text = "Internal use only - harbour office"
    d.sections[0].footer.paragraphs[0].text = "Printed copies are not controlled"
    md = ["# Harbour operations review"]
    d.add_paragraph("Harbour operations review", style="Title")
    d.add_heading("Operations", level=1)
    md.append("## Operations")
    p = d.add_paragraph("The harbour handled more ships than ever before, as the ")
    add_hyperlink(p, "https://example.org/port-authority", "port authority")
    p.add_run(" reported in its yearly statement.")
    add_note_reference(p, "footnote", 1)
    md.append("The harbour handled more ships than ever before, as the port authority reported in its yearly "
              "statement.")
    md.append("Counted from the pilots' logbooks, not from the customs declarations.")
    d.add_paragraph("Tugs worked in two shifts through the winter, and the night shift was extended in March.")
    md.append("Tugs worked in two shifts through the winter, and the night shift was extended in March.")
    items = ["Dredging of the main channel finished in May.", "The new quay opened in June.",
             "A second pilot boat entered service in August."]
    for item in items:
        d.add_paragraph(item, style="List Bullet")
    md += [f"- {item}" for item in items]
    steps = ["Report the berth request to the harbour master.", "Wait for the pilot at the outer buoy."]
    for step in steps:
        d.add_paragraph(step, style="List Number")
    md += [f"{i}. {step}" for i, step in enumerate(steps, 1)]
    d.add_heading("Cargo", level=2)
    md.append("### Cargo")
    table = d.add_table(rows=5, cols=4)
    header = ["Quay", "Cargo", "Tonnes", "Ships"]
    body = [["North quay", "Grain", "412,000", "96"], ["North quay", "Timber", "188,500", "41"],
            ["South quay", "Containers", "1,240,300", "377"], ["Total", "Total", "1,840,800", "514"]]
    for cell, text in zip(table.rows[0].cells, header, strict=True):
        cell.text = text
    for r, row in enumerate(body, 1):
        for c, text in enumerate(row):
            if (r, c) not in ((2, 0), (4, 1)):
                table.cell(r, c).text = text
    table.cell(1, 0).merge(table.cell(2, 0))  # "North quay" over two rows (vMerge)
    table.cell(4, 0).merge(table.cell(4, 1))  # "Total" across two columns (gridSpan)
    mark_header_row(table.rows[0])
    md.append(md_table(header, body))
    d.add_paragraph("Containers grew fastest, while grain held steady against the previous year.")
    md.append("Containers grew fastest, while grain held steady against the previous year.")
    run = d.add_paragraph().add_run()
    run.add_picture(io.BytesIO(png(3)), width=Inches(2.5))
    set_alt_text(run, "The new container quay seen from the breakwater")
    d.add_paragraph("Figure 1: the new quay at dawn", style="Caption")
    md.append("![The new container quay seen from the breakwater](quay.png)")
    md.append("Figure 1: the new quay at dawn")
    d.add_heading("Outlook", level=1)
    md.append("## Outlook")
    p = d.add_paragraph("More ships will call once the canal is deepened to fourteen metres.")
    add_note_reference(p, "endnote", 1)
    md.append("More ships will call once the canal is deepened to fourteen metres.")
    md.append("The deepening was approved by the regional council in its autumn session.")
    add_text_box(d.add_paragraph(), "Key date: the canal reopens on 1 March.")
    md.append("Key date: the canal reopens on 1 March.")
    outer = d.add_table(rows=2, cols=2)
    outer.cell(0, 0).text, outer.cell(0, 1).text = "Project", "Schedule"
    outer.cell(1, 0).text = "Canal deepening"
    inner = outer.cell(1, 1).add_table(rows=3, cols=2)
    schedule = [["Phase", "Months"], ["Survey", "3"], ["Dredging", "14"]]
    for r, row in enumerate(schedule):
        for c, text in enumerate(row):
            inner.cell(r, c).text = text
    md.append(md_table(["Project", "Schedule"], [["Canal deepening", ""]]))
    md.append(md_table(schedule[0], schedule[1:]))
    d.add_heading("Appendix", level=1)
    md.append("## Appendix")
    data = add_notes_parts(_docx_bytes(d), {
        "footnote": {1: "Counted from the pilots' logbooks, not from the customs declarations."},
        "endnote": {1: "The deepening was approved by the regional council in its autumn session."}})
    return data, "\n\n".join(md) + "\n"


def minutes_docx() -> tuple[bytes, str]:
    """Meeting minutes: no title property (the first Heading 1 is the title), headings three deep,
    a heading marked only by its outline level, a table whose header is its first row (unmarked)."""
    import docx
    from docx.enum.text import WD_BREAK

    d = docx.Document()
    md: list[str] = []
    d.add_heading("Minutes of the quay committee", level=1)
    md.append("# Minutes of the quay committee")
    d.add_paragraph("Present: the harbour master, two pilots, the quay foremen and the safety officer.")
    md.append("Present: the harbour master, two pilots, the quay foremen and the safety officer.")
    d.add_heading("Decisions", level=2)
    md.append("## Decisions")
    d.add_heading("Berths", level=3)
    md.append("### Berths")
    p = d.add_paragraph("Berth seven closes for repairs from the second week of April.")
    p.add_run().add_break(WD_BREAK.LINE)
    p.add_run("Ships booked there move to berth nine.")
    md.append("Berth seven closes for repairs from the second week of April.\nShips booked there move to berth nine.")
    table = d.add_table(rows=3, cols=3)
    rows = [["Action", "Owner", "Due"], ["Order new fenders", "Quay foreman", "2026-04-01"],
            ["Survey berth seven", "Safety officer", "2026-04-08"]]
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    md.append(md_table(rows[0], rows[1:]))
    outline = d.add_paragraph("Any other business")
    outline.paragraph_format.element.get_or_add_pPr().append(xml_element('<w:outlineLvl w:val="1"/>'))
    md.append("## Any other business")
    d.add_paragraph("The next meeting is held on the first Monday of May in the pilots' station.")
    md.append("The next meeting is held on the first Monday of May in the pilots' station.")
    return _docx_bytes(d), "\n\n".join(md) + "\n"


# -- PowerPoint --------------------------------------------------------------------------------
def _set_descr(shape, descr: str) -> None:
    for el in shape.element.iter(f"{{{NS['p']}}}cNvPr"):
        el.set("descr", descr)
        return


def add_smartart(slide, items: list[str]) -> None:
    """A SmartArt diagram holding ``items``: its data part (python-pptx cannot write diagrams) and the
    graphic frame on the slide that names it."""
    from pptx.opc.package import Part
    from pptx.opc.packuri import PackURI

    dgm = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
    points = "".join(f'<dgm:pt modelId="{i + 1}"><dgm:t><a:bodyPr/><a:p><a:r><a:t>{text}</a:t></a:r></a:p></dgm:t>'
                     "</dgm:pt>" for i, text in enumerate(items))
    data = (f'<dgm:dataModel xmlns:dgm="{dgm}" xmlns:a="{NS["a"]}"><dgm:ptLst><dgm:pt modelId="0" type="doc"/>'
            f"{points}</dgm:ptLst></dgm:dataModel>").encode()
    part = Part(PackURI("/ppt/diagrams/data1.xml"),
                "application/vnd.openxmlformats-officedocument.drawingml.diagramData+xml", slide.part.package, data)
    rid = slide.part.relate_to(part, "http://schemas.openxmlformats.org/officeDocument/2006/relationships/diagramData")
    slide.shapes._spTree.append(xml_element(
        '<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id="90" name="Diagram 1"/><p:cNvGraphicFramePr/><p:nvPr/>'
        '</p:nvGraphicFramePr><p:xfrm><a:off x="914400" y="1600200"/><a:ext cx="7315200" cy="3000000"/></p:xfrm>'
        f'<a:graphic><a:graphicData uri="{dgm}"><dgm:relIds xmlns:dgm="{dgm}" r:dm="{rid}" r:lo="" r:qs="" '
        'r:cs=""/></a:graphicData></a:graphic></p:graphicFrame>'))


def deck_pptx() -> tuple[bytes, str]:
    """A title slide, bullets on three levels with a hyperlink, a table with a merged cell, a
    picture with alt text, a group of text boxes laid out in two columns, a SmartArt diagram, an
    untitled slide, and speaker notes."""
    from pptx import Presentation
    from pptx.util import Inches, Pt

    prs = Presentation()
    prs.core_properties.title = "Quarterly harbour briefing"
    md = ["# Quarterly harbour briefing"]
    slide = prs.slides.add_slide(prs.slide_layouts[0])
    slide.shapes.title.text = "Quarterly harbour briefing"
    slide.placeholders[1].text = "Prepared by the harbour office for the port board"
    md.append("Prepared by the harbour office for the port board")

    slide = prs.slides.add_slide(prs.slide_layouts[1])
    slide.shapes.title.text = "Highlights"
    md.append("## Highlights")
    frame = slide.placeholders[1].text_frame
    bullets = [("Record traffic in the third quarter", 0), ("Container volume up by a fifth", 1),
               ("Grain steady", 1), ("Night pilotage now runs every day", 0),
               ("Two more pilots trained", 1), ("One still on probation", 2)]
    frame.text = bullets[0][0]
    for text, level in bullets[1:]:
        para = frame.add_paragraph()
        para.text = text
        para.level = level
    para = frame.add_paragraph()
    para.add_run().text = "Details on the "
    link = para.add_run()
    link.text = "port statistics page"
    link.hyperlink.address = "https://example.org/port/statistics"
    md += [f"{'  ' * level}- {text}" for text, level in bullets]
    md.append("- Details on the port statistics page")
    notes = "Stress that the night pilotage figures are provisional until the audit in January."
    slide.notes_slide.notes_text_frame.text = notes
    md.append(notes)

    slide = prs.slides.add_slide(prs.slide_layouts[5])
    slide.shapes.title.text = "Traffic by quay"
    md.append("## Traffic by quay")
    rows = [["Quay", "Quarter", "Ships"], ["North quay", "Q2", "212"], ["North quay", "Q3", "240"],
            ["South quay", "Q3", "377"]]
    shape = slide.shapes.add_table(4, 3, Inches(1), Inches(1.6), Inches(8), Inches(2.5))
    table = shape.table
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            if (r, c) != (2, 0):
                table.cell(r, c).text = text
    table.cell(1, 0).merge(table.cell(2, 0))
    md.append(md_table(rows[0], rows[1:]))

    slide = prs.slides.add_slide(prs.slide_layouts[5])
    slide.shapes.title.text = "The new quay"
    md.append("## The new quay")
    pic = slide.shapes.add_picture(io.BytesIO(png(5, 200, 120)), Inches(1), Inches(2), Inches(4), Inches(2.4))
    _set_descr(pic, "Aerial view of the new container quay")
    md.append("![Aerial view of the new container quay](quay.png)")
    box = slide.shapes.add_textbox(Inches(5.5), Inches(2), Inches(3.5), Inches(2))
    box.text_frame.text = "Opened in June with four cranes and room for two large ships."
    md.append("Opened in June with four cranes and room for two large ships.")

    slide = prs.slides.add_slide(prs.slide_layouts[5])
    slide.shapes.title.text = "Before and after"
    md.append("## Before and after")
    group = slide.shapes.add_group_shape()
    texts = [(Inches(0.5), Inches(2), "Before: ships waited two days at anchor for a berth."),
             (Inches(5), Inches(2), "After: the average wait fell to nine hours."),
             (Inches(0.5), Inches(4), "Source: pilots' logbooks for both years.")]
    for left, top, text in reversed(texts):  # written out of reading order on purpose
        tb = group.shapes.add_textbox(left, top, Inches(4), Inches(1))
        tb.text_frame.text = text
        tb.text_frame.paragraphs[0].runs[0].font.size = Pt(16)
    md += [text for _, _, text in texts]

    slide = prs.slides.add_slide(prs.slide_layouts[5])
    slide.shapes.title.text = "Reopening plan"
    md.append("## Reopening plan")
    steps = ["Survey the channel", "Dredge to fourteen metres", "Reopen to large ships"]
    add_smartart(slide, steps)
    md += [f"- {step}" for step in steps]

    slide = prs.slides.add_slide(prs.slide_layouts[6])
    box = slide.shapes.add_textbox(Inches(1), Inches(1), Inches(8), Inches(1))
    box.text_frame.text = "Questions and answers"
    md.append("## Slide 7")
    md.append("Questions and answers")
    out = io.BytesIO()
    prs.save(out)
    return out.getvalue(), "\n\n".join(md) + "\n"


# -- Excel -------------------------------------------------------------------------------------
def add_cached_values(data: bytes, values: dict[tuple[str, str], str]) -> bytes:
    """The XLSX with the values of formula cells cached as Excel caches them ((sheet path, cell) ->
    value): openpyxl writes a formula without its value."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            body = src.read(item.filename).decode("utf-8") if item.filename.endswith(".xml") else None
            if body is not None:
                for (path, ref), value in values.items():
                    if item.filename == path:
                        body, n = re.subn(rf'(<c r="{ref}"[^>]*><f>[^<]*</f>)<v></v>', rf"\g<1><v>{value}</v>", body)
                        if n != 1:
                            raise ValueError(f"no formula cell {ref} in {path}")
                dst.writestr(item, body)
            else:
                dst.writestr(item, src.read(item.filename))
    return out.getvalue()


def ledger_xlsx() -> tuple[bytes, str]:
    """Three sheets: sales under a merged title row (integers, decimals, thousands, a percentage,
    dates, a formula with its cached value, two cells with hyperlinks), a notes sheet of two tables
    parted by a blank row, and a hidden lookup sheet."""
    import openpyxl

    book = openpyxl.Workbook()
    book.properties.title = "Harbour ledger 2025"
    sales = book.active
    sales.title = "Sales"
    md = ["# Harbour ledger 2025", "## Sales", "Quarterly dues by quay"]
    sales["B2"] = "Quarterly dues by quay"
    sales.merge_cells("B2:F2")
    header = ["Quay", "Quarter start", "Dues", "Ships", "Share"]
    rows = [["North quay", dt.date(2025, 1, 1), 125000.5, 212, 0.305],
            ["South quay", dt.date(2025, 4, 1), 98200.0, 180, 0.24],
            ["East quay", dt.date(2025, 7, 1), 187000.25, 377, 0.455]]
    sales.append([])
    for r, row in enumerate([header, *rows], 3):
        for c, value in enumerate(row, 2):
            cell = sales.cell(row=r, column=c, value=value)
            if c == 4 and r > 3:
                cell.number_format = "#,##0.00"
            elif c == 6 and r > 3:
                cell.number_format = "0.0%"
            elif c == 3 and r > 3:
                cell.number_format = "yyyy-mm-dd"
    sales["B4"].hyperlink = "https://example.org/quays/north"
    sales["B5"].hyperlink = "quays/south.xlsx"  # relative: beside the workbook
    sales["B7"] = "All quays"
    sales["E7"] = "=SUM(E4:E6)"
    shown = [["North quay", "2025-01-01", "125,000.50", "212", "30.5%"],
             ["South quay", "2025-04-01", "98,200.00", "180", "24.0%"],
             ["East quay", "2025-07-01", "187,000.25", "377", "45.5%"],
             ["All quays", "", "", "769", ""]]
    md.append(md_table(header, shown))

    notes = book.create_sheet("Notes")
    md.append("## Notes")
    first = [["Inspector", "Visits"], ["A. Berg", 14], ["C. Dunn", 9]]
    second = [["Crane", "Lift tonnes", "Serviced"], ["Crane 1", 40, dt.datetime(2025, 3, 2, 9, 30)],
              ["Crane 2", 65, dt.datetime(2025, 5, 20, 14, 0)]]
    for row in first:
        notes.append(row)
    notes.append([])
    notes.append([])
    for row in second:
        notes.append(row)
    md.append(md_table(first[0], [[str(v) for v in r] for r in first[1:]]))
    md.append(md_table(second[0], [["Crane 1", "40", "2025-03-02 09:30"], ["Crane 2", "65", "2025-05-20 14:00"]]))

    lookup = book.create_sheet("Lookup")
    lookup.sheet_state = "hidden"
    md.append("## Lookup")
    codes = [["Code", "Quay name"], ["NQ", "North quay"], ["SQ", "South quay"], ["EQ", "East quay"]]
    for row in codes:
        lookup.append(row)
    md.append(md_table(codes[0], codes[1:]))
    out = io.BytesIO()
    book.save(out)
    data = add_cached_values(out.getvalue(), {("xl/worksheets/sheet1.xml", "E7"): "769"})
    return data, "\n\n".join(md) + "\n"


def big_xlsx(rows: int = 250) -> bytes:
    """One sheet of ``rows`` data rows under a header (for the row cap)."""
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Readings"
    sheet.append(["Station", "Reading"])
    for i in range(rows):
        sheet.append([f"Station {i}", i * 3])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


# -- CSV ---------------------------------------------------------------------------------------
def _csv_text(rows: list[list[str]], delimiter: str = ",") -> str:
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
    return out.getvalue()


STATIONS = [["Station", "Region", "Depth m", "Opened"],
            ["Outer buoy", "North Sea, west", "14.5", "1998-05-01"],
            ["Pilot station", "Estuary", "9", "2004-11-12"],
            ["Lock gate \"B\"", "Canal", "12.25", "2011-02-28"],
            ["Grain silo pier", "Inner harbour", "11", "1975-07-19"]]
PRICES = [["Produit", "Qualité", "Prix €", "Unité"],
          ["Blé", "Supérieure", "212,50", "tonne"],
          ["Orge", "Brassicole", "198,00", "tonne"],
          ["Maïs", "Standard", "187,25", "tonne"]]
READINGS = [["Gauge", "Time", "Level cm", "Note"],
            ["Quay 1", "06:00", "312", "rising tide"],
            ["Quay 1", "12:00", "298", "slack water"],
            ["Quay 2", "06:00", "305", "swell from the west, gusts"]]


def stations_csv() -> tuple[bytes, str]:
    """Comma-separated UTF-8 with quoted fields holding commas and quotes."""
    return _csv_text(STATIONS).encode("utf-8"), "# stations.csv\n\n" + md_table(STATIONS[0], STATIONS[1:]) + "\n"


def prices_csv() -> tuple[bytes, str]:
    """Semicolon-separated Windows-1252 (a French export: decimal commas, accented words)."""
    return (_csv_text(PRICES, ";").encode("cp1252"),
            "# prices.csv\n\n" + md_table(PRICES[0], PRICES[1:]) + "\n")


def readings_csv() -> tuple[bytes, str]:
    """Tab-separated values under a .csv name, with a byte-order mark."""
    return (b"\xef\xbb\xbf" + _csv_text(READINGS, "\t").encode("utf-8"),
            "# readings.csv\n\n" + md_table(READINGS[0], READINGS[1:]) + "\n")


# -- OLE compound files (legacy and password-protected Office files) -----------------------------
def ole_file(streams: dict[str, bytes]) -> bytes:
    """A compound file (CFB version 3, 512-byte sectors) holding ``streams`` at the root, each padded
    to 4,096 bytes so that it lives in regular sectors: the container of a password-protected OOXML
    file (streams EncryptionInfo, EncryptedPackage) or of a legacy .doc/.xls (WordDocument, Workbook)."""
    import struct

    free, end, fat_sector = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD
    names = list(streams)
    datas = [streams[n].ljust(4096, b"\0") for n in names]
    counts = [len(d) // 512 for d in datas]
    fat = [fat_sector, end]  # sector 0: the FAT, sector 1: the directory
    starts = []
    for count in counts:
        starts.append(len(fat))
        fat += [len(fat) + i + 1 for i in range(count - 1)] + [end]
    fat += [free] * (128 - len(fat))

    def entry(name: str, kind: int, child: int, right: int, start: int, size: int) -> bytes:
        encoded = name.encode("utf-16-le") + b"\0\0"
        return (encoded.ljust(64, b"\0") + struct.pack("<HBB3I", len(encoded), kind, 1, free, right, child)
                + b"\0" * 36 + struct.pack("<IQ", start, size))

    # the root's children form a tree by (length, name): each entry's right sibling is the next
    order = sorted(range(len(names)), key=lambda i: (len(names[i]), names[i].upper()))
    directory = entry("Root Entry", 5, order[0] + 1 if order else free, free, end, 0)
    for rank, i in enumerate(order):
        right = order[rank + 1] + 1 if rank + 1 < len(order) else free
        directory += entry(names[i], 2, free, right, starts[i], len(datas[i]))
    directory = directory.ljust(512, b"\0")
    header = (bytes.fromhex("d0cf11e0a1b11ae1") + b"\0" * 16 + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6)
              + b"\0" * 6 + struct.pack("<IIIIIIIII", 0, 1, 1, 0, 4096, end, 0, end, 0)
              + struct.pack("<I", 0) + struct.pack("<I", free) * 108)
    return header + struct.pack("<128I", *fat) + directory + b"".join(datas)


def encrypted_docx() -> bytes:
    """A password-protected DOCX as Office writes it: the encrypted package in an OLE compound file."""
    return ole_file({"EncryptionInfo": b"\x04\x00\x04\x00\x40\x00\x00\x00", "EncryptedPackage": bytes(range(256)) * 8})


def legacy_doc() -> bytes:
    """A Word 97-2003 file's container (an OLE compound file with a WordDocument stream)."""
    return ole_file({"WordDocument": b"\xec\xa5\xc1\x00" + b"\0" * 60, "1Table": b"\0" * 64})


DOCUMENTS: dict[str, Callable[[], tuple[bytes, str]]] = {
    "report.docx": report_docx,
    "minutes.docx": minutes_docx,
    "deck.pptx": deck_pptx,
    "ledger.xlsx": ledger_xlsx,
    "stations.csv": stations_csv,
    "prices.csv": prices_csv,
    "readings.csv": readings_csv,
}
