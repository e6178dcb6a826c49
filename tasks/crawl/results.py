"""Fetch results: what happened when one URL was fetched, and why one request failed.

Reads nothing; writes nothing. ``FetchResult`` is the crawl's record of one URL, which the crawl
(``tasks/crawl/fetch.py``) returns and the batches, the refresh plan and the document builders
read; ``Failure`` is the reason one request stopped, raised inside the crawler and turned into a
result's ``error`` and ``message`` (never raised to the crawl's callers). The content types a
result's ``content_type`` is compared with are in ``tasks/crawl/formats.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from laminae.schemas.errors import LaminaeError


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


class Failure(LaminaeError):
    """Why one request stopped: ``reason`` becomes the result's ``error``; ``transient`` ones are
    retried (after ``retry_after`` seconds when the server asked for that)."""

    def __init__(self, reason: str, message: str, *, transient: bool = False, status: int | None = None,
                 retry_after: float | None = None):
        super().__init__(message)
        self.reason, self.message, self.transient, self.status = reason, message, transient, status
        self.retry_after = retry_after
