"""The read workers of ``laminae mcp`` and the index they read, pinned to one manifest.

Reads one index (a directory or an object-store URI) through the public reader, pinned to one
manifest until the ``use_latest`` tool moves it (``Pinned``); writes nothing but the reader pin
(``laminae.pins``) that keeps the pinned manifest's table versions from cleanups, removed by
``Pinned.close``. Each tool call reads on one of a fixed set of worker threads (``Reads``), never
on the event loop and under no lock, so clients do not wait for each other; a call still running
at its deadline is answered with a tool error (its thread goes on until the read returns: threads
cannot be killed; the fixed set bounds how many such reads run).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
from mcp.server.mcpserver.exceptions import ToolError

import laminae
from laminae.pins import ReaderPin

log = logging.getLogger("laminae.mcp")
T = TypeVar("T")

DEFAULT_DEADLINE = 30.0  # seconds; the slowest allowed call on the demo index takes under 1 s (docs/mcp.md)
DEFAULT_WORKERS = 4  # reads running at once, abandoned ones included
MAX_WAITING = 64  # calls waiting for a free worker; more are refused at once as busy


@dataclass
class _Job:
    name: str
    fn: Callable[[], Any]
    future: Future = field(default_factory=Future)
    started: float | None = None  # monotonic time a worker took it
    abandoned: bool = False  # its caller stopped waiting (deadline, cancellation)


class Reads:
    """Tool calls run on ``workers`` daemon threads, each call waiting at most ``deadline`` seconds
    (its wait for a free worker included).

    Not anyio's ``to_thread.run_sync(abandon_on_cancel=True, limiter=...)``: anyio gives the
    limiter's token back when the caller stops waiting, so reads abandoned at their deadline would
    go on running outside the bound; here a worker is busy until its read returns, whoever waits.
    A call whose deadline passes before a worker takes it never runs. The threads are daemons, so a
    read stuck in I/O does not keep the process from exiting. Calls wait with
    ``asyncio.wrap_future``: the SDK runs its servers on anyio's asyncio backend."""

    def __init__(self, workers: int = DEFAULT_WORKERS, deadline: float = DEFAULT_DEADLINE,
                 max_waiting: int = MAX_WAITING) -> None:
        self.workers, self.deadline, self.max_admitted = workers, deadline, workers + max_waiting
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._admitted = 0  # calls queued or running, abandoned ones included
        self._lock = threading.Lock()
        for n in range(workers):
            threading.Thread(target=self._work, name=f"laminae-mcp-read-{n}", daemon=True).start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if not job.future.set_running_or_notify_cancel():
                continue  # its caller gave up before it started
            job.started = time.monotonic()
            try:
                result = job.fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting call, which raises it
                job.future.set_exception(exc)
            else:
                job.future.set_result(result)
            if job.abandoned:
                log.warning("%s, abandoned at the deadline, finished after %.1f s", job.name,
                            time.monotonic() - job.started)

    def _release(self, _: Future) -> None:
        with self._lock:
            self._admitted -= 1

    async def run(self, name: str, fn: Callable[[], T]) -> T:
        """``fn()`` on a worker; a tool error if the server is full or the deadline passes first."""
        with self._lock:
            if self._admitted >= self.max_admitted:
                raise ToolError(f"the server is busy: {self._admitted} calls are running or waiting for one of "
                                f"its {self.workers} workers; retry in a few seconds")
            self._admitted += 1
        job = _Job(name, fn)
        job.future.add_done_callback(self._release)
        asked = time.monotonic()
        self._jobs.put(job)
        try:
            with anyio.move_on_after(self.deadline):
                return await asyncio.wrap_future(job.future)
        except anyio.get_cancelled_exc_class():  # the client cancelled, or the server stops
            self._abandon(job)
            raise
        if job.future.done() and not job.future.cancelled():
            return job.future.result()  # it finished as the deadline passed
        if self._abandon(job):
            raise ToolError(f"{name} waited {self.deadline:g} s (this server's deadline) for a free worker: "
                            f"all {self.workers} are busy with other calls; retry later, or ask the server's "
                            f"operator for more --workers")
        ran = time.monotonic() - (job.started or asked)
        log.warning("%s hit the %g s deadline after running %.1f s; its worker goes on until the read returns",
                    name, self.deadline, ran)
        raise ToolError(f"{name} hit this server's {self.deadline:g} s deadline (it ran {ran:.1f} s) and was "
                        "abandoned: ask for less - a smaller k or beam, fewer iterations, fewer or shorter "
                        "subqueries, fewer ids - or start the server with a longer --deadline")

    @staticmethod
    def _abandon(job: _Job) -> bool:
        """Stop waiting for ``job``: True if it had not started (then it never will)."""
        if job.future.cancel():
            return True
        job.abandoned = True
        return False


class Pinned:
    """The index the server reads, pinned to one manifest until ``use_latest`` moves it.

    Reads take no lock: a call takes one reference to the pinned ``laminae.Index`` and reads
    everything, the manifest version it reports included, from that one object, so no answer can
    mix two manifests; ``use_latest`` opens the newest one and swaps the reference (an attribute
    assignment, atomic), and calls already running finish on the old one."""

    def __init__(self, index: str, version: int | None = None, reads: Reads | None = None) -> None:
        self.root = index
        self.reads = reads or Reads()
        self.index = laminae.open(index, version=version)
        self.index.verify()  # every table version the manifest names is there: a damaged index fails now
        self._pin = self._pin_version(self.index.version)
        self._moving = threading.Lock()  # one use_latest at a time; reads never take it

    def _pin_version(self, version: int) -> ReaderPin | None:
        """A reader pin on ``version``, so that cleanups after refreshes keep its table versions."""
        try:
            return ReaderPin(self.root, version)
        except OSError as exc:  # a read-only index: served all the same
            log.warning("%s: manifest %d is not pinned (%s): once more than the kept number of newer manifests "
                        "are published, its table versions may be cleaned up; use_latest moves to the newest",
                        self.root, version, exc)
            return None

    def close(self) -> None:
        """Remove this server's reader pin (once; later calls do nothing)."""
        pin, self._pin = self._pin, None
        if pin is None:
            return
        try:
            pin.close()
        except OSError as exc:  # storage unreachable as the server stops: the pin expires by itself
            log.warning("%s: reader pin %s not removed (%s); it expires after %g s", self.root, pin.name, exc, pin.ttl)

    async def read(self, name: str, fn: Callable[[laminae.Index], T]) -> T:
        """``fn`` of the pinned index, on a worker under the deadline; a reader's error about the
        arguments, the index or the query model is a tool error with its message."""
        index = self.index

        def call() -> T:
            try:
                return fn(index)
            except (laminae.ReaderArgumentError, laminae.IndexOpenError, laminae.QueryModelError) as exc:
                raise ToolError(str(exc)) from None

        return await self.reads.run(name, call)

    async def use_latest(self) -> dict[str, int]:
        return await self.reads.run("use_latest", self._move)

    def _move(self) -> dict[str, int]:
        with self._moving:
            before = self.index
            try:
                latest = laminae.open(self.root)
                if latest.version != before.version:
                    latest.verify()
                    latest.graph  # noqa: B018 - loaded before the switch, so that no read waits for it
                    self.index = latest
                    if self._pin is None:
                        self._pin = self._pin_version(latest.version)
                    else:
                        self._pin.move(latest.version)
            except laminae.IndexOpenError as exc:
                raise ToolError(f"{exc}; this server stays on manifest {before.version}") from None
            return {"previous_version": before.version, "manifest_version": self.index.version}

    def warm(self) -> None:
        """Load the in-memory graph and the query model now, not on the first question."""
        index, started = self.index, time.monotonic()
        try:
            index.graph  # noqa: B018 - the load is the point
            index.embed_query("warm up")
            log.info("warm: the graph and the query model of manifest %d loaded in %.1f s", index.version,
                     time.monotonic() - started)
        except Exception as exc:  # noqa: BLE001 - a failing warm-up is reported by the first tool that needs it
            log.warning("warm-up of %s failed: %s", self.root, exc)
