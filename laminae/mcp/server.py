"""``laminae mcp``: an index served to agents over the Model Context Protocol (the official SDK).

Reads one index (a directory or an object-store URI) through the public reader, pinned to one
manifest until the ``use_latest`` tool moves it (``laminae.mcp.reads``), and the deadline and
worker settings (options, else ``LAMINAE_MCP_DEADLINE`` and ``LAMINAE_MCP_WORKERS``); writes
nothing but the reader pin, and the lines it prints to stderr. The tools are in
``laminae.mcp.tools``. Transports: stdio (the default) or streamable HTTP (``--http HOST:PORT``,
path ``/mcp``), whose access rules are ``laminae.mcp.access`` and whose connection guard is
``laminae.mcp.http``; the streamable HTTP transport is stateless, so no session outlives its
request. A stdio server stopped by SIGTERM or SIGHUP removes its reader pin before it ends.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import anyio
from mcp.server import MCPServer

from laminae.mcp.access import Access, BearerToken, McpConfigError, host_names, transport_security
from laminae.mcp.reads import DEFAULT_DEADLINE, DEFAULT_WORKERS, Pinned, Reads
from laminae.mcp.tools import build_server

DEADLINE_ENV, WORKERS_ENV = "LAMINAE_MCP_DEADLINE", "LAMINAE_MCP_WORKERS"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
GRACEFUL_SHUTDOWN_S = 10  # calls still running at a stop are cancelled after this long


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
        _stop_on_signals(pinned, forward=access is None)
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


def _stop_on_signals(pinned: Pinned, forward: bool = False) -> None:
    """SIGTERM and SIGHUP (a client or a supervisor stopping a stdio server) remove the reader pin,
    then end the process as the signal does by default. Without this the default action ends the
    process at once and the pin outlives it by its time to live (``laminae.pins``), keeping the
    manifest's table versions from cleanups for as long. A signal that is ignored (``nohup``) stays
    ignored. Over HTTP uvicorn takes SIGTERM over once it runs (the pin goes at the app's shutdown,
    ``OnShutdown``) and raises it again here when it has stopped."""
    stopping: list[int] = []

    def stop(signum: int, _frame: Any) -> None:
        if stopping:  # a second signal while the first is handled (run inside it): the first ends the process
            return
        stopping.append(signum)
        pinned.close()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    installed = []
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, stop)
            installed.append(signum)
    if forward and installed:
        _forward_to_main(installed)


def _forward_to_main(signals: list[int]) -> None:
    """Send each of ``signals`` on to the main thread whichever thread the kernel gave it to.
    Python runs a signal's handler in the main thread the next time that thread runs Python code;
    a signal handed to another thread (one that does not block it: LanceDB's, started before
    ``serve`` blocked them) while an idle stdio server's main thread sleeps in its event loop would
    wait for the next message on stdin. The C-level handler writes the signal's number to the
    wakeup fd from any thread; a thread started with the signals blocked reads it and interrupts
    the main thread with the same signal, once (the handler acts on the first signal only). Called
    from the main thread, with the signals held."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    if signal.set_wakeup_fd(write, warn_on_full_buffer=False) != -1:  # someone else's: leave it theirs
        signal.set_wakeup_fd(-1)
        os.close(read)
        os.close(write)
        return
    main = threading.main_thread().ident
    sent: set[int] = set()

    def forward() -> None:
        while data := os.read(read, 64):
            for signum in data:
                if signum in signals and signum not in sent and main is not None:
                    sent.add(signum)  # once: the main thread's own delivery writes the number again
                    signal.pthread_kill(main, signum)

    threading.Thread(target=forward, name="laminae-mcp-signals", daemon=True).start()


def _run(server: MCPServer, pinned: Pinned, access: Access | None, deadline: float, workers: int) -> None:
    if access is None:
        server.run("stdio")
        return
    import uvicorn

    from laminae.mcp.http import protocol_class

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
