"""Content-addressed store of raw bytes (pages, images) under ``<index>/raw/``.

Writes ``raw/<k[:2]>/<k>`` where ``k`` is the SHA-256 of the bytes; reads them back by key. A
re-parse reads from here and never re-fetches. Writes are atomic (temp file, then rename).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from schemas.ids import content_hash


class RawStore:
    def __init__(self, index_dir: str | os.PathLike[str]) -> None:
        self.root = Path(index_dir) / "raw"

    def path(self, key: str) -> Path:
        return self.root / key[:2] / key

    def put(self, data: bytes) -> str:
        key = content_hash(data)
        target = self.path(key)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        return key

    def get(self, key: str) -> bytes:
        try:
            return self.path(key).read_bytes()
        except FileNotFoundError:
            raise KeyError(f"raw blob {key} is missing from {self.root}") from None

    def __contains__(self, key: str) -> bool:
        return self.path(key).exists()
