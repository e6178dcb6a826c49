"""End-to-end: a folder of Markdown, text, Word, PowerPoint, Excel, CSV and EPUB files beside broken
ones, built by the real flow, then refreshed after an edit: every format indexed with its tables and
links, each broken file an error row, only the edited file's changed nodes embedded again."""

from __future__ import annotations

import io
import zipfile

import pytest

import laminae
from laminae.schemas import document_id

pytestmark = pytest.mark.slow
SETTINGS = {"crawl": {"backoff": 0.01, "retries": 0}, "embed": {"device": "cpu", "threads": 1},
            "parse": {"max_unzipped_bytes": 2_000_000}}

README = """---
title: Tidepool handbook
owner: field team
---

# Tidepool handbook

Tidepools are read at low tide. The [survey guide](docs/guide.md#counting) says how to count.

| species | zone | count |
| --- | --- | --- |
| ochre star | mid | 14 |
| aggregating anemone | low | 230 |

```python
def tide_height(hour):
    return 1.2 * hour
```
"""

GUIDE = """# Survey guide

## Counting

Count every limpet inside the quadrat before lifting any rock. Back to the [handbook](../README.md).
"""


def docx_bytes() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("Mooring inspection", level=1)
    document.add_paragraph("Inspect the mooring chain for wear every spring.")
    table = document.add_table(rows=3, cols=2)
    for r, cells in enumerate([("part", "interval"), ("shackle", "yearly"), ("swivel", "monthly")]):
        for c, text in enumerate(cells):
            table.cell(r, c).text = text
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


def pptx_bytes() -> bytes:
    from pptx import Presentation

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Quarterly kelp survey"
    slide.placeholders[1].text_frame.text = "Kelp cover rose in the northern transect."
    slide.notes_slide.notes_text_frame.text = "Mention the storm in March."
    buf = io.BytesIO()
    deck.save(buf)
    return buf.getvalue()


def xlsx_bytes() -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Buoys"
    for row in (("buoy", "latitude", "battery"), ("north spar", 48.51, "ok"), ("south can", 48.47, "low")):
        sheet.append(row)
    buf = io.BytesIO()
    book.save(buf)
    return buf.getvalue()


def epub_bytes() -> bytes:
    chapter = ("<?xml version='1.0' encoding='utf-8'?><html xmlns='http://www.w3.org/1999/xhtml'><head>"
               "<title>{t}</title></head><body><h1>{t}</h1><p>{p}</p></body></html>")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as book:
        book.writestr("mimetype", "application/epub+zip", zipfile.ZIP_STORED)
        book.writestr("META-INF/container.xml",
                      "<?xml version='1.0'?><container version='1.0' xmlns='urn:oasis:names:tc:opendocument:"
                      "xmlns:container'><rootfiles><rootfile full-path='OEBPS/content.opf' media-type='application/"
                      "oebps-package+xml'/></rootfiles></container>")
        book.writestr("OEBPS/content.opf",
                      "<?xml version='1.0'?><package xmlns='http://www.idpf.org/2007/opf' version='3.0' "
                      "unique-identifier='id'><metadata xmlns:dc='http://purl.org/dc/elements/1.1/'>"
                      "<dc:identifier id='id'>tide-1</dc:identifier><dc:title>Tides for beginners</dc:title>"
                      "<dc:language>en</dc:language></metadata><manifest>"
                      "<item id='c1' href='one.xhtml' media-type='application/xhtml+xml'/>"
                      "<item id='c2' href='two.xhtml' media-type='application/xhtml+xml'/></manifest>"
                      "<spine><itemref idref='c2'/><itemref idref='c1'/></spine></package>")
        book.writestr("OEBPS/one.xhtml", chapter.format(t="Neap tides", p="Neap tides follow the quarter moons."))
        book.writestr("OEBPS/two.xhtml", chapter.format(t="Spring tides", p="Spring tides follow new moons."))
    return buf.getvalue()


def bomb_bytes() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr("mimetype", "application/epub+zip", zipfile.ZIP_STORED)
        book.writestr("OEBPS/content.opf", "<package/>")
        book.writestr("OEBPS/one.xhtml", b"\0" * 5_000_000)
    return buf.getvalue()


def rows(index, table: str) -> list[dict]:
    return laminae.open(str(index)).table(table).to_arrow().to_pylist()


def test_every_format_from_a_folder_then_a_refresh_after_an_edit(tmp_path, prefect_harness):
    from laminae.flows.build import build_index, refresh_index

    site = tmp_path / "repo"
    (site / "docs").mkdir(parents=True)
    files = {"README.md": README.encode(), "docs/guide.md": GUIDE.encode(),
             "NOTES.txt": b"Field notes\n\nThe north spar buoy was repainted in May.\n",
             "mooring.docx": docx_bytes(), "kelp.pptx": pptx_bytes(), "buoys.xlsx": xlsx_bytes(),
             "tides.csv": b"station;high;low\nPort Rowan;2.4;0.3\nCape Vell;3.1;0.6\n", "tides.epub": epub_bytes(),
             "truncated.docx": docx_bytes()[:900], "not-a-sheet.xlsx": b"just some words, no workbook",
             "bomb.epub": bomb_bytes()}
    for name, body in files.items():
        (site / name).write_bytes(body)
    url = {name: (site / name).as_uri() for name in files}
    index = tmp_path / "index"

    first = build_index(seeds=str(site), index=str(index), settings=SETTINGS)
    assert first["status"] == "partial" and first["documents_indexed"] == 8
    errors = {e["url"]: e["reason"] for e in rows(index, "errors") if e["severity"] == "error"}
    assert errors == {url["truncated.docx"]: "unparsable_docx", url["not-a-sheet.xlsx"]: "unparsable_xlsx",
                      url["bomb.epub"]: "zip_bomb"}
    docs = {d["url"]: d for d in rows(index, "documents")}
    assert {name: docs[url[name]]["kind"] for name in files if url[name] in docs} == {
        "README.md": "markdown", "docs/guide.md": "markdown", "NOTES.txt": "text", "mooring.docx": "docx",
        "kelp.pptx": "pptx", "buoys.xlsx": "xlsx", "tides.csv": "csv", "tides.epub": "epub"}
    assert docs[url["README.md"]]["title"] == "Tidepool handbook"
    assert '"owner": "field team"' in docs[url["README.md"]]["annotations"]

    components = rows(index, "components")
    by_doc: dict[str, list[dict]] = {}
    for c in components:
        by_doc.setdefault(c["document_id"], []).append(c)

    def kinds(name: str) -> list[str]:
        return [c["kind"] for c in by_doc[document_id(url[name])]]

    assert "code" in kinds("README.md") and "table" in kinds("README.md")
    assert not any("field team" in (c["text"] or "") for c in by_doc[document_id(url["README.md"])])
    for name, header in (("README.md", "species | zone | count"), ("mooring.docx", "part | interval"),
                         ("buoys.xlsx", "buoy | latitude | battery"), ("tides.csv", "station | high | low")):
        tables = [c for c in by_doc[document_id(url[name])] if c["kind"] == "table"]
        assert tables and any(header in c["text"] for c in tables), (name, [c["text"] for c in tables])
    subcomponents = rows(index, "subcomponents")
    assert any(s["kind"] == "row" and "aggregating anemone" in s["text"] and "species" in s["text"]
               for s in subcomponents)
    deck = " ".join(c["text"] for c in by_doc[document_id(url["kelp.pptx"])])
    assert "northern transect" in deck and "storm in March" in deck
    assert any("Quarterly kelp survey" in (c["section_path"] or []) for c in by_doc[document_id(url["kelp.pptx"])])
    book = [c["text"] for c in by_doc[document_id(url["tides.epub"])]]
    spring = next(i for i, t in enumerate(book) if "new moons" in t)
    neap = next(i for i, t in enumerate(book) if "quarter moons" in t)
    assert spring < neap  # the spine's order, not the manifest's

    edges = [e for e in rows(index, "edges") if e["kind"] == "links_to" and e["resolved"]]
    assert {(e["document_id"], e["dst_id"]) for e in edges} >= {
        (document_id(url["README.md"]), document_id(url["docs/guide.md"])),
        (document_id(url["docs/guide.md"]), document_id(url["README.md"]))}

    (site / "docs" / "guide.md").write_text(GUIDE + "\nRecord the water temperature at every station.\n")
    edited = refresh_index(index=str(index))
    assert edited["changes"]["changed"] == 1 and edited["changes"]["unchanged"] == 7
    # the new paragraph and its sentence, the guide's layer-0 text; nothing of the other files
    assert 1 <= edited["embedded"] <= 4, edited["embedded"]
    guide = [c["text"] for c in rows(index, "components") if c["document_id"] == document_id(url["docs/guide.md"])]
    assert any("water temperature" in t for t in guide)


def test_documents_served_over_http_are_read_by_their_bytes_and_names(server, tmp_path, prefect_harness):
    from laminae.flows.build import build_index
    from tests.conftest import Route, page

    server.routes["/"] = Route(body=page("Harbour", "<p>See the <a href='/files/handbook.md'>handbook</a>, the "
                                                    "<a href='/files/mooring'>mooring notes</a> and the "
                                                    "<a href='/files/buoys.xlsx'>buoy list</a>.</p>"))
    server.routes["/files/handbook.md"] = Route(body=README.encode(), content_type="text/plain; charset=utf-8")
    server.routes["/files/mooring"] = Route(body=docx_bytes(), content_type="application/octet-stream")
    server.routes["/files/buoys.xlsx"] = Route(
        body=xlsx_bytes(), content_type="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(server.url("/") + "\n")
    index = tmp_path / "index"
    built = build_index(seeds=str(seeds), index=str(index), settings={**SETTINGS, "crawl": {
        **SETTINGS["crawl"], "follow_links": 1}})
    assert built["status"] == "success", rows(index, "errors")
    kinds = {d["url"]: d["kind"] for d in rows(index, "documents")}
    assert kinds == {server.url("/"): "html", server.url("/files/handbook.md"): "markdown",
                     server.url("/files/mooring"): "docx", server.url("/files/buoys.xlsx"): "xlsx"}
