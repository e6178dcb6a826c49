"""Politeness: robots.txt, and how many requests a host gets at once and how far apart.

Reads each origin's robots.txt (fetched like any page through the crawler, each redirect hop
checked, cut at ``ROBOTS_MAX_BYTES`` decompressed) and the crawl settings' ``respect_robots``,
``user_agent``, ``per_host_delay``, ``per_host_concurrency`` and ``total_concurrency``; writes a
warning result (kind ``robots``) for each robots.txt that could not be read whole, and keeps each
origin's answer for ``ROBOTS_TTL`` seconds in this process, for the later crawlers of the same
run (the image fetches of its batches). ``Crawler.fetch`` (``tasks/crawl/request.py``) asks
``allowed`` before each request and sends it inside ``turn``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

from protego import Protego

from laminae.tasks.config import CrawlConfig
from laminae.tasks.crawl.results import FetchResult

ROBOTS_TTL = 3600.0  # seconds a robots.txt answer serves later crawlers in this process (image batches)
ROBOTS_MAX_BYTES = 1_000_000  # of a robots.txt (decompressed) read; the rules past it are not (RFC 9309 asks 500 KiB)
_ROBOTS: dict[str, tuple[float, Protego | None]] = {}


def forget_robots() -> None:
    """Drop the robots.txt answers this process holds: a crawl of pages starts with fresh ones."""
    _ROBOTS.clear()


class Politeness:
    """One crawler's robots.txt rules per origin and its turns per host. ``fetch`` reads a
    robots.txt (the crawler's own ``fetch``, kind ``robots``); ``problems`` receives a warning
    result for each robots.txt that could not be read whole."""

    def __init__(self, cfg: CrawlConfig, fetch: Callable[..., Awaitable[FetchResult]],
                 problems: list[FetchResult]) -> None:
        self.cfg = cfg
        self.fetch = fetch
        self.problems = problems
        self._global = asyncio.Semaphore(cfg.total_concurrency)
        self._host_sems: dict[str, asyncio.Semaphore] = {}
        self._host_next: dict[str, float] = {}
        self._host_locks: dict[str, asyncio.Lock] = {}
        self._robots: dict[str, Protego | None] = {}
        self._robots_locks: dict[str, asyncio.Lock] = {}

    async def _robots_for(self, url: str) -> Protego | None:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        lock = self._robots_locks.setdefault(origin, asyncio.Lock())
        async with lock:
            cached = _ROBOTS.get(origin)
            if origin not in self._robots and cached and time.monotonic() - cached[0] < ROBOTS_TTL:
                self._robots[origin] = cached[1]
            if origin not in self._robots:
                parser = await self._read_robots(origin + "/robots.txt")
                self._robots[origin] = parser
                _ROBOTS[origin] = (time.monotonic(), parser)
            return self._robots[origin]

    async def _read_robots(self, url: str) -> Protego | None:
        """The rules of one robots.txt, fetched like any page (each redirect hop checked, the body
        streamed and cut at ROBOTS_MAX_BYTES decompressed); None when it has none to give. A
        robots.txt that is absent (4xx) or empty has no rules; one cut at the cap gives the rules
        of its first ROBOTS_MAX_BYTES bytes, and one that could not be read at all gives none
        (crawled as if absent), each of these two with a warning in ``problems``."""
        res = await self.fetch(url, kind="robots")
        status = res.status or 0
        if res.ok and res.body is not None:
            text = res.body.decode("utf-8", errors="replace")
            if res.truncated:
                text = text.rsplit("\n", 1)[0]  # the line cut in two is not a rule
                self.problems.append(FetchResult(
                    url=url, kind="robots", error="robots_truncated", severity="warning", status=status,
                    message=f"{url} is larger than {ROBOTS_MAX_BYTES} bytes (once decompressed); only the rules "
                    "before that were read"))
            return Protego.parse(text)
        if res.ok or res.error == "empty_body" or (400 <= status < 500 and res.error == f"http_{status}"):
            return None  # a page (a 304 cannot come: nothing conditional was asked) or no robots.txt
        self.problems.append(FetchResult(
            url=url, kind="robots", error=res.error, severity="warning", status=res.status,
            message=f"robots.txt unreadable, its host crawled as if it had none: {res.message}"))
        return None

    async def allowed(self, url: str) -> bool:
        """Does robots.txt let the crawler's user agent fetch ``url`` (always, without ``respect_robots``)."""
        if not self.cfg.respect_robots:
            return True
        parser = await self._robots_for(url)
        return parser is None or parser.can_fetch(url, self.cfg.user_agent)

    async def _wait_turn(self, host: str, url: str) -> None:
        delay = self.cfg.per_host_delay
        if self.cfg.respect_robots:
            parser = self._robots.get(f"{urlsplit(url).scheme}://{urlsplit(url).netloc}")
            crawl_delay = parser.crawl_delay(self.cfg.user_agent) if parser else None
            if crawl_delay:
                delay = max(delay, float(crawl_delay))
        if delay <= 0:
            return
        lock = self._host_locks.setdefault(host, asyncio.Lock())
        async with lock:
            now = time.monotonic()
            wait = self._host_next.get(host, 0.0) - now
            if wait > 0:
                await asyncio.sleep(wait)
            self._host_next[host] = max(now, self._host_next.get(host, 0.0)) + delay

    @asynccontextmanager
    async def turn(self, host: str, url: str) -> AsyncIterator[None]:
        """Hold one of ``total_concurrency`` and one of the host's ``per_host_concurrency`` places,
        after the host's delay (``per_host_delay``, or robots.txt's Crawl-delay when longer) since
        its previous request: a request to ``url`` is sent inside."""
        sem = self._host_sems.setdefault(host, asyncio.Semaphore(self.cfg.per_host_concurrency))
        async with self._global, sem:
            await self._wait_turn(host, url)
            yield
