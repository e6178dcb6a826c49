"""Worker processes for CPU-bound stages, where one input that kills its process costs only itself.

Reads and writes nothing itself. ``WorkerPool.map`` runs a module-level function over argument
tuples in spawned processes (no fork of a process that holds threads, torch or a Prefect client)
and returns the results in order. When a worker dies (a parser segfault, the OOM killer), the pool
is replaced and the calls that had not finished are run again together; if a worker dies again,
they are run one at a time, so the call that kills a worker gets a ``WorkerCrash`` and every
other call its result.
"""

from __future__ import annotations

import atexit
import multiprocessing
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

# calls a pool serves before its processes are replaced, between two maps (native parsers may
# leak); ProcessPoolExecutor's own max_tasks_per_child can hang on Python 3.11 (CPython gh-115634)
CALLS_PER_WORKER = 1000


@dataclass
class WorkerCrash:
    """The result of a call whose worker process died, twice."""

    reason: str


class WorkerPool:
    """A lazily started pool of ``workers`` spawned processes; one ``map`` at a time."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"a worker pool needs at least 1 worker, not {workers}")
        self.workers = workers
        self._executor: ProcessPoolExecutor | None = None
        self._served = 0
        self._lock = threading.Lock()

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
            self._served = 0
        return self._executor

    def _reset(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def _run(self, fn: Callable[..., Any], calls: Sequence[tuple], out: list[Any], todo: list[int]) -> list[int]:
        """Run the calls at ``todo`` together; returns those whose worker died (the pool is then reset)."""
        died: list[int] = []
        submitted: list[tuple[int, Future]] = []
        for i in todo:
            try:
                submitted.append((i, self._pool().submit(fn, *calls[i])))
            except BrokenProcessPool:  # a worker died while others were being submitted
                died.append(i)
        for i, future in submitted:
            try:
                out[i] = future.result()
            except BrokenProcessPool:
                died.append(i)
        self._served += len(todo)
        if died:
            self._reset()
        return sorted(died)

    def map(self, fn: Callable[..., Any], calls: Sequence[tuple]) -> list[Any]:
        """``fn(*args)`` for each argument tuple, in order; ``WorkerCrash`` where the worker died.

        Exceptions that ``fn`` raises are raised here, as from a plain call."""
        with self._lock:
            if self._served >= CALLS_PER_WORKER * self.workers:
                self.close()
            out: list[Any] = [None] * len(calls)
            died = self._run(fn, calls, out, list(range(len(calls))))
            if died:
                died = self._run(fn, calls, out, died)
            for i in died:
                if self._run(fn, calls, out, [i]):
                    out[i] = WorkerCrash("the worker process died (a crash in native code, or out of memory)")
            return out

    def close(self) -> None:
        """Stop the worker processes; the next ``map`` starts new ones."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None


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
