"""Open a laminae index pinned to one published manifest.

Reads ``<index>/_manifests/`` (the build manifests) and the LanceDB tables at the versions the
manifest names, so every table is seen as one build left it; writes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import lancedb

from laminae.stats import table_stats
from schemas.tables import SCHEMA_VERSION, TABLES

MANIFEST_DIR = "_manifests"


class IndexOpenError(RuntimeError):
    """The index cannot be opened; the message says why and what to do."""


class Index:
    """A read-only view of one index at one manifest version."""

    def __init__(self, root: str, manifest: dict) -> None:
        self.root = root
        self.manifest = manifest
        self.version: int = manifest["version"]
        self._db = lancedb.connect(root)
        self._tables: dict[str, object] = {}

    @property
    def embedder(self) -> dict:
        """The embedder's ``model_id``, ``dim`` and ``image_mode`` (how images were embedded)."""
        return dict(self.manifest.get("embedder") or {})

    def table(self, name: str):
        """The LanceDB table ``name`` checked out at this manifest's version."""
        if name not in self._tables:
            if name not in self.manifest["tables"]:
                raise KeyError(f"unknown table {name!r}; tables are {', '.join(self.manifest['tables'])}")
            tbl = self._db.open_table(name)
            tbl.checkout(self.manifest["tables"][name])
            self._tables[name] = tbl
        return self._tables[name]

    def stats(self) -> dict:
        """Rows per layer and kind, edges per kind, resolved links, and the build's run summary."""
        stats = table_stats({name: self.table(name) for name in TABLES if name in self.manifest["tables"]})
        stats["manifest_version"] = self.version
        stats["embedder"] = self.embedder
        stats["last_run"] = self.manifest.get("run")
        return stats

    def __repr__(self) -> str:
        return f"laminae.Index({self.root!r}, version={self.version})"


def _manifest_dir(root: str) -> Path:
    return Path(root) / MANIFEST_DIR


def open_index(index_dir: str, version: int | None = None) -> Index:
    """Open the index at ``index_dir``, pinned to manifest ``version`` (default: the latest)."""
    directory = _manifest_dir(index_dir)
    latest = directory / "LATEST"
    if not latest.exists():
        raise IndexOpenError(
            f"{index_dir} holds no published laminae index (no {MANIFEST_DIR}/LATEST): "
            "build one with `laminae build --seeds FILE --index DIR`"
        )
    number = int(latest.read_text().strip()) if version is None else int(version)
    path = directory / f"{number:08d}.json"
    if not path.exists():
        raise IndexOpenError(f"{index_dir} has no manifest version {number}; the latest is {latest.read_text().strip()}")
    manifest = json.loads(path.read_text())
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise IndexOpenError(
            f"{index_dir} was written with schema version {manifest.get('schema_version')}; this laminae "
            f"reads version {SCHEMA_VERSION}. Install the laminae release that built it, or rebuild the index"
        )
    return Index(str(index_dir), manifest)
