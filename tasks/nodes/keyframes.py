"""Keyframes: a video's bytes → the frames that start its scenes, as JPEG pictures with their times.

Reads video bytes (PyAV decodes them; its wheel ships FFmpeg) and earlier choices from the index's
keyframe cache (``keyframes/<settings digest>/<video key>.json``: a video is decoded once, whatever
page shows it and however often the page is refreshed, until the keyframe settings change); writes
the chosen frames to the raw store and new cache files. A frame is chosen when its 64x36 RGB copy
differs from the one compared before it (mean absolute difference of the channels, 0..1) by at least ``scene_threshold`` (frames are compared
``sample_fps`` times a second), at least ``min_spacing_s`` after the last keyframe; a frame is
also taken after ``max_spacing_s`` without one, and decoding stops at ``max_keyframes``, or after
``max_decoded_frames`` frames whatever the frame rate (a warning, the keyframes so far kept: frames
are compared ``sample_fps`` times a second of video, but every frame is decoded). A video
that cannot be used (no video stream, an undecodable or truncated file, too long, too large)
raises ``VideoProblem``; its reason is cached like a choice, so it is not decoded again either.
The frame size is checked on every decoded frame too (a codec may report a width of 0, or change
size mid-stream). In a worker process (``laminae.tasks.parse.isolated``) the decoding deadline
becomes ``decode_timeout_s`` plus ``decode_timeout_per_s`` for each second of the declared duration,
at most ``decode_timeout_max_s``, and at most what the page showing it has left of its decoding
budget (``laminae.tasks.nodes.videos``).
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from laminae.schemas.errors import LaminaeError
from laminae.schemas.ids import digest
from laminae.schemas.storage import IndexFiles
from laminae.tasks.config import VideoConfig
from laminae.tasks.parse.isolated import extend_deadline

CACHE_DIR = "keyframes"
SCENE_SIZE = (64, 36)  # the copy frames are compared on
SETTINGS = ("max_duration_s", "max_pixels", "sample_fps", "scene_threshold", "min_spacing_s", "max_spacing_s",
            "max_keyframes", "keyframe_side", "max_decoded_frames")


class VideoProblem(LaminaeError):
    """A video whose keyframes cannot be had; ``reason`` is the error row's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class Keyframe:
    time_s: float
    image_key: str  # raw-store key of the JPEG
    width: int
    height: int


@dataclass
class VideoFrames:
    """What decoding one video gave: its size, duration and keyframes (and a problem, if any)."""

    duration_s: float | None = None
    width: int | None = None
    height: int | None = None
    keyframes: list[Keyframe] = field(default_factory=list)
    warning: str | None = None  # e.g. a truncated file: the keyframes found before it broke off
    warning_reason: str = "truncated_video"  # the warning row's reason
    reason: str | None = None  # a VideoProblem's, cached
    message: str | None = None


def cache_path(video_key: str, cfg: VideoConfig) -> str:
    settings = json.dumps({name: getattr(cfg, name) for name in SETTINGS}, sort_keys=True)
    return f"{CACHE_DIR}/{digest(settings, size=4)}/{video_key}.json"


def cached_frames(video_key: str, files: IndexFiles, cfg: VideoConfig, has_bytes: Callable[[str], bool]
                  ) -> VideoFrames | None:
    """The cached choice for these video bytes, if every keyframe's picture is still in the raw store."""
    text = files.read_text(cache_path(video_key, cfg))
    if text is None:
        return None
    data = json.loads(text)
    frames = VideoFrames(**{**data, "keyframes": [Keyframe(**k) for k in data["keyframes"]]})
    return frames if all(has_bytes(k.image_key) for k in frames.keyframes) else None


def remember_frames(video_key: str, frames: VideoFrames, files: IndexFiles, cfg: VideoConfig) -> None:
    files.write_text(cache_path(video_key, cfg), json.dumps(asdict(frames)))


def _jpeg(frame, side: int) -> tuple[bytes, int, int]:
    picture = frame.to_image()
    picture.thumbnail((side, side))
    out = io.BytesIO()
    picture.save(out, format="JPEG", quality=85)
    return out.getvalue(), picture.width, picture.height


def choose_keyframes(data: bytes, cfg: VideoConfig, put: Callable[[bytes], str],
                     budget_s: float = math.inf) -> VideoFrames:
    """Decode ``data`` and store its keyframes with ``put`` (bytes → raw key); in a worker, within
    ``budget_s`` seconds whatever the video's own deadline (what its page has left)."""
    import av
    import numpy as np

    try:
        container = av.open(io.BytesIO(data), mode="r")
    except (av.error.FFmpegError, ValueError, OSError) as exc:
        raise VideoProblem("undecodable_video", f"FFmpeg cannot open it: {exc}") from None
    with container:
        if not container.streams.video:
            raise VideoProblem("no_video_stream", "the file holds no video stream")
        stream = container.streams.video[0]
        try:
            codec = stream.codec_context
            width, height = codec.width, codec.height
        except (av.error.FFmpegError, ValueError) as exc:
            raise VideoProblem("unsupported_codec", f"no decoder for its video stream: {exc}") from None
        if width * height > cfg.max_pixels:
            raise VideoProblem("video_too_large", f"{width}x{height} pixels exceeds max_pixels ({cfg.max_pixels})")
        declared = _declared_duration(container, stream)
        if declared is not None and declared > cfg.max_duration_s:
            raise VideoProblem("video_too_long", f"{declared:.0f} s exceeds max_duration_s ({cfg.max_duration_s:g} s)")
        if declared is not None and declared > 0:
            extend_deadline(min(decode_deadline(declared, cfg), budget_s))
        stream.thread_type = "AUTO"
        frames = VideoFrames(declared, width or None, height or None)
        previous = None
        next_sample, last_key, pending, last_time, decoded = 0.0, -math.inf, False, None, 0
        try:
            for frame in container.decode(stream):
                if decoded == cfg.max_decoded_frames:
                    frames.warning_reason = "too_many_frames"
                    frames.warning = (f"decoding stopped after {decoded} frames (max_decoded_frames), at "
                                      f"{last_time or 0:.1f} s of video; keyframes before it kept")
                    break
                decoded += 1
                time_s = frame.time
                if time_s is None:
                    continue
                if time_s > cfg.max_duration_s:
                    raise VideoProblem("video_too_long", f"decoded past max_duration_s ({cfg.max_duration_s:g} s)")
                if frame.width * frame.height > cfg.max_pixels:  # the codec's size may have been 0, or changed
                    raise VideoProblem("video_too_large", f"a {frame.width}x{frame.height}-pixel frame exceeds "
                                       f"max_pixels ({cfg.max_pixels})")
                if not frames.width or not frames.height:
                    frames.width, frames.height = frame.width, frame.height
                last_time = time_s
                if time_s < next_sample:
                    continue
                while next_sample <= time_s:
                    next_sample += 1 / cfg.sample_fps
                small = frame.to_ndarray(width=SCENE_SIZE[0], height=SCENE_SIZE[1], format="rgb24").astype(np.float32)
                change = 1.0 if previous is None else float(np.abs(small - previous).mean()) / 255
                previous = small
                pending = pending or change >= cfg.scene_threshold
                since = time_s - last_key
                if (pending and since >= cfg.min_spacing_s) or since >= cfg.max_spacing_s:
                    jpeg, w, h = _jpeg(frame, cfg.keyframe_side)
                    frames.keyframes.append(Keyframe(round(time_s, 3), put(jpeg), w, h))
                    last_key, pending = time_s, False
                    if len(frames.keyframes) >= cfg.max_keyframes:
                        break
        except av.error.FFmpegError as exc:
            if not frames.keyframes:
                raise VideoProblem("undecodable_video", f"decoding failed: {exc}") from None
            frames.warning = f"decoding broke off at {last_time or 0:.1f} s ({exc}); keyframes before it kept"
    if last_time is None:
        raise VideoProblem("undecodable_video", f"none of the {decoded} frames decoded has a time" if decoded
                           else "no frame could be decoded")
    if frames.duration_s is None:
        frames.duration_s = round(last_time, 3)
    elif (len(frames.keyframes) < cfg.max_keyframes and not frames.warning
          and last_time < frames.duration_s - max(2.0, 0.1 * frames.duration_s)):
        frames.warning = (f"frames end at {last_time:.1f} s of the {frames.duration_s:.1f} s declared (a truncated "
                          "file?); keyframes before it kept")
    return frames


def decode_deadline(declared_s: float, cfg: VideoConfig) -> float:
    """Seconds a video that declares ``declared_s`` seconds may take to decode, from its call's start."""
    return min(cfg.decode_timeout_s + cfg.decode_timeout_per_s * declared_s,
               max(cfg.decode_timeout_max_s, cfg.decode_timeout_s))


def _declared_duration(container, stream) -> float | None:
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        return container.duration / 1_000_000
    return None
