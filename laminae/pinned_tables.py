"""The LanceDB tables of an index, each checked out at the version one manifest names.

Reads ``<index>/<table>.lance`` through LanceDB's synchronous API and, for the full-text lookups
sent at once (``laminae.fulltext``), its async API, run on the reader's event loop (``LOOP``);
writes nothing. A table or table version that
is gone is an ``IndexOpenError`` naming it and the fix. Handles are opened once, whatever the number
of threads asking.

Once a version this manifest names is found cleaned up (by a read that fails, or by ``check_alive``,
which moves that answer from the in-memory view call at most every ``ALIVE_CHECK_S``), every
later read of these tables raises that same error: a reader answers from one whole manifest or
not at all, never from its view while its tables are gone (as a database session on a dropped
snapshot fails every query, not some).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import Future
from contextlib import contextmanager

import lancedb

from laminae.errors import IndexOpenError, first_line
from laminae.schemas.storage import storage_options
from laminae.schemas.tables import NODE_TABLES

VIEW_TABLES = (*NODE_TABLES, "edges")  # what the in-memory view (and its snapshot) is made of
# every table the reader reads (stats adds errors); fetches, runs and the embedding cache are the
# builder's, and the cleanup keeps only the newest version of the cache
READ_TABLES = (*VIEW_TABLES, "errors")
# seconds between two checks that the manifest's table versions still exist, by moves that read
# only the in-memory view (each check opens every read table at its version: ~1.5 ms on a local disk)
ALIVE_CHECK_S = 1.0


class _EventLoop:
    """An asyncio event loop on a daemon thread, started on first use (again in a forked child),
    for LanceDB's async API: callers on any thread (a notebook's, with its own loop running) wait
    for a coroutine run there."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def submit(self, coroutine: Coroutine) -> Future:
        """Start ``coroutine`` on the loop; its result comes through the future returned."""
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="laminae-reader-loop", daemon=True).start()
                self._loop, self._pid = loop, os.getpid()
            loop = self._loop
        return asyncio.run_coroutine_threadsafe(coroutine, loop)

    def run(self, coroutine: Coroutine):
        return self.submit(coroutine).result()


LOOP = _EventLoop()


class PinnedTables:
    """The tables of the index at ``root`` at the versions ``manifest`` names."""

    def __init__(self, root: str, manifest: dict) -> None:
        self.root = root
        self.manifest = manifest
        self.version: int = manifest["version"]
        self._db = lancedb.connect(root, storage_options=storage_options(root))
        self._tables: dict[str, object] = {}
        self._async_tables: dict[str, object] = {}
        self._lock = threading.Lock()
        self.gone: IndexOpenError | None = None  # set once a table version is found cleaned up
        self._checked_at = time.monotonic()  # an open reader's manifest was whole when it was read

    def table(self, name: str):
        """Table ``name`` checked out at this manifest's version."""
        if self.gone is not None:
            raise self.gone
        tbl = self._tables.get(name)
        if tbl is None:
            if name not in self.manifest["tables"]:
                raise KeyError(f"unknown table {name!r}; tables are {', '.join(self.manifest['tables'])}")
            with self._lock:
                if name not in self._tables:
                    self._tables[name] = self._checked_out(name)
                tbl = self._tables[name]
        return tbl

    def _checked_out(self, name: str):
        version = self.manifest["tables"][name]
        try:
            tbl = self._db.open_table(name)
        except (ValueError, FileNotFoundError, OSError, RuntimeError) as exc:
            raise IndexOpenError(
                f"{self.root}: table {name!r} that manifest {self.version} names cannot be opened "
                f"({first_line(exc)}): the "
                f"index is damaged; rebuild it with `laminae build`") from None
        try:
            tbl.checkout(version)
        except (ValueError, OSError, RuntimeError) as exc:
            raise self._found_gone(name, version, exc) from None
        return tbl

    def async_table(self, name: str):
        """Table ``name`` at this manifest's version through LanceDB's async API (opened once, on
        the reader's event loop, ``LOOP``)."""
        tbl = self._async_tables.get(name)
        if tbl is None:
            with self._lock:
                if name not in self._async_tables:
                    version = self.manifest["tables"][name]

                    async def checked_out():
                        db = await lancedb.connect_async(self.root, storage_options=storage_options(self.root))
                        opened = await db.open_table(name)
                        await opened.checkout(version)
                        return opened

                    try:
                        self._async_tables[name] = LOOP.run(checked_out())
                    except (ValueError, OSError, RuntimeError) as exc:
                        raise self._found_gone(name, version, exc) from None
                tbl = self._async_tables[name]
        return tbl

    def gone_message(self, name: str, version: int, exc: Exception) -> str:
        """What to say when version ``version`` of table ``name`` no longer exists (``exc``: LanceDB's
        error for checking that version out)."""
        return (f"{self.root}: version {version} of table {name!r}, which manifest {self.version} names, no longer "
                f"exists ({first_line(exc)}): it was cleaned up after newer manifests were published, and this "
                f"reader, opened on manifest {self.version}, can answer nothing more from it. Open the index again "
                "for its latest manifest (laminae.open(DIR) without version=; the MCP server: its use_latest tool); "
                "to read one manifest across refreshes, pin it (laminae.pins.ReaderPin, as the MCP server does) "
                "or keep more manifests' table versions (LAMINAE_KEEP_MANIFESTS, `laminae compact --keep N`)")

    def _found_gone(self, name: str, version: int, exc: Exception) -> IndexOpenError:
        """The error every read raises from now on: version ``version`` of ``name`` is gone."""
        if self.gone is None:  # two threads finding it at once: either's error will do
            self.gone = IndexOpenError(self.gone_message(name, version, exc))
        return self.gone

    def missing_version(self, names: tuple[str, ...] = ()) -> IndexOpenError | None:
        """The error for the first table version this manifest names that can no longer be checked
        out (tables ``names`` first, then every other table the reader reads), None if all can."""
        if self.gone is not None:
            return self.gone
        tables = self.manifest["tables"]
        for name in dict.fromkeys((*names, *READ_TABLES)):
            if name not in tables:
                continue
            try:
                self._db.open_table(name).checkout(tables[name])  # a fresh handle: a held one caches its version
            except (ValueError, FileNotFoundError, OSError, RuntimeError) as exc:
                return self._found_gone(name, tables[name], exc)
        return None

    def check_alive(self) -> None:
        """``IndexOpenError`` when a table version this manifest names has been cleaned up: checked
        at most every ``ALIVE_CHECK_S`` seconds (a move that reads only the in-memory view calls
        this, so that it fails as the moves reading tables do)."""
        if self.gone is not None:
            raise self.gone
        now = time.monotonic()
        if now - self._checked_at < ALIVE_CHECK_S:
            return
        self._checked_at = now
        gone = self.missing_version()
        if gone is not None:
            raise gone

    def verify(self) -> None:
        """Check out every table the reader reads (``READ_TABLES``) that the manifest names, and
        check that none of those versions has been cleaned up since a handle was opened."""
        for name in READ_TABLES:
            if name in self.manifest["tables"]:
                self.table(name)
        gone = self.missing_version()
        if gone is not None:
            raise gone

    @contextmanager
    def reading(self, *names: str) -> Iterator[None]:
        """Reads of tables ``names``: a LanceDB error there becomes an ``IndexOpenError`` when a
        version this manifest names has been cleaned up since the table was checked out (its
        files are gone), naming the table whose version is gone and quoting LanceDB's answer for
        it (not the read's error, which may be about another table's files); any other error
        passes unchanged."""
        try:
            yield
        except IndexOpenError:
            raise
        except (OSError, RuntimeError, ValueError):
            gone = self.missing_version(names)
            if gone is not None:
                raise gone from None
            raise

    def view_tables(self) -> dict:
        """The tables the in-memory view is made of (``VIEW_TABLES``), by name."""
        return {name: self.table(name) for name in VIEW_TABLES}
