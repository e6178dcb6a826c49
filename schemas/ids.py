"""Deterministic ids and URL normalization shared by the builder and the reader.

Reads nothing and writes nothing: pure functions. A document id derives from its normalized
canonical URL; a child id derives from its document, its kind, its content and the number of
earlier siblings with the same content, so inserting a different node before it keeps its id.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from urllib.parse import quote, unquote, urlsplit, urlunsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}


@lru_cache(maxsize=1 << 15)  # a page's navigation links repeat on its neighbours: 40 % of parse's link time
def normalize_url(url: str) -> str:
    """Normalize a URL for identity: lower-case scheme and host, no default port, no fragment.

    The path keeps its case (servers treat it as case-sensitive); percent-escapes are made uniform
    so that ``/a%20b`` and ``/a b`` are the same page; an empty path becomes ``/``. A local file's
    URL is ``file:///path`` (``file://localhost/path`` is the same file).
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if parts.port and _DEFAULT_PORTS.get(scheme) != parts.port:
        host = f"{host}:{parts.port}"
    if parts.username:
        host = f"{parts.username}@{host}"
    if scheme == "file" and host == "localhost":
        host = ""
    path = quote(unquote(parts.path), safe="/:@!$&'()*+,;=-._~") or "/"
    return urlunsplit((scheme, host, path, parts.query, ""))


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
