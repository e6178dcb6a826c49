"""No silent truncation (issue 29 part 2): a build of pages served on 127.0.0.1 whose DOM is deeper
than libxml2's limits, whose text node is over 10 MB or whose link address is 12 MB. Every page's
text after the hostile part is indexed; what was read other than as written is a warning row
naming the page."""

from __future__ import annotations

import pytest

import laminae
from laminae.schemas import document_id
from tests.conftest import Route, page
from tests.e2e.test_flow import SETTINGS, build

pytestmark = pytest.mark.slow
# texts are embedded cut to 64 characters: the 12 MB page's six thousand pieces stay cheap
LIGHT = {**SETTINGS, "detect": {"enabled": False}, "ocr": {"enabled": False},
         "embed": {**SETTINGS["embed"], "max_chars": 64}}


def test_hostile_pages_keep_their_text_and_warn_of_what_was_cut(server, tmp_path, prefect_harness):
    s = server
    tail = "<p>The closing paragraph of the page.</p>"
    s.routes["/fonts"] = Route(body=page("Fonts", "<p>Old page.</p>" + "<font color='red'>" * 300
                                         + "<p>Under three hundred fonts.</p>" + tail))
    s.routes["/divs"] = Route(body=page("Divs", "<p>Nested page.</p>" + "<div>" * 5000
                                        + "<p>Under five thousand divs.</p>" + "</div>" * 5000 + tail))
    words = ("wheat rye oats barley " * 600_000)[:12_500_000]
    s.routes["/text"] = Route(body=page("Text", f"<p>{words}</p>" + tail))
    long_href = "/" + "a" * 12_000_000
    s.routes["/href"] = Route(body=page("Href", f"<p>A <a href='{long_href}'>huge link</a> and a "
                                        "<a href='/short'>short one</a>.</p>" + tail))
    settings = {**LIGHT, "crawl": {**LIGHT["crawl"], "retries": 0}}
    index = tmp_path / "index"

    summary = build([s.url(p) for p in ("/fonts", "/divs", "/text", "/href")], index, tmp_path,
                    settings=settings)

    assert summary["status"] == "success", summary
    opened = laminae.open(str(index))
    texts: dict[str, list[str]] = {}
    for comp in opened.table("components").to_arrow().select(["document_id", "text"]).to_pylist():
        texts.setdefault(comp["document_id"], []).append(comp["text"])
    for path, inner in [("/fonts", "Under three hundred fonts."), ("/divs", "Under five thousand divs."),
                        ("/href", "A huge link and a short one.")]:
        joined = "\n".join(texts[document_id(s.url(path))])
        assert inner in joined and "The closing paragraph of the page." in joined, path
    huge = texts[document_id(s.url("/text"))]
    assert sum(len(t) for t in huge) >= 12_400_000 and "The closing paragraph of the page." in huge

    rows = [r for r in opened.table("errors").to_arrow().to_pylist() if r["run_id"] == summary["run_id"]]
    assert all(r["severity"] == "warning" for r in rows), rows
    warned = {(r["url"], r["reason"]): r for r in rows}
    assert len(rows) == 2 and set(warned) == {(s.url("/divs"), "deep_html"), (s.url("/href"), "truncated_html")}
    assert "html.parser" in warned[(s.url("/divs"), "deep_html")]["message"]
    assert "12,000,001 characters" in warned[(s.url("/href"), "truncated_html")]["message"]
    href_links = [e["target_url"] for e in opened.table("edges").to_arrow().to_pylist()
                  if e["kind"] == "links_to" and e["document_id"] == document_id(s.url("/href"))]
    assert set(href_links) == {s.url("/short")}
    for (url, _), row in warned.items():
        assert row["stage"] == "parse" and row["document_id"] == document_id(url)
