"""The reader move a framework retriever runs, and its hits as passages with their metadata.

Reads an opened ``laminae.Index``: its moves, the ``section_path`` column of the components table
(a component hit's, a subcomponent hit's parent's) and ``Index.get`` of the hits that have a
picture (an image's bytes, an object's or a line's crop); writes nothing. Imports
no framework: ``laminae.integrations.langchain`` and ``laminae.integrations.llama_index`` turn a
``Passage`` into their own types.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from laminae.index import LAYER_NAMES, MODES, RANKINGS, Hit, Index, ReaderArgumentError, UnknownIdError
from laminae.schemas.sql import sql_list
from laminae.views import picture

MOVES = ("retrieve", "search", "documents", "components", "hop")
# what each move reads beyond the query and k: an argument set for another move is an error
ARGUMENTS: dict[str, tuple[str, ...]] = {
    "retrieve": ("document_ids", "kinds", "ranking"),
    "search": ("layer", "document_ids", "kinds", "mode"),
    "documents": ("granularity", "scope", "anchors", "direction", "mode"),
    "components": ("document_ids", "granularity", "mode"),
    "hop": ("anchors", "granularity", "direction", "mode", "start", "linked"),
}
# the local hop bench/quality.py scores ("FiF local hop"): the best 3 documents at granularity 2,
# the 10 best documents linked to or from them, then the best components of all of them
HOP_START = 3
HOP_LINKED = 10
HOP_GRANULARITY = 2
PICTURE_KINDS = ("image", "object", "text")  # an image component, an object or a line read in a picture


@dataclass(frozen=True)
class Move:
    """One reader move and its arguments; an argument left None keeps the reader's default.

    ``retrieve`` (the default), ``search`` (one layer; at layer 2 objects and lines read in
    pictures come with their crops), ``documents`` (FiF's document hop, global or
    ``scope="local"`` from ``anchors``), ``components`` (FiF's component hop inside
    ``document_ids``) and ``hop``: the local hop, from the ``anchors`` (documents or components)
    or, without them, from the best ``start`` documents for the query, to the ``linked`` best
    documents linked to or from them, then the best ``k`` components of all of those.
    """

    name: str = "retrieve"
    k: int = 10
    document_ids: Sequence[str] | None = None
    kinds: Sequence[str] | None = None
    ranking: str | None = None
    layer: int | str | None = None
    mode: str | None = None
    granularity: int | None = None
    scope: str | None = None
    anchors: Sequence[str] | None = None
    direction: str | None = None
    start: int | None = None
    linked: int | None = None

    def __post_init__(self) -> None:
        if self.name not in MOVES:
            raise ReaderArgumentError(f"move must be one of {', '.join(MOVES)}; got {self.name!r}")
        for name in ("document_ids", "kinds", "anchors"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise ReaderArgumentError(f"{name} is a list of strings; got the string {value!r}")
            if value is not None:
                object.__setattr__(self, name, tuple(value))
        given = [f.name for f in fields(self) if f.name not in ("name", "k") and getattr(self, f.name) is not None]
        foreign = [name for name in given if name not in ARGUMENTS[self.name]]
        if foreign:
            verb = "does" if len(foreign) == 1 else "do"
            raise ReaderArgumentError(f"{', '.join(foreign)} {verb} not apply to move {self.name!r}, which reads k, "
                                      f"{', '.join(ARGUMENTS[self.name])}")
        for name in ("k", "start", "linked"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ReaderArgumentError(f"{name} must be a whole number of at least 1; got {value!r}")
        self._check_values()

    def _check_values(self) -> None:
        allowed = {"ranking": RANKINGS, "mode": MODES, "scope": ("global", "local"), "direction": ("out", "in", "both"),
                   "layer": tuple(LAYER_NAMES),
                   "granularity": (0, 1, 2) if self.name == "documents" else (1, 2)}
        for name, values in allowed.items():
            value = getattr(self, name)
            if value is not None and (value not in values or isinstance(value, bool)):
                raise ReaderArgumentError(f"{name} must be one of {', '.join(map(str, values))} for move "
                                          f"{self.name!r}; got {value!r}")
        if self.name == "components" and not self.document_ids:
            raise ReaderArgumentError("move 'components' ranks the components of given documents: pass document_ids")
        if self.name == "documents" and (self.scope == "local") != bool(self.anchors):
            raise ReaderArgumentError("move 'documents' with scope='local' needs anchors (document or component ids), "
                                      "and anchors need scope='local'")

    def run(self, index: Index, query) -> list[Hit]:
        """The move's hits for ``query`` (a string, or a vector of the index's dimension), best first."""
        given = {f.name: getattr(self, f.name) for f in fields(self)
                 if f.name in ARGUMENTS[self.name] and getattr(self, f.name) is not None}
        if "document_ids" in given:
            given["documents"] = list(given.pop("document_ids"))
        if self.name == "retrieve":
            return index.retrieve(query, k=self.k, **given)
        if self.name == "search":
            return index.search(query, k=self.k, **given)
        if self.name == "documents":
            return index.documents(query, k=self.k, **given)
        if self.name == "components":
            return index.components(query, k=self.k, **given)
        return self._hop(index, query)

    def _hop(self, index: Index, query) -> list[Hit]:
        granularity = self.granularity or HOP_GRANULARITY
        mode = self.mode or "auto"
        if self.anchors:
            anchors = list(self.anchors)
            start = []
            for anchor in anchors:
                document = index.document_of(anchor)
                if document is None:
                    raise UnknownIdError(f"anchor {anchor!r} is not a document or component of this index")
                start.append(document)
        else:
            start = [h.id for h in index.documents(query, k=self.start or HOP_START, granularity=granularity,
                                                   mode=mode)]
            anchors = start
        if not start:
            return []
        linked = index.documents(query, k=self.linked or HOP_LINKED, granularity=granularity, scope="local",
                                 anchors=anchors, direction=self.direction or "both", mode=mode)
        documents = list(dict.fromkeys([*start, *(h.id for h in linked)]))
        return index.components(query, documents, k=self.k, granularity=granularity, mode=mode)


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
    move; similarity where the move gives one, parent_id for a subcomponent; for a picture kind
    has_image and image_mime (image components: image_url; keyframes: time_s, video_url)."""
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
        if "similarity" in hit.extra:
            metadata["similarity"] = hit.extra["similarity"]
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
