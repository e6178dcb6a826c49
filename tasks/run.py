"""The run as data: ``RUN``, the ordered steps of a build or refresh (prepare → crawl → plan →
batches → superseded documents → embedding cache → links → compaction → full-text indexes →
publish → report), run over one record (``laminae.tasks.run_record.Run``) by ``run_steps``.

Reads the seeds, the settings and the index; writes every table of the index directory, the
run's ``runs`` row, a manifest and the report, each step through the ``Output`` it returns or
the tasks it names. The batches' own stages are ``laminae.tasks.pipeline.STAGES``. Prefect-free:
``laminae.flows.build`` runs this list inside its flows, each step with a ``task`` name as a
Prefect task of that name.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence

from laminae.schemas.search_text import SERIALIZATION
from laminae.tasks import progress
from laminae.tasks.batches import write_batch
from laminae.tasks.config import BuildSettings
from laminae.tasks.crawl.fetch import crawl
from laminae.tasks.crawl.hosts import seed_scope
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.embed.embedders import configured_model_id, load_embedder, resolve_quantize
from laminae.tasks.nodes.link_resolution import resolve_links
from laminae.tasks.nodes.objects import resolve_weights
from laminae.tasks.parse import PARSER_VERSION
from laminae.tasks.parse.isolated import close_pools
from laminae.tasks.plan import plan_pages, remove_documents
from laminae.tasks.publish import publish_run, report_run
from laminae.tasks.refresh import previous_fetches
from laminae.tasks.run_record import Run, Step, run_steps
from laminae.tasks.storage.index_store import IndexStore
from laminae.tasks.storage.rawstore import RawStore
from laminae.tasks.storage.upkeep import prune_embedding_cache, reembed_index

log = logging.getLogger("laminae.build")


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


def prepare(run: Run) -> None:
    """Whether this run rebuilds every page's nodes, the embedder (loaded only where needed), the
    seeds and settings remembered for later refreshes and, on a refresh, the last fetches."""
    built = run.store.metadata()
    # nodes built by another serialization (say, before tables had heading nodes) are rebuilt from
    # their pages, unchanged or not; texts that did not change come from the embedding cache
    run.rebuild_nodes = bool(built) and built.get("serialization", 1) != SERIALIZATION
    if built and built.get("parser", 1) != PARSER_VERSION:
        log.info("the index was parsed by parser version %s, this laminae's is %s: every page is parsed again",
                 built.get("parser", 1), PARSER_VERSION)
        run.rebuild_nodes = True
    run.embedder = prepare_index(run.index, run.cfg, reuse=run.refresh and not run.reembed, reembed=run.reembed)
    log.info("run %s: %d seeds → %s (embedder %s on %s)", run.run_id, len(run.seeds), run.index,
             run.embedder["model_id"], run.embedder["device"])
    # a bad line (a seed with an error, its url file:line) is reported by this run, not remembered
    run.store.remember(seeds=[{"url": s.url, "annotations": s.annotations, "sitemap": s.sitemap}
                              for s in run.seeds if s.error is None],
                       settings=run.cfg.model_dump(mode="json"))
    run.previous = previous_fetches(run.store) if run.refresh else None


def crawl_pages(run: Run) -> None:
    """Fetch the seeds (and the links and files they lead to): ``results``, with a progress bar."""
    started = time.perf_counter()
    done: Counter[str] = Counter()
    bars = progress.current()
    bars.expect("fetch", len(run.seeds))

    def on_result(res: FetchResult) -> None:
        bars.advance("fetch")
        done["ok" if res.ok else "failed"] += 1
        total = done.total()
        if total > len(run.seeds):  # a followed link or a file of a folder: work that was not known up front
            bars.expect("fetch", 1)
        if total % 50 == 0:
            log.info("crawl: %d pages fetched (%d failed)", total, done["failed"])

    run.results = crawl(run.seeds, run.cfg.crawl, RawStore(run.index), on_result=on_result, previous=run.previous)
    log.info("crawl: %d fetched, %d failed in %.1f s", done["ok"], done["failed"], time.perf_counter() - started)


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


def write_batches(run: Run) -> None:
    """The pages in batches through the stages (``Run.schedule``), each written as it comes (the
    task write-batch) with its errors, not at the end: a run that dies keeps the batches it wrote.
    Its seconds come from the stages and the writes."""
    seed_hosts = {seed_scope(s.url) for s in run.seeds}
    batches = [run.pages[start:end] for start, end in batch_bounds(len(run.pages), run.cfg.batch_documents)]
    for stage in ("parse", "write"):
        progress.current().expect(stage, len(run.pages))
    seen: set[str] = set()
    tick = time.perf_counter()
    try:
        for number, processed in enumerate(run.schedule(run, batches, seed_hosts), 1):
            written = run.call("write-batch", write_batch, processed, run.index, run.run_id, seen)
            run.store.append("errors", written.errors)
            run.errors.extend(written.errors)
            run.resolved.update(written.resolved)
            run.seconds.update(written.seconds)
            run.totals.update({"indexed": written.documents, "embedded": written.embedded, "reused": written.reused})
            log.info("batch %d/%d: %d documents, %d nodes embedded, %d reused (%.1f s)", number, len(batches),
                     written.documents, written.embedded, written.reused, time.perf_counter() - tick)
            tick = time.perf_counter()
    finally:
        close_pools()  # the parse workers, if any, end with the batches


def prune_cache(run: Run) -> None:
    """Drop embedding-cache rows no node uses, beyond the configured slack."""
    run.pruned = prune_embedding_cache(run.index, run.embedder["model_id"], run.embedder["image_mode"],
                                       run.cfg.embed.cache_slack)


def link_edges(run: Run) -> None:
    """Resolve the links between documents; whether the run changed the tables at all."""
    run.links = resolve_links(run.store)
    run.changed = bool(not run.refresh or run.totals["indexed"] or run.changes["removed"] or run.links["changed"])


def compact_tables(run: Run) -> None:
    run.store.compact_tables()


def build_search_indexes(run: Run) -> None:
    run.store.build_text_indexes()
    run.store.index_embedding_cache()


RUN: tuple[Step, ...] = (
    Step("prepare", prepare, reads=("store", "index", "cfg", "refresh", "reembed", "run_id", "seeds"),
         writes=("rebuild_nodes", "embedder", "store", "previous"), task="prepare-index", seconds="load_model"),
    Step("crawl", crawl_pages, reads=("seeds", "cfg", "index", "previous"), writes=("results",),
         task="crawl-pages", seconds="crawl"),
    Step("plan", plan_pages, reads=("results", "run_id", "refresh", "store", "seeds", "previous", "cfg",
                                    "rebuild_nodes", "gone_errors"),
         writes=("fetched", "failed_fetches", "pages", "by_url", "plan", "gone_errors", "changes")),
    Step("batches", write_batches, reads=("seeds", "pages", "cfg", "schedule", "call", "index", "run_id"),
         writes=("store", "resolved", "seconds", "totals", "errors")),
    Step("superseded", remove_documents, reads=("plan", "pages", "results", "resolved", "by_url", "totals",
                                                "changes", "errors", "allow_mass_delete", "cfg", "index",
                                                "run_id", "gone_errors"),
         writes=("gone_errors",), when="refresh"),
    Step("embedding-cache", prune_cache, reads=("index", "embedder", "cfg"), writes=("pruned",),
         task="prune-embedding-cache", seconds="prune_cache"),
    Step("links", link_edges, reads=("store", "refresh", "totals", "changes", "links"), writes=("links", "changed"),
         task="resolve-links", seconds="resolve_links"),
    Step("compaction", compact_tables, reads=("store",), writes=("store",), task="compact-tables",
         seconds="compact", when="changed"),
    Step("text-indexes", build_search_indexes, reads=("store",), writes=("store",), task="build-search-indexes",
         seconds="text_index", when="changed"),
    Step("publish", publish_run, reads=("store", "index", "run_id", "flow_name", "started_at", "cfg", "lease", "call",
                                        "changed", "seeds", "fetched", "failed_fetches", "totals", "changes",
                                        "errors", "embedder", "links", "pruned", "seconds", "t0"),
         writes=("summary", "store", "seconds")),
    Step("report", report_run, reads=("index", "run_id", "summary"), writes=(), task="publish-run-report"),
)


def run_build(run: Run, steps: Sequence[Step] = RUN) -> dict:
    """Every step of ``steps`` (default ``RUN``) on ``run``; returns its summary."""
    return run_steps(run, steps).summary
