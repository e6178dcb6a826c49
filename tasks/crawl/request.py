"""One request: the crawler's fetch of one URL, with retries, body caps and decompression.

Reads one URL (a ``file://`` one from the local disk: ``tasks/crawl/files.py``) and the crawl
settings (timeouts, retries and backoff, ``max_retry_after``, redirects, body caps per kind);
writes the body into the index's content-addressed ``RawStore`` (a sitemap's or robots.txt's
bytes are kept on the result instead) and returns one ``FetchResult`` (status, final URL, redirect
chain, sniffed content type, raw key or the error that stopped it). Every request (robots.txt,
sitemaps, pages, pictures, videos, captions) goes through ``Crawler.fetch``, which checks each
redirect hop before asking it and the address that answered before reading its body (``Scope``,
``tasks/crawl/hosts.py``), asks robots.txt and waits its host's turn (``Politeness``,
``tasks/crawl/politeness.py``), and streams the body under its cap, undoing gzip or deflate in
steps that stop at the cap.
"""

from __future__ import annotations

import asyncio
import mimetypes
import zlib
from collections.abc import Iterable
from datetime import UTC, datetime
from urllib.parse import urljoin, urlsplit

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from laminae.schemas.ids import canonical_url
from laminae.tasks.config import CrawlConfig
from laminae.tasks.crawl.files import FileProblem, is_file_url, read_file
from laminae.tasks.crawl.formats import sniff_content_type
from laminae.tasks.crawl.hosts import Scope, host_of
from laminae.tasks.crawl.politeness import ROBOTS_MAX_BYTES, Politeness
from laminae.tasks.crawl.results import Failure, FetchResult
from laminae.tasks.storage.rawstore import RawStore

TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
INFLATE_STEP = 1 << 20  # bytes one step of gzip/deflate decoding may produce (a bomb inflates 1000x)
GZIP_MAGIC = b"\x1f\x8b"

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
            raise Failure("bad_encoding", f"Content-Encoding {encoding!r}: only gzip and deflate are asked for "
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
            raise Failure("bad_encoding", f"undecodable {self.coding} body: {exc}") from None
        return b"".join(pieces)


class Crawler:
    """An async HTTP client with per-host politeness; use as ``async with Crawler(...) as c``.

    ``seed_hosts`` are ``seed_scope``s: hosts, and the folder URLs of ``file://`` seeds, under
    which files are read (no robots.txt, no politeness: the disk is ours); ``scope`` checks what
    may be fetched. ``problems`` collects a result for each robots.txt that could not be read
    whole (kind ``robots``, a warning)."""

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
        self.scope = Scope(cfg, seed_hosts)
        self.problems: list[FetchResult] = []
        self.politeness = Politeness(cfg, self.fetch, self.problems)
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

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
    async def may_follow(self, url: str) -> bool:
        """In scope, and not on a private or loopback address unless its host is a seed's host or
        allowed (``Scope.refusal``)."""
        return await self.scope.refusal(url) is None

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
        except Failure as failure:
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
            read = read_file(result.url, self.scope.roots, max_bytes, etag)
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
        return isinstance(exc, Failure) and exc.transient and (
            exc.retry_after is None or exc.retry_after <= self.cfg.max_retry_after)

    def _retry_wait(self, state: RetryCallState) -> float:
        failure = state.outcome.exception() if state.outcome else None
        if isinstance(failure, Failure) and failure.retry_after is not None:
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
                raise Failure("out_of_scope", f"{url} is a file; a web page never leads into the disk")
            refused = await self.scope.refusal(url)
            if refused is not None:
                raise refused
            if not cut and not await self.politeness.allowed(url):
                raise Failure("robots_disallowed", f"robots.txt disallows {url}")
            host = host_of(url)
            headers = {}
            if etag:
                headers["If-None-Match"] = etag
            if last_modified:
                headers["If-Modified-Since"] = last_modified
            async with self.politeness.turn(host, url):
                parts = urlsplit(url)
                auth = self.credentials.get(f"{parts.scheme}://{parts.netloc}")
                try:
                    async with self._client.stream("GET", url, headers=headers,
                                                   auth=httpx.BasicAuth(*auth) if auth else None) as resp:
                        stream = resp.extensions.get("network_stream")
                        self.scope.check_peer(url, stream.get_extra_info("server_addr") if stream is not None else None)
                        status = resp.status_code
                        result.status = status
                        if status in (301, 302, 303, 307, 308):
                            location = resp.headers.get("location")
                            if not location:
                                raise Failure("bad_redirect", f"HTTP {status} without Location", status=status)
                            try:
                                target = canonical_url(urljoin(url, location.strip()))
                            except ValueError:
                                target = None
                            if target is None:
                                raise Failure("bad_redirect", f"HTTP {status} to {location[:300]!r}, which is no "
                                               "usable http(s) URL (a bad port or host, a control character)",
                                               status=status)
                            if target in seen:
                                raise Failure("redirect_loop", f"redirect loop at {target}", status=status)
                            seen.add(target)
                            result.redirects.append(url)
                            url = target
                            continue
                        if status == 304:
                            result.not_modified = True
                            result.final_url = url
                            return
                        if status >= 400:
                            raise Failure(
                                f"http_{status}", f"HTTP {status} {resp.reason_phrase}",
                                transient=status in TRANSIENT_STATUS, status=status,
                                retry_after=retry_after_seconds(resp.headers.get("retry-after"))
                                if status in (429, 503) else None,
                            )
                        declared, charset = _parse_content_type(resp.headers.get("content-type"))
                        length = resp.headers.get("content-length")
                        if not cut and length and length.isdigit() and int(length) > max_bytes:
                            raise Failure("too_large", f"Content-Length {length} exceeds {max_bytes} bytes")
                        body, result.truncated = await _read_body(resp, max_bytes, cut=cut)
                        result.etag = resp.headers.get("etag")
                        result.last_modified = resp.headers.get("last-modified")
                except httpx.TimeoutException as exc:
                    raise Failure("timeout", f"{type(exc).__name__} after "
                                   f"{self.cfg.timeout_read:g} s", transient=True) from None
                except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as exc:
                    raise Failure("connection", f"{type(exc).__name__}: {exc}", transient=True) from None
                except httpx.DecodingError as exc:
                    raise Failure("bad_encoding", f"undecodable transfer encoding: {exc}") from None
                except httpx.HTTPError as exc:
                    raise Failure("http_error", f"{type(exc).__name__}: {exc}") from None
                except httpx.InvalidURL as exc:  # what canonical_url passed and httpx still refuses
                    raise Failure("bad_url", f"{url[:300]!r}: {exc}") from None
            result.final_url = url
            result.declared_type, result.charset = declared, charset
            result.size = len(body)
            if not body:
                raise Failure("empty_body", "the response body is empty", status=status)
            result.content_type = sniff_content_type(body, declared, result.final_url or result.url)
            if result.kind in ("sitemap", "robots"):
                result.body = body
            else:
                result.raw_key = self.store.put(body)
            return
        raise Failure("too_many_redirects", f"more than {self.cfg.max_redirects} redirects from {result.url}")


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
            raise Failure("too_large", f"the {inflater.coding}-encoded body exceeds {max_bytes} bytes")
        chunks.append(inflater.feed(data))
        if inflater.over:
            if cut:
                return b"".join(chunks)[:max_bytes], True
            raise Failure("too_large", f"body exceeds {max_bytes} bytes{how}")
    return b"".join(chunks), False
