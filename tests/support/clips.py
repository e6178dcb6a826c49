"""Videos with known scenes and caption files with known cues, for the video tests and the demo site.

Reads nothing (PyAV encodes; Pillow's bundled scalable font draws the text); returns MP4 bytes
(H.264) whose scenes are flat colours with big text, and WebVTT or SRT text.
"""

from __future__ import annotations

import io
from dataclasses import dataclass


@dataclass(frozen=True)
class Scene:
    seconds: float
    colour: tuple[int, int, int]
    text: str


def scene_video(scenes: list[Scene], width: int = 320, height: int = 180, fps: int = 10, crf: int = 30) -> bytes:
    """An MP4 playing ``scenes`` one after another; scene ``i`` starts at the sum of the ones before.
    A little motion inside each scene (a moving bar) keeps it from being one still frame."""
    import av
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=max(12, height // 6))
    out = io.BytesIO()
    with av.open(out, mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps, options={"crf": str(crf), "preset": "veryfast"})
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for scene in scenes:
            frames = round(scene.seconds * fps)
            for i in range(frames):
                picture = Image.new("RGB", (width, height), scene.colour)
                draw = ImageDraw.Draw(picture)
                draw.text((width // 12, height // 3), scene.text, fill="white" if sum(scene.colour) < 380 else "black",
                          font=font)
                x = int(i / max(frames - 1, 1) * (width - 20))
                draw.rectangle((x, height - 14, x + 20, height - 4), fill=(128, 128, 128))
                for packet in stream.encode(av.VideoFrame.from_image(picture)):
                    container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return out.getvalue()


def scene_starts(scenes: list[Scene]) -> list[float]:
    starts, at = [], 0.0
    for scene in scenes:
        starts.append(at)
        at += scene.seconds
    return starts


def _stamp(seconds: float, separator: str) -> str:
    millis = round(seconds * 1000)
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"{hours:02d}:{minutes:02d}:{rest // 1000:02d}{separator}{rest % 1000:03d}"


def webvtt(cues: list[tuple[float, float, str]]) -> str:
    """A WebVTT file of (start, end, text) cues."""
    blocks = ["WEBVTT"] + [f"{_stamp(a, '.')} --> {_stamp(b, '.')}\n{text}" for a, b, text in cues]
    return "\n\n".join(blocks) + "\n"


def srt(cues: list[tuple[float, float, str]]) -> str:
    """An SRT file of (start, end, text) cues."""
    return "\n\n".join(f"{i}\n{_stamp(a, ',')} --> {_stamp(b, ',')}\n{text}"
                       for i, (a, b, text) in enumerate(cues, 1)) + "\n"
