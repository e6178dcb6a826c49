"""The crawl: fetch the seeds and, breadth first, the links they lead to; and the images pages need.

Reads seeds (``tasks/crawl/seeds.py``: a folder seed listed by ``tasks/crawl/files.py``, a sitemap
seed expanded by ``tasks/crawl/sitemaps.py``), the links of each page (``tasks/crawl/hrefs.py``)
and, on a refresh, the previous ``fetches`` rows; writes raw bodies into the index's
content-addressed ``RawStore`` through one ``Crawler`` (``tasks/crawl/request.py``: each request,
its scope, robots.txt and politeness) and returns one ``FetchResult`` (``tasks/crawl/results.py``)
per URL, plus one per robots.txt that could not be read whole (kind ``robots``, a warning) and one
per problem of a folder or sitemap seed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import TypeVar
from urllib.parse import urlsplit

import httpx

from laminae.schemas.ids import canonical_url, normalize_url
from laminae.tasks.config import CrawlConfig
from laminae.tasks.crawl.files import is_file_url, is_folder_url, list_folder
from laminae.tasks.crawl.formats import HTML_TYPES, PDF_TYPE
from laminae.tasks.crawl.hosts import seed_scope
from laminae.tasks.crawl.hrefs import extract_links, extract_pdf_links, same_page_key
from laminae.tasks.crawl.politeness import forget_robots
from laminae.tasks.crawl.request import Crawler
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.crawl.seeds import Seed, without_userinfo
from laminae.tasks.crawl.sitemaps import expand_sitemap
from laminae.tasks.storage.rawstore import RawStore

T = TypeVar("T")
R = TypeVar("R")


async def _as_done(items: Iterable[T], work: Callable[[T], Awaitable[R]], window: int
                   ) -> AsyncIterator[tuple[int, R]]:
    """``(position, await work(item))`` for each item as it is answered, with at most ``window`` of
    them started and not yet answered: a crawl of 100,000 seeds holds a window of tasks, not
    100,000 (the politeness semaphores bound the requests themselves), and a slow one holds up
    no other."""
    running: dict[asyncio.Future[R], int] = {}
    left = enumerate(items)
    try:
        while True:
            for pos, item in left:
                running[asyncio.ensure_future(work(item))] = pos
                if len(running) >= window:
                    break
            if not running:
                return
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                yield running.pop(task), task.result()
    finally:
        for task in running:
            task.cancel()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


async def crawl_async(
    seeds: list[Seed],
    cfg: CrawlConfig,
    store: RawStore,
    *,
    on_result: Callable[[FetchResult], None] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    previous: dict[str, dict] | None = None,
) -> list[FetchResult]:
    """Fetch the seeds, then breadth-first in-scope links up to ``cfg.follow_links`` deep.

    Folder seeds are listed and sitemap seeds expanded first (their pages are depth 0).
    ``previous`` (URL → the last ``fetches`` row) makes requests conditional (ETag,
    Last-Modified); a 304 answer carries the previous raw key, type and final URL, and so does a
    page whose sitemap ``lastmod`` is no later than its previous ``fetched_at`` (not requested). A crawl of
    pages starts with fresh robots.txt answers, which the image fetches of its batches reuse.

    A bad seed line (``Seed.error``) is an error result, reason ``bad_seed``, named by its file and
    line. At most ``4 * total_concurrency`` requests are started ahead; ``on_result`` hears each
    page as it is answered, and the results come in frontier order. A page whose bytes an earlier
    page of the run has, under another spelling of its URL (``same_page_key``), is marked
    ``same_as`` that page and its links are not followed again.
    """
    forget_robots()
    previous = previous or {}
    results: list[FetchResult] = []

    def emit(res: FetchResult) -> None:
        results.append(res)
        if on_result:
            on_result(res)

    for seed in seeds:
        if seed.error:
            emit(FetchResult(url=seed.url, error="bad_seed", message=seed.error))
        elif canonical_url(seed.url) is None:  # a remembered seed read_seeds would refuse now
            emit(FetchResult(url=seed.url, error="bad_url", message=f"seed {seed.url[:300]!r} is no usable http(s) "
                             "or file URL; not fetched (pass --seeds with the seeds file to replace it)"))
    seeds = [without_userinfo(s) for s in seeds if not s.error and canonical_url(s.url) is not None]
    seed_hosts = {seed_scope(s.url) for s in seeds} - {""}
    credentials = {_origin(s.url): s.auth for s in seeds if s.auth}
    seen: set[str] = set()
    spellings: dict[str, dict[str, str]] = {}  # raw key → same_page_key → the first URL with those bytes
    window = 4 * cfg.total_concurrency
    async with Crawler(cfg, store, seed_hosts, transport=transport, credentials=credentials) as crawler:
        frontier, lastmods, listed = await _expand_seeds(seeds, crawler, seen)
        for res in listed:
            emit(res)

        async def fetch(entry: tuple[str, dict]) -> FetchResult:
            url = entry[0]
            before = previous.get(url)
            if _unchanged_since(lastmods.get(url), before):
                return FetchResult(url=url, not_modified=True)  # the sitemap says so: not even asked
            return await crawler.fetch(url, etag=(before or {}).get("etag"),
                                       last_modified=(before or {}).get("last_modified"))

        async def fetch_whole(entry: tuple[str, dict]) -> FetchResult:
            res = await fetch(entry)
            if res.not_modified and not _reuse_previous(res, previous.get(res.url), store):
                res = await crawler.fetch(res.url)  # a 304 for a page whose bytes we lack: fetch it whole
            if on_result:
                on_result(res)
            return res

        for depth in range(cfg.follow_links + 1):
            level: list[FetchResult | None] = [None] * len(frontier)
            async for pos, res in _as_done(frontier, fetch_whole, window):
                level[pos] = res
            next_frontier: list[tuple[str, dict]] = []
            for res, (_, annotations) in zip(level, frontier, strict=True):  # in frontier order: deterministic
                assert res is not None
                res.depth, res.annotations = depth, annotations
                if res.ok and res.raw_key:
                    where = res.final_url or res.url
                    first = spellings.setdefault(res.raw_key, {}).setdefault(same_page_key(where), where)
                    res.same_as = first if first != where else None
                results.append(res)
                if res.final_url:
                    seen.add(normalize_url(res.final_url))
                if (depth == cfg.follow_links or not res.ok or not res.raw_key or res.same_as
                        or (res.content_type not in HTML_TYPES and res.content_type != PDF_TYPE)):
                    continue
                source = res.final_url or res.url
                body = store.get(res.raw_key)
                links = extract_pdf_links(body, source) if res.content_type == PDF_TYPE else \
                    extract_links(body, source, res.charset)
                for link in links:
                    key = normalize_url(link)
                    if key in seen or len(seen) >= cfg.max_pages:
                        continue
                    if is_file_url(link) and not is_file_url(source):
                        continue  # a web page never leads into the disk (resolve_href already says so)
                    refused = await crawler.scope.refusal(link)
                    if refused is None:
                        seen.add(key)
                        next_frontier.append((link, {}))
                    elif refused.reason == "private_address":  # an allow-listed host: say why it is left
                        seen.add(key)
                        emit(FetchResult(url=link, error=refused.reason, message=refused.message,
                                         severity="warning", depth=depth + 1))
            frontier = next_frontier
            if not frontier:
                break
        for problem in crawler.problems:
            emit(problem)
    return results


async def _expand_seeds(seeds: list[Seed], crawler: Crawler, seen: set[str]
                        ) -> tuple[list[tuple[str, dict]], dict[str, datetime], list[FetchResult]]:
    """The first frontier (URL, annotations): the seeds, each folder seed replaced by the page files
    under it and each sitemap seed by the pages it lists (at most ``max_pages`` in all); the
    sitemaps' ``lastmod`` of those pages; and a result for each problem of a folder or a sitemap
    (a listing that went wrong, a bound reached, URLs skipped)."""
    cfg = crawler.cfg
    frontier: list[tuple[str, dict]] = []
    lastmods: dict[str, datetime] = {}
    listed: list[FetchResult] = []
    for seed in seeds:
        if is_folder_url(seed.url):
            kind = "folder"
            urls, problems = await asyncio.to_thread(list_folder, seed.url, crawler.scope.roots)
            listed += [FetchResult(url=u, kind=kind, error=r, message=m) for u, r, m in problems]
            pages: dict[str, datetime | None] = dict.fromkeys(urls)
        elif seed.is_sitemap:
            kind = "sitemap"
            listing = await expand_sitemap(seed.url, crawler, cfg.max_pages - len(seen))
            listed += [FetchResult(url=p.url, kind=kind, error=p.reason, message=p.message, severity=p.severity)
                       for p in listing.problems]
            pages = listing.pages
        else:
            if normalize_url(seed.url) not in seen:
                seen.add(normalize_url(seed.url))
                frontier.append((seed.url, seed.annotations))
            continue
        for url, lastmod in pages.items():
            if normalize_url(url) in seen:
                continue
            if len(seen) >= cfg.max_pages:
                listed.append(FetchResult(url=seed.url, kind=kind, error="max_pages", severity="warning",
                                          message=f"more than max_pages ({cfg.max_pages}) pages; {url} and "
                                          "those after it were not fetched"))
                break
            seen.add(normalize_url(url))
            frontier.append((url, seed.annotations))
            if lastmod is not None:
                lastmods[url] = lastmod
    return frontier, lastmods, listed


def _reuse_previous(res: FetchResult, before: dict | None, store: RawStore) -> bool:
    """Give a not-modified result the bytes, type and validators of its previous fetch; False when
    those bytes are not in the raw store (then the URL must be fetched whole)."""
    if not before or before.get("raw_key") not in store:
        return False
    res.raw_key, res.content_type = before["raw_key"], before["content_type"]
    res.final_url, res.size = before.get("final_url") or res.url, before.get("size") or 0
    res.etag = res.etag or before.get("etag")
    res.last_modified = res.last_modified or before.get("last_modified")
    return True


def _unchanged_since(lastmod: datetime | None, before: dict | None) -> bool:
    """A sitemap's lastmod no later than the previous fetch of a page whose bytes we have."""
    fetched_at = (before or {}).get("fetched_at")
    if lastmod is None or fetched_at is None or not before.get("raw_key"):
        return False
    if fetched_at.tzinfo is None:
        fetched_at = fetched_at.replace(tzinfo=UTC)
    return lastmod <= fetched_at


def crawl(seeds: list[Seed], cfg: CrawlConfig, store: RawStore, **kwargs) -> list[FetchResult]:
    """Synchronous wrapper of :func:`crawl_async`."""
    return asyncio.run(crawl_async(seeds, cfg, store, **kwargs))


async def _fetch_images_async(urls: list[str], cfg: CrawlConfig, store: RawStore, seed_hosts: set[str], kind: str,
                              previous: dict[str, dict], problems: list[FetchResult] | None
                              ) -> dict[str, FetchResult]:
    async with Crawler(cfg, store, seed_hosts) as crawler:

        async def fetch(url: str) -> FetchResult:
            before = previous.get(url) or {}
            res = await crawler.fetch(url, kind=kind, etag=before.get("etag"),
                                      last_modified=before.get("last_modified"))
            if res.not_modified and not _reuse_previous(res, before, store):
                res = await crawler.fetch(url, kind=kind)
            return res

        done = {pos: res async for pos, res in _as_done(urls, fetch, 4 * cfg.total_concurrency)}
    if problems is not None:
        problems.extend(crawler.problems)
    return {url: done[pos] for pos, url in enumerate(urls)}


def fetch_images(urls: Iterable[str], cfg: CrawlConfig, store: RawStore, seed_hosts: set[str], kind: str = "image",
                 previous: dict[str, dict] | None = None, problems: list[FetchResult] | None = None
                 ) -> dict[str, FetchResult]:
    """Fetch image URLs (or, with ``kind`` video or captions, the files a page's videos need) under
    the page rules; out-of-scope URLs come back with error ``out_of_scope``, those on a refused
    private address with ``private_address``. ``previous`` (URL → its last ``fetches`` row) makes
    the requests conditional: a 304 answer carries the previous bytes' key (``not_modified``).
    ``problems`` receives the robots.txt warnings of hosts whose robots.txt this call read."""
    unique = list(dict.fromkeys(urls))
    if not unique:
        return {}
    return asyncio.run(_fetch_images_async(unique, cfg, store, seed_hosts, kind, previous or {}, problems))
