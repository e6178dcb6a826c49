"""End-to-end OCR: a page whose picture holds words found nowhere else, and a scanned PDF, built by
the real flow from 127.0.0.1; the words come back through the reader, and a refresh of the page
does not read its unchanged picture again."""

from __future__ import annotations

import pytest

import laminae
from laminae.tasks.nodes import ocr_lines
from tests.conftest import Route, page
from tests.e2e.test_flow import build
from tests.support.scans import scanned_pdf, text_picture

PICTURE_LINES = ["Marmalade exports by harbour", "Quayside tonnage doubled"]
SCAN_PAGES = [["Guild minutes of the autumn meeting", "", "The millers agreed a tariff on chestnut flour",
               "delivered by barge before midwinter."]]


def _page(extra: str = "") -> bytes:
    return page("Harbour", f"<h1>Harbour</h1><p>The harbour ships goods along the coast.{extra}</p>"
                           "<figure><img src='/chart.png' alt='a chart'><figcaption>Exports</figcaption></figure>")


@pytest.fixture
def calls(monkeypatch) -> list[int]:
    """Pictures the recognizer is run on (the real one, counted)."""
    seen: list[int] = []
    real = ocr_lines.read_lines
    monkeypatch.setattr(ocr_lines, "read_lines",
                        lambda picture, cfg, engine=None: seen.append(1) or real(picture, cfg, engine))
    return seen


def test_words_in_pictures_and_scans_are_found(server, tmp_path, prefect_harness, calls):
    from laminae.flows.build import refresh_index

    server.routes["/harbour.html"] = Route(body=_page())
    server.routes["/chart.png"] = Route(body=text_picture(PICTURE_LINES, chart=True), content_type="image/png")
    server.routes["/minutes.pdf"] = Route(body=scanned_pdf(SCAN_PAGES), content_type="application/pdf")
    index_dir = tmp_path / "index"
    summary = build([server.url("/harbour.html"), server.url("/minutes.pdf")], index_dir, tmp_path)
    assert summary["status"] == "success", summary["errors_by_stage"]
    assert len(calls) == 1 and summary["counts"]["subcomponents"]["text"] == 2

    index = laminae.open(str(index_dir))
    lines = index.search("marmalade", layer=2, mode="fts", kinds=["text"])
    assert len(lines) == 1 and "Marmalade" in lines[0].text
    node = index.get([lines[0].id])[0]
    assert node["crop"].startswith(b"\x89PNG") and node["score"] >= 0.5 and len(node["bbox"]) == 4
    image = index.get([node["parent_id"]])[0]
    assert image["kind"] == "image" and "Quayside" in image["text"]
    assert index.search("quayside tonnage", layer=1, mode="fts")[0].id == image["id"]
    assert index.retrieve("marmalade exports", k=1)[0].id == image["id"]

    scan = index.search("chestnut flour tariff", layer=1, mode="fts")[0]
    assert scan.kind == "paragraph" and scan.extra["url"].endswith("/minutes.pdf")
    paragraph = index.get([scan.id])[0]
    assert paragraph["page"] == 1 and paragraph["bbox"] and "barge" in paragraph["text"]
    assert index.search("autumn meeting millers", layer=2, mode="fts", kinds=["sentence"])
    document = index.get([scan.document_id])[0]
    assert any(w.startswith("ocr_used") for w in document["warnings"])

    server.routes["/harbour.html"] = Route(body=_page(" It is the oldest on the coast."))
    refreshed = refresh_index(index=str(index_dir))
    assert refreshed["changes"]["changed"] == 1 and refreshed["changes"]["unchanged"] == 1
    assert len(calls) == 1  # the page was parsed again, its picture read from the cache
    again = laminae.open(str(index_dir))
    assert again.search("marmalade", layer=2, mode="fts", kinds=["text"])[0].id == lines[0].id
