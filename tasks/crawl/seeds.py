"""Seeds: read a seeds file (or a folder) into URLs with annotations.

Reads a text file with one URL per line (``#`` comments and blank lines skipped) or JSON Lines
with a ``url`` field plus any annotations, which are kept on the document row (and a
``"sitemap"`` flag, true or false, overriding ``looks_like_sitemap``). A URL is http(s)
or ``file://`` (an absolute local path: a folder, written with or without its final ``/``, or one
file). A folder given instead of a seeds file is one seed: its ``file://`` URL, which the crawl
lists (again at every refresh). Writes nothing.

The file is UTF-8 (a byte-order mark is skipped) or UTF-16 with its byte-order mark; a file with NUL
bytes and no such mark is no text and is refused whole (``SeedsError``), as is a file where no line
is a usable seed. A line that is not (a bad URL, bad JSON, a control character) is one bad seed: a
``Seed`` with ``error`` set, which the crawl reports as an error row (reason ``bad_seed``) naming
the file and line, while the other lines are built. A URL's userinfo (``user:pass@``) is taken out
of it (no table or answer ever shows it) and kept on the seed as ``auth``, sent only with requests
to that seed's origin.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from laminae.schemas.errors import LaminaeError
from laminae.schemas.ids import MAX_URL_CHARS, canonical_url
from laminae.tasks.crawl.files import FileProblem, file_url, path_of

SITEMAP_SUFFIXES = (".xml", ".xml.gz", ".txt", ".txt.gz")


def looks_like_sitemap(url: str) -> bool:
    """The sitemap rule for a seed without ``"sitemap"``: an http(s) URL whose last path segment
    names a sitemap (``sitemap.xml``, ``sitemap_index.xml``, ``news-sitemap.xml.gz``,
    ``sitemap.txt``: it contains "sitemap" and ends ``.xml``, ``.txt`` or either with ``.gz``) or
    any ``.xml.gz`` file."""
    parts = urlsplit(url)
    name = parts.path.rsplit("/", 1)[-1].lower()
    if parts.scheme not in ("http", "https"):
        return False
    return name.endswith(".xml.gz") or ("sitemap" in name and name.endswith(SITEMAP_SUFFIXES))


@dataclass(frozen=True)
class Seed:
    url: str
    annotations: dict = field(default_factory=dict, hash=False, compare=False)
    sitemap: bool | None = field(default=None, hash=False, compare=False)  # None: decided by the URL
    # the userinfo the seed's URL held (user, password): sent to its origin only, never stored
    auth: tuple[str, str] | None = field(default=None, hash=False, compare=False, repr=False)
    error: str | None = field(default=None, hash=False, compare=False)  # a bad line: why (``url`` is file:line)

    @property
    def is_sitemap(self) -> bool:
        """Is this seed a sitemap, to be expanded into the pages it lists (``looks_like_sitemap``
        unless the seed says)."""
        return self.sitemap if self.sitemap is not None else looks_like_sitemap(self.url)


class SeedsError(LaminaeError, ValueError):
    """The seeds file cannot be used; the message says which line and how to fix it."""

    exit_code = 2


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_UNDECODED = re.compile("[\udc80-\udcff]")  # a byte that is not UTF-8, kept by surrogateescape
_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


def _why_not(url: str) -> str:
    """Why ``canonical_url`` refuses a URL, in words for the error row."""
    if len(url) > MAX_URL_CHARS:
        return f"is {len(url):,} characters long, more than the {MAX_URL_CHARS:,} a URL may have"
    control = _CONTROL.search(url)
    if control:
        return f"holds a control character ({control.group()!r}) at column {control.start() + 1}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (it raises for a port that is not a number up to 65535)
    except ValueError as exc:
        return f"cannot be parsed ({exc})"
    if parts.scheme.lower() not in ("http", "https", "file") or (parts.scheme.lower() != "file" and not parts.hostname):
        return "is not an absolute http(s) or file URL"
    return f"has a host that is no host name IDNA can encode ({parts.hostname!r})"


def _check_url(url: str, where: str) -> tuple[str, tuple[str, str] | None]:
    """The seed URL normalized (``canonical_url``; a ``file://`` one made canonical, a folder's
    ending with ``/``) and the userinfo it held; SeedsError saying why for a URL that is none."""
    parts = None
    with contextlib.suppress(ValueError):
        parts = urlsplit(url)
    if parts is not None and parts.scheme.lower() == "file" and not _CONTROL.search(url):
        try:
            path = path_of(url)
        except FileProblem as problem:
            raise SeedsError(f"{where}: {problem.message}; write a local path as file:///absolute/folder/") from None
        path = Path(os.path.normpath(path))
        return file_url(path, folder=parts.path.endswith("/") or path.is_dir()), None
    target = canonical_url(url) if not _CONTROL.search(url) else None
    if target is None:
        raise SeedsError(f"{where}: {url[:200]!r} {_why_not(url)}; write it as https://host/path or "
                         "file:///absolute/folder/")
    auth = None
    if parts is not None and (parts.username or parts.password):
        auth = (unquote(parts.username or ""), unquote(parts.password or ""))
    return target, auth


def without_userinfo(seed: Seed) -> Seed:
    """A seed whose URL still holds userinfo (one remembered by an index built before seeds lost
    it) as ``read_seeds`` makes it: the URL normalized without it, the userinfo as ``auth``."""
    try:
        parts = urlsplit(seed.url)
        secret = parts.username is not None or parts.password is not None
    except ValueError:
        return seed
    url = canonical_url(seed.url) if secret else None
    if url is None:
        return seed
    return Seed(url, seed.annotations, seed.sitemap, (unquote(parts.username or ""), unquote(parts.password or "")))


def _lines(path: Path) -> list[str]:
    """The lines of a seeds file: UTF-8 or, by its byte-order mark, UTF-16; SeedsError for one
    with NUL bytes and no mark, where they are many or beside bytes that are not UTF-8 (a binary
    file, UTF-16 without its mark). Bytes that are not UTF-8 are left undecoded (surrogate
    escapes): their lines are bad seeds, the others are read."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SeedsError(f"seeds file {path} cannot be read: {exc.strerror or exc}") from None
    for bom, codec in _BOMS:
        if raw.startswith(bom):
            text = raw[len(bom):].decode(codec, errors="surrogateescape" if codec == "utf-8" else "replace")
            break
    else:
        text = raw.decode("utf-8", errors="surrogateescape")
        # a NUL in a line of UTF-8 text is that line's problem; many, or beside bytes that are not UTF-8, the file's
        if b"\x00" in raw and (raw.count(0) > len(raw) // 16 or _UNDECODED.search(text)):
            raise SeedsError(f"seeds file {path} is not a text file (it holds {raw.count(0):,} NUL bytes and no "
                             "UTF-16 byte-order mark); write one URL a line, as UTF-8")
    return [line.removesuffix("\r") for line in text.split("\n")]


def _seed(line: str, where: str) -> Seed:
    """The seed one line of a seeds file names; SeedsError saying why for a bad one."""
    undecoded = _UNDECODED.search(line)
    if undecoded:
        raise SeedsError(f"{where}: byte {ord(undecoded.group()) - 0xDC00:#04x} is not UTF-8; save the seeds file "
                         "as UTF-8")
    if not line.startswith("{"):
        url, auth = _check_url(line, where)
        return Seed(url, auth=auth)
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise SeedsError(f"{where}: invalid JSON ({exc.msg}); one JSON object per line") from None
    if not isinstance(record, dict):
        raise SeedsError(f"{where}: a JSON seed is an object with a \"url\" field")
    url = record.pop("url", None)
    if not isinstance(url, str):
        raise SeedsError(f'{where}: a JSON seed needs a "url" string field')
    sitemap = record.pop("sitemap", None)
    if sitemap is not None and not isinstance(sitemap, bool):
        raise SeedsError(f'{where}: "sitemap" is true (expand the URL as a sitemap) or false, not {sitemap!r}')
    url, auth = _check_url(url.strip(), where)
    if sitemap and urlsplit(url).scheme not in ("http", "https"):
        raise SeedsError(f"{where}: a sitemap seed is fetched over http(s); {url} is not")
    return Seed(url, record, sitemap, auth)


def read_seeds(path: str | Path) -> list[Seed]:
    """Seeds from ``path`` in file order, duplicates removed (first annotations win); a folder
    ``path`` is one seed, the folder. A bad line is a seed with ``error`` (its ``url`` is
    ``file:line``); SeedsError when the file is no text or no line is a usable seed."""
    path = Path(path)
    if path.is_dir():
        return [Seed(file_url(path.resolve(), folder=True))]
    if not path.is_file():
        raise SeedsError(f"seeds file {path} does not exist; pass --seeds with a file of URLs or a folder")
    seeds: dict[str, Seed] = {}
    bad: list[Seed] = []
    for lineno, raw in enumerate(_lines(path), 1):
        line = raw.strip().removeprefix("\ufeff").strip()  # a BOM left by concatenating files
        if not line or line.startswith("#"):
            continue
        where = f"{path}:{lineno}"
        try:
            seed = _seed(line, where)
        except SeedsError as problem:
            bad.append(Seed(where, error=str(problem)))
            continue
        seeds.setdefault(seed.url, seed)
    if not seeds:
        if bad:
            more = f" ({len(bad) - 1} more bad lines)" if len(bad) > 1 else ""
            raise SeedsError(f"seeds file {path} holds no usable URL: {bad[0].error}{more}")
        raise SeedsError(f"seeds file {path} holds no URLs")
    return list(seeds.values()) + bad
