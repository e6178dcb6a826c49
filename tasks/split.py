"""Split: paragraph text → sentences with character spans (pysbd).

Reads a component's text (and its list-item segments); writes nothing. Each sentence is a
substring ``text[start:end]`` with surrounding white space trimmed.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=8)
def _segmenter(language: str):
    import pysbd

    return pysbd.Segmenter(language=language, clean=False)


def split_sentences(
    text: str, segments: list[tuple[int, int]] | None = None, language: str = "en"
) -> list[tuple[int, int]]:
    """Sentence spans ``[start, end)`` over ``text``; list items are split one by one."""
    spans: list[tuple[int, int]] = []
    for seg_start, seg_end in segments or [(0, len(text))]:
        piece = text[seg_start:seg_end]
        if not piece.strip():
            continue
        cursor = 0
        for sentence in _segmenter(language).segment(piece):
            stripped = sentence.strip()
            if not stripped:
                continue
            found = piece.find(stripped, cursor)
            if found < 0:  # pysbd changed the text; fall back to the whole piece once
                spans.append(_trim(text, seg_start, seg_end))
                break
            spans.append((seg_start + found, seg_start + found + len(stripped)))
            cursor = found + len(stripped)
    return spans


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
