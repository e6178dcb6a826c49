"""Views: search hits and nodes as plain, JSON-ready dicts sized for a model's context.

Reads ``Hit`` objects and ``Index.get`` rows (through the public reader); writes nothing. The MCP
server (``laminae mcp``) and the terminal commands (``laminae search``, ``get``, ``hop``) show
what these return. Text longer than ``max_chars`` is cut and ends with a marker saying how much
was left out; a table shows at most ``max_rows`` rows. Picture bytes and object crops are not in
the dicts: ``picture`` returns them for the caller to attach.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from laminae.schemas.timecodes import clock

if TYPE_CHECKING:
    from laminae.hits import Hit
    from laminae.index import Index

MAX_CHARS = 1500  # characters of one node's text, by default
MAX_ROWS = 20  # rows of a table, by default
MAX_CELL = 200  # characters of one table cell


def cut(text: str | None, max_chars: int) -> str | None:
    """``text`` up to ``max_chars`` characters; a longer one ends with ``… [N more characters]``."""
    if text is None or len(text) <= max_chars:
        return text
    return f"{text[:max_chars].rstrip()} … [{len(text) - max_chars} more characters]"


def hit_view(hit: Hit, max_chars: int = MAX_CHARS) -> dict[str, Any]:
    """A search hit: id, score, layer, kind, its document (id, title, url), its text, cut, and
    its dense similarity and learned probability where the move gave them."""
    view: dict[str, Any] = {
        "id": hit.id, "score": round(hit.score, 6), "layer": hit.layer, "kind": hit.kind,
        "document_id": hit.document_id, "title": hit.extra.get("title"), "url": hit.extra.get("url"),
        "text": cut(hit.text, max_chars),
    }
    for key in ("similarity", "probability"):
        if key in hit.extra:
            view[key] = round(hit.extra[key], 6)
    return view


def _table(node: dict, max_rows: int) -> dict[str, Any]:
    rows = node.get("table_rows") or []
    return {
        "caption": node.get("caption"),
        "table_kind": node.get("table_kind"),
        "header": [cut(h, MAX_CELL) for h in node.get("table_header") or []],
        "rows": [[cut(c, MAX_CELL) for c in row] for row in rows[:max_rows]],
        "rows_total": len(rows),
    }


def node_view(node: dict, document: dict | None = None, parent: dict | None = None,
              max_chars: int = MAX_CHARS, max_rows: int = MAX_ROWS) -> dict[str, Any]:
    """One node of ``Index.get`` with its document's title and url and its section path (a
    subcomponent's comes from ``parent``); what each kind holds beside its text: a document's
    summary, a table's header and rows, a picture's url and size, a row's cells, an object's label
    and box (a line read in a picture: its confidence and box), a video's url, captions and duration, a
    keyframe's ``time_s`` and a transcript's (or its sentence's) ``time_start``/``time_end``, each with ``at``
    (``2:15``) to cite. ``has_image`` says whether ``picture`` has picture bytes (or an object crop) for it."""
    layer, kind = node["layer"], node["kind"]
    document = node if layer == 0 else (document or {})
    view: dict[str, Any] = {
        "id": node["id"], "layer": layer, "kind": kind,
        "document_id": node["id"] if layer == 0 else node["document_id"],
        "parent_id": node.get("parent_id") if layer else None,
        "title": document.get("title"),
        "url": document.get("canonical_url") or document.get("final_url") or document.get("url"),
    }
    section = node.get("section_path") if layer == 1 else (parent or {}).get("section_path") if layer == 2 else None
    if section:
        view["section_path"] = list(section)
    if layer == 0:
        view["summary"] = cut(node.get("summary"), max_chars)
        view["components"] = node.get("n_components")
        annotations = node.get("annotations")
        if annotations and annotations != "{}":
            view["annotations"] = json.loads(annotations)
    else:
        view["text"] = cut(node.get("text"), max_chars)
    if kind == "table":
        view.update(_table(node, max_rows))
    elif kind == "image":
        view.update({k: node.get(k) for k in ("caption", "image_url", "image_alt", "image_mime",
                                               "image_width", "image_height")})
    elif kind == "row":
        view["header"] = [cut(h, MAX_CELL) for h in node.get("header") or []]
        view["cells"] = [cut(c, MAX_CELL) for c in node.get("cells") or []]
    elif kind in ("object", "text"):
        view.update({"label": node.get("label"), "score": _rounded(node.get("score"), 4),
                     "bbox": [_rounded(v, 1) for v in node.get("bbox") or []]})
    elif kind == "video":
        view.update({k: node.get(k) for k in ("caption", "video_url", "captions_url", "image_width", "image_height")})
        view["duration_s"] = _rounded(node.get("duration_s"), 3)
    if node.get("time_s") is not None:  # a video's keyframe
        view.update({"video_url": node.get("video_url"), "time_s": _rounded(node["time_s"], 3),
                     "at": clock(node["time_s"])})
    if node.get("time_start") is not None:  # a transcript, or one of its sentences
        view.update({"time_start": _rounded(node["time_start"], 3), "time_end": _rounded(node.get("time_end"), 3),
                     "at": f"{clock(node['time_start'])}-{clock(node.get('time_end') or node['time_start'])}"})
        if layer == 1:
            view["video_url"] = node.get("video_url")
    if kind in ("image", "object", "text"):
        view["has_image"] = bool(node.get("image") or node.get("crop"))
    return view


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(float(value), digits)


def describe(index: Index, ids: Sequence[str], max_chars: int = MAX_CHARS,
             max_rows: int = MAX_ROWS) -> tuple[list[dict[str, Any]], list[dict], list[str]]:
    """(views of the known ``ids`` in the order asked, their ``Index.get`` rows, the unknown ids)."""
    nodes = index.get(ids)
    known = {n["id"] for n in nodes}
    parents = {n["id"]: n for n in index.get(sorted({n["parent_id"] for n in nodes if n["layer"] == 2}))}
    documents = {n["id"]: n for n in index.get(sorted({n["document_id"] for n in nodes if n["layer"]}))}
    views = [node_view(n, documents.get(n.get("document_id")), parents.get(n.get("parent_id")), max_chars, max_rows)
             for n in nodes]
    return views, nodes, [i for i in dict.fromkeys(ids) if i not in known]


def picture(node: dict) -> tuple[bytes, str] | None:
    """(bytes, mime type) of a node's picture (an image component) or crop (an object), if any."""
    if node.get("crop"):
        return node["crop"], "image/png"
    if node.get("image"):
        return node["image"], node.get("image_mime") or "image/png"
    return None
