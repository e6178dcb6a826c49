"""Worker processes for CPU-bound stages, where one input that kills its process costs only itself.

Reads and writes nothing itself. ``WorkerPool.map`` runs a module-level function over argument
tuples in spawned processes (no fork of a process that holds threads, torch or a Prefect client)
and returns the results in order. When a worker dies (a parser segfault, the OOM killer), the pool
is replaced and the calls that had not finished are run again one at a time, so the call that
kills a worker again gets a ``WorkerCrash`` and every other call its result.
"""

from __future__ import annotations

import atexit
import multiprocessing
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

TASKS_PER_CHILD = 1000  # a worker is replaced after this many calls, so leaks in native parsers stay bounded


@dataclass
class WorkerCrash:
    """The result of a call whose worker process died, twice."""

    reason: str


class WorkerPool:
    """A lazily started pool of ``workers`` spawned processes."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"a worker pool needs at least 1 worker, not {workers}")
        self.workers = workers
        self._executor: ProcessPoolExecutor | None = None

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                                 max_tasks_per_child=TASKS_PER_CHILD)
        return self._executor

    def _reset(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def map(self, fn: Callable[..., Any], calls: Sequence[tuple]) -> list[Any]:
        """``fn(*args)`` for each argument tuple, in order; ``WorkerCrash`` where the worker died.

        Exceptions that ``fn`` raises are raised here, as from a plain call."""
        try:
            futures = [self._pool().submit(fn, *args) for args in calls]
        except BrokenProcessPool:
            futures = []
        out: list[Any] = []
        pending = _Pending()
        for future in futures:
            try:
                out.append(future.result())
            except BrokenProcessPool:
                out.append(pending)
        out.extend(pending for _ in range(len(calls) - len(futures)))
        if any(r is pending for r in out):
            self._reset()
            for i, r in enumerate(out):
                if r is not pending:
                    continue
                try:
                    out[i] = self._pool().submit(fn, *calls[i]).result()
                except BrokenProcessPool as exc:
                    out[i] = WorkerCrash(str(exc) or "the worker process died")
                    self._reset()
        return out

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None


class _Pending:
    pass


_POOLS: dict[int, WorkerPool] = {}
_LOCK = threading.Lock()


def worker_pool(workers: int) -> WorkerPool:
    """The process's pool of ``workers`` processes, started on first use and kept for later batches."""
    with _LOCK:
        if workers not in _POOLS:
            _POOLS[workers] = WorkerPool(workers)
        return _POOLS[workers]


@atexit.register
def close_pools() -> None:
    """Stop every worker process (at the end of a run, and at exit)."""
    with _LOCK:
        for pool in _POOLS.values():
            pool.close()
        _POOLS.clear()
