"""`laminae mcp` over streamable HTTP as a real process on 127.0.0.1, reached with the SDK's own
client: a stalled read does not hold other clients, a call past the deadline is a tool error and
the server goes on, the workers bound the reads abandoned at their deadline, a worst-case allowed
query is answered, an address beyond loopback needs --allow-remote and a bearer token checked on
every request, Host and Origin headers are checked, and a damaged index stops the server at start.

A read is stalled for real, with no hook in the server: a picture's file in the index's raw store
is replaced by a named pipe, so `get` of that picture blocks in the reader's own file read until
the test writes the bytes, and the test knows the read has begun when its end of the pipe opens.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
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

import laminae
from laminae.flows.demo import SiteServer
from laminae.pins import PIN_DIR, pinned_versions
from laminae.schemas.storage import MANIFEST_DIR, IndexFiles, raw_path
from tests.e2e.test_flow import build

TOKEN = "test-token-0123456789abcdef"
NORMAL = "rye bread baked for a whole day"
START_S = 180  # a cold start loads the graph and the query model on a busy machine
ANSWER_S = 60  # generous: a call the server must answer at once


@pytest.fixture(scope="module")
def demo(tmp_path_factory, prefect_harness) -> dict:
    """The demo site's index and two image components with distinct pictures."""
    tmp = tmp_path_factory.mktemp("mcp")
    with SiteServer() as site:
        summary = build(site.seeds(), tmp / "index", tmp)
    assert summary["status"] == "success", summary["errors_by_stage"]
    comps = laminae.open(str(tmp / "index")).table("components").to_arrow().to_pylist()
    images = list({c["image_key"]: c for c in comps if c["kind"] == "image" and c["image_key"]}.values())
    assert len(images) >= 2
    return {"index": tmp / "index", "images": images[:2]}


class Server:
    """``laminae mcp --http`` in a child process, its standard error in a file the test reads."""

    def __init__(self, index: Path, log: Path, *extra: str, host: str = "127.0.0.1",
                 env: dict[str, str | None] | None = None) -> None:
        self.port = _free_port()
        self.log = log
        self._err = log.open("w")
        self.proc = subprocess.Popen([sys.executable, "-m", "laminae.flows.cli", "mcp", "--index", str(index),
                                      "--http", f"{host}:{self.port}", *extra],
                                     stdin=subprocess.DEVNULL, stdout=self._err, stderr=subprocess.STDOUT,
                                     env=_env(env))
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def wait_for(self, pattern: str, timeout: float = START_S) -> str:
        """The first line of the server's log matching ``pattern``, once it is written."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.log.read_text()
            found = re.search(f"^.*(?:{pattern}).*$", text[:text.rfind("\n") + 1], re.MULTILINE)  # whole lines
            if found:
                return found.group(0)
            assert self.proc.poll() is None, f"the server exited:\n{self.log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no {pattern!r} in the server's log:\n{self.log.read_text()[-3000:]}"
            time.sleep(0.1)  # polls the log file: the line is the event waited for

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._err.close()


@contextlib.contextmanager
def serving(index: Path, log: Path, *extra: str, warm: bool = True, **kwargs) -> Iterator[Server]:
    server = Server(index, log, *extra, **kwargs)
    try:
        server.wait_for("Uvicorn running")
        if warm:  # no call of a test waits on the model's first load
            assert "warm: the graph and the query model" in server.wait_for("warm: |warm-up of")
        yield server
    finally:
        server.close()


def _env(changes: dict[str, str | None] | None) -> dict[str, str]:
    """This process's environment with ``changes`` (None: unset)."""
    return {k: v for k, v in {**os.environ, **(changes or {})}.items() if v is not None}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _client(url: str, **headers: str) -> Client:
    if not headers:
        return Client(url)
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers,
                                                                            timeout=httpx2.Timeout(30, read=300))))


def _json(result) -> dict:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


class Stall:
    """A picture of an index copy replaced by a named pipe: reading it blocks until ``release``."""

    def __init__(self, index: Path, image: dict) -> None:
        self.path = index / raw_path(image["image_key"])
        self.data = self.path.read_bytes()
        self.path.unlink()
        os.mkfifo(self.path)

    def wait_reader(self, timeout: float = ANSWER_S) -> int:
        """Block until the server opens the pipe to read (its `get` has begun); our writing end."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:  # ENXIO: no reader yet
                assert exc.errno == errno.ENXIO, exc
            assert time.monotonic() < deadline, "the server never began reading the picture"
            time.sleep(0.05)  # polls for the reader's open: the event waited for

    def release(self, fd: int) -> None:
        """Write the picture's bytes to the waiting reader and close the pipe."""
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb") as pipe:
            pipe.write(self.data)


def _copy(demo: dict, tmp_path: Path) -> Path:
    index = tmp_path / "index"
    shutil.copytree(demo["index"], index)
    return index


def test_a_stalled_call_does_not_hold_other_clients(demo, tmp_path):
    index = _copy(demo, tmp_path)
    image = demo["images"][0]
    stall = Stall(index, image)
    with serving(index, tmp_path / "server.log") as server:
        async def run() -> None:
            async with _client(server.url) as slow, _client(server.url) as other:
                async with anyio.create_task_group() as tg:
                    got: list = []

                    async def stalled_get() -> None:
                        got.append(await slow.call_tool("get", {"ids": [image["id"]]}))

                    tg.start_soon(stalled_get)
                    fd = await anyio.to_thread.run_sync(stall.wait_reader)
                    with anyio.fail_after(ANSWER_S):  # the old server held every call behind the stalled one
                        stats = _json(await other.call_tool("stats", {}))
                        found = _json(await other.call_tool("search", {"query": NORMAL, "k": 3}))
                        again = _json(await slow.call_tool("stats", {}))  # the same client, another call
                    assert not got, "the get returned while its picture could not be read"
                    assert stats["documents"] == again["documents"] == 14 and len(found["hits"]) == 3
                    await anyio.to_thread.run_sync(stall.release, fd)
                assert not got[0].is_error, got[0].content[0].text
                pictures = [c for c in got[0].content if c.type == "image"]
                assert len(pictures) == 1 and json.loads(got[0].content[0].text)["nodes"][0]["id"] == image["id"]

        anyio.run(run)
        # the SDK's DNS-rebinding check stays on for a loopback server
        assert _post(server.url, {"Host": f"evil.example:{server.port}"}).status_code == 421
        # the server pins the manifest it serves, so that cleanups after refreshes keep its tables
        assert pinned_versions(IndexFiles(str(index))) == {laminae.open(str(index)).version}
    assert not list((index / PIN_DIR).iterdir())  # removed when the server stopped


def test_a_call_past_the_deadline_is_a_tool_error_and_the_server_goes_on(demo, tmp_path):
    index = _copy(demo, tmp_path)
    first, second = (Stall(index, image) for image in demo["images"])
    with serving(index, tmp_path / "server.log", "--deadline", "5", "--workers", "2") as server:
        async def run() -> None:
            async with _client(server.url) as client:
                late = await client.call_tool("get", {"ids": [demo["images"][0]["id"]]})
                assert late.is_error and "5 s deadline" in late.content[0].text
                assert "smaller k" in late.content[0].text
                fd_first = first.wait_reader()  # its worker is still reading
                assert _json(await client.call_tool("search", {"query": NORMAL, "k": 3}))["hits"]

                late = await client.call_tool("get", {"ids": [demo["images"][1]["id"]]})
                assert late.is_error and "5 s deadline" in late.content[0].text
                fd_second = second.wait_reader()
                # both workers hold abandoned reads: the next call waits for one, then is refused
                busy = await client.call_tool("stats", {})
                assert busy.is_error and "all 2 are busy" in busy.content[0].text, busy.content[0].text

                first.release(fd_first)  # the abandoned read finishes in its worker, which is free again
                server.wait_for("get, abandoned at the deadline, finished after")
                assert _json(await client.call_tool("stats", {}))["documents"] == 14
                second.release(fd_second)

        anyio.run(run)
        server.wait_for(r"get hit the 5 s deadline after running")


def _distinct_words(index: Path, chars: int = 2000) -> str:
    """Distinct words of the index's own text (each one a full-text term that matches), ``chars`` long."""
    text = " ".join(r["text"] or "" for r in laminae.open(str(index)).table("components").search()
                    .select(["text"]).limit(None).to_arrow().to_pylist())
    words: dict[str, str] = {}
    for word in re.findall(r"[A-Za-z]{3,}", text):
        words.setdefault(word.lower(), word)
    query = ""
    for word in words.values():
        if len(query) + len(word) + 1 > chars:
            break
        query = f"{query} {word}".strip()
    return query


def test_a_worst_case_query_is_answered(demo, tmp_path):
    longest = _distinct_words(demo["index"])
    assert 1950 <= len(longest) <= 2000 and len(set(longest.lower().split())) > 150
    with serving(demo["index"], tmp_path / "server.log") as server:
        async def run() -> dict[str, float]:
            async with _client(server.url) as client:
                seconds: dict[str, list[float]] = {"normal": [], "longest": []}
                for _ in range(5):
                    for name, query in (("normal", NORMAL), ("longest", longest)):
                        started = time.perf_counter()
                        assert _json(await client.call_tool("search", {"query": query, "k": 10}))["hits"]
                        seconds[name].append(time.perf_counter() - started)
                subqueries = [longest] * 8
                started = time.perf_counter()
                beam = _json(await client.call_tool("beam_search", {"subqueries": subqueries, "beam": 200,
                                                                     "iterations": 3, "k": 50}))
                assert beam["hits"]
                return {**{k: sorted(v)[len(v) // 2] for k, v in seconds.items()},
                        "beam": time.perf_counter() - started}

        timing = anyio.run(run)
    print(f"\nsearch over MCP, median of 5: normal {timing['normal'] * 1000:.0f} ms, 2,000 characters of "
          f"{len(longest.split())} distinct words {timing['longest'] * 1000:.0f} ms "
          f"({timing['longest'] / timing['normal']:.1f}x); beam_search of 8 such subqueries, beam 200, 3 "
          f"iterations, k 50: {timing['beam'] * 1000:.0f} ms")


def _post(url: str, headers: dict[str, str]) -> httpx2.Response:
    """An MCP initialize request with these headers."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "test", "version": "0"}}}
    return httpx2.post(url, json=body, timeout=ANSWER_S,
                       headers={"Accept": "application/json, text/event-stream", **headers})


def _cli(*argv: str, env: dict[str, str | None] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "laminae.flows.cli", "mcp", *argv], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=START_S,
                          env=_env(env))


def test_beyond_loopback_needs_allow_remote_and_a_token(demo, tmp_path):
    missing = str(tmp_path / "not-an-index")  # refused before the index is opened
    no_token = {"LAMINAE_MCP_TOKEN": None}
    for argv, env, says in [
        (("--http", "0.0.0.0:8000"), no_token, "add --allow-remote and a bearer token"),
        (("--http", "0.0.0.0:8000", "--allow-remote"), no_token, "needs a bearer token"),
        (("--http", "10.1.2.3:8000", "--allow-remote"), no_token, "needs a bearer token"),
        (("--http", "0.0.0.0:8000", "--allow-remote"), {"LAMINAE_MCP_TOKEN": "short"}, "no usable bearer token"),
        (("--http", "0.0.0.0:8000", "--allow-remote", "--token-file", str(tmp_path / "none")), no_token,
         "cannot be read"),
        (("--token-file", str(tmp_path / "none")), no_token, "is for --http only"),
        (("--http", "127.0.0.1:8000", "--deadline", "0"), no_token, "out of range"),
    ]:
        done = _cli("--index", missing, *argv, env=env)
        assert done.returncode == 2 and not done.stdout, (argv, done.stderr)
        assert done.stderr.count("\n") == 1 and says in done.stderr, (argv, done.stderr)

    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    with serving(demo["index"], tmp_path / "server.log", "--allow-remote", "--token-file", str(token_file),
                 "--allowed-host", "lab.example", host="0.0.0.0", env=no_token, warm=False) as server:
        assert "warning: serving" in server.wait_for("warning:") and "lab.example" in server.log.read_text()
        refused = _post(server.url, {})
        assert refused.status_code == 401 and refused.headers["WWW-Authenticate"].startswith("Bearer")
        wrong = _post(server.url, {"Authorization": "Bearer " + TOKEN[:-1] + "x"})
        assert wrong.status_code == 401 and 'error="invalid_token"' in wrong.headers["WWW-Authenticate"]
        assert _post(server.url, {"Authorization": TOKEN}).status_code == 401  # no scheme
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert _post(server.url, bearer).status_code == 200
        assert _post(server.url, {**bearer, "Host": f"lab.example:{server.port}"}).status_code == 200
        assert _post(server.url, {**bearer, "Host": f"evil.example:{server.port}"}).status_code == 421
        assert _post(server.url, {**bearer, "Origin": "http://evil.example"}).status_code == 403
        assert _post(server.url, {**bearer, "Origin": f"http://lab.example:{server.port}"}).status_code == 200

        async def run() -> None:
            async with _client(server.url, Authorization=f"Bearer {TOKEN}") as client:
                found = _json(await client.call_tool("search", {"query": NORMAL, "k": 3}))
                assert len(found["hits"]) == 3
            with pytest.raises(Exception):  # noqa: B017, PT011 - the SDK's error for a 401 is its own
                async with _client(server.url) as client:
                    await client.call_tool("stats", {})

        anyio.run(run)


def test_a_token_guards_a_loopback_server_too(demo, tmp_path):
    with serving(demo["index"], tmp_path / "server.log", env={"LAMINAE_MCP_TOKEN": TOKEN}, warm=False) as server:
        assert "warning:" not in server.log.read_text()
        assert _post(server.url, {}).status_code == 401
        assert _post(server.url, {"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_a_damaged_index_stops_the_server_at_start(demo, tmp_path):
    index = _copy(demo, tmp_path)
    manifests = index / MANIFEST_DIR
    latest = manifests / "LATEST"
    manifest = manifests / f"{int(latest.read_text()):08d}.json"
    gone = json.loads(manifest.read_text())
    gone["tables"]["documents"] = 999  # a table version cleaned up since (Index.verify at start)
    cases = [
        (latest, b"garbage\n", "LATEST"),
        (manifest, manifest.read_bytes()[:40], manifest.name),
        (manifest, json.dumps(gone).encode(), "table 'documents'"),
    ]
    for path, damaged, says in cases:
        whole = path.read_bytes()
        path.write_bytes(damaged)
        for argv in ((), ("--http", f"127.0.0.1:{_free_port()}")):
            done = _cli("--index", str(index), *argv)
            lines = done.stderr.strip().splitlines()
            assert done.returncode == 2 and "Traceback" not in done.stderr, (says, argv, done.stderr[-2000:])
            assert lines[-1].startswith("error: ") and says in lines[-1], (says, argv, done.stderr[-2000:])
            assert not any(line.startswith("serving") for line in lines)  # nothing listened
        path.write_bytes(whole)
