"""Seeds: read a seeds file (or a folder) into URLs with annotations.

Reads a text file with one URL per line (``#`` comments and blank lines skipped) or JSON Lines
with a ``url`` field plus any annotations, which are kept on the document row (and a
``"sitemap"`` flag, true or false, overriding ``looks_like_sitemap``). A URL is http(s)
or ``file://`` (an absolute local path: a folder, written with or without its final ``/``, or one
file). A folder given instead of a seeds file is one seed: its ``file://`` URL, which the crawl
lists (again at every refresh). Writes nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

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

    @property
    def is_sitemap(self) -> bool:
        """Is this seed a sitemap, to be expanded into the pages it lists (``looks_like_sitemap``
        unless the seed says)."""
        return self.sitemap if self.sitemap is not None else looks_like_sitemap(self.url)


class SeedsError(ValueError):
    """The seeds file cannot be used; the message says which line and how to fix it."""


def _check_url(url: str, where: str) -> str:
    """The seed URL, a ``file://`` one made canonical (a folder's ends with ``/``)."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        try:
            path = path_of(url)
        except FileProblem as problem:
            raise SeedsError(f"{where}: {problem.message}; write a local path as file:///absolute/folder/") from None
        path = Path(os.path.normpath(path))
        return file_url(path, folder=parts.path.endswith("/") or path.is_dir())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SeedsError(f"{where}: {url!r} is not an absolute http(s) or file URL; write it as "
                         "https://host/path or file:///absolute/folder/")
    return url


def read_seeds(path: str | Path) -> list[Seed]:
    """Seeds from ``path`` in file order, duplicates removed (first annotations win); a folder
    ``path`` is one seed, the folder."""
    path = Path(path)
    if path.is_dir():
        return [Seed(file_url(path.resolve(), folder=True))]
    if not path.is_file():
        raise SeedsError(f"seeds file {path} does not exist; pass --seeds with a file of URLs or a folder")
    seeds: dict[str, Seed] = {}
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path}:{lineno}"
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SeedsError(f"{where}: invalid JSON ({exc.msg}); one JSON object per line") from None
            url = record.pop("url", None)
            if not isinstance(url, str):
                raise SeedsError(f'{where}: a JSON seed needs a "url" string field')
            sitemap = record.pop("sitemap", None)
            if sitemap is not None and not isinstance(sitemap, bool):
                raise SeedsError(f'{where}: "sitemap" is true (expand the URL as a sitemap) or false, not {sitemap!r}')
            url = _check_url(url.strip(), where)
            if sitemap and urlsplit(url).scheme not in ("http", "https"):
                raise SeedsError(f"{where}: a sitemap seed is fetched over http(s); {url} is not")
            seed = Seed(url, record, sitemap)
        else:
            seed = Seed(_check_url(line, where))
        seeds.setdefault(seed.url, seed)
    if not seeds:
        raise SeedsError(f"seeds file {path} holds no URLs")
    return list(seeds.values())
