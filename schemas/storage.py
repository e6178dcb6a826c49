"""Where an index lives: a local directory, or object storage (``s3://bucket/prefix``; also ``gs://``
and ``abfs://``), for the files that are not LanceDB tables.

Reads and writes files relative to the index root (``index.json``, ``_manifests/``, ``raw/``,
``report.html``) through pyarrow's file systems, and gives LanceDB the options to reach the same
place. Credentials and endpoint come from the environment: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``, and ``AWS_ENDPOINT_URL`` for an
S3-compatible server (MinIO, Ceph, ...); an ``http://`` endpoint is allowed as such.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from laminae.schemas.errors import LaminaeError
from laminae.schemas.ids import digest

MANIFEST_DIR = "_manifests"  # one JSON per published build, LATEST names the newest
SNAPSHOT_DIR = "_snapshots"  # the reader's in-memory view of a version, saved (local indexes)
REMOTE_SCHEMES = ("s3://", "gs://", "gcs://", "abfs://")


def cache_dir() -> Path:
    """laminae's cache (Prefect home, model weights, snapshots of remote indexes):
    ``$LAMINAE_CACHE_DIR`` or ~/.cache/laminae."""
    return Path(os.environ.get("LAMINAE_CACHE_DIR") or Path.home() / ".cache" / "laminae")


def snapshot_dir(root: str | os.PathLike[str], version: int, run_id: str | None = None) -> Path:
    """Where the reader's saved view of manifest ``version`` lives: in the index for a local one
    (``_snapshots/NNNNNNNN``), in the cache for one on object storage, where a memory map cannot
    reach: ``snapshots/<digest of the URI>/NNNNNNNN-<digest of run_id>``, the manifest's ``run_id``
    (every manifest has one) telling apart the versions of an index deleted and built again at the
    same URI, whose numbers start over."""
    if is_remote(root):
        if not run_id:
            raise ValueError(f"the cached snapshot of {root} is named after its manifest's run_id: pass it")
        name = f"{version:08d}-{digest(run_id, size=4)}"
        return cache_dir() / "snapshots" / digest(str(root).rstrip("/"), size=8) / name
    return Path(root) / SNAPSHOT_DIR / f"{version:08d}"


def raw_path(key: str) -> str:
    """Where the raw store keeps the bytes of content hash ``key``, relative to the index root."""
    return f"raw/{key[:2]}/{key}"


class StorageError(LaminaeError, ValueError):
    """The index location cannot be reached; the message names the settings to check."""

    exit_code = 2


def is_remote(uri: str | os.PathLike[str]) -> bool:
    """Whether ``uri`` names object storage rather than a local directory."""
    return str(uri).startswith(REMOTE_SCHEMES)


def storage_options(uri: str | os.PathLike[str]) -> dict[str, str] | None:
    """LanceDB's ``storage_options`` for ``uri``: the S3 endpoint from ``AWS_ENDPOINT_URL``, if set."""
    if not is_remote(uri):
        return None
    options: dict[str, str] = {}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint and str(uri).startswith("s3://"):
        options["endpoint"] = endpoint
        if endpoint.startswith("http://"):
            options["allow_http"] = "true"
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region and str(uri).startswith("s3://"):
        options["region"] = region
    return options


class IndexFiles:
    """The index's own files under one root, local or remote; writes are atomic either way."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.uri = str(root).rstrip("/")
        self.remote = is_remote(self.uri)
        self.local: Path | None = None
        if self.remote:
            from pyarrow import fs

            try:
                self._fs, self._base = fs.FileSystem.from_uri(self.uri)
            except (OSError, ValueError) as exc:
                raise StorageError(f"cannot reach {self.uri}: {exc} (credentials and endpoint come from "
                                 "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL)") from None
        else:
            self.local = Path(root)

    def __str__(self) -> str:
        return self.uri

    def exists(self, rel: str) -> bool:
        if self.local is not None:
            return (self.local / rel).exists()
        from pyarrow import fs

        return self._fs.get_file_info(f"{self._base}/{rel}").type != fs.FileType.NotFound

    def read_bytes(self, rel: str) -> bytes | None:
        """The file's bytes, or None if there is no such file."""
        if self.local is not None:
            try:
                return (self.local / rel).read_bytes()
            except FileNotFoundError:
                return None
        try:
            with self._fs.open_input_stream(f"{self._base}/{rel}") as stream:
                return stream.read()
        except FileNotFoundError:
            return None

    def read_text(self, rel: str) -> str | None:
        data = self.read_bytes(rel)
        return None if data is None else data.decode("utf-8")

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Write a file whole: a temporary file renamed into place locally, one PUT on object storage."""
        if self.local is None:
            with self._fs.open_output_stream(f"{self._base}/{rel}") as stream:
                stream.write(data)
            return
        target = self.local / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def write_text(self, rel: str, text: str) -> None:
        self.write_bytes(rel, text.encode("utf-8"))

    def list(self, rel: str) -> list[str]:
        """Names of the files in folder ``rel`` (none if it does not exist)."""
        if self.local is not None:
            folder = self.local / rel
            return sorted(p.name for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
        from pyarrow import fs

        selector = fs.FileSelector(f"{self._base}/{rel}", allow_not_found=True)
        return sorted(i.base_name for i in self._fs.get_file_info(selector) if i.type == fs.FileType.File)

    def delete_tree(self, rel: str) -> None:
        """Remove folder ``rel`` with everything under it; one that is already gone is fine."""
        if self.local is not None:
            import shutil

            shutil.rmtree(self.local / rel, ignore_errors=True)
            return
        with contextlib.suppress(FileNotFoundError):
            self._fs.delete_dir(f"{self._base}/{rel}")

    def delete(self, rel: str) -> None:
        """Remove a file; one that is already gone is fine."""
        if self.local is not None:
            (self.local / rel).unlink(missing_ok=True)
            return
        with contextlib.suppress(FileNotFoundError):
            self._fs.delete_file(f"{self._base}/{rel}")
