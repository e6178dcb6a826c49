"""Files: ``file://`` seeds; folders listed into page URLs, files read in place of HTTP fetches.

Reads the folders given as seeds (recursively: the files under them whose extension names a document
format: HTML, PDF, Markdown, text, CSV, Word, PowerPoint, Excel, EPUB) and the
files under them; writes nothing (the crawler puts the bytes into the index's ``RawStore``). A
path whose real location (every symlink resolved) is outside the real path of every seed folder
is never opened. A file's ``etag`` is ``"<size>-<mtime_ns>"``: a refresh that finds the same one
answers "not modified" without reading the file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from urllib.parse import unquote_to_bytes, urlsplit

from laminae.schemas.errors import LaminaeError
from laminae.tasks.crawl.formats import PAGE_SUFFIXES


class FileProblem(LaminaeError):
    """A file URL that cannot be read; ``reason`` is the short error code of a fetch."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


@dataclass
class FileRead:
    """A file read (or found unchanged): ``body`` is None when ``etag`` matched the previous one."""

    path: str
    etag: str
    last_modified: str
    body: bytes | None


def is_file_url(url: str) -> bool:
    return urlsplit(url).scheme == "file"


def path_of(url: str) -> Path:
    """The absolute local path a ``file://`` URL names; FileProblem for another machine's path."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise FileProblem("out_of_scope", f"{url} names a file on host {parts.netloc!r}; only local paths are read")
    path = os.fsdecode(unquote_to_bytes(parts.path))
    if not path.startswith("/"):
        raise FileProblem("out_of_scope", f"{url} is not an absolute path")
    return Path(path)


def file_url(path: Path, folder: bool = False) -> str:
    """The ``file://`` URL of an absolute path; a folder's ends with ``/``."""
    url = path.as_uri()
    return url + "/" if folder and not url.endswith("/") else url


def is_folder_url(url: str) -> bool:
    return is_file_url(url) and urlsplit(url).path.endswith("/")


def scope_of(url: str) -> str:
    """The folder URL a file seed lets the crawl read: the folder itself, or the folder of a file."""
    path = path_of(url)
    return file_url(path if is_folder_url(url) else path.parent, folder=True)


def real_roots(scopes: Iterable[str]) -> list[Path]:
    """Real paths (symlinks resolved) of the seed folders among ``scopes`` (other entries: hosts)."""
    return [Path(os.path.realpath(path_of(s))) for s in scopes if is_file_url(s)]


def inside(url: str, roots: list[Path]) -> Path:
    """The real path of ``url`` when it lies in one of ``roots``; FileProblem ``out_of_scope`` if not."""
    path = path_of(url)
    real = Path(os.path.realpath(path))
    if not any(real.is_relative_to(root) for root in roots):
        where = "" if real == path else f" (it resolves to {real})"
        raise FileProblem("out_of_scope", f"{path} is outside the seed folders{where}; not read")
    return real


def list_folder(url: str, roots: list[Path]) -> tuple[list[str], list[tuple[str, str, str]]]:
    """The page files under the folder ``url``, depth first in name order, and ``(folder URL,
    reason, message)`` for each folder that could not be listed. Hidden entries (``.git``) are
    skipped; symlinked folders are not descended into (their files are reached, if inside, by
    their real folder); symlinked files are listed and checked when read. The walk keeps its own
    stack, so any depth is listed (no recursion limit); a folder whose path the system refuses as
    too long is an ``unreadable`` problem like any other."""
    pages: list[str] = []
    problems: list[tuple[str, str, str]] = []
    try:
        top = inside(url, roots)
    except FileProblem as problem:
        return [], [(url, problem.reason, problem.message)]
    if not top.exists():
        return [], [(url, "not_found", f"folder {top} does not exist")]

    def entries(folder: Path, folder_url: str) -> Iterator[os.DirEntry]:
        try:
            with os.scandir(folder) as it:
                listed = sorted(it, key=lambda e: e.name)
        except NotADirectoryError:
            problems.append((folder_url, "not_a_folder", f"{folder} is not a folder"))
            return iter(())
        except OSError as exc:
            problems.append((folder_url, "unreadable", f"folder {folder} cannot be listed: {exc.strerror or exc}"))
            return iter(())
        return iter(listed)

    stack = [(top, entries(top, file_url(top, folder=True)))]
    while stack:
        folder, rest = stack[-1]
        entry = next(rest, None)
        if entry is None:
            stack.pop()
            continue
        if entry.name.startswith("."):
            continue
        path = folder / entry.name
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        if is_dir:
            stack.append((path, entries(path, file_url(path, folder=True))))
        elif entry.name.lower().endswith(PAGE_SUFFIXES):
            pages.append(file_url(path))
    return pages, problems


def read_file(url: str, roots: list[Path], max_bytes: int, etag: str | None = None) -> FileRead:
    """Read the file ``url`` names if it lies in ``roots`` and is a regular file of at most
    ``max_bytes``; with the ``etag`` of the previous read and the same size and mtime, nothing is
    read. Raises FileProblem (out_of_scope, not_found, not_a_file, unreadable, too_large, empty_body)."""
    real = inside(url, roots)
    named = path_of(url)
    missing = f"{named} does not exist" if named == real else f"{named} (a link to {real}) does not exist"
    try:
        # the real path, opened without following a final symlink, so a link swapped in after the
        # check above is refused rather than followed
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise FileProblem("not_found", missing) from None
    except OSError as exc:
        if not real.exists():
            raise FileProblem("not_found", missing) from None
        if real.is_dir():
            raise FileProblem("not_a_file", f"{real} is a folder, not a file") from None
        raise FileProblem("unreadable", f"{real} cannot be opened: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise FileProblem("not_a_file", f"{real} is {kind}")
        tag = f"{info.st_size}-{info.st_mtime_ns}"
        modified = formatdate(info.st_mtime, usegmt=True)
        if etag is not None and etag == tag:
            return FileRead(str(real), tag, modified, None)
        if info.st_size > max_bytes:
            raise FileProblem("too_large", f"{real} has {info.st_size} bytes, more than {max_bytes}")
        with os.fdopen(os.dup(fd), "rb") as f:
            body = f.read(max_bytes + 1)
    except OSError as exc:
        raise FileProblem("unreadable", f"{real} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(body) > max_bytes:
        raise FileProblem("too_large", f"{real} grew past {max_bytes} bytes while read")
    if not body:
        raise FileProblem("empty_body", f"{real} is empty")
    return FileRead(str(real), tag, modified, body)
