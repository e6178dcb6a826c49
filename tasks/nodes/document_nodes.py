"""Nodes and edges of one document: ids, sentences, code lines, table rows, ``contains`` and ``links_to`` rows.

Reads a ``ParsedPage`` and its fetch record; returns plain row dicts for the ``documents``,
``components``, ``subcomponents`` and ``edges`` tables (vectors are added by the embed stage).
Link targets get the id their URL maps to; the link-resolution stage later rewrites it through
redirects and canonical URLs. A node links to a target once, with the number of its anchors
there (``anchors``). A page's work is bounded (``ParseConfig.max_*``): its image, video and table
components, its components of every kind together, its subcomponents, the characters of code split
into runs of lines and its distinct link targets are capped, the first ones in document order kept;
what is over a cap is dropped, before any picture or video is fetched, and named with its count in
the page's warnings.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

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
    ``max_videos`` and ``max_tables``, then all components past ``max_components`` (the first ones
    in document order stay), each breach noted in ``page.warnings`` (reason ``too_many_images``...,
    ``too_many_components``, with the count dropped)."""
    caps = {"image": cfg.max_images, "video": cfg.max_videos, "table": cfg.max_tables}
    counts = Counter(comp.kind for comp in page.components)
    over = {kind for kind, cap in caps.items() if counts[kind] > cap}
    if over:
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
    total, cap = len(page.components), cfg.max_components
    if total > cap:
        page.components = page.components[:cap]
        page.warnings.append(
            f"too_many_components: {total - cap} of the page's {total} components were dropped, over the cap of "
            f"{cap} a page (LAMINAE_PARSE__MAX_COMPONENTS); the first {cap} are kept")


class _Sub(NamedTuple):
    """A subcomponent to be: its kind, ordinal, text and columns, and what picks its links: its
    characters in the component (a sentence's, a run of lines') or its table row."""

    kind: str
    ordinal: int
    text: str
    columns: dict
    span: tuple[int, int] | None = None
    row: int | None = None


class _Budget:
    """What one page may still add: subcomponents (``max_subcomponents``) and characters of code
    split into runs of lines (``max_code_lines_chars``), the first ones in document order; what
    is past either is counted for the page's warnings."""

    def __init__(self, cfg: ParseConfig) -> None:
        self.cfg = cfg
        self.subcomponents = 0
        self.dropped = 0
        self.code_chars = 0  # of the code components split into lines so far
        self.code_full = False  # a code component went past max_code_lines_chars: the rest are not split
        self.code_components = 0
        self.code_cut: list[int] = []  # the characters of each code component left unsplit
        self.runs_not_made = 0

    def lines(self, text: str) -> list[tuple[int, int]]:
        """The runs of lines of one code component, or none past ``max_code_lines_chars``."""
        spans = split_code(text)
        self.code_components += 1
        if not self.code_full and self.code_chars + len(text) <= self.cfg.max_code_lines_chars:
            self.code_chars += len(text)
            return spans
        self.code_full = True
        self.code_cut.append(len(text))
        self.runs_not_made += len(spans)
        return []

    def take(self, subs: list[_Sub]) -> list[_Sub]:
        """The subcomponents of one component that fit in what is left of ``max_subcomponents``."""
        room = max(self.cfg.max_subcomponents - self.subcomponents, 0)
        self.dropped += max(len(subs) - room, 0)
        subs = subs[:room]
        self.subcomponents += len(subs)
        return subs

    def warnings(self) -> list[str]:
        out = []
        if self.code_cut:
            cap = self.cfg.max_code_lines_chars
            out.append(
                f"code_lines_cut: {len(self.code_cut)} of the page's {self.code_components} code components "
                f"({sum(self.code_cut)} characters) are not split into runs of lines ({self.runs_not_made} runs "
                f"not made), past the cap of {cap} characters of code a page split so "
                f"(LAMINAE_PARSE__MAX_CODE_LINES_CHARS); their code is kept and searched as whole components")
        if self.dropped:
            cap, total = self.cfg.max_subcomponents, self.subcomponents + self.dropped
            out.append(
                f"too_many_subcomponents: {self.dropped} of the page's {total} subcomponents (sentences, runs of "
                f"code lines, table rows) were dropped, over the cap of {cap} a page "
                f"(LAMINAE_PARSE__MAX_SUBCOMPONENTS); the first {cap} are kept, the components past them are "
                "searched whole")
        return out


def _subcomponents(comp: Component, cfg: ParseConfig, budget: _Budget) -> list[_Sub]:
    """A component's subcomponents to be: sentences of prose, runs of lines of code, a table's
    heading and rows."""
    if comp.kind == "paragraph":
        return [_Sub("sentence", i, comp.text[s:e], {"char_start": s, "char_end": e}, span=(s, e))
                for i, (s, e) in enumerate(split_sentences(comp.text, comp.segments, cfg.language))]
    if comp.kind == "code":
        return [_Sub("lines", i, comp.text[s:e], {"char_start": s, "char_end": e}, span=(s, e))
                for i, (s, e) in enumerate(budget.lines(comp.text))]
    if comp.kind != "table":
        return []
    subs = []
    heading = table_heading(comp.header, comp.caption)
    if heading:
        subs.append(_Sub("header", -1, heading, {"header": comp.header}))
    for seg in explode_table(comp.header, comp.rows or [], comp.table_kind, comp.caption):
        subs.append(_Sub("row", seg.index, seg.text, {"header": seg.header, "cells": seg.cells}, row=seg.index))
    return subs


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
    components are capped first (``cap_components``), its subcomponents, code lines and links while
    nodes and edges are made (``_Budget``, ``_EdgeMaker``): each cap breached adds a warning to
    ``page.warnings`` and the document row."""
    cap_components(page, cfg)
    out = DocumentNodes(document_row(page, doc_id, fetch, cfg))
    own = {normalize_url(u) for u in (fetch.url, fetch.final_url, page.canonical_url, *fetch.redirects) if u}
    edges = _EdgeMaker(doc_id, own, cfg.max_links)
    budget = _Budget(cfg)
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
        for sub in budget.take(_subcomponents(comp, cfg, budget)):
            sid = sub_id(sub.kind, sub.text)
            out.subcomponents.append(subcomponent_row(sid, doc_id, cid, sub.kind, sub.ordinal, sub.text,
                                                      **sub.columns))
            edges.add("contains", cid, 1, sid)
            for link in comp.links:
                if (sub.span and link.start < sub.span[1] and link.end > sub.span[0]) or \
                        (sub.row is not None and link.row == sub.row):
                    edges.link(sid, 2, link)
    out.edges = edges.rows
    for warning in [*budget.warnings(), edges.warning()]:
        if warning:
            page.warnings.append(warning)
            out.document["warnings"].append(warning)
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
