"""The fidelity bench's scorer: one parsed document against its reference Markdown.

Reads a ``ParsedPage`` (any object with ``title`` and ``components``) and a reference text; writes
nothing. ``score(page, reference)`` counts, for ``bench/fidelity.py``:

- **words** (``words``): NFKC (ligatures such as "ﬁ" expanded), casefolded, soft hyphens and
  zero-width characters out, a hyphen between letters at a line's end joined ("opera-\\ntion" is
  "operation"), then runs of Unicode letters and digits (``[^\\W_]+``). The reference's words are
  its text without Markdown's syntax (``reference_text``; outside code fences: fence lines, list
  marks, "1." too, which a renderer writes, link and image targets and definitions, HTML comments
  and tags; an image keeps its alt text, a link its text, a code span its text). laminae's words
  (``page_text``, read as plain text): the title (unless it is a section heading), then each
  component in order after the headings of its section path that the component before it did not
  have; a component's words are its ``text`` (a table's linearized text), an image's or a video's
  its alt text and caption (not laminae's "Image: ... In: ..." proxy).
- found: the multiset overlap of the two word lists; **in order**: their longest common
  subsequence (exact, bit-parallel) over found; **precision**: found over laminae's words.
- **tables** (GFM pipe tables and raw HTML tables of the reference): each is matched to laminae's
  table component holding the most of its cells (normalised: words joined by one space; empty ones
  skipped; a component may match several); cells found = the reference cells (header and body, a
  multiset) in the matched component's header and rows; a **header agrees** where the matched
  component's header equals the reference's, cell by cell.
- **headings**: reference ATX headings (outside code fences) whose normalised text (a leading
  section number such as "2.1." off) equals a section name of laminae: any component's section
  path entry, the title, or the whole text of a paragraph (a heading with nothing under it).
- **pictures**: laminae's image components against the reference's ``![alt](src)`` images.
- ``restrict``: a reference of facts scores only the measures its first line names
  (``<!-- measures: headings -->``); the others count nothing.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))
_LINE_HYPHEN = re.compile(r"(?<=[^\W\d_])-[ \t]*\r?\n[ \t]*(?=[^\W\d_])")
_WORD = re.compile(r"[^\W_]+")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_IMAGE = re.compile(r"!\[((?:\\.|[^\]\\])*)\]\((?:[^()\s]|\([^()]*\))*(?:\s+\"[^\"]*\")?\)")
_LINK = re.compile(r"\[((?:\\.|[^\]\\])*)\]\((?:[^()\s]|\([^()]*\))*(?:\s+\"[^\"]*\")?\)")
_REF_LINK = re.compile(r"\[((?:\\.|[^\]\\])*)\]\[[^\]]*\]")
_LINK_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s+\S+.*$", re.M)
_LIST_MARK = re.compile(r"^(\s*(?:>\s*)*)(?:[-*+]|\d{1,9}[.)])(?=\s)")
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
_HELD = re.compile("\x00(\\d+)\x00")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_MEASURES = re.compile(r"\s*<!--\s*measures:\s*([\w, ]+?)\s*-->")
_SECTION_NUMBER = re.compile(r"^\s*(?:[A-Z]\.)?\d+(?:\.\d+)*\.?\s+")
_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_DELIMITER_CELL = re.compile(r"^\s*:?-+:?\s*$")
_BLOCK_START = re.compile(r"^ {0,3}(#{1,6}\s|>|`{3,}|~{3,})")


def words(text: str) -> list[str]:
    """The words of ``text`` as the bench counts them (see the module docstring)."""
    text = unicodedata.normalize("NFKC", text).translate(_INVISIBLE)
    text = _LINE_HYPHEN.sub("", text)
    return _WORD.findall(text.casefold())


def normal(text: str, markdown: bool = True) -> str:
    """A cell's or heading's text for comparison: its words, one space apart (the reference's read
    as Markdown, laminae's as plain text)."""
    return " ".join(words(_inline(text) if markdown else text))


def heading(text: str, markdown: bool = True) -> str:
    """A heading's text for comparison: ``normal`` without a leading section number ("2.1.")."""
    return normal(_SECTION_NUMBER.sub("", text), markdown)


def _inline(text: str) -> str:
    """Markdown inline syntax out: an image's alt text and a link's text stay, their targets go;
    code spans are kept as their text (no link, tag or entity inside one; "`Buffer`s" is "Buffers")."""
    spans: list[str] = []

    def hold(match: re.Match[str]) -> str:
        code = match.group(0)[len(match.group(1)):-len(match.group(1))]  # rendered without its backticks
        spans.append(code[1:-1] if len(code) > 2 and code[0] == code[-1] == " " and code.strip() else code)
        return f"\x00{len(spans) - 1}\x00"

    text = _CODE_SPAN.sub(hold, text)  # code spans bind first: a link's text may hold one, not the reverse
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _REF_LINK.sub(r"\1", text)
    text = html.unescape(_TAG.sub(" ", text))
    return _HELD.sub(lambda m: spans[int(m.group(1))], text)


def _fenced(lines: Sequence[str]) -> list[bool]:
    """For each line: is it a code fence line or inside a fenced block."""
    out: list[bool] = []
    fence: str | None = None
    for line in lines:
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            out.append(True)
        elif fence is not None:
            out.append(True)
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) \
                    and not line.strip().lstrip(fence[0]):
                fence = None
        else:
            out.append(False)
    return out


def reference_text(markdown: str) -> str:
    """The reference's text: fence lines (and their info strings) dropped, their contents kept as
    they are; outside them HTML comments, list items' marks ("1." too) and link definitions dropped,
    inline syntax out (``_inline``)."""
    lines = markdown.splitlines()
    out: list[str] = []
    run: list[str] = []
    for line, fenced in [*zip(lines, _fenced(lines), strict=True), ("", True)]:
        if not fenced:
            run.append(line)
            continue
        if run:
            text = _COMMENT.sub("", "\n".join(run))
            out.append(_inline(_LINK_DEF.sub("", "\n".join(_LIST_MARK.sub("", x) for x in text.splitlines()))))
            run = []
        if not _FENCE.match(line):
            out.append(line)
    return "\n".join(out)


def measures_of(markdown: str) -> set[str] | None:
    """The measures a reference supports, where its first line says so (``<!-- measures: headings,
    cells -->``: a reference of facts, e.g. only a document's headings); None: all of them."""
    match = _MEASURES.match(markdown)
    return {m.strip() for m in match.group(1).split(",")} if match else None


def reference_headings(markdown: str) -> list[str]:
    """The text of each ATX heading outside code fences, normalised (empty headings skipped)."""
    lines = markdown.splitlines()
    out = []
    for line, fenced in zip(lines, _fenced(lines), strict=True):
        match = None if fenced else _HEADING.match(line)
        if match and heading(match.group(2) or ""):
            out.append(heading(match.group(2) or ""))
    return out


def reference_images(markdown: str) -> int:
    lines = markdown.splitlines()
    return sum(len(_IMAGE.findall(line)) for line, fenced in zip(lines, _fenced(lines), strict=True) if not fenced)


def split_row(line: str) -> list[str]:
    """A pipe table row's cells, raw: split at pipes not escaped by a backslash (``\\|`` is a pipe in
    a cell), the outer pipes dropped."""
    cells: list[str] = []
    cell: list[str] = []
    s = line.strip()
    i = 0
    while i < len(s):
        ch = s[i]
        if ch == "\\" and i + 1 < len(s) and s[i + 1] == "|":
            cell.append("|")
            i += 2
            continue
        if ch == "|":
            cells.append("".join(cell))
            cell = []
        else:
            cell.append(ch)
        i += 1
    cells.append("".join(cell))
    if s.startswith("|"):
        cells = cells[1:]
    if s.endswith("|") and not s.endswith("\\|") and cells:
        cells = cells[:-1]
    return [c.strip() for c in cells]


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]


def reference_tables(markdown: str) -> list[Table]:
    """The tables of a reference, in order. GFM pipe tables, cells raw (escaped pipes read as pipes):
    a header row, a delimiter row of as many ``---``/``:--``/``--:`` cells, then rows up to a blank
    line or the start of another block; a row is cut or padded to the header's width. HTML tables
    (a line opening ``<table``, up to ``</table>``: Markdown's raw HTML): the first row is the header
    where all its cells are ``<th>``."""
    lines = markdown.splitlines()
    fenced = _fenced(lines)
    out: list[Table] = []
    i = 0
    while i < len(lines):
        if not fenced[i] and lines[i].lstrip().lower().startswith("<table"):
            end = i
            while end < len(lines) and not fenced[end] and "</table>" not in lines[end].lower():
                end += 1
            out.append(_html_table("\n".join(lines[i:end + 1])))
            i = end + 1
            continue
        if i + 1 == len(lines) or fenced[i] or "|" not in lines[i] or fenced[i + 1]:
            i += 1
            continue
        header, delimiter = split_row(lines[i]), split_row(lines[i + 1])
        if not (len(header) == len(delimiter) and all(_DELIMITER_CELL.match(c) for c in delimiter)):
            i += 1
            continue
        rows: list[list[str]] = []
        i += 2
        while i < len(lines) and lines[i].strip() and not fenced[i] and not _BLOCK_START.match(lines[i]):
            cells = split_row(lines[i])[:len(header)]
            rows.append(cells + [""] * (len(header) - len(cells)))
            i += 1
        out.append(Table(header, rows))
    return out


def _html_table(text: str) -> Table:
    import lxml.html

    table = lxml.html.fragment_fromstring(text, create_parent="div").find(".//table")
    trs = table.xpath("./tr | ./thead/tr | ./tbody/tr | ./tfoot/tr") if table is not None else []
    grid = [[(" ".join(c.text_content().split()), c.tag == "th") for c in tr if c.tag in ("td", "th")]
            for tr in trs]
    grid = [row for row in grid if row]
    if grid and all(head for _, head in grid[0]):
        return Table([t for t, _ in grid[0]], [[t for t, _ in row] for row in grid[1:]])
    return Table([], [[t for t, _ in row] for row in grid])


def component_text(comp: Any) -> str:
    if comp.kind in ("image", "video"):
        return " ".join(t for t in (comp.alt, comp.caption) if t)
    if comp.kind == "table" and not comp.text:
        lines = [comp.caption] if comp.caption else []
        if comp.header:
            lines.append(" | ".join(comp.header))
        lines.extend(" | ".join(r) for r in comp.rows or [])
        return "\n".join(lines)
    return comp.text or ""


def section_names(page: Any) -> set[str]:
    """Where laminae keeps a heading: a section path entry, the title, or (a heading with nothing
    under it) a paragraph of the heading's text alone."""
    names = {heading(h, False) for comp in page.components for h in comp.section_path or []}
    names |= {heading(c.text, False) for c in page.components if c.kind == "paragraph" and len(c.text) <= 300}
    if page.title:
        names.add(heading(page.title, False))
    return names - {""}


def page_text(page: Any) -> str:
    """laminae's text of a page (see the module docstring), blocks one blank line apart."""
    headings = {normal(h, False) for comp in page.components for h in comp.section_path or []}
    parts = [page.title] if page.title and normal(page.title, False) not in headings else []
    previous: list[str] = []
    for comp in page.components:
        path = list(comp.section_path or [])
        shared = 0
        while shared < min(len(path), len(previous)) and path[shared] == previous[shared]:
            shared += 1
        parts.extend(path[shared:])
        previous = path
        parts.append(component_text(comp))
    return "\n\n".join(p for p in parts if p)


def lcs_length(a: Sequence[object], b: Sequence[object]) -> int:
    """The length of the longest common subsequence of ``a`` and ``b``, exact, in len(a) steps of
    big-integer arithmetic on len(b) bits (Allison-Dix / Crochemore et al.'s bit-vector algorithm)."""
    if len(b) > len(a):
        a, b = b, a
    if not b:
        return 0
    masks: dict[object, int] = {}
    for j, item in enumerate(b):
        masks[item] = masks.get(item, 0) | (1 << j)
    full = (1 << len(b)) - 1
    v = full
    for item in a:
        if (m := masks.get(item)) is not None:
            u = v & m
            v = ((v + u) | (v - u)) & full
    return len(b) - v.bit_count()


def _cells(table: Table | Any) -> Counter[str]:
    """A table's normalised non-empty cells (a reference ``Table``'s read as Markdown)."""
    cells = [*(table.header or []), *(c for row in table.rows or [] for c in row)]
    markdown = isinstance(table, Table)
    return Counter(n for n in (normal(c, markdown) for c in cells) if n)


def _header(cells: Iterable[str] | None, markdown: bool) -> list[str]:
    out = [normal(c, markdown) for c in cells or []]
    return [] if not any(out) else out


@dataclass
class Score:
    """Counts of one document (or summed over several); the shares are properties."""

    ref_words: int = 0
    found: int = 0
    in_order: int = 0
    words: int = 0  # laminae's words
    ref_cells: int = 0
    cells_found: int = 0
    ref_tables: int = 0
    headers_agree: int = 0
    tables: int = 0  # laminae's table components
    ref_headings: int = 0
    headings_found: int = 0
    ref_images: int = 0
    images: int = 0  # laminae's image components
    missed: list[str] = field(default_factory=list)  # the reference words most often missed
    missed_headings: list[str] = field(default_factory=list)

    def __add__(self, other: Score) -> Score:
        counts = {k: v + getattr(other, k) for k, v in asdict(self).items() if isinstance(v, int)}
        return Score(**counts)

    def shares(self) -> dict[str, float | None]:
        """Each measure's share; None where the reference has nothing to measure (no table...). Where
        the reference has words and laminae found none, in order and precision are 0."""
        def share(part: int, whole: int) -> float | None:
            return part / whole if whole else None

        texts = self.ref_words > 0
        return {"words": share(self.found, self.ref_words),
                "in_order": (share(self.in_order, self.found) or 0.0) if texts else None,
                "precision": (share(self.found, self.words) or 0.0) if texts else None,
                "cells": share(self.cells_found, self.ref_cells), "headers": share(self.headers_agree, self.ref_tables),
                "headings": share(self.headings_found, self.ref_headings)}


def score(page: Any | None, reference: str) -> Score:
    """One document's counts; ``page`` None (a document laminae could not parse) finds nothing.
    Where nothing was found, in order and precision are 0 (a failed parse scores 0)."""
    ref_words = words(reference_text(reference))
    tables = reference_tables(reference)
    headings = reference_headings(reference)
    out = Score(ref_words=len(ref_words), ref_tables=len(tables), ref_headings=len(headings),
                ref_cells=sum(sum(_cells(t).values()) for t in tables), ref_images=reference_images(reference))
    if page is None:
        out.missed = [w for w, _ in Counter(ref_words).most_common(10)]
        out.missed_headings = headings
        return out
    got = words(page_text(page))
    ref_count, got_count = Counter(ref_words), Counter(got)
    out.words, out.found = len(got), sum((ref_count & got_count).values())
    out.missed = [w for w, _ in (ref_count - got_count).most_common(10)]
    ids: dict[str, int] = {}
    out.in_order = lcs_length([ids.setdefault(w, len(ids)) for w in ref_words],
                              [ids[w] for w in got if w in ids])
    found_tables = [c for c in page.components if c.kind == "table"]
    out.tables = len(found_tables)
    out.images = sum(1 for c in page.components if c.kind == "image")
    for table in tables:
        want = _cells(table)
        best, best_found = None, -1
        for comp in found_tables:
            shared = sum((want & _cells(comp)).values())
            if shared > best_found:
                best, best_found = comp, shared
        if best is not None and best_found > 0:
            out.cells_found += best_found
            out.headers_agree += _header(best.header, False) == _header(table.header, True)
    names = section_names(page)
    out.missed_headings = [h for h in headings if h not in names]
    out.headings_found = len(headings) - len(out.missed_headings)
    return out


_COUNTS = {"words": ("ref_words", "found", "in_order", "words"), "cells": ("ref_cells", "cells_found"),
           "headers": ("ref_tables", "headers_agree"), "headings": ("ref_headings", "headings_found")}


def restrict(counts: Score, keep: set[str]) -> Score:
    """``counts`` with only the measures in ``keep`` (words stands for in order and precision too)."""
    unknown = keep - set(_COUNTS)
    if unknown:
        raise ValueError(f"unknown measures {sorted(unknown)}: a reference may name {sorted(_COUNTS)}")
    zero: dict[str, Any] = {name: 0 for measure, names in _COUNTS.items() if measure not in keep for name in names}
    zero |= {} if "words" in keep else {"missed": []}
    zero |= {} if "headings" in keep else {"missed_headings": []}
    return replace(counts, **zero)
