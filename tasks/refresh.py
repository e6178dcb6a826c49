"""Refresh semantics: what a run does with the pages an index already holds.

Reads the fetch results of this run, the fetch record of the run before (``fetches``: each page's
raw key) and the page each document was recorded with (``documents``); returns which pages are
unchanged (kept, not re-parsed), which are parsed, and which documents go: a page that answered
404 or 410 or whose file is gone (gone), one no longer reached by the crawl (dropped), one whose
page now resolves to another document (superseded). The two lookups it needs from the index are
here too (``previous_fetches``, ``documents_by_url``). Writes nothing: ``laminae.tasks.plan``
applies it, every deletion of a run at once and only within ``deletion_bound`` (rsync's
``--max-delete``).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from laminae.schemas.ids import digest
from laminae.schemas.sql import sql_list
from laminae.tasks.crawl.files import file_url, is_folder_url, path_of
from laminae.tasks.crawl.formats import PAGE_TYPES
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.storage.index_store import IndexStore

GONE = ("http_404", "http_410", "not_found")  # the page (or file) is gone: its document goes with it
LISTINGS = ("folder", "sitemap", "robots")  # results about a seed or a host, not of a page


@dataclass
class RefreshPlan:
    """What a refresh does with this run's fetch results."""

    parse: list[FetchResult]  # pages to parse (new, changed, or built by another serialization)
    unchanged: list[FetchResult] = field(default_factory=list)  # same bytes as last time: kept as they are
    removed: list[str] = field(default_factory=list)  # documents of gone or dropped pages
    gone: set[str] = field(default_factory=set)  # pages that answered 404 or 410
    changes: Counter[str] = field(default_factory=Counter)  # unchanged, changed, added, removed
    dropped: set[str] = field(default_factory=set)  # pages no longer reached
    kept: list[tuple[str, str, str]] = field(default_factory=list)  # (url, reason, message): nothing dropped


def previous_fetches(store: IndexStore, urls: list[str] | None = None) -> dict[str, dict]:
    """The last ``fetches`` row of every URL, or of ``urls`` only (for conditional requests and
    sitemap lastmods); rows that recorded an error are left out.

    The crawl looks up every URL's validators, so each row is a dict (140 MB and 0.8 s at
    100,000 pages); the rows with an error are left out by the query, not after it."""
    tbl = store.table("fetches")
    if tbl.count_rows() == 0 or urls == []:
        return {}
    where = "error IS NULL"
    if urls is not None:
        where += f" AND id IN ({sql_list(['f' + digest(u) for u in urls])})"
    fields = ["url", "final_url", "etag", "last_modified", "raw_key", "content_type", "size", "fetched_at", "error"]
    data = tbl.search().where(where).select(fields).limit(None).to_arrow()
    columns = [data.column(f).to_pylist() for f in fields]
    return {values[0]: dict(zip(fields, values, strict=True)) for values in zip(*columns, strict=True)}

def documents_by_url(store: IndexStore) -> dict[str, str]:
    """Requested URL → document id of every indexed document."""
    data = store.table("documents").search().select(["id", "url"]).limit(None).to_arrow()
    return dict(zip(data.column("url").to_pylist(), data.column("id").to_pylist(), strict=True))


def pages_of(results: list[FetchResult]) -> list[FetchResult]:
    """The fetch results that become documents (HTML pages and PDFs fetched without error)."""
    return [r for r in results if r.ok and r.content_type in PAGE_TYPES]


def plan_refresh(results: list[FetchResult], previous: dict[str, dict], by_url: dict[str, str],
                 follow_links: int, rebuild: bool, folders: list[str] | tuple[str, ...] = ()) -> RefreshPlan:
    """``previous``: each page's fetch row from the run before; ``by_url``: the document each page
    was recorded with; ``rebuild``: the index was serialized by another version (every page is
    parsed again); ``folders``: the folder seeds. A page the crawl did not reach this time is
    dropped when the seeds are the whole corpus (``follow_links`` 0) or when nothing failed
    transiently (a failed link-following crawl may simply not have reached it).

    Nothing is dropped while a listing went wrong (rsync skips every deletion after an I/O error):
    a folder seed that could not be listed, gone (moved aside) or not, a sitemap that could not be
    fetched or read; nor while a folder seed lists no file at all where the index holds documents
    under it (an unmounted mount point, an emptied share). Each such case is in ``kept``, for a
    warning row."""
    pages = pages_of(results)
    unchanged = [r for r in pages if r.url in by_url and not rebuild
                 and (previous.get(r.url) or {}).get("raw_key") == r.raw_key]
    kept = {id(r) for r in unchanged}  # by identity: `r not in unchanged` compared every pair of pages
    parse = [r for r in pages if id(r) not in kept]
    gone = {r.url for r in results if r.error in GONE and r.url in by_url and r.kind not in LISTINGS}
    reached = {r.url for r in results}
    failed = [r for r in results if not r.ok and r.error not in GONE and r.severity == "error"]
    transient = any(r.kind not in LISTINGS for r in failed)
    missed = sorted(u for u in by_url if u not in reached)
    held = _unlisted(results, missed) + _emptied(folders, results, missed) if missed else []
    dropped = set() if held else {u for u in missed if follow_links == 0 or not transient}
    changes = Counter(unchanged=len(unchanged), changed=sum(r.url in by_url for r in parse),
                      added=sum(r.url not in by_url for r in parse), removed=len(gone | dropped))
    return RefreshPlan(parse, unchanged, [by_url[u] for u in sorted(gone | dropped)], gone, changes, dropped, held)


def _prefixes(folder: str) -> tuple[str, ...]:
    """The URL prefixes of the files under folder URL ``folder``: as named and as listed (its real path)."""
    named = folder if folder.endswith("/") else folder + "/"
    return (named, file_url(Path(os.path.realpath(path_of(named))), folder=True))


def _unlisted(results: list[FetchResult], missed: list[str]) -> list[tuple[str, str, str]]:
    """A ``kept`` entry for each listing (folder, sitemap, robots.txt) that went wrong."""
    held = []
    for r in results:
        if r.kind not in LISTINGS or r.ok or r.severity != "error":
            continue
        what = f"the {len(missed)} indexed document(s) this run did not reach are kept"
        if r.kind == "folder":
            what += f" ({sum(u.startswith(_prefixes(r.url)) for u in missed)} under it)"
        held.append((r.url, "deletions_skipped", f"{r.kind} could not be listed ({r.error}): {what}; a refresh "
                     "that cannot list a seed deletes no document it did not reach (rsync's rule after an I/O "
                     "error); they go when a refresh lists it again without them"))
    return held


def _emptied(folders: list[str] | tuple[str, ...], results: list[FetchResult],
             missed: list[str]) -> list[tuple[str, str, str]]:
    """A ``kept`` entry for each folder seed that listed no file while the index holds documents
    under it: an empty folder where files were (an unmounted mount point) deletes nothing."""
    held = []
    for folder in folders:
        if not is_folder_url(folder):
            continue
        prefixes = _prefixes(folder)
        if any(r.url.startswith(prefixes) or r.url in prefixes for r in results):
            continue
        under = sum(u.startswith(prefixes) for u in missed)
        if under:
            held.append((folder, "deletions_skipped", f"folder listed no file, yet the index holds {under} "
                         "document(s) under it (an unmounted mount point, an emptied share?): they are kept; "
                         "delete them with `laminae refresh --seeds` naming the seeds without this folder"))
    return held


def unsettled_pages(results: list[FetchResult], parse: list[FetchResult], resolved: dict[str, str]) -> set[str]:
    """Pages of this run that failed transiently or did not parse: they may hold any document."""
    failed = {r.url for r in results
              if not r.ok and r.error not in GONE and r.kind not in LISTINGS and r.severity == "error"}
    return failed | ({r.url for r in parse} - set(resolved))


def superseded_documents(by_url: dict[str, str], resolved: dict[str, str], reparsed: set[str],
                         unsettled: set[str]) -> list[str]:
    """Documents that a re-parsed page no longer resolves to (its canonical URL changed) and that no
    page still holds.

    ``by_url``: the page each document was recorded with before the run (one per document);
    ``resolved``: the document each page parsed in this run resolves to; ``reparsed``: the pages
    fetched anew in this run; ``unsettled``: pages of this run that failed (a transient error, a
    parse error) and that ``by_url`` does not name. Such a page may share any document, so while
    there is one nothing is superseded (the next refresh tries again)."""
    if unsettled:
        return []
    live = set(resolved.values()) | {doc for url, doc in by_url.items() if url not in resolved}
    old = {by_url[url] for url in reparsed if url in by_url and url in resolved and resolved[url] != by_url[url]}
    return sorted(old - live)


def deletion_bound(count: int, total: int, max_count: int, max_fraction: float, index: str) -> str | None:
    """Why a run may not delete ``count`` of the index's ``total`` documents, or None when it may:
    past both ``max_count`` deletions and ``max_fraction`` of the documents, a run deletes none of
    them (rsync's ``--max-delete``: a site answering 404 for everything, a seed folder emptied by
    mistake), until a run with ``--allow-mass-delete``."""
    if count <= max_count or count <= max_fraction * total:
        return None
    return (f"this refresh would delete {count} of the index's {total} documents, more than max_delete_count "
            f"({max_count}) and max_delete_fraction ({max_fraction:g}) allow: none was deleted. If those pages "
            f"are really gone, run `laminae refresh --index {index} --allow-mass-delete`")
