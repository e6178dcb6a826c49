"""Where an index's in-memory view (``laminae.graph.Graph``) of one manifest version comes from.

Reads the version's snapshot (``laminae.snapshots``: memory-mapped), for an index on object
storage its copy in the local cache (streamed there from the tables on first use), or else the
view tables themselves (``laminae.pinned_tables.VIEW_TABLES``, into memory). Writes a snapshot only to
replace a damaged one (``check_at_open``, where the index is writable) or to fill the cache. Every
damaged snapshot that cannot be replaced is an ``IndexOpenError`` naming the file and the fix.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pyarrow as pa

from laminae import snapshots
from laminae.errors import IndexOpenError
from laminae.graph import Graph, write_snapshot
from laminae.pinned_tables import VIEW_TABLES, PinnedTables
from laminae.schemas.storage import is_remote
from laminae.snapshots import snapshot_problem

log = logging.getLogger(__name__)


def load(tables: PinnedTables, dim: int, snapshot: Path) -> Graph:
    """The view of ``tables``' version: from ``snapshot`` (for an index on object storage, cached
    there first) when it is whole, else from the tables."""
    if is_remote(tables.root) and snapshot_problem(snapshot, dim) is not None:
        snapshots.cache(tables.root, snapshot, lambda: save(tables, dim, snapshot, keep_whole=True))
        if snapshot_problem(snapshot, dim) is not None:  # the cache cannot be written: logged
            with tables.reading(*VIEW_TABLES):
                return Graph(tables.view_tables(), dim)
    for attempt in range(3) if snapshot.is_dir() else ():
        try:
            return Graph.load(snapshot)
        except (OSError, ValueError, pa.ArrowException) as exc:
            # checked at open: damaged or removed since (a cleanup of old versions' snapshots), or
            # swapped for another reader's whole rebuild while this one opened it: read that one
            problem = snapshot_problem(snapshot, dim)
            if problem is None and attempt < 2:
                continue
            raise IndexOpenError(_message(tables, snapshot, problem or f"{snapshot}: {exc}", None)) from None
    with tables.reading(*VIEW_TABLES):
        return Graph(tables.view_tables(), dim)


def save(tables: PinnedTables, dim: int, snapshot: Path, keep_whole: bool = False) -> Path:
    """Write the view of ``tables``' version to ``snapshot``, streamed from the tables
    (``laminae.graph.write_snapshot``): no layer is held in memory. ``keep_whole``: keep a whole
    snapshot another process put there meanwhile instead of replacing it."""
    with tables.reading(*VIEW_TABLES):
        write_snapshot(tables.view_tables(), dim, snapshot, keep_whole=keep_whole)
    return snapshot


def check_at_open(tables: PinnedTables, dim: int, snapshot: Path, latest: int | None) -> None:
    """At open: a snapshot of this version that exists must be whole (``snapshot_problem``: file
    headers and sizes, no data read). A damaged one is rebuilt from the tables with a warning
    (written beside and renamed into place, as a build writes it) where the index (or, on
    object storage, the cache) is writable; otherwise ``IndexOpenError`` saying how to rebuild it.
    No snapshot at all is no error: the view then loads from the tables, into memory. ``latest``:
    the index's latest manifest version, which the fix names."""
    if not snapshot.exists():
        return
    problem = snapshot_problem(snapshot, dim)
    if problem is None:
        return
    if is_remote(tables.root):  # the cache's copy: replaced on first use (load)
        log.warning("%s: the cached snapshot is damaged (%s); it is streamed again from the tables",
                    tables.root, problem)
        return
    log.debug("%s: rebuilding the damaged reader snapshot of manifest %d (%s)", tables.root, tables.version, problem)
    started = time.monotonic()
    for _ in range(3):  # readers rebuilding it at once: the check may meet another's swap, never a damaged one
        try:
            save(tables, dim, snapshot, keep_whole=True)
        except OSError as exc:
            raise IndexOpenError(_message(tables, snapshot, problem, latest, f"it cannot be rebuilt here: {exc}")) \
                from None
        again = snapshot_problem(snapshot, dim)
        if again is None:
            break
    else:
        raise IndexOpenError(_message(tables, snapshot, again, latest, "rebuilt, it is still damaged"))
    log.warning("%s: the reader snapshot of manifest %d was damaged (%s); rebuilt it from the tables in %.1f s",
                tables.root, tables.version, problem, time.monotonic() - started)


def _message(tables: PinnedTables, snapshot: Path, problem: str, latest: int | None, why: str = "") -> str:
    fix = f"run `laminae compact --index {tables.root}`, which rebuilds the latest manifest's snapshot"
    if latest is not None and latest != tables.version:
        fix = f"open the latest manifest ({latest}), or delete {snapshot} (the view then loads " \
              "from the tables, into memory)"
    return f"{problem}: the reader snapshot of manifest {tables.version} is damaged{'; ' + why if why else ''}. " \
           f"To fix it, {fix}"
