"""Videos: video components → their keyframes (image components) and captions (transcript components).

Reads the batch's video components (``video_url``, ``captions_url``; a video document's already
carries its bytes' ``video_key``), fetches the videos on pages and their caption files (the
``<track>``'s, else the WebVTT or SRT file next to the video) into the raw store (a video fetched
before is asked for with its ETag and Last-Modified: a 304 keeps its bytes), and the keyframe
cache (``laminae.tasks.nodes.keyframes``). Writes, per video: ``video_key``, ``duration_s`` and the
frame size on its row; after it, one ``image`` component per keyframe (``time_s``, the picture in the
raw store, ``image_url`` the video's URL with ``#t=<seconds>``) that the detect, OCR and embed
stages treat like any picture, and the ``transcript`` components with their timed sentences
(``laminae.tasks.nodes.transcripts``); their ``contains`` edges; fetch results; and problems
(stage ``video`` or ``captions``): the page around a broken video is indexed as before.

Decoding a video and reading a caption file (parsing its cues, splitting its sentences) run in a
worker process of their own (``laminae.tasks.parse.isolated``, unless ``runner.parse_workers`` is
0), killed at the deadline: ``decode_timeout`` and ``parse_timeout`` error rows, not a stalled batch.
A page's videos are decoded one after another within one budget of ``decode_timeout_max_s`` seconds
in all (20 videos of an hour each would otherwise take 20 h): each decode's deadline is at most
what the page has left, and once it is spent the page's other videos are not decoded (a
``decode_budget_spent`` warning row each; their captions are still read). The videos decoded
before it are cached, so the next run goes on with the rest.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import urlsplit, urlunsplit

from laminae.schemas.search_text import serialize_document
from laminae.schemas.storage import IndexFiles
from laminae.schemas.tables import error_row, timeout_row
from laminae.schemas.timecodes import clock
from laminae.tasks.config import BuildSettings, VideoConfig
from laminae.tasks.crawl.fetch import fetch_images
from laminae.tasks.crawl.files import is_file_url
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.nodes.document_nodes import DocumentNodes, component_row, edge_row
from laminae.tasks.nodes.keyframes import (
    VideoFrames,
    VideoProblem,
    cached_frames,
    choose_keyframes,
    remember_frames,
)
from laminae.tasks.nodes.transcripts import CaptionError, parse_captions, transcript_nodes
from laminae.tasks.parse.isolated import WorkerCrash, WorkerTimeout, worker_pool
from laminae.tasks.storage.rawstore import RawStore

log = logging.getLogger("laminae.video")
SIDECARS = (".vtt", ".srt")


@dataclass
class VideoNodes:
    """What the stage did with one batch's videos."""

    fetches: list[FetchResult] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)
    decoded: int = 0  # distinct videos run through the decoder
    cached: int = 0  # distinct videos whose keyframes came from the cache


def sidecars(video_url: str) -> list[str]:
    """The caption files that may sit next to a video: its URL with ``.vtt``, then ``.srt``."""
    parts = urlsplit(video_url)
    stem, dot, _ = parts.path.rpartition(".")
    base = stem if dot and "/" not in parts.path[len(stem):] else parts.path
    return [urlunsplit((parts.scheme, parts.netloc, base + suffix, "", "")) for suffix in SIDECARS]


def add_video_nodes(docs: list[DocumentNodes], raw: RawStore, files: IndexFiles, settings: BuildSettings,
                    run_id: str, seed_hosts: set[str], make_id: Callable[[str], Callable[[str, str], str]],
                    previous: Callable[[list[str]], dict[str, dict]] | None = None) -> VideoNodes:
    """Fetch, decode (or find in the cache) and caption every video component of ``docs``, in place.
    ``make_id(document_id)`` gives the id maker of a document's new nodes (a module-level function:
    caption files are read in a worker process that calls it); ``previous(urls)`` the last
    ``fetches`` rows of the videos' URLs (a video fetched before is asked for conditionally: ETag,
    Last-Modified)."""
    out = VideoNodes()
    cfg = settings.video
    videos = [(d, c) for d in docs for c in d.components if c["kind"] == "video" and c.get("video_url")]
    if not videos or not cfg.enabled:
        return out
    urls = [c["video_url"] for _, c in videos if not c["video_key"]]
    robots: list[FetchResult] = []
    fetched = fetch_images(urls, settings.crawl, raw, seed_hosts, kind="video",
                           previous=previous(urls) if previous and urls else None, problems=robots)
    tracks = {c["id"]: _caption_files(c, cfg.sidecar_captions) for _, c in videos}
    captions = fetch_images([u for found in tracks.values() for u in found], settings.crawl, raw, seed_hosts,
                            kind="captions", problems=robots)
    out.problems += [error_row(run_id, r.url, "video", r.error or "robots_unreadable", r.message or "",
                               severity="warning") for r in robots]
    out.fetches = [r for r in fetched.values() if r.error != "out_of_scope"]
    out.fetches += [r for r in captions.values() if r.ok]
    frames_by_key: dict[str, VideoFrames | None] = {}
    spent: dict[str, float] = {}  # seconds of decoding by page
    for doc, video in videos:
        make = make_id(doc.document["id"])
        added: list[dict] = []
        key = video["video_key"] or _fetched_key(fetched.get(video["video_url"]), video, run_id, out)
        if key:
            video["video_key"] = key
            page = doc.document["id"]
            left = cfg.decode_timeout_max_s - spent.get(page, 0.0)
            if key not in frames_by_key and left <= 0:
                out.problems.append(_budget_spent_row(video, cfg, run_id))
            elif key not in frames_by_key:
                frames_by_key[key], seconds = _frames(key, video, raw, files, settings, run_id, out, left)
                spent[page] = spent.get(page, 0.0) + seconds
            frames = frames_by_key.get(key)
            if frames is not None:
                video["duration_s"] = frames.duration_s
                video["image_width"], video["image_height"] = frames.width, frames.height
                added += [_keyframe_row(video, k, make) for k in frames.keyframes]
        subcomponents, edges = [], [edge_row("contains", video["document_id"], 0, c["id"], video["document_id"])
                                    for c in added]
        read = _captions(video, tracks[video["id"]], captions, raw, settings, run_id, make_id, out)
        if read:
            comps, subcomponents, caption_edges = read
            added += comps
            edges += caption_edges
        _insert_after(doc, video, added, subcomponents, edges)
    log.info("video: %d videos decoded, %d from the cache", out.decoded, out.cached)
    return out


def _caption_files(video: dict, sidecar: bool) -> list[str]:
    """Where a video's captions may be: its track, else (with ``sidecar``) the files next to it."""
    if video["captions_url"]:
        return [video["captions_url"]]
    return sidecars(video["video_url"]) if sidecar else []


def _fetched_key(res: FetchResult | None, video: dict, run_id: str, out: VideoNodes) -> str | None:
    if res is None or (res.error == "out_of_scope" and not is_file_url(res.url)):
        return None  # videos on other hosts are not fetched; the URL stays on the row
    if not res.ok:
        out.problems.append(error_row(run_id, video["video_url"], "video", res.error or "unknown", res.message or "",
                                      document=video["document_id"]))
        return None
    return res.raw_key


def _budget_spent_row(video: dict, cfg: VideoConfig, run_id: str) -> dict:
    return error_row(run_id, video["video_url"], "video", "decode_budget_spent", (
        f"not decoded: its page's videos used up their decoding budget of {cfg.decode_timeout_max_s:g} s "
        "(LAMINAE_VIDEO__DECODE_TIMEOUT_MAX_S); a later run decodes it (the videos decoded before it are cached)"),
        severity="warning", document=video["document_id"])


def _frames(key: str, video: dict, raw: RawStore, files: IndexFiles, settings: BuildSettings, run_id: str,
            out: VideoNodes, budget_s: float = math.inf) -> tuple[VideoFrames | None, float]:
    """The keyframes of one video's bytes: cached, or decoded now (within ``budget_s``, what its
    page has left of its decoding budget, in a worker) and cached; None after a problem. And the
    seconds spent decoding (none for a cached choice)."""
    cfg = settings.video
    frames = cached_frames(key, files, cfg, raw.__contains__)
    seconds = 0.0
    if frames is not None:
        out.cached += 1
    else:
        out.decoded += 1
        started = time.monotonic()
        if settings.runner.parse_workers:
            outcome = worker_pool(1, "video").map(decode_video, [(raw.files.uri, key, cfg, budget_s)],
                                                  min(cfg.decode_timeout_s, budget_s))[0]
        else:
            outcome = decode_video(raw, key, cfg)
        seconds = time.monotonic() - started
        if isinstance(outcome, WorkerTimeout) and outcome.seconds >= budget_s:
            frames = VideoFrames(reason="decode_timeout", message=(
                f"decoding ran past the {outcome.seconds:g} s its page had left of its videos' decoding budget "
                f"({cfg.decode_timeout_max_s:g} s in all, LAMINAE_VIDEO__DECODE_TIMEOUT_MAX_S); its worker process "
                "was killed"))
        elif isinstance(outcome, WorkerTimeout):  # not cached: a later run, less loaded, may finish
            frames = VideoFrames(reason="decode_timeout", message=(
                f"decoding ran past its deadline of {outcome.seconds:g} s (LAMINAE_VIDEO__DECODE_TIMEOUT_S + "
                "DECODE_TIMEOUT_PER_S x the declared duration, at most DECODE_TIMEOUT_MAX_S); its worker process "
                "was killed"))
        elif isinstance(outcome, WorkerCrash):
            frames = VideoFrames(reason="decoder_crashed", message=f"{outcome.reason}, twice")
        else:
            frames = outcome
            remember_frames(key, frames, files, cfg)
    doc = video["document_id"]
    if frames.reason:
        out.problems.append(error_row(run_id, video["video_url"], "video", frames.reason, frames.message or "",
                                      document=doc))
        return None, seconds
    if frames.warning:
        out.problems.append(error_row(run_id, video["video_url"], "video", frames.warning_reason, frames.warning,
                                      severity="warning", document=doc))
    return frames, seconds


@lru_cache(maxsize=8)
def _raw_store(index_dir: str) -> RawStore:
    return RawStore(index_dir)


def decode_video(raw: RawStore | str, key: str, cfg: VideoConfig, budget_s: float = math.inf) -> VideoFrames:
    """The keyframes of the video bytes at ``key`` in ``raw`` (or the raw store of the index at that
    path, in a worker process, within ``budget_s``), or the problem that stopped them (``reason``)."""
    raw = _raw_store(raw) if isinstance(raw, str) else raw
    try:
        return choose_keyframes(raw.get(key), cfg, raw.put, budget_s)
    except VideoProblem as problem:
        return VideoFrames(reason=problem.reason, message=str(problem))
    except Exception as exc:  # one video FFmpeg chokes on must not stop the batch
        return VideoFrames(reason="undecodable_video", message=f"{type(exc).__name__}: {exc}")


def _keyframe_row(video: dict, frame, make: Callable[[str, str], str]) -> dict:
    text = f"Video frame at {clock(frame.time_s)}. {video['text']}"
    url = f"{video['video_url']}#t={frame.time_s:g}"
    return component_row(
        make("image", f"{url}\n{text}"), video["document_id"], "image", 0, text, video["section_path"],
        caption=video["caption"], image_url=url, image_alt=video["image_alt"], image_key=frame.image_key,
        image_mime="image/jpeg", image_width=frame.width, image_height=frame.height, video_url=video["video_url"],
        time_s=frame.time_s)


def _captions(video: dict, urls: list[str], captions: dict[str, FetchResult], raw: RawStore, settings: BuildSettings,
              run_id: str, make_id: Callable[[str], Callable[[str, str], str]], out: VideoNodes):
    """The transcript nodes of the video's track (or of the first sidecar file found), read in a
    worker within ``parse.timeout_s``; a missing sidecar is no error."""
    doc = video["document_id"]
    for url in urls:
        res = captions.get(url)
        if res is None or (res.error == "out_of_scope" and not is_file_url(url)):
            continue
        if not res.ok:
            if video["captions_url"] or res.error == "private_address":  # a missing sidecar is no problem
                out.problems.append(error_row(run_id, url, "captions", res.error or "unknown", res.message or "",
                                              document=doc))
            continue
        before, video["captions_url"] = video["captions_url"], url  # the transcript rows name it
        call = (video, raw.files.uri if settings.runner.parse_workers else raw, res.raw_key, settings.video,
                settings.parse.language, make_id)
        if settings.runner.parse_workers:
            outcome = worker_pool(1, "video").map(caption_nodes, [call], settings.parse.timeout_s)[0]
        else:
            outcome = caption_nodes(*call)
        if isinstance(outcome, WorkerTimeout):
            out.problems.append(timeout_row(run_id, url, "captions", outcome.seconds, document=doc))
        elif isinstance(outcome, WorkerCrash):
            out.problems.append(error_row(run_id, url, "captions", "parser_crashed", f"{outcome.reason}, twice",
                                          document=doc))
        elif outcome[0] == "problem":
            out.problems.append(error_row(run_id, url, "captions", outcome[1], outcome[2], document=doc))
        else:
            return outcome[1:]
        video["captions_url"] = before
        return None
    return None


def caption_nodes(video: dict, raw: RawStore | str, key: str, cfg: VideoConfig, language: str,
                  make_id: Callable[[str], Callable[[str, str], str]]) -> tuple:
    """("nodes", transcript components, sentences, edges) of the caption file at ``key`` in ``raw``
    (or the raw store of the index at that path, in a worker), or ("problem", reason, message)."""
    raw = _raw_store(raw) if isinstance(raw, str) else raw
    data = raw.get(key)
    try:
        if len(data) > cfg.max_caption_bytes:
            raise CaptionError("captions_too_large", f"{len(data)} bytes exceeds max_caption_bytes "
                               f"({cfg.max_caption_bytes})")
        cues = parse_captions(data)
    except CaptionError as problem:
        return "problem", problem.reason, str(problem)
    return ("nodes", *transcript_nodes(video, cues, cfg.caption_window_s, language, make_id(video["document_id"])))


def _insert_after(doc: DocumentNodes, video: dict, added: list[dict], subcomponents: list[dict],
                  edges: list[dict]) -> None:
    """Place a video's new components right after it (ordinals renumbered) and serialize the document."""
    if not added:
        return
    at = next(i for i, c in enumerate(doc.components) if c is video) + 1
    doc.components[at:at] = added
    for ordinal, comp in enumerate(doc.components):
        comp["ordinal"] = ordinal
    doc.subcomponents.extend(subcomponents)
    doc.edges.extend(edges)
    doc.document["n_components"] = len(doc.components)
    doc.document["n_subcomponents"] = len(doc.subcomponents)
    serialize_document(doc.document, doc.components, doc.subcomponents)
