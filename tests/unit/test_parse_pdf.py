"""PDF parsing on PDFs the tests write with pymupdf: known paragraphs, headings, tables, images, links."""

from __future__ import annotations

import pytest

from laminae.schemas import document_id
from laminae.tasks.config import ParseConfig
from laminae.tasks.crawl.hrefs import extract_pdf_links
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.nodes.document_nodes import build_nodes
from laminae.tasks.parse.pdf import PdfError, parse_pdf
from tests.conftest import GOLDEN, ROOT, golden_text
from tests.support.synthetic_pdf import LOREM, PdfWriter, png, report_pdf

pymupdf = pytest.importorskip("pymupdf")  # part of the build extra: installed by `make test`

URL = "http://127.0.0.1:9/reports/harbour.pdf"


def harbour_pdf(outline: bool = True) -> bytes:
    w = PdfWriter(title="Harbour annual report", running_header="Harbour annual report 2025 - internal")
    w.heading("Harbour annual report", 1)
    w.heading("Operations", 2)
    w.paragraph("The harbour handled more ships than ever. Tugs worked in two shifts. "
                "See the port authority for the details.", links={"port authority": "https://example.org/port"})
    w.lines(["Dredging of the main chan-", "nel finished in May, and the new quay", "opened in June."])
    w.heading("Cargo", 3)
    w.table(["Year", "Tonnes", "Ships"], [["2024", "2,102,650", "812"], ["2025", "2,340,000", "901"]],
            caption="Table 1: cargo by year", links={"2025": "https://example.org/cargo-2025"})
    w.image(png(seed=3), caption="Figure 1: the new quay at dawn")
    w.image(png(12, 12), width=10, height=10)  # a bullet-sized decoration
    w.heading("Outlook", 2)
    w.columns(2)
    for i in range(8):
        w.paragraph(f"Column paragraph {i}. " + "More ships will call as the canal deepens. " * 6)
    return w.tobytes(outline=outline)


@pytest.fixture(scope="module")
def harbour():
    return parse_pdf(harbour_pdf(), URL)


def test_paragraphs_headings_and_section_paths(harbour):
    paragraphs = [c for c in harbour.components if c.kind == "paragraph"]
    assert harbour.kind == "pdf" and harbour.title == "Harbour annual report"
    assert paragraphs[0].text == ("The harbour handled more ships than ever. Tugs worked in two shifts. "
                                  "See the port authority for the details.")
    assert paragraphs[0].section_path == ["Harbour annual report", "Operations"]
    table = next(c for c in harbour.components if c.kind == "table")
    assert table.section_path == ["Harbour annual report", "Operations", "Cargo"]
    assert paragraphs[2].section_path == ["Harbour annual report", "Outlook"]  # level 2 closes level 3
    # headings are section names, not paragraphs
    assert not any(c.text in ("Operations", "Cargo", "Outlook") for c in harbour.components)


def test_font_sizes_give_the_hierarchy_without_an_outline():
    page = parse_pdf(harbour_pdf(outline=False), URL)
    table = next(c for c in page.components if c.kind == "table")
    assert table.section_path == ["Harbour annual report", "Operations", "Cargo"]


def test_hyphen_at_a_line_end_is_repaired(harbour):
    texts = [c.text for c in harbour.components]
    assert "Dredging of the main channel finished in May, and the new quay opened in June." in texts


def test_running_headers_and_page_numbers_are_dropped(harbour):
    assert harbour.components[-1].page == 2  # the columns run onto a second page
    for comp in harbour.components:
        assert "internal" not in comp.text
        assert comp.text.strip() not in ("1", "2")


def test_table_header_rows_caption_and_row_link(harbour):
    table = next(c for c in harbour.components if c.kind == "table")
    assert table.header == ["Year", "Tonnes", "Ships"]
    assert table.rows == [["2024", "2,102,650", "812"], ["2025", "2,340,000", "901"]]
    assert table.caption == "Table 1: cargo by year"
    assert [(lk.url, lk.row) for lk in table.links] == [("https://example.org/cargo-2025", 1)]
    assert table.page == 1 and len(table.bbox) == 4
    assert not any("2,102,650" in c.text for c in harbour.components if c.kind == "paragraph")


def test_image_with_caption_and_decoration_skipped(harbour):
    images = [c for c in harbour.components if c.kind == "image"]
    assert len(images) == 1
    image = images[0]
    assert image.caption == "Figure 1: the new quay at dawn"
    assert image.image_data.startswith(b"\x89PNG") and (image.width, image.height) == (240, 160)
    assert "Caption: Figure 1: the new quay at dawn" in image.text
    assert not any(c.text.startswith("Figure 1") for c in harbour.components if c.kind == "paragraph")


def test_two_columns_are_read_left_column_first(harbour):
    order = [int(c.text.split()[2].rstrip(".")) for c in harbour.components if c.text.startswith("Column paragraph")]
    assert order == list(range(8))
    first = next(c for c in harbour.components if c.text.startswith("Column paragraph 0"))
    later = [c for c in harbour.components if c.text.startswith("Column paragraph") and c.page == first.page]
    assert {round(c.bbox[0]) for c in later} == {56, round(56 + (595 - 112 - 18) / 2 + 18)}  # both columns used


def test_links_become_component_and_sentence_edges(harbour):
    paragraph = harbour.components[0]
    [link] = paragraph.links
    assert (link.url, link.anchor) == ("https://example.org/port", "port authority")
    assert paragraph.text[link.start:link.end] == "port authority"
    fetch = FetchResult(url=URL, final_url=URL, content_type="application/pdf", raw_key="k")
    nodes = build_nodes(harbour, document_id(URL), fetch, ParseConfig())
    links = [e for e in nodes.edges if e["kind"] == "links_to" and e["target_url"] == "https://example.org/port"]
    assert sorted(e["src_layer"] for e in links) == [1, 2]
    sentence = next(s for s in nodes.subcomponents if s["id"] == next(e["src_id"] for e in links if e["src_layer"] == 2))
    assert sentence["text"] == "See the port authority for the details."
    assert nodes.document["kind"] == "pdf"
    assert all(c["page"] and c["bbox"] for c in nodes.components)
    assert any(s["kind"] == "row" and "Tonnes: 2,102,650" in s["text"] for s in nodes.subcomponents)
    assert "https://example.org/port" in extract_pdf_links(harbour_pdf(), URL)


def test_relative_links_resolve_against_the_pdf_url():
    w = PdfWriter()
    w.paragraph("Read the rye page next.", links={"rye page": "../rye.html"})
    page = parse_pdf(w.tobytes(), URL)
    assert [lk.url for lk in page.components[0].links] == ["http://127.0.0.1:9/rye.html"]


def test_pdf_without_text_layer_keeps_its_images_and_says_so():
    doc = pymupdf.open()
    doc.new_page().insert_image(pymupdf.Rect(50, 50, 450, 650), stream=png(400, 600, seed=1))
    page = parse_pdf(doc.tobytes(), URL)
    assert [c.kind for c in page.components] == ["image"]
    assert any(w.startswith("no_text_layer") for w in page.warnings)
    empty = pymupdf.open()
    empty.new_page()
    blank = parse_pdf(empty.tobytes(), URL)
    assert blank.components == [] and any(w.startswith("no_text_layer") for w in blank.warnings)


def _zero_page_pdf() -> bytes:
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"]
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _encrypted_pdf() -> bytes:
    w = PdfWriter()
    w.paragraph("Secret figures.")
    doc = pymupdf.open(stream=w.tobytes(), filetype="pdf")
    return doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o")


@pytest.mark.parametrize(("make", "reason", "cfg"), [
    (lambda: b"%PDF-1.7\n garbage that is not a PDF at all", "unparsable_pdf", None),
    (lambda: b"<html>not a pdf</html>", "unparsable_pdf", None),
    (_encrypted_pdf, "encrypted_pdf", None),
    (_zero_page_pdf, "empty_pdf", None),
    (lambda: report_pdf(pages=3), "pdf_too_large", ParseConfig(pdf_max_pages=2)),
])
def test_bad_pdfs_raise_with_a_reason(make, reason, cfg):
    with pytest.raises(PdfError) as err:
        parse_pdf(make(), URL, cfg)
    assert err.value.reason == reason and str(err.value)


def test_truncated_pdf_is_repaired_or_refused_never_crashes():
    body = report_pdf(pages=4)
    for cut in (len(body) // 4, len(body) // 2, len(body) - 200):
        try:
            page = parse_pdf(body[:cut], URL)
        except PdfError as exc:
            assert exc.reason == "unparsable_pdf"
        else:
            assert any(w.startswith("repaired_pdf") for w in page.warnings)


def test_report_corpus_parses_every_page():
    body = report_pdf(pages=6, seed=2)
    page = parse_pdf(body, URL)
    kinds = {c.kind for c in page.components}
    assert kinds == {"paragraph", "table", "image"}
    assert {c.page for c in page.components} == set(range(1, pymupdf.open(stream=body).page_count + 1))
    assert not page.warnings
    assert all(c.text for c in page.components)
    assert LOREM.split(".")[0] in page.components[0].text


def test_rules_that_cannot_form_a_grid_and_tables_off_give_no_table():
    w = PdfWriter()
    w.paragraph("Signatures of the board members follow.")
    for i in range(5):
        y = 150 + i * 30
        w.page.draw_line((56, y), (300, y))  # signature lines: horizontal only
        w.page.insert_text((56, y - 4), f"Member {i}", fontsize=10)
    page = parse_pdf(w.tobytes(), URL)
    assert [c.kind for c in page.components] == ["paragraph"] * len(page.components)
    assert [c.text for c in page.components if c.text.startswith("Member")] == [f"Member {i}" for i in range(5)]
    off = parse_pdf(harbour_pdf(), URL, ParseConfig(pdf_tables=False))
    assert "table" not in {c.kind for c in off.components}
    assert any("2,102,650" in c.text for c in off.components)


def test_an_image_over_the_pixel_limit_is_skipped_not_decoded(monkeypatch):
    import laminae.tasks.parse.pdf as module

    monkeypatch.setattr(module, "MAX_PIXELS", 240 * 160 - 1)
    page = parse_pdf(harbour_pdf(), URL)
    assert "image" not in {c.kind for c in page.components}
    assert any(w.startswith("image_skipped: page 1: 240x160") for w in page.warnings)
    assert any(c.kind == "table" for c in page.components)  # the rest of the page is kept


def test_sample_site_pdf_matches_golden():
    import json
    from dataclasses import asdict

    golden = GOLDEN / "site" / "guild-report.json"
    parsed = parse_pdf((ROOT / "examples" / "site" / "guild-report.pdf").read_bytes(),
                       "http://site.test/guild-report.pdf")
    got = {"title": parsed.title, "kind": parsed.kind, "warnings": parsed.warnings, "components": [
        {k: ([round(x, 1) for x in v] if k == "bbox" else v) for k, v in asdict(c).items()
         if v not in (None, []) and k != "image_data"} for c in parsed.components]}
    expected = golden_text(golden, json.dumps(got, indent=1, ensure_ascii=False) + "\n")
    assert json.loads(json.dumps(got)) == json.loads(expected), (
        "parse of guild-report.pdf changed; if intended, regenerate with LAMINAE_UPDATE_GOLDEN=1"
    )


def _ruled(page, x0: float, top: float, cells: list[list[str]], col_w: float = 80, row_h: float = 18,
           border: bool = False, merge: tuple[int, int] | None = None, shade: bool = False) -> None:
    """Draw a ruled table; ``merge=(row, col)`` drops the rule between that cell and the next,
    ``border`` draws the outline as one stroked rectangle, ``shade`` fills the header row."""
    rows, cols = len(cells), len(cells[0])
    x1, bottom = x0 + cols * col_w, top + rows * row_h
    if shade:
        page.draw_rect((x0, top, x1, top + row_h), color=None, fill=(0.85, 0.85, 0.85))
    if border:
        page.draw_rect((x0, top, x1, bottom))
    for i in range(0 if not border else 1, rows + (1 if not border else 0)):
        page.draw_line((x0, top + i * row_h), (x1, top + i * row_h))
    for j in range(0 if not border else 1, cols + (1 if not border else 0)):
        x = x0 + j * col_w
        if merge and j == merge[1] + 1:
            r = merge[0]
            page.draw_line((x, top), (x, top + r * row_h))
            page.draw_line((x, top + (r + 1) * row_h), (x, bottom))
        else:
            page.draw_line((x, top), (x, bottom))
    for i, row in enumerate(cells):
        for j, text in enumerate(row):
            if text:
                page.insert_text((x0 + j * col_w + 3, top + i * row_h + 13), text, fontsize=9)


def _tables_of(body: bytes) -> list[tuple]:
    return [(c.header, c.rows, [round(v) for v in c.bbox], c.caption)
            for c in parse_pdf(body, URL).components if c.kind == "table"]


def test_regular_grids_are_read_without_find_tables_and_match_it(monkeypatch):
    import pymupdf

    import laminae.tasks.parse.pdf.tables as module
    from laminae.tasks.parse.pdf.tables import around

    w = PdfWriter()
    w.paragraph("Two tables follow, one drawn with lines and one inside a stroked border.")
    _ruled(w.page, 56, 150, [["Line", "Stops", "Riders"], ["Red", "12", "40,100"], ["Blue", "9", "22,050"]])
    w.page.draw_line((56, 240), (300, 240))  # an underline near, not touching, the first table
    _ruled(w.page, 56, 300, [["Year", "Trips"], ["2023", "1,200"], ["2024", "1,350"], ["2025", ""]], border=True)
    _ruled(w.page, 330, 150, [["Depot", "Buses"], ["North", "31"]], col_w=60)
    body = w.tobytes()

    calls: list = []
    original = pymupdf.Page.find_tables
    monkeypatch.setattr(pymupdf.Page, "find_tables", lambda self, *a, **k: calls.append(k) or original(self, *a, **k))
    fast = _tables_of(body)
    assert calls == []  # every grid here is regular: the finder is never run
    assert [(h, r) for h, r, _, _ in fast] == [
        (["Line", "Stops", "Riders"], [["Red", "12", "40,100"], ["Blue", "9", "22,050"]]),
        (["Year", "Trips"], [["2023", "1,200"], ["2024", "1,350"], ["2025", ""]]),
        (["Depot", "Buses"], [["North", "31"]]),  # the right column is read after the left
    ]
    monkeypatch.setattr(module, "table_areas", lambda rules: ([], around([r[:4] for r in rules])))
    slow = _tables_of(body)
    assert len(calls) == 1  # one call over the page's ruling
    assert [t[:2] for t in slow] == [t[:2] for t in fast]  # find_tables reads the same cells and rows
    for (*_, box, _), (*_, ref, _) in zip(fast, slow, strict=True):
        # a stroked border's box includes its line width (1 pt here); find_tables gives the centre line
        assert all(abs(a - b) <= 1 for a, b in zip(box, ref, strict=True)), (box, ref)


def test_merged_cells_and_shading_are_left_to_find_tables(monkeypatch):
    import pymupdf

    w = PdfWriter()
    w.paragraph("A table with a merged cell and one with a shaded header.")
    _ruled(w.page, 56, 150, [["Route", "From", "To"], ["Loop", "Harbour and back", ""], ["7", "Mill", "Quay"]],
           merge=(1, 1))
    _ruled(w.page, 56, 300, [["Shift", "Crew"], ["Early", "4"], ["Late", "6"]], shade=True)
    calls: list = []
    original = pymupdf.Page.find_tables
    monkeypatch.setattr(pymupdf.Page, "find_tables", lambda self, *a, **k: calls.append(k) or original(self, *a, **k))
    tables = _tables_of(w.tobytes())
    assert len(calls) == 1  # one find_tables call for all the irregular ruling of a page
    assert tables[0][0] == ["Route", "From", "To"]
    assert tables[0][1][0][:2] == ["Loop", "Harbour and back"] and tables[0][1][1] == ["7", "Mill", "Quay"]
    assert tables[1][:2] == (["Shift", "Crew"], [["Early", "4"], ["Late", "6"]])


def test_a_framed_column_of_paragraphs_is_not_a_table():
    w = PdfWriter()
    w.page.draw_rect((50, 80, 560, 700))
    for y in (200, 330, 460):
        w.page.draw_line((50, y), (560, y))
    w.page.insert_text((60, 100), "Notes from the guild", fontsize=14)
    for i, y in enumerate((130, 230, 360, 490)):
        w.page.insert_textbox((60, y, 550, y + 60), f"Note {i}: {LOREM[:150]}", fontsize=10)
    page = parse_pdf(w.tobytes(), URL)
    assert "table" not in {c.kind for c in page.components}
    assert sum(1 for c in page.components if c.text.startswith("Note ")) == 4


def test_a_page_of_filled_bars_costs_one_table_finder_call(monkeypatch):
    import pymupdf

    w = PdfWriter()
    w.paragraph("A bar chart drawn as filled boxes.")
    for i in range(60):
        w.page.draw_rect((60 + i * 8, 400 - i * 3, 66 + i * 8, 400), color=None, fill=(0.2, 0.4, 0.8))
    calls: list = []
    original = pymupdf.Page.find_tables
    monkeypatch.setattr(pymupdf.Page, "find_tables", lambda self, *a, **k: calls.append(k) or original(self, *a, **k))
    parse_pdf(w.tobytes(), URL)
    assert len(calls) == 1


def test_a_grid_crossed_by_a_curved_path_is_left_to_find_tables(monkeypatch):
    import pymupdf

    w = PdfWriter()
    w.paragraph("A table with a hand-drawn mark across it.")
    _ruled(w.page, 56, 150, [["Loaf", "Price"], ["Rye", "6.20"], ["Bun", "0.90"]])
    w.page.draw_bezier((60, 160), (120, 120), (150, 220), (200, 190))
    calls: list = []
    original = pymupdf.Page.find_tables
    monkeypatch.setattr(pymupdf.Page, "find_tables", lambda self, *a, **k: calls.append(k) or original(self, *a, **k))
    tables = _tables_of(w.tobytes())
    assert len(calls) == 1
    assert [t[:2] for t in tables] == [(["Loaf", "Price"], [["Rye", "6.20"], ["Bun", "0.90"]])]


def test_a_page_that_fails_late_is_skipped_and_the_others_kept(monkeypatch):
    import laminae.tasks.parse.pdf as module

    body = report_pdf(pages=3, seed=1, table_every=1)
    whole = parse_pdf(body, URL)
    real = module.find_page_tables
    failed: list[int] = []

    def failing(page, number, *args):
        if not failed:
            failed.append(number)
            raise RuntimeError("broken content stream")
        return real(page, number, *args)

    monkeypatch.setattr(module, "find_page_tables", failing)
    page = parse_pdf(body, URL)
    assert any(w.startswith(f"page_unreadable: page {failed[0]}: RuntimeError") for w in page.warnings)
    assert failed[0] not in {c.page for c in page.components}
    kept = [c for c in whole.components if c.page != failed[0]]
    # the same components from the other pages (section paths may differ: a lost page's headings)
    assert len(kept) > 3 and [(c.kind, c.page, c.bbox) for c in page.components] == [(c.kind, c.page, c.bbox) for c in kept]
