"""Videos and caption files under deadlines (issue 29 part 1): served on 127.0.0.1, decoded and read
by the video stage in a real worker process that is killed at the deadline (tiny deadlines here):
``decode_timeout`` and ``parse_timeout`` error rows, the other videos' keyframes and captions kept.
A video whose frames grow past ``max_pixels`` after its header is refused whatever its codec said."""

from __future__ import annotations

import io

import pytest

from laminae.schemas.storage import IndexFiles
from laminae.tasks.config import BuildSettings
from laminae.tasks.crawl.hosts import seed_scope
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.nodes.document_nodes import id_maker
from laminae.tasks.nodes.pages import parse_documents
from laminae.tasks.nodes.videos import add_video_nodes
from laminae.tasks.parse.isolated import close_pools
from laminae.tasks.storage.rawstore import RawStore
from tests.conftest import Route, page
from tests.support.clips import Scene, scene_video, webvtt

SCENES = [Scene(3, (200, 40, 40), "MIXING"), Scene(3, (40, 160, 60), "PROVING")]
CUES = [(0.5, 2.8, "First we mix flour, water and salt."), (3.2, 5.5, "The dough proves for an hour.")]


def many_cues(n: int = 27_000) -> bytes:
    """A WebVTT file of ``n`` cues said at once (one transcript window; 1.9 MB, under the 2 MB cap):
    54,000 sentences, seconds to split (3-6 s on the 2-core machine), far past a 1-s deadline."""
    return ("WEBVTT\n\n" + "".join(f"00:00.000 --> 00:01.000\nCue {i} is said here. And more words follow.\n\n"
                                   for i in range(n))).encode()


def resized_ts() -> bytes:
    """An MPEG-TS whose first frames are 64 x 64 (what its codec reports) and the rest 1280 x 720."""
    import av
    from PIL import Image

    def segment(width: int, height: int) -> bytes:
        out = io.BytesIO()
        with av.open(out, mode="w", format="mpegts") as container:
            stream = container.add_stream("libx264", rate=10, options={"preset": "veryfast"})
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            for i in range(10):
                for packet in stream.encode(av.VideoFrame.from_image(Image.new("RGB", (width, height), (i * 20, 50, 90)))):
                    container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
        return out.getvalue()

    return segment(64, 64) + segment(1280, 720)


def _video_page(video: str, track: str | None) -> bytes:
    caption = f"<track kind='captions' src='{track}' default>" if track else ""
    return page("Bread lecture", f"<p>A short lecture on baking bread.</p><video src='{video}' title='How bread is "
                f"made'>{caption}</video><p>Questions are welcome.</p>")


def _stage(server, tmp_path, paths: list[str], settings: BuildSettings):
    raw = RawStore(tmp_path)
    results = [FetchResult(url=server.url(p), final_url=server.url(p), content_type="text/html",
                           raw_key=raw.put(server.routes[p].body)) for p in paths]
    docs, errors = parse_documents(results, str(tmp_path), settings, "run")
    assert errors == []
    found = add_video_nodes(docs, raw, IndexFiles(tmp_path), settings, "run", {seed_scope(server.base)}, id_maker)
    return docs, {(p["url"].rpartition("/")[2], p["reason"]): p for p in found.problems}


@pytest.fixture
def site(server):
    clip = scene_video(SCENES)
    server.routes["/slow-captions.html"] = Route(body=_video_page("/media/a.mp4", "/media/many.vtt"))
    server.routes["/lecture.html"] = Route(body=_video_page("/media/b.mp4", "/media/lecture.vtt"))
    server.routes["/media/a.mp4"] = Route(body=clip, content_type="video/mp4")
    server.routes["/media/b.mp4"] = Route(body=clip + b"\0", content_type="video/mp4")  # other bytes: decoded again
    server.routes["/media/many.vtt"] = Route(body=many_cues(), content_type="text/vtt")
    server.routes["/media/lecture.vtt"] = Route(body=webvtt(CUES).encode(), content_type="text/vtt")
    yield server
    close_pools()


def test_a_caption_file_past_its_deadline_is_an_error_and_the_other_videos_are_read(site, tmp_path):
    settings = BuildSettings(parse={"timeout_s": 1}, video={"sidecar_captions": False})

    docs, problems = _stage(site, tmp_path, ["/slow-captions.html", "/lecture.html"], settings)

    assert set(problems) == {("many.vtt", "parse_timeout")}
    row = problems["many.vtt", "parse_timeout"]
    assert row["stage"] == "captions" and row["severity"] == "error"
    assert "deadline of 1 s" in row["message"] and row["document_id"] == docs[0].document["id"]
    slow, lecture = ([c["kind"] for c in d.components] for d in docs)
    assert "transcript" not in slow and "image" in slow  # its video's keyframes are kept
    assert lecture.count("transcript") == 1 and "image" in lecture
    video = next(c for c in docs[0].components if c["kind"] == "video")
    assert video["captions_url"] == site.url("/media/many.vtt")  # the track the page names stays named


def test_a_decode_past_its_deadline_is_an_error_and_the_captions_are_still_read(site, tmp_path):
    # decoding the 6-s clip takes far longer than a millisecond (a declared duration adds nothing)
    settings = BuildSettings(video={"decode_timeout_s": 0.001, "decode_timeout_per_s": 0, "sidecar_captions": False})

    docs, problems = _stage(site, tmp_path, ["/lecture.html"], settings)

    assert set(problems) == {("b.mp4", "decode_timeout")}
    row = problems["b.mp4", "decode_timeout"]
    assert row["stage"] == "video" and "killed" in row["message"] and "DECODE_TIMEOUT_S" in row["message"]
    kinds = [c["kind"] for c in docs[0].components]
    assert "image" not in kinds and kinds.count("transcript") == 1
    assert not (tmp_path / "keyframes").exists()  # a timeout is not cached: a later run decodes it again


def test_frames_larger_than_the_codec_said_are_refused(server, tmp_path):
    server.routes["/resized.html"] = Route(body=_video_page("/media/resized.ts", None))
    server.routes["/media/resized.ts"] = Route(body=resized_ts(), content_type="video/mp2t")
    settings = BuildSettings(video={"max_pixels": 100 * 100, "sidecar_captions": False})
    try:
        docs, problems = _stage(server, tmp_path, ["/resized.html"], settings)
    finally:
        close_pools()
    assert set(problems) == {("resized.ts", "video_too_large")}
    assert "1280x720-pixel frame exceeds max_pixels (10000)" in problems["resized.ts", "video_too_large"]["message"]


def test_a_videos_own_declared_duration_cannot_buy_it_an_unbounded_deadline():
    from laminae.tasks.config import VideoConfig
    from laminae.tasks.nodes.keyframes import decode_deadline

    cfg = VideoConfig()
    assert decode_deadline(60, cfg) == 60 + 2 * 60  # grows with the length a real video has
    assert decode_deadline(4 * 3600, cfg) == cfg.decode_timeout_max_s == 3600  # not 8 h
    assert decode_deadline(10, VideoConfig(decode_timeout_s=90, decode_timeout_max_s=30)) == 90  # never below the base


def test_a_pages_videos_share_one_decoding_budget(server, tmp_path):
    """Three videos on one page, a budget of 1 ms: the one already in the keyframe cache costs
    nothing and keeps its keyframes, the next is killed when the budget runs out, the last is not
    decoded at all; every video's captions are read."""
    clip = scene_video(SCENES)
    videos = "".join(f"<video src='/media/{name}.mp4' title='Part {name}'><track kind='captions' "
                     f"src='/media/{name}.vtt' default></video>" for name in "abc")
    server.routes["/series.html"] = Route(body=page("Bread series", f"<p>Three parts.</p>{videos}"))
    server.routes["/cached.html"] = Route(body=_video_page("/media/a.mp4", None))
    for n, name in enumerate("abc"):
        server.routes[f"/media/{name}.mp4"] = Route(body=clip + b"\0" * n, content_type="video/mp4")
        server.routes[f"/media/{name}.vtt"] = Route(body=webvtt(CUES).encode(), content_type="text/vtt")
    try:
        _stage(server, tmp_path, ["/cached.html"], BuildSettings(video={"sidecar_captions": False}))
        settings = BuildSettings(video={"decode_timeout_max_s": 0.001, "sidecar_captions": False})
        docs, problems = _stage(server, tmp_path, ["/series.html"], settings)
    finally:
        close_pools()

    assert set(problems) == {("b.mp4", "decode_timeout"), ("c.mp4", "decode_budget_spent")}
    killed, skipped = problems["b.mp4", "decode_timeout"], problems["c.mp4", "decode_budget_spent"]
    assert killed["severity"] == "error" and "its page had left" in killed["message"]
    assert skipped["severity"] == "warning" and "DECODE_TIMEOUT_MAX_S" in skipped["message"]
    assert skipped["document_id"] == docs[0].document["id"]
    images = [c for c in docs[0].components if c["kind"] == "image"]
    assert images and {c["video_url"] for c in images} == {server.url("/media/a.mp4")}
    assert [c["kind"] for c in docs[0].components].count("transcript") == 3
