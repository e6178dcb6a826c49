"""What a dead writer leaves, recovered by the next one: temporary snapshot folders (removed only
once their writer's lock is gone), a table created without a version on a full disk (a real tmpfs),
``LATEST`` behind; and ``compact`` publishing only what a manifest committed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import laminae
from laminae.schemas.storage import MANIFEST_DIR, SNAPSHOT_DIR
from laminae.snapshots import TMP_PREFIX, cache
from laminae.tasks.storage.index_store import IndexConfigError, IndexStore
from tests.conftest import ROOT
from tests.support.synthetic import make_synthetic_index

EMBEDDER = {"model_id": "synthetic/random-unit-vectors", "dim": 16, "image_mode": "text_proxy"}


@pytest.fixture
def small_disk(tmp_path):
    """A real tmpfs of 40 KiB mounted at ``tmp_path / "disk"`` (we run as root), unmounted after."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40k", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_table_left_without_a_version_by_a_full_disk_is_created_again(small_disk):
    index = small_disk / "index"
    with pytest.raises((OSError, RuntimeError), match="No space left"):
        IndexStore(index).prepare(EMBEDDER)
    names = {p.name[:-6] for p in index.glob("*.lance")}
    versionless = [n for n in names if not list((index / f"{n}.lance" / "_versions").glob("*.manifest"))]
    assert versionless  # the state the issue found: a table folder LanceDB lists but cannot open
    subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)
    store = IndexStore(index)
    store.prepare(EMBEDDER)  # no hand deletion
    for name in ("documents", "components", "subcomponents", "edges", "fetches", "errors", "runs", "embeddings"):
        assert store.table(name).count_rows() == 0


def _hold_a_temporary_snapshot(parent: Path) -> subprocess.Popen:
    """Another process writing a snapshot: it makes its temporary folder and stays."""
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from laminae.snapshots import temporary, TMP_PREFIX
        tmp, lock = temporary(Path({str(parent)!r}), TMP_PREFIX)
        print(tmp, flush=True)
        time.sleep(600)
    """)
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)


def test_recover_removes_dead_writers_temporary_folders_and_repairs_latest(tmp_path):
    index = tmp_path / "index"
    make_synthetic_index(str(index), documents=6, components_per_document=2, subcomponents_per_component=2,
                         dim=16, text_index=False)
    snapshots = index / SNAPSHOT_DIR
    dead = snapshots / f"{TMP_PREFIX}dead"  # a writer killed mid-snapshot: no one holds its lock
    dead.mkdir()
    (dead / "vectors2.npy").write_bytes(b"\0" * 4096)
    (index / MANIFEST_DIR / ".tmp-abc123").write_bytes(b"{")
    (index / MANIFEST_DIR / "LATEST").write_text("0")  # behind, as after a kill between the two writes
    live = _hold_a_temporary_snapshot(snapshots)
    try:
        held = Path(live.stdout.readline().strip())
        found = IndexStore(index).recover()
        assert found == {"temporary_snapshots": 1, "temporary_files": 1, "latest_repaired": 1}
        assert not dead.exists() and held.is_dir()  # a live writer's folder stays
        assert not list((index / MANIFEST_DIR).glob(".tmp-*"))
        assert (index / MANIFEST_DIR / "LATEST").read_text() == "1"
    finally:
        live.kill()
        live.wait()
    assert IndexStore(index).recover()["temporary_snapshots"] == 1  # its writer died: removed
    assert not held.exists()


def test_compact_publishes_only_what_the_latest_manifest_committed(tmp_path):
    index = str(tmp_path / "index")
    make_synthetic_index(index, documents=6, components_per_document=2, subcomponents_per_component=2,
                         dim=16, text_index=False)
    published = {n: laminae.open(index).table(n).to_arrow().sort_by("id") for n in ("components", "subcomponents")}
    store = IndexStore(index)
    # a refresh killed mid-write: one table's rows replaced, the other not yet
    store.table("components").delete("true")
    store.append("components", [{**r, "id": r["id"] + "-next"} for r in published["components"].to_pylist()])
    with pytest.raises(IndexConfigError, match="no writer lease"):
        store.compact(2, "compact-test", exclusive=False)
    result = store.compact(2, "compact-test")
    assert result["published"] and set(result["rolled_back"]) == {"components"}
    opened = laminae.open(index)
    assert opened.version == result["manifest_version"] == 2
    for name, rows in published.items():
        assert opened.table(name).to_arrow().sort_by("id").equals(rows)
    manifest = json.loads((Path(index) / MANIFEST_DIR / "00000002.json").read_text())
    assert manifest["compacted_from"] == 1


def test_the_snapshot_cache_of_a_remote_index_drops_dead_readers_temporary_folders(tmp_path):
    folder = tmp_path / "snapshots" / "abcd"
    dead = folder / f"{TMP_PREFIX}killed"
    dead.mkdir(parents=True)
    live = _hold_a_temporary_snapshot(folder)
    try:
        held = Path(live.stdout.readline().strip())
        cache("s3://bucket/index", folder / "00000001-beef", lambda: None)
        assert not dead.exists() and held.is_dir()
    finally:
        live.kill()
        live.wait()
