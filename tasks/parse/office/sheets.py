"""Parse spreadsheets (XLSX with openpyxl, CSV/TSV with the csv module) into table components.

Reads the file's bytes; returns a ``ParsedPage`` whose components are tables: each sheet (each
CSV file) one table, or several where blank rows part blocks that each start like a table (a
title cell or a header row; a block that starts with data goes on the table above it). In each:
empty leading and trailing rows and columns trimmed; a block's leading single-cell rows ("Sales
2025") read as its caption after the sheet's name; a header row detected: the first row, when
rows follow it and most of its cells are filled and most of those are words (or years above
other values), not numbers or dates; in a one-column list only a word above numbers or dates;
else no header. Merged cells' value is repeated into every cell they cover; values are shown as
Excel shows them (integers without ".0", the format's decimals, thousands separators and
percent, dates ISO 8601, formulas as the value Excel cached: ``data_only``); a cell's hyperlink out
of the workbook is a link of its row (``sheet_parts.py`` reads merges and links from the sheet's
XML, which openpyxl's read-only mode does not). Hidden sheets are
read like the others: they often hold the lookup tables the visible sheets' values come from,
which are the document's data too.

Bounded: openpyxl's read-only mode streams a sheet's rows; a sheet keeps ``max_sheet_rows``
non-empty rows and stops reading there (warning "rows_cut: sheet NAME: kept N of M rows", M the
rows its dimension declares, or "more than N" without one; a CSV's rows are all counted); a CSV
field is at most ``MAX_FIELD_CHARS`` (past that the rows from there are dropped with a warning).
The CSV's delimiter is sniffed on its first ``SNIFF_CHARS`` (a ``.tsv`` file is tab-separated),
its encoding is ``decode_text``'s. The 10,000 default of ``max_sheet_rows`` is kept: each row
becomes a row subcomponent that is embedded, so it is the real bound on a sheet's cost.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
import warnings as py_warnings
from collections.abc import Iterable, Iterator

from laminae.tasks.config import OcrConfig, ParseConfig
from laminae.tasks.crawl.formats import TSV_TYPE, extension_type
from laminae.tasks.parse.document import Component, Link, ParsedPage, ParseError, decode_text
from laminae.tasks.parse.office.common import file_title, link_to, open_office_zip, table_component
from laminae.tasks.parse.office.sheet_parts import sheet_ranges

SNIFF_CHARS = 64 * 1024
MAX_FIELD_CHARS = 1_000_000
MAX_TITLE_ROWS = 3
NUMERIC = re.compile(r"^[-+(]?[$€£¥]?\s?[\d.,\s]*\d[\d.,\s]*(%|e[-+]?\d+)?\)?$", re.IGNORECASE)
DATE_LIKE = re.compile(r"^\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}([ T]\d{1,2}:\d{2}(:\d{2})?)?$|^\d{1,2}:\d{2}(:\d{2})?$")
YEAR = re.compile(r"^(1[89]|20)\d\d$")
# a number format Excel applies to a number: digits, decimals, thousands, percent (literals, colours,
# locales and currency symbols around them removed first)
FORMAT_NOISE = re.compile(r'"[^"]*"|\[[^\]]*\]|\\.|_.|\*.|[$€£¥\s]')
FIXED_FORMAT = re.compile(r"^(?P<int>[#,0]*0)(?:\.(?P<dec>0+))?(?P<pct>%)?$")


# -- XLSX --------------------------------------------------------------------------------------
def parse_xlsx(body: bytes, url: str, cfg: ParseConfig, ocr: OcrConfig, charset: str | None) -> ParsedPage:
    """Each sheet's tables (see the module docstring)."""
    archive = open_office_zip(body, "xlsx", cfg)
    components: list[Component] = []
    warnings: list[str] = []
    # openpyxl warns of what it does not keep (conditional formats, data validation): no cell's value
    with py_warnings.catch_warnings(), archive:
        py_warnings.simplefilter("ignore", UserWarning)
        try:
            import openpyxl

            book = openpyxl.load_workbook(io.BytesIO(body), read_only=True, data_only=True, keep_links=False)
            sheets, props = book.worksheets, book.properties
        except Exception as exc:  # openpyxl raises KeyError, ValueError, TypeError, lxml errors... on damage
            raise ParseError(f"openpyxl cannot open the XLSX file: {type(exc).__name__}: {exc}",
                             "unparsable_xlsx") from None
        try:
            for sheet in sheets:
                merges, targets = sheet_ranges(archive, getattr(sheet, "_worksheet_path", None))
                rows, titles = _sheet_rows(sheet, merges, cfg.max_sheet_rows, warnings)
                links = {(r - 1, c - 1): link for (r, c), target in targets.items()
                         if (link := link_to(url, target, "", -1, -1)) is not None}
                components.extend(sheet_tables(rows, sheet.title, [sheet.title], titles, links))
        finally:
            book.close()
    meta = {key: str(value).strip() for key, value in (
        ("author", props.creator), ("subject", props.subject), ("keywords", props.keywords),
        ("description", props.description), ("created", props.created), ("modified", props.modified))
        if value not in (None, "")}
    title = (props.title or "").strip() or file_title(url)
    return ParsedPage(url=url, title=title, canonical_url=None, lang=None, components=components,
                      warnings=warnings, kind="xlsx", meta=meta)


def _library_rows(sheet) -> Iterator[tuple]:
    """openpyxl's rows of a sheet; its errors on a damaged sheet (XML, shared strings, styles) as ``ParseError``."""
    rows = sheet.iter_rows()
    while True:
        try:
            row = next(rows)
        except StopIteration:
            return
        except Exception as exc:  # raised inside openpyxl's parser only: our code runs outside next()
            raise ParseError(f"openpyxl cannot read sheet {sheet.title}: {type(exc).__name__}: {exc}",
                             "unparsable_xlsx") from None
        yield row


def _number_format(cell) -> str:
    try:
        return cell.number_format
    except (IndexError, KeyError, TypeError):  # a style the workbook's style table does not hold (or no number)
        return "General"


def _sheet_rows(sheet, merges: list[tuple[int, int, int, int]], cap: int,
                warnings: list[str]) -> tuple[list[list[str]], set[int]]:
    """A sheet's rows as strings (an empty row as []), up to ``cap`` non-empty ones, merged cells
    filled; and the rows that are one merged cell (a title over a table)."""
    try:
        declared = sheet.max_row
        sheet.reset_dimensions()  # else rows are padded to the declared width, which formatting can make 16,384
    except Exception as exc:  # openpyxl reads the sheet's dimension from its XML here
        raise ParseError(f"openpyxl cannot read sheet {sheet.title}: {type(exc).__name__}: {exc}",
                         "unparsable_xlsx") from None
    rows: list[list[str]] = []
    kept = 0
    for row in _library_rows(sheet):
        values = [format_cell(c.value, _number_format(c)) if c.value is not None else "" for c in row]
        while values and not values[-1]:
            values.pop()
        if values and kept == cap:
            warnings.append(f"rows_cut: sheet {sheet.title}: kept {cap} of "
                            f"{declared if declared and declared > cap else 'more than ' + str(cap)} rows")
            break
        kept += bool(values)
        rows.append(values)
    titles: set[int] = set()
    if merges and rows:
        width = max(len(r) for r in rows)
        for r1, c1, r2, c2 in merges:
            if r1 > len(rows) or c1 > len(rows[r1 - 1]) or not rows[r1 - 1][c1 - 1]:
                continue
            value = rows[r1 - 1][c1 - 1]
            if r1 == r2 and c2 > c1 and sum(bool(v) for v in rows[r1 - 1]) == 1:
                titles.add(r1 - 1)
            for r in range(r1, min(r2, len(rows)) + 1):
                row = rows[r - 1]
                last = min(c2, width)
                row.extend([""] * (last - len(row)))
                for c in range(c1, last + 1):
                    row[c - 1] = value
    return rows, titles


def format_cell(value: object, number_format: str | None = None) -> str:
    """A cell's value as Excel shows it (see the module docstring)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        fixed = FIXED_FORMAT.match(FORMAT_NOISE.sub("", (number_format or "").split(";")[0]))
        if fixed and number_format not in (None, "General"):
            number = value * 100 if fixed.group("pct") else value
            comma = "," if "," in fixed.group("int") else ""
            return f"{number:{comma}.{len(fixed.group('dec') or '')}f}" + ("%" if fixed.group("pct") else "")
        if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.15g}" if isinstance(value, float) else str(value)
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0):
            return value.date().isoformat()
        return value.isoformat(sep=" ", timespec="seconds" if value.second else "minutes")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return " ".join(str(value).split())


# -- CSV ---------------------------------------------------------------------------------------
def parse_csv(body: bytes, url: str, cfg: ParseConfig, ocr: OcrConfig, charset: str | None) -> ParsedPage:
    """A CSV or TSV file's table(s) (see the module docstring)."""
    if b"\x00" in body[:4096] and not body.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ParseError("the CSV file holds NUL bytes: it is binary, not text", "unparsable_csv")
    text, warning = decode_text(body, charset)
    warnings = [warning] if warning else []
    name = file_title(url)
    delimiter = "\t" if extension_type(url) == TSV_TYPE else _sniff_delimiter(text[:SNIFF_CHARS])
    old_limit = csv.field_size_limit(MAX_FIELD_CHARS)
    try:
        rows = _csv_rows(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter), name, cfg.max_sheet_rows,
                         warnings)
    finally:
        csv.field_size_limit(old_limit)
    return ParsedPage(url=url, title=name, canonical_url=None, lang=None, components=sheet_tables(rows, None, []),
                      warnings=warnings, kind="csv")


def _sniff_delimiter(sample: str) -> str:
    """The delimiter of a sample's complete lines; a comma when the sniffer cannot tell."""
    if "\n" in sample:
        sample = sample[: sample.rfind("\n")]
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        return ","


def _csv_rows(reader: Iterator[list[str]], name: str, cap: int, warnings: list[str]) -> list[list[str]]:
    rows: list[list[str]] = []
    kept = total = 0
    try:
        for row in reader:
            values = [" ".join(v.split()) for v in row]
            while values and not values[-1]:
                values.pop()
            total += bool(values)
            if kept < cap:
                rows.append(values)  # blank rows too: they part a file's tables
                kept += bool(values)
    except csv.Error as exc:
        warnings.append(f"csv_error: line {reader.line_num}: {exc}; the rows from there are dropped")
    if total > kept:
        warnings.append(f"rows_cut: sheet {name}: kept {kept} of {total} rows")
    return rows


# -- tables of a sheet -------------------------------------------------------------------------
def sheet_tables(rows: list[list[str]], name: str | None, section_path: list[str],
                 title_rows: set[int] | None = None, links: dict[tuple[int, int], Link] | None = None
                 ) -> list[Component]:
    """The tables of a sheet's rows (see the module docstring); ``title_rows``: indices of rows
    that are one merged cell; ``links``: (row, column) index -> the cell's hyperlink."""
    groups: list[tuple[list[str], bool, list[tuple[int, list[str]]]]] = []  # (title rows, has a header, rows)
    for block in _blocks(rows):
        titles: list[str] = []
        while len(titles) < MAX_TITLE_ROWS and len(block) > 1 and max(len(r) for _, r in block[1:]) > 1 and (
                block[0][0] in (title_rows or ()) or sum(bool(v) for v in block[0][1]) == 1):
            titles.append(next(v for v in block[0][1] if v))
            block = block[1:]
        cells = [r for _, r in block]
        header = is_header(cells)
        lone = len(cells) == 1 and sum(bool(v) for v in cells[0]) == 1  # a note under a table
        if groups and not titles and not header and not lone:
            groups[-1][2].extend(block)  # a block that starts with data goes on with the table above
        else:
            groups.append((titles, header, block))
    out = []
    links = links or {}
    for titles, header, block in groups:
        caption = " / ".join([name, *titles] if name else titles) or None
        grid = [[(v, [Link(links[(i, j)].url, v)] if (i, j) in links else []) for j, v in enumerate(r)]
                for i, r in block]
        comp = table_component(grid, int(header), caption, section_path)
        if comp is not None:
            out.append(comp)
    return out


def _blocks(rows: Iterable[list[str]]) -> Iterator[list[tuple[int, list[str]]]]:
    """Runs of non-empty rows, each row with its index."""
    block: list[tuple[int, list[str]]] = []
    for i, row in enumerate(rows):
        if any(row):
            block.append((i, row))
        elif block:
            yield block
            block = []
    if block:
        yield block


def is_textual(value: str) -> bool:
    """A cell that holds words, not a number, an amount, a percentage or a date."""
    return bool(value) and not NUMERIC.match(value) and not DATE_LIKE.match(value)


def is_header(block: list[list[str]]) -> bool:
    """Whether a block's first row labels its columns: rows follow it, and most of its cells are
    filled and most of those are labels: words, or years above values that are not years ("Region |
    2024 | 2025"); in a block of one column (a list), only a word above values that are not words
    (a list of names has no header)."""
    if len(block) < 2:
        return False
    first = block[0]
    filled = [v for v in first if v]
    width = max(len(r) for r in block)
    if width == 1:
        below = [r[0] for r in block[1:] if r and r[0]]
        return bool(filled) and is_textual(filled[0]) and 2 * sum(is_textual(v) for v in below) < len(below)

    def label(col: int, value: str) -> bool:
        if is_textual(value):
            return True
        below = [r[col] for r in block[1:] if col < len(r) and r[col]]
        return bool(YEAR.match(value)) and any(not YEAR.match(v) for v in below)

    labels = sum(label(col, v) for col, v in enumerate(first) if v)
    return 2 * len(filled) >= width and 2 * labels > len(filled)
