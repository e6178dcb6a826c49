"""Worker processes: results in order, and a call that kills its worker or runs past its deadline
costs only that call."""

from __future__ import annotations

import os
import threading
import time

import pytest

from laminae.tasks.parse.isolated import WorkerCrash, WorkerPool, WorkerTimeout, close_pools, extend_deadline


def _square(x: int) -> int:
    return x * x


def _die_on(x: int, fatal: int) -> int:
    if x == fatal:
        os._exit(3)  # what a segfault in a native parser looks like to the pool
    return x * x


def _raise(x: int) -> int:
    raise ValueError(f"bad {x}")


def _hang_on(x: int, stuck: int) -> tuple[int, int]:
    if x == stuck:
        threading.Event().wait()  # never set: only the deadline ends this call
    return x * x, os.getpid()


def _longer(seconds: float) -> str:
    extend_deadline(60)  # what a PDF does once its pages are counted
    time.sleep(seconds)  # the work: longer than the deadline the call was given
    return "done"


def _hang_and_tell(fifo: str) -> None:
    with open(fifo, "w") as out:
        out.write(str(os.getpid()))
    threading.Event().wait()


def _unpicklable() -> object:
    return threading.Lock()


def test_results_come_back_in_order_from_other_processes():
    pool = WorkerPool(2)
    try:
        assert pool.map(_square, [(i,) for i in range(20)]) == [i * i for i in range(20)]
        assert pool.map(os.getpid, [()] * 4)[0] != os.getpid()
    finally:
        pool.close()


def test_a_call_that_kills_its_worker_gets_a_crash_and_the_others_their_results():
    pool = WorkerPool(2)
    try:
        out = pool.map(_die_on, [(i, 5) for i in range(10)])
        assert isinstance(out[5], WorkerCrash)
        assert [r for i, r in enumerate(out) if i != 5] == [i * i for i in range(10) if i != 5]
        assert pool.map(_square, [(3,), (4,)]) == [9, 16]  # the pool was replaced and works
    finally:
        pool.close()


def test_workers_are_replaced_between_maps_after_their_share_of_calls(monkeypatch):
    import laminae.tasks.parse.isolated as isolated

    monkeypatch.setattr(isolated, "CALLS_PER_WORKER", 2)
    pool = WorkerPool(1)
    try:
        first = set(pool.map(os.getpid, [()] * 3))
        second = set(pool.map(os.getpid, [()] * 3))
        assert len(first) == len(second) == 1 and first != second
    finally:
        pool.close()


def test_exceptions_are_raised_as_from_a_plain_call():
    pool = WorkerPool(1)
    try:
        with pytest.raises(ValueError, match="bad 7"):
            pool.map(_raise, [(7,)])
    finally:
        pool.close()
    with pytest.raises(ValueError, match="at least 1"):
        WorkerPool(0)


def test_pages_parse_in_workers_and_a_page_whose_worker_dies_becomes_an_error_row(tmp_path, monkeypatch):
    import laminae.tasks.nodes.pages as pipeline
    from laminae.tasks.config import BuildSettings
    from laminae.tasks.crawl.results import FetchResult
    from laminae.tasks.storage.rawstore import RawStore
    from tests.conftest import page

    raw = RawStore(tmp_path)
    pages = [FetchResult(url=f"http://h.test/{i}", final_url=f"http://h.test/{i}", content_type="text/html",
                         raw_key=raw.put(page(f"P{i}", f"<p>Loaf {i} is baked. It cools.</p>"))) for i in range(3)]
    pages.append(FetchResult(url="http://h.test/again", final_url="http://h.test/again", content_type="text/html",
                             raw_key=raw.put(page("P0", "<p>Loaf 0 is baked. It cools.</p>",
                                                  head="<link rel='canonical' href='http://h.test/0'>"))))
    settings = BuildSettings(runner={"parse_workers": 2})
    serial = pipeline.parse_documents(pages, str(tmp_path), BuildSettings(runner={"parse_workers": 0}), "run")
    parallel = pipeline.parse_documents(pages, str(tmp_path), settings, "run")
    assert parallel[0] == serial[0]  # the same nodes, the duplicate /again dropped in both
    same = [{k: v for k, v in e.items() if k != "created_at"} for e in serial[1]]
    assert [{k: v for k, v in e.items() if k != "created_at"} for e in parallel[1]] == same
    assert [d.document["url"] for d in parallel[0]] == [p.url for p in pages[:3]]
    assert [e["reason"] for e in parallel[1]] == ["duplicate_document"]

    real = pipeline.worker_pool(2)
    monkeypatch.setattr(pipeline, "worker_pool", lambda n: type("Dying", (), {"map": lambda self, fn, calls, *deadline: [
        WorkerCrash("died") if i == 1 else r for i, r in enumerate(real.map(fn, calls, *deadline))]})())
    try:
        docs, errors = pipeline.parse_documents(pages[:3], str(tmp_path), settings, "run")
    finally:
        close_pools()
    assert [d.document["url"] for d in docs] == [pages[0].url, pages[2].url]
    assert [(e["url"], e["reason"]) for e in errors] == [(pages[1].url, "parser_crashed")]


def test_a_call_past_its_deadline_is_killed_and_the_others_get_their_results():
    pool = WorkerPool(2)
    try:
        out = pool.map(_hang_on, [(i, 3) for i in range(8)], 0.5)
        assert out[3] == WorkerTimeout(0.5)
        assert [r[0] for i, r in enumerate(out) if i != 3] == [i * i for i in range(8) if i != 3]
        # the stuck worker was killed (and reaped): no call after it ran in that process
        workers = {r[1] for i, r in enumerate(out) if i != 3}
        alive = set(pool.pids())
        for pid in workers - alive:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
        assert len(workers) >= 2  # a fresh process took over
        assert [r[0] for r in pool.map(_hang_on, [(2, -1), (3, -1)], [1.0, None])] == [4, 9]
    finally:
        pool.close()


def test_a_call_can_move_its_own_deadline_and_unsendable_outcomes_raise():
    pool = WorkerPool(1)
    try:
        assert pool.map(_longer, [(1.0,)], 0.2) == ["done"]
        with pytest.raises(RuntimeError, match="could not be sent back"):
            pool.map(_unpicklable, [()])
        with pytest.raises(ValueError, match="2 deadlines for 1 calls"):
            pool.map(_square, [(1,)], [1.0, 2.0])
    finally:
        pool.close()


def test_a_worker_ends_with_the_process_that_started_it_whatever_it_is_running(tmp_path):
    import select
    import subprocess
    import sys

    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    script = (  # a build that starts a worker, whose call never ends, and is then killed
        "import os, sys, threading\n"
        "from laminae.tasks.parse.isolated import WorkerPool\n"
        "from tests.stages.test_isolated import _hang_and_tell\n"
        "pool = WorkerPool(1)\n"
        f"threading.Thread(target=pool.map, args=(_hang_and_tell, [({str(fifo)!r},)]), daemon=True).start()\n"
        f"print(open({str(fifo)!r}).read(), flush=True)\n"
        "os._exit(9)\n")
    build = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                           cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert build.returncode == 9, build.stderr
    worker = os.pidfd_open(int(build.stdout))  # raises if it had already gone: then it went too
    try:
        assert select.select([worker], [], [], 60)[0], "the orphaned worker is still running"
    finally:
        os.close(worker)
