"""Reader pins: a long-lived reader keeps the table versions of its manifest from being cleaned up.

Reads and writes ``<index>/_pins/<id>.json`` (``{"version", "pid", "host", "expires_at"}``)
through the index's own files, so pins work on a local directory and on object storage alike.
After publishing, the writer deletes table versions older than the newest ``keep_manifests``
manifests *and* every manifest a live pin names (``pinned_versions``). A pin lives ``ttl``
seconds (``$LAMINAE_PIN_TTL``, default 600) and is renewed by a daemon thread every third of that,
so a reader that dies stops protecting its version within ``ttl``; ``close`` removes it at once.
The MCP server pins the manifest it serves; ``laminae.open`` does not pin by itself (a short-lived
reader is covered by the newest manifests being kept).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid

from laminae.schemas.storage import IndexFiles

log = logging.getLogger(__name__)

PIN_DIR = "_pins"
TTL_ENV = "LAMINAE_PIN_TTL"


def pin_ttl() -> float:
    value = os.environ.get(TTL_ENV, "600")
    try:
        return max(float(value), 3.0)
    except ValueError:
        raise ValueError(f"{TTL_ENV}={value!r} is not a number of seconds (e.g. 600)") from None


class ReaderPin:
    """A pin on manifest ``version`` of the index at ``root``, renewed until ``close``."""

    def __init__(self, root: str, version: int, ttl: float | None = None) -> None:
        self.files = IndexFiles(root)
        self.ttl = pin_ttl() if ttl is None else ttl
        self.name = f"{PIN_DIR}/{uuid.uuid4().hex}.json"
        self.version = version
        self._stop = threading.Event()
        self._write()
        self._thread = threading.Thread(target=self._renew, name="laminae-pin", daemon=True)
        self._thread.start()

    def _write(self) -> None:
        record = {"version": self.version, "pid": os.getpid(), "host": socket.gethostname(),
                  "expires_at": time.time() + self.ttl}
        self.files.write_text(self.name, json.dumps(record))

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                self._write()
            except OSError as exc:  # storage unreachable for a moment: the next renewal retries
                log.warning("reader pin %s not renewed: %s", self.name, exc)

    def move(self, version: int) -> None:
        """Pin another manifest (the reader moved to it) instead."""
        self.version = version
        self._write()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.files.delete(self.name)


def pinned_versions(files: IndexFiles, now: float | None = None) -> set[int]:
    """Manifest versions named by live pins; expired pins are removed on the way."""
    now = time.time() if now is None else now
    versions: set[int] = set()
    for name in files.list(PIN_DIR):
        text = files.read_text(f"{PIN_DIR}/{name}")
        try:
            record = json.loads(text or "")
            version, expires = int(record["version"]), float(record["expires_at"])
        except (ValueError, KeyError, TypeError):
            log.warning("%s/%s/%s is not a reader pin; removed", files.uri, PIN_DIR, name)
            files.delete(f"{PIN_DIR}/{name}")
            continue
        if expires < now:
            files.delete(f"{PIN_DIR}/{name}")
        else:
            versions.add(version)
    return versions
