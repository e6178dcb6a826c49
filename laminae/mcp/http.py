"""The connection guard of ``laminae mcp --http``: uvicorn's h11 protocol with nginx's timeouts and a
connection cap, so that slow or abandoned clients cannot hold the server.

Reads and writes nothing but the sockets it serves. uvicorn (0.54) times out only an idle
keep-alive connection (``timeout_keep_alive``), after a response: a connection that sends nothing,
half a request head, or half a body is kept forever, and ``limit_concurrency`` counts connections
only once a request head has arrived. ``GuardedH11`` adds, per connection, what nginx does:

- ``client_header_timeout``: a request head (the first one, or the next on a kept-alive
  connection) not whole ``header_timeout`` seconds after its first byte (a new connection: after
  it opens) is answered 408 and closed; one that sent nothing is closed;
- ``client_body_timeout``: a request body that stalls ``io_timeout`` seconds between two reads
  is answered 408 (if no response has begun) and closed;
- ``send_timeout``: a client that reads none of a response for ``io_timeout`` seconds while the
  server waits to write is dropped;
- a cap of ``max_connections`` open connections (nginx's ``worker_connections``), set below the
  process's descriptor limit: a connection past it closes the connection that has waited longest
  without a request in progress (nginx reuses its idle keep-alive connections the same way),
  and is answered 503 only when every open connection is serving a request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("laminae.mcp")


def _response(status: int, reason: str, text: str) -> bytes:
    body = text.encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol, each connection under the timeouts and the cap of ``protocol_class``."""

    header_timeout: float = 60.0
    io_timeout: float = 60.0
    max_connections: int = 512
    _counts: dict[str, int]  # per server (one class per server): connections closed, by why

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timer: asyncio.TimerHandle | None = None  # header or body timeout, whichever is running
        self._send_timer: asyncio.TimerHandle | None = None
        self._quiet_since = time.monotonic()  # when this connection last read a byte or ended a response

    # -- the cap -----------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections and not self._make_room():
            self._count("refused", "connection refused with 503: all %d connections are serving requests "
                        "(LAMINAE_MCP_MAX_CONNECTIONS)", self.max_connections)
            transport.write(_response(503, "Service Unavailable", "this server is at its connection limit: "
                                      "retry in a few seconds\n"))
            transport.close()
            return
        self._arm(self.header_timeout, self._header_timed_out)

    def _waiting(self) -> bool:
        """No request of this connection is being served (it is idle or still sending a head)."""
        return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)

    def _make_room(self) -> bool:
        waiting = [c for c in self.connections if c is not self and isinstance(c, GuardedH11) and c._waiting()
                   and not c.transport.is_closing()]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda c: c._quiet_since)
        self._count("evicted", "connection limit (%d, LAMINAE_MCP_MAX_CONNECTIONS) reached: closed the "
                    "connection waiting longest without a request", self.max_connections)
        oldest.transport.abort()
        return True

    def _count(self, why: str, message: str, *args: Any) -> None:
        """Log ``message`` at the 1st, 10th, 100th... connection closed for ``why`` (a flood logs a
        few lines, not one a connection)."""
        n = self._counts[why] = self._counts.get(why, 0) + 1
        if n == 10 ** (len(str(n)) - 1):
            log.warning(message + " (%d so far)", *args, n)

    # -- timeouts ------------------------------------------------------------------------------
    def _arm(self, seconds: float, then: Any) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, then)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def data_received(self, data: bytes) -> None:
        self._quiet_since = time.monotonic()
        if self._timer is None and self.conn.their_state is h11.IDLE:
            self._arm(self.header_timeout, self._header_timed_out)  # the next request of a kept-alive connection
        super().data_received(data)
        self._follow()

    def _follow(self) -> None:
        """Which timeout runs, from where the client's request stands after the events read."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:  # a head is whole, its body is not: a timeout between reads
            self._arm(self.io_timeout, self._body_timed_out)
        elif state is not h11.IDLE:  # whole, or closed: the app or uvicorn's keep-alive timer has it
            self._disarm()

    def on_response_complete(self) -> None:
        self._quiet_since = time.monotonic()
        super().on_response_complete()  # arms uvicorn's keep-alive timer (or serves a pipelined request)
        if not self.transport.is_closing():
            self._follow()

    def _header_timed_out(self) -> None:
        self._timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a response is still being written: not this timeout's business
        self._count("header_timeout", "closed a connection whose request head was not whole after %g s "
                    "(LAMINAE_MCP_HEADER_TIMEOUT)", self.header_timeout)
        if self.conn.trailing_data[0]:  # part of a head arrived: say why it is cut
            self.transport.write(_response(408, "Request Timeout", "the request head took too long\n"))
        self.transport.close()

    def _body_timed_out(self) -> None:
        self._timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY:
            return
        if self.flow.read_paused:  # the app is not reading yet: the client is not the one waiting
            self._arm(self.io_timeout, self._body_timed_out)
            return
        self._count("body_timeout", "closed a connection whose request body stalled for %g s "
                    "(LAMINAE_MCP_IO_TIMEOUT)", self.io_timeout)
        if self.cycle is not None:
            started = self.cycle.response_started
            self.cycle.disconnected = True  # the app reads the end of the request; what it sends goes nowhere
            self.cycle.message_event.set()
            if not started:
                self.transport.write(_response(408, "Request Timeout", "the request body stalled\n"))
        self.transport.close()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(self.io_timeout, self._send_timed_out)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _send_timed_out(self) -> None:
        self._send_timer = None
        self._count("send_timeout", "dropped a connection that read nothing of its response for %g s "
                    "(LAMINAE_MCP_IO_TIMEOUT)", self.io_timeout)
        self.transport.abort()  # close() would wait for the buffer the client does not read

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None
        super().connection_lost(exc)


def protocol_class(header_timeout: float, io_timeout: float, max_connections: int) -> type[GuardedH11]:
    """``GuardedH11`` with these limits, for ``uvicorn.Config(http=...)`` (one class per server)."""
    return type("GuardedH11", (GuardedH11,), {"header_timeout": header_timeout, "io_timeout": io_timeout,
                                              "max_connections": max_connections, "_counts": {}})
