"""What openpyxl's read-only sheets do not know, read from a sheet's own XML: merged cells and hyperlinks.

Reads one worksheet's XML from the workbook's zip, streamed (a megabyte at a time, never the
whole part), and its relationships part; writes nothing. ``sheet_ranges`` gives the merged
ranges (``<mergeCell ref="A1:C1"/>``) and the cells whose hyperlink leaves the workbook
(``<hyperlink ref="B3" r:id="rId1"/>``, the target in the sheet's .rels); links to places inside
the workbook (``location="Sheet2!A1"``) are not edges.
"""

from __future__ import annotations

import posixpath
import re
import zipfile
import zlib

MERGE = re.compile(rb'<(?:\w+:)?mergeCell\s+ref="([A-Z]{1,3})(\d{1,7})(?::([A-Z]{1,3})(\d{1,7}))?"')
HYPERLINK = re.compile(rb"<(?:\w+:)?hyperlink\s([^>]*)>")
REF = re.compile(rb'\bref="([A-Z]{1,3})(\d{1,7})')
REL_ID = re.compile(rb'\b\w+:id="([^"]+)"')
RELATIONSHIP = re.compile(rb"<(?:\w+:)?Relationship\s([^>]*)>")
ATTRIBUTE = re.compile(rb'(\w+)="([^"]*)"')
CHUNK = 1 << 20
MAX_LINKS = 100_000  # hyperlinks read from one sheet


def sheet_ranges(archive: zipfile.ZipFile, path: str | None) -> tuple[list[tuple[int, int, int, int]],
                                                                        dict[tuple[int, int], str]]:
    """The merged ranges of a sheet ((first row, first column, last row, last column), 1-based) and
    its external hyperlinks ((row, column) 1-based -> target as written); empty where the part cannot
    be read (openpyxl reports a damaged sheet itself)."""
    if not path:
        return [], {}
    path = path.lstrip("/")
    merges: list[tuple[int, int, int, int]] = []
    refs: dict[tuple[int, int], bytes] = {}
    try:
        with archive.open(path) as stream:
            tail = b""
            while chunk := stream.read(CHUNK):
                data = tail + chunk
                end = 0
                for m in MERGE.finditer(data):
                    c1, r1 = column(m.group(1)), int(m.group(2))
                    c2, r2 = (column(m.group(3)), int(m.group(4))) if m.group(3) else (c1, r1)
                    merges.append((min(r1, r2), min(c1, c2), max(r1, r2), max(c1, c2)))
                    end = max(end, m.end())
                for m in HYPERLINK.finditer(data):
                    ref, rid = REF.search(m.group(1)), REL_ID.search(m.group(1))
                    if ref and rid and len(refs) < MAX_LINKS:
                        refs[(int(ref.group(2)), column(ref.group(1)))] = rid.group(1)
                    end = max(end, m.end())
                tail = data[max(end, len(data) - 1000):]
        targets = _external_targets(archive, path) if refs else {}
    except (KeyError, zipfile.BadZipFile, OSError, EOFError, zlib.error):
        return [], {}
    return merges, {cell: targets[rid] for cell, rid in refs.items() if rid in targets}


def _external_targets(archive: zipfile.ZipFile, path: str) -> dict[bytes, str]:
    """Relationship id -> target of a part's external relationships."""
    folder, name = posixpath.split(path)
    rels = posixpath.join(folder, "_rels", name + ".rels")
    if rels not in set(archive.namelist()):
        return {}
    out = {}
    for m in RELATIONSHIP.finditer(archive.read(rels)):
        attrs = dict(ATTRIBUTE.findall(m.group(1)))
        if attrs.get(b"TargetMode") == b"External" and b"Id" in attrs and b"Target" in attrs:
            out[attrs[b"Id"]] = _unescape(attrs[b"Target"].decode("utf-8", errors="replace"))
    return out


def _unescape(text: str) -> str:
    return (text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&apos;", "'")
            .replace("&amp;", "&"))


def column(letters: bytes) -> int:
    """A column's number from its letters (A = 1, AA = 27)."""
    n = 0
    for ch in letters:
        n = n * 26 + ch - 64
    return n
