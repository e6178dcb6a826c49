"""Deterministic ids and URL normalization shared by the builder and the reader.

Reads nothing and writes nothing: pure functions. A document id derives from its normalized
canonical URL; a child id derives from its document, its kind, its content and the number of
earlier siblings with the same content, so inserting a different node before it keeps its id.

``canonical_url`` is the one parse-and-normalise step every URL laminae meets goes through (seeds,
hrefs, canonicals, ``<base>``, redirects, sitemap ``<loc>``, PDF and Office links): it never raises,
and answers None for what is no usable http(s) or file URL.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from functools import lru_cache
from urllib.parse import quote_from_bytes, unquote_to_bytes, urlsplit, urlunsplit

# RFC 9110 asks every sender and recipient to handle URIs of at least 8,000 octets; a longer URL
# (a 12 MB href, say) is no address anyone serves, and it would be stored and fetched
MAX_URL_CHARS = 8000
SCHEMES = ("http", "https", "file")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
_PATH_SAFE = "/:@!$&'()*+,;="  # RFC 3986 pchar besides unreserved, and "/"
_QUERY_SAFE = _PATH_SAFE + "?%"  # "%": the query's escapes are kept as they are (see _norm_query)
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_TAB_NEWLINE = re.compile(r"[\t\n\r]")
# WHATWG's forbidden domain code points, less "%" (an escaped host is unescaped first) and the
# C0 controls (refused for the whole URL)
_FORBIDDEN_HOST = re.compile(r"[ #/:<>?@\[\\\]^|\x7f]")


def _unicode_host(host: str) -> str | None:
    """The ASCII (punycode) form of a host with non-ASCII characters, by UTS #46 as WHATWG's URL
    standard asks (full-width letters and dots mapped, then IDNA 2008 labels); None if it has none."""
    try:
        import idna  # httpx's own dependency: the builder has it; the reader never normalises hosts

        mapped = idna.uts46_remap(host, std3_rules=False, transitional=False)
        labels = [label if label.isascii() else idna.alabel(label).decode("ascii") for label in mapped.split(".")]
        return ".".join(labels).lower()
    except ImportError:
        pass
    except (ValueError, UnicodeError):  # idna.IDNAError is a UnicodeError
        return None
    try:
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return None


def _norm_host(host: str) -> str | None:
    """The host lower-cased and in ASCII, an IPv6 literal compressed in brackets; None if it is
    no host (a forbidden character, a label UTS #46 refuses)."""
    if host.startswith("["):
        try:
            address = ipaddress.IPv6Address(host[1:-1]) if host.endswith("]") else None
        except ValueError:
            return None
        return f"[{address.compressed}]" if address else None
    if "%" in host:
        try:
            host = unquote_to_bytes(host).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not host.isascii():
        host = _unicode_host(host) or ""
    host = host.lower()
    if not host or _FORBIDDEN_HOST.search(host) or _CONTROL.search(host) or any(
            len(label) > 63 for label in host.split(".")) or len(host) > 253:
        return None
    return host


def _encode(text: str) -> bytes:
    """UTF-8 bytes of URL text; a byte a file name held undecoded (surrogateescape) is that byte."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _norm_path(path: str, file: bool) -> str:
    """A path with uniform escapes and no dot-segments (RFC 3986 §6.2.2).

    A web path is w3lib's ``canonicalize_url`` path: every escape is read as its byte and the bytes
    written again, escaped unless they may stand as they are (unreserved, sub-delims, ``:@/``), so
    ``/a%20b``, ``/a b`` and ``/%61%20b`` are one address and ``/%FF`` and ``/%FE`` two (bytes are
    never decoded as text); ``%2F`` stays escaped (it is no segment boundary). A ``file://`` path
    names bytes on the disk, every escape read as ``files.path_of`` reads it (``%2F`` too)."""
    if file:
        return _remove_dot_segments(quote_from_bytes(unquote_to_bytes(path), safe=_PATH_SAFE))
    out: list[str] = []
    pending = bytearray()
    for i, piece in enumerate(_ESCAPE.split(path)):
        if i % 2 == 0:
            pending += _encode(piece)
        elif piece.upper() == "2F":
            out += [quote_from_bytes(bytes(pending), safe=_PATH_SAFE), "%2F"]
            pending.clear()
        else:
            pending.append(int(piece, 16))
    out.append(quote_from_bytes(bytes(pending), safe=_PATH_SAFE))
    return _remove_dot_segments("".join(out) or "/")


def _norm_query(query: str) -> str:
    """A query with uniform escapes (RFC 3986 §6.2.2.1-2): an escape stays one (upper-case hex)
    unless its byte is unreserved; what a query cannot hold (space, non-ASCII: UTF-8) is escaped.
    Escaped ``&``, ``=`` and ``+`` mean other things than the characters, so nothing else is decoded."""
    out = []
    for i, piece in enumerate(_ESCAPE.split(query)):
        if i % 2:
            char = chr(int(piece, 16))
            out.append(char if char in _UNRESERVED else "%" + piece.upper())
        else:  # a "%" not followed by two hex digits is the character itself
            out.append(quote_from_bytes(_encode(piece.replace("%", "%25")), safe=_QUERY_SAFE))
    return "".join(out)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4 on an absolute path: ``/a/./b/../c`` is ``/a/c``; an empty segment stays."""
    segments = path.split("/")[1:]
    out: list[str] = []
    for n, segment in enumerate(segments, 1):
        if segment in (".", ".."):
            if segment == ".." and out:
                out.pop()
            if n == len(segments):
                out.append("")
        else:
            out.append(segment)
    return "/" + "/".join(out)


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def canonical_url(url: str) -> str | None:
    """The normalized form of an absolute http(s) or ``file://`` URL, or None when it is none.

    Normalization follows RFC 3986 §6.2.2-6.2.3 and WHATWG's URL standard: scheme and host lower
    case, a non-ASCII host in punycode (UTS #46, so full-width letters are ASCII ones), an IPv6
    host compressed, the default port removed, an empty path ``/``, dot-segments removed,
    percent-escapes uniform (``_norm_path``, ``_norm_query``), userinfo and fragment removed; tab
    and newlines inside are removed and ``\\`` before the query is ``/`` (what browsers do).
    ``//p.html`` and ``/p.html/`` stay other addresses than ``/p.html``, as RFC 3986 and w3lib keep
    them. None for: another scheme, no host (http), a port that is not a number up to 65535, a
    host with a forbidden character or that IDNA refuses, a control character, unbalanced
    brackets (``ftp://[user@]host``), over ``MAX_URL_CHARS``. Never raises."""
    if not isinstance(url, str) or len(url) > 2 * MAX_URL_CHARS:  # (not kept in the cache either)
        return None
    return _canonical(url)


@lru_cache(maxsize=1 << 15)  # a page's navigation links repeat on its neighbours: 40 % of parse's link time
def _canonical(url: str) -> str | None:
    url = _TAB_NEWLINE.sub("", url.strip("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\x0e\x0f\x10\x11\x12\x13"
                                         "\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f \t\n\r"))
    if not url or len(url) > MAX_URL_CHARS or _CONTROL.search(url):
        return None
    scheme_match = _SCHEME.match(url)
    scheme = scheme_match.group()[:-1].lower() if scheme_match else ""
    if scheme not in SCHEMES:
        return None
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
    url = url[:cut].replace("\\", "/") + url[cut:]
    try:
        parts = urlsplit(url)
    except ValueError:  # unbalanced brackets, a host NFKC would change into another
        return None
    hostport = parts.netloc.rpartition("@")[2]
    if hostport.startswith("["):
        end = hostport.find("]") + 1
        host, port = hostport[:end], hostport[end:]
        if end == 0 or (port and not port.startswith(":")):
            return None
        port = port[1:]
    else:
        host, _, port = hostport.partition(":")
    if port and not (port.isascii() and port.isdigit() and int(port) <= 65535):
        return None
    if scheme == "file":
        if port or not parts.path.startswith("/"):
            return None
        host = "" if host.lower() in ("", "localhost") else _norm_host(host)
        if host is None:
            return None
        path, query = _norm_path(parts.path, file=True), ""  # a file has no query: a.html?v=2 is a.html
    else:
        host = _norm_host(host)
        if not host:
            return None
        if port and int(port) != _DEFAULT_PORTS[scheme]:
            host = f"{host}:{int(port)}"
        path, query = _norm_path(parts.path or "/", file=False), _norm_query(parts.query)
    out = urlunsplit((scheme, host, path, query, ""))
    return out if len(out) <= MAX_URL_CHARS else None


def normalize_url(url: str) -> str:
    """The identity of a URL: ``canonical_url``, or for what is no usable URL the text itself
    (stripped), so that every string has one and nothing raises. A local file's URL is
    ``file:///path`` (``file://localhost/path`` is the same file)."""
    return canonical_url(url) or (url.strip() if isinstance(url, str) else "")


def digest(*parts: str, size: int = 16) -> str:
    """Hex digest (``2*size`` chars) of the parts, separated so that ("ab","c") != ("a","bc")."""
    h = hashlib.blake2b(digest_size=size)
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()


def content_hash(data: str | bytes) -> str:
    """SHA-256 of text (UTF-8) or bytes; used for raw blobs and to detect changed content."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def document_id(url: str) -> str:
    """Id of the document whose canonical URL is ``url``."""
    return "d" + digest(normalize_url(url))


def node_id(document: str, kind: str, content: str, occurrence: int) -> str:
    """Id of a component or subcomponent of ``document``.

    ``occurrence`` counts earlier nodes of the same kind and content in the same document, so
    identical paragraphs get distinct ids and an insertion elsewhere changes nothing.
    """
    return "n" + digest(document, kind, content_hash(content), str(occurrence))


def edge_id(src: str, kind: str, dst: str, occurrence: int = 0) -> str:
    """Id of an edge; ``dst`` is the destination id or, for a link, the raw target URL."""
    return "e" + digest(src, kind, dst, str(occurrence))
