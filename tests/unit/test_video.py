"""Videos piece by piece: caption files, cue windows and sentence times, video sniffing, sidecar
URLs, and keyframes of videos made here with PyAV (scene changes, limits, broken files, the cache)."""

from __future__ import annotations

import pytest

from laminae.schemas.storage import IndexFiles
from laminae.schemas.timecodes import clock
from laminae.tasks.config import VideoConfig
from laminae.tasks.crawl.formats import sniff_content_type
from laminae.tasks.nodes.document_nodes import id_maker
from laminae.tasks.nodes.keyframes import (
    VideoProblem,
    cache_path,
    cached_frames,
    choose_keyframes,
    remember_frames,
)
from laminae.tasks.nodes.transcripts import CaptionError, Cue, parse_captions, transcript_nodes, windows
from laminae.tasks.nodes.videos import sidecars
from laminae.tasks.parse.html import parse_html
from tests.support.clips import Scene, scene_starts, scene_video, srt, webvtt

CUES = [(0.5, 2.0, "One."), (2.5, 4.25, "Two <i>words</i>."), (61.0, 62.5, "Three &amp; four.")]
SCENES = [Scene(2, (200, 40, 40), "A"), Scene(2, (40, 160, 60), "B"), Scene(2, (30, 60, 200), "C")]


@pytest.fixture(scope="module")
def clip() -> bytes:
    return scene_video(SCENES, width=160, height=96)


class Store(dict):
    def put(self, data: bytes) -> str:
        key = f"k{len(self)}"
        self[key] = data
        return key


def test_webvtt_and_srt_give_the_same_cues():
    expected = [Cue(0.5, 2.0, "One."), Cue(2.5, 4.25, "Two words."), Cue(61.0, 62.5, "Three & four.")]
    vtt = webvtt(CUES).replace("WEBVTT", "WEBVTT - lecture\n\nNOTE made for a test\n\nSTYLE\n::cue { color: red }")
    assert parse_captions(vtt.encode()) == expected
    assert parse_captions(("\ufeff" + srt(CUES)).replace("\n", "\r\n").encode()) == expected
    assert parse_captions(b"WEBVTT\n\n01:02.500 --> 01:03.000 align:start\n<v Ann>Short clock</v>\n") == [
        Cue(62.5, 63.0, "Short clock")]


@pytest.mark.parametrize(("data", "reason"), [
    (b"", "empty_captions"), (b"<html><body>not captions</body></html>", "not_captions"),
    (b"\x00\x01binary", "not_captions"), (b"WEBVTT\n\nNOTE nothing timed\n", "empty_captions"),
    (b"1\nnot a time\nhello\n", "not_captions"),
])
def test_what_is_not_webvtt_or_srt_is_a_caption_error(data, reason):
    with pytest.raises(CaptionError) as err:
        parse_captions(data)
    assert err.value.reason == reason


def test_cues_are_grouped_by_window_and_sentences_keep_their_times():
    cues = [Cue(*c) for c in [(0.0, 2.0, "Mix the flour"), (2.0, 4.0, "and water. Knead it."), (4.0, 6.0, "Rest."),
                               (31.0, 33.0, "Shape the loaf.")]]
    assert [len(w) for w in windows(cues, 30)] == [3, 1]
    video = {"document_id": "d1", "video_url": "http://h.test/v.mp4", "captions_url": "http://h.test/v.vtt",
             "section_path": ["Baking"]}
    comps, sentences, edges = transcript_nodes(video, cues, 30, "en", id_maker("d1"))
    assert [(c["kind"], c["time_start"], c["time_end"], c["video_url"]) for c in comps] == [
        ("transcript", 0.0, 6.0, video["video_url"]), ("transcript", 31.0, 33.0, video["video_url"])]
    assert comps[0]["text"] == "Mix the flour and water. Knead it. Rest."
    first = [(s["text"], s["time_start"], s["time_end"]) for s in sentences if s["parent_id"] == comps[0]["id"]]
    assert first == [("Mix the flour and water.", 0.0, 4.0), ("Knead it.", 2.0, 4.0), ("Rest.", 4.0, 6.0)]
    assert all(s["text"] == comps[0]["text"][s["char_start"]:s["char_end"]] for s in sentences[:3])
    assert len(edges) == len(comps) + len(sentences)


def test_clock_cites_minutes_and_hours():
    assert [clock(t) for t in (0, 3.9, 135, 3723.2)] == ["0:00", "0:03", "2:15", "1:02:03"]


def test_video_bytes_are_sniffed(clip):
    assert sniff_content_type(clip, "application/octet-stream") == "video/mp4"
    assert sniff_content_type(b"\x1a\x45\xdf\xa3\x01\x00\x00\x00\x00\x00\x00\x1fB\x82\x84webm", None) == "video/webm"
    assert sniff_content_type(b"RIFF\x00\x00\x00\x00AVI LIST", None) == "video/x-msvideo"


def test_sidecars_replace_the_extension():
    assert sidecars("http://h.test/media/talk.mp4?x=1") == ["http://h.test/media/talk.vtt", "http://h.test/media/talk.srt"]
    assert sidecars("http://h.test/v.d/clip") == ["http://h.test/v.d/clip.vtt", "http://h.test/v.d/clip.srt"]


def test_video_elements_are_found_with_their_tracks():
    html = ("<html><head><title>T</title></head><body><main><h2>Demo</h2><video src='a.webm' title='Clip'>"
            "<track kind='chapters' src='c.vtt'><track kind='subtitles' src='fr.vtt' srclang='fr'>"
            "<track kind='captions' src='en.vtt' default>Fallback text</video>"
            "<video><source src='b.mp4'></video><video></video></main></body></html>")
    page = parse_html(html.encode(), "http://h.test/dir/page.html")
    videos = [c for c in page.components if c.kind == "video"]
    assert [(v.video_url, v.captions_url) for v in videos] == [
        ("http://h.test/dir/a.webm", "http://h.test/dir/en.vtt"), ("http://h.test/dir/b.mp4", None)]
    assert videos[0].text == "Video: Clip. In: T > Demo."
    assert not [c for c in page.components if c.kind == "paragraph"]  # the fallback text is not the page's


def test_keyframes_follow_the_scene_changes(clip):
    store = Store()
    frames = choose_keyframes(clip, VideoConfig(), store.put)
    assert frames.duration_s == pytest.approx(6.0, abs=0.15) and (frames.width, frames.height) == (160, 96)
    times = [k.time_s for k in frames.keyframes]
    assert len(times) == len(SCENES)
    assert all(start <= t <= start + 0.25 + 0.1 + 1e-6 for t, start in zip(times, scene_starts(SCENES), strict=True))
    assert all(store[k.image_key][:3] == b"\xff\xd8\xff" for k in frames.keyframes)
    # spacing and the cap
    assert len(choose_keyframes(clip, VideoConfig(min_spacing_s=3), store.put).keyframes) == 2
    assert len(choose_keyframes(clip, VideoConfig(max_keyframes=1), store.put).keyframes) == 1
    still = scene_video([Scene(5, (90, 90, 90), "")], width=64, height=64)
    assert [k.time_s for k in choose_keyframes(still, VideoConfig(max_spacing_s=2), store.put).keyframes] == [
        0.0, 2.0, 4.0]


def test_a_high_frame_rate_video_stops_at_the_frame_cap_with_its_keyframes_so_far():
    # 200 frames a second: one second of video costs 200 decoded frames, but only sample_fps are compared
    fast = scene_video([Scene(1, (200, 40, 40), "A"), Scene(1, (40, 160, 60), "B")], width=64, height=48, fps=200)
    cfg = VideoConfig(min_spacing_s=0.5)
    store = Store()
    whole = choose_keyframes(fast, cfg, store.put)
    assert [k.time_s for k in whole.keyframes] == [0.0, 1.0] and whole.warning is None

    cut = choose_keyframes(fast, VideoConfig(min_spacing_s=0.5, max_decoded_frames=150), store.put)
    assert [k.time_s for k in cut.keyframes] == [0.0]  # the second scene starts at frame 200
    assert cut.warning_reason == "too_many_frames"
    assert "after 150 frames (max_decoded_frames), at 0.7 s" in cut.warning
    assert cut.duration_s == pytest.approx(2.0, abs=0.05)  # the declared duration stays
    assert [k.time_s for k in choose_keyframes(fast, VideoConfig(min_spacing_s=0.5, max_decoded_frames=250),
                                               store.put).keyframes] == [0.0, 1.0]
    assert cache_path("v", cfg) != cache_path("v", VideoConfig(min_spacing_s=0.5, max_decoded_frames=150))


@pytest.mark.parametrize(("cfg", "cut", "reason"), [
    (VideoConfig(max_duration_s=3), None, "video_too_long"),
    (VideoConfig(max_pixels=100 * 90), None, "video_too_large"),
    (VideoConfig(), 0.5, "undecodable_video"),
])
def test_unusable_videos_are_problems(clip, cfg, cut, reason):
    data = clip[: int(len(clip) * cut)] if cut else clip
    with pytest.raises(VideoProblem) as err:
        choose_keyframes(data, cfg, Store().put)
    assert err.value.reason == reason


def test_files_that_are_no_video_are_problems():
    for data in (b"\x00" * 4000, b"RIFF\x00\x00\x00\x00AVI garbage" * 50):
        with pytest.raises(VideoProblem) as err:
            choose_keyframes(data, VideoConfig(), Store().put)
        assert err.value.reason in ("undecodable_video", "no_video_stream")


def test_a_choice_is_cached_by_video_and_settings(clip, tmp_path):
    store, files, cfg = Store(), IndexFiles(str(tmp_path)), VideoConfig()
    frames = choose_keyframes(clip, cfg, store.put)
    remember_frames("v1", frames, files, cfg)
    assert cached_frames("v1", files, cfg, store.__contains__) == frames
    assert cached_frames("v1", files, VideoConfig(scene_threshold=0.3), store.__contains__) is None
    assert cache_path("v1", cfg) != cache_path("v1", VideoConfig(max_keyframes=3))
    store.pop(frames.keyframes[0].image_key)  # a keyframe's picture is gone: decode again
    assert cached_frames("v1", files, cfg, store.__contains__) is None


def test_views_cite_keyframes_and_transcripts_by_time():
    from laminae.views import node_view

    base = {"document_id": "d", "parent_id": "d", "layer": 1, "section_path": ["Demo"], "text": "t",
            "video_url": "http://h.test/v.mp4"}
    frame = node_view({**base, "id": "f", "kind": "image", "time_s": 135.25, "image": b"jpeg"})
    assert (frame["time_s"], frame["at"], frame["video_url"], frame["has_image"]) == (135.25, "2:15", base["video_url"], True)
    span = node_view({**base, "id": "t", "kind": "transcript", "time_start": 120.0, "time_end": 149.5})
    assert (span["time_start"], span["time_end"], span["at"], span["video_url"]) == (120.0, 149.5, "2:00-2:29",
                                                                                  base["video_url"])
    sentence = node_view({"id": "s", "kind": "sentence", "layer": 2, "document_id": "d", "parent_id": "t", "text": "x",
                          "time_start": 3.2, "time_end": 6.5})
    assert sentence["at"] == "0:03-0:06" and "video_url" not in sentence
    video = node_view({**base, "id": "v", "kind": "video", "duration_s": 12.0, "captions_url": "http://h.test/v.vtt"})
    assert (video["duration_s"], video["captions_url"]) == (12.0, "http://h.test/v.vtt")
    assert "at" not in node_view({**base, "id": "p", "kind": "paragraph"})
