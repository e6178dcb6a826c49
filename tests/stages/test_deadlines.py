"""Deadlines (issue 29 part 1): pages, PDFs, caption files and videos that take long are parsed or
decoded in real worker processes that are killed at their deadline (tiny deadlines here, crafted
inputs that take far longer); the document gets a ``parse_timeout`` or ``decode_timeout`` error row
and the batch goes on. A PDF page over the table-finding budget keeps its text. No timing is asserted."""

from __future__ import annotations

import pymupdf
import pytest

from laminae.tasks.config import BuildSettings
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.nodes.pages import parse_documents
from laminae.tasks.parse.isolated import close_pools
from laminae.tasks.storage.rawstore import RawStore
from tests.conftest import page

TEXT = "A page of many small boxes about rye bread and one line of text."


def ruled_pdf(pages: int, rects: int = 20_000) -> bytes:
    """``pages`` pages sharing one content stream of ``rects`` tiny stroked boxes (above the
    ruling-line limit, so every page goes to pymupdf's find_tables: about 2-3 s a page) and a line
    of text; the issue's PDF had 2,000 such pages."""
    doc = pymupdf.open()
    first = doc.new_page()
    shape = first.new_shape()
    side = int(rects**0.5) + 1
    for i in range(rects):
        x, y = 20 + (i % side) * 570 / side, 60 + (i // side) * 720 / side
        shape.draw_rect(pymupdf.Rect(x, y, x + 2, y + 2))
    shape.finish(color=(0, 0, 0), width=0.3)
    shape.commit()
    first.insert_text((72, 400), TEXT)
    first.clean_contents()
    contents = doc.xref_get_key(first.xref, "Contents")[1]
    for _ in range(pages - 1):
        doc.xref_set_key(doc.new_page().xref, "Contents", contents)
    return doc.tobytes(deflate=True)


def many_paragraphs(n: int = 100_000) -> bytes:
    """A 5 MB page of ``n`` paragraphs: about 25 s to parse and split on one core."""
    return page("Many loaves", "".join(f"<p>Loaf {i} is baked. It cools on the rack.</p>" for i in range(n)))


@pytest.fixture
def raw_pages(tmp_path):
    raw = RawStore(tmp_path)

    def add(path: str, body: bytes, content_type: str = "text/html") -> FetchResult:
        url = f"http://h.test/{path}"
        return FetchResult(url=url, final_url=url, content_type=content_type, raw_key=raw.put(body))

    yield add
    close_pools()


def _rows(errors: list[dict]) -> dict[tuple[str, str], dict]:
    return {(e["url"].rpartition("/")[2], e["reason"]): e for e in errors}


def test_a_page_past_its_deadline_is_killed_and_the_batch_goes_on(raw_pages, tmp_path):
    slow = raw_pages("slow.html", many_paragraphs())
    fine = raw_pages("fine.html", page("Rye", "<p>Rye bread is dense. It keeps for a week.</p>"))
    pdf = raw_pages("ruled.pdf", ruled_pdf(12), "application/pdf")
    after = raw_pages("after.html", page("Spelt", "<p>Spelt is an old wheat.</p>"))
    # 3 s a document, none more for a PDF's pages: find_tables alone takes 12 x 1 s here
    settings = BuildSettings(parse={"timeout_s": 3, "pdf_page_timeout_s": 0})

    docs, errors = parse_documents([slow, fine, pdf, after], str(tmp_path), settings, "run")

    assert [d.document["url"] for d in docs] == [fine.url, after.url]
    rows = _rows(errors)
    assert set(rows) == {("slow.html", "parse_timeout"), ("ruled.pdf", "parse_timeout")}
    html, ruled = rows["slow.html", "parse_timeout"], rows["ruled.pdf", "parse_timeout"]
    assert html["stage"] == "parse" and html["severity"] == "error"
    assert "deadline of 3 s (LAMINAE_PARSE__TIMEOUT_S)" in html["message"] and "killed" in html["message"]
    assert "PDF_PAGE_TIMEOUT_S x pages" in ruled["message"]


def test_a_pdf_page_over_the_table_budget_keeps_its_text_with_a_warning(raw_pages, tmp_path):
    pdf = raw_pages("ruled.pdf", ruled_pdf(6), "application/pdf")
    budget = raw_pages("budget.pdf", ruled_pdf(6), "application/pdf")
    # the PDF's deadline grows with its pages: 2 s alone would stop it (6 x 0.5 s in find_tables
    # alone), 2 + 6 x 20 s does not
    common = {"timeout_s": 2, "pdf_page_timeout_s": 20}

    docs, errors = parse_documents([pdf], str(tmp_path), BuildSettings(parse={
        **common, "pdf_table_timeout_s": 0.5}), "run")
    spent, spent_errors = parse_documents([budget], str(tmp_path), BuildSettings(parse={
        **common, "pdf_tables_budget_s": 0}), "run")

    for found, problems, name, reason, setting in (
            (docs, errors, "ruled.pdf", "tables_timeout", "PDF_TABLE_TIMEOUT_S"),
            (spent, spent_errors, "budget.pdf", "tables_skipped", "PDF_TABLES_BUDGET_S")):
        assert len(found) == 1
        assert [c["kind"] for c in found[0].components] == ["paragraph"] * 6  # each page's text
        assert all(c["text"] == TEXT for c in found[0].components)
        assert set(_rows(problems)) == {(name, reason)}
        row = _rows(problems)[name, reason]
        assert row["severity"] == "warning" and row["document_id"] == found[0].document["id"]
        assert row["message"].startswith("pages 1, 2, 3, 4, 5, 6: ") and setting in row["message"]
        assert "their text is kept" in row["message"]
        assert any(w.startswith(reason) for w in found[0].document["warnings"])


def test_a_long_text_is_split_into_sentences_in_bounded_windows():
    from laminae.tasks.nodes.sentences import WINDOW_CHARS, split_sentences

    sentence = "The dough proves for an hour near the oven. "
    text = sentence * (4 * WINDOW_CHARS // len(sentence))
    spans = split_sentences(text)
    assert [text[s:e] for s, e in spans] == [sentence.strip()] * (len(text) // len(sentence))
    short = "Mr. Smith bakes rye. It keeps for a week."
    assert [short[s:e] for s, e in split_sentences(short)] == ["Mr. Smith bakes rye.", "It keeps for a week."]
    run_on = "word " * (3 * WINDOW_CHARS // 5)  # no sentence end at all: cut between words, never inside one
    pieces = [run_on[s:e] for s, e in split_sentences(run_on)]
    assert " ".join(pieces).split() == run_on.split() and all(len(p) <= WINDOW_CHARS for p in pieces)


def test_a_pdfs_images_over_the_cap_are_not_stored(raw_pages, tmp_path):
    from PIL import Image

    doc = pymupdf.open()
    for i in range(4):
        pic = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 60, 60), False)
        pic.set_rect(pic.irect, (40 * i, 90, 200))
        at = doc.new_page()
        at.insert_text((72, 72), f"Figure {i + 1} shows oven {i + 1}.")
        at.insert_image(pymupdf.Rect(72, 100, 272, 300), pixmap=pic)
    pdf = raw_pages("pictures.pdf", doc.tobytes(), "application/pdf")
    settings = BuildSettings(parse={"max_images": 1})

    docs, errors = parse_documents([pdf], str(tmp_path), settings, "run")

    images = [c for c in docs[0].components if c["kind"] == "image"]
    assert len(images) == 1
    stored = sorted((tmp_path / "raw").rglob("*"))
    stored = [p for p in stored if p.is_file()]
    assert len(stored) == 2  # the PDF and its first picture, not the three over the cap
    assert {Image.open(p).size for p in stored if p.read_bytes()[:4] != b"%PDF"} == {(60, 60)}
    assert [e["reason"] for e in errors] == ["too_many_images"]
