"""Tables: ``<table>`` (and Javadoc's ``<div>`` grids) become ``table`` components with a header and
rows, colspan and rowspan expanded, header rows detected, key/value tables read as infoboxes.

Reads table elements; writes ``table`` components (a code block beside its line numbers goes to
the code reader, a layout table to the walker).
"""

from __future__ import annotations

from lxml import etree

from laminae.tasks.parse.document import Component, Link, header_labels, linearize_table
from laminae.tasks.parse.html.chrome import LINE_NUMBER_CLASSES, classes_of, int_attr, should_skip, tag_of
from laminae.tasks.parse.html.code import CODE_TABLE_CLASSES
from laminae.tasks.parse.html.text import TextBuilder

MAX_SPAN = 200


class TableReader:
    """Tables; mixed into ``HtmlParser`` (walker.py), whose state (consumed, components) and walk
    (inline, block, code, plain_text, section_path) it uses."""

    def grid_table(self, el: etree._Element, columns: int) -> None:
        """A table laid out as a CSS grid of ``<div>`` cells (Javadoc's summary tables): its
        ``table-header`` cells are the header, the others fill rows of ``columns`` cells."""
        self.consumed.add(el)
        cells = [c for c in el if tag_of(c) == "div" and not should_skip(c)]
        grid: list[list[tuple[str, list[Link], bool] | None]] = []
        in_head: list[bool] = []
        for at in range(0, len(cells), columns):
            row = []
            for cell in cells[at:at + columns]:
                tb = TextBuilder()
                self.inline(cell, tb, with_tail=False)
                text, links = tb.finish()
                row.append((text, links, "table-header" in classes_of(cell)))
            row.extend([None] * (columns - len(row)))
            grid.append(row)
            in_head.append(all(c is not None and c[2] for c in row))
        caption_el = el.getprevious()
        caption = None
        if caption_el is not None and "caption" in classes_of(caption_el):
            caption = self.plain_text(caption_el).strip() or None
        if grid:
            self._data_table(grid, in_head, caption)

    def table(self, el: etree._Element) -> None:
        if el in self.consumed:
            return
        self.consumed.add(el)
        if classes_of(el) & CODE_TABLE_CLASSES:  # a code block beside its line numbers
            pres = [p for p in el.iter("pre") if not any(
                classes_of(a) & LINE_NUMBER_CLASSES for a in p.iterancestors() if a is not el)]
            if pres:
                self.code(pres[-1])
                return
        rows = el.xpath("./tr | ./thead/tr | ./tbody/tr | ./tfoot/tr")
        if (el.get("role") or "").lower() == "presentation" or not rows:
            self.block(el)
            return
        nested: list[etree._Element] = []
        grid: list[list[tuple[str, list[Link], bool] | None]] = []
        in_head: list[bool] = []
        spans: list[list[int]] = []  # per row: the rowspan of each cell it holds itself
        pending: dict[int, tuple[int, tuple[str, list[Link], bool]]] = {}  # col -> (rows left, cell)
        for tr in rows:
            if should_skip(tr):
                continue
            out: list[tuple[str, list[Link], bool] | None] = []
            own: list[int] = []
            col = 0
            for td in tr:
                if not isinstance(td.tag, str) or td.tag not in ("td", "th") or should_skip(td):
                    continue
                col = _fill_spanned(out, col, pending)
                tb = TextBuilder()
                self.inline(td, tb, with_tail=False, nested_tables=nested, in_cell=True)
                text, links = tb.finish()
                cell = (text, links, td.tag == "th")
                colspan = min(int_attr(td, "colspan") or 1, MAX_SPAN)
                rowspan = min(int_attr(td, "rowspan") or 1, MAX_SPAN)
                own.append(rowspan)
                for i in range(colspan):
                    out.append(cell if i == 0 else (text, [], td.tag == "th"))
                    if rowspan > 1:
                        pending[col] = (rowspan - 1, (text, [], td.tag == "th"))
                    col += 1
            _fill_spanned(out, col, pending)
            if out:
                grid.append(out)
                in_head.append(tr.getparent().tag == "thead")
                spans.append(own)
        caption_el = el.find("./caption")
        caption = self.plain_text(caption_el).strip() if caption_el is not None else None
        if grid:
            width = max(len(r) for r in grid)
            for r in grid:
                r.extend([None] * (width - len(r)))
            if "infobox" in (el.get("class") or "").lower() or _is_key_value(grid):
                self._infobox(grid, caption)
            else:
                self._data_table(grid, in_head, caption, spans)
        for table in nested:
            self.table(table)

    def _data_table(self, grid, in_head: list[bool], caption: str | None,
                    spans: list[list[int]] | None = None) -> None:
        n_head = 0
        for r, head in zip(grid, in_head, strict=True):
            cells = [c for c in r if c is not None]
            if head or (cells and all(c[2] for c in cells)):
                n_head += 1
            else:
                break
        if spans:
            n_head = _header_rows(n_head, in_head, spans)
        if n_head == len(grid):  # only header-like rows: read them as data
            n_head = 0
        width = len(grid[0])
        while n_head and width > 1 and _spans_all(grid[0]):
            # a title row ("Climate data for Bari") is the table's caption, not a column label
            title = grid[0][0][0].strip() if grid[0][0] else ""
            if title and title != caption:
                caption = f"{caption} / {title}" if caption else title
            grid, in_head, n_head = grid[1:], in_head[1:], n_head - 1
            spans = spans[1:] if spans else spans
        header = header_labels([[r[col][0].strip() if r[col] else "" for col in range(width)]
                                for r in grid[:n_head]]) if n_head else None
        rows, links = [], []
        carried: list[Link] = []  # a label's links, for the first row that repeats it
        for i in range(n_head, len(grid)):
            r = grid[i]
            cells = [c[0].strip() if c else "" for c in r]
            if not any(cells):
                continue
            if spans and _label_only(grid, spans, i):
                carried.extend(lk for c in r if c for lk in c[1])
                continue
            for lk in [*carried, *(lk for c in r if c for lk in c[1])]:
                links.append(Link(lk.url, lk.anchor, row=len(rows)))
            carried = []
            rows.append(cells)
        for r in grid[:n_head]:
            for c in r:
                if c:
                    links.extend(Link(lk.url, lk.anchor) for lk in c[1])
        if not rows:
            return
        self.components.append(Component(
            "table", linearize_table(caption, header, rows), self.section_path(), _dedupe_links(links), caption=caption,
            table_kind="data", header=header, rows=rows,
        ))

    def _infobox(self, grid, caption: str | None) -> None:
        rows, links, title, group = [], [], caption, None
        for r in grid:
            cells = [c for i, c in enumerate(r) if c is not None and (i == 0 or c is not r[i - 1])]
            texts = [c[0].strip() for c in cells]
            if len(cells) == 1 or len(set(texts)) == 1:
                text = texts[0] if texts else ""
                if not text:
                    continue
                if not rows and cells[0][2]:
                    title = title or text
                elif cells[0][2]:
                    group = text
                else:
                    rows.append(["", text])
                    links.extend(Link(lk.url, lk.anchor, row=len(rows) - 1) for lk in cells[0][1])
                continue
            key, value = texts[0], " ".join(texts[1:])
            if group and key:
                key = f"{group} / {key}"
            if not (key or value):
                continue
            rows.append([key, value])
            for c in cells:
                links.extend(Link(lk.url, lk.anchor, row=len(rows) - 1) for lk in c[1])
        if not rows:
            return
        lines = [title] if title else []
        lines.extend(f"{k}: {v}" if k else v for k, v in rows)
        self.components.append(Component(
            "table", "\n".join(lines), self.section_path(), _dedupe_links(links), caption=title,
            table_kind="infobox", header=None, rows=rows,
        ))


def _fill_spanned(out: list, col: int, pending: dict) -> int:
    """Copy cells of earlier rows' rowspans into ``out`` from column ``col``; returns the next column."""
    while col in pending:
        left, cell = pending[col]
        out.append(cell)
        if left <= 1:
            del pending[col]
        else:
            pending[col] = (left - 1, cell)
        col += 1
    return col


def _header_rows(n_head: int, in_head: list[bool], spans: list[list[int]]) -> int:
    """The header ends before a row of ``<th>`` cells that all span down past it (a row's label,
    "North" over the rows of its cities, not a column's): the rows they span are body rows, each
    with the label's text (a ``<thead>`` row stays a header row)."""
    while True:
        labels = [i for i in range(n_head)
                  if not in_head[i] and spans[i] and all(i + span > n_head for span in spans[i])]
        if not labels:
            return n_head
        n_head = labels[0]


def line_table(el: etree._Element) -> bool:
    """A table of one row or one column (not a code block beside its line numbers): a line of text
    when it stands in another table's cell (Doxygen's signature beside its labels, a season's
    "« 1936 1938 »" in an infobox), where a table of rows and columns is a table of its own."""
    if classes_of(el) & CODE_TABLE_CLASSES:
        return False
    rows = [[c for c in tr if tag_of(c) in ("td", "th") and not should_skip(c)]
            for tr in el.xpath("./tr | ./thead/tr | ./tbody/tr | ./tfoot/tr") if not should_skip(tr)]
    rows = [r for r in rows if r]
    return len(rows) <= 1 or all(len(r) == 1 and (int_attr(r[0], "colspan") or 1) == 1 for r in rows)


def _label_only(grid, spans: list[list[int]], i: int) -> bool:
    """Does row ``i`` hold only cells that span down (a row's label on a row of its own), all of
    whose text the next row repeats in the same columns?"""
    if i + 1 >= len(grid) or not spans[i] or any(span < 2 for span in spans[i]):
        return False
    below = grid[i + 1]
    return all(not c or not c[0].strip() or (below[col] is not None and below[col][0] == c[0])
               for col, c in enumerate(grid[i]))


def _spans_all(row: list) -> bool:
    """A header row whose one cell spans the whole width (colspan repeats it in every column)."""
    texts = {c[0].strip() for c in row if c}
    return len(texts) == 1 and all(c is not None for c in row)


def _is_key_value(grid) -> bool:
    """Two columns where every row with two distinct cells starts with a ``<th>`` key."""
    if len(grid[0]) != 2 or len(grid) < 2:
        return False
    pairs = [r for r in grid if r[0] is not None and r[1] is not None and r[0] is not r[1]]
    return bool(pairs) and all(r[0][2] and not r[1][2] for r in pairs)


def _dedupe_links(links: list[Link]) -> list[Link]:
    seen, out = set(), []
    for lk in links:
        key = (lk.url, lk.anchor, lk.row)
        if key not in seen:
            seen.add(key)
            out.append(lk)
    return out
