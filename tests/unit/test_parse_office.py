"""Word, PowerPoint, Excel and CSV parsing through ``laminae.tasks.parse.parse`` (the content type
sniffed from the bytes and the name), on files their own libraries write (tests/support/office_docs.py)."""

from __future__ import annotations

import io
import zipfile

import pytest

from laminae.tasks.config import ParseConfig
from laminae.tasks.crawl.formats import DOCX_TYPE, PPTX_TYPE, XLSX_TYPE
from laminae.tasks.parse import parse
from laminae.tasks.parse.document import Component, ParsedPage, ParseError
from tests.support import office_docs as docs

BASE = "file:///srv/share/reports/"


def parsed(name: str, data: bytes | None = None, **kwargs) -> ParsedPage:
    return parse(data if data is not None else docs.DOCUMENTS[name]()[0], BASE + name, **kwargs)


def find(page: ParsedPage, needle: str, kind: str | None = None) -> Component:
    hits = [c for c in page.components if needle in c.text and (kind is None or c.kind == kind)]
    assert len(hits) == 1, f"{needle!r}: {len(hits)} components"
    return hits[0]


def index_of(page: ParsedPage, comp: Component) -> int:
    return next(i for i, c in enumerate(page.components) if c is comp)


@pytest.fixture(scope="module")
def report() -> ParsedPage:
    return parsed("report.docx")


@pytest.fixture(scope="module")
def deck() -> ParsedPage:
    return parsed("deck.pptx")


@pytest.fixture(scope="module")
def ledger() -> ParsedPage:
    return parsed("ledger.xlsx")


# -- Word --------------------------------------------------------------------------------------
def test_docx_headings_are_section_paths(report: ParsedPage) -> None:
    assert report.kind == "docx"
    assert report.title == "Harbour operations review"
    assert find(report, "Tugs worked").section_path == ["Harbour operations review", "Operations"]
    assert find(report, "North quay", "table").section_path == ["Harbour operations review", "Operations", "Cargo"]
    assert find(report, "canal is deepened").section_path == ["Harbour operations review", "Outlook"]
    assert report.meta["author"] == "Harbour office"


def test_docx_heading_with_nothing_under_it_is_a_paragraph(report: ParsedPage) -> None:
    appendix = report.components[-1]
    assert (appendix.kind, appendix.text, appendix.section_path) == ("paragraph", "Appendix",
                                                                     ["Harbour operations review"])


def test_docx_title_from_first_heading_and_outline_levels() -> None:
    page = parsed("minutes.docx")
    assert page.title == "Minutes of the quay committee"
    assert find(page, "next meeting").section_path == ["Minutes of the quay committee", "Any other business"]
    berth = find(page, "Berth seven")
    assert berth.section_path == ["Minutes of the quay committee", "Decisions", "Berths"]
    assert berth.text.endswith("April.\nShips booked there move to berth nine.")


def test_docx_title_from_file_name() -> None:
    import docx

    d = docx.Document()
    d.add_paragraph("A note without any heading at all.")
    page = parsed("plain note.docx", docx_bytes(d))
    assert page.title == "plain note.docx"
    assert [c.text for c in page.components] == ["A note without any heading at all."]


def test_docx_list_items_are_segments(report: ParsedPage) -> None:
    comp = find(report, "Dredging of the main channel")
    items = [comp.text[s:e] for s, e in comp.segments or []]
    assert items == ["Dredging of the main channel finished in May.", "The new quay opened in June.",
                     "A second pilot boat entered service in August.",
                     "Report the berth request to the harbour master.", "Wait for the pilot at the outer buoy."]


def test_docx_merged_cells_repeat_and_marked_header(report: ParsedPage) -> None:
    table = find(report, "North quay", "table")
    assert table.header == ["Quay", "Cargo", "Tonnes", "Ships"]
    assert table.rows == [["North quay", "Grain", "412,000", "96"], ["North quay", "Timber", "188,500", "41"],
                          ["South quay", "Containers", "1,240,300", "377"], ["Total", "Total", "1,840,800", "514"]]


def test_docx_several_header_rows_are_joined() -> None:
    import docx

    d = docx.Document()
    table = d.add_table(rows=4, cols=3)
    rows = [["Quay", "2024", "2024"], ["", "Ships", "Tonnes"], ["North", "96", "412"], ["South", "81", "390"]]
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    docs.mark_header_row(table.rows[0])
    docs.mark_header_row(table.rows[1])
    comp = parsed("header.docx", docx_bytes(d)).components[0]
    assert comp.header == ["Quay", "2024 / Ships", "2024 / Tonnes"]
    assert comp.rows == [["North", "96", "412"], ["South", "81", "390"]]


def test_docx_header_cell_merged_down_makes_two_header_rows() -> None:
    import docx

    d = docx.Document()
    table = d.add_table(rows=4, cols=3)
    table.cell(0, 0).merge(table.cell(1, 0)).text = "Quay"
    table.cell(0, 1).merge(table.cell(0, 2)).text = "2025"
    for r, row in enumerate([["", "Ships", "Tonnes"], ["North", "96", "412"], ["South", "81", "390"]], 1):
        for c, text in enumerate(row):
            if text:
                table.cell(r, c).text = text
    comp = parsed("merged-header.docx", docx_bytes(d)).components[0]
    assert comp.header == ["Quay", "2025 / Ships", "2025 / Tonnes"]
    assert comp.rows == [["North", "96", "412"], ["South", "81", "390"]]


def test_docx_title_row_across_the_table_is_its_caption() -> None:
    import docx

    d = docx.Document()
    d.add_paragraph("Table 2: dues by quay", style="Caption")
    table = d.add_table(rows=3, cols=2)
    table.cell(0, 0).merge(table.cell(0, 1)).text = "Dues in 2025"
    for r, row in enumerate([["Quay", "Dues"], ["North", "125,000"]], 1):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    [comp] = parsed("dues.docx", docx_bytes(d)).components
    assert comp.caption == "Table 2: dues by quay / Dues in 2025"
    assert (comp.header, comp.rows) == (["Quay", "Dues"], [["North", "125,000"]])


def test_docx_document_order_and_nested_table_read_once(report: ParsedPage) -> None:
    cargo = find(report, "North quay", "table")
    after = find(report, "Containers grew fastest")
    image = next(c for c in report.components if c.kind == "image")
    assert index_of(report, cargo) < index_of(report, after) < index_of(report, image)
    outer = find(report, "Canal deepening", "table")
    nested = find(report, "Dredging", "table")
    assert (outer.header, outer.rows) == (["Project", "Schedule"], [["Canal deepening", ""]])
    assert (nested.header, nested.rows) == (["Phase", "Months"], [["Survey", "3"], ["Dredging", "14"]])
    assert index_of(report, nested) == index_of(report, outer) + 1


def test_docx_picture_bytes_alt_and_caption(report: ParsedPage) -> None:
    images = [c for c in report.components if c.kind == "image"]
    assert len(images) == 1
    image = images[0]
    assert image.image_data is not None and image.image_data.startswith(b"\x89PNG")
    assert image.image_mime == "image/png"
    assert image.alt == "The new container quay seen from the breakwater"
    assert image.caption == "Figure 1: the new quay at dawn"
    assert "The new container quay seen from the breakwater" in image.text
    assert not [c for c in report.components if c.kind == "paragraph" and c.text.startswith("Figure 1")]


def test_docx_hyperlinks_with_offsets(report: ParsedPage) -> None:
    comp = find(report, "port authority")
    [link] = comp.links
    assert link.url == "https://example.org/port-authority"
    assert comp.text[link.start:link.end] == link.anchor == "port authority"


def test_docx_relative_hyperlinks_resolve_against_the_file() -> None:
    import docx

    d = docx.Document()
    p = d.add_paragraph("See the ")
    docs.add_hyperlink(p, "../guides/berths.docx#booking", "berth guide")
    p.add_run(" and the ")
    docs.add_hyperlink(p, "mailto:office@example.org", "office")
    comp = parsed("links.docx", docx_bytes(d)).components[0]
    assert [(lk.url, lk.anchor) for lk in comp.links] == [("file:///srv/share/guides/berths.docx", "berth guide")]


def test_docx_notes_follow_the_citing_paragraph(report: ParsedPage) -> None:
    cited = find(report, "port authority")
    note = find(report, "pilots' logbooks")
    assert index_of(report, note) == index_of(report, cited) + 1
    assert note.section_path == cited.section_path
    endnote = find(report, "regional council")
    assert index_of(report, endnote) == index_of(report, find(report, "canal is deepened")) + 1


def test_docx_text_box_once_running_header_and_footer_dropped(report: ParsedPage) -> None:
    text = "\n".join(c.text for c in report.components)
    assert text.count("Key date: the canal reopens on 1 March.") == 1
    assert "Internal use only" not in text and "Printed copies" not in text


def test_docx_drop_cap_joins_its_word() -> None:
    import docx

    d = docx.Document()
    cap = d.add_paragraph("W")
    cap._p.get_or_add_pPr().append(docs.xml_element('<w:framePr w:dropCap="drop" w:lines="3"/>'))
    d.add_paragraph("hen the tide turned, the pilots went out.")
    assert [c.text for c in parsed("cap.docx", docx_bytes(d)).components] == [
        "When the tide turned, the pilots went out."]


def test_docx_main_part_under_another_name() -> None:
    data = docs.DOCUMENTS["minutes.docx"]()[0]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z, zipfile.ZipFile(io.BytesIO(data)) as src:
        for item in src.infolist():
            body = src.read(item.filename)
            name = "word/main.xml" if item.filename == "word/document.xml" else item.filename
            if item.filename == "word/_rels/document.xml.rels":
                name = "word/_rels/main.xml.rels"
            body = body.replace(b"/word/document.xml", b"/word/main.xml").replace(b'"word/document.xml"',
                                                                                   b'"word/main.xml"')
            z.writestr(name, body)
    page = parse(out.getvalue(), BASE + "main.docx", DOCX_TYPE)  # no word/document.xml to sniff by
    assert page.title == "Minutes of the quay committee" and len(page.components) == 4


# -- PowerPoint --------------------------------------------------------------------------------
def test_pptx_slide_titles_are_sections(deck: ParsedPage) -> None:
    assert deck.kind == "pptx"
    assert deck.title == "Quarterly harbour briefing"
    assert find(deck, "Prepared by the harbour office").section_path == ["Quarterly harbour briefing"]
    assert find(deck, "Questions and answers").section_path == ["Slide 7"]
    assert find(deck, "four cranes").section_path == ["The new quay"]


def test_pptx_bullets_are_segments_with_links(deck: ParsedPage) -> None:
    comp = find(deck, "Record traffic")
    items = [comp.text[s:e] for s, e in comp.segments or []]
    assert items[:3] == ["Record traffic in the third quarter", "Container volume up by a fifth", "Grain steady"]
    assert len(items) == 7
    [link] = comp.links
    assert link.url == "https://example.org/port/statistics"
    assert comp.text[link.start:link.end] == "port statistics page"


def test_pptx_speaker_notes_are_marked(deck: ParsedPage) -> None:
    notes = find(deck, "provisional until the audit")
    assert notes.section_path == ["Highlights", "Notes"]


def test_pptx_table_merged_cells_and_header(deck: ParsedPage) -> None:
    table = find(deck, "North quay", "table")
    assert table.header == ["Quay", "Quarter", "Ships"]
    assert table.rows == [["North quay", "Q2", "212"], ["North quay", "Q3", "240"], ["South quay", "Q3", "377"]]


def test_pptx_picture_and_group_reading_order(deck: ParsedPage) -> None:
    [image] = [c for c in deck.components if c.kind == "image"]
    assert image.alt == "Aerial view of the new container quay" and image.image_data.startswith(b"\x89PNG")
    assert image.section_path == ["The new quay"]
    order = [index_of(deck, find(deck, text)) for text in ("Before: ships", "After: the average", "Source: pilots")]
    assert order == sorted(order)


def test_pptx_smartart_items_are_segments(deck: ParsedPage) -> None:
    comp = find(deck, "Survey the channel")
    assert comp.section_path == ["Reopening plan"]
    assert [comp.text[s:e] for s, e in comp.segments or []] == ["Survey the channel", "Dredge to fourteen metres",
                                                                 "Reopen to large ships"]


def test_pptx_title_from_first_slide() -> None:
    from pptx import Presentation

    prs = Presentation()
    prs.core_properties.title = "PowerPoint Presentation"
    prs.slides.add_slide(prs.slide_layouts[5]).shapes.title.text = "Berth allocation"
    slide = prs.slides.add_slide(prs.slide_layouts[5])
    slide.shapes.title.text = "Only a title"
    prs.slides.add_slide(prs.slide_layouts[6])  # untitled and empty: nothing, not "Slide 3"
    out = io.BytesIO()
    prs.save(out)
    page = parsed("allocation.pptx", out.getvalue())
    assert page.title == "Berth allocation"
    assert [(c.text, c.section_path) for c in page.components] == [("Berth allocation", []), ("Only a title", [])]


# -- Excel -------------------------------------------------------------------------------------
def test_xlsx_sheets_are_tables_with_headers_and_shown_values(ledger: ParsedPage) -> None:
    assert ledger.kind == "xlsx" and ledger.title == "Harbour ledger 2025"
    sales = find(ledger, "125,000.50", "table")
    assert sales.caption == "Sales / Quarterly dues by quay"
    assert sales.section_path == ["Sales"]
    assert sales.header == ["Quay", "Quarter start", "Dues", "Ships", "Share"]
    assert sales.rows == [["North quay", "2025-01-01", "125,000.50", "212", "30.5%"],
                          ["South quay", "2025-04-01", "98,200.00", "180", "24.0%"],
                          ["East quay", "2025-07-01", "187,000.25", "377", "45.5%"],
                          ["All quays", "", "", "769", ""]]  # 769: the formula's cached value
    assert [(lk.url, lk.anchor, lk.row) for lk in sales.links] == [
        ("https://example.org/quays/north", "North quay", 0),
        ("file:///srv/share/reports/quays/south.xlsx", "South quay", 1)]


def test_xlsx_blocks_split_and_hidden_sheet_kept(ledger: ParsedPage) -> None:
    tables = [(c.caption, c.header, c.rows) for c in ledger.components if c.section_path != ["Sales"]]
    assert tables == [
        ("Notes", ["Inspector", "Visits"], [["A. Berg", "14"], ["C. Dunn", "9"]]),
        ("Notes", ["Crane", "Lift tonnes", "Serviced"], [["Crane 1", "40", "2025-03-02 09:30"],
                                                         ["Crane 2", "65", "2025-05-20 14:00"]]),
        ("Lookup", ["Code", "Quay name"], [["NQ", "North quay"], ["SQ", "South quay"], ["EQ", "East quay"]])]


def test_xlsx_row_cap_is_a_warning() -> None:
    page = parsed("readings.xlsx", docs.big_xlsx(250), cfg=ParseConfig(max_sheet_rows=100))
    [table] = page.components
    assert table.header == ["Station", "Reading"] and len(table.rows or []) == 99
    assert table.rows[-1] == ["Station 98", "294"]
    assert page.warnings == ["rows_cut: sheet Readings: kept 100 of 251 rows"]


def test_xlsx_numbers_only_have_no_header() -> None:
    import openpyxl

    book = openpyxl.Workbook()
    for row in [[1, 2.5], [3, 4.0], [5, 6.25]]:
        book.active.append(row)
    out = io.BytesIO()
    book.save(out)
    [table] = parsed("numbers.xlsx", out.getvalue()).components
    assert table.header is None and table.rows == [["1", "2.5"], ["3", "4"], ["5", "6.25"]]


# -- CSV ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "rows"), [("stations.csv", docs.STATIONS), ("prices.csv", docs.PRICES),
                                            ("readings.csv", docs.READINGS)])
def test_csv_delimiters_and_encodings(name: str, rows: list[list[str]]) -> None:
    page = parsed(name)
    assert page.kind == "csv" and page.title == name and not page.warnings
    [table] = page.components
    assert table.header == rows[0] and table.rows == rows[1:]


def test_csv_without_header_row_cap_and_huge_field() -> None:
    body = "".join(f"{i},{i * 2}\n" for i in range(30)).encode()
    page = parsed("pairs.csv", body, cfg=ParseConfig(max_sheet_rows=10))
    [table] = page.components
    assert table.header is None and table.rows[:2] == [["0", "0"], ["1", "2"]] and len(table.rows) == 10
    assert page.warnings == ["rows_cut: sheet pairs.csv: kept 10 of 30 rows"]
    huge = b"Name,Note\nshort,fine\nlong," + b"x" * 1_200_000 + b"\nafter,lost\n"
    page = parsed("huge.csv", huge)
    assert page.components[0].rows == [["short", "fine"]]
    assert page.warnings and page.warnings[0].startswith("csv_error: line ")


def test_csv_tsv_name_and_years_as_labels() -> None:
    [table] = parsed("dues.tsv", b"Region\t2024\t2025\nNorth\t125,000\t131,500\nSouth\t98,200\t97,000\n").components
    assert table.header == ["Region", "2024", "2025"]
    assert table.rows == [["North", "125,000", "131,500"], ["South", "98,200", "97,000"]]
    [years] = parsed("years.csv", b"2019,2020,2021\n2022,2023,2024\n").components
    assert years.header is None


def test_csv_one_column_header_only_above_numbers() -> None:
    [names] = parsed("pilots.csv", b"Anna Berg\nCarl Dunn\nEva Holm\n").components
    assert names.header is None and names.rows == [["Anna Berg"], ["Carl Dunn"], ["Eva Holm"]]
    [depths] = parsed("depths.csv", b"Depth\n14.5\n9\n12.25\n").components
    assert depths.header == ["Depth"] and depths.rows == [["14.5"], ["9"], ["12.25"]]


# -- bad input ---------------------------------------------------------------------------------
def reason(data: bytes, name: str, content_type: str | None = None) -> str:
    with pytest.raises(ParseError) as caught:
        parse(data, BASE + name, content_type)
    return caught.value.reason


def test_not_a_zip_with_an_office_name_is_unparsable() -> None:
    assert reason(b"this is a plain text file, not a Word document\n", "notes.docx") == "unparsable_docx"
    assert reason(b"plain words, not slides\n", "talk.pptx") == "unparsable_pptx"
    assert reason(b"plain words, not cells\n", "book.xlsx") == "unparsable_xlsx"


def test_truncated_files_are_unparsable() -> None:
    # the server's (or the file name's) type: a cut zip has no member list to sniff
    for name, content_type, fmt in (("report.docx", DOCX_TYPE, "docx"), ("deck.pptx", PPTX_TYPE, "pptx"),
                                    ("ledger.xlsx", XLSX_TYPE, "xlsx")):
        data = docs.DOCUMENTS[name]()[0]
        assert reason(data[: len(data) // 2], name, content_type) == f"unparsable_{fmt}"


def test_a_workbook_named_docx_is_read_as_a_workbook() -> None:
    page = parsed("ledger.docx", docs.DOCUMENTS["ledger.xlsx"]()[0])
    assert page.kind == "xlsx" and page.components


def test_a_zip_of_another_format_is_unparsable() -> None:
    data = docs.DOCUMENTS["ledger.xlsx"]()[0]
    assert reason(data, "ledger.docx", DOCX_TYPE) == "unparsable_docx"


def test_zip_bomb() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        with zipfile.ZipFile(io.BytesIO(docs.DOCUMENTS["report.docx"]()[0])) as src:
            for item in src.infolist():
                z.writestr(item, src.read(item.filename))
        z.writestr("word/media/padding.bin", b"\0" * 5_000_000)
    assert len(out.getvalue()) < 100_000
    with pytest.raises(ParseError) as caught:
        parse(out.getvalue(), BASE + "bomb.docx", cfg=ParseConfig(max_unzipped_bytes=2_000_000))
    assert caught.value.reason == "zip_bomb"


def test_ole_files_encrypted_or_legacy() -> None:
    # a compound file named or served as an Office Open XML file is sniffed as what it claims
    assert reason(docs.encrypted_docx(), "secret.docx") == "encrypted_document"
    assert reason(docs.encrypted_docx(), "secret.xlsx", XLSX_TYPE) == "encrypted_document"
    assert reason(docs.legacy_doc(), "old.docx") == "unparsable_docx"


def test_strict_open_xml_docx_is_unparsable() -> None:
    data = docs.DOCUMENTS["minutes.docx"]()[0]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z, zipfile.ZipFile(io.BytesIO(data)) as src:
        for item in src.infolist():
            body = src.read(item.filename)
            if item.filename == "word/document.xml":  # ISO 29500 Strict's namespace, which python-docx does not read
                body = body.replace(docs.NS["w"].encode(), b"http://purl.oclc.org/ooxml/wordprocessingml/main")
            z.writestr(item, body)
    assert reason(out.getvalue(), "strict.docx") == "unparsable_docx"


def test_damaged_part_inside_a_good_zip() -> None:
    data = docs.DOCUMENTS["report.docx"]()[0]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z, zipfile.ZipFile(io.BytesIO(data)) as src:
        for item in src.infolist():
            body = src.read(item.filename)
            z.writestr(item, body[:200] if item.filename == "word/document.xml" else body)
    assert reason(out.getvalue(), "damaged.docx") == "unparsable_docx"


@pytest.mark.parametrize("name", ["report.docx", "deck.pptx", "ledger.xlsx"])
def test_each_part_cut_short_is_a_parse_error_or_a_page(name: str) -> None:
    data = docs.DOCUMENTS[name]()[0]
    with zipfile.ZipFile(io.BytesIO(data)) as src:
        members = {i.filename: src.read(i.filename) for i in src.infolist()}
    for victim in [m for m in members if m.endswith((".xml", ".rels"))]:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            for member, body in members.items():
                z.writestr(member, body[: len(body) // 2] if member == victim else body)
        try:
            page = parse(out.getvalue(), BASE + name)
        except ParseError as exc:
            assert exc.reason == f"unparsable_{name.rsplit('.', 1)[1]}", victim
        else:
            assert isinstance(page, ParsedPage), victim


def docx_bytes(document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()
