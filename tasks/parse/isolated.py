"""Worker processes for the stages that run untrusted bytes through parsers and decoders, where one
input that kills its process, or runs past its deadline, costs only itself.

Reads and writes nothing itself. ``WorkerPool.map`` runs a module-level function over argument
tuples in worker processes and returns the results in order. Each worker is a fresh interpreter
started with ``subprocess`` (no fork of a process that holds threads, torch or a Prefect client,
and no ``multiprocessing``, whose daemonic Dask workers may not have children); calls and results
travel pickled over its stdin and stdout, one call at a time, so the pool knows which call each
process is running. A call may have a deadline in seconds: a worker still running it then is
killed, the call's result is a ``WorkerTimeout``, and a fresh process takes the next call. A
worker that dies (a parser segfault, the OOM killer) has its call run once more in a fresh
process; if that one dies too, the call's result is a ``WorkerCrash``. Every other call gets its
result. Code running in a worker can move its own deadline once it knows its input's size
(``extend_deadline``: a PDF once its pages are counted). The modules a function's module names in
``WORKER_IMPORTS`` are imported before its call's time begins, as its own module is.
"""

from __future__ import annotations

import atexit
import importlib
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# calls a worker serves before it is replaced, between two maps (native parsers may leak)
CALLS_PER_WORKER = 1000
STARTUP_S = 300.0  # a worker that takes longer to start a call (to import its modules) is broken
_HEADER = 8  # bytes of a frame's length
_BOOT = "import sys; from laminae.tasks.parse.isolated import serve; serve(int(sys.argv[1]))"


@dataclass
class WorkerCrash:
    """The result of a call whose worker process died, twice."""

    reason: str


@dataclass
class WorkerTimeout:
    """The result of a call still running at its deadline; its worker process was killed."""

    seconds: float  # the deadline it ran past, from the call's start


def _read_exact(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other end closed the pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _write_frame(fd: int, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(len(data).to_bytes(_HEADER, "little") + data)
    while view:
        view = view[os.write(fd, view):]


def _read_frame(fd: int) -> Any:
    return pickle.loads(_read_exact(fd, int.from_bytes(_read_exact(fd, _HEADER), "little")))


class _Worker:
    """One worker process and the calls it has served."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.served = 0
        self._lifeline: int | None = None  # write end of a pipe the worker watches: it ends with us

    def _start(self) -> subprocess.Popen:
        # stdout carries the frames; the worker points its own fd 1 at stderr first
        watched, self._lifeline = os.pipe()
        try:
            proc = subprocess.Popen([sys.executable, "-c", _BOOT, str(watched)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, bufsize=0, close_fds=True, pass_fds=(watched,))
        finally:
            os.close(watched)
        _write_frame(proc.stdin.fileno(), list(sys.path))  # what spawn does: the caller's modules import
        self.proc, self.served = proc, 0
        return proc

    def stop(self, kill: bool = False) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if kill:
            proc.kill()
        else:
            proc.stdin.close()  # the worker ends at the end of its input
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if not pipe.closed:
                pipe.close()
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None

    def call(self, fn: Callable[..., Any], args: tuple, seconds: float | None) -> tuple[str, Any]:
        """("ok", result), ("raise", exception), ("crash", reason) or ("timeout", seconds)."""
        proc = self.proc if self.proc is not None and self.proc.poll() is None else self._start()
        try:
            _write_frame(proc.stdin.fileno(), (fn, args))
        except (BrokenPipeError, OSError):
            return "crash", self._died()
        started, limit, begun = time.monotonic(), STARTUP_S, False  # the deadline counts once it is unpickled
        out = proc.stdout.fileno()
        while True:
            left = None if limit is None else started + limit - time.monotonic()
            if left is not None and left <= 0:
                self.stop(kill=True)
                if not begun:
                    return "crash", f"the worker process did not start the call within {STARTUP_S:g} s"
                return "timeout", limit
            if not select.select([out], [], [], left)[0]:
                continue
            try:
                kind, value = _read_frame(out)
            except (EOFError, OSError, pickle.UnpicklingError):
                return "crash", self._died()
            if kind == "started":  # its modules are imported: the call's own time begins
                started, limit, begun = time.monotonic(), seconds, True
                continue
            if kind == "deadline":  # the call moved its own deadline
                limit = value
                continue
            self.served += 1
            return kind, value

    def _died(self) -> str:
        proc = self.proc
        self.stop(kill=True)
        code = proc.returncode if proc is not None else None
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return f"the worker process died ({how}: a crash in native code, or out of memory)"


class WorkerPool:
    """Up to ``workers`` worker processes, started on first use; one ``map`` at a time."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"a worker pool needs at least 1 worker, not {workers}")
        self.workers = workers
        self._slots = [_Worker() for _ in range(workers)]
        self._lock = threading.Lock()

    def map(self, fn: Callable[..., Any], calls: Sequence[tuple],
            deadlines: float | Sequence[float | None] | None = None) -> list[Any]:
        """``fn(*args)`` for each argument tuple, in order, each within its deadline (seconds from
        its start; one for all calls, one per call, or None: no deadline). A call past its
        deadline gets a ``WorkerTimeout``; one whose worker died twice a ``WorkerCrash``.

        An exception that ``fn`` raises is raised here (the first in call order) once every
        call has ended, as from a plain call."""
        if deadlines is None or isinstance(deadlines, int | float):
            deadlines = [deadlines] * len(calls)
        if len(deadlines) != len(calls):
            raise ValueError(f"{len(deadlines)} deadlines for {len(calls)} calls")
        with self._lock:
            out: list[Any] = [None] * len(calls)
            raised: dict[int, BaseException] = {}
            todo = iter(range(len(calls)))
            take = threading.Lock()

            def serve(worker: _Worker) -> None:
                if worker.served >= CALLS_PER_WORKER:
                    worker.stop()
                while True:
                    with take:
                        i = next(todo, None)
                    if i is None:
                        return
                    try:
                        kind, value = worker.call(fn, calls[i], deadlines[i])
                        if kind == "crash":  # once more in a fresh process
                            kind, value = worker.call(fn, calls[i], deadlines[i])
                    except Exception as exc:  # the call could not be sent (unpicklable arguments)
                        kind, value = "raise", exc
                    if kind == "ok":
                        out[i] = value
                    elif kind == "raise":
                        raised[i] = value
                    elif kind == "timeout":
                        out[i] = WorkerTimeout(value)
                    else:
                        out[i] = WorkerCrash(value)

            threads = [threading.Thread(target=serve, args=(w,), name=f"laminae-worker-{n}", daemon=True)
                       for n, w in enumerate(self._slots[: max(1, min(self.workers, len(calls)))])]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if raised:
                raise raised[min(raised)]
            return out

    def pids(self) -> list[int]:
        """The ids of the worker processes now running."""
        return [w.proc.pid for w in self._slots if w.proc is not None and w.proc.poll() is None]

    def close(self) -> None:
        """Stop the worker processes; the next ``map`` starts new ones."""
        with self._lock:
            for worker in self._slots:
                worker.stop()


_POOLS: dict[tuple[str, int], WorkerPool] = {}
_LOCK = threading.Lock()


def warm(*modules: str) -> None:
    """Nothing but importing ``modules`` and what their ``WORKER_IMPORTS`` name: the call that
    readies a worker process for them (see ``start_workers``)."""
    for name in modules:
        module = importlib.import_module(name)
        for extra in getattr(module, "WORKER_IMPORTS", ()):
            importlib.import_module(extra)


def start_workers(pool: WorkerPool, modules: tuple[str, ...]) -> threading.Thread:
    """Start ``pool``'s processes now, each importing ``modules`` (named, so that the caller need
    not import them), on a thread of its own; the pool's next ``map`` waits for it (one map at a
    time) and finds its workers started."""
    thread = threading.Thread(target=pool.map, args=(warm, [modules] * pool.workers), daemon=True,
                              name="laminae-workers-start")
    thread.start()
    return thread


def worker_pool(workers: int, purpose: str = "parse") -> WorkerPool:
    """The process's pool of ``workers`` processes for ``purpose`` (parse, video: stages that may
    run at the same time have pools of their own), started on first use and kept for later batches."""
    with _LOCK:
        if (purpose, workers) not in _POOLS:
            _POOLS[purpose, workers] = WorkerPool(workers)
        return _POOLS[purpose, workers]


@atexit.register
def close_pools() -> None:
    """Stop every worker process (at the end of a run, and at exit)."""
    with _LOCK:
        for pool in _POOLS.values():
            pool.close()
        _POOLS.clear()


# --- inside a worker process -------------------------------------------------------------------

_CHANNEL: int | None = None  # the fd results go out on, in a worker process


def in_worker() -> bool:
    """Whether this process is a worker serving calls (its deadlines are enforced by killing it)."""
    return _CHANNEL is not None


def extend_deadline(seconds: float) -> None:
    """In a worker, give the call being served ``seconds`` from its start as its deadline instead
    of the one it was given (a PDF's, once its pages are counted); elsewhere nothing."""
    if _CHANNEL is not None:
        _write_frame(_CHANNEL, ("deadline", float(seconds)))


def _die_with_parent(watched: int) -> None:
    """End this process, whatever call it is running, once the pipe ``watched`` reads end of file:
    the process that started it, the only holder of the write end, has ended (a killed build)."""

    def watch() -> None:
        while os.read(watched, 1):
            pass
        os._exit(70)

    threading.Thread(target=watch, name="laminae-lifeline", daemon=True).start()


def serve(watched: int) -> None:
    """A worker's main loop: read a call, run it, write its outcome, until the input ends."""
    global _CHANNEL
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the build's to handle; it stops us
    _die_with_parent(watched)
    _CHANNEL = os.dup(1)
    os.dup2(2, 1)  # a library's print goes to stderr, not into the frames
    sys.stdout = sys.stderr
    sys.path[:] = _read_frame(0)
    while True:
        try:
            data = _read_exact(0, int.from_bytes(_read_exact(0, _HEADER), "little"))
        except EOFError:
            return
        try:
            fn, args = pickle.loads(data)
            for name in getattr(sys.modules.get(fn.__module__), "WORKER_IMPORTS", ()):
                importlib.import_module(name)
            _write_frame(_CHANNEL, ("started", None))
            outcome = ("ok", fn(*args))
        except Exception as exc:
            outcome = ("raise", exc)
        try:
            _write_frame(_CHANNEL, outcome)
        except Exception as exc:  # an unpicklable result or exception: say what it was
            detail = "".join(traceback.format_exception(outcome[1])) if outcome[0] == "raise" else repr(exc)
            _write_frame(_CHANNEL, ("raise", RuntimeError(f"a worker's outcome could not be sent back: {detail}")))
