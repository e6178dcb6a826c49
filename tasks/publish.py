"""The end of a run: its status and summary, its ``runs`` row, the manifest that publishes it, the
reader snapshot and the cleanup of older versions, then the index's HTML report.

Reads the run record (``laminae.tasks.run_record.Run``) and the tables' counts; writes the
``runs`` row, a manifest (unless the run failed), ``index.json``'s parser version, the reader
snapshot, the cleanup, ``errors`` rows (warnings) for what failed after the manifest went live,
and ``<index>/report.html``. Steps of ``laminae.tasks.run.RUN``.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from datetime import UTC, datetime

from laminae.schemas.tables import TABLES, error_row
from laminae.stats import table_stats
from laminae.tasks.parse import PARSER_VERSION
from laminae.tasks.report.run_report import write_report
from laminae.tasks.run_record import Run
from laminae.tasks.storage.index_store import IndexConfigError, IndexStore

log = logging.getLogger("laminae.build")

# what may fail after a manifest went live without being a bug of ours: the disk, damaged data
# (LanceDB's I/O errors are RuntimeErrors)
AFTER_PUBLISH_ERRORS = (OSError, ValueError, MemoryError, RuntimeError, IndexConfigError)


def run_status(indexed: int, errors: list[dict]) -> str:
    """success without error rows; partial with some but documents indexed; failure otherwise."""
    hard = [e for e in errors if e["severity"] == "error"]
    if not hard:
        return "success"
    return "partial" if indexed else "failure"


def clean_up_versions(index: str, keep: int) -> dict[str, int] | Exception:
    """The cleanup of older versions, or the exception that stopped it (returned, not raised: the
    run is published, and Prefect would log a raised one as a failed task with its traceback)."""
    try:
        freed = IndexStore(index).clean_up(keep)
    except AFTER_PUBLISH_ERRORS as exc:
        return exc
    log.info("cleanup: %d table versions older than the newest %d manifests deleted", sum(freed.values()), keep)
    return freed


def write_reader_snapshot(index: str, version: int, same_as: int | None = None) -> Exception | None:
    """Write the reader snapshot of manifest ``version``; the exception that stopped it, returned
    (see ``clean_up_versions``)."""
    try:
        IndexStore(index).write_snapshot(version, same_as=same_as)
    except AFTER_PUBLISH_ERRORS as exc:
        return exc
    return None


def after_publish_error(run_id: str, index: str, stage: str, exc: Exception, what_now: str) -> dict:
    """An ``errors`` row (a warning) for a step after the manifest went live (snapshot, cleanup)."""
    return error_row(run_id, index, stage, type(exc).__name__, f"{exc}; {what_now}", severity="warning")


def summarize_run(run: Run) -> dict:
    """The run's summary: status, counts of pages, documents and vectors, the tables' counts, errors
    and warnings by stage, seconds by stage."""
    status = run_status(run.totals["indexed"] + run.changes["unchanged"], run.errors)
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


def publish_run(run: Run) -> None:
    """The summary and the ``runs`` row, then (unless the run failed) the manifest it names, the
    reader snapshot and the cleanup of older versions (each through ``Run.call``: the tasks
    write-reader-snapshot and clean-up-versions)."""
    run.summary = summary = summarize_run(run)
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
    if run.lease is not None:
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
    failed = run.call("write-reader-snapshot", write_reader_snapshot, index, version,
                      None if run.changed else version - 1)
    if failed is None:
        log.info("reader snapshot written in %.1f s", time.perf_counter() - tick)
    else:
        summary["snapshot_error"] = f"{type(failed).__name__}: {failed}"
        problems.append(after_publish_error(run_id, index, "snapshot", failed,
                                            "readers load the view from the tables (slower); "
                                            f"`laminae compact --index {index}` writes it again"))
    freed = run.call("clean-up-versions", clean_up_versions, index, run.cfg.keep_manifests)
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


def report_run(run: Run) -> None:
    """The index's HTML report, ``<index>/report.html``, and the summary's log line; a report that
    fails is logged, the run stands."""
    try:
        log.info("report: %s", write_report(run.index))
    except Exception as exc:  # noqa: BLE001 - the run stands; one line, not a traceback (-v shows it)
        log.warning("the HTML report of %s could not be written (%s: %s)", run.index, type(exc).__name__, exc,
                    exc_info=log.isEnabledFor(logging.DEBUG))
    log.info("run %s %s: %s", run.run_id, run.summary["status"], json.dumps(run.summary, default=str))
