"""Transcripts: a video's caption file (WebVTT or SRT) → ``transcript`` components and their sentences.

Reads caption bytes; writes nothing itself. ``parse_captions`` turns them into timed cues (cue
markup, voice tags and any link in them dropped: links in captions are not followed);
``transcript_nodes`` groups the cues into windows of at most ``caption_window_s`` seconds, each a
``transcript`` component (``time_start``, ``time_end``, the video's URL and the caption file's),
and splits each into ``sentence`` subcomponents that keep the span of the cues they were said in.
A file that is neither WebVTT nor SRT raises ``CaptionError``, which the video stage records.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass

from laminae.schemas.errors import LaminaeError
from laminae.tasks.nodes.document_nodes import component_row, edge_row, subcomponent_row
from laminae.tasks.nodes.sentences import split_sentences

_CLOCK = r"(?:\d+:)?\d{1,2}:\d{2}[.,]\d{1,3}"
_TIMING = re.compile(rf"^\s*({_CLOCK})\s*-->\s*({_CLOCK})")
_TAG = re.compile(r"<[^>]*>")


class CaptionError(LaminaeError, ValueError):
    """A caption file that cannot be read; ``reason`` is the error row's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Cue:
    start: float  # seconds
    end: float
    text: str


def seconds(clock: str) -> float:
    """``01:02:03.500``, ``02:03,5`` → seconds."""
    parts = clock.replace(",", ".").split(":")
    value = 0.0
    for part in parts:
        value = value * 60 + float(part)
    return value


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")  # SRT files often come from Windows tools


def parse_captions(data: bytes) -> list[Cue]:
    """The cues of a WebVTT or SRT file in time order; raises ``CaptionError`` for anything else."""
    if not data.strip():
        raise CaptionError("empty_captions", "the caption file is empty")
    if b"\x00" in data[:4096]:
        raise CaptionError("not_captions", "binary content where WebVTT or SRT was expected")
    text = _decode(data).replace("\r\n", "\n").replace("\r", "\n")
    blocks = [b.strip("\n").split("\n") for b in re.split(r"\n[ \t]*\n", text.strip())]
    vtt = blocks[0][0].startswith("WEBVTT")
    first = blocks[0]
    srt = not vtt and len(first) >= 2 and first[0].strip().isdigit() and _TIMING.match(first[1]) is not None
    if not (vtt or srt):
        raise CaptionError("not_captions", "neither a WebVTT header nor an SRT cue at the start")
    cues = []
    for lines in blocks:
        at = next((i for i, line in enumerate(lines) if "-->" in line), None)
        match = _TIMING.match(lines[at]) if at is not None else None
        if match is None:  # the header, NOTE, STYLE and REGION blocks
            continue
        start, end = seconds(match[1]), seconds(match[2])
        words = " ".join(html.unescape(_TAG.sub("", " ".join(lines[at + 1:]))).split())
        if words and end >= start:
            cues.append(Cue(start, end, words))
    if not cues:
        raise CaptionError("empty_captions", f"no timed cue in the {'WebVTT' if vtt else 'SRT'} file")
    return sorted(cues, key=lambda c: (c.start, c.end))


def windows(cues: list[Cue], window_s: float) -> list[list[Cue]]:
    """Consecutive cues grouped so that each group starts less than ``window_s`` after its first."""
    groups: list[list[Cue]] = []
    for cue in cues:
        if groups and cue.start - groups[-1][0].start < window_s:
            groups[-1].append(cue)
        else:
            groups.append([cue])
    return groups


def transcript_nodes(video: dict, cues: list[Cue], window_s: float, language: str,
                     make_id: Callable[[str, str], str]) -> tuple[list[dict], list[dict], list[dict]]:
    """(transcript components, their sentences, ``contains`` edges) of one video's cues; the
    components get ordinal 0 (the stage places them after their video)."""
    doc_id = video["document_id"]
    components, sentences, edges = [], [], []
    for group in windows(cues, window_s):
        spans, parts, pos = [], [], 0
        for cue in group:
            spans.append((pos, pos + len(cue.text), cue))
            parts.append(cue.text)
            pos += len(cue.text) + 1
        text = " ".join(parts)
        start, end = group[0].start, max(c.end for c in group)
        cid = make_id("transcript", f"{video['video_url']}|{start}|{text}")
        components.append(component_row(
            cid, doc_id, "transcript", 0, text, video["section_path"], video_url=video["video_url"],
            captions_url=video["captions_url"], time_start=start, time_end=end))
        edges.append(edge_row("contains", doc_id, 0, cid, doc_id))
        # the cues' spans follow each other in the text: a sentence's cues are one slice of them
        starts, ends = [c_start for c_start, _, _ in spans], [c_end for _, c_end, _ in spans]
        for i, (s_start, s_end) in enumerate(split_sentences(text, None, language)):
            said = [cue for _, _, cue in spans[bisect_right(ends, s_start):bisect_left(starts, s_end)]]
            sentence = text[s_start:s_end]
            sid = make_id("sentence", f"{cid}|{sentence}")
            sentences.append(subcomponent_row(
                sid, doc_id, cid, "sentence", i, sentence, char_start=s_start, char_end=s_end,
                time_start=said[0].start if said else start, time_end=max(c.end for c in said) if said else end))
            edges.append(edge_row("contains", cid, 1, sid, doc_id))
    return components, sentences, edges
