"""The PDF parser's parts on their own: a line's text from its spans (spaces, gaps, ligatures,
symbols, garbage, underscores drawn as rules), the reading order of blocks (gutters anywhere, bands,
three columns), labels that are not headings, and paragraphs joined across blocks and pages."""

from __future__ import annotations

import pymupdf

from laminae.tasks.parse.pdf import parse_pdf
from laminae.tasks.parse.pdf.blocks import Block
from laminae.tasks.parse.pdf.order import reading_order
from laminae.tasks.parse.pdf.text import expand, garbled, read_line

URL = "http://127.0.0.1:9/reports/harbour.pdf"


def _span(text: str, x0: float, x1: float, font: str = "Times-Roman", size: float = 10.0, flags: int = 0) -> dict:
    return {"text": text, "bbox": (x0, 100.0, x1, 112.0), "font": font, "size": size, "flags": flags}


def _line(*spans: dict) -> dict:
    return {"spans": list(spans), "bbox": (spans[0]["bbox"][0], 100.0, spans[-1]["bbox"][2], 112.0)}


def test_space_spans_gaps_and_ligatures():
    spaced = read_line(_line(_span("Lorem", 0, 25), _span(" ", 25, 28, "Helvetica"), _span("ipsum", 28, 52)))
    assert spaced.text == "Lorem ipsum"
    gapped = read_line(_line(_span("Lorem", 0, 25), _span("ipsum", 27, 50, "Times-Italic", flags=2)))
    assert gapped.text == "Lorem ipsum"  # 2 pt of 10 pt type: a word break
    kerned = read_line(_line(_span("Lorem", 0, 25), _span("ipsum", 25.5, 50, "Times-Italic", flags=2)))
    assert kerned.text == "Loremipsum" and not kerned.italic  # half of its letters are upright
    assert expand("conﬁguration ﬂow eﬃcient") == "configuration flow efficient"
    assert read_line(_line(_span("con\x0cguration", 0, 60))).text == "configuration"  # TeX's OT1 code


def test_dingbats_are_dropped_and_mark_the_line_and_weights_are_read():
    line = read_line(_line(_span("q", 0, 8, "ZapfDingbats", 12), _span("Passed", 14, 44, "Helvetica")))
    assert line.text == "Passed" and line.symbols
    assert read_line(_line(_span("\uf06f Yes", 0, 30))).symbols
    assert read_line(_line(_span("Intro", 0, 30, "ABCDEF+Inter-Medium", 11))).weight == 1
    assert read_line(_line(_span("Intro", 0, 30, "Inter-SemiBold"))).weight == 1
    assert read_line(_line(_span("Intro", 0, 30, "Helvetica-Bold"))).weight == 2
    assert read_line(_line(_span("Intro", 0, 30, "Times-Italic", flags=2))).italic


def test_garbage_without_a_unicode_map_is_recognised_and_real_text_is_not():
    assert garbled("7KH\x03RYHUIORZ\x03FKDQQHO\x03PXVW")
    assert garbled("]üìÆüéê •ìê ]üìÆ")
    assert garbled("\ufffd\ufffd\ufffd\ufffd text")
    assert not garbled("Größe und Maße der Brücke über die Straße")
    assert not garbled("Le château a été rénové en été, déjà.")
    assert not garbled("±0.5 °C at 20 µm")
    assert read_line(_line(_span("7KH\x03RYHUIORZ\x03FKDQQHO", 0, 90))).garbled


def _block(x0: float, y0: float, x1: float, y1: float, text: str = "", lines: int = 3) -> Block:
    b = Block(1, (x0, y0, x1, y1), lines=[text] * lines)
    b.text = text or f"block at {x0:.0f},{y0:.0f} " * 3
    return b


def test_a_gutter_off_centre_splits_columns_and_spanning_blocks_cut_bands():
    title = _block(56, 40, 540, 60, "Title", lines=1)
    left = [_block(56, 80 + 100 * i, 312, 160 + 100 * i) for i in range(3)]
    right = [_block(328, 80 + 100 * i, 540, 160 + 100 * i) for i in range(3)]
    figure = _block(56, 400, 540, 500, "wide figure caption across both columns", lines=2)
    below_left, below_right = _block(56, 520, 312, 600), _block(328, 520, 540, 600)
    order = reading_order([*right, below_right, figure, title, *left, below_left])
    assert order == [title, *left, *right, figure, below_left, below_right]


def test_three_columns_and_no_columns_for_bullets_or_labels():
    cols = [[_block(56 + 165 * c, 80 + 90 * r, 206 + 165 * c, 160 + 90 * r) for r in range(2)] for c in range(3)]
    assert reading_order([b for col in reversed(cols) for b in col]) == [b for col in cols for b in col]
    bullets = [_block(56, 80 + 40 * i, 62, 92 + 40 * i, "•", lines=1) for i in range(3)]
    items = [_block(72, 80 + 40 * i, 500, 110 + 40 * i, "An item that runs over two lines of text.", 2)
             for i in range(3)]
    assert reading_order(bullets + items) == [b for pair in zip(bullets, items, strict=True) for b in pair]
    labels = [_block(56, 80 + 20 * i, 120, 92 + 20 * i, f"Label {i}:", lines=1) for i in range(3)]
    values = [_block(320, 80 + 20 * i, 400, 92 + 20 * i, f"value {i}", lines=1) for i in range(3)]
    assert reading_order(values + labels) == [b for pair in zip(labels, values, strict=True) for b in pair]


def test_the_layout_model_loads_only_when_asked():
    import subprocess
    import sys

    code = ("import laminae.tasks.parse.pdf.layout as L, pymupdf; print(pymupdf._get_layout is None); "
            "print(L.available(), callable(pymupdf._get_layout))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["True", "True", "True"]  # deferred by the import, loaded by available()


def test_underscores_drawn_as_rules_join_the_pieces_of_a_line():
    doc = pymupdf.open()
    page = doc.new_page()
    font = pymupdf.Font("hebo")
    x = 56.0
    for i, part in enumerate(["asn1", "delete", "structure2"]):  # Texinfo draws "_" as a rule, not a glyph
        if i:
            page.draw_line((x, 102), (x + 6, 102), width=0.8)
            x += 6
        page.insert_text((x, 100), part, fontname="hebo", fontsize=14)
        x += font.text_length(part, 14)
    page.insert_textbox((56, 120, 540, 200), "Deletes the structure and every node below it in the tree.", fontsize=10)
    parsed = parse_pdf(doc.tobytes(), "http://127.0.0.1:9/manual.pdf")
    assert [(c.section_path, c.text) for c in parsed.components] == [
        (["asn1_delete_structure2"], "Deletes the structure and every node below it in the tree.")]


def test_a_bold_label_ending_in_a_colon_is_not_a_heading():
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((56, 80), "Reading a value", fontname="hebo", fontsize=14)
    page.insert_textbox((56, 95, 540, 140), "Reads the value of one element of a structure by its name.", fontsize=10)
    page.insert_text((56, 160), "Returns:", fontname="hebo", fontsize=10)
    page.insert_textbox((56, 170, 540, 220), "The value, or an error code when the element is missing.", fontsize=10)
    parsed = parse_pdf(doc.tobytes(), "http://127.0.0.1:9/manual.pdf")
    assert {tuple(c.section_path) for c in parsed.components} == {("Reading a value",)}
    assert "Returns:" in [c.text for c in parsed.components]


def test_a_paragraph_under_two_of_three_columns_follows_all_three():
    cols = [_block(56 + 165 * c, 80, 206 + 165 * c, 240) for c in range(3)]
    under = _block(56, 320, 371, 340, "A paragraph across the first two columns only, below them.", lines=1)
    under.lines *= 2
    listing = _block(56, 350, 420, 400, "1. a list that crosses the last gutter", lines=3)
    assert reading_order([listing, under, *reversed(cols)]) == [*cols, under, listing]
    longer_left = [_block(56, 80 + 100 * i, 290, 160 + 100 * i) for i in range(4)]  # the left column runs on
    short_right = [_block(310, 80, 540, 160)]
    assert reading_order(short_right + longer_left) == longer_left + short_right


def test_a_paragraph_across_a_page_break_is_one_component():
    doc = pymupdf.open()
    first = doc.new_page()
    first.insert_text((56, 100), "The board met in March.", fontsize=10)
    first.insert_text((56, 760), "After a long debate the harbour board decided that the", fontsize=10)
    second = doc.new_page()
    second.insert_text((56, 80), "new quay would open in June.", fontsize=10)
    page = parse_pdf(doc.tobytes(), URL)
    assert [c.text for c in page.components] == [
        "The board met in March.",
        "After a long debate the harbour board decided that the new quay would open in June.",
    ]


def test_a_sentence_running_onto_the_next_page_joins_even_with_a_capital():
    doc = pymupdf.open()
    doc.new_page().insert_text((56, 760), "The harbour board thanked the crew of the", fontsize=10)
    doc.new_page().insert_text((56, 80), "Northern Star for the rescue.", fontsize=10)
    page = parse_pdf(doc.tobytes(), URL)
    assert [c.text for c in page.components] == ["The harbour board thanked the crew of the Northern Star for the rescue."]


def test_blocks_without_a_full_stop_stay_apart_and_layouts_read_in_order():
    doc = pymupdf.open()
    p = doc.new_page()  # A4: 595 pt wide
    p.insert_text((56, 80), "Key findings", fontsize=10)
    p.insert_text((56, 110), "The guild grew by a third this year.", fontsize=10)
    for i, (label, value) in enumerate([("Name", "Ada Baker"), ("Town", "Rye"), ("Since", "1998")]):
        p.insert_text((56, 200 + 30 * i), f"{label}:", fontsize=10)  # a form: labels left, values right
        p.insert_text((320, 200 + 30 * i), value, fontsize=10)
    left = "Left column text that runs on for a while."
    p.insert_text((56, 400), left, fontsize=10)
    p.insert_text((56, 430), left, fontsize=10)
    p.insert_text((320, 400), "Right column text.", fontsize=10)
    p.insert_text((290, 470), "***", fontsize=10)  # a narrow centred ornament
    components = parse_pdf(doc.tobytes(), URL).components
    texts = [c.text for c in components]
    assert texts[:2] == ["Key findings", "The guild grew by a third this year."]
    form = components[2]  # labels and values aligned in two columns: a table of aligned words (pdf_tables)
    assert form.kind == "table" and [form.header, *form.rows] == [["Name:", "Ada Baker"], ["Town:", "Rye"],
                                                                  ["Since:", "1998"]]
    assert texts.count("***") == 1
