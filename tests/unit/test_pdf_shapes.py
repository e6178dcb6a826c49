"""PDF parsing on the shapes real documents take (tests/support/pdf_shapes.py): words apart, columns
off centre, headings by italic and medium weights, check boxes, tiled figures and their captions,
fonts without a Unicode map, right-to-left paragraphs; each against its reference text."""

from __future__ import annotations

import re

import pytest

from laminae.tasks.config import OcrConfig, ParseConfig
from laminae.tasks.parse.pdf import parse_pdf
from tests.support.pdf_shapes import ARABIC, DOCUMENTS, GARBLED, HEBREW, LIGATURES, PROSE

pymupdf = pytest.importorskip("pymupdf")

URL = "http://127.0.0.1:9/handbook/{}"


def _parse(name: str, cfg: ParseConfig | None = None, ocr: OcrConfig | None = None):
    body, reference = DOCUMENTS[name]()
    return parse_pdf(body, URL.format(name), cfg, ocr), reference


def _figure(alt: str) -> str:
    return "figure: " + " ".join(sorted(re.findall(r"\w+", alt)))  # a chart's labels have no one order


def _reference_blocks(reference: str) -> tuple[list[str], list[str]]:
    """(paragraphs and figures, headings) of a reference text, in order."""
    blocks = [b.strip() for b in reference.split("\n\n") if b.strip()]
    image = re.compile(r"^!\[(.*)\]\([^)]*\)$")
    return ([_figure(m.group(1)) if (m := image.match(b)) else b for b in blocks if not b.startswith("#")],
            [re.sub(r"^#+ ", "", b) for b in blocks if b.startswith("#")])


def _read(page) -> list[str]:
    """What a reader reads of a parsed page, in order: paragraph texts, figures and their captions."""
    out = []
    for c in page.components:
        out += [_figure(c.alt or ""), *([c.caption] if c.caption else [])] if c.kind == "image" else [c.text]
    return out


# what the rules keep beyond the reference: a one-page document's header (nothing repeats it)
RULES_KEEP = {"numbered_headings.pdf": ["Pump station handbook"]}


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_every_shape_reads_as_its_reference(name):
    page, reference = _parse(name)
    paragraphs, headings = _reference_blocks(reference)
    assert _read(page) == RULES_KEEP.get(name, []) + paragraphs
    named = [h for c in page.components for h in c.section_path]
    assert all(h in named or h == page.title for h in headings), (headings, set(named))
    assert not any(h in paragraphs for c in page.components for h in c.section_path)  # no paragraph is a heading


def test_space_spans_keep_words_apart_and_ligatures_expand():
    page, _ = _parse("tex_spaces.pdf")
    texts = [c.text for c in page.components]
    assert texts[0] == PROSE[0]
    assert any(t.startswith("The configuration file sets the flow limits for each office;") for t in texts)
    assert not any(ch in t for t in texts for ch in "ﬁﬂﬀﬃﬄ")
    assert all("Field handbook" not in t and t.strip() not in ("1", "2") for t in texts)  # running text dropped
    assert LIGATURES.startswith("The conﬁguration")


def test_words_placed_apart_without_space_characters_are_words():
    page, _ = _parse("glyph_gaps.pdf")
    assert [c.text for c in page.components] == PROSE[:4]


def test_columns_off_centre_read_left_first_with_italic_and_medium_headings():
    page, _ = _parse("offcentre_columns.pdf")
    texts = [c.text for c in page.components]
    first_page = PROSE[0:2] + [PROSE[4]] + PROSE[2:4] + [PROSE[5]]
    assert texts[1:7] == first_page  # the left column (to x=311 of 595) before the right one
    by_text = {c.text: c.section_path for c in page.components if c.page == 1}
    assert by_text[PROSE[0]][-1] == "Checks of part 1"  # italic, body size
    assert by_text[PROSE[4]][-1] == "Records of part 1"  # "Medium" weight, one point larger
    assert by_text[PROSE[2]][-1] == "Repairs of part 1"


def test_a_line_of_dingbat_check_boxes_is_not_a_heading():
    page, _ = _parse("checkboxes.pdf")
    assert "Passed Failed Skipped" in [c.text for c in page.components]  # the labels stay, the boxes go
    assert all(c.section_path == ["Inspection form"] for c in page.components)


def test_tiled_figure_is_one_image_and_each_figure_takes_its_own_caption():
    page, _ = _parse("figures.pdf")
    images = [c for c in page.components if c.kind == "image"]
    assert len(images) == 2  # 32 abutting tiles are one figure
    tiled, second = images
    assert tiled.caption == "Figure 1: the treatment hall seen from the gallery"
    assert second.caption == "Figure 2: the intake pump and its valves"
    assert tiled.image_data.startswith(b"\x89PNG") and tiled.width >= 300 and tiled.height >= 200
    assert round(tiled.bbox[2] - tiled.bbox[0]) == 208 and round(tiled.bbox[3] - tiled.bbox[1]) == 150
    assert second.alt == "Valve, Pump, Outlet" and "Valve" in second.text  # callout labels stay with it
    assert not any(c.text in ("Valve", "Pump", "Outlet") for c in page.components if c.kind == "paragraph")


def test_a_font_without_a_unicode_map_is_read_by_ocr_or_dropped_with_a_warning():
    off, _ = _parse("unmapped_font.pdf", ocr=OcrConfig(enabled=False))
    garbage = re.compile("[\x00-\x08\x0b-\x1f]|7KH|RYHUIORZ")
    assert not any(garbage.search(c.text) for c in off.components)
    assert [c.text for c in off.components] == [PROSE[2], PROSE[3]]
    assert any(w.startswith("unmapped_font: page 1: 1 text blocks") and "not read" in w for w in off.warnings)
    read, _ = _parse("unmapped_font.pdf")
    assert [c.text for c in read.components] == [PROSE[2], GARBLED, PROSE[3]]
    assert any(w.startswith("unmapped_font: text in fonts without a Unicode map was read by OCR on 1 pages")
               for w in read.warnings)


def test_right_to_left_lines_join_into_paragraphs_in_logical_order():
    page, _ = _parse("rtl.pdf")
    texts = [c.text for c in page.components]
    assert texts == [PROSE[0], ARABIC, HEBREW, PROSE[1]]


def test_layout_model_setting_reads_the_shapes_as_well():
    from laminae.tasks.parse.pdf.layout import LayoutClock, available

    assert available()  # pymupdf 2.0 ships the model: importing pymupdf loaded it
    before = LayoutClock.pages
    page, reference = _parse("offcentre_columns.pdf", ParseConfig(pdf_layout="model"))
    assert LayoutClock.pages - before == 2
    assert _read(page) == _reference_blocks(reference)[0]


def test_a_vector_chart_is_one_figure_with_its_labels_and_caption():
    page, _ = _parse("vector_chart.pdf")
    [chart] = [c for c in page.components if c.kind == "image"]
    assert chart.caption == "Figure 3: water drawn from the lower basin by month"
    assert chart.alt.split(", ")[:2] == ["150 Megalitres drawn", "100"] and "Jun" in chart.alt
    assert chart.image_data.startswith(b"\x89PNG") and chart.width > 500
    assert [c.kind for c in page.components] == ["paragraph", "image", "paragraph"]


def test_a_shaded_box_around_prose_stays_text():
    from tests.support.pdf_shapes import Doc

    d = Doc()
    d.page.draw_rect((50, 90, 545, 200), color=None, fill=(0.9, 0.9, 0.8))
    d.page.draw_rect((50, 90, 545, 96), color=None, fill=(0.2, 0.2, 0.5))
    d.page.draw_line((50, 200), (545, 200))
    d.y = 100
    d.paragraph(PROSE[0])
    d.paragraph(PROSE[1])
    page = parse_pdf(d.tobytes()[0], URL.format("box.pdf"))
    assert [c.text for c in page.components] == PROSE[:2]


def test_numbered_subsections_are_headings_and_the_model_drops_a_lone_page_header():
    page, _ = _parse("numbered_headings.pdf")
    assert [c.section_path for c in page.components[1:]] == [
        ["Intake and filters", f"1.{i} {name}"] for i, name in enumerate(["Intake screens", "Sand filters",
                                                                           "Winter care"], start=1)]
    assert page.components[0].text == "Pump station handbook" and "Page 1 of 1" not in _read(page)
    modelled, reference = _parse("numbered_headings.pdf", ParseConfig(pdf_layout="model"))
    assert _read(modelled) == _reference_blocks(reference)[0]  # page-header region: dropped


def test_text_over_a_background_picture_stays_text():
    from tests.support.pdf_shapes import Doc, _picture, _png

    d = Doc()
    d.page.insert_image(d.pymupdf.Rect(0, 0, 595, 842), stream=_png(_picture(300, 420)), keep_proportion=False)
    d.heading("Annual open day")
    d.paragraph("Visitors are welcome.")
    d.page.insert_image(d.pymupdf.Rect(56, 300, 300, 420), stream=_png(_picture(240, 120)), keep_proportion=False)
    d.paragraph(PROSE[0], x1=300, y=310)
    page = parse_pdf(d.tobytes()[0], URL.format("poster.pdf"))
    assert [c.text for c in page.components if c.kind == "paragraph"] == ["Visitors are welcome.", PROSE[0]]
    assert all(not c.alt for c in page.components if c.kind == "image")
