"""Refresh semantics: what a run does with the pages an index already holds.

Reads the fetch results of this run, the fetch record of the run before (``fetches``: each page's
raw key) and the page each document was recorded with (``documents``); returns which pages are
unchanged (kept, not re-parsed), which are parsed, and which documents go: a page that answered
404 or 410 or whose file is gone (gone), one no longer reached by the crawl (dropped), one whose
page now resolves to another document (superseded). Writes nothing: ``laminae.flows.build.run_update`` applies it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from laminae.tasks.crawl.fetch import PAGE_TYPES, FetchResult

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


def pages_of(results: list[FetchResult]) -> list[FetchResult]:
    """The fetch results that become documents (HTML pages and PDFs fetched without error)."""
    return [r for r in results if r.ok and r.content_type in PAGE_TYPES]


def plan_refresh(results: list[FetchResult], previous: dict[str, dict], by_url: dict[str, str],
                 follow_links: int, rebuild: bool) -> RefreshPlan:
    """``previous``: each page's fetch row from the run before; ``by_url``: the document each page
    was recorded with; ``rebuild``: the index was serialized by another version (every page is
    parsed again). A page the crawl did not reach this time is dropped when the seeds are the whole
    corpus (``follow_links`` 0) or when nothing failed transiently (a failed link-following crawl
    may simply not have reached it). While a folder seed could not be listed (an error other than
    gone), nothing is dropped: its pages were not reached, not removed; the same for a sitemap that
    could not be fetched or read."""
    pages = pages_of(results)
    unchanged = [r for r in pages if r.url in by_url and not rebuild
                 and (previous.get(r.url) or {}).get("raw_key") == r.raw_key]
    kept = {id(r) for r in unchanged}  # by identity: `r not in unchanged` compared every pair of pages
    parse = [r for r in pages if id(r) not in kept]
    gone = {r.url for r in results if r.error in GONE and r.url in by_url}
    reached = {r.url for r in results}
    failed = [r for r in results if not r.ok and r.error not in GONE and r.severity == "error"]
    transient = any(r.kind not in LISTINGS for r in failed)
    unlisted = any(r.kind in LISTINGS for r in failed)
    dropped = {u for u in by_url if u not in reached and not unlisted and (follow_links == 0 or not transient)}
    changes = Counter(unchanged=len(unchanged), changed=sum(r.url in by_url for r in parse),
                      added=sum(r.url not in by_url for r in parse), removed=len(gone | dropped))
    return RefreshPlan(parse, unchanged, [by_url[u] for u in sorted(gone | dropped)], gone, changes)


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
