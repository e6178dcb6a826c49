"""Parse a Word document (DOCX) into components, with python-docx: its body in document order.

Reads the DOCX's bytes; returns a ``ParsedPage``. python-docx opens the package (parts,
relationships, styles, core properties); the body's XML is walked here, so paragraphs and tables
stay interleaved as they are written, and what python-docx's text leaves out is read too:

- headings: paragraph styles "Title" (level 0) and "Heading 1".."Heading 9", or an outline level
  on the paragraph or its style, give the section paths; a heading nothing is written under
  becomes a paragraph of its own;
- lists (numbering on the paragraph or its style, or a "List ..." style): consecutive items are one
  paragraph, an item a segment;
- tables (``word_tables.py``): merged cells repeated into each cell they span, header rows from
  ``w:tblHeader`` else the first row, nested tables their own components after their table;
- pictures (``w:drawing`` and VML ``w:pict``): image components with the bytes of the related image
  part, the alt text of ``wp:docPr/@descr`` (else its title), a "Caption" paragraph below;
- hyperlinks (``w:hyperlink`` to an external relationship, ``HYPERLINK`` fields) as links with
  character offsets; links to bookmarks inside the document are not edges (runs, fields and what
  they anchor: ``word_inline.py``); a drop cap's letter joins the paragraph it begins;
- text boxes (``w:txbxContent``) read as paragraphs after the paragraph that anchors them (only
  one branch of ``mc:AlternateContent``, so a box is never read twice);
- footnotes and endnotes (footnotes.xml, endnotes.xml: python-docx has no API for them) right after
  the paragraph citing them, in its section: a note read next to what it annotates keeps that
  section's headings, which a "Footnotes" section at the end would lose; notes nobody cites are
  read at the end under "Footnotes" / "Endnotes", so none is lost;
- running headers and footers are dropped, as a PDF's are: page furniture (a company name, a
  classification, page numbers) repeated on every page, not the document's text. Comments and
  tracked deletions are not the document's text either; tracked insertions are.

Title: the core properties' title, else the first Title or Heading 1, else the file name. A file
that is not a DOCX, is damaged, encrypted or a zip bomb raises ``ParseError``.
"""

from __future__ import annotations

import io
import re

from laminae.tasks.config import OcrConfig, ParseConfig
from laminae.tasks.parse.document import Component, Link, ParsedPage, ParseError
from laminae.tasks.parse.html import image_text_proxy
from laminae.tasks.parse.office.common import Outline, file_title, list_components, open_office_zip
from laminae.tasks.parse.office.word_inline import Inline, InlineReader, block_children, w
from laminae.tasks.parse.office.word_tables import TableReader

RT_FOOTNOTES = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/footnotes"
RT_ENDNOTES = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/endnotes"
HEADING_STYLE = re.compile(r"^heading ([1-9])$")
PROPERTIES = ("title", "author", "subject", "keywords", "comments", "category", "created", "modified")
META_KEYS = {"comments": "description"}


def parse_docx(body: bytes, url: str, cfg: ParseConfig, ocr: OcrConfig, charset: str | None) -> ParsedPage:
    """A Word document's components in document order (see the module docstring)."""
    open_office_zip(body, "docx", cfg).close()
    try:
        import docx

        document = docx.Document(io.BytesIO(body))
        props = document.core_properties
        props_read = {key: getattr(props, key) for key in PROPERTIES}
    except Exception as exc:  # python-docx raises KeyError, ValueError, lxml errors... on a damaged package
        raise ParseError(f"python-docx cannot open the DOCX file: {type(exc).__name__}: {exc}",
                         "unparsable_docx") from None
    if document.element.tag != w("document") or document.element.find(w("body")) is None:
        raise ParseError(f"the DOCX file's main part is a {document.element.tag}, not a WordprocessingML document "
                         "with a body (a Strict Open XML document? save it as Word's default format)",
                         "unparsable_docx")
    reader = DocxReader(document, url, cfg)
    reader.read()
    first = next((text for level, text in reader.headings if level <= 1), None)
    title = (props_read["title"] or "").strip() or first or file_title(url)
    for comp in reader.components:
        if comp.kind == "image":
            comp.text = image_text_proxy(comp, title)
    meta = {META_KEYS.get(key, key): str(value).strip() for key, value in props_read.items()
            if key != "title" and value not in (None, "")}
    components = [c for c in reader.components
                  if c.kind != "paragraph" or len(c.text) >= max(cfg.min_paragraph_chars, 1)]
    return ParsedPage(url=url, title=title, canonical_url=None, lang=_language(document), components=components,
                      warnings=reader.warnings, kind="docx", meta=meta)


def _language(document) -> str | None:
    """The language the document's default run properties declare ("en-GB"), if any."""
    defaults = document.styles.element.find(f"{w('docDefaults')}/{w('rPrDefault')}/{w('rPr')}/{w('lang')}")
    return (defaults.get(w("val")) or None) if defaults is not None else None


class StyleInfo:
    """What a paragraph style says of its paragraphs, its base styles' included."""

    def __init__(self, name: str, level: int | None, numbered: bool) -> None:
        self.name = name
        self.level = level
        self.numbered = numbered


def read_styles(document) -> dict[str, StyleInfo]:
    """Paragraph style id -> name (lower case), heading level and numbering, following ``basedOn``."""
    raw: dict[str, tuple[str, str | None, int | None, bool]] = {}
    for el in document.styles.element.iterfind(w("style")):
        if el.get(w("type")) != "paragraph":
            continue
        name_el, based, ppr = el.find(w("name")), el.find(w("basedOn")), el.find(w("pPr"))
        outline = ppr.find(w("outlineLvl")) if ppr is not None else None
        num = ppr.find(w("numPr")) if ppr is not None else None
        raw[el.get(w("styleId")) or ""] = (
            (name_el.get(w("val")) or "").lower() if name_el is not None else "",
            based.get(w("val")) if based is not None else None,
            _outline_level(outline),
            num is not None and _num_id(num) != "0")
    out: dict[str, StyleInfo] = {}
    for style_id, (name, _, _, _) in raw.items():
        level, numbered, seen, current = None, None, set(), style_id
        while current in raw and current not in seen:
            seen.add(current)
            _, based, own_level, own_num = raw[current]
            level = own_level if level is None else level
            numbered = numbered or own_num
            current = based
        heading = HEADING_STYLE.match(name)
        if name == "title":
            level = 0
        elif heading:
            level = int(heading.group(1))
        out[style_id] = StyleInfo(name, level, bool(numbered))
    return out


def _outline_level(el) -> int | None:
    if el is None:
        return None
    try:
        value = int(el.get(w("val")) or "9")
    except ValueError:
        return None
    return value + 1 if 0 <= value < 9 else None


def _num_id(num_pr) -> str | None:
    num_id = num_pr.find(w("numId"))
    return num_id.get(w("val")) if num_id is not None else None


class DocxReader(InlineReader, TableReader):
    """The walk over one document's body; components in order, warnings, headings met."""

    def __init__(self, document, url: str, cfg: ParseConfig) -> None:
        self.document = document
        self.url = url
        self.cfg = cfg
        self.styles = read_styles(document)
        self.components: list[Component] = []
        self.warnings: list[str] = []
        self.headings: list[tuple[int, str]] = []
        self.outline = Outline(self.components)
        self.items: list[tuple[str, list[Link]]] = []  # the list being gathered
        self.after_items: list[Inline] = []  # what the gathered list's items anchor
        self.caption: str | None = None  # a "Caption" paragraph waiting for its table
        self.drop_cap = ""  # a drop cap's letter, framed apart from the rest of its word
        self.notes = {kind: self._notes(document.part, rel) for kind, rel in
                      (("footnote", RT_FOOTNOTES), ("endnote", RT_ENDNOTES))}
        self.notes_read: set[tuple[str, str]] = set()
        self.skipped_drawings = 0

    # -- the walk ------------------------------------------------------------------------------
    def read(self) -> None:
        self.blocks(self.document.element.body, self.document.part)
        self.flush()
        for kind, (_, notes) in self.notes.items():
            left = [nid for nid in notes if (kind, nid) not in self.notes_read]
            if left:
                self.outline.close()
                self.outline.heading(1, f"{kind.capitalize()}s")
                for nid in left:
                    self.note(kind, nid)
                self.flush()
        self.outline.close()
        if self.skipped_drawings:
            self.warnings.append(f"drawing_skipped: {self.skipped_drawings} charts or diagrams are not read "
                                 "(only pictures and text boxes are)")

    def blocks(self, container, part) -> None:
        for el in block_children(container):
            if el.tag == w("p"):
                self.paragraph(el, part)
            elif el.tag == w("tbl"):
                self.flush(keep_caption=True)
                self.table(el, part)

    def emit(self, comp: Component) -> None:
        comp.section_path = self.outline.path()
        self.outline.emit(comp)

    def flush(self, keep_caption: bool = False) -> None:
        """Write the list being gathered, then what its items anchor, and a caption left waiting
        (unless a table follows: the caption is the table's)."""
        if self.caption is not None and not keep_caption:
            caption, self.caption = self.caption, None
            self.emit(Component("paragraph", caption, []))
        if self.items:
            for comp in list_components(self.items, self.outline.path()):
                self.outline.emit(comp)
            self.items = []
        pending, self.after_items = self.after_items, []
        for inline in pending:
            self.anchored(inline)

    def paragraph(self, p, part) -> None:
        style = self.style_of(p)
        inline = Inline()
        inline.text.add(self.drop_cap)
        self.drop_cap = ""
        self.inline(p, inline, part)
        frame = p.find(f"{w('pPr')}/{w('framePr')}")
        if frame is not None and frame.get(w("dropCap")) in ("drop", "margin"):
            self.drop_cap = inline.text.text().strip()
            return
        text, links = inline.text.finish()
        level = self.level_of(p, style)
        if level is not None and text:
            self.flush()
            heading = " ".join(text.split())
            self.headings.append((level, heading))
            self.outline.heading(level, heading)
            self.anchored(inline)
            return
        if self.is_list_item(p, style) and text:
            if self.caption is not None:
                self.flush()
            self.items.append((text, links))
            self.after_items.append(inline)
            return
        self.flush()
        if style is not None and style.name == "caption" and text:
            last = self.components[-1] if self.components else None
            if last is not None and last.kind == "image" and last.caption is None:
                for comp in reversed(self.components):
                    if comp.kind != "image" or comp.caption is not None:
                        break
                    comp.caption = text
            else:
                self.caption = text
            self.anchored(inline)
            return
        if text:
            self.emit(Component("paragraph", text, [], links))
        self.anchored(inline)

    def anchored(self, inline: Inline) -> None:
        """A paragraph's pictures, text boxes and cited notes, after it."""
        for comp in inline.images:
            self.emit(comp)
        for box, part in inline.boxes:
            self.blocks(box, part)
            self.flush()
        for kind, nid in inline.notes:
            self.note(kind, nid)

    def note(self, kind: str, nid: str) -> None:
        part, notes = self.notes[kind]
        if (kind, nid) in self.notes_read or nid not in notes:
            return
        self.notes_read.add((kind, nid))
        self.blocks(notes[nid], part)
        self.flush()

    # -- styles --------------------------------------------------------------------------------
    def style_of(self, p) -> StyleInfo | None:
        ppr = p.find(w("pPr"))
        style = ppr.find(w("pStyle")) if ppr is not None else None
        if style is not None:
            return self.styles.get(style.get(w("val")) or "")
        return self.styles.get(self.default_style_id)

    @property
    def default_style_id(self) -> str:
        if not hasattr(self, "_default_style"):
            el = next((s for s in self.document.styles.element.iterfind(w("style"))
                       if s.get(w("type")) == "paragraph" and s.get(w("default")) in ("1", "true")), None)
            self._default_style = el.get(w("styleId")) if el is not None else ""
        return self._default_style

    def level_of(self, p, style: StyleInfo | None) -> int | None:
        ppr = p.find(w("pPr"))
        own = _outline_level(ppr.find(w("outlineLvl"))) if ppr is not None else None
        return own if own is not None else (style.level if style else None)

    def is_list_item(self, p, style: StyleInfo | None) -> bool:
        ppr = p.find(w("pPr"))
        num = ppr.find(w("numPr")) if ppr is not None else None
        if num is not None:
            return _num_id(num) != "0"
        return style is not None and (style.numbered or style.name.startswith("list"))

    # -- notes ---------------------------------------------------------------------------------
    def _notes(self, doc_part, reltype: str) -> tuple[object, dict[str, object]]:
        """A notes part and its notes by id (separators left out)."""
        from docx.oxml.parser import parse_xml

        part = next((rel.target_part for rel in doc_part.rels.values()
                     if rel.reltype == reltype and not rel.is_external), None)
        if part is None:
            return doc_part, {}
        try:
            root = parse_xml(part.blob)
        except Exception as exc:  # lxml's XMLSyntaxError on a damaged part: the body is still read
            self.warnings.append(f"notes_unreadable: {reltype.rsplit('/', 1)[-1]}: {type(exc).__name__}: {exc}")
            return doc_part, {}
        notes = {}
        for note in root:
            if note.get(w("type")) in (None, "normal") and note.get(w("id")) is not None:
                notes[note.get(w("id"))] = note
        return part, notes
