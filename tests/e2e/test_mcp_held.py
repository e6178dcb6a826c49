"""`laminae mcp` cannot be held by slow or abandoned clients (issue 44): real server processes on
127.0.0.1 and real sockets that connect and send nothing, send half a request head, or half a
body, hundreds at once and past the descriptor limit, and clients that open sessions and vanish,
while a normal client asks; and a stdio server stopped by SIGTERM or SIGHUP removes its reader pin.

The index is synthetic (no query model: the normal client's call is ``stats``, which reads the
tables), so a server starts in seconds.
"""

from __future__ import annotations

import contextlib
import json
import re
import resource
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from laminae.pins import PIN_DIR
from tests.e2e.test_mcp_server import ANSWER_S, Server, _env, _free_port
from tests.support.synthetic import make_synthetic_index

TOKEN = "held-token-0123456789abcdef"
START_S = 120
HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\n"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "gone", "version": "0"}}}


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("held") / "index"
    make_synthetic_index(str(path), documents=20, components_per_document=2, subcomponents_per_component=2,
                         dim=16, seed=1)
    return path


class Held(Server):
    """``laminae mcp --http --no-warm`` with these environment variables, under ``fd_limit``."""

    def __init__(self, index: Path, log: Path, env: dict[str, str], fd_limit: int | None = None) -> None:
        self.port = _free_port()
        self.log = log
        self._err = log.open("w")

        def limit() -> None:
            if fd_limit is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

        self.proc = subprocess.Popen([sys.executable, "-m", "laminae.flows.cli", "mcp", "--index", str(index),
                                      "--http", f"127.0.0.1:{self.port}", "--no-warm"],
                                     stdin=subprocess.DEVNULL, stdout=self._err, stderr=subprocess.STDOUT,
                                     env=_env(env), preexec_fn=limit)
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.wait_for("Uvicorn running", timeout=START_S)

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self, send: bytes = b"") -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=ANSWER_S)
        if send:
            sock.sendall(send)
        return sock


def _stats(url: str, token: str | None = None) -> dict:
    """A normal client's ``stats`` call, which must be answered within ``ANSWER_S``."""
    async def run() -> dict:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        client = Client(streamable_http_client(url, http_client=httpx2.AsyncClient(
            headers=headers, timeout=httpx2.Timeout(ANSWER_S))))
        with anyio.fail_after(ANSWER_S):
            async with client:
                result = await client.call_tool("stats", {})
        assert not result.is_error, result.content[0].text
        return json.loads(result.content[0].text)

    return anyio.run(run)


def _closed_by_server(socks: list[socket.socket], within: float) -> dict[int, bytes]:
    """What the server sent each socket before closing it (by index), waiting up to ``within`` s
    for all of them to be closed; a socket still open is left out."""
    got = {i: b"" for i in range(len(socks))}
    open_ = {s.fileno(): i for i, s in enumerate(socks)}
    poll = select.poll()  # select() takes no descriptor past 1023
    for fd in open_:
        poll.register(fd, select.POLLIN)
    deadline = time.monotonic() + within
    while open_ and time.monotonic() < deadline:
        for fd, _ in poll.poll(1000):
            i = open_[fd]
            try:
                data = socks[i].recv(65536)
            except ConnectionResetError:
                data = b""
            if data:
                got[i] += data
            else:
                del open_[fd]
                poll.unregister(fd)
    for i in open_.values():
        del got[i]
    return got


def _response(sock: socket.socket) -> bytes:
    """One whole response with a Content-Length (its head and body) read from ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?im)^content-length: *(\d+)", head).group(1))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, data
        body += chunk
    return head + b"\r\n\r\n" + body


def _raise_own_fd_limit(need: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= need


def test_slow_and_silent_clients_are_closed_at_their_timeouts_while_others_are_answered(index, tmp_path):
    env = {"LAMINAE_MCP_HEADER_TIMEOUT": "3", "LAMINAE_MCP_IO_TIMEOUT": "3", "LAMINAE_MCP_TOKEN": None}
    with Held(index, tmp_path / "server.log", env) as server:
        silent = [server.connect() for _ in range(100)]
        half_head = [server.connect(HEAD) for _ in range(100)]
        half_body = [server.connect(HEAD + b"Content-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"js")
                     for _ in range(100)]
        # a kept-alive connection whose next request stops half-way through its head
        kept = server.connect()
        kept.sendall(HEAD + b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        assert _response(kept).startswith(b"HTTP/1.1 ")
        kept.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        assert _stats(server.url)["documents"] == 20  # answered while 301 connections are held
        groups = {"silent": silent, "half_head": half_head, "half_body": half_body, "kept": [kept]}
        got = {name: _closed_by_server(socks, within=60) for name, socks in groups.items()}
        for name, socks in groups.items():
            assert len(got[name]) == len(socks), f"{len(socks) - len(got[name])} {name} connections still open"
        assert set(got["silent"].values()) == {b""}  # nothing sent, nothing said: closed
        for name in ("half_head", "half_body"):
            assert all(g.startswith(b"HTTP/1.1 408 ") for g in got[name].values()), (name, set(got[name].values()))
        assert got["kept"][0].startswith(b"HTTP/1.1 408 ")
        assert _stats(server.url)["documents"] == 20
        log = server.log.read_text()
        assert "request head was not whole after 3 s" in log and "request body stalled for 3 s" in log
        assert "Traceback" not in log
    for sock in (*silent, *half_head, *half_body, kept):
        sock.close()


def test_a_flood_past_the_descriptor_limit_does_not_lock_out_a_client_with_the_token(index, tmp_path):
    """nginx's worker_connections: the cap stays below the descriptor limit; a connection past it
    closes the one waiting longest without a request."""
    _raise_own_fd_limit(1200)
    env = {"LAMINAE_MCP_TOKEN": TOKEN}  # loopback with a token: the flood has none
    with Held(index, tmp_path / "server.log", env, fd_limit=1024) as server:
        flood = [server.connect(HEAD if i % 2 else b"") for i in range(1050)]
        assert _stats(server.url, TOKEN)["documents"] == 20
        cap = int(server.wait_for(r"at most \d+ connections").split("at most ")[1].split()[0])
        assert cap <= (1024 - 128) // 2
        refused = httpx2.post(server.url, json=INITIALIZE, timeout=ANSWER_S)
        assert refused.status_code == 401 and refused.headers["connection"] == "close"
        closed = _closed_by_server(flood, within=10)
        assert len(closed) >= 1050 - cap, (len(closed), cap)
        assert server.proc.poll() is None
        log = server.log.read_text()
        assert "Too many open files" not in log and "Traceback" not in log, log[-3000:]
        assert f"connection limit ({cap}, LAMINAE_MCP_MAX_CONNECTIONS) reached" in log
    for sock in flood:
        sock.close()


def test_clients_that_open_sessions_and_vanish_leave_nothing_behind(index, tmp_path):
    """The SDK kept a session per initialize until a DELETE or 30 minutes; 10,000 refused every
    new client with 503. The server is stateless: no session id is handed out, none is kept."""
    with Held(index, tmp_path / "server.log", {"LAMINAE_MCP_TOKEN": None}) as server:
        with httpx2.Client(timeout=ANSWER_S, headers={"Accept": "application/json, text/event-stream"}) as http:
            for _ in range(1000):
                answer = http.post(server.url, json=INITIALIZE)
                assert answer.status_code == 200 and "mcp-session-id" not in answer.headers
        # a client that asks and vanishes before its answer is read
        for _ in range(50):
            body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                               "params": {"name": "stats", "arguments": {}}}).encode()
            server.connect(HEAD + b"Content-Type: application/json\r\nMCP-Protocol-Version: 2025-06-18\r\n"
                           + f"Content-Length: {len(body)}\r\n\r\n".encode() + body).close()
        assert _stats(server.url)["documents"] == 20
        assert "Too many open sessions" not in server.log.read_text()


def _default_stop_signals() -> None:
    """In the child before it runs: SIGTERM and SIGHUP as a supervisor's signals find a server
    started on its own, whatever the test runner inherited (under ``nohup`` SIGHUP is ignored, and
    a server leaves an ignored signal ignored)."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGHUP})


@contextlib.contextmanager
def _stdio_server(index: Path, tmp_path: Path) -> Iterator[subprocess.Popen]:
    """``laminae mcp`` over stdio on ``index`` (its stderr in ``tmp_path / "err"``), killed if the
    test leaves it running."""
    proc = subprocess.Popen([sys.executable, "-m", "laminae.flows.cli", "mcp", "--index", str(index), "--no-warm"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=(tmp_path / "err").open("w"),
                            env=_env({}), preexec_fn=_default_stop_signals)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stdio_server_stopped_by_a_signal_removes_its_pin(index, tmp_path, signum):
    pins = index / PIN_DIR
    with _stdio_server(index, tmp_path) as proc:
        deadline = time.monotonic() + START_S
        while not (pins.is_dir() and list(pins.iterdir())):
            assert proc.poll() is None, (tmp_path / "err").read_text()[-3000:]
            assert time.monotonic() < deadline, "the server never pinned its manifest"
            time.sleep(0.1)  # polls for the pin file: the event waited for
        proc.send_signal(signum)
        assert proc.wait(timeout=ANSWER_S) == -signum  # ended by the signal, as its default action does
    assert not list(pins.iterdir()), "the pin outlived the server"


def _tgkill(pid: int, tid: int, signum: int) -> None:
    """Send ``signum`` to thread ``tid`` of process ``pid`` alone (Linux's tgkill)."""
    import ctypes

    if ctypes.CDLL(None, use_errno=True).tgkill(pid, tid, signum) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill {pid} {tid}")


def _threads_taking(pid: int, signum: int) -> list[int]:
    """The threads of process ``pid`` that do not block ``signum`` (any of them may be handed it)."""
    out = []
    for task in sorted((Path("/proc") / str(pid) / "task").iterdir(), key=lambda t: int(t.name)):
        blocked = next(line for line in (task / "status").read_text().splitlines() if line.startswith("SigBlk:"))
        if not int(blocked.split()[1], 16) >> (signum - 1) & 1:
            out.append(int(task.name))
    return out


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_handed_to_another_thread_still_stops_an_idle_stdio_server(index, tmp_path, signum):
    """The kernel may hand a process's signal to any thread that does not block it; LanceDB's
    threads start before the server blocks its stop signals. An idle stdio server's main thread
    sleeps in its event loop, where the Python handler would never run (it hung for good before)."""
    pins = index / PIN_DIR
    with _stdio_server(index, tmp_path) as proc:
        proc.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], START_S)
        assert ready and b'"result"' in proc.stdout.readline(), (tmp_path / "err").read_text()[-3000:]
        assert list(pins.iterdir())  # serving, pinned, and now idle in its event loop
        others = [tid for tid in _threads_taking(proc.pid, signum) if tid != proc.pid]
        assert others, "no thread beside the main one would take the signal"
        _tgkill(proc.pid, others[0], signum)
        assert proc.wait(timeout=ANSWER_S) == -signum
    assert not list(pins.iterdir()), "the pin outlived the server"
