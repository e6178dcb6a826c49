"""Ruled tables on a PDF page: a regular grid of strokes is read straight from the page's words,
other ruling (merged cells, shading, partial lines, curved paths) by pymupdf's ``find_tables``.

Reads a page's vector boxes (``pdf``'s ``rules``) and words; returns table ``Block``s with header,
rows and each row's y-range. ``find_tables`` gets at most ``pdf_table_timeout_s`` a page and
``pdf_tables_budget_s`` a document (``TableBudget``): a page over either loses only those tables,
with a warning.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from bisect import bisect_right
from contextlib import contextmanager
from dataclasses import dataclass

from laminae.tasks.config import ParseConfig
from laminae.tasks.parse.document import Component
from laminae.tasks.parse.isolated import in_worker
from laminae.tasks.parse.pdf_blocks import Block, Words, cell_text, page_list, within, words_in

NUMBER = re.compile(r"^[-+]?[\d.,% ]+$")
SNAP = 3.0  # points: strokes closer than this are one line; thinner boxes are lines (as find_tables)
MAX_RULES = 2000  # more vector boxes than this (a chart or a drawing): leave the page to find_tables


@dataclass
class _Grid:
    """A regular lattice of ruled lines: every row line spans every column and vice versa."""

    xs: list[float]
    ys: list[float]

    @property
    def bbox(self) -> tuple[float, float, float, float]:
        return self.xs[0], self.ys[0], self.xs[-1], self.ys[-1]


def _segments(rules: list[tuple]) -> tuple[list[tuple], list[tuple]]:
    """Horizontal ``(y, x0, x1, shaded)`` and vertical ``(x, y0, y1, shaded)`` segments of a page's
    straight strokes and boxes; ``shaded`` marks the sides of a filled box."""
    hs: list[tuple] = []
    vs: list[tuple] = []
    for x0, y0, x1, y1, stroked, rect in rules:
        if not rect:
            continue
        w, h = x1 - x0, y1 - y0
        if h <= SNAP < w:
            hs.append(((y0 + y1) / 2, x0, x1, False))
        elif w <= SNAP < h:
            vs.append(((x0 + x1) / 2, y0, y1, False))
        elif w > SNAP and h > SNAP:
            hs += [(y0, x0, x1, not stroked), (y1, x0, x1, not stroked)]
            vs += [(x0, y0, y1, not stroked), (x1, y0, y1, not stroked)]
    return hs, vs


def _clusters(hs: list[tuple], vs: list[tuple]) -> list[tuple[list[tuple], list[tuple]]]:
    """Groups of horizontal and vertical segments that touch one another (one table each)."""
    parent = list(range(len(hs) + len(vs)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, (y, hx0, hx1, _) in enumerate(hs):
        for j, (x, vy0, vy1, _) in enumerate(vs):
            if hx0 - SNAP <= x <= hx1 + SNAP and vy0 - SNAP <= y <= vy1 + SNAP:
                parent[root(i)] = root(len(hs) + j)
    groups: dict[int, tuple[list[tuple], list[tuple]]] = {}
    for i, h in enumerate(hs):
        groups.setdefault(root(i), ([], []))[0].append(h)
    for j, v in enumerate(vs):
        groups.setdefault(root(len(hs) + j), ([], []))[1].append(v)
    return [g for g in groups.values() if len(g[0]) >= 2 and len(g[1]) >= 2]


def _lines(segments: list[tuple]) -> dict[float, list[tuple[float, float]]]:
    """Segments snapped onto shared lines: line position → its sorted ``(start, end)`` pieces."""
    out: dict[float, list[tuple[float, float]]] = {}
    for at, start, end, _ in sorted(segments):
        key = next((k for k in out if abs(k - at) <= SNAP), at)
        out.setdefault(key, []).append((start, end))
    return {k: sorted(v) for k, v in out.items()}


def _spans(pieces: list[tuple[float, float]], start: float, end: float) -> bool:
    """Whether the pieces of one line cover ``[start, end]`` without a gap and no further."""
    if pieces[0][0] > start + SNAP or pieces[0][0] < start - SNAP:
        return False
    reach = pieces[0][1]
    for s, e in pieces[1:]:
        if s > reach + SNAP:
            return False
        reach = max(reach, e)
    return abs(reach - end) <= SNAP


def _grid(hs: list[tuple], vs: list[tuple]) -> _Grid | None:
    """The cluster's lattice when it is regular (no merged cells, no line running past the
    table), else None."""
    rows, cols = _lines(hs), _lines(vs)
    ys, xs = sorted(rows), sorted(cols)
    if len(ys) < 3 or len(xs) < 3:  # one row or one column: a frame or a box, for find_tables to judge
        return None
    if all(_spans(rows[y], xs[0], xs[-1]) for y in ys) and all(_spans(cols[x], ys[0], ys[-1]) for x in xs):
        return _Grid(xs, ys)
    return None


def table_areas(rules: list[tuple]) -> tuple[list[_Grid], tuple | None]:
    """The page's regular ruled grids, and the one area of ruling that only ``find_tables`` can
    read (merged cells, shading, partial lines, curved paths), or None.

    Only horizontal rules (underlines, a line under a header) or only vertical ones cannot make
    a grid, so such pages have neither."""
    if len(rules) < 4:
        return [], None
    if len(rules) > MAX_RULES:
        return [], around([r[:4] for r in rules])
    curves = [r[:4] for r in rules if not r[5]]
    grids: list[_Grid] = []
    irregular: list[tuple] = []
    for ch, cv in _clusters(*_segments(rules)):
        grid = None if any(s[3] for s in ch + cv) else _grid(ch, cv)
        if grid is not None and not any(_overlap(grid.bbox, c) for c in curves):
            grids.append(grid)
        else:
            irregular += [(x0, y, x1, y) for y, x0, x1, _ in ch] + [(x, y0, x, y1) for x, y0, y1, _ in cv]
    return grids, around(irregular) if irregular else None


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def around(boxes: list[tuple]) -> tuple[float, float, float, float]:
    """The box around ``boxes``, 4 points wider on every side."""
    return (min(b[0] for b in boxes) - 4, min(b[1] for b in boxes) - 4,
            max(b[2] for b in boxes) + 4, max(b[3] for b in boxes) + 4)


class _OverBudget(BaseException):  # not Exception: find_tables catches those and returns None
    """Raised by the alarm when find_tables runs past its time on a page."""


@contextmanager
def _alarm(seconds: float):
    """Raise ``_OverBudget`` in the block after ``seconds``: only in a worker process's main thread
    (the flow's own process keeps its signals; there the deadline is the document's budget alone)."""
    if not in_worker() or threading.current_thread() is not threading.main_thread():
        yield
        return

    def ring(signum, frame):
        raise _OverBudget

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class TableBudget:
    """The seconds ``find_tables`` may take on a page and in the whole document, and the pages that
    lost their tables to them (their text is kept)."""

    def __init__(self, cfg: ParseConfig) -> None:
        self.page_s, self.left = cfg.pdf_table_timeout_s, cfg.pdf_tables_budget_s
        self.budget_s = cfg.pdf_tables_budget_s
        self.timed_out: list[int] = []
        self.skipped: list[int] = []

    def find(self, page, number: int, area: tuple) -> list:
        """``find_tables``' tables over ``area``, or none when the page's or the document's time runs out."""
        import pymupdf

        if self.left <= 0:
            self.skipped.append(number)
            return []
        limit = min(self.page_s, self.left)
        start = time.perf_counter()
        try:
            with _alarm(limit):
                finder = page.find_tables(clip=pymupdf.Rect(area), use_layout=False)
        except _OverBudget:
            (self.timed_out if limit == self.page_s else self.skipped).append(number)
            return []
        finally:
            self.left -= time.perf_counter() - start
        return finder.tables if finder is not None else []  # None: find_tables failed (and logged it)

    def warnings(self) -> list[str]:
        out = []
        if self.timed_out:
            out.append(f"tables_timeout: pages {page_list(self.timed_out)}: finding their tables took longer than "
                       f"{self.page_s:g} s a page (LAMINAE_PARSE__PDF_TABLE_TIMEOUT_S); their text is kept, the "
                       "tables pymupdf's find_tables would have read are not")
        if self.skipped:
            out.append(f"tables_skipped: pages {page_list(self.skipped)}: the PDF's table-finding budget of "
                       f"{self.budget_s:g} s (LAMINAE_PARSE__PDF_TABLES_BUDGET_S) was spent; their text is kept, "
                       "the tables pymupdf's find_tables would have read are not")
        return out


def read_tables(page, number: int, grids: list[_Grid], area: tuple | None, words: Words,
            budget: TableBudget) -> list[Block]:
    """Table blocks: regular grids read straight from the page's words, other ruling by
    ``find_tables`` (one call over the area around all of it, within ``budget``)."""
    found: list[tuple[tuple, list[tuple[list[str], tuple[float, float]]]]] = []
    for grid in grids:
        found.append((grid.bbox, _grid_rows(grid, words())))
    for tab in budget.find(page, number, area) if area else []:
        if any(within(tab.bbox, grid.bbox) for grid in grids):
            continue  # a regular grid inside the area, read above
        inside = words_in(words(), tab.bbox)
        found.append((tuple(tab.bbox), [([cell_text(inside, c) if c else "" for c in row.cells],
                                         (row.bbox[1], row.bbox[3])) for row in tab.rows]))
    return [block for bbox, rows in sorted(found, key=lambda f: (f[0][1], f[0][0]))
            if (block := _table_block(number, bbox, rows)) is not None]


def _grid_rows(grid: _Grid, words: list) -> list[tuple[list[str], tuple[float, float]]]:
    """Each grid row's cell texts (words placed by their centre) and its y-range."""
    xs, ys = grid.xs, grid.ys
    cells: list[list[list]] = [[[] for _ in xs[1:]] for _ in ys[1:]]
    for w in words:
        cx, cy = (w[0] + w[2]) / 2, (w[1] + w[3]) / 2
        if xs[0] <= cx <= xs[-1] and ys[0] <= cy <= ys[-1]:
            i = min(bisect_right(ys, cy), len(ys) - 1) - 1
            j = min(bisect_right(xs, cx), len(xs) - 1) - 1
            cells[i][j].append(w)
    return [([" ".join(w[4] for w in sorted(cell, key=lambda w: (w[5], w[6], w[7]))) for cell in row],
             (ys[i], ys[i + 1])) for i, row in enumerate(cells)]


def _table_block(number: int, bbox: tuple, rows: list[tuple[list[str], tuple[float, float]]]) -> Block | None:
    """A table block from ruled rows: the first is the header unless it holds numbers (pymupdf's
    own header search, ``tab.header``, looks for text above the table and costs more than finding
    the table); None when no row has text."""
    first = rows[0][0] if rows else []
    if any(first) and not any(NUMBER.match(cell) for cell in first if cell):
        header, rows = first, rows[1:]
    else:
        header = []
    rows = [(cells, bounds) for cells, bounds in rows if any(cell.strip() for cell in cells)]
    if not rows:
        return None
    block = Block(number, tuple(bbox), kind="table", row_bounds=[bounds for _, bounds in rows])
    block.component = Component(kind="table", text="", section_path=[], table_kind="data",
                                header=header if any(header) else None, rows=[cells for cells, _ in rows],
                                page=number, bbox=[float(v) for v in bbox])
    return block
