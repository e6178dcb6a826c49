"""Markdown, plain text and EPUB documents, each with its reference text, written here in code.

``DOCUMENTS`` maps a file name to a function returning ``(the document's bytes, its reference as
Markdown)``: ``# Heading`` lines for headings (as many ``#`` as the level), paragraphs and list
items in reading order, GFM pipe tables with their header row, ``![alt](src)`` for a picture, code
in fences. The files of one folder: ``readme.md`` (a README: YAML front matter, headings of every
level, ATX and setext, lists, a GFM table with inline code and links, fenced and indented code, a
relative link to ``guide.md#install``, an image, a centred HTML logo block), ``guide.md`` (the
second page, linking back to the README), ``notes.txt`` (setext-underlined headings, wrapped
prose, a numbered list and a log of 120 lines with no blank line) and ``book.epub`` (three XHTML
chapters whose spine order differs from their order in the zip, a table in chapter 2, links
between chapters, a picture the book holds, an EPUB 3 navigation document) and ``handbook.epub``
(EPUB 2 as converters write it: an NCX, titles as styled paragraphs, page markers, a table headed
by its first body row, a signature in a ``<footer>``). ``epub_bytes`` builds
other books for the tests (missing parts, encryption, a zip bomb). Writes nothing but the bytes
it returns. Used by tests/unit/test_parse_markup.py, the folder-seed tests and bench/fidelity.py.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from html import escape

TITLE = "Harbour Toolkit"
GUIDE_TITLE = "Installation Guide"
BOOK_TITLE = "Tides of the Northern Harbour"
CHAPTER_TITLES = ("The Old Quay", "Tide Tables", "The Lighthouse Keepers")

README_TABLE = (
    ["Command", "What it does", "See"],
    [["`harbour sync`", "Copies the ledgers from every quay office", "[install](guide.md#install)"],
     ["`harbour check`", "Compares the counts with the spring survey", "[survey](https://example.org/survey)"],
     ["`harbour report`", "Writes the monthly **summary** for the council", "none"]],
)
BOOK_TABLE = (
    ["Month", "High water (m)", "Low water (m)"],
    [["January", "4.2", "0.6"], ["April", "4.8", "0.3"], ["July", "4.1", "0.7"], ["October", "4.6", "0.4"]],
)


def _plain(cell: str) -> str:
    """A Markdown cell's text as a reader sees it (no backticks, stars or link targets)."""
    out = cell.replace("`", "").replace("**", "")
    while "[" in out and "](" in out:
        start = out.index("[")
        mid = out.index("](", start)
        end = out.index(")", mid)
        out = out[:start] + out[start + 1:mid] + out[end + 1:]
    return out


def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def readme() -> tuple[bytes, str]:
    header, rows = README_TABLE
    source = f"""---
title: {TITLE}
description: Ledgers and counts for a small harbour office
tags: [ledgers, survey, harbour]
version: 2.1
---
<p align="center"><img src="images/logo.png" alt="Harbour Toolkit logo" width="240"></p>

# {TITLE}

The toolkit keeps the **ledgers** of a small harbour office in order and compares them with the
counts of the spring survey. Read the [installation guide](guide.md#install) before the first sync.

![Map of the quays](images/quays.png)

## Features

- Copies every ledger from the quay offices each night
- Flags counts that differ from the survey by more than *five* per cent
  - Lists the flagged boats by berth
- Writes a monthly summary for the harbour council

Getting started
---------------

Install the package, then run the first sync from the office computer:

```bash
pip install harbour-toolkit
harbour sync --all
```

### Commands

{md_table(header, rows)}

#### Configuration files

The settings live in a plain file beside the ledgers; an indented example:

    [office]
    name = North Quay
    berths = 42

##### Environment

Set `HARBOUR_HOME` to the folder of the ledgers when it is not the current one.

###### Limits

A ledger of more than ten thousand rows is read in parts.

## Licence

Released under the terms of the harbour council's open licence.
"""
    reference = f"""![Harbour Toolkit logo](images/logo.png)

# {TITLE}

The toolkit keeps the ledgers of a small harbour office in order and compares them with the
counts of the spring survey. Read the installation guide before the first sync.

![Map of the quays](images/quays.png)

## Features

- Copies every ledger from the quay offices each night
- Flags counts that differ from the survey by more than five per cent
- Lists the flagged boats by berth
- Writes a monthly summary for the harbour council

## Getting started

Install the package, then run the first sync from the office computer:

```
pip install harbour-toolkit
harbour sync --all
```

### Commands

{md_table(header, [[_plain(c) for c in row] for row in rows])}

#### Configuration files

The settings live in a plain file beside the ledgers; an indented example:

```
[office]
name = North Quay
berths = 42
```

##### Environment

Set HARBOUR_HOME to the folder of the ledgers when it is not the current one.

###### Limits

A ledger of more than ten thousand rows is read in parts.

## Licence

Released under the terms of the harbour council's open licence.
"""
    return source.encode(), reference


def guide() -> tuple[bytes, str]:
    source = f"""# {GUIDE_TITLE}

Back to the [README](readme.md) for what the toolkit does.

## Install

1. Download the archive from the council's server.
2. Unpack it into the office folder.
3. Run `harbour sync --all` once.

> Keep a copy of the old ledgers until the first sync has finished.

## Upgrade

An upgrade keeps the settings file; see [the limits](readme.md#limits) for large ledgers.
"""
    reference = f"""# {GUIDE_TITLE}

Back to the README for what the toolkit does.

## Install

1. Download the archive from the council's server.
2. Unpack it into the office folder.
3. Run harbour sync --all once.

Keep a copy of the old ledgers until the first sync has finished.

## Upgrade

An upgrade keeps the settings file; see the limits for large ledgers.
"""
    return source.encode(), reference


def log_lines(n: int) -> list[str]:
    events = ("ledger copied from the north quay", "count differs from the survey", "summary written",
              "berth list refreshed", "backup finished without errors")
    return [f"2026-03-{1 + i // 40:02d} 06:{i % 60:02d}:{(7 * i) % 60:02d} INFO job {1000 + i}: {events[i % 5]}"
            for i in range(n)]


def notes() -> tuple[bytes, str]:
    log = log_lines(120)
    prose = ("The office keeps its ledgers in plain files so that any computer can read them, and the\n"
             "toolkit never changes a ledger in place: every sync writes a new copy beside the old one,\n"
             "which is kept for a season before it is archived.")
    source = "\n".join([
        "Harbour office notes", "====================", "",
        prose, "",
        "Routine", "-------", "",
        "1. Open the ledgers of the night.", "2. Compare them with the survey.", "3. Sign the summary.", "",
        "Night log", "---------", "",
        *log, "",
    ])
    reference = "\n".join([
        "# Harbour office notes", "", prose.replace("\n", " "), "",
        "## Routine", "", "1. Open the ledgers of the night.", "2. Compare them with the survey.",
        "3. Sign the summary.", "",
        "## Night log", "", *log, "",
    ])
    return source.encode(), reference


# -- EPUB ------------------------------------------------------------------------------------------
def png(width: int = 64, height: int = 48) -> bytes:
    """A small PNG picture (pymupdf draws it)."""
    import pymupdf

    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, width, height), False)
    pix.clear_with(180)
    return pix.tobytes("png")


def xhtml(title: str, body: str) -> bytes:
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n'
            f'<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">\n'
            f'<head><title>{escape(title)}</title><link rel="stylesheet" href="style.css" type="text/css"/>'
            f"</head>\n<body>\n{body}\n</body>\n</html>\n").encode()


def epub_bytes(title: str, chapters: list[tuple[str, bytes]], *, spine: list[str] | None = None,
               extra: dict[str, bytes] | None = None, nav: bool = True, container: bool = True,
               lang: str = "en", ncx: dict[str, str] | None = None) -> bytes:
    """An EPUB 3 zip: ``mimetype`` first and stored, the container, ``OEBPS/content.opf`` with a
    manifest and a spine (``spine``: chapter names in reading order, default their given order),
    the chapters (name, XHTML bytes) under ``OEBPS/``, a nav document, an EPUB 2 ``toc.ncx`` when
    ``ncx`` (chapter name -> label) and ``extra`` members (path in the zip -> bytes; pictures
    under ``OEBPS/`` enter the manifest)."""
    extra = extra or {}
    names = [name for name, _ in chapters]
    order = names if spine is None else spine
    items = [f'<item id="c{i}" href="{name}" media-type="application/xhtml+xml"/>' for i, name in enumerate(names)]
    if nav:
        items.append('<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>')
    for i, path in enumerate(p for p in extra if p.startswith("OEBPS/") and p.endswith(".png")):
        items.append(f'<item id="img{i}" href="{path[len("OEBPS/"):]}" media-type="image/png"/>')
    spine_toc = ' toc="ncx"' if ncx else ""
    if ncx:
        items.append('<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>')
    refs = "".join(f'<itemref idref="c{names.index(name)}"/>' for name in order)
    if nav:
        refs = '<itemref idref="nav" linear="no"/>' + refs
    opf = (f'<?xml version="1.0" encoding="utf-8"?>\n<package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
           f'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
           f'<dc:identifier id="id">urn:uuid:laminae-test</dc:identifier><dc:title>{escape(title)}</dc:title>'
           f"<dc:language>{lang}</dc:language></metadata><manifest>{''.join(items)}</manifest>"
           f"<spine{spine_toc}>{refs}</spine></package>")
    toc = "".join(f'<li><a href="{name}">{escape(name)}</a></li>' for name in order)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        if container:
            z.writestr("META-INF/container.xml",
                       '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:'
                       'container"><rootfiles><rootfile full-path="OEBPS/content.opf" '
                       'media-type="application/oebps-package+xml"/></rootfiles></container>')
        # the chapters go into the zip in reverse: the spine, not the zip, gives the reading order
        for name, data in reversed(chapters):
            z.writestr(f"OEBPS/{name}", data)
        z.writestr("OEBPS/content.opf", opf)
        if nav:
            z.writestr("OEBPS/nav.xhtml", xhtml("Contents", f'<nav epub:type="toc"><h1>Contents</h1><ol>{toc}</ol></nav>'))
        if ncx:
            points = "".join(f'<navPoint id="p{i}" playOrder="{i + 1}"><navLabel><text>{escape(label)}</text>'
                             f'</navLabel><content src="{name}"/></navPoint>' for i, (name, label) in enumerate(ncx.items()))
            z.writestr("OEBPS/toc.ncx", '<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" '
                       f'version="2005-1"><navMap>{points}</navMap></ncx>')
        for path, data in extra.items():
            z.writestr(path, data)
    return buf.getvalue()


def book() -> tuple[bytes, str]:
    one, two, three = CHAPTER_TITLES
    header, rows = BOOK_TABLE
    table = ("<table><caption>Mean tides at the old quay</caption><thead><tr>"
             + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr></thead><tbody>"
             + "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
             + "</tbody></table>")
    chapters = [
        ("chapter1.xhtml", xhtml(one, f"""<section epub:type="chapter"><h1>{one}</h1><a id="start"/>
<p>The old quay was built of granite blocks in the years after the great storm, and its stones still carry the
marks of the masons who cut them.</p>
<h2>Masons and their marks</h2>
<p>Each mason cut a sign into the stones he laid; the signs are listed in the
<a href="chapter2.xhtml#tables">tide tables chapter</a> beside the years of the highest water.</p>
<figure><img src="images/quay.png" alt="The old quay at low water"/><figcaption>The old quay at low water, seen
from the lighthouse.</figcaption></figure>
</section>""")),
        ("chapter2.xhtml", xhtml(two, f"""<section epub:type="chapter"><h1>{two}</h1>
<p id="tables">The harbour master measured the water twice a day for forty years.</p>
{table}
<h2>Reading the tables</h2>
<p>High water comes about fifty minutes later each day; the keepers of
<a href="chapter3.xhtml">the lighthouse</a> kept the same clock.</p>
</section>""")),
        ("chapter3.xhtml", xhtml(three, f"""<section epub:type="chapter"><h1>{three}</h1>
<p>Three families kept the light in turn, and the last keeper left the tower when the lamp was made
automatic.</p>
<ul><li>The Carrow family, who lit the first lamp</li><li>The Penrose family, who kept it through the war</li>
<li>The Trevail family, the last keepers</li></ul>
<p>Their logbooks begin on <a href="chapter1.xhtml#start">the old quay</a> and are kept at the
<a href="https://example.org/archive">county archive</a>.</p>
</section>""")),
    ]
    data = epub_bytes(BOOK_TITLE, chapters, spine=["chapter1.xhtml", "chapter2.xhtml", "chapter3.xhtml"],
                      extra={"OEBPS/images/quay.png": png(), "OEBPS/style.css": b"p { margin: 0 }"})
    reference = f"""# {one}

The old quay was built of granite blocks in the years after the great storm, and its stones still carry the
marks of the masons who cut them.

## Masons and their marks

Each mason cut a sign into the stones he laid; the signs are listed in the tide tables chapter beside the years
of the highest water.

![The old quay at low water](images/quay.png)

The old quay at low water, seen from the lighthouse.

# {two}

The harbour master measured the water twice a day for forty years.

Mean tides at the old quay

{md_table(header, rows)}

## Reading the tables

High water comes about fifty minutes later each day; the keepers of the lighthouse kept the same clock.

# {three}

Three families kept the light in turn, and the last keeper left the tower when the lamp was made automatic.

- The Carrow family, who lit the first lamp
- The Penrose family, who kept it through the war
- The Trevail family, the last keepers

Their logbooks begin on the old quay and are kept at the county archive.
"""
    return data, reference


HANDBOOK_TABLE = (["Berth", "Length (m)", "Depth (m)"], [["North 1", "42", "6.5"], ["North 2", "38", "5.9"],
                                                        ["South 1", "55", "8.1"]])


def handbook() -> tuple[bytes, str]:
    """An EPUB 2 book as converters write them: an NCX table of contents and no nav document,
    chapter titles as styled paragraphs (no heading elements, so the NCX's labels name them), page
    number markers, self-closed anchors, a table whose first body row is its header, and a
    letter's signature in a ``<footer>``."""
    header, rows = HANDBOOK_TABLE
    table = ("<table><tbody><tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr>"
             + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows) + "</tbody></table>")
    chapters = [
        ("part1.html", xhtml("Part 1", """<div class="chapter"><p class="title">Berths and moorings</p>
<span class="pagenum" id="page_1"/><p class="calibre1">Every boat that stays longer than a night is given a berth
by the harbour office, which keeps a list of the berths and the depth of water at each.</p>
""" + table + """
<p class="calibre1">Depths are measured at the lowest tide of the year.</p></div>""")),
        ("part2.html", xhtml("Part 2", """<div class="chapter"><p class="title">A letter from the council</p>
<article><p class="calibre1">The council thanks the harbour office for the new list of berths, which has
made the summer visitors' arrival far easier to plan.</p><footer><p>Yours faithfully, the clerk of the
council</p></footer></article></div>""")),
    ]
    ncx = {"part1.html": "Berths and moorings", "part2.html": "A letter from the council"}
    data = epub_bytes("Harbour Handbook", chapters, nav=False, ncx=ncx)
    reference = f"""# Berths and moorings

Berths and moorings

Every boat that stays longer than a night is given a berth by the harbour office, which keeps a list of the
berths and the depth of water at each.

{md_table(header, rows)}

Depths are measured at the lowest tide of the year.

# A letter from the council

A letter from the council

The council thanks the harbour office for the new list of berths, which has made the summer visitors' arrival
far easier to plan.

Yours faithfully, the clerk of the council
"""
    return data, reference


DOCUMENTS: dict[str, Callable[[], tuple[bytes, str]]] = {
    "readme.md": readme,
    "guide.md": guide,
    "notes.txt": notes,
    "book.epub": book,
    "handbook.epub": handbook,
}
