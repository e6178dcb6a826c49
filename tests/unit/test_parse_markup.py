"""Markdown, plain text and EPUB through the entry point ``laminae.tasks.parse.parse``: each
feature on the documents tests/support/markup_docs.py writes, and bad files one by one."""

from __future__ import annotations

import io
import re
import zipfile
from collections import Counter

import pytest

from laminae.tasks.config import ParseConfig
from laminae.tasks.parse import parse
from laminae.tasks.parse.document import ParseError
from laminae.tasks.parse.html import MAX_COMPONENT_CHARS
from tests.support import markup_docs as docs

DIR = "file:///work/repo/"


def md(source: str, name: str = "page.md", base: str = DIR):
    return parse(source.encode(), base + name)


def text_of(page) -> str:
    return "\n".join(c.text for c in page.components)


# -- Markdown --------------------------------------------------------------------------------------
def test_readme_table_has_header_rows_and_cell_links():
    page = parse(docs.readme()[0], DIR + "readme.md")
    assert page.kind == "markdown"
    [table] = [c for c in page.components if c.kind == "table"]
    header, rows = docs.README_TABLE
    assert table.header == header
    assert table.rows == [[docs._plain(cell) for cell in row] for row in rows]
    assert table.rows[0][0] == "harbour sync"  # inline code's text, no backticks
    assert {(lk.url, lk.row) for lk in table.links} == {(DIR + "guide.md", 0), ("https://example.org/survey", 1)}
    assert table.section_path == [docs.TITLE, "Getting started", "Commands"]


def test_fenced_and_indented_code_are_code_components():
    page = parse(docs.readme()[0], DIR + "readme.md")
    code = [c.text for c in page.components if c.kind == "code"]
    assert code == ["pip install harbour-toolkit\nharbour sync --all", "[office]\nname = North Quay\nberths = 42"]
    paragraphs = text_of(page)
    assert "```" not in paragraphs and "bash" not in paragraphs.split()  # the info string is no text


def test_front_matter_is_title_and_meta_never_text():
    page = md("---\ntitle: Front Title\nauthor:\n  name: Ann Quay\ntags: [a, b]\n---\n# Body Heading\n\nBody text.\n")
    assert page.title == "Front Title"
    assert page.meta == {"author.name": "Ann Quay", "tags": "a, b"}
    assert "Ann" not in text_of(page) and "Front" not in text_of(page)
    assert [c.section_path for c in page.components] == [["Body Heading"]]


def test_toml_front_matter_and_unreadable_yaml():
    page = md('+++\ntitle = "Hugo Page"\ndraft = false\n+++\nText.\n')
    assert page.title == "Hugo Page" and page.meta == {"draft": "False"} and text_of(page) == "Text."
    page = md("---\ntitle: [unclosed\n---\nText after.\n", name="bad-front.md")
    assert page.title == "bad-front.md"
    assert any(w.startswith("front_matter_unreadable: YAML") for w in page.warnings)
    assert "unclosed" not in text_of(page)


def test_rules_around_prose_are_no_front_matter():
    page = md("---\nA paragraph between two rules.\n---\n\nAfter.\n")
    assert [c.text for c in page.components] == ["A paragraph between two rules.", "After."]
    assert page.meta == {} and not page.warnings


def test_footnotes_are_kept_with_their_labels():
    page = md("# Top\n\nA claim[^src] here.\n\n[^src]: The [source](https://h.test/s) of it.\n")
    assert [(c.text, c.section_path) for c in page.components] == [
        ("A claim[src] here.", ["Top"]), ("[src] The source of it.", [])]
    [link] = page.components[1].links
    assert page.components[1].text[link.start:link.end] == "source"


def test_title_falls_back_to_first_h1_then_file_name():
    assert md("## Second level\n\n# First One\n\ntext\n").title == "First One"
    assert md("Just text.\n", name="some%20notes.md").title == "some notes.md"


def test_relative_links_resolve_to_documents_without_fragment():
    page = parse(docs.readme()[0], DIR + "readme.md")
    para = next(c for c in page.components if "installation guide" in c.text)
    [link] = para.links
    assert link.url == DIR + "guide.md"
    assert para.text[link.start:link.end] == "installation guide" == link.anchor
    page = md("See [the part](docs/other.md#part) and [up](../top.md).", base="https://h.test/repo/")
    assert [lk.url for lk in page.components[0].links] == ["https://h.test/repo/docs/other.md",
                                                             "https://h.test/top.md"]
    guide = parse(docs.guide()[0], DIR + "guide.md")
    assert {lk.url for c in guide.components for lk in c.links} == {DIR + "readme.md"}


def test_inline_html_links_and_images():
    page = md('Read <a href="docs/a.md#x">the docs</a> or <b>ask</b>.<br><img src="i.png" alt="Icon">')
    para, image = page.components
    assert para.text == "Read the docs or ask."
    [link] = para.links
    assert (link.url, para.text[link.start:link.end]) == (DIR + "docs/a.md", "the docs")
    assert (image.image_url, image.alt) == (DIR + "i.png", "Icon")


def test_headings_are_section_paths_at_every_level():
    page = parse(docs.readme()[0], DIR + "readme.md")
    deepest = next(c for c in page.components if c.text.startswith("A ledger of more"))
    assert deepest.section_path == [docs.TITLE, "Getting started", "Commands", "Configuration files",
                                    "Environment", "Limits"]
    last = page.components[-1]
    assert last.section_path == [docs.TITLE, "Licence"]  # a level-2 heading closes the deeper ones


def test_heading_with_nothing_under_it_is_a_paragraph():
    page = md("# Top\n\n## Empty\n\n## Full\n\nSome text.\n\n## Last empty\n")
    assert [(c.text, c.section_path) for c in page.components] == [
        ("Empty", ["Top"]), ("Some text.", ["Top", "Full"]), ("Last empty", ["Top"])]


def test_list_is_one_paragraph_of_item_segments():
    page = parse(docs.readme()[0], DIR + "readme.md")
    lst = next(c for c in page.components if c.segments)
    items = [lst.text[s:e] for s, e in lst.segments]
    assert items == ["Copies every ledger from the quay offices each night",
                     "Flags counts that differ from the survey by more than five per cent",
                     "Lists the flagged boats by berth", "Writes a monthly summary for the harbour council"]


def test_long_list_is_cut_into_bounded_paragraphs():
    source = "".join(f"- item number {i} of a very long list of harbour berths\n" for i in range(300))
    page = md(source)
    assert len(page.components) > 1
    assert all(len(c.text) <= 2100 for c in page.components)
    assert sum(len(c.segments) for c in page.components) == 300


def test_nesting_past_the_bound_is_cut_with_a_warning():
    page = md("> " * 200 + "deep words\n\nAfter the quotes.\n")
    assert any(w.startswith("truncated_markdown:") for w in page.warnings)
    assert not md("> " * 5 + "deep words\n").warnings


def test_images_resolve_against_the_document_url():
    page = parse(docs.readme()[0], DIR + "readme.md")
    images = [c for c in page.components if c.kind == "image"]
    assert [(c.image_url, c.alt) for c in images] == [
        (DIR + "images/logo.png", "Harbour Toolkit logo"), (DIR + "images/quays.png", "Map of the quays")]
    assert images[1].text.startswith("Image: Map of the quays.")
    web = md('![Chart](img/c.png "Monthly chart")', base="https://h.test/repo/")
    [image] = web.components
    assert image.image_url == "https://h.test/repo/img/c.png" and image.caption == "Monthly chart"


def test_long_paragraph_is_cut_with_its_links_and_data_image_keeps_bytes():
    import base64

    sentence = "The ledger of the north quay was copied again tonight. "
    page = md(sentence * 150 + "See [the guide](guide.md).")
    assert len(page.components) > 1 and all(len(c.text) <= MAX_COMPONENT_CHARS for c in page.components)
    [link] = [lk for c in page.components for lk in c.links]
    holder = next(c for c in page.components if c.links)
    assert holder.text[link.start:link.end] == "the guide" and link.url == DIR + "guide.md"
    picture = docs.png()
    [image] = md(f"![Dot](data:image/png;base64,{base64.b64encode(picture).decode()})").components
    assert (image.image_data, image.image_mime, image.image_url) == (picture, "image/png", None)


def test_raw_html_block_keeps_text_without_tags():
    page = md('# T\n\n<div align="center"><b>Bold words</b> and <i>more</i></div>\n\nAfter.\n')
    assert [(c.text, c.section_path) for c in page.components] == [("Bold words and more", ["T"]),
                                                                   ("After.", ["T"])]


def test_html_headings_join_the_section_path():
    page = md('<h1 align="center">Centred Title</h1>\n\n<p align="center">Tagline here.</p>\n\n'
              "## Install\n\nRun it.\n\n<h2>HTML Section</h2>\n\nUnder it.\n\n<h2>Bare HTML heading</h2>\n")
    assert page.title == "Centred Title"
    assert [(c.text, c.section_path) for c in page.components][:3] == [
        ("Tagline here.", ["Centred Title"]), ("Run it.", ["Centred Title", "Install"]),
        ("Under it.", ["Centred Title", "HTML Section"])]
    assert [c.text for c in page.components[3:]] == ["Bare HTML heading"]  # its words kept, once


def test_html_block_articles_are_read_whole():
    page = md("<article><p>First part.</p></article>\n<p>Between.</p>\n<article><p>Second part.</p></article>\n")
    assert [c.text for c in page.components] == ["First part.", "Between.", "Second part."]


def test_empty_markdown_is_no_error():
    page = md("")
    assert page.components == [] and page.title == "page.md"


def test_binary_markdown_is_unparsable():
    with pytest.raises(ParseError) as err:
        parse(b"\x00\x01\x02binary" * 100, DIR + "x.md", "text/markdown")
    assert err.value.reason == "unparsable_markdown"


# -- plain text ------------------------------------------------------------------------------------
def test_text_setext_headings_paragraphs_and_title():
    page = parse(docs.notes()[0], DIR + "notes.txt")
    assert page.kind == "text" and page.title == "Harbour office notes"
    first = page.components[0]
    assert first.section_path == ["Harbour office notes"]
    assert first.text.startswith("The office keeps its ledgers") and "\n" not in first.text  # wrapped prose
    routine = page.components[1]
    assert routine.section_path == ["Harbour office notes", "Routine"]
    assert [routine.text[s:e] for s, e in routine.segments] == [
        "1. Open the ledgers of the night.", "2. Compare them with the survey.", "3. Sign the summary."]


def test_text_long_log_is_cut_at_line_ends_and_kept_whole():
    page = parse(docs.notes()[0], DIR + "notes.txt")
    log = [c for c in page.components if c.section_path[-1:] == ["Night log"]]
    assert len(log) > 1 and all(len(c.text) <= MAX_COMPONENT_CHARS for c in log)
    assert [line for c in log for line in c.text.split("\n")] == docs.log_lines(120)


def test_text_one_huge_line_is_bounded_and_rst_overlines():
    page = parse(("word " * 5000).encode(), DIR + "blob.txt")
    assert page.title == "blob.txt" and len(page.components) > 1
    assert all(len(c.text) <= MAX_COMPONENT_CHARS for c in page.components)
    assert sum(c.text.count("word") for c in page.components) == 5000
    page = parse(b"=====\nTitle\n=====\n\nIntro.\n\nPart\n----\n\nBody.\n", DIR + "doc.rst")
    assert [c.section_path for c in page.components] == [["Title"], ["Title", "Part"]]


def test_rst_literal_block_is_code():
    source = "Usage\n=====\n\nRun it like this::\n\n    harbour sync --all\n\n    harbour check\n\nThen rest.\n"
    page = parse(source.encode(), DIR + "usage.rst")
    assert [(c.kind, c.text) for c in page.components] == [
        ("paragraph", "Run it like this::"), ("code", "harbour sync --all\n\nharbour check"),
        ("paragraph", "Then rest.")]
    page = parse(b"Intro ends here.\n\n    indented quote\n", DIR + "quote.txt")
    assert [c.kind for c in page.components] == ["paragraph", "paragraph"]


def test_binary_text_is_unparsable():
    with pytest.raises(ParseError) as err:
        parse(b"\x00\xff" * 500, DIR + "x.txt", "text/plain")
    assert err.value.reason == "unparsable_text"


# -- EPUB ------------------------------------------------------------------------------------------
def test_epub_chapters_in_spine_order_with_title_and_headings():
    page = parse(docs.book()[0], DIR + "book.epub")
    assert page.kind == "epub" and page.title == docs.BOOK_TITLE and page.lang == "en"
    order = []
    for comp in page.components:
        if comp.section_path and comp.section_path[0] not in order:
            order.append(comp.section_path[0])
    assert order == list(docs.CHAPTER_TITLES)  # the zip holds them in reverse
    assert "Contents" not in text_of(page)  # the navigation document is no chapter
    masons = next(c for c in page.components if c.text.startswith("Each mason"))
    assert masons.section_path == ["The Old Quay", "Masons and their marks"]


def test_epub_table_and_picture():
    page = parse(docs.book()[0], DIR + "book.epub")
    [table] = [c for c in page.components if c.kind == "table"]
    assert table.header == docs.BOOK_TABLE[0] and table.rows == docs.BOOK_TABLE[1]
    [image] = [c for c in page.components if c.kind == "image"]
    assert image.image_data == docs.png() and image.image_mime == "image/png" and image.image_url is None
    assert image.alt == "The old quay at low water"


def test_epub_links_between_chapters_are_links_to_the_book():
    url = "https://books.test/shelf/book.epub"
    page = parse(docs.book()[0], url)
    links = [(lk.url, lk.anchor) for c in page.components for lk in c.links]
    assert links == [(url, "tide tables chapter"), (url, "the lighthouse"), (url, "the old quay"),
                     ("https://example.org/archive", "county archive")]


def test_epub_chapter_without_heading_is_under_its_toc_label():
    chapters = [("a.xhtml", docs.xhtml("A", "<p>No heading here at all.</p>"))]
    page = parse(docs.epub_bytes("Book", chapters), DIR + "b.epub")
    assert [c.section_path for c in page.components] == [["a.xhtml"]]  # the nav's label of a.xhtml


def test_epub2_ncx_labels_and_a_cover_picture_it_does_not_hold():
    chapters = [("cover.xhtml", docs.xhtml("Cover", '<img src="cover.png" alt="Cover picture"/>')),
                ("a.xhtml", docs.xhtml("A", "<p>The first chapter has no heading.</p>"))]
    page = parse(docs.epub_bytes("Book", chapters, nav=False, ncx={"a.xhtml": "Chapter One"}), DIR + "b.epub")
    assert [(c.text, c.section_path) for c in page.components] == [
        ("The first chapter has no heading.", ["Chapter One"])]
    assert page.warnings == ["image_missing: 1 image the chapters show is not in the EPUB file; the first is "
                             "OEBPS/cover.png"]


def test_epub_self_closed_elements_do_not_swallow_text():
    body = '<h1>One</h1><a id="x"/><script src="s.js"/><p>Kept paragraph.</p>'
    page = parse(docs.epub_bytes("Book", [("a.xhtml", docs.xhtml("A", body))], nav=False), DIR + "b.epub")
    assert text_of(page) == "Kept paragraph."


def test_epub_chapter_of_several_articles_is_read_whole():
    body = ('<h1>Issue 4</h1><article><h2>First story</h2><p>One text.</p></article><main role="main">'
            '<h2>Second story</h2><p>Two text.</p></main><div id="content"><p>Closing words.</p></div>'
            "<footer><p>Yours truly, the editor</p></footer>")
    page = parse(docs.epub_bytes("Magazine", [("a.xhtml", docs.xhtml("A", body))]), DIR + "m.epub")
    assert [(c.text, c.section_path) for c in page.components] == [
        ("One text.", ["Issue 4", "First story"]), ("Two text.", ["Issue 4", "Second story"]),
        ("Closing words.", ["Issue 4", "Second story"]), ("Yours truly, the editor", ["Issue 4", "Second story"])]


def test_epub_chapter_cap_warns(monkeypatch):
    from laminae.tasks.parse import epub

    monkeypatch.setattr(epub, "MAX_CHAPTERS", 2)
    page = parse(docs.book()[0], DIR + "book.epub")
    assert {c.section_path[0] for c in page.components} == set(docs.CHAPTER_TITLES[:2])
    assert any(w.startswith("truncated_epub: the spine lists 3 chapters") for w in page.warnings)


@pytest.mark.parametrize("case", ["not_zip", "no_package", "no_spine_item", "encrypted"])
def test_bad_epub_is_unparsable(case):
    chapters = [("a.xhtml", docs.xhtml("A", "<h1>A</h1><p>Text.</p>"))]
    if case == "not_zip":
        body = b"this is not a zip archive at all"
    elif case == "no_package":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("mimetype", "application/epub+zip")
            z.writestr("OEBPS/a.xhtml", chapters[0][1])
        body = buf.getvalue()
    elif case == "no_spine_item":
        body = docs.epub_bytes("Book", chapters, spine=[], nav=False)
    else:
        enc = ('<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
               'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:EncryptionMethod '
               'Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/><enc:CipherData><enc:CipherReference '
               'URI="OEBPS/a.xhtml"/></enc:CipherData></enc:EncryptedData></encryption>')
        body = docs.epub_bytes("Book", chapters, extra={"META-INF/encryption.xml": enc.encode()})
    with pytest.raises(ParseError) as err:
        parse(body, DIR + "bad.epub")
    assert err.value.reason == "unparsable_epub"


def test_zip_bomb_in_epub_is_refused():
    chapters = [("a.xhtml", docs.xhtml("A", "<h1>A</h1><p>Text.</p>"))]
    body = docs.epub_bytes("Book", chapters, extra={"OEBPS/padding.bin": b"\0" * 3_000_000})
    assert len(body) < 100_000
    with pytest.raises(ParseError) as err:
        parse(body, DIR + "bomb.epub", cfg=ParseConfig(max_unzipped_bytes=1_000_000))
    assert err.value.reason == "zip_bomb"
    assert parse(body, DIR + "bomb.epub").components  # under the default bound it is read


def test_epub_damaged_chapter_costs_that_chapter_only():
    chapters = [("a.xhtml", docs.xhtml("A", "<h1>Alpha</h1><p>First chapter text.</p>")),
                ("b.xhtml", docs.xhtml("B", "<h1>Beta</h1><p>Second chapter text.</p>"))]
    body = bytearray(docs.epub_bytes("Book", chapters, nav=False))
    with zipfile.ZipFile(io.BytesIO(bytes(body))) as z:
        info = z.getinfo("OEBPS/b.xhtml")
    at = info.header_offset + 30 + len(info.filename) + len(info.extra)  # the member's data
    body[at + 2] ^= 0xFF
    page = parse(bytes(body), DIR + "b.epub")
    assert [c.text for c in page.components] == ["First chapter text."]
    assert len(page.warnings) == 1 and page.warnings[0].startswith("chapter_unreadable: OEBPS/b.xhtml:")


@pytest.mark.parametrize("name", sorted(docs.DOCUMENTS))
def test_every_reference_word_is_read(name):
    """Each fixture's reference words (markup, image targets and list marks left out) are all in
    its parse: component text, section names and title."""
    body, reference = docs.DOCUMENTS[name]()
    page = parse(body, DIR + name)
    reference = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", reference)
    reference = re.sub(r"^\s*(?:[-*]|\d+\.)\s", " ", reference, flags=re.M)
    got = " ".join([page.title, *(c.text for c in page.components),
                    *(h for c in page.components for h in c.section_path)])
    missing = Counter(re.findall(r"\w+", reference.casefold())) - Counter(re.findall(r"\w+", got.casefold()))
    assert not missing
