"""Crawl: fetch seed pages (optionally following links) and the images they reference.

Reads seed URLs (``file://`` ones from the local disk: ``tasks/crawl/files.py``); writes raw bodies into the index's content-addressed ``RawStore`` and returns
one ``FetchResult`` per URL (status, final URL, redirect chain, sniffed content type, raw key or
the error that stopped it), plus one per robots.txt that could not be read whole (kind
``robots``, a warning). Politeness: per-host concurrency and delay, robots.txt, bounded
redirects, connect/read/total timeouts, body size caps, retries with backoff on transient errors.

Scope: every request (robots.txt, sitemaps, pages, pictures, videos, captions) goes through
``Crawler.fetch``, which checks each redirect hop before asking it (a seed's or allow-listed
host; not a private, loopback, link-local or other non-global address unless it is a seed's
host or allowed by ``allow_private``: the name is resolved and its addresses checked, and the
address a response really came from is checked again before its body is read; the checks are
in ``tasks/crawl/hosts.py``) and streams the body under its cap, undoing gzip or deflate in steps
that stop at the cap.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import mimetypes
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar
from urllib.parse import urljoin, urlsplit

import httpx
from protego import Protego
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from laminae.schemas.ids import canonical_url, normalize_url
from laminae.tasks.config import CrawlConfig
from laminae.tasks.crawl.files import (
    FileProblem,
    inside,
    is_file_url,
    is_folder_url,
    list_folder,
    read_file,
    real_roots,
)
from laminae.tasks.crawl.formats import (  # noqa: F401 (re-exported: the crawl's callers import them from here)
    HTML_TYPES,
    PAGE_TYPES,
    PDF_TYPE,
    VIDEO_TYPES,
    sniff_content_type,
    sniff_video,
)
from laminae.tasks.crawl.hosts import (
    addresses_of,
    bare_host,
    host_of,
    is_network,
    is_non_global,
    plain_address,
    seed_scope,
)
from laminae.tasks.crawl.links import extract_links, extract_pdf_links, same_page_key
from laminae.tasks.crawl.seeds import Seed, without_userinfo
from laminae.tasks.crawl.sitemaps import expand_sitemap
from laminae.tasks.storage.rawstore import RawStore

log = logging.getLogger("laminae.crawl")

TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
ROBOTS_TTL = 3600.0  # seconds a robots.txt answer serves later crawlers in this process (image batches)
ROBOTS_MAX_BYTES = 1_000_000  # of a robots.txt (decompressed) read; the rules past it are not (RFC 9309 asks 500 KiB)
INFLATE_STEP = 1 << 20  # bytes one step of gzip/deflate decoding may produce (a bomb inflates 1000x)
GZIP_MAGIC = b"\x1f\x8b"
_ROBOTS: dict[str, tuple[float, Protego | None]] = {}


@dataclass
class FetchResult:
    """What happened when one URL was fetched; ``error`` is None on success."""

    url: str
    kind: str = "page"  # page | image | video | captions | sitemap | robots | folder (sitemap, folder: a seed's
    # listing went wrong; robots: a robots.txt that could not be read whole)
    final_url: str | None = None
    redirects: list[str] = field(default_factory=list)
    status: int | None = None
    content_type: str | None = None  # sniffed
    declared_type: str | None = None  # from the Content-Type header
    charset: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    raw_key: str | None = None
    size: int = 0
    error: str | None = None  # short reason: timeout, http_404, too_large, redirect_loop, ...
    message: str | None = None
    depth: int = 0
    annotations: dict = field(default_factory=dict)
    fetched_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    not_modified: bool = False
    severity: str = "error"  # of the error: "warning" for a bound reached while listing a seed
    body: bytes | None = field(default=None, repr=False)  # a sitemap's or robots.txt's bytes, never stored
    truncated: bool = False  # a robots.txt cut at ROBOTS_MAX_BYTES (its other bodies fail too_large instead)
    # an earlier page of this run with the same bytes at another spelling of this URL (``same_page_key``:
    # ``//p.html``, ``/p.html/``, ``localhost`` for ``127.0.0.1``): this page is that page's document
    same_as: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class _Failure(Exception):
    def __init__(self, reason: str, message: str, *, transient: bool = False, status: int | None = None,
                 retry_after: float | None = None):
        super().__init__(message)
        self.reason, self.message, self.transient, self.status = reason, message, transient, status
        self.retry_after = retry_after


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delay-seconds or an HTTP date); None if absent
    or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _parse_content_type(header: str | None) -> tuple[str | None, str | None]:
    if not header:
        return None, None
    mime, _, params = header.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key.lower() == "charset" and value:
            charset = value.strip("\"' ").lower()
    return mime.strip().lower() or None, charset


class _Inflater:
    """A body's ``Content-Encoding`` (gzip, deflate or none) undone chunk by chunk, never past ``cap``
    bytes out: each step inflates at most ``INFLATE_STEP`` bytes, and decoding stops one byte past
    the cap (``over``), so a few kB of gzip that would inflate to gigabytes cost a few MB."""

    def __init__(self, encoding: str | None, cap: int) -> None:
        codings = [c.strip().lower() for c in (encoding or "").split(",")]
        codings = [c for c in codings if c and c != "identity"]
        if len(codings) > 1 or (codings and codings[0] not in ("gzip", "x-gzip", "deflate")):
            raise _Failure("bad_encoding", f"Content-Encoding {encoding!r}: only gzip and deflate are asked for "
                           "(Accept-Encoding) and read")
        self.coding = codings[0] if codings else None
        self.room = cap  # bytes that may still come out; below zero: over the cap
        self._z: zlib._Decompress | None = None

    @property
    def over(self) -> bool:
        return self.room < 0

    def _start(self, data: bytes) -> zlib._Decompress:
        if self.coding == "deflate":  # zlib-wrapped as the RFC says, or raw deflate as some servers send
            zlib_header = len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
            return zlib.decompressobj(zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS)
        return zlib.decompressobj(16 + zlib.MAX_WBITS)

    def feed(self, data: bytes) -> bytes:
        """The decoded bytes of the next raw chunk: at most one byte more than the room left."""
        if self.coding is None:
            out = data[: self.room + 1]
            self.room -= len(out)
            return out
        pieces: list[bytes] = []
        try:
            while data and self.room >= 0:
                if self._z is None:
                    self._z = self._start(data)
                piece = self._z.decompress(data, min(INFLATE_STEP, self.room + 1))
                self.room -= len(piece)
                pieces.append(piece)
                data = self._z.unconsumed_tail
                if self._z.eof:  # another gzip member may follow; anything else after the end is ignored
                    rest = self._z.unused_data
                    self._z = None
                    data = rest if self.coding != "deflate" and rest.startswith(GZIP_MAGIC) else b""
        except zlib.error as exc:
            raise _Failure("bad_encoding", f"undecodable {self.coding} body: {exc}") from None
        return b"".join(pieces)


class Crawler:
    """An async HTTP client with per-host politeness; use as ``async with Crawler(...) as c``.

    ``seed_hosts`` are ``seed_scope``s: hosts, and the folder URLs of ``file://`` seeds, under
    which files are read (no robots.txt, no politeness: the disk is ours). ``problems`` collects
    a result for each robots.txt that could not be read whole (kind ``robots``, a warning)."""

    def __init__(
        self,
        cfg: CrawlConfig,
        store: RawStore,
        seed_hosts: Iterable[str],
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        credentials: dict[str, tuple[str, str]] | None = None,
    ) -> None:
        self.cfg = cfg
        self.credentials = credentials or {}  # origin → (user, password) a seed's URL held
        self.store = store
        seed_hosts = set(seed_hosts)
        self.roots = real_roots(seed_hosts)
        self.seed_hosts = {h.lower() for h in seed_hosts if not is_file_url(h)}
        self.seed_names = {bare_host(h) for h in self.seed_hosts}  # a seed's host may be private
        self.allow_hosts = {h.lower() for h in cfg.allow_hosts}
        self.private_names = {a for a in cfg.allow_private if not is_network(a)}
        self.private_networks = [ipaddress.ip_network(a, strict=False) for a in cfg.allow_private if is_network(a)]
        self.problems: list[FetchResult] = []
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._global = asyncio.Semaphore(cfg.total_concurrency)
        self._host_sems: dict[str, asyncio.Semaphore] = {}
        self._host_next: dict[str, float] = {}
        self._host_locks: dict[str, asyncio.Lock] = {}
        self._robots: dict[str, Protego | None] = {}
        self._robots_locks: dict[str, asyncio.Lock] = {}
        self._addresses: dict[str, list[str]] = {}

    async def __aenter__(self) -> Crawler:
        timeout = httpx.Timeout(
            connect=self.cfg.timeout_connect, read=self.cfg.timeout_read,
            write=self.cfg.timeout_read, pool=None,
        )
        self._client = httpx.AsyncClient(
            timeout=timeout,
            follow_redirects=False,
            headers={"User-Agent": self.cfg.user_agent, "Accept-Encoding": "gzip, deflate"},
            transport=self._transport,
            trust_env=False,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.aclose()

    # -- scope ---------------------------------------------------------------------------------
    def in_scope(self, url: str) -> bool:
        """May this URL be fetched at all: http(s) on a seed host or an allow-listed host."""
        if urlsplit(url).scheme not in ("http", "https"):
            return False
        host = host_of(url)
        return host in self.seed_hosts or host in self.allow_hosts or bare_host(host) in self.allow_hosts

    async def refusal(self, url: str) -> _Failure | None:
        """Why ``url`` may not be fetched (``out_of_scope``, ``private_address``), or None: the
        check of every redirect hop and of every link before it is followed. A ``file://`` URL
        may be read when its real path is inside a seed folder."""
        if is_file_url(url):
            try:
                await asyncio.to_thread(self.in_folders, url)
            except FileProblem as problem:
                return _Failure(problem.reason, problem.message)
            return None
        if not self.in_scope(url):
            return _Failure("out_of_scope", f"{url} is not on a seed or allow-listed host")
        host = host_of(url)
        name = bare_host(host)
        if name in self.seed_names or name in self.private_names or host in self.private_names:
            return None
        if name not in self._addresses:
            self._addresses[name] = await asyncio.to_thread(addresses_of, name)
        for address in self._addresses[name]:
            if not self._private_allowed(address):
                return _Failure("private_address", self._private_message(url, name, address))
        return None

    async def may_follow(self, url: str) -> bool:
        """In scope, and not on a private or loopback address unless its host is a seed's host or
        allowed (``refusal``)."""
        return await self.refusal(url) is None

    def _private_allowed(self, address: str) -> bool:
        return not is_non_global(address) or any(plain_address(address) in net for net in self.private_networks)

    @staticmethod
    def _private_message(url: str, name: str, address: str) -> str:
        at = "" if name == address else f" ({name} is at {address})"
        return (f"{url} is on a private, loopback, link-local or other non-global address{at} and is not a "
                f"seed's host; not fetched (allow it with --allow-private {name} or its network)")

    def _check_peer(self, url: str, resp: httpx.Response) -> None:
        """Refuse a response from a non-global address the name did not resolve to when checked
        (DNS rebinding): the request was sent, its body is never read."""
        stream = resp.extensions.get("network_stream")
        peer = stream.get_extra_info("server_addr") if stream is not None else None
        if not peer:
            return
        host = host_of(url)
        name = bare_host(host)
        if name in self.seed_names or name in self.private_names or host in self.private_names:
            return
        address = str(peer[0]).split("%", 1)[0]
        if not self._private_allowed(address):
            raise _Failure("private_address", self._private_message(url, name, address) + "; it answered from "
                           "there although the name resolved elsewhere when checked, and its body was not read")

    def in_folders(self, url: str) -> None:
        """Raise FileProblem unless ``url`` is a local file inside a seed folder."""
        inside(url, self.roots)

    # -- politeness ----------------------------------------------------------------------------
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

    async def _allowed(self, url: str) -> bool:
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

    # -- fetching ------------------------------------------------------------------------------
    async def fetch(
        self,
        url: str,
        *,
        kind: str = "page",
        etag: str | None = None,
        last_modified: str | None = None,
    ) -> FetchResult:
        """Fetch one URL with retries on transient failures (after the server's Retry-After when it
        gives one, else with exponential backoff); never raises for bad input. A ``file://`` URL is
        read from the disk (``etag``: the size and mtime of the previous read). Kind ``robots``
        (a robots.txt) is not itself subject to robots.txt and is cut at its cap, not refused."""
        result = FetchResult(url=url, kind=kind)
        if canonical_url(url) is None:
            result.error, result.message = "bad_url", f"{url[:300]!r} is no usable http(s) or file URL; not fetched"
            return result
        if is_file_url(url):
            await asyncio.to_thread(self._read_file, result, etag)
            return result
        retrying = AsyncRetrying(stop=stop_after_attempt(self.cfg.retries + 1), wait=self._retry_wait,
                                 retry=retry_if_exception(self._retry_worth), reraise=True)
        try:
            async for attempt in retrying:
                with attempt:
                    await asyncio.wait_for(self._fetch_once(result, etag=etag, last_modified=last_modified),
                                           timeout=self.cfg.timeout_total)
        except _Failure as failure:
            result.error, result.message = failure.reason, failure.message
            result.status = failure.status if failure.status is not None else result.status
            if failure.transient and failure.retry_after is not None and failure.retry_after > self.cfg.max_retry_after:
                result.message += (f"; the server asked to retry after {failure.retry_after:g} s, more than "
                                   f"max_retry_after ({self.cfg.max_retry_after:g} s)")
        except TimeoutError:
            result.error = "timeout"
            result.message = f"no complete response within {self.cfg.timeout_total:g} s"
        return result

    def _read_file(self, result: FetchResult, etag: str | None) -> None:
        max_bytes = self._max_bytes(result.kind)
        try:
            read = read_file(result.url, self.roots, max_bytes, etag)
        except FileProblem as problem:
            result.error, result.message = problem.reason, problem.message
            return
        result.final_url = result.url
        result.etag, result.last_modified = read.etag, read.last_modified
        if read.body is None:
            result.not_modified = True
            return
        result.declared_type = mimetypes.guess_type(read.path)[0]
        result.size = len(read.body)
        result.content_type = sniff_content_type(read.body, result.declared_type, result.url)
        result.raw_key = self.store.put(read.body)

    def _max_bytes(self, kind: str) -> int:
        return {"image": self.cfg.max_image_bytes, "video": self.cfg.max_video_bytes,
                "sitemap": self.cfg.sitemap_max_bytes, "robots": ROBOTS_MAX_BYTES}.get(kind, self.cfg.max_body_bytes)

    def _retry_worth(self, exc: BaseException) -> bool:
        if isinstance(exc, TimeoutError):
            return True
        return isinstance(exc, _Failure) and exc.transient and (
            exc.retry_after is None or exc.retry_after <= self.cfg.max_retry_after)

    def _retry_wait(self, state: RetryCallState) -> float:
        failure = state.outcome.exception() if state.outcome else None
        if isinstance(failure, _Failure) and failure.retry_after is not None:
            return failure.retry_after
        return self.cfg.backoff * 2 ** (state.attempt_number - 1)

    async def _fetch_once(self, result: FetchResult, *, etag: str | None, last_modified: str | None) -> None:
        assert self._client is not None, "use Crawler as an async context manager"
        result.error = result.message = None
        result.redirects = []
        result.truncated = False
        max_bytes = self._max_bytes(result.kind)
        cut = result.kind == "robots"  # read up to the cap and keep that, instead of refusing the body
        url = canonical_url(result.url) or result.url
        seen = {url}
        for _hop in range(self.cfg.max_redirects + 1):
            if is_file_url(url):
                raise _Failure("out_of_scope", f"{url} is a file; a web page never leads into the disk")
            refused = await self.refusal(url)
            if refused is not None:
                raise refused
            if not cut and not await self._allowed(url):
                raise _Failure("robots_disallowed", f"robots.txt disallows {url}")
            host = host_of(url)
            headers = {}
            if etag:
                headers["If-None-Match"] = etag
            if last_modified:
                headers["If-Modified-Since"] = last_modified
            sem = self._host_sems.setdefault(host, asyncio.Semaphore(self.cfg.per_host_concurrency))
            async with self._global, sem:
                await self._wait_turn(host, url)
                parts = urlsplit(url)
                auth = self.credentials.get(f"{parts.scheme}://{parts.netloc}")
                try:
                    async with self._client.stream("GET", url, headers=headers,
                                                   auth=httpx.BasicAuth(*auth) if auth else None) as resp:
                        self._check_peer(url, resp)
                        status = resp.status_code
                        result.status = status
                        if status in (301, 302, 303, 307, 308):
                            location = resp.headers.get("location")
                            if not location:
                                raise _Failure("bad_redirect", f"HTTP {status} without Location", status=status)
                            try:
                                target = canonical_url(urljoin(url, location.strip()))
                            except ValueError:
                                target = None
                            if target is None:
                                raise _Failure("bad_redirect", f"HTTP {status} to {location[:300]!r}, which is no "
                                               "usable http(s) URL (a bad port or host, a control character)",
                                               status=status)
                            if target in seen:
                                raise _Failure("redirect_loop", f"redirect loop at {target}", status=status)
                            seen.add(target)
                            result.redirects.append(url)
                            url = target
                            continue
                        if status == 304:
                            result.not_modified = True
                            result.final_url = url
                            return
                        if status >= 400:
                            raise _Failure(
                                f"http_{status}", f"HTTP {status} {resp.reason_phrase}",
                                transient=status in TRANSIENT_STATUS, status=status,
                                retry_after=retry_after_seconds(resp.headers.get("retry-after"))
                                if status in (429, 503) else None,
                            )
                        declared, charset = _parse_content_type(resp.headers.get("content-type"))
                        length = resp.headers.get("content-length")
                        if not cut and length and length.isdigit() and int(length) > max_bytes:
                            raise _Failure("too_large", f"Content-Length {length} exceeds {max_bytes} bytes")
                        body, result.truncated = await _read_body(resp, max_bytes, cut=cut)
                        result.etag = resp.headers.get("etag")
                        result.last_modified = resp.headers.get("last-modified")
                except httpx.TimeoutException as exc:
                    raise _Failure("timeout", f"{type(exc).__name__} after "
                                   f"{self.cfg.timeout_read:g} s", transient=True) from None
                except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as exc:
                    raise _Failure("connection", f"{type(exc).__name__}: {exc}", transient=True) from None
                except httpx.DecodingError as exc:
                    raise _Failure("bad_encoding", f"undecodable transfer encoding: {exc}") from None
                except httpx.HTTPError as exc:
                    raise _Failure("http_error", f"{type(exc).__name__}: {exc}") from None
                except httpx.InvalidURL as exc:  # what canonical_url passed and httpx still refuses
                    raise _Failure("bad_url", f"{url[:300]!r}: {exc}") from None
            result.final_url = url
            result.declared_type, result.charset = declared, charset
            result.size = len(body)
            if not body:
                raise _Failure("empty_body", "the response body is empty", status=status)
            result.content_type = sniff_content_type(body, declared, result.final_url or result.url)
            if result.kind in ("sitemap", "robots"):
                result.body = body
            else:
                result.raw_key = self.store.put(body)
            return
        raise _Failure("too_many_redirects", f"more than {self.cfg.max_redirects} redirects from {result.url}")


async def _read_body(resp: httpx.Response, max_bytes: int, *, cut: bool) -> tuple[bytes, bool]:
    """The decoded body of a streamed response and whether it was cut: past ``max_bytes`` (raw or
    decoded) ``too_large``, or with ``cut`` the first ``max_bytes`` bytes and True. The raw
    stream is read and decoded here (``_Inflater``), not by httpx, whose decoders inflate a whole
    network chunk at once (64 kB of gzip: up to 64 MB)."""
    inflater = _Inflater(resp.headers.get("content-encoding"), max_bytes)
    how = f" once {inflater.coding}-decoded" if inflater.coding else ""
    chunks: list[bytes] = []
    raw = 0
    async for data in resp.aiter_raw():
        raw += len(data)
        if raw > max_bytes and inflater.coding:
            if cut:
                return b"".join(chunks), True
            raise _Failure("too_large", f"the {inflater.coding}-encoded body exceeds {max_bytes} bytes")
        chunks.append(inflater.feed(data))
        if inflater.over:
            if cut:
                return b"".join(chunks)[:max_bytes], True
            raise _Failure("too_large", f"body exceeds {max_bytes} bytes{how}")
    return b"".join(chunks), False


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
    _ROBOTS.clear()
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
                    refused = await crawler.refusal(link)
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
            urls, problems = await asyncio.to_thread(list_folder, seed.url, crawler.roots)
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
