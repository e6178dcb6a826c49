"""Explode: a table → one row segment per data row, kept with its header (LILaC t_i = [T_0; T_i]),
and the table's heading (caption and column names) as a segment of its own.

Reads a table component (header labels, rows of cells, caption, kind); writes nothing. The text
form of a data-table row is ``header: cell | header: cell``; of an infobox row ``key: value``
prefixed by the infobox title; of the heading ``caption`` then ``label | label``. The heading
is what a question names when it asks about a column ("which year had the most rainfall?") or
the table itself, which no single row says.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RowSegment:
    index: int  # data-row index in the table
    text: str
    header: list[str] | None
    cells: list[str]


def row_text(header: list[str] | None, cells: list[str]) -> str:
    if not header:
        return " | ".join(c for c in cells if c)
    parts = []
    previous = None
    for label, cell in zip(header, cells, strict=False):
        if not cell or cell == previous:  # a colspan repeats its cell: say it once
            continue
        previous = cell
        parts.append(f"{label}: {cell}" if label and label != cell else cell)
    return " | ".join(parts)


def table_heading(header: list[str] | None, caption: str | None) -> str | None:
    """The caption over the column labels (each once), or None for a table with neither."""
    labels: list[str] = []
    for label in header or []:
        if label and label not in labels:
            labels.append(label)
    text = "\n".join(part for part in (caption, " | ".join(labels)) if part)
    return text or None


def explode_table(
    header: list[str] | None, rows: list[list[str]], table_kind: str | None, caption: str | None
) -> list[RowSegment]:
    out = []
    for i, cells in enumerate(rows):
        if table_kind == "infobox":
            key, value = (cells + ["", ""])[:2]
            body = f"{key}: {value}" if key else value
            text = f"{caption} | {body}" if caption else body
            out.append(RowSegment(i, text, ["key", "value"], [key, value]))
        else:
            text = row_text(header, cells)
            if text:
                out.append(RowSegment(i, text, header, cells))
    return out
