"""Only committed work is published and dead runs leave nothing behind: real ``laminae`` processes
against real mounts (tmpfs, as root) and real SIGKILLs at named points (issue 44).

- A seed folder that is unmounted (empty), moved aside (cannot be listed) or shrunk past the
  deletion bound deletes nothing (a warning row says why); ``--allow-mass-delete`` lets it through.
- ``laminae compact`` after a refresh killed mid-write publishes the last manifest's rows only.
- Kills while the snapshot, the manifest or ``LATEST`` is written leave temporary folders and a
  stale ``LATEST`` that the next writer clears.
- A full disk while a first build creates its tables, or while the snapshot is written after
  publishing: the next build works without hand deletion; the snapshot failure is a warning.
Afterwards: no traceback, every subcomponent's parent published beside it, no temporary folder.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import lancedb
import pytest

import laminae
from laminae.schemas.storage import MANIFEST_DIR, SNAPSHOT_DIR
from laminae.snapshots import OLD_PREFIX, TMP_PREFIX
from tests.conftest import page
from tests.support.cli_runs import run_cli

pytestmark = pytest.mark.slow
CONTENT = ("documents", "components", "subcomponents", "edges")


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of ``size`` mounted at ``where`` (we run as root), unmounted after."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def write_site(site: Path, names: range | list[int], words: str = "starters") -> None:
    for i in names:
        (site / f"p{i}.html").write_bytes(page(f"Page {i}", f"<p>Note {i} about {words} and loaves.</p>"
                                                            f"<p>Another paragraph {i}. It has two sentences.</p>"))


def ok(run: subprocess.CompletedProcess, code: int = 0) -> subprocess.CompletedProcess:
    assert run.returncode == code, run.stdout[-3000:]
    assert "Traceback" not in run.stdout, run.stdout[-3000:]
    return run


def published(index: Path) -> dict:
    opened = laminae.open(str(index))
    return {name: opened.table(name).to_arrow().sort_by("id") for name in CONTENT}


def latest_rows(index: Path, name: str) -> list[dict]:
    return lancedb.connect(str(index)).open_table(name).to_arrow().to_pylist()


def assert_whole(tables: dict) -> None:
    """No row of the published version points at a row it does not hold."""
    docs = set(tables["documents"].column("id").to_pylist())
    comps = set(tables["components"].column("id").to_pylist())
    assert set(tables["components"].column("document_id").to_pylist()) <= docs
    assert set(tables["subcomponents"].column("parent_id").to_pylist()) <= comps
    assert set(tables["subcomponents"].column("document_id").to_pylist()) <= docs


def debris(index: Path) -> list[Path]:
    return [*(index / SNAPSHOT_DIR).glob(f"{TMP_PREFIX}*"), *(index / SNAPSHOT_DIR).glob(f"{OLD_PREFIX}*"),
            *(index / MANIFEST_DIR).glob(".tmp-*")]


def test_a_seed_folder_unmounted_moved_or_emptied_deletes_nothing(tmp_path):
    site, index, log = tmp_path / "site", tmp_path / "index", tmp_path / "run.log"
    bound = {"LAMINAE_MAX_DELETE_COUNT": "2"}  # remembered with the index's settings
    refresh = ["refresh", "--index", str(index)]
    with tmpfs(site, "4m"):
        write_site(site, range(5))
        ok(run_cli(["build", "--seeds", str(site), "--index", str(index)], log, env=bound))
    assert len(published(index)["documents"]) == 5
    # the mount point, unmounted: an empty folder where 5 files were
    ok(run_cli(refresh, log))
    assert len(published(index)["documents"]) == 5
    kept = [e for e in latest_rows(index, "errors") if e["reason"] == "deletions_skipped"]
    assert len(kept) == 1 and kept[0]["severity"] == "warning" and kept[0]["url"] == site.as_uri() + "/"
    # moved aside: the listing fails, the run fails and publishes nothing, and deletes nothing either
    before = laminae.open(str(index)).version
    site.rename(tmp_path / "aside")
    failed = ok(run_cli(refresh, log), code=1)
    assert "refresh failed" in failed.stdout
    assert len(latest_rows(index, "documents")) == 5 and laminae.open(str(index)).version == before
    (tmp_path / "aside").rename(site)
    # mounted again with 1 of the 5 files: 4 deletions pass max_delete_count 2 and half the index
    with tmpfs(site, "4m"):
        write_site(site, [0])
        ok(run_cli(refresh, log))
        assert len(published(index)["documents"]) == 5
        bounded = [e for e in latest_rows(index, "errors") if "would delete 4 of the index's 5" in e["message"]]
        assert len(bounded) == 1 and "--allow-mass-delete" in bounded[0]["message"]
        ok(run_cli([*refresh, "--allow-mass-delete"], log))
        assert published(index)["documents"].column("url").to_pylist() == [(site / "p0.html").as_uri()]


def test_compact_after_a_killed_refresh_publishes_only_committed_rows(tmp_path):
    site, index, log = tmp_path / "site", tmp_path / "index", tmp_path / "run.log"
    site.mkdir()
    write_site(site, range(5))
    ok(run_cli(["build", "--seeds", str(site), "--index", str(index)], log))
    committed = published(index)
    write_site(site, range(5), words="rye, spelt and barley")  # every page changes: every document rewritten
    killed = run_cli(["refresh", "--index", str(index)], log, crash_at="write:components")
    assert killed.returncode == -9, killed.stdout[-2000:]
    # the tables moved on: some rewritten documents' components are there, uncommitted
    assert any("rye, spelt" in (r["text"] or "") for r in latest_rows(index, "components"))
    compacted = ok(run_cli(["compact", "--index", str(index)], log))
    assert "held versions no manifest published" in compacted.stdout
    after = published(index)
    for name in CONTENT:  # the last manifest's rows, none of the killed run's
        assert after[name].equals(committed[name]), name
    ok(run_cli(["refresh", "--index", str(index)], log))
    final = published(index)
    assert_whole(final)
    texts = " ".join(t or "" for t in final["components"].column("text").to_pylist())
    assert texts.count("rye, spelt and barley") == 5 and "about starters" not in texts


def test_kills_at_the_snapshot_the_manifest_and_latest_leave_nothing_after_the_next_run(tmp_path):
    site, index, log = tmp_path / "site", tmp_path / "index", tmp_path / "run.log"
    site.mkdir()
    write_site(site, range(3))
    refresh = ["refresh", "--index", str(index)]
    ok(run_cli(["build", "--seeds", str(site), "--index", str(index)], log))
    # killed with the snapshot written whole under its temporary name (the manifest is published)
    write_site(site, [0], words="rye")
    assert run_cli(refresh, log, crash_at="snapshot:rename").returncode == -9
    assert len(list((index / SNAPSHOT_DIR).glob(f"{TMP_PREFIX}*"))) == 1
    # killed with the manifest written under its temporary name: nothing published
    write_site(site, [1], words="rye")
    assert run_cli(refresh, log, crash_at="publish:manifest").returncode == -9
    assert not list((index / SNAPSHOT_DIR).glob(f"{TMP_PREFIX}*"))  # cleared by this run, the next writer
    assert len(list((index / MANIFEST_DIR).glob(".tmp-*"))) == 1
    # killed between the manifest and LATEST
    write_site(site, [2], words="rye")
    assert run_cli(refresh, log, crash_at="publish:latest").returncode == -9
    assert not list((index / MANIFEST_DIR).glob(".tmp-*"))
    newest = max(int(p.stem) for p in (index / MANIFEST_DIR).glob("*.json"))
    assert int((index / MANIFEST_DIR / "LATEST").read_text()) == newest - 1
    # the next writer (a compaction here) repairs LATEST and writes the missing snapshot
    ok(run_cli(["compact", "--index", str(index)], log))
    assert int((index / MANIFEST_DIR / "LATEST").read_text()) == laminae.open(str(index)).version
    assert debris(index) == []
    ok(run_cli(refresh, log))
    assert debris(index) == []
    tables = published(index)
    assert_whole(tables)
    assert " ".join(tables["components"].column("text").to_pylist()).count("about rye") == 3


def test_a_first_build_that_filled_the_disk_is_built_again_without_hand_deletion(tmp_path):
    site, log = tmp_path / "site", tmp_path / "run.log"
    site.mkdir()
    write_site(site, range(3))
    with tmpfs(tmp_path / "disk", "40k") as disk:
        index = disk / "index"
        first = run_cli(["build", "--seeds", str(site), "--index", str(index)], log)
        assert first.returncode != 0 and "No space left on device" in first.stdout
        assert [t for t in index.glob("*.lance") if not list((t / "_versions").glob("*.manifest"))]
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        ok(run_cli(["build", "--seeds", str(site), "--index", str(index)], log))
        tables = published(index)
        assert len(tables["documents"]) == 3
        assert_whole(tables)


def test_a_snapshot_that_fills_the_disk_after_publishing_is_a_warning(tmp_path):
    site, index, log = tmp_path / "site", tmp_path / "index", tmp_path / "run.log"
    site.mkdir()
    write_site(site, range(3))
    with tmpfs(index / SNAPSHOT_DIR, "16k"):
        built = ok(run_cli(["build", "--seeds", str(site), "--index", str(index)], log))
        assert "cleanup:" in built.stdout  # the cleanup still ran after the snapshot failed
        warned = [e for e in latest_rows(index, "errors") if e["stage"] == "snapshot"]
        assert len(warned) == 1 and warned[0]["severity"] == "warning"
        assert "No space left on device" in warned[0]["message"]
        assert len(published(index)["documents"]) == 3
        assert debris(index) == []
    # room again: the next run writes its snapshot
    ok(run_cli(["refresh", "--index", str(index)], log))
    version = laminae.open(str(index)).version
    assert (index / SNAPSHOT_DIR / f"{version:08d}" / "COMPLETE").is_file()
