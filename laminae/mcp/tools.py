"""The tools of ``laminae mcp``: what an agent may ask of the index, and how each answer looks.

Reads the index ``Pinned`` serves (``laminae.mcp.reads``), every call on a read worker; writes
nothing. Tools: one per reader move that ``laminae.moves`` offers to ``mcp`` (``search``,
``documents`` (global and local hop), ``components``, ``hop`` (FiF's whole local hop) and any
move added with ``laminae.moves.register``: arguments, bounds and description from its spec),
``beam_search``, ``get`` (text, table header and rows, url, section path; pictures and object
crops as image content), ``neighbors``, ``stats`` and ``use_latest``. Every tool is read-only; a
bad argument or an unknown id is a tool error that says what is allowed, never a crash of the
server.
"""

from __future__ import annotations

import base64
import inspect
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, TextContent, ToolAnnotations
from pydantic import Field

import laminae
from laminae import moves
from laminae.index import Hit
from laminae.mcp.reads import Pinned
from laminae.schemas.tables import COMPONENT_KINDS, DOCUMENT_KINDS, SUBCOMPONENT_KINDS
from laminae.views import MAX_CHARS, MAX_ROWS, describe, hit_view, picture

MAX_K = 50  # hits in one page of results
MAX_IDS = 20  # nodes one `get` returns
MAX_PICTURES = 8  # images one `get` attaches
INSTRUCTIONS = (
    "A laminae index: a layered graph of documents (layer 0, with summaries), their components "
    "(layer 1: paragraphs, tables, images) and subcomponents (layer 2: sentences, table rows with "
    "their header, objects detected in pictures), with hyperlinks between documents. Start with "
    "`search` (layer 1 by default: the best components for a question), read nodes with `get`, "
    "hop along links with `hop` (from the best documents or from anchors to the documents linked "
    "with them, then their best components), `documents(scope='local', anchors=[...])` or "
    "`neighbors`. Ids come from results; every result names the manifest version it was read from."
)

K = Annotated[int, Field(ge=1, le=MAX_K, description=f"hits per page, 1 to {MAX_K}")]
Offset = Annotated[int, Field(ge=0, le=500, description="hits to skip: the next page starts at offset + k")]
MaxChars = Annotated[int, Field(ge=50, le=20_000, description="characters of each node's text before it is cut")]
Query = Annotated[str, Field(min_length=1, max_length=2000, description="the question or search words")]
Ids = Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]], Field(min_length=1, max_length=MAX_IDS)]
Direction = Literal["out", "in", "both"]  # of neighbors (the moves' own arguments: laminae.moves)


def _page(hits: list[Hit], offset: int, k: int, max_chars: int, version: int) -> dict[str, Any]:
    page = hits[offset:offset + k]
    return {"manifest_version": version, "offset": offset, "hits": [hit_view(h, max_chars) for h in page],
            "more": len(hits) > offset + k}


def _kinds_of_layer(kinds: list[str] | None, layer: int) -> list[str] | None:
    allowed = {0: DOCUMENT_KINDS, 1: COMPONENT_KINDS, 2: SUBCOMPONENT_KINDS}[layer]
    bad = [k for k in kinds or [] if k not in allowed]
    if bad:
        raise ToolError(f"kinds {bad} are not of layer {layer}; layer {layer} kinds are {', '.join(allowed)}")
    return kinds


def build_server(pinned: Pinned, warm: bool = True) -> MCPServer:
    """The MCP server over the ``pinned`` index; ``warm`` loads the graph and the query model in
    the background so that the first question does not wait for them."""
    server = MCPServer(name="laminae", instructions=INSTRUCTIONS, version=_version())
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)

    for spec in moves.offered("mcp"):
        server.add_tool(_move_tool(spec, pinned), name=spec.name, description=spec.description, annotations=read_only)
    tool = server.tool(annotations=read_only)

    @tool
    async def beam_search(subqueries: Annotated[list[Query], Field(min_length=1, max_length=8)],
                          beam: Annotated[int, Field(ge=1, le=200)] = 30,
                          iterations: Annotated[int, Field(ge=0, le=3)] = 1, k: K = 10,
                          max_chars: MaxChars = MAX_CHARS) -> dict[str, Any]:
        """LILaC beam search: split a multi-hop question into subqueries (one per fact); returns the
        components that best answer them together, following links between documents, and the
        best component pairs (edges)."""
        def read(ix: laminae.Index) -> dict[str, Any]:
            result = ix.beam_search(subqueries, beam=beam, iterations=iterations, k=k)
            return {"manifest_version": ix.version,
                    "hits": [hit_view(h, max_chars) for h in result.components],
                    "edges": [{"a": a, "b": b, "score": round(s, 6)} for a, b, s in result.edges[:k]]}

        return await pinned.read("beam_search", read)

    @tool
    async def get(ids: Ids, max_chars: MaxChars = MAX_CHARS,
                  max_rows: Annotated[int, Field(ge=0, le=200)] = MAX_ROWS,
                  images: bool = True) -> list[TextContent | ImageContent]:
        """Read nodes by id: text (cut at max_chars), document title, url and section path; a
        table's header and rows; a document's summary. With images=true, pictures and object crops
        follow as image content (at most 8)."""
        def read(ix: laminae.Index) -> list[TextContent | ImageContent]:
            views, nodes, unknown = describe(ix, ids, max_chars, max_rows)
            if not views:
                raise ToolError(f"no node of manifest {ix.version} has the id(s) {unknown}: "
                                "use ids from search, documents, components or neighbors results")
            payload = {"manifest_version": ix.version, "nodes": views, "unknown_ids": unknown}
            out: list[TextContent | ImageContent] = [TextContent(type="text", text=json.dumps(payload, default=str))]
            if images:
                for node in nodes:
                    found = picture(node)
                    if found and len(out) <= MAX_PICTURES:
                        data, mime = found
                        out.append(ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=mime,
                                                meta={"node_id": node["id"]}))
            return out

        return await pinned.read("get", read)

    @tool
    async def neighbors(documents: Ids, direction: Direction = "out") -> dict[str, Any]:
        """Documents linked from ("out"), linking to ("in") or either ("both") these documents."""
        def read(ix: laminae.Index) -> dict[str, Any]:
            linked = _known_documents(ix, documents).neighbors(documents, direction=direction)
            titles = {d["id"]: d for d in ix.get(linked[:MAX_K])}
            return {"manifest_version": ix.version, "total": len(linked),
                    "documents": [{"id": d, "title": titles.get(d, {}).get("title"),
                                   "url": titles.get(d, {}).get("url")} for d in linked[:MAX_K]]}

        return await pinned.read("neighbors", read)

    @tool
    async def stats() -> dict[str, Any]:
        """Rows per layer and kind, edges, the embedder, the last build run and the manifest version."""
        return await pinned.read("stats", lambda ix: ix.stats())  # names its manifest_version itself

    @tool
    async def use_latest() -> dict[str, int]:
        """Move this server to the index's newest manifest (a refresh published since it opened)."""
        return await pinned.use_latest()

    if warm:
        threading.Thread(target=pinned.warm, name="laminae-mcp-warm", daemon=True).start()
    return server


def _move_tool(spec: moves.MoveSpec, pinned: Pinned) -> Callable[..., Awaitable[dict[str, Any]]]:
    """The tool of one reader move: its arguments as the spec declares them (k at most ``MAX_K``,
    lists at most ``MAX_IDS`` ids), with ``offset`` and ``max_chars``; a page of its hits."""
    async def run(**arguments: Any) -> dict[str, Any]:
        query, offset, k = arguments.pop("query"), arguments.pop("offset", 0), arguments.pop("k", moves.K.default)
        max_chars = arguments.pop("max_chars", MAX_CHARS)
        given = {name: value for name, value in arguments.items() if value is not None}
        # the reader answers no hits for kinds of another layer or unknown documents; an agent is told
        if spec.name == "search":
            _kinds_of_layer(given.get("kinds"), given.get("layer", 1))

        def read(ix: laminae.Index) -> dict[str, Any]:
            if spec.name == "components":
                _known_documents(ix, given["documents"])
            return _page(getattr(ix, spec.name)(query, k=offset + k, **given), offset, k, max_chars, ix.version)

        return await pinned.read(spec.name, read)

    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [inspect.Parameter("query", keyword, annotation=Query),
                  *(inspect.Parameter(arg.name, keyword, annotation=K if arg is moves.K else _annotation(arg),
                                      **({} if arg.required else {"default": arg.default}))
                    for arg in spec.arguments),
                  inspect.Parameter("offset", keyword, annotation=Offset, default=0),
                  inspect.Parameter("max_chars", keyword, annotation=MaxChars, default=MAX_CHARS)]
    run.__signature__ = inspect.Signature(parameters, return_annotation=dict[str, Any])  # type: ignore[attr-defined]
    run.__name__ = run.__qualname__ = spec.name
    run.__doc__ = spec.description
    return run


def _annotation(arg: moves.Arg) -> Any:
    """The type of ``arg`` for a tool's JSON schema: its choices, bounds and description."""
    described = Field(description=arg.description)
    if arg.type is list:
        items = Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]],
                          Field(min_length=1, max_length=MAX_IDS, description=arg.description)]
        return items if arg.required else items | None
    if arg.choices:
        return Annotated[Literal[arg.choices], described]
    if arg.type is int:
        return Annotated[int, Field(ge=arg.low, le=arg.high, description=arg.description)]
    return Annotated[arg.type, described]


def _known_documents(index: laminae.Index, documents: list[str]) -> laminae.Index:
    """``index``, once every id of ``documents`` is one of its documents (else a tool error)."""
    unknown = [d for d in documents if d not in index.graph.doc_position]
    if unknown:
        raise ToolError(f"{unknown} are not document ids of manifest {index.version}: use the "
                        "document_id of a result")
    return index


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("laminae")
    except PackageNotFoundError:
        return "0"
