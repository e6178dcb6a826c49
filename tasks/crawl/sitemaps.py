"""Sitemaps: expand a sitemap seed into the page URLs it lists, with their ``lastmod``.

Reads sitemaps (XML urlsets and sitemap indexes, plain text, RSS and Atom feeds; gzipped or not)
fetched one at a time through the crawler, so robots.txt, politeness and retries apply, and
parsed by ultimate-sitemap-parser (``usp``), which is never let fetch anything itself; writes
nothing. An index's sitemaps are fetched breadth first. Bounds, each a problem naming the
sitemap and the reason (never an exception): ``sitemap_max_bytes`` decompressed (gzip is
inflated in a stream that stops there), ``sitemap_max_depth`` nested indexes,
``sitemap_max_files`` sitemaps per seed, ``max_pages`` URLs, loops (an index that lists itself
or an ancestor), URLs off scope or on refused private addresses (skipped and counted, not
fetched), malformed documents (what usp could read is kept).
"""

from __future__ import annotations

import asyncio
import logging
import xml.parsers.expat
import zlib
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from laminae.schemas.errors import LaminaeError
from laminae.schemas.ids import normalize_url
from laminae.tasks.config import CrawlConfig
from laminae.tasks.crawl.hrefs import resolve_link

GZIP_MAGIC = b"\x1f\x8b"


class SitemapFetcher(Protocol):
    """What expansion needs of ``laminae.tasks.crawl.request.Crawler``."""

    cfg: CrawlConfig

    async def fetch(self, url: str, *, kind: str = "page") -> Any: ...

    async def may_follow(self, url: str) -> bool: ...


@dataclass
class SitemapProblem:
    url: str  # the sitemap
    reason: str
    message: str
    severity: str = "error"  # "warning": a bound reached or URLs skipped; the rest was read


@dataclass
class SitemapListing:
    pages: dict[str, datetime | None] = field(default_factory=dict)  # page URL → lastmod (UTC), in order
    problems: list[SitemapProblem] = field(default_factory=list)
    fetched: int = 0  # sitemaps fetched


class SitemapTooLarge(LaminaeError, ValueError):
    pass


def inflate(data: bytes, cap: int) -> bytes:
    """``data`` itself, or gunzipped when it starts with the gzip magic; SitemapTooLarge past
    ``cap`` bytes (the output stops there, whatever the compression ratio), ValueError for a
    broken or truncated gzip stream."""
    if not data.startswith(GZIP_MAGIC):
        if len(data) > cap:
            raise SitemapTooLarge(f"{len(data)} bytes")
        return data
    stream = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = stream.decompress(data, cap + 1)
    except zlib.error as exc:
        raise ValueError(f"not a valid gzip stream ({exc})") from None
    if len(out) > cap:
        raise SitemapTooLarge(f"more than {cap} bytes once decompressed")
    if not stream.eof:
        raise ValueError("the gzip stream is truncated")
    return out


def _xml_error(text: str) -> str | None:
    """Why ``text`` is not well-formed XML, or None. usp reads what it can of a broken document and
    says nothing; this says what was wrong. DOCTYPEs and entities are refused, not expanded."""
    parser = xml.parsers.expat.ParserCreate()

    def refuse(*_args: object) -> None:
        raise ValueError("a DOCTYPE or entity declaration (refused: entity expansion)")

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
    try:
        parser.Parse(text, True)
    except (xml.parsers.expat.ExpatError, ValueError) as exc:
        return str(exc)
    return None


def _utc(when: datetime | None) -> datetime | None:
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
        if (when.hour, when.minute, when.second, when.microsecond) == (0, 0, 0, 0):
            when += timedelta(days=1)  # a bare date: the page may have changed until the day's end
    return when.astimezone(UTC)


def parse_sitemap(text: str) -> tuple[list[tuple[str, datetime | None]], list[str], str | None]:
    """``(pages with lastmod, sub-sitemap URLs, why it is malformed or None)`` of one sitemap
    document, as usp reads it (locations as written, maybe relative)."""
    from usp.objects.sitemap import InvalidSitemap
    from usp.tree import sitemap_from_str

    logging.getLogger("usp").setLevel(logging.CRITICAL)  # it logs every sitemap and problem; ours are rows
    parsed = sitemap_from_str(text)
    if isinstance(parsed, InvalidSitemap):
        return [], [], parsed.reason
    subs = [sub.url for sub in getattr(parsed, "sub_sitemaps", [])]
    pages = [(p.url, _utc(p.last_modified)) for p in parsed.all_pages()]
    malformed = _xml_error(text) if text.lstrip()[:1] == "<" else None
    if malformed:
        malformed = f"not well-formed XML: {malformed}; {len(pages) + len(subs)} URLs read before it"
    return pages, subs, malformed


async def expand_sitemap(url: str, crawler: SitemapFetcher, limit: int) -> SitemapListing:
    """The pages the sitemap ``url`` lists (through its indexes), at most ``limit``."""
    cfg = crawler.cfg
    listing = SitemapListing()
    queue: deque[tuple[str, int, tuple[str, ...]]] = deque([(url, 0, (normalize_url(url),))])
    queued = {normalize_url(url)}
    full = False  # max_pages reached (and said)
    while queue and not full:
        if len(listing.pages) >= limit:
            listing.problems.append(SitemapProblem(
                url, "max_pages", f"max_pages ({limit}) URLs reached; {queue[0][0]} and {len(queue) - 1} more "
                "sitemaps were not fetched", "warning"))
            break
        if listing.fetched >= cfg.sitemap_max_files:
            listing.problems.append(SitemapProblem(
                url, "too_many_sitemaps", f"more than sitemap_max_files ({cfg.sitemap_max_files}) sitemaps under "
                f"{url}; {queue[0][0]} and {len(queue) - 1} more were not fetched", "warning"))
            break
        current, depth, chain = queue.popleft()
        res = await crawler.fetch(current, kind="sitemap")
        listing.fetched += 1
        if not res.ok:
            listing.problems.append(SitemapProblem(current, res.error, res.message or ""))
            continue
        try:
            text = inflate(res.body, cfg.sitemap_max_bytes).decode("utf-8-sig", errors="replace")
        except SitemapTooLarge as exc:
            listing.problems.append(SitemapProblem(current, "too_large", f"sitemap {current} has {exc}; "
                                                   f"sitemap_max_bytes is {cfg.sitemap_max_bytes}"))
            continue
        except ValueError as exc:
            listing.problems.append(SitemapProblem(current, "malformed", f"sitemap {current}: {exc}"))
            continue
        pages, subs, malformed = await asyncio.to_thread(parse_sitemap, text)
        if malformed:
            listing.problems.append(SitemapProblem(current, "malformed", f"sitemap {current}: {malformed}"))
        elif not pages and not subs:
            listing.problems.append(SitemapProblem(current, "empty", f"sitemap {current} lists no URLs", "warning"))
        off_scope: list[str] = []
        unusable: list[str] = []  # <loc>s that are no URL (a bad port, a control character)
        for loc, lastmod in pages:
            target, problem = resolve_link(current, loc)
            if problem:
                unusable.append(loc)
            elif not target or not await crawler.may_follow(target):
                off_scope.append(loc)
            elif len(listing.pages) >= limit and target not in listing.pages:
                listing.problems.append(SitemapProblem(
                    current, "max_pages", f"more than max_pages ({limit}) URLs; {target} and those after it "
                    "were not fetched", "warning"))
                full = True
                break
            else:
                listing.pages.setdefault(target, lastmod)
        for loc in [] if full else subs:
            target, problem = resolve_link(current, loc)
            key = normalize_url(target) if target else ""
            if problem:
                unusable.append(loc)
            elif target and key in chain:
                listing.problems.append(SitemapProblem(
                    current, "loop", f"sitemap {current} lists {target}, which is itself or an index above it; "
                    "not fetched again", "warning"))
            elif not target or not await crawler.may_follow(target):
                off_scope.append(loc)
            elif key in queued:
                continue  # listed by two indexes: fetched once
            elif depth + 1 > cfg.sitemap_max_depth:
                listing.problems.append(SitemapProblem(
                    current, "too_deep", f"{target} is nested {depth + 1} indexes below {url}, deeper than "
                    f"sitemap_max_depth ({cfg.sitemap_max_depth}); not fetched", "warning"))
            else:
                queued.add(key)
                queue.append((target, depth + 1, (*chain, key)))
        if unusable:
            listing.problems.append(SitemapProblem(
                current, "bad_url", f"sitemap {current} lists {len(unusable)} URLs that are no usable URL (a bad port "
                f"or host, a control character), skipped (first: {unusable[0][:200]!r})", "warning"))
        if off_scope:
            listing.problems.append(SitemapProblem(
                current, "out_of_scope", f"sitemap {current} lists {len(off_scope)} URLs off the seed and "
                f"allow-listed hosts or on refused private addresses, skipped (first: {off_scope[0]})", "warning"))
    return listing
