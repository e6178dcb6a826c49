"""Word's inline content: the runs of a paragraph into text with links, and what they anchor.

Reads a paragraph's XML (runs, ``w:hyperlink``, simple and complex ``HYPERLINK`` fields, content
controls, tracked insertions, ``mc:AlternateContent``, math) and its part's relationships (link
targets, image parts); writes an ``Inline``: the text with its links' character offsets, the
pictures (image components with the image part's bytes and ``wp:docPr/@descr``), the text boxes
(``w:txbxContent``, read later as blocks) and the notes it cites. Tracked deletions, moved-from
text and field instructions are not text. ``block_children`` gives the blocks of any container.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from laminae.tasks.config import ParseConfig
from laminae.tasks.parse.document import Component
from laminae.tasks.parse.office.common import TextBuilder, link_to

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
WP = "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"
A = "http://schemas.openxmlformats.org/drawingml/2006/main"
MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
V = "urn:schemas-microsoft-com:vml"
M = "http://schemas.openxmlformats.org/officeDocument/2006/math"
EMU_PER_PX = 9525
HYPERLINK_FIELD = re.compile(r'^\s*HYPERLINK\s+(?:\\[a-z]\s+)*"([^"]+)"', re.IGNORECASE)
NOTE_KINDS = {"footnoteReference": "footnote", "endnoteReference": "endnote"}
# containers whose children are read as if they stood in their parent
TRANSPARENT = {f"{{{W}}}{t}" for t in ("ins", "smartTag", "customXml", "dir", "bdo", "moveTo")}
SKIPPED = {f"{{{W}}}{t}" for t in ("del", "moveFrom", "instrText", "delText", "rPr", "pPr")}


def w(tag: str) -> str:
    return f"{{{W}}}{tag}"


class Inline:
    """What one paragraph holds besides its text: pictures, text boxes, cited notes."""

    def __init__(self) -> None:
        self.text = TextBuilder()
        self.images: list[Component] = []
        self.boxes: list[tuple[object, object]] = []  # (w:txbxContent, the part it is in)
        self.notes: list[tuple[str, str]] = []  # (footnote | endnote, id)
        self.fields: list[list] = []  # open complex fields: [instruction, start of the result]



class InlineReader:
    """Inline content; mixed into ``DocxReader`` (word.py), whose url, cfg and skipped_drawings it uses."""

    url: str
    cfg: ParseConfig
    skipped_drawings: int

    def inline(self, el, inline: Inline, part) -> None:
        """The text of a paragraph's runs, links, fields and what they anchor, in order."""
        tb = inline.text
        for child in el:
            tag = child.tag
            if not isinstance(tag, str) or tag in SKIPPED:
                continue
            if tag == w("r"):
                self.run(child, inline, part)
            elif tag == w("hyperlink"):
                start = tb.size
                self.inline(child, inline, part)
                rid = child.get(f"{{{R}}}id")
                href = _external_target(part, rid) if rid else None
                self._link(inline, href, start)
            elif tag == w("fldSimple"):
                start = tb.size
                self.inline(child, inline, part)
                found = HYPERLINK_FIELD.match(child.get(w("instr")) or "")
                self._link(inline, found.group(1) if found else None, start)
            elif tag == w("sdt"):
                content = child.find(w("sdtContent"))
                if content is not None:
                    self.inline(content, inline, part)
            elif tag in TRANSPARENT:
                self.inline(child, inline, part)
            elif tag == f"{{{MC}}}AlternateContent":
                self.inline(_alternative(child), inline, part)
            elif tag in (f"{{{M}}}oMath", f"{{{M}}}oMathPara"):
                tb.add("".join(t.text or "" for t in child.iter(f"{{{M}}}t")))

    def run(self, r, inline: Inline, part) -> None:
        tb = inline.text
        for child in r:
            tag = child.tag
            if tag == w("t"):
                tb.add(child.text or "")
            elif tag in (w("tab"), w("ptab")):
                tb.add("\t")
            elif tag in (w("br"), w("cr")):
                if child.get(w("type")) not in ("page", "column"):
                    tb.add("\n")
            elif tag == w("noBreakHyphen"):
                tb.add("-")
            elif tag == w("drawing"):
                self.drawing(child, inline, part)
            elif tag == w("pict") or tag == w("object"):
                self.vml(child, inline, part)
            elif isinstance(tag, str) and tag.startswith(f"{{{W}}}") and tag[len(W) + 2:] in NOTE_KINDS:
                inline.notes.append((NOTE_KINDS[tag[len(W) + 2:]], child.get(w("id")) or ""))
            elif tag == w("fldChar"):
                self.field(child.get(w("fldCharType")), inline)
            elif tag == w("instrText") and inline.fields:
                inline.fields[-1][0] += child.text or ""
            elif tag == f"{{{MC}}}AlternateContent":
                self.run(_alternative(child), inline, part)

    def field(self, kind: str | None, inline: Inline) -> None:
        if kind == "begin":
            inline.fields.append(["", None])
        elif kind == "separate" and inline.fields:
            inline.fields[-1][1] = inline.text.size
        elif kind == "end" and inline.fields:
            instruction, start = inline.fields.pop()
            found = HYPERLINK_FIELD.match(instruction)
            if found and start is not None:
                self._link(inline, found.group(1), start)

    def _link(self, inline: Inline, href: str | None, start: int) -> None:
        tb = inline.text
        if href is None or tb.size <= start:
            return
        anchor = tb.text()[start:]
        link = link_to(self.url, href, anchor, start, tb.size)
        if link is not None:
            tb.links.append(link)

    # -- pictures and text boxes ---------------------------------------------------------------
    def drawing(self, el, inline: Inline, part) -> None:
        boxes = list(el.iter(w("txbxContent")))
        inline.boxes.extend((b, part) for b in boxes if not _inside_box(b, el))
        doc_pr = next(el.iter(f"{{{WP}}}docPr"), None)
        extent = next(el.iter(f"{{{WP}}}extent"), None)
        blips = list(el.iter(f"{{{A}}}blip"))
        for blip in blips:
            alt = None
            if doc_pr is not None:
                alt = (doc_pr.get("descr") or doc_pr.get("title") or "").strip() or None
            size = None
            if extent is not None:
                try:
                    size = (int(extent.get("cx") or 0) // EMU_PER_PX, int(extent.get("cy") or 0) // EMU_PER_PX)
                except ValueError:
                    size = None
            self.picture(blip.get(f"{{{R}}}embed"), alt, size, inline, part)
        if not blips and not boxes:
            self.skipped_drawings += 1

    def vml(self, el, inline: Inline, part) -> None:
        inline.boxes.extend((b, part) for b in el.iter(w("txbxContent")))
        for image in el.iter(f"{{{V}}}imagedata"):
            shape = image.getparent()
            alt = (shape.get("alt") or image.get(f"{{{V}}}title") or image.get("title") or "").strip() or None
            self.picture(image.get(f"{{{R}}}id"), alt, None, inline, part)

    def picture(self, rid: str | None, alt: str | None, size: tuple[int, int] | None, inline: Inline,
                part) -> None:
        target = part.related_parts.get(rid) if rid else None
        if target is None:  # a linked (not embedded) picture: no bytes in the file
            return
        if size is not None and min(size) < self.cfg.min_image_side:
            return
        inline.images.append(Component(
            "image", "", [], alt=alt, image_data=target.blob, image_mime=target.content_type,
            width=size[0] if size else None, height=size[1] if size else None))


def block_children(container) -> Iterator:
    """Paragraphs and tables of a body, cell, note or text box, content controls and custom XML
    opened, in order."""
    for el in container:
        tag = el.tag
        if tag in (w("p"), w("tbl")):
            yield el
        elif tag == w("sdt"):
            content = el.find(w("sdtContent"))
            if content is not None:
                yield from block_children(content)
        elif tag in (w("customXml"), w("ins"), w("moveTo")):
            yield from block_children(el)
        elif tag == f"{{{MC}}}AlternateContent":
            yield from block_children(_alternative(el))


def _inside_box(box, drawing) -> bool:
    """Whether a text box of a drawing sits in another of its text boxes (read with that one)."""
    node = box.getparent()
    while node is not None and node is not drawing:
        if node.tag == w("txbxContent"):
            return True
        node = node.getparent()
    return False


def _alternative(el):
    """The branch of an ``mc:AlternateContent`` to read: its first choice (what Word shows), else its fallback."""
    choice = el.find(f"{{{MC}}}Choice")
    if choice is None:
        choice = el.find(f"{{{MC}}}Fallback")
    return choice if choice is not None else []


def _external_target(part, rid: str) -> str | None:
    rel = part.rels.get(rid)
    return rel.target_ref if rel is not None and rel.is_external else None

