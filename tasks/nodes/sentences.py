"""Split: paragraph text → sentences with character spans (pysbd); a code block → runs of lines.

Reads a component's text (and its list-item segments); writes nothing. Each sentence is a
substring ``text[start:end]`` with surrounding white space trimmed. The sentences are pysbd's
(``Segmenter(clean=False).segment``); only the step that places them back in the text is done
with ``str.find`` instead of one freshly compiled regex per sentence. pysbd's time grows with the
square of its text's length (64,000 characters: 2 s), so a longer text is split in windows of
about ``WINDOW_CHARS``: each window's last sentence, which may run on past it, starts the next
window, so the sentences are pysbd's but for context further than a window away.
"""

from __future__ import annotations

import re
from functools import lru_cache

WINDOW_CHARS = 5000  # pysbd: about 0.015 s a window; a whole 2 MB caption file about 8 s
# pysbd ends a sentence only at its language's punctuation, a line break or a list item's ")"
ALWAYS_BOUNDARIES = ".!?\n\r)"


@lru_cache(maxsize=8)
def _segmenter(language: str):
    import pysbd

    return pysbd.Segmenter(language=language, clean=False)


@lru_cache(maxsize=8)
def _boundary(language: str) -> re.Pattern:
    """Characters without which pysbd finds one sentence in a text (the whole text, trimmed)."""
    from pysbd.languages import Language

    marks = set(Language.get_language_code(language).Punctuations) | set(ALWAYS_BOUNDARIES)
    return re.compile("[" + re.escape("".join(sorted(marks))) + "]")


def split_sentences(
    text: str, segments: list[tuple[int, int]] | None = None, language: str = "en"
) -> list[tuple[int, int]]:
    """Sentence spans ``[start, end)`` over ``text``; list items are split one by one."""
    spans: list[tuple[int, int]] = []
    for seg_start, seg_end in segments or [(0, len(text))]:
        piece = text[seg_start:seg_end]
        if piece.strip():
            spans += [(seg_start + s, seg_start + e) for s, e in _windowed(piece, language)]
    return spans


def _windowed(piece: str, language: str) -> list[tuple[int, int]]:
    """The sentence spans of ``piece``, found window by window (one window up to ``WINDOW_CHARS``)."""
    spans: list[tuple[int, int]] = []
    start, size = 0, len(piece)
    while start < size:
        end = size if size - start <= WINDOW_CHARS else _cut(piece, start + WINDOW_CHARS // 2, start + WINDOW_CHARS)
        found = _located(piece[start:end], language)
        if end < size and len(found) > 1:
            found.pop()  # it may run on past the window: it starts the next one
            following = start + found[-1][1]
        else:
            following = end
        spans += [(start + s, start + e) for s, e in found]
        start = following
    return spans


def _cut(text: str, low: int, high: int) -> int:
    """Where a window ends: after the last white space in ``text[low:high]``, else at ``high``."""
    at = max(text.rfind(" ", low, high), text.rfind("\n", low, high))
    return at + 1 if at >= 0 else high


def _located(piece: str, language: str) -> list[tuple[int, int]]:
    """pysbd's sentences of ``piece`` as trimmed spans over it."""
    if not piece.strip():
        return []
    if not _boundary(language).search(piece):  # a heading, a list item, a caption: a third of wtq-dev's
        return [_trim(piece, 0, len(piece))]
    return _located_by_pysbd(piece, language)


def _located_by_pysbd(piece: str, language: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    cursor = 0
    for sentence in _sentences(piece, language):
        stripped = sentence.strip()
        if not stripped:
            continue
        found = piece.find(stripped, cursor)
        if found < 0:  # pysbd changed the text; fall back to the whole piece once
            spans.append(_trim(piece, 0, len(piece)))
            break
        spans.append((found, found + len(stripped)))
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


# a code block's lines are searched in runs of about this size; on docs-django (bench/quality.py, 27
# questions) runs of 1,500 characters saved 5% of the embeddings and lost one question's Hit@5 from
# retrieve, no runs at all saved 9% and lost two (Hit@5 0.963 -> 0.889, Hit@10 0.963 -> 0.926). A page's
# code past ParseConfig.max_code_lines_chars is not split (laminae.tasks.nodes.document_nodes)
CODE_PIECE_CHARS = 600


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
