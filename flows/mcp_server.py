"""``laminae mcp``: an index served to agents over the Model Context Protocol (the official SDK).

Reads one index (a directory or an object-store URI) through the public reader, pinned to one
manifest until the ``use_latest`` tool moves it; writes nothing. Tools: ``search``,
``documents`` (global and local hop), ``components``, ``beam_search``, ``get`` (text, table
header and rows, url, section path; pictures and object crops as image content), ``neighbors``,
``stats`` and ``use_latest``. Every tool is read-only; a bad argument or an unknown id is a tool
error that says what is allowed, never a crash of the server. Transports: stdio (the default) or
streamable HTTP (``--http HOST:PORT``, path ``/mcp``).

Each tool call reads on one of a fixed set of worker threads (``Reads``), never on the event loop
and under no lock, so clients do not wait for each other; a call still running at its deadline is
answered with a tool error (its thread goes on until the read returns: threads cannot be killed;
the fixed set bounds how many such reads run). Over HTTP, an address beyond loopback needs
``--allow-remote`` and a bearer token (``LAMINAE_MCP_TOKEN`` or ``--token-file``), checked on
every request (``BearerToken``); the SDK's Host/Origin check (DNS rebinding) is set for the bound
address (``transport_security``). Slow and abandoned clients cannot hold the HTTP server: request
heads, stalled bodies and unread responses time out, connections are capped below the descriptor
limit (``flows.mcp_http``, settings ``HttpLimits``), and the streamable HTTP transport is stateless,
so no session outlives its request. A stdio server stopped by SIGTERM or SIGHUP removes its reader
pin before it ends.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hmac
import ipaddress
import json
import logging
import os
import queue
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeVar

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ImageContent, TextContent, ToolAnnotations
from pydantic import Field

import laminae
from laminae.index import Hit
from laminae.pins import ReaderPin
from laminae.schemas.errors import LaminaeError
from laminae.schemas.tables import COMPONENT_KINDS, DOCUMENT_KINDS, SUBCOMPONENT_KINDS
from laminae.views import MAX_CHARS, MAX_ROWS, describe, hit_view, picture

log = logging.getLogger("laminae.mcp")
T = TypeVar("T")

MAX_K = 50  # hits in one page of results
MAX_IDS = 20  # nodes one `get` returns
MAX_PICTURES = 8  # images one `get` attaches
DEFAULT_DEADLINE = 30.0  # seconds; the slowest allowed call on the demo index takes under 1 s (docs/mcp.md)
DEFAULT_WORKERS = 4  # reads running at once, abandoned ones included
MAX_WAITING = 64  # calls waiting for a free worker; more are refused at once as busy
DEADLINE_ENV, WORKERS_ENV, TOKEN_ENV = "LAMINAE_MCP_DEADLINE", "LAMINAE_MCP_WORKERS", "LAMINAE_MCP_TOKEN"
# the HTTP server's hold on connections (flows/mcp_http.py), nginx's defaults where it has one
HEADER_TIMEOUT_ENV = "LAMINAE_MCP_HEADER_TIMEOUT"  # nginx client_header_timeout 60s
IO_TIMEOUT_ENV = "LAMINAE_MCP_IO_TIMEOUT"  # nginx client_body_timeout and send_timeout 60s
KEEPALIVE_TIMEOUT_ENV = "LAMINAE_MCP_KEEPALIVE_TIMEOUT"  # uvicorn's 5 s (nginx keepalive_timeout 75s)
MAX_CONNECTIONS_ENV = "LAMINAE_MCP_MAX_CONNECTIONS"  # nginx worker_connections 512
DEFAULT_HEADER_TIMEOUT = DEFAULT_IO_TIMEOUT = 60.0
DEFAULT_KEEPALIVE_TIMEOUT = 5.0
DEFAULT_MAX_CONNECTIONS = 512
FD_RESERVE = 128  # descriptors kept for the index's files, the model and the threads, beside connections
MAX_BACKLOG = 2048  # uvicorn's listen backlog
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
GRACEFUL_SHUTDOWN_S = 10  # calls still running at a stop are cancelled after this long
MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
INSTRUCTIONS = (
    "A laminae index: a layered graph of documents (layer 0, with summaries), their components "
    "(layer 1: paragraphs, tables, images) and subcomponents (layer 2: sentences, table rows with "
    "their header, objects detected in pictures), with hyperlinks between documents. Start with "
    "`search` (layer 1 by default: the best components for a question), read nodes with `get`, "
    "hop along links with `documents(scope='local', anchors=[...])` or `neighbors`. Ids come from "
    "results; every result names the manifest version it was read from."
)

K = Annotated[int, Field(ge=1, le=MAX_K, description=f"hits per page, 1 to {MAX_K}")]
Offset = Annotated[int, Field(ge=0, le=500, description="hits to skip: the next page starts at offset + k")]
MaxChars = Annotated[int, Field(ge=50, le=20_000, description="characters of each node's text before it is cut")]
Query = Annotated[str, Field(min_length=1, max_length=2000, description="the question or search words")]
Ids = Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]], Field(min_length=1, max_length=MAX_IDS)]
Direction = Literal["out", "in", "both"]


class McpConfigError(LaminaeError, ValueError):
    """A setting of ``laminae mcp`` that cannot be used; the message says what to do."""

    exit_code = 2


@dataclass
class _Job:
    name: str
    fn: Callable[[], Any]
    future: Future = field(default_factory=Future)
    started: float | None = None  # monotonic time a worker took it
    abandoned: bool = False  # its caller stopped waiting (deadline, cancellation)


class Reads:
    """Tool calls run on ``workers`` daemon threads, each call waiting at most ``deadline`` seconds
    (its wait for a free worker included).

    Not anyio's ``to_thread.run_sync(abandon_on_cancel=True, limiter=...)``: anyio gives the
    limiter's token back when the caller stops waiting, so reads abandoned at their deadline would
    go on running outside the bound; here a worker is busy until its read returns, whoever waits.
    A call whose deadline passes before a worker takes it never runs. The threads are daemons, so a
    read stuck in I/O does not keep the process from exiting. Calls wait with
    ``asyncio.wrap_future``: the SDK runs its servers on anyio's asyncio backend."""

    def __init__(self, workers: int = DEFAULT_WORKERS, deadline: float = DEFAULT_DEADLINE,
                 max_waiting: int = MAX_WAITING) -> None:
        self.workers, self.deadline, self.max_admitted = workers, deadline, workers + max_waiting
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._admitted = 0  # calls queued or running, abandoned ones included
        self._lock = threading.Lock()
        for n in range(workers):
            threading.Thread(target=self._work, name=f"laminae-mcp-read-{n}", daemon=True).start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if not job.future.set_running_or_notify_cancel():
                continue  # its caller gave up before it started
            job.started = time.monotonic()
            try:
                result = job.fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting call, which raises it
                job.future.set_exception(exc)
            else:
                job.future.set_result(result)
            if job.abandoned:
                log.warning("%s, abandoned at the deadline, finished after %.1f s", job.name,
                            time.monotonic() - job.started)

    def _release(self, _: Future) -> None:
        with self._lock:
            self._admitted -= 1

    async def run(self, name: str, fn: Callable[[], T]) -> T:
        """``fn()`` on a worker; a tool error if the server is full or the deadline passes first."""
        with self._lock:
            if self._admitted >= self.max_admitted:
                raise ToolError(f"the server is busy: {self._admitted} calls are running or waiting for one of "
                                f"its {self.workers} workers; retry in a few seconds")
            self._admitted += 1
        job = _Job(name, fn)
        job.future.add_done_callback(self._release)
        asked = time.monotonic()
        self._jobs.put(job)
        try:
            with anyio.move_on_after(self.deadline):
                return await asyncio.wrap_future(job.future)
        except anyio.get_cancelled_exc_class():  # the client cancelled, or the server stops
            self._abandon(job)
            raise
        if job.future.done() and not job.future.cancelled():
            return job.future.result()  # it finished as the deadline passed
        if self._abandon(job):
            raise ToolError(f"{name} waited {self.deadline:g} s (this server's deadline) for a free worker: "
                            f"all {self.workers} are busy with other calls; retry later, or ask the server's "
                            f"operator for more --workers")
        ran = time.monotonic() - (job.started or asked)
        log.warning("%s hit the %g s deadline after running %.1f s; its worker goes on until the read returns",
                    name, self.deadline, ran)
        raise ToolError(f"{name} hit this server's {self.deadline:g} s deadline (it ran {ran:.1f} s) and was "
                        "abandoned: ask for less - a smaller k or beam, fewer iterations, fewer or shorter "
                        "subqueries, fewer ids - or start the server with a longer --deadline")

    @staticmethod
    def _abandon(job: _Job) -> bool:
        """Stop waiting for ``job``: True if it had not started (then it never will)."""
        if job.future.cancel():
            return True
        job.abandoned = True
        return False


class Pinned:
    """The index the server reads, pinned to one manifest until ``use_latest`` moves it.

    Reads take no lock: a call takes one reference to the pinned ``laminae.Index`` and reads
    everything, the manifest version it reports included, from that one object, so no answer can
    mix two manifests; ``use_latest`` opens the newest one and swaps the reference (an attribute
    assignment, atomic), and calls already running finish on the old one."""

    def __init__(self, index: str, version: int | None = None, reads: Reads | None = None) -> None:
        self.root = index
        self.reads = reads or Reads()
        self.index = laminae.open(index, version=version)
        self.index.verify()  # every table version the manifest names is there: a damaged index fails now
        self._pin = self._pin_version(self.index.version)
        self._moving = threading.Lock()  # one use_latest at a time; reads never take it

    def _pin_version(self, version: int) -> ReaderPin | None:
        """A reader pin on ``version``, so that cleanups after refreshes keep its table versions."""
        try:
            return ReaderPin(self.root, version)
        except OSError as exc:  # a read-only index: served all the same
            log.warning("%s: manifest %d is not pinned (%s): once more than the kept number of newer manifests "
                        "are published, its table versions may be cleaned up; use_latest moves to the newest",
                        self.root, version, exc)
            return None

    def close(self) -> None:
        """Remove this server's reader pin (once; later calls do nothing)."""
        pin, self._pin = self._pin, None
        if pin is None:
            return
        try:
            pin.close()
        except OSError as exc:  # storage unreachable as the server stops: the pin expires by itself
            log.warning("%s: reader pin %s not removed (%s); it expires after %g s", self.root, pin.name, exc, pin.ttl)

    async def read(self, name: str, fn: Callable[[laminae.Index], T]) -> T:
        """``fn`` of the pinned index, on a worker under the deadline; a reader's error about the
        arguments, the index or the query model is a tool error with its message."""
        index = self.index

        def call() -> T:
            try:
                return fn(index)
            except (laminae.ReaderArgumentError, laminae.IndexOpenError, laminae.QueryModelError) as exc:
                raise ToolError(str(exc)) from None

        return await self.reads.run(name, call)

    async def use_latest(self) -> dict[str, int]:
        return await self.reads.run("use_latest", self._move)

    def _move(self) -> dict[str, int]:
        with self._moving:
            before = self.index
            try:
                latest = laminae.open(self.root)
                if latest.version != before.version:
                    latest.verify()
                    latest.graph  # noqa: B018 - loaded before the switch, so that no read waits for it
                    self.index = latest
                    if self._pin is None:
                        self._pin = self._pin_version(latest.version)
                    else:
                        self._pin.move(latest.version)
            except laminae.IndexOpenError as exc:
                raise ToolError(f"{exc}; this server stays on manifest {before.version}") from None
            return {"previous_version": before.version, "manifest_version": self.index.version}

    def warm(self) -> None:
        """Load the in-memory graph and the query model now, not on the first question."""
        index, started = self.index, time.monotonic()
        try:
            index.graph  # noqa: B018 - the load is the point
            index.embed_query("warm up")
            log.info("warm: the graph and the query model of manifest %d loaded in %.1f s", index.version,
                     time.monotonic() - started)
        except Exception as exc:  # noqa: BLE001 - a failing warm-up is reported by the first tool that needs it
            log.warning("warm-up of %s failed: %s", self.root, exc)


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

    tool = server.tool(annotations=read_only)

    @tool
    async def search(query: Query, layer: Literal[0, 1, 2] = 1, k: K = 10, offset: Offset = 0,
                     mode: Literal["auto", "dense", "fts", "hybrid"] = "auto", kinds: list[str] | None = None,
                     documents: Ids | None = None, max_chars: MaxChars = MAX_CHARS) -> dict[str, Any]:
        """Search one layer: 0 documents, 1 components (paragraphs, tables, images, videos and their
        transcripts; keyframes are images with a time; the default and the best first move for a
        question), 2 subcomponents (sentences, table rows, objects).
        mode: auto (fused dense + full-text), dense, fts (BM25 words) or hybrid. kinds: e.g.
        ["table"] at layer 1, ["transcript"] for what is said in videos, ["row"] at layer 2. documents: restrict to these document ids."""
        kinds = _kinds_of_layer(kinds, layer)
        return await pinned.read("search", lambda ix: _page(
            ix.search(query, layer=layer, k=offset + k, kinds=kinds, documents=documents, mode=mode),
            offset, k, max_chars, ix.version))

    @tool
    async def documents(query: Query, k: K = 10, offset: Offset = 0, granularity: Literal[0, 1, 2] = 0,
                        scope: Literal["global", "local"] = "global", anchors: Ids | None = None,
                        direction: Direction = "both", max_chars: MaxChars = MAX_CHARS) -> dict[str, Any]:
        """Rank documents for a question (FiF document hop). granularity: score a document by its
        own summary (0), its best component (1) or its best sentence/row (2). scope="local" with
        anchors (document or component ids) ranks only the documents linked from ("out"), linking
        to ("in") or either ("both") the anchors: the multi-hop move from a table row to the page
        it links."""
        if scope == "local" and not anchors:
            raise ToolError("scope='local' needs anchors: document or component ids from earlier results")
        return await pinned.read("documents", lambda ix: _page(
            ix.documents(query, k=offset + k, granularity=granularity, scope=scope, anchors=anchors,
                         direction=direction),
            offset, k, max_chars, ix.version))

    @tool
    async def components(query: Query, documents: Ids, k: K = 10, offset: Offset = 0,
                         granularity: Literal[1, 2] = 2, max_chars: MaxChars = MAX_CHARS) -> dict[str, Any]:
        """Rank the components of the given documents for a question (FiF component hop):
        granularity 1 scores a component by its own text, 2 by its best sentence, row or object."""
        return await pinned.read("components", lambda ix: _page(
            _known_documents(ix, documents).components(query, documents, k=offset + k, granularity=granularity),
            offset, k, max_chars, ix.version))

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


def parse_http(value: str) -> tuple[str, int]:
    """``HOST:PORT`` for ``--http`` (an IPv6 host in brackets: ``[::1]:8000``); a bare port means
    127.0.0.1."""
    host, _, port = value.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise McpConfigError(f"--http takes HOST:PORT (e.g. 127.0.0.1:8000); got {value!r}")
    return host.removeprefix("[").removesuffix("]") or "127.0.0.1", int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bound address) is this machine only: 127.0.0.0/8, ::1 or localhost."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


@dataclass(frozen=True)
class HttpLimits:
    """How long an HTTP client may take and how many connections it may hold (``flows.mcp_http``)."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    io_timeout: float = DEFAULT_IO_TIMEOUT
    keepalive_timeout: float = DEFAULT_KEEPALIVE_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    backlog: int = MAX_BACKLOG  # the listen queue, and the most connections asyncio accepts in one go


def descriptor_limit() -> int | None:
    """This process's soft limit on open file descriptors (None: unlimited or unknown)."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def http_limits(environ: Mapping[str, str] = os.environ, fd_limit: int | None = None) -> HttpLimits:
    """The HTTP server's limits from ``$LAMINAE_MCP_HEADER_TIMEOUT``, ``_IO_TIMEOUT``,
    ``_KEEPALIVE_TIMEOUT`` and ``_MAX_CONNECTIONS``, else the defaults.

    Connections must never take the last descriptors (``fd_limit``, default this process's soft
    limit): ``FD_RESERVE`` stay for the index, and asyncio accepts up to the listen backlog of
    sockets at once before any is counted, so the cap plus twice the backlog (a burst, and as many
    connections closed to make room but not yet released) fit in what is left. A default cap is
    lowered to half of that room, the backlog to what the cap leaves; a cap set too high is an
    ``McpConfigError`` naming ``ulimit -n``."""
    def pick(env: str, default: float, kind: type, lo: float, hi: float) -> Any:
        raw = environ.get(env, "").strip()
        if not raw:
            return default
        try:
            value = kind(raw)
        except ValueError:
            raise McpConfigError(f"${env}={raw!r} is not {'a whole' if kind is int else 'a'} number: "
                                 f"set it to {lo:g} to {hi:g}") from None
        if not lo <= value <= hi:
            raise McpConfigError(f"${env}={raw} is out of range: use {lo:g} to {hi:g}")
        return value

    limit = descriptor_limit() if fd_limit is None else fd_limit
    room = None if limit is None else limit - FD_RESERVE
    if room is not None and room < 64:
        raise McpConfigError(f"this process may open only {limit} files: raise the limit (ulimit -n 1024) to "
                             "serve over HTTP")
    default = DEFAULT_MAX_CONNECTIONS if room is None else min(DEFAULT_MAX_CONNECTIONS, room // 2)
    connections = pick(MAX_CONNECTIONS_ENV, default, int, 1, 1_000_000)
    if room is not None and connections > room - 32:
        raise McpConfigError(f"${MAX_CONNECTIONS_ENV}={connections} leaves too few of this process's {limit} file "
                             f"descriptors for the index and for accepting: set it to {room // 2} or less, or "
                             f"raise the limit (ulimit -n {2 * connections + FD_RESERVE})")
    backlog = MAX_BACKLOG if room is None else min(MAX_BACKLOG, (room - connections) // 2)
    return HttpLimits(header_timeout=pick(HEADER_TIMEOUT_ENV, DEFAULT_HEADER_TIMEOUT, float, 0.1, 3600),
                      io_timeout=pick(IO_TIMEOUT_ENV, DEFAULT_IO_TIMEOUT, float, 0.1, 3600),
                      keepalive_timeout=pick(KEEPALIVE_TIMEOUT_ENV, DEFAULT_KEEPALIVE_TIMEOUT, float, 0.1, 3600),
                      max_connections=connections, backlog=backlog)


@dataclass(frozen=True)
class Access:
    """Who may reach an HTTP server: where it listens, the bearer token, the Host names it answers,
    and how long a client may hold it."""

    host: str
    port: int
    token: str | None
    allowed_hosts: tuple[str, ...]
    limits: HttpLimits = field(default_factory=HttpLimits)

    @property
    def remote(self) -> bool:
        return not is_loopback(self.host)


def check_access(http: str | None, allow_remote: bool = False, token_file: str | None = None,
                 allowed_hosts: Sequence[str] = (), environ: Mapping[str, str] = os.environ) -> Access | None:
    """The access rules of ``laminae mcp`` from its options, checked before the index is opened
    (``None`` over stdio). Beyond loopback the server needs ``allow_remote`` and a token; the token
    comes from ``$LAMINAE_MCP_TOKEN`` or ``token_file``, never from the command line (where any
    user of the machine can read it in the process list)."""
    if http is None:
        used = [name for name, on in (("--allow-remote", allow_remote), ("--token-file", token_file),
                                      ("--allowed-host", allowed_hosts)) if on]
        if used:
            raise McpConfigError(f"{', '.join(used)} {'is' if len(used) == 1 else 'are'} for --http only: over stdio the client starts the server "
                                 "and nothing listens on the network")
        return None
    host, port = parse_http(http)
    token = _token(token_file, environ)
    access = Access(host, port, token, tuple(allowed_hosts), http_limits(environ))
    if access.remote and not allow_remote:
        raise McpConfigError(f"--http {http} serves the index beyond this machine: add --allow-remote and a bearer "
                             f"token (${TOKEN_ENV} or --token-file PATH), or bind 127.0.0.1")
    if access.remote and token is None:
        raise McpConfigError(f"--http {http} with --allow-remote needs a bearer token: put one in ${TOKEN_ENV} or in "
                             "a file named by --token-file (e.g. python -c \"import secrets; "
                             "print(secrets.token_urlsafe(32))\")")
    return access


def _token(token_file: str | None, environ: Mapping[str, str]) -> str | None:
    from_env = environ.get(TOKEN_ENV)
    if token_file is not None and from_env is not None:
        raise McpConfigError(f"a bearer token is set both in ${TOKEN_ENV} and by --token-file: keep one")
    if token_file is not None:
        try:
            with open(token_file, encoding="utf-8") as f:
                token, where = f.read().strip(), f"the token file {token_file}"
        except (OSError, UnicodeDecodeError) as exc:
            raise McpConfigError(f"--token-file {token_file} cannot be read ({exc}): name a file holding the token") \
                from None
    elif from_env is not None:
        token, where = from_env.strip(), f"${TOKEN_ENV}"
    else:
        return None
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() or not c.isprintable() or not c.isascii() for c in token):
        raise McpConfigError(f"{where} holds no usable bearer token: use at least {MIN_TOKEN_CHARS} printable ASCII "
                             "characters without spaces (e.g. python -c \"import secrets; "
                             "print(secrets.token_urlsafe(32))\")")
    return token


def host_names(access: Access) -> list[str]:
    """The names clients may reach the server by (its Host header, port aside): loopback, the bound
    address (for 0.0.0.0 or ::, this machine's host names) and ``access.allowed_hosts``."""
    names = [*LOOPBACK_NAMES]
    if access.host in ("0.0.0.0", "::"):
        names += [socket.gethostname(), socket.getfqdn()]
    elif not is_loopback(access.host):
        names.append(f"[{access.host}]" if ":" in access.host else access.host)
    return list(dict.fromkeys(n for n in (*names, *access.allowed_hosts) if n))


def transport_security(access: Access) -> TransportSecuritySettings:
    """The SDK's Host and Origin checks (DNS rebinding) for a server bound to ``access.host``: the
    ``host_names``, each on any port, over http or https (a TLS proxy in front). A request with another Host header gets 421, with
    another Origin 403; a request without Origin (no browser) passes."""
    names = host_names(access)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[h for n in names for h in (n, f"{n}:*")],
        allowed_origins=[o for n in names for scheme in ("http", "https") for o in (f"{scheme}://{n}",
                                                                                   f"{scheme}://{n}:*")])


class BearerToken:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``, compared
    in constant time; others get 401 with ``WWW-Authenticate: Bearer`` and the connection is
    closed. Not the SDK's ``TokenVerifier`` and ``AuthSettings``: those serve OAuth (an issuer URL
    is required) and guard only the ``/mcp`` route; this is one shared secret on every path.

    The token is checked as soon as the request head is whole (the earliest HTTP allows: the
    token is in the head), before any of the body is read; a client that never finishes its head
    is closed by the header timeout (``flows.mcp_http``), so holding the server needs no token
    but cannot last."""

    def __init__(self, app: Callable, token: str) -> None:
        self.app = app
        self._token = token.encode("ascii")

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        presented = [v for k, v in scope.get("headers", []) if k == b"authorization"]
        scheme, _, token = presented[0].partition(b" ") if len(presented) == 1 else (b"", b"", b"")
        if scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._token):
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})
            return
        challenge = 'Bearer realm="laminae"' + (', error="invalid_token"' if presented else "")
        body = json.dumps({"error": "invalid_token" if presented else "unauthorized",
                           "error_description": "this server needs Authorization: Bearer <its token>"}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", challenge.encode()), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


class OneLineDisconnects(logging.Filter):
    """The SDK logs a client that disconnects before its request body is whole (one cut by the body
    timeout, or one that went away) as an error with a traceback: one line at INFO instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        from starlette.requests import ClientDisconnect

        if record.exc_info and isinstance(record.exc_info[1], ClientDisconnect):
            record.msg, record.args = "a client disconnected before its request body was whole", ()
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


class OnShutdown:
    """ASGI middleware: ``callback()`` once the app has shut down (the lifespan protocol)."""

    def __init__(self, app: Callable, callback: Callable[[], None]) -> None:
        self.app, self.callback = app, callback

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def sent(message: dict) -> None:
            if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                self.callback()
            await send(message)

        await self.app(scope, receive, sent)


def serve(index: str, access: Access | None = None, version: int | None = None, warm: bool = True,
          deadline: float = DEFAULT_DEADLINE, workers: int = DEFAULT_WORKERS) -> None:
    """Serve ``index`` over stdio (``access`` None), or streamable HTTP at ``access.host``,
    ``access.port`` (path ``/mcp``), every request checked against its token if it has one; each
    call reads on one of ``workers`` threads and is answered within ``deadline`` seconds."""
    with _signals_held():  # a stop between the pin's creation and its handler would leave the pin
        pinned = Pinned(index, version, Reads(workers, deadline))
        _stop_on_signals(pinned)
    try:
        _run(build_server(pinned, warm), pinned, access, deadline, workers)
    finally:
        pinned.close()


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """``STOP_SIGNALS`` held back (delivered on leaving) in this thread and the threads it starts."""
    held = set(STOP_SIGNALS)
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def _stop_on_signals(pinned: Pinned) -> None:
    """SIGTERM and SIGHUP (a client or a supervisor stopping a stdio server) remove the reader pin,
    then end the process as the signal does by default. Without this the default action ends the
    process at once and the pin outlives it by its time to live (``laminae.pins``), keeping the
    manifest's table versions from cleanups for as long. A signal that is ignored (``nohup``) stays
    ignored. Over HTTP uvicorn takes SIGTERM over once it runs (the pin goes at the app's shutdown,
    ``OnShutdown``) and raises it again here when it has stopped."""
    def stop(signum: int, _frame: Any) -> None:
        pinned.close()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, stop)


def _run(server: MCPServer, pinned: Pinned, access: Access | None, deadline: float, workers: int) -> None:
    if access is None:
        server.run("stdio")
        return
    import uvicorn

    from laminae.flows.mcp_http import protocol_class

    index = pinned.root
    url = f"http://{f'[{access.host}]' if ':' in access.host else access.host}:{access.port}/mcp"
    if access.remote:
        print(f"warning: serving {index} to the network at {url}: every request must carry the bearer token, which "
              "plain HTTP sends in clear (put a TLS proxy in front beyond a trusted network); Host names answered: "
              f"{', '.join(host_names(access))} (more with --allowed-host)", file=sys.stderr)
    held = access.limits
    print(f"serving {index} over MCP at {url} (deadline {deadline:g} s, {workers} workers"
          f"{', bearer token required' if access.token else ''}; at most {held.max_connections} connections, "
          f"request heads within {held.header_timeout:g} s, stalled bodies and responses dropped after "
          f"{held.io_timeout:g} s, idle connections after {held.keepalive_timeout:g} s); Ctrl-C stops", file=sys.stderr)

    # stateless: every request stands alone, so a client that opens sessions and vanishes leaves
    # nothing behind (the SDK's sessions would stay 30 minutes each, 10,000 of them refusing every
    # new client); no tool keeps state per client, and use_latest moves the whole server
    app = server.streamable_http_app(host=access.host, transport_security=transport_security(access),
                                     stateless_http=True)
    if access.token is not None:
        app = BearerToken(app, access.token)
    logging.getLogger("mcp.server.streamable_http").addFilter(OneLineDisconnects())
    # uvicorn ends a server stopped by a signal by raising the signal again once it has shut down,
    # so the process ends before a `finally` of ours: the pin is removed at the app's shutdown
    app = OnShutdown(app, pinned.close)
    config = uvicorn.Config(app, host=access.host, port=access.port, log_level=server.settings.log_level.lower(),
                            http=protocol_class(held.header_timeout, held.io_timeout, held.max_connections),
                            ws="none", timeout_keep_alive=held.keepalive_timeout, backlog=held.backlog,
                            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
    anyio.run(uvicorn.Server(config).serve)


def limits(deadline: float | None = None, workers: int | None = None,
           environ: Mapping[str, str] = os.environ) -> tuple[float, int]:
    """(deadline seconds, workers) from the options, else ``$LAMINAE_MCP_DEADLINE`` and
    ``$LAMINAE_MCP_WORKERS``, else the defaults; a value out of range is an ``McpConfigError``."""
    def pick(value: float | None, env: str, option: str, default: float, kind: type, lo: float, hi: float) -> Any:
        if value is None and environ.get(env, "").strip():
            try:
                value = kind(environ[env])
            except ValueError:
                raise McpConfigError(f"${env}={environ[env]!r} is not a number: set it to {lo:g} to {hi:g}") from None
        if value is None:
            return default
        if not lo <= value <= hi:
            raise McpConfigError(f"{option} {value:g} is out of range: use {lo:g} to {hi:g}")
        return value

    return (pick(deadline, DEADLINE_ENV, "--deadline", DEFAULT_DEADLINE, float, 0.1, 3600),
            pick(workers, WORKERS_ENV, "--workers", DEFAULT_WORKERS, int, 1, 64))
