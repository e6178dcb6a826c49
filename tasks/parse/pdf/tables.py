"""Tables on a PDF page, with any ruling or none: a regular grid of strokes is read straight from
the page's words, other ruling (merged cells, shading, partial lines, curved paths) by pymupdf's
``find_tables``, horizontal rules only or no rules at all (and dot-leader contents) from the
alignment of the words (``table_text``). When the layout model ran, its table boxes admit
aligned words with two rows and no rule, and a rule-less table outside them is not trusted.

Reads a page's vector boxes (``pdf``'s ``rules``), words and fonts; returns table ``Block``s with
header (bold rows, rows above a rule, else the first row), rows and each row's y-range. Frames,
diagrams, boxes and columns of prose are refused (``table_shape``), and their words searched
again. ``find_tables`` runs within ``TableBudget`` (``table_budget``): ``pdf_table_timeout_s``
a page and ``pdf_tables_budget_s`` a document, a page over either losing only those tables, with
a warning.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from statistics import median

from laminae.tasks.config import ParseConfig
from laminae.tasks.parse.document import Component
from laminae.tasks.parse.pdf.blocks import Block, Words, cell_text, within, words_in
from laminae.tasks.parse.pdf.table_budget import TableBudget
from laminae.tasks.parse.pdf.table_text import PROSE_CELL, PROSE_WORDS, aligned_tables

NUMBER = re.compile(r"^[-+]?[\d.,% ]+$")
SNAP = 3.0  # points: strokes closer than this are one line; thinner boxes are lines (as find_tables)
MAX_RULES = 2000  # more vector boxes than this (a chart or a drawing): leave the page to find_tables
MONO = re.compile(r"mono|nimbusmon|courier|consol|typewriter|cmtt|code|menlo|lucidasanstype")  # font names
LEFT = "\x00"  # a cell covered by the merged cell on its left (find_tables gives None)
LIST_MARK = re.compile(r"^(\(?\d{1,3}[.)]|\(?[a-zA-Z][.)]|\(?[ivxIVX]{1,4}[.)]|[•●○◦▪■□‣⁃–—*-])$")


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


@dataclass
class _Found:
    """A table read from the page before its header is chosen: cells (``LEFT`` where a merged cell
    covers it), each row's y-range, which rows are bold, the y of rules between rows."""

    bbox: tuple
    rows: list[list[str]]
    bounds: list[tuple[float, float]]
    bold: list[bool] = field(default_factory=list)
    rules: list[float] = field(default_factory=list)
    leaders: list[bool] = field(default_factory=list)


class _Fonts:
    """Which of a page's words are bold or monospaced, found on first use (a second pass over the
    page's spans, from the words' own text page)."""

    def __init__(self, page, words: Words) -> None:
        self.page, self.words = page, words
        self.ids: tuple[set[int], set[int]] | None = None

    def _read(self) -> tuple[set[int], set[int]]:
        buckets: dict[int, list] = {}
        for block in self.page.get_text("dict", textpage=self.words.textpage)["blocks"]:
            for line in block.get("lines", ()):
                for span in line["spans"]:
                    font = span["font"].lower()
                    style = (bool(span["flags"] & 16 or "bold" in font),
                             bool(span["flags"] & 8 or MONO.search(font)))
                    if any(style):
                        for k in range(int(span["bbox"][1] // 20), int(span["bbox"][3] // 20) + 1):
                            buckets.setdefault(k, []).append((span["bbox"], style))
        bold: set[int] = set()
        mono: set[int] = set()
        for w in self.words():
            for box, (is_bold, is_mono) in buckets.get(int((w[1] + w[3]) / 40), ()):
                if within(w, box, 0.5):
                    if is_bold:
                        bold.add(id(w))
                    if is_mono:
                        mono.add(id(w))
        return bold, mono

    def bold(self, word: tuple) -> bool:
        self.ids = self.ids or self._read()
        return id(word) in self.ids[0]

    def mono(self, word: tuple) -> bool:
        self.ids = self.ids or self._read()
        return id(word) in self.ids[1]


def find_page_tables(page, number: int, rules: list[tuple], words: Words, budget: TableBudget,
                     cfg: ParseConfig,
                     regions: list[tuple[float, float, float, float]] | None = None) -> list[Block]:
    """The page's tables: ruled grids, other ruling by ``find_tables`` (within ``budget``), then
    aligned words outside them. ``regions`` (the layout model's table boxes, when it ran) admit
    aligned words with two rows and no rule, and where their words do not align in wide gutters
    ``find_tables`` reads them by its text strategy; outside them a rule-less table is not
    trusted. No table when ``cfg.pdf_tables`` is off."""
    if not cfg.pdf_tables:
        return []
    fonts = _Fonts(page, words)
    found = [f for f in _ruled(page, number, *table_areas(rules), words, budget) if table_shape(f.rows) is None]
    free = [w for w in words() if not any(within(w, f.bbox) for f in found)]  # a frame's words stay free
    hrules = _horizontal_rules(rules)
    for region in regions or []:
        box = (region[0] - 4, region[1] - 4, region[2] + 4, region[3] + 4)
        inside = [w for w in free if within(w, box, 0)]
        texts = [_from_text(t) for t in aligned_tables(inside, hrules, fonts, min_rows=2)]
        if inside and not texts:
            texts = [_from_finder(tab, words()) for tab in budget.find(page, number, box, strategy="text")]
        found += texts
        free = [w for w in free if not within(w, box, 0)]
    trusted = aligned_tables(free, hrules, fonts, min_rows=3, need_rules=regions is not None)
    found += [_from_text(t) for t in trusted]
    _mark_bold(found, words, fonts)
    found.sort(key=lambda f: (f.bbox[1], f.bbox[0]))
    return [block for f in found if table_shape(f.rows) is None
            and (block := _table_block(number, f.bbox, f.rows, f.bounds, _header_rows(f))) is not None]


def _from_text(t) -> _Found:
    return _Found(t.bbox, t.rows, t.bounds, t.bold, t.rules, t.leaders)


def _horizontal_rules(rules: list[tuple]) -> list[tuple[float, float, float]]:
    """``(y, x0, x1)`` of the page's horizontal strokes and thin bars (not the sides of boxes)."""
    return [((y0 + y1) / 2, x0, x1) for x0, y0, x1, y1, _, rect in rules
            if rect and y1 - y0 <= SNAP < x1 - x0]


def _ruled(page, number: int, grids: list[_Grid], area: tuple | None, words: Words,
           budget: TableBudget) -> list[_Found]:
    """Tables drawn with horizontal and vertical strokes (``table_areas``): regular grids read from
    the words, the rest by ``find_tables`` over ``area``."""
    found = []
    for g in grids:
        rows = _grid_rows(g, words())
        found.append(_Found(g.bbox, [cells for cells, _ in rows], [b for _, b in rows]))
    for tab in budget.find(page, number, area) if area else []:
        if not any(within(tab.bbox, g.bbox) for g in grids):  # a regular grid inside the area is read above
            found.append(_from_finder(tab, words()))
    return [f for f in found if f.rows]


def _from_finder(tab, words: list) -> _Found:
    """A ``find_tables`` table's cells read from the page's words (its own ``extract`` garbles
    numbers such as "2,102,650"); a cell covered by a merged one on its left is ``LEFT``."""
    inside = words_in(words, tab.bbox)
    rows = []
    for row in tab.rows:
        cells = []
        for j, c in enumerate(row.cells):
            left = next((k for k in range(j - 1, -1, -1) if row.cells[k]), None)
            spans = c is None and left is not None and row.cells[left][2] > _column_x(tab, j)
            cells.append(cell_text(inside, c) if c else LEFT if spans else "")
        rows.append(cells)
    return _Found(tuple(tab.bbox), rows, [(r.bbox[1], r.bbox[3]) for r in tab.rows])


def _mark_bold(found: list[_Found], words: Words, fonts: _Fonts) -> None:
    """Which rows of ruled tables are bold throughout (aligned words know it already)."""
    for f in found:
        if not f.bold:
            x0, _, x1, _ = f.bbox
            f.bold = [all(fonts.bold(w) for w in row) if row else False
                      for row in (words_in(words(), (x0, top, x1, bottom)) for top, bottom in f.bounds)]


def _column_x(tab, j: int) -> float:
    """The centre of column ``j`` of a ``find_tables`` table (from a row where it is a cell of its own)."""
    for row in tab.rows:
        if row.cells[j]:
            return (row.cells[j][0] + row.cells[j][2]) / 2
    return float("inf")


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



def table_shape(rows: list[list[str]]) -> str | None:
    """Why these cells are not a table, or None: a table needs two columns and two rows with two
    filled cells or more, and short cells (median under ``PROSE_CELL`` characters and
    ``PROSE_WORDS`` words); two columns whose first holds only list marks are a list. A frame
    round a page, a box of prose, a diagram's scattered boxes, columns of a newsletter fail one
    of these."""
    filled = [[c for c in row if c and c != LEFT] for row in rows]
    if max((len(row) for row in rows), default=0) < 2:
        return "one column"
    if sum(1 for row in filled if len(row) >= 2) < 2:
        return "fewer than two rows of two cells"
    cells = [c for row in filled for c in row]
    if median(len(c) for c in cells) > PROSE_CELL or median(len(c.split()) for c in cells) >= PROSE_WORDS:
        return "cells of prose"
    if len(rows[0]) == 2 and all(LIST_MARK.match(row[0]) for row in rows if row[0]):
        return "a list"
    return None


def _header_rows(f: _Found) -> int:
    """How many leading rows are the header: in a contents table the rows above the first entry
    run along a leader; else the bold ones (at most three, not all), else the rows above the first
    rule when rules do not part every row, else the first row unless it holds numbers."""
    n = len(f.rows)
    if sum(f.leaders) >= 2:
        return min(f.leaders.index(True), 3)
    k = 0
    while k < min(n - 1, 3) and f.bold[k]:
        k += 1
    if k:
        return k
    parted = [i for i in range(n - 1)
              if any(f.bounds[i][1] - 1 <= y <= f.bounds[i + 1][0] + 1 for y in f.rules)]
    if parted and len(parted) < n - 1 and parted[0] < 3:
        return parted[0] + 1
    first = [c for c in f.rows[0] if c and c != LEFT]
    return 0 if not first or any(NUMBER.match(c) for c in first) else 1


def _merge_header(rows: list[list[str]]) -> list[str]:
    """Header rows as one: each column's texts top to bottom, a merged cell's text over every
    column it covers ("Population" over "2020" and "2024": "Population 2020", "Population 2024")."""
    out = []
    for j in range(len(rows[0])):
        parts: list[str] = []
        for row in rows:
            k = j
            while k > 0 and row[k] == LEFT:
                k -= 1
            text = "" if row[k] == LEFT else row[k]
            if text and (not parts or parts[-1] != text):
                parts.append(text)
        out.append(" ".join(parts))
    return out


def _table_block(number: int, bbox: tuple, rows: list[list[str]], bounds: list[tuple[float, float]],
                 header_rows: int) -> Block | None:
    """A table block: ``header_rows`` leading rows merged into the header, the others its rows
    (those with no text dropped); None when no row is left."""
    header = _merge_header(rows[:header_rows]) if header_rows else []
    body = [([("" if c == LEFT else c) for c in cells], b)
            for cells, b in zip(rows[header_rows:], bounds[header_rows:], strict=True)
            if any(c.strip() for c in cells if c != LEFT)]
    if not body:
        return None
    block = Block(number, tuple(bbox), kind="table", row_bounds=[b for _, b in body])
    block.component = Component(kind="table", text="", section_path=[], table_kind="data",
                                header=header if any(header) else None, rows=[cells for cells, _ in body],
                                page=number, bbox=[float(v) for v in bbox])
    return block
