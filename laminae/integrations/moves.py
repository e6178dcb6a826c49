"""The reader move a framework retriever runs, and its hits as passages with their metadata.

Reads an opened ``laminae.Index``: its moves, the ``section_path`` column of the components table
(a component hit's, a subcomponent hit's parent's) and ``Index.get`` of the hits that have a
picture (an image's bytes, an object's or a line's crop); writes nothing. Imports
no framework: ``laminae.integrations.langchain`` and ``laminae.integrations.llama_index`` turn a
``Passage`` into their own types.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from laminae import moves
from laminae.index import Hit, Index, ReaderArgumentError
from laminae.schemas.sql import sql_list
from laminae.views import picture

PICTURE_KINDS = ("image", "object", "text")  # an image component, an object or a line read in a picture


def offered() -> list[str]:
    """The moves a retriever runs (``laminae.moves``: those offered to ``retrievers``), in order."""
    return [spec.name for spec in moves.offered("retrievers")]


class Move:
    """One reader move and its arguments, checked by its spec (``laminae.moves.MOVES``); an
    argument left out or None keeps the reader's default.

    ``retrieve`` (the default), ``search`` (one layer; at layer 2 objects and lines read in
    pictures come with their crops), ``documents`` (FiF's document hop, global or
    ``scope="local"`` from ``anchors``), ``components`` (FiF's component hop inside
    ``documents``, also called ``document_ids`` here), ``hop`` (FiF's whole local hop,
    ``Index.hop``) and any move added with ``laminae.moves.register``. An argument the move does
    not read is an error, as is a value it does not allow. The arguments are read as attributes
    (``move.anchors``: None when not given).
    """

    def __init__(self, name: str = "retrieve", k: int = moves.K.default, **arguments: Any) -> None:
        spec = moves.spec(name)
        if "retrievers" not in spec.surfaces:
            raise ReaderArgumentError(f"move must be one of {', '.join(offered())}; got {name!r}")
        given = spec.given(arguments)
        self.name, self.k = name, spec.check({**given, "k": k})["k"]
        self.arguments = {key: tuple(value) if spec.arg(key).type is list else value for key, value in given.items()}

    def __getattr__(self, name: str) -> Any:
        if name in ("name", "k", "arguments"):  # before __init__ has set them
            raise AttributeError(name)
        arg = moves.spec(self.name).arg(name)
        if arg is None:
            raise AttributeError(f"move {self.name!r} has no argument {name!r}")
        return self.arguments.get(arg.name)

    def __repr__(self) -> str:
        given = "".join(f", {key}={value!r}" for key, value in self.arguments.items())
        return f"Move({self.name!r}, k={self.k}{given})"

    def run(self, index: Index, query) -> list[Hit]:
        """The move's hits for ``query`` (a string, or a vector of the index's dimension), best first."""
        return getattr(index, self.name)(query, k=self.k, **{k: list(v) if isinstance(v, tuple) else v
                                                             for k, v in self.arguments.items()})


@dataclass
class Passage:
    """One hit as a framework wants it: its text, its score, its metadata and its picture, if any."""

    id: str
    text: str
    score: float
    metadata: dict[str, Any]
    picture: bytes | None = None  # an image component's picture, or the crop of an object or line
    picture_mime: str | None = None


def passages(index: Index, move: Move, hits: Sequence[Hit]) -> list[Passage]:
    """``hits`` in their order, each with ``metadata``: id, layer, kind, document_id, title, url,
    section_path (a subcomponent's is its parent's; [] for a document), score, manifest_version and
    move; similarity and probability where the move gives them, parent_id for a subcomponent; for a
    picture kind has_image and image_mime (image components: image_url; keyframes: time_s,
    video_url)."""
    parents = {h.id: index.parent(h.id) for h in hits if h.layer == 2}
    sections = _section_paths(index, {*(h.id for h in hits if h.layer == 1), *parents.values()})
    # Index.get reads every node table and the pictures: only for the hits that have one
    nodes = {n["id"]: n for n in index.get([h.id for h in hits if h.kind in PICTURE_KINDS])}
    out = []
    for hit in hits:
        node = nodes.get(hit.id, {})
        metadata: dict[str, Any] = {
            "id": hit.id, "layer": hit.layer, "kind": hit.kind, "document_id": hit.document_id,
            "title": hit.extra.get("title"), "url": hit.extra.get("url"),
            "section_path": sections.get(parents.get(hit.id, hit.id), []) if hit.layer else [],
            "score": hit.score, "manifest_version": index.version, "move": move.name,
        }
        metadata.update({key: hit.extra[key] for key in ("similarity", "probability") if key in hit.extra})
        if hit.layer == 2:
            metadata["parent_id"] = parents[hit.id]
        found = picture(node) if hit.kind in PICTURE_KINDS else None
        if hit.kind in PICTURE_KINDS:
            metadata["has_image"] = found is not None
            metadata["image_mime"] = found[1] if found else None
        if hit.kind == "image" and hit.layer == 1:
            metadata["image_url"] = node.get("image_url")
        if node.get("time_s") is not None:  # a video's keyframe
            metadata.update(time_s=float(node["time_s"]), video_url=node.get("video_url"))
        out.append(Passage(hit.id, hit.text or "", float(hit.score), metadata,
                           found[0] if found else None, found[1] if found else None))
    return out


def _section_paths(index: Index, component_ids: set[str]) -> dict[str, list[str]]:
    """Section path by component id: one read of two columns (Index.get would read every node
    table, 10 ms against 2.6 ms for ten components of the demo index)."""
    if not component_ids:
        return {}
    table = index.table("components")
    with index._reading("components"):  # a table version cleaned up since: IndexOpenError, as the reader's own reads
        rows = (table.search().where(f"id IN ({sql_list(sorted(component_ids))})").select(["id", "section_path"])
                .limit(None).to_arrow().to_pylist())
    return {r["id"]: list(r["section_path"] or []) for r in rows}
