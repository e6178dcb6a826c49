"""Prefect task runners for the batch stages: none (local), Dask or Ray, from ``RunnerConfig``, and
the batches' schedule on them (``processed_batches``: ``Run.schedule`` under Prefect).

Reads the runner settings; starts nothing itself (the runner starts a local cluster, or joins the
given address, when the flow enters it). Imports prefect-dask / prefect-ray only when asked for.
"""

from __future__ import annotations

import contextvars
import logging
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext

from prefect.utilities.annotations import quote

from laminae.schemas.errors import LaminaeError
from laminae.tasks import progress
from laminae.tasks.batches import ProcessedBatch
from laminae.tasks.config import RunnerConfig
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.pipeline import parse_batch
from laminae.tasks.run_record import Run

log = logging.getLogger("laminae.build")


class RunnerConfigError(LaminaeError, ValueError):
    """The requested runner cannot be used (its package is missing); the message says what to do."""

    exit_code = 2


def make_task_runner(cfg: RunnerConfig):
    """The task runner for ``cfg.kind``, or None for local (batches run in the flow's process)."""
    if cfg.kind == "local":
        return None
    if cfg.kind == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError:
            raise RunnerConfigError("runner 'dask' needs prefect-dask: pip install -c constraints.txt "
                                    "-e '.[scale]'") from None
        if cfg.address:
            return DaskTaskRunner(address=cfg.address)
        return DaskTaskRunner(cluster_kwargs={"n_workers": cfg.workers, "threads_per_worker": 1,
                                              "processes": True, "dashboard_address": None})
    try:
        from prefect_ray import RayTaskRunner
    except ImportError:
        raise RunnerConfigError("runner 'ray' needs prefect-ray: pip install -c constraints.txt -e '.[scale]'") from None
    init = {"include_dashboard": False, "log_to_driver": False}
    if not cfg.address:
        init["num_cpus"] = cfg.workers
    return RayTaskRunner(address=cfg.address, init_kwargs=init)


def resources(cfg: RunnerConfig):
    """A context in which submitted tasks request ``cfg.gpus`` GPUs (Ray only)."""
    if cfg.kind == "ray" and cfg.gpus:
        from prefect_ray.context import remote_options

        return remote_options(num_gpus=cfg.gpus)
    return nullcontext()


def processed_batches(run: Run, batches: list[list[FetchResult]], seed_hosts: set[str],
                      process: Callable[..., ProcessedBatch]) -> Iterator[ProcessedBatch]:
    """Processed batches in order, each by ``process`` (the task process-batch): here with the next
    batch parsed (and its pictures fetched) on a thread while this one is detected, embedded and
    written; on Dask/Ray up to 2 × workers at a time.

    On the local runners batches travel to Prefect tasks quoted: Prefect would otherwise walk every
    node row and vector looking for futures, seconds per batch. A task runner's ``submit`` passes a
    quoted parameter on as the quote itself (tried 2026-11-28), so the cluster runners get the
    batch bare."""
    cfg, args = run.cfg, (run.index, run.cfg, run.run_id, seed_hosts)
    runner = make_task_runner(cfg.runner)
    if runner is None and cfg.runner.overlap:
        yield from _overlapped_batches(batches, args, process)
        return
    if runner is None:
        for batch in batches:
            yield process(quote(batch), *args)
        return
    bars = progress.current()
    log.info("running %d batches on %s%s", len(batches), cfg.runner.kind,
             f" at {cfg.runner.address}" if cfg.runner.address else f" (a local cluster of {cfg.runner.workers})")
    window = 2 * cfg.runner.workers  # batches in flight: results wait on the cluster only this long
    with runner, resources(cfg.runner):
        pending: deque = deque()
        named = dict(zip(("index", "settings", "run_id", "seed_hosts"), args, strict=True))
        for batch in batches:
            pending.append((batch, runner.submit(process, {**named, "batch": batch})))
            if len(pending) < window:
                continue
            yield _collect(*pending.popleft(), bars)
        while pending:
            yield _collect(*pending.popleft(), bars)


def _overlapped_batches(batches: list[list[FetchResult]], args: tuple, process: Callable[..., ProcessedBatch],
                        ) -> Iterator[ProcessedBatch]:
    """The local runner's batches: batch i + 1 is parsed on one thread while batch i is detected,
    embedded and written on this one, so at most two parsed batches are held at once. Parsing is
    Python (parse workers aside) while inference and writes run in native code, so the two share
    the cores rather than waiting on each other."""
    if not batches:
        return
    with ThreadPoolExecutor(1, thread_name_prefix="laminae-parse") as ahead:
        def parse(batch: list[FetchResult]) -> Future:
            return ahead.submit(contextvars.copy_context().run, parse_batch, batch, *args)

        upcoming = parse(batches[0])
        for number, batch in enumerate(batches):
            parsed = upcoming.result()
            if number + 1 < len(batches):
                upcoming = parse(batches[number + 1])
            yield process(quote(batch), *args, quote(parsed))


def _collect(batch: list[FetchResult], future, bars) -> ProcessedBatch:
    processed = future.result()
    bars.advance("parse", len(batch))
    bars.expect("embed", processed.embedded)
    bars.advance("embed", processed.embedded)
    return processed
