"""Serialize: a node → the text it is full-text indexed (and embedded) from, its ``search_text``.

Reads node rows (a document's title, a component's section path and caption, a subcomponent's
parent); writes ``search_text`` into them. The stored ``text`` stays the node's own content (what
a reader shows); ``search_text`` adds where the node sits, as LILaC serializes nodes: the page
title, the section path and the caption, then the content. A table row alone ("Pick #: 417 |
NFL Team: Buffalo Bills") does not say which draft, round or page it belongs to; its search text
does. A node's ``search_terms`` (the unsplit forms of words OCR's spacing repair split: a line
read "Marbleheadbasin" and shown "Marble head basin") follow its content on a line of their own,
so the full-text index finds the node by them; a node without them serializes as before. ``SERIALIZATION`` is recorded in the index metadata: an index serialized by another version
is re-serialized and re-embedded as a whole (``laminae.tasks.storage.upkeep.reembed_index``), never mixed.
"""

from __future__ import annotations

from collections.abc import Iterable

# 1: nodes indexed and embedded from their bare text (laminae before this module);
# 2: search text with context; 3: a table's heading node is embedded from its search text
SERIALIZATION = 3

# what the vectors are computed from: the bare content, except for a table's heading (kind
# "header"), whose vector says where the table sits and what its columns are. Measured on wtq-dev
# (bench/quality.py), MiniLM's dense scores for rows and sentences were no better with the context
# prefix, while the full-text side gained most from it; see docs/benchmarks.md ("Retrieval quality").
EMBED_FIELD = "text"
CONTEXT_EMBEDDED = ("header",)


def context(title: str | None, section_path: Iterable[str] | None, caption: str | None = None) -> str:
    """``title | section > subsection | caption``, leaving out what is empty (and a first heading
    that repeats the title, as a page's ``<h1>`` does)."""
    path = [s for s in (section_path or []) if s]
    if path and title and path[0] == title:
        path = path[1:]
    section = " > ".join(path)
    return " | ".join(part for part in (title, section, caption) if part)


def with_context(prefix: str, text: str | None) -> str:
    return f"{prefix}\n{text or ''}".strip() if prefix else (text or "")


def with_terms(text: str, terms: Iterable[str] | None) -> str:
    """``text`` and, on a line after it, the node's ``search_terms`` (none: ``text`` as it is)."""
    words = " ".join(terms or ())
    return f"{text}\n{words}" if words else text


def component_search_text(comp: dict, title: str | None) -> str:
    """A paragraph, table or image under its page title and section (a table's text and an
    image's text proxy start with their caption already), then its search terms."""
    return with_terms(with_context(context(title, comp.get("section_path")), comp.get("text")),
                      comp.get("search_terms"))


def subcomponent_search_text(sub: dict, parent: dict, title: str | None) -> str:
    """A sentence, row or object under its component's context (rows: with the table caption;
    a table's heading starts with the caption already), then its search terms."""
    caption = parent.get("caption") if parent["kind"] == "table" and sub.get("kind") != "header" else None
    return with_terms(with_context(context(title, parent.get("section_path"), caption), sub.get("text")),
                      sub.get("search_terms"))


def serialize_document(document: dict, components: list[dict], subcomponents: list[dict]) -> None:
    """Set ``search_text`` on a document's rows in place (the document's own is its ``text``:
    title + summary, already a serialization)."""
    title = document.get("title")
    document["search_text"] = document.get("text")
    parents = {}
    for comp in components:
        comp["search_text"] = component_search_text(comp, title)
        parents[comp["id"]] = comp
    for sub in subcomponents:
        parent = parents.get(sub["parent_id"])
        sub["search_text"] = (subcomponent_search_text(sub, parent, title) if parent
                              else with_terms(sub.get("text") or "", sub.get("search_terms")))


def embed_text(row: dict) -> str:
    """What a node's vector is computed from."""
    field = "search_text" if row.get("kind") in CONTEXT_EMBEDDED and row.get("search_text") else EMBED_FIELD
    return row.get(field) or ""
