"""Nodes and edges of one document: ids, sentences, code lines, table rows, ``contains`` and ``links_to`` rows.

Reads a ``ParsedPage`` and its fetch record; returns plain row dicts for the ``documents``,
``components``, ``subcomponents`` and ``edges`` tables (vectors are added by the embed stage).
Link targets get the id their URL maps to; the link-resolution stage later rewrites it through
redirects and canonical URLs. A node links to a target once, with the number of its anchors
there (``anchors``). A page's image, video and table components and its distinct link targets
are capped (``ParseConfig.max_*``): what is over a cap is dropped, before any picture or video is
fetched, and named in the page's warnings.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from laminae.schemas.ids import content_hash, document_id, edge_id, node_id, normalize_url
from laminae.schemas.search_text import serialize_document
from laminae.tasks.config import ParseConfig
from laminae.tasks.nodes.sentences import split_code, split_sentences
from laminae.tasks.nodes.table_rows import explode_table, table_heading
from laminae.tasks.parse.document import Component, Link, ParsedPage


@dataclass
class DocumentNodes:
    document: dict
    components: list[dict] = field(default_factory=list)
    subcomponents: list[dict] = field(default_factory=list)
    edges: list[dict] = field(default_factory=list)


def _component_identity(comp: Component) -> str:
    if comp.kind == "image":  # a web image by its URL, a PDF's embedded image by its bytes
        return f"{comp.image_url or comp.image_key}\n{comp.text}"
    if comp.kind == "video":
        return f"{comp.video_url}\n{comp.text}"
    return comp.text


def lead_text(page: ParsedPage, limit: int) -> str:
    """The first paragraphs of a page, up to ``limit`` characters."""
    out, size = [], 0
    for comp in page.components:
        if comp.kind != "paragraph" or size >= limit:
            continue
        out.append(comp.text[: limit - size])
        size += len(out[-1])
    return "\n".join(out)


def cap_components(page: ParsedPage, cfg: ParseConfig) -> None:
    """Drop the image, video and table components of ``page`` past its ``max_images``,
    ``max_videos`` and ``max_tables`` (the first ones in document order stay), each breach noted in
    ``page.warnings`` (reason ``too_many_images``... with the count dropped)."""
    caps = {"image": cfg.max_images, "video": cfg.max_videos, "table": cfg.max_tables}
    counts = Counter(comp.kind for comp in page.components)
    over = {kind for kind, cap in caps.items() if counts[kind] > cap}
    if not over:
        return
    seen: Counter[str] = Counter()
    kept = []
    for comp in page.components:
        if comp.kind in over:
            seen[comp.kind] += 1
            if seen[comp.kind] > caps[comp.kind]:
                continue
        kept.append(comp)
    page.components = kept
    for kind in sorted(over):
        page.warnings.append(
            f"too_many_{kind}s: {counts[kind] - caps[kind]} of the page's {counts[kind]} {kind} components were "
            f"dropped, over the cap of {caps[kind]} a page (LAMINAE_PARSE__MAX_{kind.upper()}S); the first "
            f"{caps[kind]} are kept")


def document_row(page: ParsedPage, doc_id: str, fetch, cfg: ParseConfig) -> dict:
    """The layer-0 row, without its vector."""
    lead = lead_text(page, cfg.lead_chars)
    return {
        "id": doc_id,
        "kind": page.kind,
        "url": fetch.url,
        "final_url": fetch.final_url,
        "canonical_url": page.canonical_url or fetch.final_url or fetch.url,
        "title": page.title,
        "summary": None,
        "text": f"{page.title}\n{lead}".strip(),
        # the seed's annotations win over what the document says of itself (front matter)
        "annotations": json.dumps(annotations, sort_keys=True) if (annotations := {**page.meta, **fetch.annotations})
        else None,
        "content_type": fetch.content_type,
        "content_hash": fetch.raw_key,
        "raw_key": fetch.raw_key,
        "n_components": 0,
        "n_subcomponents": 0,
        "warnings": list(page.warnings),
    }


def edge_row(kind: str, src: str, layer: int, dst: str, document: str, *, link: Link | None = None,
             occurrence: int = 0) -> dict:
    """One ``edges`` row: ``contains`` (no link) or ``links_to`` (dst is the link target's own id,
    ``anchors`` the number of the source's anchors to it: 1 until more are counted)."""
    target_url = link.url if link else None
    return {
        "id": edge_id(src, kind, target_url or dst, occurrence),
        "kind": kind,
        "src_id": src,
        "src_layer": layer,
        "dst_id": dst,
        "document_id": document,
        "anchor_text": link.anchor if link else None,
        "target_url": target_url,
        "target_id": dst if link else None,
        "resolved": None if link else True,
        "anchors": 1 if link else None,
    }


class _EdgeMaker:
    """A document's edges: ``contains`` rows, and one ``links_to`` row per (source, target) with
    its anchors counted, for at most ``max_targets`` distinct targets (the first ones met)."""

    def __init__(self, doc_id: str, own_urls: set[str], max_targets: int) -> None:
        self.doc_id = doc_id
        self.own_urls = own_urls
        self.max_targets = max_targets
        self.rows: list[dict] = []
        self.seen: Counter[tuple[str, str, str]] = Counter()
        self.links: dict[tuple[str, str], dict] = {}  # (source, target id) → its links_to row
        self.targets: set[str] = set()
        self.dropped_targets: set[str] = set()
        self.dropped_anchors = 0

    def add(self, kind: str, src: str, layer: int, dst: str, *, link: Link | None = None) -> None:
        key = (src, kind, link.url if link else dst)
        occurrence = self.seen[key]
        self.seen[key] += 1
        self.rows.append(edge_row(kind, src, layer, dst, self.doc_id, link=link, occurrence=occurrence))

    def link(self, src: str, layer: int, link: Link) -> None:
        if normalize_url(link.url) in self.own_urls:
            return  # a page's links to itself are not navigation
        target = document_id(link.url)
        row = self.links.get((src, target))
        if row is not None:
            row["anchors"] += 1
            if not row["anchor_text"] and link.anchor:
                row["anchor_text"] = link.anchor
            return
        if target not in self.targets:
            if len(self.targets) >= self.max_targets:
                self.dropped_targets.add(target)
                self.dropped_anchors += layer <= 1  # a sentence's or row's link is its component's too
                return
            self.targets.add(target)
        self.add("links_to", src, layer, target, link=link)
        self.links[(src, target)] = self.rows[-1]

    def warning(self) -> str | None:
        """The page's warning when links were dropped over the cap (None when none were)."""
        if not self.dropped_targets:
            return None
        return (f"too_many_links: {len(self.dropped_targets)} link targets ({self.dropped_anchors} anchors) were "
                f"dropped, over the cap of {self.max_targets} distinct targets a page "
                f"(LAMINAE_PARSE__MAX_LINKS); the first {self.max_targets} are kept")


def build_nodes(page: ParsedPage, doc_id: str, fetch, cfg: ParseConfig) -> DocumentNodes:
    """Rows for one parsed page; ids are deterministic (see ``laminae.schemas.ids``). The page's
    components are capped first (``cap_components``) and its links while edges are made: each cap
    breached adds a warning to ``page.warnings`` and the document row."""
    cap_components(page, cfg)
    out = DocumentNodes(document_row(page, doc_id, fetch, cfg))
    own = {normalize_url(u) for u in (fetch.url, fetch.final_url, page.canonical_url, *fetch.redirects) if u}
    edges = _EdgeMaker(doc_id, own, cfg.max_links)
    comp_seen: Counter[tuple[str, str]] = Counter()
    sub_seen: Counter[tuple[str, str]] = Counter()

    def sub_id(kind: str, text: str) -> str:
        key = (kind, content_hash(text))
        occurrence = sub_seen[key]
        sub_seen[key] += 1
        return node_id(doc_id, kind, text, occurrence)

    for ordinal, comp in enumerate(page.components):
        identity = _component_identity(comp)
        key = (comp.kind, content_hash(identity))
        cid = node_id(doc_id, comp.kind, identity, comp_seen[key])
        comp_seen[key] += 1
        out.components.append(component_row(
            cid, doc_id, comp.kind, ordinal, comp.text, comp.section_path, caption=comp.caption,
            table_kind=comp.table_kind, table_header=comp.header, table_rows=comp.rows, image_url=comp.image_url,
            image_alt=comp.alt, image_key=comp.image_key, image_mime=comp.image_mime, image_width=comp.width,
            image_height=comp.height, video_url=comp.video_url, video_key=comp.video_key,
            captions_url=comp.captions_url, page=comp.page, bbox=comp.bbox))
        edges.add("contains", doc_id, 0, cid)
        for link in comp.links:
            edges.link(cid, 1, link)
        if comp.kind in ("paragraph", "code"):  # text spans: sentences of prose, runs of lines of code
            kind, spans = (("sentence", split_sentences(comp.text, comp.segments, cfg.language))
                           if comp.kind == "paragraph" else ("lines", split_code(comp.text)))
            for i, (start, end) in enumerate(spans):
                text = comp.text[start:end]
                sid = sub_id(kind, text)
                out.subcomponents.append(subcomponent_row(sid, doc_id, cid, kind, i, text,
                                                          char_start=start, char_end=end))
                edges.add("contains", cid, 1, sid)
                for link in comp.links:
                    if link.start < end and link.end > start:
                        edges.link(sid, 2, link)
        elif comp.kind == "table":
            heading = table_heading(comp.header, comp.caption)
            if heading:
                hid = sub_id("header", heading)
                out.subcomponents.append(subcomponent_row(hid, doc_id, cid, "header", -1, heading, header=comp.header))
                edges.add("contains", cid, 1, hid)
            for seg in explode_table(comp.header, comp.rows or [], comp.table_kind, comp.caption):
                rid = sub_id("row", seg.text)
                out.subcomponents.append(subcomponent_row(rid, doc_id, cid, "row", seg.index, seg.text,
                                                  header=seg.header, cells=seg.cells))
                edges.add("contains", cid, 1, rid)
                for link in comp.links:
                    if link.row == seg.index:
                        edges.link(rid, 2, link)
    out.edges = edges.rows
    dropped = edges.warning()
    if dropped:
        page.warnings.append(dropped)
        out.document["warnings"].append(dropped)
    serialize_document(out.document, out.components, out.subcomponents)
    out.document["n_components"] = len(out.components)
    out.document["n_subcomponents"] = len(out.subcomponents)
    return out


def component_row(cid: str, doc_id: str, kind: str, ordinal: int, text: str, section_path: list[str],
                  **extra) -> dict:
    """One ``components`` row (without its vector); ``extra`` sets the kind's own columns."""
    row = {
        "id": cid,
        "document_id": doc_id,
        "parent_id": doc_id,
        "kind": kind,
        "ordinal": ordinal,
        "section_path": section_path,
        "text": text,
        "content_hash": content_hash(text),
    }
    row.update(dict.fromkeys(COMPONENT_COLUMNS))
    row.update(extra)
    return row


# the columns of a component row that only some kinds set
COMPONENT_COLUMNS = (
    "caption", "table_kind", "table_header", "table_rows", "image_url", "image_alt", "image_key", "image_mime",
    "image_width", "image_height", "detected", "video_url", "video_key", "captions_url", "duration_s", "time_s",
    "time_start", "time_end", "page", "bbox", "search_terms",
)


def subcomponent_row(sid: str, doc_id: str, parent: str, kind: str, ordinal: int, text: str, **extra) -> dict:
    """One ``subcomponents`` row (without its vector); ``extra`` sets the kind's own columns."""
    row = {
        "id": sid,
        "document_id": doc_id,
        "parent_id": parent,
        "kind": kind,
        "ordinal": ordinal,
        "text": text,
        "content_hash": content_hash(text),
        "char_start": None,
        "char_end": None,
        "header": None,
        "cells": None,
        "label": None,
        "score": None,
        "bbox": None,
        "bbox_norm": None,
        "time_start": None,
        "time_end": None,
        "search_terms": None,
    }
    row.update(extra)
    return row


def id_maker(document: str) -> Callable[[str, str], str]:
    """Node ids for one document's new nodes, counting repeated contents."""
    seen: Counter[str] = Counter()

    def make(kind: str, content: str) -> str:
        occurrence = seen[content]
        seen[content] += 1
        return node_id(document, kind, content, occurrence)

    return make
