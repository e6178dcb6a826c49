"""The ``build_index`` and ``refresh_index`` Prefect flows: ``laminae.tasks.run.RUN`` under Prefect.

Reads a seeds file (or the seeds an index remembers) and the settings; writes every table of the
index directory, the run's row in ``runs``, a new manifest and the run's markdown artifact. Each
step of ``RUN`` with a task name, and each named call a step makes (process-batch, write-batch,
write-reader-snapshot, clean-up-versions), runs as a Prefect task of that name; the batches run
on the configured task runner (``laminae.flows.runners``). Runs on Prefect's ephemeral local API
when no server is set.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote

from laminae.flows.preload import await_preload, preload_models
from laminae.flows.runners import processed_batches
from laminae.schemas.storage import is_remote
from laminae.tasks import progress
from laminae.tasks.batches import ProcessedBatch
from laminae.tasks.config import BuildSettings
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.crawl.seeds import Seed, read_seeds
from laminae.tasks.pipeline import BatchWork, process_batch
from laminae.tasks.report.run_report import run_markdown
from laminae.tasks.run import RUN, run_build
from laminae.tasks.run_record import Run
from laminae.tasks.storage.index_store import IndexConfigError, IndexStore
from laminae.tasks.storage.lease import writer_lease

__all__ = ["await_preload", "build_index", "preload_models", "refresh_index", "run_update"]

log = logging.getLogger("laminae.build")


@task(name="process-batch", cache_policy=NO_CACHE)
def process_documents(batch: list[FetchResult], index: str, settings: BuildSettings, run_id: str,
                      seed_hosts: set[str], parsed: BatchWork | None = None) -> ProcessedBatch:
    """Parse (unless ``parsed``), images, detect, embed, summarize: runs on the flow's process or a
    Dask/Ray worker."""
    return process_batch(batch, index, settings, run_id, seed_hosts, parsed)


@functools.cache
def _as_task(name: str, fn: Callable[..., Any]) -> Any:
    """``fn`` as the Prefect task ``name``, made once per process."""
    return task(fn, name=name, cache_policy=NO_CACHE)


def prefect_call(name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``Run.call`` under Prefect: ``fn`` as the task ``name``, its arguments quoted (Prefect would
    otherwise walk every row of a batch or run record looking for futures)."""
    return _as_task(name, fn)(*(quote(a) for a in args))


def prefect_schedule(run: Run, batches: list[list[FetchResult]], seed_hosts: set[str]) -> Iterator[ProcessedBatch]:
    """``Run.schedule`` under Prefect: the batches as process-batch tasks on the configured runner."""
    return processed_batches(run, batches, seed_hosts, process_documents)


def publish_artifact(index: str, summary: dict, flow_name: str) -> None:
    """The run as a markdown artifact in Prefect (key ``laminae-<flow>``: one lineage per kind of
    run); one that fails is logged, the run stands."""
    from prefect.artifacts import create_markdown_artifact

    try:
        create_markdown_artifact(markdown=run_markdown(summary, index), key=f"laminae-{flow_name}",
                                 description=f"laminae {flow_name} of {index}: {summary['status']}")
    except Exception as exc:  # noqa: BLE001 - the run stands; one line, not a traceback (-v shows it)
        log.warning("the run's artifact could not be published (%s: %s)", type(exc).__name__, exc,
                    exc_info=log.isEnabledFor(logging.DEBUG))


@flow(name="build-index", log_prints=True)
def build_index(seeds: str, index: str, follow_links: int | None = None, settings: dict | None = None,
                reembed: bool = False, wait_for_lease: float | None = None) -> dict:
    """Build (or update) the index at ``index`` from the seeds file ``seeds``; returns the run summary.

    ``reembed``: when the index holds another model's vectors, move it to the configured model.
    ``wait_for_lease``: seconds to wait for another writer of the index to finish (default: fail
    at once with ``LeaseHeldError`` naming it).
    """
    cfg = BuildSettings(**(settings or {}))
    if follow_links is not None:
        cfg.crawl.follow_links = follow_links
    with progress.reporting():
        return run_update(read_seeds(seeds), index, cfg, reembed=reembed, wait_for_lease=wait_for_lease)


@flow(name="refresh-index", log_prints=True)
def refresh_index(index: str, seeds: str | None = None, model: str | None = None,
                  runner: dict | None = None, wait_for_lease: float | None = None,
                  allow_mass_delete: bool = False) -> dict:
    """Refresh the index at ``index`` with the seeds and settings it was built with (or new ``seeds``).

    Pages are re-fetched with conditional requests; an unchanged page costs no parse and no
    embedding, a changed one is re-parsed (unchanged nodes keep their ids and vectors), pages
    answering 404/410 or dropped from the seeds are removed with their nodes and edges, and a
    transient failure keeps the page as it was. ``runner`` overrides the remembered runner
    settings (e.g. ``{"kind": "dask", "address": "tcp://scheduler:8786"}``). ``wait_for_lease``:
    seconds to wait for another writer of the index (a scheduled run waits; by hand the default is
    to fail at once naming it). ``allow_mass_delete``: make the run's deletions even when they pass
    the bound of ``max_delete_count`` and ``max_delete_fraction`` (rsync's ``--max-delete``).
    """
    meta = IndexStore(index).metadata() or {}
    if "seeds" not in meta:
        raise IndexConfigError(f"{index} has no remembered seeds: build it first with `laminae build --seeds FILE "
                               f"--index {index}`")
    cfg = BuildSettings(**meta["settings"])
    if runner:
        cfg.runner = cfg.runner.model_copy(update=runner)
    reembed = model is not None and model != cfg.embed.model
    if reembed:
        cfg.embed.model = model
    seed_list = read_seeds(seeds) if seeds else [Seed(s["url"], s.get("annotations") or {}, s.get("sitemap"))
                                                 for s in meta["seeds"]]
    with progress.reporting():
        return run_update(seed_list, index, cfg, flow_name="refresh", reembed=reembed,
                          wait_for_lease=wait_for_lease, allow_mass_delete=allow_mass_delete)


def run_update(seed_list: list[Seed], index: str, cfg: BuildSettings, flow_name: str = "build",
               reembed: bool = False, wait_for_lease: float | None = None, allow_mass_delete: bool = False) -> dict:
    """The body of ``build_index`` and ``refresh_index`` (called inside a flow run): ``RUN`` under the
    index's writer lease (``laminae.tasks.storage.lease``), taken before anything is read that will
    be written, given back at the end whatever happens. What earlier runs left behind is cleared
    first (``IndexStore.recover``), and the models preloaded meanwhile are waited for."""
    if not is_remote(index):
        index = str(Path(index).resolve())  # workers of a remote cluster have other working directories
    run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
    with writer_lease(index, run_id, f"laminae {flow_name}", wait_for_lease) as lease:
        recovered = IndexStore(index).recover()
        if any(recovered.values()):
            log.info("left by earlier runs, cleared: %s", recovered)
        await_preload()
        run = Run(seed_list, index, cfg, flow_name, run_id, lease, reembed, allow_mass_delete,
                  call=prefect_call, schedule=prefect_schedule)
        summary = run_build(run, RUN)
    publish_artifact(index, summary, flow_name)
    return summary
