"""Which format a body is: magic numbers over headers, zip members over names, names where servers
are vague; and the one entry point's refusals."""

from __future__ import annotations

import io
import zipfile

import pytest

from laminae.tasks.config import ParseConfig
from laminae.tasks.crawl.files import list_folder, real_roots
from laminae.tasks.crawl.formats import (
    DOCX_TYPE,
    EPUB_TYPE,
    MARKDOWN_TYPE,
    PPTX_TYPE,
    XLSX_TYPE,
    extension_type,
    format_of,
    sniff_content_type,
)
from laminae.tasks.parse import parse
from laminae.tasks.parse.archive import check_zip
from laminae.tasks.parse.document import ParseError, decode_text


def zipped(members: dict[str, bytes], stored_first: bool = False) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for i, (name, data) in enumerate(members.items()):
            archive.writestr(name, data, zipfile.ZIP_STORED if stored_first and i == 0 else zipfile.ZIP_DEFLATED)
    return buf.getvalue()


@pytest.mark.parametrize(("member", "expected"), [
    ("word/document.xml", DOCX_TYPE), ("ppt/presentation.xml", PPTX_TYPE), ("xl/workbook.xml", XLSX_TYPE)])
def test_office_files_are_told_apart_by_their_members_whatever_their_name(member, expected):
    body = zipped({"[Content_Types].xml": b"<Types/>", member: b"<x/>"})
    assert sniff_content_type(body, None, "http://h.test/a.docx") == expected
    assert sniff_content_type(body, "application/octet-stream", "http://h.test/download") == expected


def test_an_epub_by_its_mimetype_member_and_another_zip_is_no_document():
    epub = zipped({"mimetype": b"application/epub+zip", "OEBPS/content.opf": b"<package/>"}, stored_first=True)
    assert sniff_content_type(epub, "application/zip", "http://h.test/book") == EPUB_TYPE
    other = zipped({"data/readme.txt": b"hello"})
    assert sniff_content_type(other, None, "http://h.test/a.zip") == "application/zip"
    assert format_of(sniff_content_type(other, None, "http://h.test/a.zip")) is None
    # named as a document: its parser says what is wrong with it
    assert sniff_content_type(other, None, "http://h.test/a.docx") == DOCX_TYPE
    with pytest.raises(ParseError) as refused:
        parse(other, "http://h.test/a.docx", cfg=ParseConfig())
    assert refused.value.reason == "unparsable_docx"


def test_names_decide_only_where_the_header_is_vague():
    readme = b"<p align='center'><img src='logo.png'></p>\n\n# Project\n\nWords."
    assert sniff_content_type(readme, "text/plain", "http://h.test/README.md") == MARKDOWN_TYPE
    assert sniff_content_type(readme, None, "file:///repo/README.md") == MARKDOWN_TYPE
    assert sniff_content_type(b"a,b\n1,2\n", "application/octet-stream", "http://h.test/x.csv") == "text/csv"
    # a server that says HTML is believed for a page that looks like one, whatever the name
    assert sniff_content_type(b"<!doctype html><html><p>x", "text/html", "http://h.test/x.md") == "text/html"
    assert sniff_content_type(b"%PDF-1.7 ...", DOCX_TYPE, "http://h.test/a.docx") == "application/pdf"
    assert sniff_content_type(b"plain words", None) == "text/plain"
    assert extension_type("file:///d/My%20Notes.MARKDOWN") == MARKDOWN_TYPE
    assert extension_type("http://h.test/dir.v2/") is None


def test_a_folder_lists_every_document_format(tmp_path):
    for name in ("a.md", "b.txt", "c.docx", "d.pptx", "e.xlsx", "f.csv", "g.epub", "h.html", "i.pdf",
                 "skip.png", "skip.py", ".hidden.md"):
        (tmp_path / name).write_bytes(b"x")
    pages, problems = list_folder(tmp_path.as_uri() + "/", real_roots([tmp_path.as_uri() + "/"]))
    assert not problems
    assert sorted(p.rsplit("/", 1)[1] for p in pages) == ["a.md", "b.txt", "c.docx", "d.pptx", "e.xlsx", "f.csv",
                                                          "g.epub", "h.html", "i.pdf"]


def test_a_zip_bomb_is_refused_before_any_library_unpacks_it():
    body = zipped({"word/document.xml": b"\0" * 3_000_000})
    assert len(body) < 10_000
    with pytest.raises(ParseError) as refused:
        check_zip(body, "docx", 1_000_000)
    assert refused.value.reason == "zip_bomb" and "3000000 bytes" in str(refused.value)
    assert check_zip(body, "docx", 5_000_000).namelist() == ["word/document.xml"]
    with pytest.raises(ParseError) as damaged:
        check_zip(body[: len(body) // 2], "xlsx", 5_000_000)
    assert damaged.value.reason == "unparsable_xlsx"


def test_the_entry_point_refuses_what_is_no_document():
    with pytest.raises(ParseError) as refused:
        parse(b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "http://h.test/a.png", cfg=ParseConfig())
    assert refused.value.reason == "unsupported_content_type"


def test_text_is_decoded_by_its_mark_its_charset_or_as_windows_1252():
    assert decode_text("é".encode("utf-16"), None) == ("é", None)
    assert decode_text("café".encode(), "latin-1") == ("cafÃ©", None)  # the declared charset is believed
    assert decode_text("café".encode("cp1252"), None) == ("café", None)
    text, warning = decode_text(b"ok \x81 \x8d", None)
    assert text.startswith("ok") and warning and warning.startswith("undecodable_bytes: 2 bytes")


def test_a_damaged_zip_keeps_the_format_its_name_says_so_its_parser_reports_it():
    body = zipped({"[Content_Types].xml": b"<Types/>", "word/document.xml": b"<x/>" * 500})
    assert sniff_content_type(body[:200], None, "file:///d/report.docx") == DOCX_TYPE
    assert sniff_content_type(body[:200], XLSX_TYPE, "http://h.test/get") == XLSX_TYPE
    assert sniff_content_type(body[:200], None, "http://h.test/archive.zip") == "application/zip"
    with pytest.raises(ParseError) as damaged:
        parse(body[:200], "file:///d/report.docx", cfg=ParseConfig())
    assert damaged.value.reason == "unparsable_docx"


def test_utf16_text_files_are_text_and_a_damaged_member_is_the_formats_error():
    from laminae.tasks.parse.archive import read_member

    body = "# Notes\n\nTide tables.\n".encode("utf-16")
    assert sniff_content_type(body, None, "file:///d/notes.md") == MARKDOWN_TYPE
    assert sniff_content_type(body, None, "file:///d/notes.txt") == "text/plain"
    member = zipped({"word/document.xml": b"<w:document>" + b"tide " * 2000 + b"</w:document>"})
    at = member.index(b"word/document.xml") + len("word/document.xml")
    broken = member[:at + 40] + bytes(b ^ 0x5A for b in member[at + 40:at + 90]) + member[at + 90:]
    with pytest.raises(ParseError) as damaged:
        read_member(check_zip(broken, "docx", 1_000_000), "word/document.xml", "docx")
    assert damaged.value.reason == "unparsable_docx"


def test_compound_files_empty_zips_and_renamed_main_parts_reach_the_format_claimed():
    from tests.support.office_docs import encrypted_docx

    assert sniff_content_type(encrypted_docx(), None, "file:///d/secret.docx") == DOCX_TYPE
    assert sniff_content_type(encrypted_docx(), "application/octet-stream", "http://h.test/secret.xlsx") == XLSX_TYPE
    assert sniff_content_type(encrypted_docx(), None, "http://h.test/secret.bin") == "application/octet-stream"
    empty = zipped({})
    assert sniff_content_type(empty, None, "file:///d/null.xlsx") == XLSX_TYPE
    with pytest.raises(ParseError) as refused:
        parse(empty, "file:///d/null.xlsx", cfg=ParseConfig())
    assert refused.value.reason == "unparsable_xlsx"
    renamed = zipped({"[Content_Types].xml": b'<Types><Override PartName="/word/document2.xml" ContentType="'
                                              b'application/vnd.openxmlformats-officedocument.wordprocessingml.'
                                              b'document.main+xml"/></Types>', "word/document2.xml": b"<x/>"})
    assert sniff_content_type(renamed, None, "http://h.test/get") == DOCX_TYPE
