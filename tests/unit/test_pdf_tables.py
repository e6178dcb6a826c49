"""PDF tables of every ruling, read by ``find_page_tables`` from pages drawn by pymupdf
(tests/support/pdf_table_shapes.py), and the frames, diagrams, boxes and columns of prose that
must not become tables."""

from __future__ import annotations

import pytest

from laminae.tasks.config import ParseConfig
from laminae.tasks.parse.pdf.blocks import Words
from laminae.tasks.parse.pdf.tables import TableBudget, find_page_tables, table_shape
from tests.support.pdf_table_shapes import DOCUMENTS, NEGATIVES, reference_tables


def _page(name: str):
    import pymupdf

    body, reference = DOCUMENTS[name]()
    return pymupdf.open(stream=body)[0], reference


def _find(page, regions=None, cfg: ParseConfig | None = None, budget: TableBudget | None = None):
    """The page's table blocks, from the inputs the page parser builds (dict blocks of type 3 are
    the vector paths)."""
    import pymupdf

    cfg = cfg or ParseConfig()
    textpage = page.get_textpage(flags=pymupdf.TEXTFLAGS_DICT | pymupdf.TEXT_COLLECT_VECTORS)
    rules = [(*b["bbox"], b.get("stroked", True), bool(b.get("isrect")))
             for b in page.get_text("dict", textpage=textpage)["blocks"] if b["type"] == 3]
    return find_page_tables(page, 1, rules, Words(page, textpage), budget or TableBudget(cfg), cfg, regions)


def _tables(name: str, regions=None) -> list[tuple[list[str] | None, list[list[str]]]]:
    page, _ = _page(name)
    return [(b.component.header, b.component.rows) for b in _find(page, regions)]


def test_horizontal_rules_only_keep_every_body_row_under_the_header():
    [(header, rows)] = _tables("booktabs.pdf")
    assert header == ["Species", "Site", "Count", "Habitat"]
    assert len(rows) == 8 and rows[0] == ["Grey heron", "North pool", "14", "reed bed"]
    wrapped = "wet grassland and the margins of the creek"  # two lines in its cell
    assert rows[2] == ["Curlew", "Salt field", "31", wrapped]
    assert rows[-1] == ["Avocet", "Scrape", "7", "shallow scrape"]


@pytest.mark.parametrize("name", sorted(set(DOCUMENTS) - NEGATIVES))
def test_each_shape_reads_as_its_reference(name):
    page, reference = _page(name)
    blocks = _find(page)
    assert [(b.component.header, b.component.rows) for b in blocks] == reference_tables(reference)
    for b in blocks:  # one y-range per body row, top to bottom, inside the table's box
        assert len(b.row_bounds) == len(b.component.rows)
        assert all(b.bbox[1] - 1 <= top < bottom <= b.bbox[3] + 1 for top, bottom in b.row_bounds)
        assert [top for top, _ in b.row_bounds] == sorted(top for top, _ in b.row_bounds)


def test_a_table_without_rules_is_found_from_its_aligned_columns():
    [(header, rows)] = _tables("aligned_columns.pdf")
    assert header == ["Item", "Supplier", "Unit", "Qty", "Price"]
    assert rows[1] == ["Paint", "Marsh & Sons", "tin", "30", "7.25"]


def test_contents_entries_and_page_numbers_without_their_leaders():
    [(header, rows)] = _tables("contents.pdf")
    assert header == ["Section", "Page"]
    assert rows[0] == ["1 Introduction", "3"] and rows[4] == ["2.1 Quays and berths", "7"]
    assert not any("." * 3 in cell or ". ." in cell for row in rows for cell in row)


def test_check_boxes_keep_their_glyphs():
    [(header, rows)] = _tables("checkboxes.pdf")
    assert header == ["Check", "Owner", "Done"]
    assert [row[2] for row in rows] == ["✔", "✔", "❑", "✔", "❑"]


def test_a_merged_head_names_each_column_it_covers():
    [(header, rows)] = _tables("merged_header.pdf")
    assert header == ["Region", "Population 2020", "Population 2024", "Area"]
    assert rows[0] == ["Portmere", "12,400", "13,050", "41"]


@pytest.mark.parametrize("name", sorted(NEGATIVES))
def test_frames_diagrams_boxes_and_columns_of_prose_are_not_tables(name):
    assert _tables(name) == []


def test_layout_regions_admit_tables_without_rules_and_only_they_do():
    import pymupdf

    page, _ = _page("aligned_columns.pdf")
    assert _find(page, regions=[]) == []  # the model ran and saw no table: aligned words are not trusted
    [block] = _find(page)
    assert [b.bbox for b in _find(page, regions=[block.bbox])] == [block.bbox]
    ruled, _ = _page("booktabs.pdf")
    assert len(_find(ruled, regions=[])) == 1  # a rule across the rows is evidence of its own

    doc = pymupdf.open()
    small = doc.new_page()
    for y, row in ((100, ("Day", "High", "Low")), (115, ("Monday", "06:12", "12:30"))):
        for x, cell in zip((56, 140, 200), row, strict=True):
            small.insert_text((x, y), cell, fontsize=9)
    assert _find(small) == []  # two rows of aligned words alone are too few to trust
    [two] = _find(small, regions=[(50, 88, 240, 120)])  # a layout box makes them a table
    assert two.component.header == ["Day", "High", "Low"]
    assert two.component.rows == [["Monday", "06:12", "12:30"]]


def test_table_budget_and_setting_still_bound_the_finder():
    page, _ = _page("merged_header.pdf")
    cfg = ParseConfig(pdf_tables_budget_s=0)
    budget = TableBudget(cfg)
    _find(page, cfg=cfg, budget=budget)
    assert budget.skipped == [1] and budget.warnings()[0].startswith("tables_skipped: pages 1:")
    assert _find(page, cfg=ParseConfig(pdf_tables=False)) == []


def test_the_shape_rule_says_why_cells_are_not_a_table():
    assert table_shape([["Notes from the guild"], ["A paragraph of the report."]]) == "one column"
    assert table_shape([["SELECT", "column", "FROM"], ["", "ASC", ""], ["", "DESC", ""]]) == \
        "fewer than two rows of two cells"
    prose = "the board met four times this year and agreed"
    assert table_shape([[prose, prose], [prose, prose]]) == "cells of prose"
    assert table_shape([["1.", "Publish the dues"], ["2.", "Ask the keepers"]]) == "a list"
    assert table_shape([["Day", "High"], ["Monday", "06:12"]]) is None


def _aligned_page(rows: list[tuple[str, ...]], xs: tuple[float, ...], font: str = "helv"):
    import pymupdf

    page = pymupdf.open().new_page()
    for i, row in enumerate(rows):
        for x, cell in zip(xs, row, strict=True):
            page.insert_text((x, 100 + 14 * i), cell, fontsize=9, fontname=font)
    return page


def test_aligned_lines_in_a_monospaced_font_are_code_not_a_table():
    rows = [("4", "CARD32", "GLOB_OFFSET"), ("4", "CARD32", "MIME_TYPE_OFFSET"), ("4", "CARD32", "WEIGHT")]
    assert len(_find(_aligned_page(rows, (120, 160, 220)))) == 1
    assert _find(_aligned_page(rows, (120, 160, 220), font="cour")) == []


def test_an_index_set_in_two_columns_is_two_tables_of_entries_and_pages():
    rows = [("anchor", "3", "mooring", "12"), ("ballast", "7", "pilot", "15"), ("capstan", "9", "quay", "4"),
            ("dredging", "11", "rudder", "8")]
    blocks = _find(_aligned_page(rows, (56, 250, 320, 520)))
    assert [b.component.rows for b in blocks] == [[list(r[:2]) for r in rows], [list(r[2:]) for r in rows]]
    assert [b.component.header for b in blocks] == [None, None]  # a first row holding numbers is no header


WORDS = ["harbour", "quay", "marsh", "tide", "pilot", "lock", "gate", "crane", "barge", "ledger", "dues", "berth",
         "mooring", "rope", "tar", "canvas"]


def _random_table(seed: int, style: str):
    """A page with a table of random words and numbers (numbers right-aligned), ruled in ``style``,
    between two paragraphs; returns the page and its (header, rows)."""
    import random

    import pymupdf

    rng = random.Random(seed)
    ncol, nrow, size = rng.randint(2, 5), rng.randint(3, 10), rng.choice([8, 9, 10])
    numeric = [j > 0 and rng.random() < 0.5 for j in range(ncol)]
    header = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 2))).capitalize() for _ in range(ncol)]
    rows = [[f"{rng.randint(0, 99999):,}" if numeric[j] else rng.choice(WORDS).capitalize() for j in range(ncol)]
            for _ in range(nrow)]
    widths = [max(pymupdf.get_text_length(r[j], fontsize=size, fontname="hebo") for r in [header, *rows])
              for j in range(ncol)]
    gutter, pitch = rng.uniform(0.8, 2.5) * size, size * rng.uniform(1.3, 1.9)
    xs = [56.0]
    for w in widths[:-1]:
        xs.append(xs[-1] + w + gutter)
    page = pymupdf.open().new_page()
    page.insert_textbox((56, 50, 540, 120), "Running text before the table says what it holds and where the "
                        "figures in it came from.", fontsize=10)
    ys = [130 + i * pitch for i in range(nrow + 2)]
    for i, row in enumerate([header, *rows]):
        font = "hebo" if i == 0 and not style.startswith("plain") else "helv"
        for j, cell in enumerate(row):
            shift = widths[j] - pymupdf.get_text_length(cell, fontsize=size, fontname=font) if numeric[j] else 0
            page.insert_text((xs[j] + shift, ys[i + 1] - 0.3 * pitch), cell, fontsize=size, fontname=font)
    x1 = xs[-1] + widths[-1] + 4
    for y in {"none": [], "plain": [], "plain head": [ys[1]], "booktabs": [ys[0], ys[1], ys[-1]], "every": ys}[style]:
        page.draw_line((52, y), (x1, y), width=0.6)
    page.insert_textbox((56, ys[-1] + 16, 540, ys[-1] + 80), "Running text after the table.", fontsize=10)
    return page, (header, rows)


@pytest.mark.parametrize("style", ["none", "plain", "plain head", "booktabs", "every"])
def test_generated_tables_read_back_whole(style):
    """Random tables (2-5 columns, 3-10 rows, gutters of 0.8-2.5 em), no rules, a rule under the
    head, booktabs or a rule under every row: the head (bold, over a rule, or plain and first)
    comes back as the header, every row and cell as written."""
    for seed in range(8):
        page, table = _random_table(seed, style)
        assert [(b.component.header, b.component.rows) for b in _find(page)] == [table], seed


def test_a_table_inside_a_page_frame_is_found_and_the_frame_is_not_one():
    rows = [("Day", "High", "Low"), ("Monday", "06:12", "12:30"), ("Tuesday", "06:55", "13:14"),
            ("Friday", "09:24", "15:40")]
    page = _aligned_page(rows, (80, 200, 300))
    page.draw_rect((40, 40, 555, 800))  # a frame with a margin strip and two bands: a regular lattice
    page.draw_line((50, 40), (50, 800))
    for y in (70, 400):
        page.draw_line((40, y), (555, y))
    assert [(b.component.header, b.component.rows) for b in _find(page)] == [
        (list(rows[0]), [list(r) for r in rows[1:]])]


def test_a_first_cell_wrapped_onto_a_closer_line_joins_its_row():
    import pymupdf

    page = pymupdf.open().new_page()
    lines = [(100, ("Vessel", "Tonnes", "Berth"), True), (118, ("Grey Heron", "120", "North"), False),
             (136, ("Northern Star of", "3,400", "Deep"), False), (146, ("the Marsh",), False),
             (164, ("Wick", "85", "Inner"), False), (182, ("Saltby Lass", "210", "North"), False)]
    for y, cells, bold in lines:
        for x, cell in zip((56, 200, 280), cells, strict=False):
            page.insert_text((x, y), cell, fontsize=9, fontname="hebo" if bold else "helv")
    [block] = _find(page)
    assert block.component.rows[1] == ["Northern Star of the Marsh", "3,400", "Deep"]
    assert len(block.component.rows) == 4 and len(block.row_bounds) == 4


class _Swallowing:
    """A page whose find_tables, like pymupdf's when the alarm lands inside one of its C functions
    (a SystemError it catches and logs), swallows the interruption and returns None."""

    def find_tables(self, **settings):
        import time

        deadline = time.perf_counter() + 2.0
        while time.perf_counter() < deadline:
            try:
                time.sleep(0.01)
            except BaseException:
                return None
        return None


def test_a_find_tables_that_swallows_the_alarm_still_counts_the_page_as_timed_out(monkeypatch):
    monkeypatch.setattr("laminae.tasks.parse.pdf.table_budget.in_worker", lambda: True)
    budget = TableBudget(ParseConfig(pdf_table_timeout_s=0.1, pdf_tables_budget_s=10))
    assert budget.find(_Swallowing(), 3, (0, 0, 100, 100)) == []
    assert budget.timed_out == [3] and not budget.skipped
    assert any(w.startswith("tables_timeout: pages 3:") for w in budget.warnings())
