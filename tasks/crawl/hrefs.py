"""Links: which hrefs navigate, and to what absolute URL; one rule for the crawler that follows
them and the parsers that record them as ``links_to`` edges.

Reads hrefs, pymupdf link dicts, and for link following a fetched page's HTML or PDF bytes
(``extract_links``, ``extract_pdf_links``); writes nothing.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

from laminae.schemas.ids import MAX_URL_CHARS, SCHEMES, canonical_url

_SKIP_LINK_SUFFIXES = (
    ".css", ".js", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".ico", ".zip", ".gz", ".tar",
    ".mp3", ".mp4", ".avi", ".mov", ".woff", ".woff2", ".ttf", ".exe", ".dmg", ".iso",
)
_SCHEME = re.compile(r"\s*([A-Za-z][A-Za-z0-9+.-]*):")
__all__ = ["MAX_URL_CHARS", "extract_links", "extract_pdf_links", "link_target", "page_base", "resolve_href",
           "resolve_link", "same_page_key"]


def resolve_link(base_url: str, href: str | None) -> tuple[str | None, str | None]:
    """What an href leads to: ``(target, None)`` with the absolute target normalized
    (``canonical_url``: what is requested and what its document is named by), ``(None, None)`` for
    an href that does not navigate (empty, a fragment, another scheme: ``mailto:``, ``ftp:``...),
    and ``(None, why)`` for one that cannot be a URL (a bad port, a control character, a host IDNA
    refuses, over ``MAX_URL_CHARS``): the page loses that link and keeps the others, as Scrapy's
    link extractor drops an unparsable one. Never raises."""
    href = re.sub(r"[\t\n\r]", "", href or "").strip()  # WHATWG: tabs and newlines inside are not there
    if not href or href.startswith("#"):
        return None, None
    if len(href) > MAX_URL_CHARS:
        return None, f"longer than {MAX_URL_CHARS:,} characters"
    scheme = _SCHEME.match(href)
    if scheme and scheme.group(1).lower() not in SCHEMES:
        return None, None  # javascript:, mailto:, tel:, data:, ftp:...
    base_scheme = _scheme_of(base_url)
    if base_scheme in SCHEMES:  # WHATWG: in a special URL a backslash is a slash
        cut = min((i for i in (href.find("?"), href.find("#")) if i >= 0), default=len(href))
        href = href[:cut].replace("\\", "/") + href[cut:]
    try:
        joined = urljoin(base_url, href)
    except ValueError as exc:  # unbalanced brackets ("ftp://[user@]host" after a relative base)
        return None, f"not a URL ({exc})"
    target = canonical_url(joined)
    if target is None:
        return None, "not a usable URL (a bad port or host, a control character)"
    parts = urlsplit(target)
    if parts.scheme == "file" and base_scheme != "file":
        return None, None  # a web page never leads into the disk
    if parts.scheme != "file" and ("action=edit" in parts.query or "action=history" in parts.query):
        return None, None
    return target, None


def _scheme_of(url: str | None) -> str:
    """A URL's scheme, lower case ("" for none), read without parsing the rest (which may raise)."""
    match = _SCHEME.match(url or "")
    return match.group(1).lower() if match else ""


def resolve_href(base_url: str, href: str | None) -> str | None:
    """The absolute http(s) target of a link, normalized, fragment removed; None for links that do
    not navigate or cannot be URLs (``resolve_link`` says which). A page read from a ``file://``
    URL may also link to files (never a web page to a file)."""
    return resolve_link(base_url, href)[0]


def same_page_key(url: str) -> str:
    """A normalized URL with the differences that servers commonly ignore removed: runs of ``/`` in
    the path (nginx's ``merge_slashes``), a final ``/`` after a path, and which loopback name the
    host is (``localhost``, ``127.0.0.1``, ``[::1]``). Two fetches of one run with the same bytes
    and the same key are one page (the crawl names the later one ``same_as`` the first); the key
    alone says nothing, since ``/p`` and ``/p/`` may well be two pages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if host in ("localhost", "127.0.0.1", "::1"):
        netloc = "loopback" + (f":{parts.port}" if parts.port else "")
    else:
        netloc = parts.netloc
    path = re.sub("/{2,}", "/", parts.path)
    if len(path) > 1:
        path = path.rstrip("/")
    return f"{parts.scheme}://{netloc}{path}?{parts.query}"


def page_base(page_url: str, base_href: str | None) -> str:
    """What a page's relative links resolve against: its ``<base href>`` where that navigates and
    keeps the page's scheme (a web page's cannot lead into the disk, nor from http to https), else
    the page's own URL."""
    target = resolve_href(page_url, base_href)
    if target is None or _scheme_of(target) != _scheme_of(page_url):
        return page_url
    return target


def link_target(link: dict, base_url: str) -> str | None:
    """The absolute http(s) (or, from a file, ``file://``) URL a pymupdf link (``page.get_links()``) points to, if any."""
    # a relative target ("rye.html") is a launch link with a "file" in pymupdf
    href = link.get("uri") or link.get("file")
    return resolve_href(base_url, href) if href else None


def extract_links(body: bytes, base_url: str, charset: str | None = None) -> list[str]:
    """Absolute http(s) targets of ``<a href>`` in a page, for link following (cheap, lxml). The
    page is decoded as the HTML parser decodes it (``decode_bytes`` with ``html``: its BOM, the
    declared charset, then detection), so a link is requested as the parser records it."""
    import lxml.html

    from laminae.tasks.parse.document import decode_bytes

    try:
        # huge_tree: without it libxml2 drops the rest of a page after a 10 MB text or href, or
        # past 256 open elements (tasks/parse/html.py reads such pages whole); the text goes to
        # lxml as UTF-8 bytes, since a str that still declares an encoding is refused
        text = decode_bytes(body, charset, html=True)[0].encode("utf-8", "surrogatepass")
        root = lxml.html.fromstring(text, parser=lxml.html.HTMLParser(huge_tree=True, encoding="utf-8"))
    except (ValueError, lxml.etree.ParserError):
        return []
    base = root.find(".//base[@href]")
    base_url = page_base(base_url, base.get("href")) if base is not None else base_url
    out = []
    for a in root.iterfind(".//a[@href]"):
        target = resolve_href(base_url, a.get("href"))
        if target and not urlsplit(target).path.lower().endswith(_SKIP_LINK_SUFFIXES):
            out.append(target)
    return out


def extract_pdf_links(body: bytes, base_url: str) -> list[str]:
    """Absolute http(s) targets of a PDF's URI links, for link following (none if it will not open)."""
    try:
        import pymupdf

        pymupdf.TOOLS.mupdf_display_errors(False)
        with pymupdf.open(stream=body, filetype="pdf") as doc:
            if doc.needs_pass:
                return []
            targets = [link_target(link, base_url) for page in doc for link in page.get_links()]
    except Exception:  # a broken PDF is reported by the parse stage, not here
        return []
    return [t for t in targets if t and not urlsplit(t).path.lower().endswith(_SKIP_LINK_SUFFIXES)]
