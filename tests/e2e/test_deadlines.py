"""Deadlines end to end (issue 29 part 1): a build of pages served on 127.0.0.1 where one page, one
PDF and one caption file take far longer than their (tiny) deadlines; the flow records their
error rows, indexes everything else, and ends ``partial``."""

from __future__ import annotations

import pytest

import laminae
from laminae.schemas import document_id
from tests.conftest import Route, page
from tests.e2e.test_flow import SETTINGS, build
from tests.stages.test_deadlines import many_paragraphs, ruled_pdf
from tests.stages.test_video_deadlines import many_cues
from tests.support.clips import Scene, scene_video

pytestmark = pytest.mark.slow


def test_a_build_records_what_ran_past_its_deadline_and_indexes_the_rest(server, tmp_path, prefect_harness):
    s = server
    s.routes["/slow"] = Route(body=many_paragraphs())
    s.routes["/ruled.pdf"] = Route(body=ruled_pdf(12), content_type="application/pdf")
    s.routes["/lecture"] = Route(body=page("Lecture", "<p>A lecture on rye.</p><video src='/v.mp4'>"
                                           "<track kind='captions' src='/v.vtt'></video>"))
    s.routes["/v.mp4"] = Route(body=scene_video([Scene(2, (200, 40, 40), "RYE")]), content_type="video/mp4")
    s.routes["/v.vtt"] = Route(body=many_cues(), content_type="text/vtt")
    s.routes["/fine"] = Route(body=page("Spelt", "<p>Spelt is an old wheat. It makes a nutty loaf.</p>"))
    settings = {**SETTINGS, "detect": {"enabled": False}, "ocr": {"enabled": False},
                "parse": {"timeout_s": 1, "pdf_page_timeout_s": 0}}
    index = tmp_path / "index"

    summary = build([s.url(p) for p in ("/slow", "/ruled.pdf", "/lecture", "/fine")], index, tmp_path,
                    settings=settings)

    opened = laminae.open(str(index))
    docs = {d["id"] for d in opened.table("documents").to_arrow().to_pylist()}
    assert docs == {document_id(s.url("/lecture")), document_id(s.url("/fine"))}
    errors = {(r["url"], r["stage"], r["reason"]) for r in opened.table("errors").to_arrow().to_pylist()
              if r["run_id"] == summary["run_id"] and r["severity"] == "error"}
    assert errors == {(s.url("/slow"), "parse", "parse_timeout"), (s.url("/ruled.pdf"), "parse", "parse_timeout"),
                      (s.url("/v.vtt"), "captions", "parse_timeout")}
    kinds = [c["kind"] for c in opened.table("components").to_arrow().to_pylist()
             if c["document_id"] == document_id(s.url("/lecture"))]
    assert "image" in kinds and "transcript" not in kinds  # the video's keyframes, not its captions
    assert summary["status"] == "partial"
