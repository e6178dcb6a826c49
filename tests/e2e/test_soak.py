"""The whole of "left alone": a site on 127.0.0.1 that changes between refreshes, 20 refreshes run
back to back from the command line (some started while another holds the lease, some killed with
SIGKILL), an MCP HTTP client and a reader querying throughout. Afterwards every id is unique in
every table, the manifest versions are consecutive, every answer came from one manifest, the disk
is under twice a fresh build of the final site's and no lease is left behind."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

import laminae
from laminae.tasks.storage.index_store import IndexStore
from laminae.tasks.storage.lease import holder_of
from tests.conftest import ROOT
from tests.e2e.test_lease import NODE_TABLES, Site, _wait_for_holder
from tests.e2e.test_server import prefect_server  # noqa: F401 - one Prefect server for every CLI run

pytestmark = pytest.mark.slow
GENERATION = re.compile(r"Generation (\d+) of page")
REFRESHES = 20


def _disk(path: Path) -> int:
    """Bytes of the files under ``path``, a hard-linked file once (a snapshot linked from the last)."""
    inodes = {f.stat().st_ino: f.stat().st_size for f in path.rglob("*") if f.is_file()}
    return sum(inodes.values())


class Cli:
    def __init__(self, env: dict, tmp: Path) -> None:
        self.env = {k: v for k, v in env.items() if k != "LAMINAE_CRASH_AT"}
        self.env.update(LAMINAE_EMBED__THREADS="1", LAMINAE_PROGRESS="off")
        self.tmp = tmp
        self.count = 0

    def start(self, *args: str, crash_at: str | None = None) -> subprocess.Popen:
        self.count += 1
        env = dict(self.env, **({"LAMINAE_CRASH_AT": crash_at} if crash_at else {}))
        log = (self.tmp / f"cli-{self.count:02d}.log").open("w")
        return subprocess.Popen([sys.executable, "-m", "laminae.flows.cli", *args], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)

    def finish(self, proc: subprocess.Popen) -> int:
        try:
            return proc.wait(timeout=300)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

    def run(self, *args: str, **kwargs) -> int:
        return self.finish(self.start(*args, **kwargs))

    def log(self) -> str:
        return (self.tmp / f"cli-{self.count:02d}.log").read_text()[-3000:]


def _generations(texts: list[str]) -> set[int]:
    return {int(g) for text in texts for g in GENERATION.findall(text or "")}


class Queries:
    """A reader and an MCP client asking throughout; every answer's generations are recorded."""

    def __init__(self, index: Path, port: int) -> None:
        self.index, self.port = index, port
        self.stop = threading.Event()
        self.answers: list[tuple[str, int, set[int]]] = []  # (who, manifest version, generations)
        self.failures: list[str] = []
        self.threads = [threading.Thread(target=self._reader, daemon=True),
                        threading.Thread(target=lambda: anyio.run(self._mcp), daemon=True)]
        for thread in self.threads:
            thread.start()

    def _reader(self) -> None:
        while not self.stop.is_set():
            try:
                opened = laminae.open(str(self.index))
                hits = opened.search("rivers and salt", layer=1, k=6)
                texts = [node["text"] for node in opened.get([h.id for h in hits])]
                self.answers.append(("reader", opened.version, _generations(texts)))
            except Exception as exc:  # noqa: BLE001 - every failure is a finding, kept for the assertion
                self.failures.append(f"reader: {type(exc).__name__}: {exc}")
            self.stop.wait(0.2)

    async def _mcp(self) -> None:
        try:
            async with Client(f"http://127.0.0.1:{self.port}/mcp") as client:
                calls = 0
                while not self.stop.is_set():
                    calls += 1
                    if calls % 4 == 0:
                        await client.call_tool("use_latest", {})
                    result = await client.call_tool("search", {"query": "rivers and salt", "k": 6})
                    if result.is_error:
                        self.failures.append(f"mcp: {result.content[0].text}")
                    else:
                        answer = json.loads(result.content[0].text)
                        self.answers.append(("mcp", answer["manifest_version"],
                                             _generations([h.get("text") for h in answer["hits"]])))
                    await anyio.sleep(0.2)
        except Exception as exc:  # noqa: BLE001
            self.failures.append(f"mcp client: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)


def _mcp_server(index: Path, env: dict, tmp: Path) -> tuple[subprocess.Popen, int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "laminae.flows.cli", "mcp", "--index", str(index), "--http",
                             f"127.0.0.1:{port}"], cwd=ROOT, env=env, stdout=(tmp / "mcp.log").open("w"),
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while True:
        assert proc.poll() is None, (tmp / "mcp.log").read_text()[-3000:]
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return proc, port
        assert time.monotonic() < deadline, "the MCP HTTP server did not start"
        time.sleep(0.3)


def test_twenty_refreshes_with_contention_kills_and_readers(server, tmp_path, prefect_server):  # noqa: F811
    site = Site(server)
    site.gate.set()
    cli = Cli(prefect_server, tmp_path)
    index = tmp_path / "index"
    seeds = site.seeds(tmp_path / "seeds.txt", stable=12)  # most of the site never changes
    assert cli.run("build", "--seeds", str(seeds), "--index", str(index)) == 0, cli.log()
    mcp, port = _mcp_server(index, cli.env, tmp_path)
    queries = Queries(index, port)
    outcomes: list[str] = []
    try:
        crash_points = iter(["write:subcomponents", "publish", "write:components", "publish"])
        step = 0
        while len(outcomes) < REFRESHES:
            site.publish()
            kind, step = step % 5, step + 1
            if kind in (0, 1):
                assert cli.run("refresh", "--index", str(index)) == 0, cli.log()
                outcomes.append("published")
            elif kind == 2:  # killed by SIGKILL at a point of its own writing
                assert cli.run("refresh", "--index", str(index), crash_at=next(crash_points)) == -signal.SIGKILL
                outcomes.append("killed at a write")
            elif kind == 3:  # one holds the lease; one started meanwhile is refused, one waits
                site.gate.clear()
                holder = cli.start("refresh", "--index", str(index))
                _wait_for_holder(index, holder.pid, holder)
                assert cli.run("refresh", "--index", str(index)) == 2
                assert "is being written by laminae refresh" in cli.log()
                waiting = cli.start("refresh", "--index", str(index), "--wait", "300")
                site.gate.set()
                assert cli.finish(holder) == 0
                assert cli.finish(waiting) == 0
                outcomes += ["published", "refused", "published after waiting"]
            else:  # killed by SIGKILL while holding the lease, mid-crawl
                site.gate.clear()
                holder = cli.start("refresh", "--index", str(index))
                _wait_for_holder(index, holder.pid, holder)
                os.killpg(holder.pid, signal.SIGKILL)
                holder.wait(timeout=30)
                site.gate.set()
                outcomes.append("killed holding the lease")
    finally:
        site.gate.set()
        queries.close()
        mcp.terminate()
        mcp.wait(timeout=30)

    published = outcomes.count("published") + outcomes.count("published after waiting")
    assert not queries.failures, queries.failures[:5]
    assert holder_of(str(index)) is None
    store = IndexStore(index)
    assert store.manifest_versions() == list(range(1, published + 2))  # the build, then each published refresh
    opened = laminae.open(str(index))
    for name in NODE_TABLES:
        ids = opened.table(name).to_arrow().column("id").to_pylist()
        assert len(ids) == len(set(ids)), f"{name} holds duplicate ids"
    final = _generations(opened.table("components").to_arrow().column("text").to_pylist())
    assert final == {site.generation}
    by_who = {who: [a for a in queries.answers if a[0] == who] for who in ("reader", "mcp")}
    assert all(len(answers) >= 10 for answers in by_who.values()), {k: len(v) for k, v in by_who.items()}
    assert all(len(gens) == 1 for _, _, gens in queries.answers), [a for a in queries.answers if len(a[2]) != 1][:5]
    assert len({v for _, v, _ in by_who["mcp"]}) > 1  # the server moved with use_latest

    assert cli.run("build", "--seeds", str(seeds), "--index", str(tmp_path / "fresh")) == 0, cli.log()
    soaked, fresh = _disk(index), _disk(tmp_path / "fresh")
    print(f"disk after {REFRESHES} refreshes: {soaked / 1e6:.2f} MB; a fresh build: {fresh / 1e6:.2f} MB "
          f"({soaked / fresh:.2f}x); outcomes {outcomes}")
    assert soaked <= 2 * fresh
