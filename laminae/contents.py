"""Nodes by id with their whole content: the ``get`` move.

Reads the node tables at the versions a manifest names (``laminae.pinned_tables``) and, for pictures,
``raw/`` through the index's files; writes nothing. Pillow is used, where installed, to cut the
crop of an object or a text line read in a picture.
"""

from __future__ import annotations

from collections.abc import Sequence

from laminae.pinned_tables import PinnedTables
from laminae.schemas.pictures import crop_png
from laminae.schemas.sql import sql_list
from laminae.schemas.storage import IndexFiles, raw_path
from laminae.schemas.tables import NODE_TABLES

BOXED_KINDS = ("object", "text")  # subcomponents that are a box of their picture: get() cuts their crop


def get(tables: PinnedTables, files: IndexFiles, ids: Sequence[str]) -> list[dict]:
    """Nodes with their content, in the order asked; unknown ids are left out (``Index.get`` says
    what pictures and boxes carry)."""
    wanted = list(dict.fromkeys(ids))
    found: dict[str, dict] = {}
    quoted = sql_list(wanted)
    for layer, name in enumerate(NODE_TABLES):
        if not wanted:
            break
        with tables.reading(name):
            rows = tables.table(name).search().where(f"id IN ({quoted})").limit(None).to_arrow().to_pylist()
        for row in rows:
            row.pop("vector", None)
            row["layer"] = layer
            found[row["id"]] = row
    parents = {}
    for row in found.values():
        if row["layer"] == 1 and row["kind"] == "image" and row.get("image_key"):
            row["image"] = files.read_bytes(raw_path(row["image_key"]))
        if row["layer"] == 2 and row["kind"] in BOXED_KINDS:
            parents[row["id"]] = row["parent_id"]
    if parents:
        images = {p["id"]: p for p in get(tables, files, sorted(set(parents.values())))}
        for oid, pid in parents.items():
            parent = images.get(pid)
            if parent and parent.get("image"):
                found[oid]["crop"] = _crop(parent["image"], found[oid]["bbox"])
    return [found[i] for i in wanted if i in found]


def _crop(image: bytes, bbox: list[float]) -> bytes | None:
    """The object's crop as PNG bytes; None without Pillow (the reader does not require it)."""
    try:
        return crop_png(image, bbox)
    except ImportError:
        return None
