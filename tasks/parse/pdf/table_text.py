"""Tables read from the alignment of a PDF page's words: columns of text with horizontal rules
only (booktabs, a rule under the header, a rule between rows) or with no rules at all, and
contents pages whose entries run to their page numbers along dot leaders.

Reads a page's words (pymupdf ``words`` tuples), its horizontal rules ``(y, x0, x1)`` and which
words are bold; returns ``TextTable`` candidates (rows of cells, each row's y-range and boldness,
the rules inside). Whether a candidate is a table at all is ``tables.table_shape``'s call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from statistics import median
from typing import Protocol

NUMBER = re.compile(r"^[-+]?[\d.,%]+$|^[ivxlcdm]{1,6}$")
LEADER = re.compile(r"^[.·…‥_]{3,}$")  # one word of leader dots
DOT = re.compile(r"^[.·…‥_]{1,2}$")  # a leader written as spaced dots: ". . . ."
GAP = 0.6  # a gap wider than this many line heights between words separates two cells
MAX_LINE_GAP = 1.6  # a white space taller than this many line heights ends a table
PROSE_CELL, PROSE_WORDS = 40, 5  # a column whose median cell is longer is a column of prose
MAX_LINES = 4000  # a page with more text lines than this is not searched for aligned columns


class Fonts(Protocol):
    """Which of a page's words are set in a bold or a monospaced font."""

    def bold(self, word: tuple) -> bool: ...

    def mono(self, word: tuple) -> bool: ...


@dataclass
class _Line:
    words: list[tuple]
    segments: list[list[tuple]] = field(default_factory=list)
    leader: bool = False
    y0: float = 0.0
    y1: float = 0.0
    height: float = 0.0


_Row = tuple[list[str], tuple[float, float], bool, bool]  # cells, y-range, all bold, ran along a leader


@dataclass
class TextTable:
    """Rows of cells read from aligned words; ``bold`` per row, the y of rules inside the table."""

    bbox: tuple[float, float, float, float]
    rows: list[list[str]]
    bounds: list[tuple[float, float]]
    bold: list[bool]
    rules: list[float]
    leaders: list[bool]  # rows that ran to their last cell along a dot leader (contents entries)


def _lines(words: list) -> list[_Line]:
    """Words grouped into visual lines (a word joins a line its centre lies within), top to bottom,
    each cut into segments at wide gaps and at dot leaders (the leaders themselves dropped)."""
    lines: list[_Line] = []
    for w in sorted(words, key=lambda w: ((w[1] + w[3]) / 2, w[0])):
        cy = (w[1] + w[3]) / 2
        if lines and lines[-1].words[0][1] <= cy <= lines[-1].words[0][3]:
            lines[-1].words.append(w)
        else:
            lines.append(_Line([w]))
    for line in lines:
        line.words.sort(key=lambda w: w[0])
        line.y0, line.y1 = min(w[1] for w in line.words), max(w[3] for w in line.words)
        line.height = median(w[3] - w[1] for w in line.words)
        gap = GAP * line.height
        dots = [bool(LEADER.match(w[4])) for w in line.words]
        for i in range(len(line.words) - 2):  # spaced dots count as a leader when three follow one another
            if all(DOT.match(w[4]) for w in line.words[i:i + 3]):
                dots[i] = dots[i + 1] = dots[i + 2] = True
        line.leader = any(dots) and not dots[0] and not dots[-1]
        current: list[tuple] = []
        for w, dot in zip(line.words, dots, strict=True):
            if dot or (current and w[0] - current[-1][2] > gap):
                if current:
                    line.segments.append(current)
                current = []
            if not dot:
                current.append(w)
        if current:
            line.segments.append(current)
    return [line for line in lines if line.segments]


def _columns(lines: list[_Line]) -> tuple[list[float], list[float]]:
    """The x of the white gutters between columns, and their widths: ranges no segment covers (one
    covering segment forgiven in a run of five lines or more: a head spanning two columns; the
    cut then goes through the widest stretch nothing covers, if any)."""
    x0 = min(s[0][0] for line in lines for s in line.segments)
    x1 = max(s[-1][2] for line in lines for s in line.segments)
    cover = [0] * (int(x1 - x0) + 2)
    for line in lines:
        for s in line.segments:
            for x in range(int(s[0][0] - x0), int(s[-1][2] - x0) + 1):
                cover[x] += 1
    forgive = 1 if len(lines) >= 5 else 0
    cuts: list[float] = []
    widths: list[float] = []
    start = None
    for x, n in enumerate(cover):
        if n <= forgive and start is None:
            start = x
        elif n > forgive and start is not None:
            if start > 0:
                a, b = max(_stretches(cover[start:x]), key=lambda r: r[1] - r[0], default=(0, x - start))
                cuts.append(x0 + start + (a + b) / 2)
                widths.append(b - a)
            start = None
    return cuts, widths


def _stretches(cover: list[int]) -> list[tuple[int, int]]:
    """``[start, end)`` of each stretch of ``cover`` that nothing covers."""
    out: list[tuple[int, int]] = []
    start = None
    for x, n in enumerate([*cover, 1]):
        if n == 0 and start is None:
            start = x
        elif n and start is not None:
            out.append((start, x))
            start = None
    return out


def _is_row(line: _Line) -> bool:
    return len(line.segments) >= 2


def _runs(lines: list[_Line]) -> list[list[_Line]]:
    """Runs of lines with two cells or more, close together; a one-cell line joins a run when it does
    not start at the run's left edge (a wrapped cell of a later column), or when it sits closer to
    the row above than to the row below it (a wrapped first cell)."""
    runs: list[list[_Line]] = []
    run: list[_Line] = []
    left, leaders = 0.0, False
    for k, line in enumerate(lines):
        spacing = 3 if line.leader and leaders else MAX_LINE_GAP
        limit = spacing * max(line.height, run[-1].height) if run else 0
        near = run and line.y0 - run[-1].y1 <= limit  # contents entries may stand farther apart
        wrapped = run and line.segments[0][0][0] > left + 2 * line.height
        below = lines[k + 1] if k + 1 < len(lines) else None
        tight = (run and _is_row(run[-1]) and below is not None and _is_row(below)
                 and line.y0 - run[-1].y1 + 1 < 0.8 * (below.y0 - line.y1 + 1))
        if near and (_is_row(line) or wrapped or tight):
            run.append(line)
            left = min(left, line.words[0][0])
            leaders = leaders or line.leader
        else:
            if run:
                runs.append(run)
            run = [line] if _is_row(line) else []
            left, leaders = line.words[0][0], line.leader
    if run:
        runs.append(run)
    runs = [r for r in runs if sum(map(_is_row, r)) >= 2]
    return [r[:max(i for i, ln in enumerate(r) if _is_row(ln)) + 1] for r in runs]


def aligned_tables(words: list, rules: list[tuple[float, float, float]], fonts: Fonts, min_rows: int,
                   need_rules: bool = False) -> list[TextTable]:
    """Tables of aligned words; ``rules`` are the page's horizontal rules ``(y, x0, x1)``. A table
    with a rule across it (above, inside or under it) needs two rows, one without ``min_rows``, or
    is dropped when ``need_rules``; one without a rule, all in a monospaced font, is code."""
    lines = _lines(words)
    if len(lines) > MAX_LINES:
        return []
    out: list[TextTable] = []
    for run in _runs(lines):
        out += _read(run, rules, fonts, 2 if need_rules else min_rows, need_rules, peel=2)
    return out


def _running_text(cells: list[str]) -> bool:
    """Whether a column reads as the lines of a page column: long cells, most of them carrying on
    the sentence above (a lower-case start), unlike a table's column of long descriptions."""
    filled = [c for c in cells if c]
    if len(filled) < 2 or (median(len(c) for c in filled) <= PROSE_CELL
                           and median(len(c.split()) for c in filled) < PROSE_WORDS):
        return False
    return sum(1 for c in filled[1:] if c[0].islower()) >= len(filled[1:]) / 2


def _read(run: list[_Line], rules: list[tuple[float, float, float]], fonts: Fonts, min_rows: int,
          need_rules: bool, peel: int) -> list[TextTable]:
    """The table a run of lines holds; a first or last column of prose (the text of a page column
    beside the table) is peeled off and the rest read again, ``peel`` times at most."""
    cuts, _ = _columns(run)
    if not cuts:
        return []
    crossing = [i for i, ln in enumerate(run) if len(ln.segments) == 1 and len(ln.words) >= PROSE_WORDS
                and any(ln.words[0][0] < c < ln.words[-1][2] for c in cuts)]
    if crossing and peel:  # a line of prose across the gutters: what is above and below it are apart
        parts = [run[a + 1:b] for a, b in zip([-1, *crossing], [*crossing, len(run)], strict=True)]
        return [t for part in parts for r in _runs(part)
                for t in _read(r, rules, fonts, min_rows, need_rules, peel - 1)]
    rows = _rows(run, cuts, fonts)
    kinds = [all(NUMBER.match(r[0][j]) for r in rows[1:] if r[0][j]) for j in range(len(cuts) + 1)]
    half = len(kinds) // 2
    x0 = min(w[0] for ln in run for w in ln.words)
    x1 = max(w[2] for ln in run for w in ln.words)
    even = half >= 2 and abs((cuts[half - 1] - x0) - (x1 - cuts[half - 1])) <= 0.03 * (x1 - x0)
    if peel and half >= 2 and any(kinds) and kinds[:half] == kinds[half:] and (
            even or rows[0][0][:half] == rows[0][0][half:]):
        # the same columns twice, in halves of one width or under one head: an index set in two page
        # columns, or a long table wrapped beside itself
        parts = [[w for ln in run for w in ln.words if ((w[0] + w[2]) / 2 < cuts[half - 1]) == left]
                 for left in (True, False)]
        return [t for part in parts for r in _runs(_lines(part)) for t in _read(r, rules, fonts, min_rows,
                                                                                   need_rules, peel - 1)]
    for edge, keep in ((-1, lambda cx: cx < cuts[-1]), (0, lambda cx: cx > cuts[0])):
        if peel and _running_text([r[0][edge] for r in rows]):
            rest = [w for ln in run for w in ln.words if keep((w[0] + w[2]) / 2)]
            return [t for r in _runs(_lines(rest))
                    for t in _read(r, rules, fonts, min_rows, need_rules, peel - 1)]
    y0, y1 = run[0].y0, run[-1].y1
    h = median(ln.height for ln in run)
    across = [y for y, rx0, rx1 in rules if rx0 <= x0 + 0.4 * (x1 - x0) and rx1 >= x1 - 0.4 * (x1 - x0)
              and y0 - 1.5 * h <= y <= y1 + 1.5 * h]
    if len(rows) < (2 if across else min_rows) or (need_rules and not across):
        return []
    if not across and all(fonts.mono(w) for ln in run for w in ln.words):
        return []
    top = min(across + [y0]) if across else y0
    bottom = max(across + [y1]) if across else y1
    inside = sorted(y for y in across if rows[0][1][0] < y < rows[-1][1][1])
    return [TextTable((x0, top, x1, bottom), [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                      inside, [r[3] for r in rows])]


def _rows(run: list[_Line], cuts: list[float], fonts: Fonts) -> list[_Row]:
    """Each line's words placed in columns by their centre (with whether it is bold throughout and
    ran along a leader: a leader's own dots are left out, and any run into the entry before it).
    A line that fills a single cell is the wrapped rest of the row above, joined to it, when that
    cell is not the first, or when the line sits closer to the line above than to the one below
    (a label over a group of rows sits closer to its group)."""
    rows: list[_Row] = []
    gaps = [b.y0 - a.y1 for a, b in zip(run, run[1:], strict=False)]
    for i, line in enumerate(run):
        cells: list[list[str]] = [[] for _ in range(len(cuts) + 1)]
        for w in (w for s in line.segments for w in s):
            cells[sum(1 for c in cuts if c < (w[0] + w[2]) / 2)].append(w[4])
        texts = [" ".join(c) for c in cells]
        if line.leader:
            last = max(i for i, t in enumerate(texts) if t)
            texts = [t.rstrip(" .·…") if i < last else t for i, t in enumerate(texts)]
        bold = all(fonts.bold(w) for s in line.segments for w in s)
        tight = 0 < i < len(run) - 1 and gaps[i - 1] + 1 < 0.8 * (gaps[i] + 1)
        if rows and sum(1 for t in texts if t) == 1 and (not texts[0] or tight):
            above, (top, _), was_bold, leader = rows[-1]
            joined = [f"{a} {t}".strip() for a, t in zip(above, texts, strict=True)]
            rows[-1] = (joined, (top, line.y1), was_bold, leader or line.leader)
        else:
            rows.append((texts, (line.y0, line.y1), bold, line.leader))
    return rows
