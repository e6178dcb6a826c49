"""Lists and definition lists: items become segments of paragraphs of about ``LIST_CHUNK_CHARS``;
a definition list's items are "term: description", each its own component beyond a short list,
a structured description's term the section of what it holds.

Reads ``<ul>``, ``<ol>`` and ``<dl>`` elements; writes paragraphs through the walker's ``emit``.
"""

from __future__ import annotations

from lxml import etree

from laminae.tasks.parse.document import Component, Link, items_paragraph
from laminae.tasks.parse.html.chrome import has_structure, should_skip, tag_of
from laminae.tasks.parse.html.text import TextBuilder, labelled

LIST_CHUNK_CHARS = 2000  # a list's items are grouped into components up to this size
SHORT_DL_CHARS = 1000  # a definition list up to this size (plain descriptions only) stays one component
TERM_LEVEL = 7  # a definition's term is a section below every heading level
MAX_TERM_SECTION_CHARS = 600


class ListReader:
    """Lists and definition lists; mixed into ``HtmlParser`` (walker.py), whose state (consumed,
    sections, dl_depth) and walk (inline, block, emit, flush_prefix, set_prefix, table) it uses."""

    def list_(self, el: etree._Element) -> None:
        """A list (nested lists flattened): its items, each a segment, in components of up to
        ``LIST_CHUNK_CHARS``; an item that holds blocks (code, a table, headings, paragraphs) is
        read as blocks where it stands."""
        items: list[tuple[str, list[Link]]] = []
        tables: list[etree._Element] = []
        size = 0

        def emit_items() -> None:
            nonlocal size
            if items:
                self.emit_items(items)
                items.clear()
                size = 0

        def walk(lst: etree._Element) -> None:
            nonlocal size
            for item in lst:
                tag = item.tag if isinstance(item.tag, str) else ""
                if tag in ("ul", "ol") and not should_skip(item):  # a list straight in a list
                    walk(item)
                    continue
                if tag != "li" or should_skip(item) or item in self.consumed:
                    continue
                if has_structure(item):
                    emit_items()
                    self.block(item)
                    continue
                tb = TextBuilder()
                tb.add(item.text)
                sublists = []
                for child in item:
                    ctag = child.tag if isinstance(child.tag, str) else ""
                    if ctag in ("ul", "ol") and not should_skip(child):
                        sublists.append(child)
                        tb.add(child.tail)
                    else:
                        self.inline(child, tb, nested_tables=tables)
                text, links = tb.finish()
                if text.strip():
                    if items and size + len(text) > LIST_CHUNK_CHARS:
                        emit_items()
                    items.append((text, links))
                    size += len(text) + 1
                for sub in sublists:
                    walk(sub)

        walk(el)
        emit_items()
        for table in tables:
            self.table(table)

    def emit_items(self, items: list[tuple[str, list[Link]]]) -> None:
        """One paragraph of items, each a segment (sentences are split item by item)."""
        self.emit(items_paragraph(items, self.section_path()))

    def definitions(self, el: etree._Element) -> None:
        """A definition list: items of term(s) + description(s). A short list of plain descriptions
        is one component (an item a segment); otherwise each item is a component of its own, and
        an item whose description holds blocks (an API entry: paragraphs, code, parameters) puts
        its term in the section path of those blocks and before the first of them."""
        groups = _definition_groups(el)
        if not groups:
            return
        structured = [any(has_structure(dd) for dd in dds) for _, dds in groups]
        tables: list[etree._Element] = []
        if not any(structured) and len(el.text_content()) <= SHORT_DL_CHARS:
            items = [item for dts, dds in groups if (item := self.definition_text(dts, dds, tables))[0].strip()]
            if items:
                self.emit_items(items)
        else:
            self.dl_depth += 1
            for (dts, dds), rich in zip(groups, structured, strict=True):
                if rich:
                    self.definition_blocks(dts, dds)
                else:
                    text, links = self.definition_text(dts, dds, tables)
                    if text.strip():
                        self.emit(Component("paragraph", text, self.section_path(), links))
            self.dl_depth -= 1
        for table in tables:
            self.table(table)

    def term_text(self, dts: list[etree._Element], tb: TextBuilder, tables: list[etree._Element]) -> None:
        for i, dt in enumerate(dts):
            if i and tb.length:
                tb.pending_space = False
                tb.add(", ")
            self.inline(dt, tb, with_tail=False, nested_tables=tables)

    def definition_text(self, dts: list[etree._Element], dds: list[etree._Element],
                        tables: list[etree._Element]) -> tuple[str, list[Link]]:
        """"term: description" (terms joined by commas; no colon after a term that ends in one)."""
        tb = TextBuilder()
        self.term_text(dts, tb, tables)
        term, term_links = tb.finish()
        tb = TextBuilder()
        for dd in dds:
            tb.space()
            self.inline(dd, tb, with_tail=False, nested_tables=tables)
        return labelled(term, term_links, *tb.finish())

    def definition_blocks(self, dts: list[etree._Element], dds: list[etree._Element]) -> None:
        tb = TextBuilder()
        tables: list[etree._Element] = []
        self.term_text(dts, tb, tables)
        term, links = tb.finish()
        saved = list(self.sections)
        if term.strip():
            self.flush_prefix()
            if len(term) <= MAX_TERM_SECTION_CHARS:  # a "term" that is a paragraph is no section name
                self.open_section(TERM_LEVEL + self.dl_depth, term.strip())
            self.set_prefix(term, links)
        for dd in dds:
            self.block(dd)
        self.flush_prefix()
        self.restore_sections(saved)
        for table in tables:
            self.table(table)


def _definition_groups(dl: etree._Element) -> list[tuple[list[etree._Element], list[etree._Element]]]:
    """(terms, descriptions) of a ``<dl>``, in order; ``<div>`` wrappers around pairs are looked into."""
    groups: list[tuple[list[etree._Element], list[etree._Element]]] = []

    def walk(parent: etree._Element) -> None:
        for child in parent:
            tag = tag_of(child)
            if not tag or should_skip(child):
                continue
            if tag == "div":
                walk(child)
            elif tag == "dt":
                if not groups or groups[-1][1]:
                    groups.append(([], []))
                groups[-1][0].append(child)
            elif tag == "dd":
                if not groups:
                    groups.append(([], []))
                groups[-1][1].append(child)

    walk(dl)
    return groups
