"""Word tables: a ``w:tbl`` element into a table component, its merged cells repeated.

Reads a table's XML (rows, cells, ``w:gridSpan``, ``w:vMerge``, ``w:gridBefore``, ``w:tblHeader``);
writes a table component through the document walk (``word.DocxReader``), then what its cells
anchor (pictures, text boxes, notes) and its nested tables, each its own component: a nested table
is read once, as a table, and not again as the text of the cell that holds it. python-docx's
``row.cells`` repeats a cell object once per grid column it spans; here the cell's text is put in
each column it spans and each row a vertical merge continues into, once.
"""

from __future__ import annotations

from collections.abc import Iterator

from laminae.tasks.parse.document import Component
from laminae.tasks.parse.office.common import Cell, table_component
from laminae.tasks.parse.office.word_inline import Inline, block_children, w

MAX_COLUMNS = 1000  # Word's own limit is 63; a larger span or gridBefore is damage
OFF = ("0", "false", "off")


class TableReader:
    """Tables; mixed into ``DocxReader`` (word.py), whose walk (inline, anchored, emit, caption) it uses."""

    def table(self, tbl, part) -> None:
        nested: list = []
        anchored: list[Inline] = []
        grid: list[list[Cell]] = []
        marked, marking = 0, True
        first_cells = 0  # cells the first row writes: one across every column is the table's title
        above: dict[int, Cell] = {}  # grid column -> the cell last read there (a vertical merge goes on)
        origin: dict[int, int] = {}  # grid column -> the row its cell was written in
        reaches: dict[int, int] = {}  # row -> the first row a vertical merge into it starts in
        for tr in _children(tbl, "tr"):
            props = tr.find(w("trPr"))
            row: list[Cell] = [("", [])] * min(_int(props, "gridBefore"), MAX_COLUMNS)
            for tc in _children(tr, "tc"):
                cell_props = tc.find(w("tcPr"))
                span = max(1, min(_int(cell_props, "gridSpan") or 1, MAX_COLUMNS - len(row)))
                merge = cell_props.find(w("vMerge")) if cell_props is not None else None
                if merge is not None and merge.get(w("val")) in (None, "continue"):
                    cell: Cell = (above.get(len(row), ("", []))[0], [])
                    start = origin.get(len(row), len(grid))
                    reaches[len(grid)] = min(reaches.get(len(grid), start), start)
                else:
                    for i in range(span):
                        origin[len(row) + i] = len(grid)
                    inline = Inline()
                    for el in block_children(tc):
                        if el.tag == w("tbl"):
                            nested.append(el)
                        else:
                            if inline.text.size:
                                inline.text.add(" ")
                            self.inline(el, inline, part)
                    text, links = inline.text.finish()
                    cell = (" ".join(text.split()), links)
                    anchored.append(inline)
                for i in range(span):
                    above[len(row)] = cell if i == 0 else (cell[0], [])
                    row.append(above[len(row)])
                if len(row) >= MAX_COLUMNS:
                    break
            header = props.find(w("tblHeader")) if props is not None else None
            if marking and header is not None and header.get(w("val")) not in OFF:
                marked += 1
            else:
                marking = False
            if not grid:
                first_cells = sum(1 for _ in _children(tr, "tc")) + bool(_int(props, "gridBefore"))
            grid.append(row)
        n_head = marked or 1
        while n_head < len(grid) and reaches.get(n_head, n_head) < n_head:
            n_head += 1  # a header cell merged down over the next row makes that row part of the header
        caption, self.caption = self.caption, None
        comp = table_component(grid, n_head, caption, [], title_row=first_cells == 1)
        if comp is not None:
            self.emit(comp)
        elif caption:
            self.emit(Component("paragraph", caption, []))
        for inline in anchored:
            self.anchored(inline)
        for el in nested:
            self.table(el, part)


def _children(el, tag: str) -> Iterator:
    """Rows of a table, cells of a row: content controls and custom XML around them opened."""
    for child in el:
        if child.tag == w(tag):
            yield child
        elif child.tag == w("sdt"):
            content = child.find(w("sdtContent"))
            if content is not None:
                yield from _children(content, tag)
        elif child.tag == w("customXml"):
            yield from _children(child, tag)


def _int(props, tag: str) -> int:
    el = props.find(w(tag)) if props is not None else None
    try:
        return max(int(el.get(w("val")) or 0), 0) if el is not None else 0
    except ValueError:
        return 0
