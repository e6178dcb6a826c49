"""The MCP server's pure rules: who may reach an HTTP server (loopback, --allow-remote, the bearer
token and where it comes from, the Host names answered), its limits from options and the
environment, and the read workers' deadline, busy refusal and bound on abandoned reads (real
threads, each read blocked on an event the test sets)."""

from __future__ import annotations

import threading

import anyio
import pytest

pytest.importorskip("mcp")

from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

from laminae.mcp.access import (  # noqa: E402
    TOKEN_ENV,
    McpConfigError,
    check_access,
    host_names,
    http_limits,
    is_loopback,
    parse_http,
    transport_security,
)
from laminae.mcp.reads import DEFAULT_DEADLINE, DEFAULT_WORKERS, Reads  # noqa: E402
from laminae.mcp.server import limits  # noqa: E402

TOKEN = "0123456789abcdef-token"


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("localhost", True), ("LOCALHOST", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.5", False), ("example.org", False), ("127.0.0.1.nip.io", False),
])
def test_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_parse_http():
    assert parse_http("8000") == ("127.0.0.1", 8000)
    assert parse_http("[::1]:8000") == ("::1", 8000)
    assert parse_http("0.0.0.0:1") == ("0.0.0.0", 1)
    for bad in ("127.0.0.1", "127.0.0.1:0", "host:70000", "host:x"):
        with pytest.raises(McpConfigError, match="HOST:PORT"):
            parse_http(bad)


def test_stdio_takes_no_network_options():
    assert check_access(None, environ={TOKEN_ENV: TOKEN}) is None  # the variable guards HTTP only
    with pytest.raises(McpConfigError, match="--allow-remote, --token-file are for --http only"):
        check_access(None, allow_remote=True, token_file="t")


def test_beyond_loopback_needs_allow_remote_and_a_token(tmp_path):
    with pytest.raises(McpConfigError, match="add --allow-remote"):
        check_access("0.0.0.0:8000", environ={TOKEN_ENV: TOKEN})
    with pytest.raises(McpConfigError, match="needs a bearer token"):
        check_access("10.0.0.5:8000", allow_remote=True, environ={})
    access = check_access("0.0.0.0:8000", allow_remote=True, environ={TOKEN_ENV: f" {TOKEN}\n"})
    assert access.remote and access.token == TOKEN
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    assert check_access("[::]:8000", True, str(token_file), environ={}).token == TOKEN
    with pytest.raises(McpConfigError, match="keep one"):
        check_access("0.0.0.0:8000", True, str(token_file), environ={TOKEN_ENV: TOKEN})
    with pytest.raises(McpConfigError, match="cannot be read"):
        check_access("0.0.0.0:8000", True, str(tmp_path / "none"), environ={})
    for weak in ("short", "has a space in the middle", "é" * 20, ""):
        token_file.write_text(weak)
        with pytest.raises(McpConfigError, match="no usable bearer token"):
            check_access("0.0.0.0:8000", True, str(token_file), environ={})


def test_loopback_needs_neither_but_keeps_a_token():
    access = check_access("127.0.0.1:8000", environ={})
    assert not access.remote and access.token is None
    assert check_access("localhost:8000", environ={TOKEN_ENV: TOKEN}).token == TOKEN


def test_host_names_and_transport_security():
    loopback = check_access("127.0.0.1:8000", environ={})
    assert host_names(loopback) == ["127.0.0.1", "localhost", "[::1]"]
    named = check_access("10.0.0.5:8000", True, environ={TOKEN_ENV: TOKEN}, allowed_hosts=["lab.example"])
    assert host_names(named) == ["127.0.0.1", "localhost", "[::1]", "10.0.0.5", "lab.example"]
    v6 = check_access("[fd00::5]:8000", True, environ={TOKEN_ENV: TOKEN})
    assert "[fd00::5]" in host_names(v6)
    settings = transport_security(named)
    assert settings.enable_dns_rebinding_protection
    assert {"lab.example", "lab.example:*", "10.0.0.5:*"} <= set(settings.allowed_hosts)
    assert {"http://lab.example:*", "https://lab.example"} <= set(settings.allowed_origins)
    assert not any("evil" in h for h in settings.allowed_hosts)


def test_limits():
    assert limits(environ={}) == (DEFAULT_DEADLINE, DEFAULT_WORKERS)
    assert limits(environ={"LAMINAE_MCP_DEADLINE": "2.5", "LAMINAE_MCP_WORKERS": "8"}) == (2.5, 8)
    assert limits(10, 2, environ={"LAMINAE_MCP_DEADLINE": "2.5"}) == (10, 2)  # an option wins
    for kwargs, environ, says in [({"deadline": 0}, {}, "--deadline 0 is out of range"),
                                  ({"workers": 0}, {}, "--workers 0 is out of range"),
                                  ({}, {"LAMINAE_MCP_DEADLINE": "soon"}, "is not a number"),
                                  ({}, {"LAMINAE_MCP_DEADLINE": "nan"}, "out of range"),
                                  ({}, {"LAMINAE_MCP_WORKERS": "2.5"}, "is not a number")]:
        with pytest.raises(McpConfigError, match=says):
            limits(**kwargs, environ=environ)


def test_reads_deadline_busy_and_abandoned_work():
    reads = Reads(workers=1, deadline=0.5, max_waiting=1)
    gate, finished, ran = threading.Event(), threading.Event(), []

    def stuck() -> str:
        gate.wait(60)
        finished.set()
        return "late"

    async def run() -> None:
        with pytest.raises(ToolError, match="hit this server's 0.5 s deadline"):
            await reads.run("slow", stuck)
        # its worker still reads: the next call waits for it, then is refused without running
        with pytest.raises(ToolError, match="all 1 are busy"):
            await reads.run("queued", lambda: ran.append("queued"))
        gate.set()
        await anyio.to_thread.run_sync(finished.wait, 60)
        assert await reads.run("next", lambda: 42) == 42
        with pytest.raises(ToolError, match="kaput"):
            await reads.run("failing", _fail)

    anyio.run(run)
    assert ran == []  # a call whose deadline passed before a worker took it never ran


def test_reads_refuses_past_its_queue():
    reads = Reads(workers=1, deadline=30, max_waiting=1)
    gate = threading.Event()

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reads.run, "running", lambda: gate.wait(60))
            tg.start_soon(reads.run, "waiting", lambda: None)
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(ToolError, match="the server is busy: 2 calls"):
                await reads.run("third", lambda: None)
            gate.set()

    anyio.run(run)


def _fail() -> None:
    raise ToolError("kaput")


def test_http_limits_default_to_nginx_and_fit_the_descriptor_limit():
    limits = http_limits(environ={}, fd_limit=65536)
    assert (limits.header_timeout, limits.io_timeout, limits.keepalive_timeout) == (60, 60, 5)
    assert limits.max_connections == 512 and limits.backlog == 2048
    small = http_limits(environ={}, fd_limit=1024)  # the cap and an accept burst stay under the limit
    assert small.max_connections == 448 and small.max_connections + 2 * small.backlog + 128 <= 1024
    assert check_access("127.0.0.1:8000", environ={}).limits.max_connections <= 512
    env = {"LAMINAE_MCP_HEADER_TIMEOUT": "2.5", "LAMINAE_MCP_IO_TIMEOUT": "7", "LAMINAE_MCP_KEEPALIVE_TIMEOUT": "1",
           "LAMINAE_MCP_MAX_CONNECTIONS": "100"}
    set_ = check_access("127.0.0.1:8000", environ=env).limits
    assert (set_.header_timeout, set_.io_timeout, set_.keepalive_timeout, set_.max_connections) == (2.5, 7, 1, 100)
    for environ, says in [({"LAMINAE_MCP_HEADER_TIMEOUT": "soon"}, "is not a number"),
                          ({"LAMINAE_MCP_IO_TIMEOUT": "0"}, "out of range"),
                          ({"LAMINAE_MCP_MAX_CONNECTIONS": "2.5"}, "is not a whole number"),
                          ({"LAMINAE_MCP_MAX_CONNECTIONS": "1000"}, r"set it to 448 or less.*ulimit -n 2128")]:
        with pytest.raises(McpConfigError, match=says):
            http_limits(environ, fd_limit=1024)
    with pytest.raises(McpConfigError, match="raise the limit"):
        http_limits({}, fd_limit=100)
