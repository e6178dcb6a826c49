"""Split: paragraph text → sentences with character spans (pysbd); a code block → runs of lines.

Reads a component's text (and its list-item segments); writes nothing. Each sentence is a
substring ``text[start:end]`` with surrounding white space trimmed. The sentences are pysbd's
(``Segmenter(clean=False).segment``); only the step that places them back in the text is done
with ``str.find`` instead of one freshly compiled regex per sentence.
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
        for sentence in _sentences(piece, language):
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


def _sentences(text: str, language: str) -> list[str]:
    """What ``Segmenter(language, clean=False).segment(text)`` returns: each sentence of pysbd's
    processor as found in ``text`` with the white space after it, the first match that ends past
    the previous sentence (matches do not overlap), sentences not found left out."""
    segmenter = _segmenter(language)
    out: list[str] = []
    prior = 0
    for sentence in segmenter.processor(text).process() if text else []:
        if not sentence:  # an empty pattern matches everywhere: leave that case to pysbd itself
            return segmenter.segment(text)
        pos = 0
        while (found := text.find(sentence, pos)) >= 0:
            end = found + len(sentence)
            while end < len(text) and text[end].isspace():  # the regex's trailing \s*
                end += 1
            if end > prior:
                out.append(text[found:end])
                prior = end
                break
            pos = end
    return out


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


CODE_PIECE_CHARS = 600  # a code block's lines are searched in runs of about this size


def split_code(text: str, size: int = CODE_PIECE_CHARS) -> list[tuple[int, int]]:
    """Spans ``[start, end)`` of runs of whole lines of a code block: cut at blank lines first,
    runs merged up to ``size`` characters, a longer run cut between lines (a line longer than
    ``size`` is a run of its own). Code is never split into sentences."""
    runs: list[tuple[int, int]] = []  # blank-line separated blocks
    start = None
    pos = 0
    for line in text.split("\n"):
        end = pos + len(line)
        if line.strip():
            if start is None:
                start = pos
            last = end
        elif start is not None:
            runs.append((start, last))
            start = None
        pos = end + 1
    if start is not None:
        runs.append((start, last))
    pieces: list[tuple[int, int]] = []
    for run_start, run_end in runs:
        if pieces and run_end - pieces[-1][0] <= size:
            pieces[-1] = (pieces[-1][0], run_end)
            continue
        if run_end - run_start <= size:
            pieces.append((run_start, run_end))
            continue
        at = run_start
        while at < run_end:  # a long run: whole lines up to size
            cut = text.rfind("\n", at, at + size + 1) if at + size < run_end else run_end
            if cut <= at:
                cut = text.find("\n", at + 1, run_end)
                cut = run_end if cut < 0 else cut
            pieces.append(_trim(text, at, cut))
            at = cut + 1
    return [(s, e) for s, e in pieces if e > s]
