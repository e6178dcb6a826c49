"""One writer per index: two command-line writers, a waiting one, a killed holder, the lease on S3
(moto's server), a manifest version that cannot be published twice, and cleanup that keeps what
the newest manifests and a reader's pin need."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import laminae
from laminae.tasks.storage.index_store import IndexConfigError, IndexStore
from laminae.tasks.storage.lease import LEASE_FILE, LeaseHeldError, acquire, holder_of, release
from tests.conftest import ROOT, Route, RouteServer, page
from tests.e2e.test_object_store import BUCKET, s3  # noqa: F401 - the moto server fixture

pytestmark = pytest.mark.slow
NODE_TABLES = ("documents", "components", "subcomponents", "edges")
WORDS = ("orchard", "mill", "bridge", "quarry", "harbour", "granary", "forge", "meadow")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(LAMINAE_EMBED__THREADS="1", LAMINAE_PROGRESS="off", **extra)
    env.pop("LAMINAE_CRASH_AT", None)
    return env


def _start(args: list[str], log: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "laminae.flows.cli", *args], cwd=ROOT, env=_env(**env),
                            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def _finish(proc: subprocess.Popen, timeout: float = 300) -> int:
    try:
        return proc.wait(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # what it left behind (its Prefect server)


def _wait_for_holder(index: Path, pid: int, proc: subprocess.Popen, timeout: float = 120) -> dict:
    """The lease file's record once it names ``pid`` (the file is the event waited on)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the holder ended before it took the lease"
        try:
            record = json.loads((index / LEASE_FILE).read_text() or "{}")
        except (FileNotFoundError, ValueError):
            record = {}
        if record.get("pid") == pid:
            return record
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} never named in {index / LEASE_FILE}")


class Site:
    """Three pages on 127.0.0.1; ``/slow`` answers only once ``gate`` is set, so a refresh that
    fetches it holds the lease for as long as the test wants."""

    def __init__(self, server: RouteServer) -> None:
        self.server = server
        self.gate = threading.Event()
        self.generation = 0
        self.publish()
        server.routes["/slow"] = self._slow

    def publish(self) -> None:
        """The next generation of the site: every page's text changes."""
        self.generation += 1
        for name in ("a", "b"):
            body = f"<h1>Page {name}</h1><p>Generation {self.generation} of page {name} talks about rivers and salt.</p>"
            self.server.routes[f"/{name}"] = Route(body=page(name, body))

    def _slow(self, handler) -> None:
        self.gate.wait(timeout=120)
        body = page("slow", f"<p>The slow page of generation {self.generation}, about lakes.</p>")
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html; charset=utf-8")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def seeds(self, path: Path, stable: int = 0) -> Path:
        """The seeds file: the changing pages and ``stable`` pages that never change (most of a real
        site), each a few paragraphs of its own."""
        paths = ["/a", "/b", "/slow"]
        for n in range(stable):
            paras = "".join(f"<p>Stable page {n}, part {k}: the {WORDS[(n + k) % len(WORDS)]} of the valley "
                            f"was measured in season {k} and noted in ledger {n * 10 + k}.</p>" for k in range(12))
            self.server.routes[f"/stable/{n}"] = Route(body=page(f"stable {n}", paras))
            paths.append(f"/stable/{n}")
        path.write_text("\n".join(self.server.url(p) for p in paths) + "\n")
        return path


def _ids_unique(index: Path) -> None:
    opened = laminae.open(str(index))
    for name in NODE_TABLES:
        ids = opened.table(name).to_arrow().column("id").to_pylist()
        assert len(ids) == len(set(ids)), f"{name} holds duplicate ids"


def test_two_writers_one_refused_one_waiting_and_a_killed_holder(server, tmp_path):
    site = Site(server)
    index = tmp_path / "index"
    seeds = site.seeds(tmp_path / "seeds.txt")
    site.gate.set()
    assert _finish(_start(["build", "--seeds", str(seeds), "--index", str(index)], tmp_path / "build.log")) == 0

    # A holds the lease while its crawl waits on the slow page
    site.gate.clear()
    site.publish()
    holder = _start(["refresh", "--index", str(index)], tmp_path / "a.log")
    record = _wait_for_holder(index, holder.pid, holder)
    refused = subprocess.run([sys.executable, "-m", "laminae.flows.cli", "refresh", "--index", str(index)],
                             cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2
    line = refused.stderr.strip().splitlines()[-1]
    assert f"pid {holder.pid}" in line and record["host"] in line and "--wait" in line and "Traceback" not in refused.stderr
    waiting = _start(["refresh", "--index", str(index), "--wait", "300"], tmp_path / "c.log")
    site.gate.set()
    assert _finish(holder) == 0, (tmp_path / "a.log").read_text()[-3000:]
    assert _finish(waiting) == 0, (tmp_path / "c.log").read_text()[-3000:]
    assert "waiting for laminae refresh" in (tmp_path / "c.log").read_text()

    # a holder killed with SIGKILL leaves no lease: the next writer goes ahead at once
    site.gate.clear()
    site.publish()
    killed = _start(["refresh", "--index", str(index)], tmp_path / "k.log")
    _wait_for_holder(index, killed.pid, killed)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait(timeout=30)
    site.gate.set()
    assert _finish(_start(["refresh", "--index", str(index)], tmp_path / "e.log")) == 0, \
        (tmp_path / "e.log").read_text()[-3000:]
    assert holder_of(str(index)) is None

    store = IndexStore(index)
    assert store.manifest_versions() == [1, 2, 3, 4]  # build, A, the waiting one, the one after the kill
    _ids_unique(index)
    texts = " ".join(laminae.open(str(index)).table("components").to_arrow().column("text").to_pylist())
    assert f"Generation {site.generation} of page a" in texts


def test_a_manifest_version_is_published_once(tmp_path):
    store = IndexStore(tmp_path / "index")
    store._create("_manifests/00000001.json", b"{}")
    with pytest.raises(IndexConfigError, match="another writer published"):
        store._create("_manifests/00000001.json", b"{}")
    # a garbled LATEST does not make a writer reuse a published number
    store.files.write_text("_manifests/LATEST", "garbage")
    assert store.latest_manifest_version() == 1


def test_the_lease_on_s3_names_its_holder_and_is_taken_over_when_the_holder_dies(s3, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("LAMINAE_LEASE_TTL", "3")
    uri = f"s3://{BUCKET}/lease-test/index"
    script = ("import sys; from laminae.tasks.storage.lease import acquire; "
              f"acquire({uri!r}, 'run-a', 'holder a'); print('held', flush=True); sys.stdin.read()")
    holder = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=dict(os.environ),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LeaseHeldError, match=f"pid {holder.pid}") as refused:
            acquire(uri)
        assert refused.value.holder["run_id"] == "run-a"
        # a live holder renews its lease (every TTL/4): waiting past the TTL does not take it over
        with pytest.raises(LeaseHeldError, match="did not free it within 5 s"):
            acquire(uri, wait=5)
        holder.kill()
        holder.wait(timeout=30)
        lease = acquire(uri, "run-b", "holder b", wait=60)  # taken over once the TTL has passed
        try:
            assert holder_of(uri)["pid"] == os.getpid()
        finally:
            release(lease)
        assert holder_of(uri) is None  # released: the lease object is gone
    finally:
        holder.kill()
    store = IndexStore(uri)
    store._create("_manifests/00000001.json", b"{}")
    with pytest.raises(IndexConfigError, match="another writer published"):
        store._create("_manifests/00000001.json", b"{}")


def test_cleanup_keeps_the_newest_manifests_and_pinned_ones(server, tmp_path, prefect_harness, monkeypatch):
    from laminae.flows.build import build_index, refresh_index
    from laminae.pins import ReaderPin

    site = Site(server)
    site.gate.set()
    index = str(tmp_path / "index")
    settings = {"embed": {"threads": 1}, "keep_manifests": 2}
    assert build_index(seeds=str(site.seeds(tmp_path / "seeds.txt")), index=index, settings=settings)["status"] == "success"
    pin = ReaderPin(index, 1, ttl=600)
    for _ in range(3):  # versions 2, 3, 4
        site.publish()
        assert refresh_index(index=index)["manifest_version"] > 1
    store = IndexStore(index)
    assert store.manifest_versions() == [1, 2, 3, 4]

    def readable(version: int) -> bool:
        try:
            opened = laminae.open(index, version=version)
            for name in NODE_TABLES:
                opened.table(name).to_arrow()
        except Exception:  # noqa: BLE001 - any failure to read the version counts
            return False
        return True

    # the pinned version and every one after it are kept (cleanup deletes by age, oldest first)
    assert all(readable(v) for v in (1, 2, 3, 4))
    text = " ".join(laminae.open(index, version=1).table("components").to_arrow().column("text").to_pylist())
    assert "Generation 1 of page a" in text
    pin.close()
    site.publish()
    assert refresh_index(index=index)["manifest_version"] == 5
    assert [readable(v) for v in (1, 2, 3, 4, 5)] == [False, False, False, True, True]
    snapshots = sorted(p.name for p in (tmp_path / "index" / "_snapshots").iterdir() if p.name.isdigit())
    assert snapshots == ["00000005"]  # the latest only: no pin is left

    # by hand: a damaged snapshot of the latest manifest is written again, under the lease
    from laminae.flows.cli import main
    from laminae.graph import snapshot_problem
    from laminae.schemas.storage import snapshot_dir

    latest = snapshot_dir(index, 5)
    (latest / "vectors1.npy").write_bytes((latest / "vectors1.npy").read_bytes()[:-100])
    assert snapshot_problem(latest) is not None
    before = laminae.open(index, version=5).stats()
    assert main(["compact", "--index", index, "--keep", "1"]) == 0
    assert store.latest_manifest_version() == 6  # the compacted tables, same contents, as a manifest
    assert snapshot_problem(snapshot_dir(index, 6)) is None  # written again, not linked from the damaged one
    assert not readable(4) and readable(6)  # 5 may name the same versions as 6 where nothing was compacted
    after = laminae.open(index, version=6).stats()
    assert {k: after[k] for k in ("documents", "components", "subcomponents", "edges")} == \
        {k: before[k] for k in ("documents", "components", "subcomponents", "edges")}
    lease = acquire(index)  # compact is a writer like the others
    try:
        refused = subprocess.run([sys.executable, "-m", "laminae.flows.cli", "compact", "--index", index],
                                 cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    finally:
        release(lease)
    assert refused.returncode == 2 and f"pid {os.getpid()}" in refused.stderr


def test_a_snapshot_that_fails_after_publishing_is_recorded_and_the_run_stands(server, tmp_path, prefect_harness):
    from laminae.flows.build import build_index

    site = Site(server)
    site.gate.set()
    index = tmp_path / "index"
    index.mkdir()
    (index / "_snapshots").write_text("not a folder")  # the snapshot cannot be written
    summary = build_index(seeds=str(site.seeds(tmp_path / "seeds.txt")), index=str(index),
                          settings={"embed": {"threads": 1}})
    assert summary["status"] == "success" and summary["manifest_version"] == 1
    assert "snapshot_error" in summary
    errors = IndexStore(index).table("errors").to_arrow().to_pylist()  # written after the manifest
    assert any(e["stage"] == "snapshot" and e["severity"] == "warning" and "laminae compact" in e["message"]
               for e in errors)
    opened = laminae.open(str(index))
    (index / "_snapshots").unlink()
    assert opened.search("rivers", layer=1, k=3, mode="fts")  # the version is live, read from the tables
