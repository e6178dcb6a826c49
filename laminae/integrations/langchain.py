"""A LangChain retriever over an opened laminae index (the ``langchain`` extra: langchain-core).

Reads the index through one reader move (``laminae.integrations.moves``: ``retrieve`` by default)
and returns LangChain ``Document``s, best first; writes nothing. LangChain's ``Document`` holds
text only, so a picture travels in its metadata: ``has_image`` and ``image_mime`` always,
the bytes base64-encoded in ``image_base64`` when ``image_base64=True``.

    retriever = LaminaeRetriever(index=laminae.open("./my-index"), k=10)
    docs = retriever.invoke("what team had the first pick in round 17?")
"""

from __future__ import annotations

import asyncio
import base64

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:
    raise ImportError(f"laminae.integrations.langchain needs langchain-core: pip install 'laminae[langchain]' "
                      f"({exc})") from exc
from pydantic import ConfigDict, model_validator

from laminae.index import Index
from laminae.integrations.moves import Move, passages

IMAGE_NOTE = ("LangChain's Document has no image type: with image_base64=True the picture's bytes are in "
              "metadata['image_base64'], else read them with index.get([id])")


class LaminaeRetriever(BaseRetriever):
    """Documents for a query from one reader move over ``index`` (an ``laminae.Index``).

    ``move``: ``retrieve`` (the default), ``search``, ``documents``, ``components``, ``hop`` (FiF's
    whole local hop) or a move added with ``laminae.moves.register``; the other keyword arguments
    are the move's (``laminae.moves.MOVES`` declares each; ``laminae.integrations.moves.Move``
    checks them: one that does not apply to the move is an error), None keeping the reader's
    default. Each document's ``id`` is the node's id, ``page_content`` its text, ``metadata`` its
    id, layer, kind, document_id, title, url, section_path, score, manifest_version and move (and
    similarity, parent_id, has_image, image_mime where they apply). Async calls run the move on a
    thread: the reader may be shared by threads.
    """

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)  # extra: the move's arguments

    index: Index
    move: str = "retrieve"
    k: int = 10
    image_base64: bool = False

    @model_validator(mode="after")
    def _valid_move(self) -> LaminaeRetriever:
        self._move()  # a bad move or argument fails here, not at the first query
        return self

    def _move(self) -> Move:
        return Move(self.move, self.k, **(self.model_extra or {}))

    def _documents(self, query: str) -> list[Document]:
        move = self._move()
        return [self._document(p.id, p.text, p.metadata, p.picture)
                for p in passages(self.index, move, move.run(self.index, query))]

    def _document(self, node_id: str, text: str, metadata: dict, picture: bytes | None) -> Document:
        if "has_image" in metadata:
            metadata["image_note"] = IMAGE_NOTE
            if self.image_base64 and picture is not None:
                metadata["image_base64"] = base64.b64encode(picture).decode("ascii")
        return Document(page_content=text, metadata=metadata, id=node_id)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self._documents(query)

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        return await asyncio.to_thread(self._documents, query)


__all__ = ["IMAGE_NOTE", "LaminaeRetriever"]
