"""Links: which hrefs navigate, and to what absolute URL; one rule for the crawler that follows
them and the parsers that record them as ``links_to`` edges.

Reads hrefs, pymupdf link dicts, and for link following a fetched page's HTML or PDF bytes
(``extract_links``, ``extract_pdf_links``); writes nothing.
"""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit, urlunsplit

# RFC 9110 asks every sender and recipient to handle URIs of at least 8,000 octets; a longer href
# (a 12 MB one, say) is no address anyone serves, and it would be stored and fetched
MAX_URL_CHARS = 8000

_SKIP_LINK_SUFFIXES = (
    ".css", ".js", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".ico", ".zip", ".gz", ".tar",
    ".mp3", ".mp4", ".avi", ".mov", ".woff", ".woff2", ".ttf", ".exe", ".dmg", ".iso",
)


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


def extract_links(body: bytes, base_url: str) -> list[str]:
    """Absolute http(s) targets of ``<a href>`` in a page, for link following (cheap, lxml)."""
    import lxml.html

    try:
        # huge_tree: without it libxml2 drops the rest of a page after a 10 MB text or href, or
        # past 256 open elements (tasks/parse/html.py reads such pages whole)
        root = lxml.html.fromstring(body, parser=lxml.html.HTMLParser(huge_tree=True))
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
