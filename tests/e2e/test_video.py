"""Videos end to end: a video made in the test (PyAV, distinct scenes) and its WebVTT track on a page
served over 127.0.0.1, a video seed with an SRT file beside it, and broken ones; built and refreshed
by the Prefect flow into a real index, read back with the reader."""

from __future__ import annotations

import logging

import pytest

import laminae
from laminae.schemas import document_id
from laminae.views import describe
from tests.conftest import Route, page
from tests.support.clips import Scene, scene_starts, scene_video, srt, webvtt

pytestmark = pytest.mark.slow
SETTINGS = {"crawl": {"backoff": 0.01, "retries": 0, "timeout_read": 2.0}, "embed": {"device": "cpu", "threads": 1},
            "video": {"caption_window_s": 9}}
SCENES = [Scene(3, (200, 40, 40), "MIXING"), Scene(4, (40, 160, 60), "PROVING"), Scene(3, (30, 60, 200), "BAKING"),
          Scene(4, (230, 200, 40), "COOLING")]
CUES = [(0.5, 2.8, "First we mix flour, water and salt."), (3.2, 6.5, "The dough proves for an hour. <b>Watch</b> it rise."),
        (7.1, 9.8, "Then it bakes at <a href='http://x.test/'>250 degrees</a>."), (10.2, 13.5, "Let it cool before cutting.")]
# a frame is compared sample_fps (4) times a second and the video has 10 frames a second
TOLERANCE = 0.25 + 0.1 + 1e-6


def _lecture(video: str = "/media/lecture.mp4", extra: str = "") -> bytes:
    return page("Bread lecture", f"<h1>Bread lecture</h1><p>A short lecture on baking bread.{extra}</p>"
                f"<figure><video controls width='320' height='180' title='How bread is made'>"
                f"<source src='{video}' type='video/mp4'>"
                "<track kind='captions' src='/media/lecture.vtt' srclang='en' default>"
                "Your browser cannot play this video.</video><figcaption>From dough to loaf</figcaption></figure>"
                "<p>Questions are welcome after the lecture.</p>")


def _etag_route(body: bytes, etag: str, asked: list):
    """Serves ``body`` with an ETag, answering 304 to a request that names it; ``asked`` gets each
    request's If-None-Match."""

    def handler(h):
        asked.append(h.headers.get("If-None-Match"))
        same = h.headers.get("If-None-Match") == etag
        h.send_response(304 if same else 200)
        h.send_header("ETag", etag)
        h.send_header("Content-Type", "video/mp4")
        h.send_header("Content-Length", "0" if same else str(len(body)))
        h.end_headers()
        if not same:
            h.wfile.write(body)

    return handler


@pytest.fixture(scope="module")
def video_site(tmp_path_factory, prefect_harness):
    from tests.conftest import RouteServer

    server = RouteServer()
    clip = scene_video(SCENES)
    short = scene_video(SCENES[:2])
    server.routes["/lecture.html"] = Route(body=_lecture())
    server.asked = []
    server.routes["/media/lecture.mp4"] = _etag_route(clip, '"lecture-v1"', server.asked)
    server.routes["/media/lecture.vtt"] = Route(body=webvtt(CUES).encode(), content_type="text/vtt")
    server.routes["/media/talk.mp4"] = Route(body=short, content_type="video/mp4")
    server.routes["/media/talk.srt"] = Route(body=srt(CUES[:2]).encode(), content_type="text/plain")
    broken = page("Broken media", "<p>This page keeps its text although its video and captions are broken.</p>"
                  "<video src='/media/broken.mp4'><track kind='subtitles' src='/media/broken.vtt'></video>")
    server.routes["/broken.html"] = Route(body=broken)
    server.routes["/media/broken.mp4"] = Route(body=clip[: len(clip) // 3], content_type="video/mp4")
    server.routes["/media/broken.vtt"] = Route(body=b"<html><body>not captions</body></html>", content_type="text/vtt")
    tmp = tmp_path_factory.mktemp("video")
    seeds = tmp / "seeds.txt"
    seeds.write_text("\n".join(server.url(p) for p in ("/lecture.html", "/media/talk.mp4", "/broken.html")) + "\n")
    from laminae.flows.build import build_index

    summary = build_index(seeds=str(seeds), index=str(tmp / "index"), settings=SETTINGS)
    yield server, str(tmp / "index"), summary, seeds
    server.close()


def _components(index: str, url: str) -> list[dict]:
    rows = laminae.open(index).table("components").to_arrow().to_pylist()
    return sorted((r for r in rows if r["document_id"] == document_id(url)), key=lambda r: r["ordinal"])


def test_keyframes_are_the_scene_changes(video_site):
    server, index, summary, _ = video_site
    assert summary["status"] == "partial"  # the broken video and captions
    comps = _components(index, server.url("/lecture.html"))
    video = next(c for c in comps if c["kind"] == "video")
    assert video["video_url"] == server.url("/media/lecture.mp4") and video["video_key"]
    assert video["duration_s"] == pytest.approx(14.0, abs=0.2)
    assert (video["image_width"], video["image_height"]) == (320, 180)
    assert video["caption"] == "From dough to loaf" and video["captions_url"] == server.url("/media/lecture.vtt")
    frames = [c for c in comps if c["kind"] == "image" and c["time_s"] is not None]
    starts = scene_starts(SCENES)
    assert len(frames) == len(starts)
    for frame, start in zip(frames, starts, strict=True):
        assert start <= frame["time_s"] <= start + TOLERANCE
        assert frame["image_key"] and frame["image_mime"] == "image/jpeg" and frame["video_url"] == video["video_url"]
        assert frame["image_url"] == f"{video['video_url']}#t={frame['time_s']:g}"
    # the keyframes and transcripts follow their video in document order
    kinds = [c["kind"] for c in comps]
    at = kinds.index("video")
    assert kinds[at + 1: at + 1 + len(frames)] == ["image"] * len(frames)
    assert [c["ordinal"] for c in comps] == list(range(len(comps)))


def test_captions_land_with_their_times(video_site):
    server, index, _, _ = video_site
    comps = _components(index, server.url("/lecture.html"))
    transcripts = [c for c in comps if c["kind"] == "transcript"]
    # cues grouped into windows of 9 s from their first: [0.5, 9.5) and [10.2, ...)
    assert [(t["time_start"], t["time_end"]) for t in transcripts] == [(0.5, 9.8), (10.2, 13.5)]
    assert transcripts[0]["text"] == ("First we mix flour, water and salt. The dough proves for an hour. Watch it "
                                      "rise. Then it bakes at 250 degrees.")
    subs = laminae.open(index).table("subcomponents").to_arrow().to_pylist()
    sentences = sorted((s for s in subs if s["parent_id"] == transcripts[0]["id"]), key=lambda s: s["ordinal"])
    assert [(s["text"], s["time_start"], s["time_end"]) for s in sentences] == [
        ("First we mix flour, water and salt.", 0.5, 2.8), ("The dough proves for an hour.", 3.2, 6.5),
        ("Watch it rise.", 3.2, 6.5), ("Then it bakes at 250 degrees.", 7.1, 9.8)]
    edges = laminae.open(index).table("edges").to_arrow().to_pylist()
    assert not [e for e in edges if e["kind"] == "links_to" and e["target_url"] == "http://x.test/"]


def test_a_video_seed_is_a_document_with_its_sidecar_captions(video_site):
    server, index, _, _ = video_site
    url = server.url("/media/talk.mp4")
    opened = laminae.open(index)
    doc = opened.get([document_id(url)])[0]
    assert doc["kind"] == "video" and doc["title"] == "talk.mp4"
    comps = _components(index, url)
    assert [c["kind"] for c in comps] == ["video", "image", "image", "transcript"]
    assert [c["time_s"] for c in comps[1:3]] == [0.0, pytest.approx(3.0, abs=TOLERANCE)]
    assert comps[0]["captions_url"] == server.url("/media/talk.srt")
    assert "The dough proves for an hour." in comps[3]["text"]


def test_the_reader_returns_a_keyframe_with_its_time(video_site):
    server, index, _, _ = video_site
    opened = laminae.open(index)
    frames = [c for c in _components(index, server.url("/lecture.html")) if c["time_s"] is not None]
    node = opened.get([frames[1]["id"]])[0]
    assert node["image"][:3] == b"\xff\xd8\xff" and node["time_s"] == frames[1]["time_s"]
    views, _, _ = describe(opened, [frames[1]["id"]])
    assert views[0]["at"] == "0:03" and views[0]["has_image"] and views[0]["video_url"].endswith("/lecture.mp4")
    hits = opened.search("the dough proves", layer=1, kinds=["transcript"], k=5)
    assert hits and {h.kind for h in hits} == {"transcript"}
    views, _, _ = describe(opened, [hits[0].id])
    assert views[0]["time_start"] is not None and "-" in views[0]["at"]
    assert {h.kind for h in opened.search("bread lecture video", layer=1, kinds=["video"], k=5)} == {"video"}
    assert {h.kind for h in opened.search("talk", layer=0, kinds=["video"], k=5)} == {"video"}


def test_broken_video_and_captions_are_errors_and_the_page_is_indexed(video_site):
    server, index, _, _ = video_site
    errors = laminae.open(index).table("errors").to_arrow().to_pylist()
    by_url = {e["url"]: e for e in errors}
    video = by_url[server.url("/media/broken.mp4")]
    assert (video["stage"], video["reason"]) == ("video", "undecodable_video")
    assert video["document_id"] == document_id(server.url("/broken.html"))
    captions = by_url[server.url("/media/broken.vtt")]
    assert (captions["stage"], captions["reason"]) == ("captions", "not_captions")
    comps = _components(index, server.url("/broken.html"))
    assert [c["kind"] for c in comps] == ["paragraph", "video"]


def test_refresh_of_an_unchanged_video_decodes_nothing(video_site, caplog):
    from laminae.flows.build import refresh_index

    server, index, _, _ = video_site
    before = {c["id"]: c for c in _components(index, server.url("/lecture.html"))}
    # the page changes (so it is parsed again), its video does not
    server.routes["/lecture.html"] = Route(body=_lecture(extra=" Bring an apron."))
    with caplog.at_level(logging.INFO, logger="laminae.video"):
        summary = refresh_index(index)
    assert summary["changes"]["changed"] == 1 and summary["changes"]["unchanged"] == 2
    decoding = [r.getMessage() for r in caplog.records if r.name == "laminae.video"]
    assert decoding == ["video: 0 videos decoded, 1 from the cache"]
    assert server.asked == [None, '"lecture-v1"']  # asked for again with its ETag: a 304, no bytes sent
    after = {c["id"]: c for c in _components(index, server.url("/lecture.html"))}
    frames = {i: c["image_key"] for i, c in after.items() if c["time_s"] is not None}
    assert frames == {i: c["image_key"] for i, c in before.items() if c["time_s"] is not None}
