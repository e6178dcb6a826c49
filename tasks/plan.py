"""The run's plan applied: which fetched pages are parsed, and on a refresh which documents go.

``plan_pages`` reads the crawl's results (and on a refresh the last run's fetches and documents)
and returns the crawl's error rows and fetch rows to write (on a refresh also the refresh plan's
unchanged fetches and kept pages' warnings); ``remove_documents`` returns, after the batches are
written, every deletion of a refresh at once with the rows that say what became of gone pages.
The rules are ``laminae.tasks.refresh``'s; these are steps of ``laminae.tasks.run.RUN``.
"""

from __future__ import annotations

from laminae.schemas.tables import error_row
from laminae.tasks.batches import crawl_errors, fetch_row
from laminae.tasks.crawl.files import is_folder_url
from laminae.tasks.crawl.formats import PAGE_TYPES
from laminae.tasks.publish import run_status
from laminae.tasks.refresh import (
    LISTINGS,
    deletion_bound,
    documents_by_url,
    pages_of,
    plan_refresh,
    superseded_documents,
    unsettled_pages,
)
from laminae.tasks.run_record import Output, Run


def plan_pages(run: Run) -> Output:
    """The pages to parse (on a refresh, those the refresh plan did not keep or remove) and the
    crawl's problems and failed fetches, to be recorded. A gone page's error row waits in
    ``gone_errors`` (a warning: the page is gone, not broken) until its document's fate is known."""
    errors = crawl_errors(run.results, run.run_id)
    run.fetched = [r for r in run.results if r.kind not in LISTINGS]  # a folder's listing is no fetch
    run.failed_fetches = [r for r in run.fetched if not r.ok or r.content_type not in PAGE_TYPES]
    run.pages = pages_of(run.results)
    fetches = [fetch_row(r, run.run_id) for r in run.failed_fetches]
    if run.refresh:
        run.by_url = documents_by_url(run.store)
        folders = [s.url for s in run.seeds if is_folder_url(s.url)]
        run.plan = plan = plan_refresh(run.results, run.previous, run.by_url, run.cfg.crawl.follow_links,
                                       run.rebuild_nodes, folders)
        fetches = [fetch_row(r, run.run_id) for r in plan.unchanged] + fetches
        run.pages = plan.parse
        errors += [error_row(run.run_id, url, "refresh", reason, message, severity="warning")
                   for url, reason, message in plan.kept]
        run.gone_errors = [e for e in errors if e["url"] in plan.gone]
        for e in run.gone_errors:
            e["severity"] = "warning"
        errors = [e for e in errors if e["url"] not in plan.gone]
        run.changes.update({k: v for k, v in plan.changes.items() if k != "removed"})
    unique = {f["id"]: f for f in fetches}  # a URL in both keeps its last row, as two upserts would
    return Output(rows={"errors": errors}, upserts={"fetches": list(unique.values())})


def remove_documents(run: Run) -> Output | None:
    """On a refresh, every deletion of the run at once, after its writes: the documents of gone and
    dropped pages (``plan_refresh``) and those whose pages now belong to another document
    (superseded). None when the run failed (it publishes nothing, so it changes nothing), nor past
    the deletion bound unless the run allows it (``deletion_bound``: rsync's ``--max-delete``)."""
    if run.plan is None:
        return None
    plan = run.plan
    reparsed = {r.url for r in run.pages}
    unsettled = unsettled_pages(run.results, run.pages, run.resolved) - set(run.by_url)
    superseded = superseded_documents(run.by_url, run.resolved, reparsed, unsettled)
    written = set(run.resolved.values())  # a gone page's document that another page now holds stays
    doomed = [d for d in plan.removed if d not in written]
    doomed += [d for d in superseded if d not in set(doomed)]
    refusal = None
    if doomed and run_status(run.totals["indexed"] + run.changes["unchanged"], run.errors) == "failure":
        refusal = (f"the run failed, so it deletes nothing: {len(doomed)} document(s) whose pages are gone or "
                   "no longer reached stay until a refresh that succeeds")
    elif doomed and not run.allow_mass_delete:
        refusal = deletion_bound(len(doomed), len(run.by_url), run.cfg.max_delete_count, run.cfg.max_delete_fraction,
                                 run.index)
    note = "; the page and its nodes were removed"
    skipped = []
    if refusal is not None:
        skipped = [error_row(run.run_id, run.index, "refresh", "deletions_skipped",
                             f"{refusal} (gone {len(plan.gone)}, no longer reached {len(plan.dropped)}, "
                             f"superseded {len(superseded)})", severity="warning")]
        note = "; its document was kept (see the run's deletions_skipped warning)"
        doomed = []
    for e in run.gone_errors:
        e["message"] += note
    return Output(rows={"errors": skipped + run.gone_errors}, deleted=doomed)
