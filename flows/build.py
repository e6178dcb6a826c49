"""The ``build_index`` Prefect flow: seeds → crawl → batches of (parse, images, embed, write) → links → publish.

Reads a seeds file and the settings; writes every table of the index directory, the run's row
in ``runs`` and a new manifest. Runs on Prefect's ephemeral local API when no server is set.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote

from laminae.flows.preload import preloads
from laminae.flows.runners import make_task_runner, resources
from laminae.schemas.search_text import SERIALIZATION
from laminae.schemas.storage import is_remote
from laminae.schemas.tables import TABLES, error_row
from laminae.stats import table_stats
from laminae.tasks import progress
from laminae.tasks.batches import ProcessedBatch, crawl_errors, fetch_row, write_batch
from laminae.tasks.config import BuildSettings
from laminae.tasks.crawl.fetch import crawl
from laminae.tasks.crawl.files import is_folder_url
from laminae.tasks.crawl.formats import PAGE_TYPES
from laminae.tasks.crawl.hosts import seed_scope
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.crawl.seeds import Seed, read_seeds
from laminae.tasks.embed.embedders import configured_model_id, load_embedder, resolve_quantize
from laminae.tasks.embed.onnx_backend import OnnxTextEmbedder
from laminae.tasks.nodes.image_text import recognizer_slots, workers
from laminae.tasks.nodes.links import resolve_links
from laminae.tasks.nodes.objects import Detector, resolve_weights
from laminae.tasks.parse import PARSER_VERSION
from laminae.tasks.parse.isolated import close_pools
from laminae.tasks.parse.ocr import recognizer, spelling_dictionary
from laminae.tasks.pipeline import BatchWork, parse_batch, process_batch, timed
from laminae.tasks.refresh import (
    LISTINGS,
    RefreshPlan,
    deletion_bound,
    documents_by_url,
    pages_of,
    plan_refresh,
    previous_fetches,
    superseded_documents,
    unsettled_pages,
)
from laminae.tasks.report.run_report import run_markdown, write_report
from laminae.tasks.storage.index_store import IndexConfigError, IndexStore
from laminae.tasks.storage.lease import WriterLease, writer_lease
from laminae.tasks.storage.rawstore import RawStore
from laminae.tasks.storage.upkeep import prune_embedding_cache, reembed_index

log = logging.getLogger("laminae.build")


@task(name="crawl-pages", cache_policy=NO_CACHE)
def crawl_pages(seeds: list[Seed], index: str, settings: BuildSettings,
                previous: dict[str, dict] | None = None) -> list[FetchResult]:
    started = time.perf_counter()
    done = Counter()
    bars = progress.current()
    bars.expect("fetch", len(seeds))

    def on_result(res: FetchResult) -> None:
        bars.advance("fetch")
        done["ok" if res.ok else "failed"] += 1
        total = done.total()
        if total > len(seeds):  # a followed link or a file of a folder: work that was not known up front
            bars.expect("fetch", 1)
        if total % 50 == 0:
            log.info("crawl: %d pages fetched (%d failed)", total, done["failed"])

    results = crawl(seeds, settings.crawl, RawStore(index), on_result=on_result, previous=previous)
    log.info("crawl: %d fetched, %d failed in %.1f s", done["ok"], done["failed"], time.perf_counter() - started)
    return results


@task(name="prepare-index", cache_policy=NO_CACHE)
def prepare_index(index: str, settings: BuildSettings, reuse: bool = False, reembed: bool = False) -> dict:
    """Create or check the index for the configured embedder; with ``reuse`` (a refresh of an index
    built with these settings) the embedder recorded in the index is trusted and no model is
    loaded until something needs embedding."""
    if settings.detect.enabled:
        resolve_weights(settings.detect)  # a wrong weights path fails now, not after the crawl
    store = IndexStore(index)
    meta = store.metadata()
    recorded = (meta or {}).get("embedder")
    embed = resolve_quantize(settings.embed, (recorded or {}).get("model_id"))
    if (recorded and meta.get("serialization", 1) == SERIALIZATION and not reembed
            and (reuse or recorded.get("model_id") == configured_model_id(embed))):
        # no model loaded, but the index's tables are checked and gain the columns added since
        # it was built (edges.anchors, search_terms), else this run's values for them are lost
        store.prepare(recorded)
        return {**recorded, "device": "not loaded"}  # loaded by the first batch that misses the cache
    embedder = load_embedder(embed)
    if store.prepare(embedder.info.as_metadata(), reembed=reembed):
        old = (meta or {}).get("embedder", {}).get("model_id")
        count = reembed_index(index, embedder)
        log.info("moved the index from %s (serialization %s) to %s (serialization %s): %d items embedded",
                 old, (meta or {}).get("serialization", 1), embedder.model_id, SERIALIZATION, count)
    return {**embedder.info.as_metadata(), "device": embedder.device}


_PRELOADING: list[threading.Thread] = []


def preload_models(index: str, settings: BuildSettings) -> threading.Thread | None:
    """Load the models a new index's batches run (embedder, detector, recognizers, the OCR's
    spelling dictionary) on a thread of their own, started before the flow: Prefect then starts
    its temporary API server (about 4 s here, the process waiting on it) meanwhile, and the run's
    own loads find them loaded (``loaded_once``). None where ``laminae.flows.preload.preloads``
    says no. A load that fails is left to the run, which raises it. (The parse workers are
    started earlier, by ``laminae.flows.preload.start_parse_workers``.)"""
    if not preloads(index, settings):
        return None

    def load() -> None:
        try:
            embedder = load_embedder(settings.embed)
            if isinstance(embedder, OnnxTextEmbedder):
                embedder.load_workers()
            weights = resolve_weights(settings.detect) if settings.detect.enabled else None
            if weights is not None:
                Detector(settings.detect, weights, settings.embed.threads, settings.embed.spin)
            if settings.ocr.enabled:
                for slot, threads in recognizer_slots(settings.ocr, workers(settings.ocr)):
                    recognizer(settings.ocr, slot, threads)
                if settings.ocr.repair_spacing:
                    spelling_dictionary()
        except Exception:  # noqa: BLE001 - loaded again by the stage that needs it, which reports it
            log.debug("preloading the models failed; the run loads them itself", exc_info=True)

    thread = threading.Thread(target=load, name="laminae-preload", daemon=True)
    thread.start()
    _PRELOADING.append(thread)
    return thread


def await_preload() -> None:
    """Wait for this process's preloading thread, before the run loads anything itself: two threads
    importing one package at once can see it half initialized (transformers' lazy modules: "cannot
    import name 'AutoTokenizer'" when the flow started at once on an already running API server)."""
    while _PRELOADING:
        _PRELOADING.pop().join()


@task(name="process-batch", cache_policy=NO_CACHE)
def process_documents(batch: list[FetchResult], index: str, settings: BuildSettings, run_id: str,
                      seed_hosts: set[str], parsed: BatchWork | None = None) -> ProcessedBatch:
    """Parse (unless ``parsed``), images, detect, embed, summarize: runs on the flow's process or a
    Dask/Ray worker."""
    return process_batch(batch, index, settings, run_id, seed_hosts, parsed)


@task(name="write-batch", cache_policy=NO_CACHE)
def write_documents(processed: ProcessedBatch, index: str, run_id: str, seen: set[str]) -> ProcessedBatch:
    """Write one processed batch to the index tables (always in the flow's process, in batch order)."""
    written = write_batch(processed, index, run_id, seen)
    IndexStore(index).append("errors", written.errors)
    return written


def _processed_batches(batches: list[list[FetchResult]], index: str, cfg: BuildSettings, run_id: str,
                       seed_hosts: set[str]) -> Iterator[ProcessedBatch]:
    """Processed batches in order: here with the next batch parsed (and its pictures fetched) on a
    thread while this one is detected, embedded and written; on Dask/Ray up to 2 × workers at a time.

    Batches travel to Prefect tasks quoted: Prefect would otherwise walk every node row and vector
    looking for futures, seconds per batch."""
    runner = make_task_runner(cfg.runner)
    if runner is None and cfg.runner.overlap:
        yield from _overlapped_batches(batches, index, cfg, run_id, seed_hosts)
        return
    if runner is None:
        for batch in batches:
            yield process_documents(quote(batch), index, cfg, run_id, seed_hosts)
        return
    bars = progress.current()
    log.info("running %d batches on %s%s", len(batches), cfg.runner.kind,
             f" at {cfg.runner.address}" if cfg.runner.address else f" (a local cluster of {cfg.runner.workers})")
    window = 2 * cfg.runner.workers  # batches in flight: results wait on the cluster only this long
    with runner, resources(cfg.runner):
        pending: deque = deque()
        for batch in batches:
            pending.append((batch, runner.submit(process_documents, {
                "batch": batch, "index": index, "settings": cfg, "run_id": run_id, "seed_hosts": seed_hosts})))
            if len(pending) < window:
                continue
            yield _collect(*pending.popleft(), bars)
        while pending:
            yield _collect(*pending.popleft(), bars)


def _overlapped_batches(batches: list[list[FetchResult]], index: str, cfg: BuildSettings, run_id: str,
                        seed_hosts: set[str]) -> Iterator[ProcessedBatch]:
    """The local runner's batches: batch i + 1 is parsed on one thread while batch i is detected,
    embedded and written on this one, so at most two parsed batches are held at once. Parsing is
    Python (parse workers aside) while inference and writes run in native code, so the two share
    the cores rather than waiting on each other."""
    if not batches:
        return
    with ThreadPoolExecutor(1, thread_name_prefix="laminae-parse") as ahead:
        def parse(batch: list[FetchResult]) -> Future:
            return ahead.submit(contextvars.copy_context().run, parse_batch, batch, index, cfg, run_id, seed_hosts)

        upcoming = parse(batches[0])
        for number, batch in enumerate(batches):
            parsed = upcoming.result()
            if number + 1 < len(batches):
                upcoming = parse(batches[number + 1])
            yield process_documents(quote(batch), index, cfg, run_id, seed_hosts, quote(parsed))


def _collect(batch: list[FetchResult], future, bars) -> ProcessedBatch:
    processed = future.result()
    bars.advance("parse", len(batch))
    bars.expect("embed", processed.embedded)
    bars.advance("embed", processed.embedded)
    return processed


@task(name="resolve-links", cache_policy=NO_CACHE)
def resolve_link_edges(index: str) -> dict:
    return resolve_links(IndexStore(index))


@task(name="prune-embedding-cache", cache_policy=NO_CACHE)
def prune_cache(index: str, embedder: dict, slack: float) -> int:
    return prune_embedding_cache(index, embedder["model_id"], embedder["image_mode"], slack)


@task(name="build-search-indexes", cache_policy=NO_CACHE)
def build_search_indexes(index: str) -> None:
    store = IndexStore(index)
    store.build_text_indexes()
    store.index_embedding_cache()


@task(name="compact-tables", cache_policy=NO_CACHE)
def compact_tables(index: str) -> None:
    IndexStore(index).compact_tables()


# what may fail after a manifest went live without being a bug of ours: the disk, damaged data
# (LanceDB's I/O errors are RuntimeErrors)
AFTER_PUBLISH_ERRORS = (OSError, ValueError, MemoryError, RuntimeError, IndexConfigError)


@task(name="clean-up-versions", cache_policy=NO_CACHE)
def clean_up_versions(index: str, keep: int) -> dict[str, int] | Exception:
    """The cleanup of older versions, or the exception that stopped it (returned, not raised: the
    run is published, and Prefect would log a raised one as a failed task with its traceback)."""
    try:
        freed = IndexStore(index).clean_up(keep)
    except AFTER_PUBLISH_ERRORS as exc:
        return exc
    log.info("cleanup: %d table versions older than the newest %d manifests deleted", sum(freed.values()), keep)
    return freed


@task(name="write-reader-snapshot", cache_policy=NO_CACHE)
def write_reader_snapshot(index: str, version: int, same_as: int | None = None) -> Exception | None:
    """Write the reader snapshot of manifest ``version``; the exception that stopped it, returned
    (see ``clean_up_versions``)."""
    try:
        IndexStore(index).write_snapshot(version, same_as=same_as)
    except AFTER_PUBLISH_ERRORS as exc:
        return exc
    return None


@task(name="publish-run-report", cache_policy=NO_CACHE)
def publish_run_report(index: str, summary: dict, flow_name: str) -> None:
    """The run as a markdown artifact in Prefect (key ``laminae-<flow>``: one lineage per kind of
    run) and the index's HTML report, ``<index>/report.html``; a report that fails is logged, the
    run stands."""
    from prefect.artifacts import create_markdown_artifact

    try:
        create_markdown_artifact(markdown=run_markdown(summary, index), key=f"laminae-{flow_name}",
                                 description=f"laminae {flow_name} of {index}: {summary['status']}")
    except Exception as exc:  # noqa: BLE001 - the run stands; one line, not a traceback (-v shows it)
        log.warning("the run's artifact could not be published (%s: %s)", type(exc).__name__, exc,
                    exc_info=log.isEnabledFor(logging.DEBUG))
    try:
        path = write_report(index)
        log.info("report: %s", path)
    except Exception as exc:  # noqa: BLE001 - as above (a full disk, most often)
        log.warning("the HTML report of %s could not be written (%s: %s)", index, type(exc).__name__, exc,
                    exc_info=log.isEnabledFor(logging.DEBUG))


def _status(indexed: int, errors: list[dict]) -> str:
    hard = [e for e in errors if e["severity"] == "error"]
    if not hard:
        return "success"
    return "partial" if indexed else "failure"


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
    """The body of ``build_index`` and ``refresh_index`` (called inside a flow run), under the
    index's writer lease (``laminae.tasks.storage.lease``): taken before anything is read that will
    be written, given back at the end whatever happens. What earlier runs left behind is cleared
    first (``IndexStore.recover``)."""
    if not is_remote(index):
        index = str(Path(index).resolve())  # workers of a remote cluster have other working directories
    run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
    with writer_lease(index, run_id, f"laminae {flow_name}", wait_for_lease) as lease:
        recovered = IndexStore(index).recover()
        if any(recovered.values()):
            log.info("left by earlier runs, cleared: %s", recovered)
        return _update(seed_list, index, cfg, flow_name, reembed, run_id, lease, allow_mass_delete)


@dataclass
class _Run:
    """One build or refresh as ``_update``'s steps hand it on: what it was asked, what it found."""

    seeds: list[Seed]
    index: str
    cfg: BuildSettings
    flow_name: str
    reembed: bool
    run_id: str
    lease: WriterLease
    allow_mass_delete: bool = False
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    t0: float = field(default_factory=time.perf_counter)
    seconds: Counter[str] = field(default_factory=Counter)  # the summary's seconds_by_stage
    rebuild_nodes: bool = False
    embedder: dict = field(default_factory=dict)
    previous: dict[str, dict] | None = None  # the last run's fetches, on a refresh
    results: list[FetchResult] = field(default_factory=list)
    fetched: list[FetchResult] = field(default_factory=list)
    failed_fetches: list[FetchResult] = field(default_factory=list)
    pages: list[FetchResult] = field(default_factory=list)  # to parse
    by_url: dict[str, str] = field(default_factory=dict)  # the documents before a refresh
    plan: RefreshPlan | None = None  # on a refresh: what goes (deleted at the end, all at once)
    gone_errors: list[dict] = field(default_factory=list)  # their rows say whether the page's document went
    errors: list[dict] = field(default_factory=list)
    changes: Counter[str] = field(default_factory=Counter)
    totals: Counter[str] = field(default_factory=Counter)  # indexed, embedded, reused
    resolved: dict[str, str] = field(default_factory=dict)  # page URL → its document id now
    pruned: int = 0
    links: dict = field(default_factory=dict)
    changed: bool = True  # whether the tables changed (a refresh may change nothing)

    @property
    def refresh(self) -> bool:
        return self.flow_name == "refresh"

    @cached_property
    def store(self) -> IndexStore:
        return IndexStore(self.index)


def _update(seed_list: list[Seed], index: str, cfg: BuildSettings, flow_name: str, reembed: bool, run_id: str,
            lease: WriterLease, allow_mass_delete: bool = False) -> dict:
    run = _Run(seed_list, index, cfg, flow_name, reembed, run_id, lease, allow_mass_delete)
    with timed(run.seconds, "load_model"):
        _prepare(run)
    _remember_seeds(run)
    with timed(run.seconds, "crawl"):
        run.results = crawl_pages(seed_list, index, cfg, run.previous)
    _plan_pages(run)
    _write_batches(run)  # its seconds come from the stages (laminae.tasks.pipeline.STAGES) and the writes
    _remove_documents(run)
    with timed(run.seconds, "prune_cache"):
        run.pruned = prune_cache(index, run.embedder, cfg.embed.cache_slack)
    with timed(run.seconds, "resolve_links"):
        run.links = resolve_link_edges(index)
    run.changed = bool(not run.refresh or run.totals["indexed"] or run.changes["removed"] or run.links["changed"])
    if run.changed:
        with timed(run.seconds, "compact"):
            compact_tables(index)
        with timed(run.seconds, "text_index"):
            build_search_indexes(index)
    summary = _summary(run)
    _record_and_publish(run, summary)
    publish_run_report(index, summary, flow_name)
    log.info("run %s %s: %s", run_id, summary["status"], json.dumps(summary, default=str))
    return summary


def _prepare(run: _Run) -> None:
    """Whether this run rebuilds every page's nodes, and the embedder (loaded only where needed)."""
    await_preload()
    built = IndexStore(run.index).metadata()
    # nodes built by another serialization (say, before tables had heading nodes) are rebuilt from
    # their pages, unchanged or not; texts that did not change come from the embedding cache
    run.rebuild_nodes = bool(built) and built.get("serialization", 1) != SERIALIZATION
    if built and built.get("parser", 1) != PARSER_VERSION:
        log.info("the index was parsed by parser version %s, this laminae's is %s: every page is parsed again",
                 built.get("parser", 1), PARSER_VERSION)
        run.rebuild_nodes = True
    run.embedder = prepare_index(run.index, run.cfg, reuse=run.refresh and not run.reembed, reembed=run.reembed)


def _remember_seeds(run: _Run) -> None:
    """The seeds and settings remembered for later refreshes; on a refresh, the last fetches."""
    log.info("run %s: %d seeds → %s (embedder %s on %s)", run.run_id, len(run.seeds), run.index,
             run.embedder["model_id"], run.embedder["device"])
    # a bad line (a seed with an error, its url file:line) is reported by this run, not remembered
    run.store.remember(seeds=[{"url": s.url, "annotations": s.annotations, "sitemap": s.sitemap}
                              for s in run.seeds if s.error is None],
                       settings=run.cfg.model_dump(mode="json"))
    run.previous = previous_fetches(run.store) if run.refresh else None


def _plan_pages(run: _Run) -> None:
    """The pages to parse (on a refresh, those the refresh plan did not keep or remove) and the
    crawl's problems and failed fetches, recorded."""
    store, run.errors = run.store, crawl_errors(run.results, run.run_id)
    run.fetched = [r for r in run.results if r.kind not in LISTINGS]  # a folder's listing is no fetch
    run.failed_fetches = [r for r in run.fetched if not r.ok or r.content_type not in PAGE_TYPES]
    run.pages = pages_of(run.results)
    if run.refresh:
        run.by_url = documents_by_url(store)
        folders = [s.url for s in run.seeds if is_folder_url(s.url)]
        run.plan = plan = plan_refresh(run.results, run.previous, run.by_url, run.cfg.crawl.follow_links,
                                       run.rebuild_nodes, folders)
        store.upsert("fetches", [fetch_row(r, run.run_id) for r in plan.unchanged])
        run.pages = plan.parse
        run.errors += [error_row(run.run_id, url, "refresh", reason, message, severity="warning")
                       for url, reason, message in plan.kept]
        run.gone_errors = [e for e in run.errors if e["url"] in plan.gone]
        for e in run.gone_errors:  # a warning: the page is gone, not broken; written once its fate is known
            e["severity"] = "warning"
        run.changes.update({k: v for k, v in plan.changes.items() if k != "removed"})
    store.append("errors", [e for e in run.errors if not any(e is g for g in run.gone_errors)])
    store.upsert("fetches", [fetch_row(r, run.run_id) for r in run.failed_fetches])


def batch_bounds(count: int, size: int) -> list[tuple[int, int]]:
    """``(start, end)`` of the batches of ``count`` pages: ``size`` pages each, but a quarter of that
    in the first when there are more, whose parse is the one step nothing runs beside (a local run
    parses the next batch while it processes one)."""
    if count <= size:
        return [(0, count)] if count else []
    bounds, start = [], 0
    end = -(-size // 4)
    while start < count:
        bounds.append((start, min(end, count)))
        start, end = end, end + size
    return bounds


def _write_batches(run: _Run) -> None:
    """The pages in batches through the stages, each written as it comes."""
    seed_hosts = {seed_scope(s.url) for s in run.seeds}
    batches = [run.pages[start:end] for start, end in batch_bounds(len(run.pages), run.cfg.batch_documents)]
    for stage in ("parse", "write"):
        progress.current().expect(stage, len(run.pages))
    seen: set[str] = set()
    tick = time.perf_counter()
    try:
        for number, processed in enumerate(_processed_batches(batches, run.index, run.cfg, run.run_id, seed_hosts), 1):
            written = write_documents(quote(processed), run.index, run.run_id, seen)
            run.resolved.update(written.resolved)
            run.errors.extend(written.errors)
            run.seconds.update(written.seconds)
            run.totals.update({"indexed": written.documents, "embedded": written.embedded, "reused": written.reused})
            log.info("batch %d/%d: %d documents, %d nodes embedded, %d reused (%.1f s)", number, len(batches),
                     written.documents, written.embedded, written.reused, time.perf_counter() - tick)
            tick = time.perf_counter()
    finally:
        close_pools()  # the parse workers, if any, end with the batches


def _remove_documents(run: _Run) -> None:
    """On a refresh, every deletion of the run at once, after its writes: the documents of gone and
    dropped pages (``plan_refresh``) and those whose pages now belong to another document
    (superseded). None when the run failed (it publishes nothing, so it changes nothing), nor past
    the deletion bound unless the run allows it (``deletion_bound``: rsync's ``--max-delete``)."""
    if not run.refresh or run.plan is None:
        return
    plan = run.plan
    reparsed = {r.url for r in run.pages}
    unsettled = unsettled_pages(run.results, run.pages, run.resolved) - set(run.by_url)
    superseded = superseded_documents(run.by_url, run.resolved, reparsed, unsettled)
    written = set(run.resolved.values())  # a gone page's document that another page now holds stays
    doomed = [d for d in plan.removed if d not in written]
    doomed += [d for d in superseded if d not in set(doomed)]
    refusal = None
    if doomed and _status(run.totals["indexed"] + run.changes["unchanged"], run.errors) == "failure":
        refusal = (f"the run failed, so it deletes nothing: {len(doomed)} document(s) whose pages are gone or "
                   "no longer reached stay until a refresh that succeeds")
    elif doomed and not run.allow_mass_delete:
        refusal = deletion_bound(len(doomed), len(run.by_url), run.cfg.max_delete_count, run.cfg.max_delete_fraction,
                                 run.index)
    note = "; the page and its nodes were removed"
    if refusal is not None:
        run.errors.append(error_row(run.run_id, run.index, "refresh", "deletions_skipped",
                                    f"{refusal} (gone {len(plan.gone)}, no longer reached {len(plan.dropped)}, "
                                    f"superseded {len(superseded)})", severity="warning"))
        run.store.append("errors", run.errors[-1:])
        note = "; its document was kept (see the run's deletions_skipped warning)"
        doomed = []
    for e in run.gone_errors:
        e["message"] += note
    run.store.append("errors", run.gone_errors)
    run.store.delete_documents(doomed)
    run.changes["removed"] += len(doomed)


def _summary(run: _Run) -> dict:
    status = _status(run.totals["indexed"] + run.changes["unchanged"], run.errors)
    stats = table_stats({name: run.store.table(name) for name in TABLES})
    stats.pop("errors_by_stage")
    errors_by_stage = Counter(f"{e['stage']}:{e['reason']}" for e in run.errors if e["severity"] == "error")
    warnings_by_stage = Counter(f"{e['stage']}:{e['reason']}" for e in run.errors if e["severity"] == "warning")
    run.seconds["total"] = time.perf_counter() - run.t0
    return {
        "run_id": run.run_id,
        "status": status,
        "seeds": len(run.seeds),
        "pages_fetched": len(run.fetched),
        "pages_failed": len(run.failed_fetches),
        "documents_indexed": run.totals["indexed"],
        "embedded": run.totals["embedded"],
        "reused_vectors": run.totals["reused"],
        "cache_pruned": run.pruned,
        "links": run.links,
        "changes": dict(run.changes),
        "counts": stats,
        "errors_by_stage": dict(errors_by_stage),
        "warnings_by_stage": dict(warnings_by_stage),
        "seconds_by_stage": {k: round(v, 3) for k, v in run.seconds.items()},
        "embedder": run.embedder,
    }


def _record_and_publish(run: _Run, summary: dict) -> None:
    """The ``runs`` row, then (unless the run failed) the manifest it names, the reader snapshot
    and the cleanup of older versions."""
    store, index, run_id = run.store, run.index, run.run_id
    # decided once, under the lease: the runs row and the manifest name the same version
    version = store.next_manifest_version() if summary["status"] != "failure" else None
    store.append("runs", [{
        "id": run_id, "flow": run.flow_name, "status": summary["status"], "started_at": run.started_at,
        "finished_at": datetime.now(UTC), "config_hash": run.cfg.config_hash(),
        "manifest_version": version, "summary": json.dumps(summary, default=str),
    }])
    if version is None:
        return
    run.lease.check()
    summary["manifest_version"] = store.publish(run_id, {"run": summary, "config_hash": run.cfg.config_hash()},
                                                version)
    # the version is live from here on: what fails below is a warning, the run stands (exit 0)
    problems: list[dict] = []
    try:
        store.remember(parser=PARSER_VERSION)
    except OSError as exc:  # the next run parses every page again, which is safe
        problems.append(after_publish_error(run_id, index, "publish", exc, "the next run parses every page again"))
    tick = time.perf_counter()
    failed = write_reader_snapshot(index, version, None if run.changed else version - 1)
    if failed is None:
        log.info("reader snapshot written in %.1f s", time.perf_counter() - tick)
    else:
        summary["snapshot_error"] = f"{type(failed).__name__}: {failed}"
        problems.append(after_publish_error(run_id, index, "snapshot", failed,
                                            "readers load the view from the tables (slower); "
                                            f"`laminae compact --index {index}` writes it again"))
    freed = clean_up_versions(index, run.cfg.keep_manifests)
    if isinstance(freed, Exception):
        summary["cleanup_error"] = f"{type(freed).__name__}: {freed}"
        problems.append(after_publish_error(run_id, index, "cleanup", freed,
                                            f"`laminae compact --index {index}` tries again"))
    else:
        summary["versions_deleted"] = sum(freed.values())
    for row in problems:
        log.warning("manifest %d is published, but: %s", version, row["message"])
    try:
        store.append("errors", problems)
    except AFTER_PUBLISH_ERRORS as exc:  # a full disk: the log above is all there is
        log.warning("the warnings above could not be written to the errors table (%s: %s)", type(exc).__name__, exc)


def after_publish_error(run_id: str, index: str, stage: str, exc: Exception, what_now: str) -> dict:
    """An ``errors`` row (a warning) for a step after the manifest went live (snapshot, cleanup)."""
    return error_row(run_id, index, stage, type(exc).__name__, f"{exc}; {what_now}", severity="warning")
