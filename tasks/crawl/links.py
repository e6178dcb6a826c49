"""Links: which hrefs navigate, and to what absolute URL; one rule for the crawler that follows
them and the parsers that record them as ``links_to`` edges.

Reads hrefs and pymupdf link dicts; writes nothing.
"""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit, urlunsplit

# RFC 9110 asks every sender and recipient to handle URIs of at least 8,000 octets; a longer href
# (a 12 MB one, say) is no address anyone serves, and it would be stored and fetched
MAX_URL_CHARS = 8000


def resolve_href(base_url: str, href: str | None) -> str | None:
    """The absolute http(s) target of a link, fragment removed; None for links that do not navigate.
    A page read from a ``file://`` URL may also link to files (never a web page to a file). An href
    over ``MAX_URL_CHARS`` does not navigate either (the HTML parser warns of it)."""
    href = (href or "").strip()
    if not href or len(href) > MAX_URL_CHARS or href.startswith(("#", "javascript:", "mailto:", "tel:", "data:")):
        return None
    target = urljoin(base_url, href)
    parts = urlsplit(target)
    schemes = ("http", "https", "file") if urlsplit(base_url).scheme == "file" else ("http", "https")
    if parts.scheme not in schemes:
        return None
    if parts.scheme == "file":  # a file has no query: a.html?v=2 is a.html
        return urlunsplit(parts._replace(query="", fragment=""))
    if "action=edit" in parts.query or "action=history" in parts.query:
        return None
    return target.split("#", 1)[0]


def page_base(page_url: str, base_href: str | None) -> str:
    """What a page's relative links resolve against: its ``<base href>`` where that navigates and
    keeps the page's scheme (a web page's cannot lead into the disk, nor from http to https), else
    the page's own URL."""
    target = resolve_href(page_url, base_href)
    if target is None or urlsplit(target).scheme != urlsplit(page_url).scheme:
        return page_url
    return target


def link_target(link: dict, base_url: str) -> str | None:
    """The absolute http(s) (or, from a file, ``file://``) URL a pymupdf link (``page.get_links()``) points to, if any."""
    # a relative target ("rye.html") is a launch link with a "file" in pymupdf
    href = link.get("uri") or link.get("file")
    return resolve_href(base_url, href) if href else None
