"""A name read in a picture without its spaces survives the spacing repair (issue 29 part 5): two
pages served on 127.0.0.1 show one picture reading "Marbleheadbasin"; the page that names
Marblehead keeps the name whole, the other splits it and keeps the unsplit forms searchable."""

from __future__ import annotations

import pytest

import laminae
from laminae.schemas import document_id
from tests.conftest import Route, page
from tests.e2e.test_flow import SETTINGS, build
from tests.support.scans import text_picture

pytestmark = pytest.mark.slow


def test_a_name_in_a_picture_is_found_by_full_text_search(server, tmp_path, prefect_harness):
    picture = "<figure><img src='/basin.png' alt='a map'><figcaption>Survey map</figcaption></figure>"
    server.routes["/harbour.html"] = Route(body=page("Harbour", "<p>Boats moor at Marblehead in winter.</p>" + picture))
    server.routes["/survey.html"] = Route(body=page("Survey", "<p>The survey of the coast.</p>" + picture))
    server.routes["/basin.png"] = Route(body=text_picture(["Marbleheadbasin"]), content_type="image/png")
    index_dir = tmp_path / "index"
    settings = {**SETTINGS, "detect": {"enabled": False}}
    summary = build([server.url("/harbour.html"), server.url("/survey.html")], index_dir, tmp_path, settings=settings)
    assert summary["status"] == "success", summary["errors_by_stage"]

    index = laminae.open(str(index_dir))
    lines = {r["document_id"]: r for r in index.table("subcomponents").to_arrow().to_pylist() if r["kind"] == "text"}
    harbour, survey = document_id(server.url("/harbour.html")), document_id(server.url("/survey.html"))
    assert lines[harbour]["text"] == "Marblehead basin"  # the page names Marblehead: kept whole
    assert lines[harbour]["search_terms"] == ["Marbleheadbasin"]
    assert lines[survey]["text"] == "Marble head basin"  # a name nobody told the repair about is split...
    assert {"Marbleheadbasin", "Marblehead"} <= set(lines[survey]["search_terms"])
    # ...and both pages' line and picture are found by the name, and by the run as it was read
    for query in ("Marblehead", "Marbleheadbasin"):
        found = index.search(query, layer=2, mode="fts", kinds=["text"], k=5)
        assert {hit.document_id for hit in found} == {harbour, survey}, query
        pictures = index.search(query, layer=1, mode="fts", kinds=["image"], k=5)
        assert {hit.document_id for hit in pictures} == {harbour, survey}, query
