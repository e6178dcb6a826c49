"""A LlamaIndex retriever over an opened laminae index (the ``llama-index`` extra: llama-index-core).

Reads the index through one reader move (``laminae.integrations.moves``: ``retrieve`` by default)
and returns ``NodeWithScore``s, best first: a ``TextNode`` per hit, an ``ImageNode`` (the picture
base64-encoded, as LlamaIndex keeps it) for an image component and for an object or a line read in
a picture (its crop); writes nothing.

    retriever = LaminaeRetriever(laminae.open("./my-index"), k=10)
    nodes = retriever.retrieve("what team had the first pick in round 17?")
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.schema import (
        ImageNode,
        NodeRelationship,
        NodeWithScore,
        QueryBundle,
        RelatedNodeInfo,
        TextNode,
    )
except ImportError as exc:
    raise ImportError(f"laminae.integrations.llama_index needs llama-index-core: pip install 'laminae[llama-index]' "
                      f"({exc})") from exc

from laminae.index import Index
from laminae.integrations.moves import Move, Passage, passages

# what a model reads beside a node's text (LlamaIndex writes the metadata not excluded into the
# prompt): where the text comes from; ids, scores and versions stay out of the prompt
PROMPT_METADATA = ("kind", "title", "url", "section_path", "time_s")


class LaminaeRetriever(BaseRetriever):
    """``NodeWithScore``s for a query from one reader move over ``index`` (an ``laminae.Index``).

    ``move``: ``retrieve`` (the default), ``search``, ``documents``, ``components``, ``hop`` (FiF's
    whole local hop) or a move added with ``laminae.moves.register``; the other keyword arguments
    are the move's (``laminae.moves.MOVES`` declares each; ``laminae.integrations.moves.Move``
    checks them: one that does not apply to the move is an error), None keeping the reader's
    default. A node's ``id_`` is the laminae id, its ``metadata`` the hit's id, layer, kind,
    document_id, title, url, section_path, score, manifest_version and move (and similarity,
    parent_id, has_image, image_mime where they apply); its SOURCE relationship is its document (a
    subcomponent's PARENT its component). ``images=False`` returns pictures as ``TextNode``s too.
    The query is the bundle's ``query_str``, embedded with the index's own model (a bundle's
    ``embedding`` from another model is not used). Async calls run the move on a thread.
    """

    def __init__(self, index: Index, move: str = "retrieve", k: int = 10, *, images: bool = True,
                 callback_manager: CallbackManager | None = None, verbose: bool = False, **arguments: Any) -> None:
        self.index = index
        self.move = Move(move, k, **arguments)
        self.images = images
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self.move.run(self.index, query_bundle.query_str)
        return [NodeWithScore(node=self._node(p), score=p.score) for p in passages(self.index, self.move, hits)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)

    def _node(self, passage: Passage) -> TextNode:
        metadata = passage.metadata
        relationships = {}
        if metadata["layer"]:
            relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=metadata["document_id"])
        if metadata["layer"] == 2:
            relationships[NodeRelationship.PARENT] = RelatedNodeInfo(node_id=metadata["parent_id"])
        common = {"id_": passage.id, "text": passage.text, "metadata": metadata, "relationships": relationships,
                  "excluded_embed_metadata_keys": list(metadata),
                  "excluded_llm_metadata_keys": [key for key in metadata if key not in PROMPT_METADATA]}
        if self.images and passage.picture is not None:
            return ImageNode(image=base64.b64encode(passage.picture).decode("ascii"),
                             image_mimetype=passage.picture_mime, image_url=metadata.get("image_url"), **common)
        return TextNode(**common)


__all__ = ["PROMPT_METADATA", "LaminaeRetriever"]
