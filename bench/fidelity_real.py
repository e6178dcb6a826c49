"""The fidelity bench on real documents this machine's Debian packages install, against their sources.

Reads installed documents in place (nothing is copied into the project) and writes their references
into a temporary folder, beside links to the documents, then runs ``bench/fidelity.py`` on it (every
option of fidelity.py but ``--generate``/``--generated`` passes through). Each reference comes from
what the document was made from, or from a fact the document states about itself:

- the Shared MIME-info spec as PDF (``shared-mime-info``): its DocBook source, installed beside it
  (``shared-mime-info-spec.xml.gz``), written as Markdown by ``docbook_markdown``: the article's
  title, authors and date, section titles as headings, paragraphs, lists, program listings as code,
  tables as pipe tables; less what the installed PDF does not print (its LaTeX rendering drops the
  four tables, the simple lists and the title block's date: read by hand in its page text). The PDF adds what DocBook
  generates (section numbers, "Section 2.3" for a cross reference, page numbers), which lowers
  precision, not words found.
- Node.js API pages (``nodejs``): the HTML page against its Markdown source (``api/NAME.md``), and
  that Markdown file against itself (a Markdown document is its own reference). The HTML adds what
  the generator writes from the source's metadata comments ("Added in: v10.0.0", history tables).
- libtasn1's manual as PDF (``libtasn1-doc``; its Texinfo source is not installed): the headings of
  its PDF outline, which pdfTeX writes from the source's sectioning; only the headings measure is
  scored (the reference's first line ``<!-- measures: headings -->``, see fidelity.py).

A document whose package is not installed is skipped with a note.

    .venv/bin/python bench/fidelity_real.py [--json /tmp/real.json] [--compare /tmp/real-before.json]
"""

from __future__ import annotations

import gzip
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run as a file: the repository's bench and tests packages
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lxml import etree

from bench import fidelity

MIME = Path("/usr/share/doc/shared-mime-info")
# what the installed PDF's LaTeX rendering (2022) does not print, checked against its page text: the
# four attribute tables, the inode/* types and the contributors (simple lists), the title block's date
PDF_LEFT_OUT = ("informaltable", "simplelist", "date")
NODE = Path("/usr/share/doc/nodejs/api")
NODE_PAGES = ("intl", "path", "dns", "url", "events", "buffer", "fs")  # fs: 26k words
_SKIP: set[str] = set()  # elements a rendering left out, set by docbook_markdown
BLOCKS = {"para", "simpara", "itemizedlist", "orderedlist", "listitem", "programlisting", "screen",
          "informaltable", "table", "simplelist", "bibliomixed"}


def _plain(el: etree._Element) -> str:
    """An element's text without the blocks inside it (a citation in brackets, as DocBook prints it)."""
    parts = [el.text or ""]
    for child in el:
        if isinstance(child.tag, str) and child.tag not in BLOCKS and child.tag not in _SKIP:
            parts.append(_plain(child))
        parts.append(child.tail or "")
    text = "".join(parts)
    return f"[{text}]" if el.tag == "citation" else text


def _markdown(text: str) -> str:
    """Plain text as Markdown text: whitespace collapsed, "<" and "&" escaped (not read as tags)."""
    return " ".join(text.replace("&", "&amp;").replace("<", "&lt;").split())


def _inline(el: etree._Element) -> str:
    return _markdown(_plain(el))


def _para(el: etree._Element, depth: int, out: list[str]) -> None:
    """A paragraph's text, cut where a list or listing sits inside it (DocBook allows that)."""
    parts = [el.text or ""]

    def flush() -> None:
        text = _markdown("".join(parts))
        if text:
            out.append(text)
        parts.clear()

    for child in el:
        if isinstance(child.tag, str) and child.tag in BLOCKS:
            flush()
            holder = etree.Element("holder")
            holder.append(etree.fromstring(etree.tostring(child, with_tail=False)))
            _blocks(holder, depth, out)
        elif isinstance(child.tag, str) and child.tag not in _SKIP:
            parts.append(_plain(child))
        parts.append(child.tail or "")
    flush()


def _blocks(el: etree._Element, depth: int, out: list[str]) -> None:
    for child in el:
        if not isinstance(child.tag, str) or child.tag in _SKIP:
            continue
        tag = child.tag
        if tag in ("sect1", "sect2", "sect3", "sect4", "section", "bibliography"):
            title = child.find("title")
            name = _inline(title) if title is not None else "References"
            out.append("#" * min(depth + 1, 6) + " " + name)
            _blocks(child, depth + 1, out)
        elif tag in ("para", "simpara", "bibliomixed"):
            _para(child, depth, out)
        elif tag in ("itemizedlist", "orderedlist", "simplelist"):
            for item in child.findall("listitem") + child.findall("member"):
                inner: list[str] = []
                _blocks(item, depth, inner)
                inner = inner or [_inline(item)]
                out.append("- " + inner[0])
                out.extend(inner[1:])  # a table or listing inside an item: a block of its own
        elif tag in ("programlisting", "screen"):
            out.append("```\n" + "".join(child.itertext()).strip("\n") + "\n```")
        elif tag in ("informaltable", "table"):
            head = [_inline(e) for e in child.iterfind(".//thead/row/entry")]
            rows = [[_inline(e) for e in row.iterfind("entry")] for row in child.iterfind(".//tbody/row")]
            out.append(fidelity_table(head, rows))
        elif tag not in ("title", "articleinfo"):
            _blocks(child, depth, out)


def fidelity_table(header: list[str], rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(header), "|" + "---|" * len(header), *(line(r) for r in rows)])


def docbook_markdown(source: Path, skip: tuple[str, ...] = ()) -> str:
    """A DocBook 4 article (gzipped XML, internal entities resolved, no DTD fetched) as Markdown,
    without the elements named in ``skip``."""
    _SKIP.clear()
    _SKIP.update(skip)
    parser = etree.XMLParser(load_dtd=False, no_network=True, resolve_entities=True)
    root = etree.fromstring(gzip.decompress(source.read_bytes()), parser)
    info = root.find("articleinfo")
    out = []
    if info is not None:
        out.append("# " + _inline(info.find("title")))
        people = [_inline(e) for e in info.iter("corpauthor", "firstname", "surname", "email", "date")
                  if e.tag not in _SKIP]
        out.append(" ".join(p for p in people if p))
    _blocks(root, 1, out)
    return "\n\n".join(out) + "\n"


def outline_headings(pdf: Path) -> str:
    import pymupdf

    with pymupdf.open(pdf) as doc:
        toc = doc.get_toc()
    return "<!-- measures: headings -->\n\n" + "\n\n".join("#" * min(level, 6) + " " + title
                                                         for level, title, _ in toc) + "\n"


@dataclass
class Real:
    document: Path
    reference: Callable[[], str]
    needs: Path  # the installed file the reference is made from


def documents() -> list[Real]:
    docbook = MIME / "shared-mime-info-spec.xml.gz"
    out = [Real(MIME / "shared-mime-info-spec.pdf", lambda: docbook_markdown(docbook, PDF_LEFT_OUT), docbook)]
    for name in NODE_PAGES:
        source = NODE / f"{name}.md"
        out.append(Real(NODE / f"{name}.html", source.read_text, source))
        out.append(Real(source, source.read_text, source))
    pdf = Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf")
    out.append(Real(pdf, lambda: outline_headings(pdf), pdf))
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="fidelity-real-") as scratch:
        folder = Path(scratch)
        for real in documents():
            if not (real.document.is_file() and real.needs.is_file()):
                print(f"note: {real.document} or {real.needs} is not installed: skipped")
                continue
            where = folder / real.document.parent.name
            where.mkdir(exist_ok=True)
            (where / real.document.name).symlink_to(real.document)
            (where / (real.document.name + fidelity.REF_SUFFIX)).write_text(real.reference(), encoding="utf-8")
        return fidelity.main([str(folder), *argv])


if __name__ == "__main__":
    sys.exit(main())
