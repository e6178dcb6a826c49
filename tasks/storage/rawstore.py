"""Content-addressed store of raw bytes (pages, images) under ``<index>/raw/``.

Writes ``raw/<k[:2]>/<k>`` where ``k`` is the SHA-256 of the bytes; reads them back by key. A
re-parse reads from here and never re-fetches. The store follows the index (a local directory or
object storage, ``laminae.schemas.storage``); writes are atomic (temp file and rename, or one PUT).
"""

from __future__ import annotations

import os

from laminae.schemas.ids import content_hash
from laminae.schemas.storage import IndexFiles, raw_path


class RawStore:
    def __init__(self, index_dir: str | os.PathLike[str]) -> None:
        self.files = IndexFiles(index_dir)

    @staticmethod
    def _rel(key: str) -> str:
        return raw_path(key)

    def put(self, data: bytes) -> str:
        key = content_hash(data)
        if not self.files.exists(self._rel(key)):
            self.files.write_bytes(self._rel(key), data)
        return key

    def get(self, key: str) -> bytes:
        data = self.files.read_bytes(self._rel(key))
        if data is None:
            raise KeyError(f"raw blob {key} is missing from {self.files}/raw")
        return data

    def __contains__(self, key: str) -> bool:
        return self.files.exists(self._rel(key))
