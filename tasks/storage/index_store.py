"""Write: rows → LanceDB tables of one index directory, plus its metadata.

Reads and writes ``<index>/`` (the LanceDB database) and ``<index>/index.json`` (schema version,
embedder, the seeds and settings a refresh reuses). Node and edge rows of a document are replaced
together: a delete of that document's rows, then the new ones added. The index's manifests,
snapshots and table-version upkeep (publish, recover, compact, clean up) are ``Versions``'
(``laminae.tasks.storage.versions``); the lookups a stage makes live in the stage's module.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS, BTree

from laminae.schemas.search_text import SERIALIZATION
from laminae.schemas.sql import sql_list
from laminae.schemas.storage import IndexFiles, storage_options
from laminae.schemas.tables import NODE_TABLES, SCHEMA_VERSION, TABLES, table_schemas
from laminae.snapshots import crash_point
from laminae.tasks.storage.versions import IndexConfigError, Versions

__all__ = ["META_FILE", "IndexConfigError", "IndexStore"]

log = logging.getLogger("laminae.store")

META_FILE = "index.json"


class IndexStore(Versions):
    """One index directory opened for writing."""

    def __init__(self, index_dir: str | os.PathLike[str]) -> None:
        self.files = IndexFiles(index_dir)
        self.root = self.files.uri
        if self.files.local is not None:
            self.files.local.mkdir(parents=True, exist_ok=True)
        self.db = lancedb.connect(self.root, storage_options=storage_options(self.root))

    # -- metadata ------------------------------------------------------------------------------
    def metadata(self) -> dict | None:
        text = self.files.read_text(META_FILE)
        return json.loads(text) if text is not None else None

    def prepare(self, embedder: dict, reembed: bool = False) -> bool:
        """Create the tables (if new) for ``embedder`` ({model_id, dim, image_mode}); refuse a mix.
        An existing index's tables gain the nullable columns added since it was built, all null,
        before anything is written to them (rows written with a table's old schema would lose
        those values): a build or refresh calls this every time, a move included.

        Returns True when the caller must move the whole index (``laminae.tasks.storage.upkeep.reembed_index``):
        it holds another model's vectors and ``reembed`` allows the move, or its nodes were
        serialized by another version of ``laminae.schemas.search_text`` (always moved).
        """
        meta = self.metadata()
        move = False
        if meta is not None and "embedder" in meta:
            if meta.get("schema_version") != SCHEMA_VERSION:
                raise IndexConfigError(
                    f"{self.root} has schema version {meta.get('schema_version')}, this laminae writes "
                    f"{SCHEMA_VERSION}: build into a new --index directory"
                )
            old = meta["embedder"]
            if (old["model_id"], old["dim"], old["image_mode"]) != (
                    embedder["model_id"], embedder["dim"], embedder["image_mode"]):
                if not reembed:
                    raise IndexConfigError(
                        f"{self.root} holds vectors of {old['model_id']} ({old['dim']}-d); the configured "
                        f"embedder is {embedder['model_id']} ({embedder['dim']}-d). Vector spaces are never "
                        "mixed: pass --reembed to move the whole index to the new model, build into a new "
                        "--index directory, or configure the index's model"
                    )
                move = True
            # serialized by another laminae: moved whole, never mixed
            move = move or meta.get("serialization", 1) != SERIALIZATION
        else:
            self.remember(schema_version=SCHEMA_VERSION, embedder=embedder, serialization=SERIALIZATION,
                          created_at=datetime.now(UTC).isoformat())
        existing = set(self.db.list_tables().tables)
        for name in sorted(existing & set(TABLES)):
            if not self._has_version(name):
                # created by a run that died (a full disk) before its first commit: it holds
                # nothing, so it is created again like a table that never was
                log.warning("%s/%s.lance has no version (a run died creating it): created again", self.root, name)
                self.files.delete_tree(f"{name}.lance")
                existing.discard(name)
        for name, schema in table_schemas(embedder["dim"]).items():
            if name not in existing:
                self.db.create_table(name, schema=schema, exist_ok=True)
                continue
            tbl = self.db.open_table(name)
            missing = [f for f in schema if f.name not in tbl.schema.names]
            if missing:  # nullable columns added since the index was built (videos' times): all null
                tbl.add_columns(pa.schema(missing))
        return move

    def _has_version(self, name: str) -> bool:
        return any(n.endswith(".manifest") for n in self.files.list(f"{name}.lance/_versions"))

    def remember(self, **entries) -> None:
        """Merge ``entries`` (seeds, settings, ...) into ``index.json`` so a refresh can reuse them."""
        meta = self.metadata() or {}
        meta.update(entries)
        self.files.write_text(META_FILE, json.dumps(meta, indent=2, default=str))

    def table(self, name: str):
        """The latest version of table ``name`` (opened anew: other handles may have written since)."""
        if name not in TABLES:
            raise KeyError(f"unknown table {name!r}; tables are {', '.join(TABLES)}")
        return self.db.open_table(name)

    # -- writes --------------------------------------------------------------------------------
    def replace_documents(self, batches: dict[str, list[dict]], document_ids: list[str]) -> None:
        """Replace the rows of these documents: their old nodes and edges are deleted, then the rows
        in ``batches`` added.

        Delete then add, not LanceDB's ``merge_insert``: a merge joins its rows against the whole
        table, so its memory grows with the index (18 GB for a batch of 64 documents at 10M
        subcomponents, ``bench/refresh_scale.py``), while a delete reads the ``document_id``
        column and an add appends. Children are written before their documents so that a
        document row never points at nodes that are not there yet; a run killed in between
        leaves the pages' fetch rows as they were, so the next run parses them again.
        """
        scope = f"document_id IN ({sql_list(document_ids)})"
        for name in ("edges", "subcomponents", "components"):
            if document_ids:
                self.table(name).delete(scope)
            self.append(name, batches.get(name, []))
            crash_point(f"write:{name}")
        documents = batches.get("documents", [])
        self.delete_ids("documents", [d["id"] for d in documents])
        self.append("documents", documents)

    def delete_documents(self, document_ids: list[str]) -> None:
        """Remove documents with all their nodes and edges (edges they own; links to them stop resolving
        at the next link resolution)."""
        if not document_ids:
            return
        ids = sql_list(document_ids)
        for name in ("edges", "subcomponents", "components"):
            self.table(name).delete(f"document_id IN ({ids})")
        self.table("documents").delete(f"id IN ({ids})")

    def delete_ids(self, name: str, ids: list[str], chunk: int = 2000) -> None:
        """Delete a table's rows by id, a chunk of ids per statement."""
        for start in range(0, len(ids), chunk):
            self.table(name).delete(f"id IN ({sql_list(ids[start : start + chunk])})")

    def delete_rows(self, name: str, row_ids: np.ndarray, chunk: int = 50_000) -> None:
        """Delete a table's rows by the ``_rowid`` a scan of its current version gave them (the
        builder is the index's only writer, so they still name those rows), ``chunk`` per statement.

        A list of integers costs a delete statement far less than one of string ids: 100,000 ids
        took 1.5 GB and 4 s, 100,000 row ids 0.1 GB and 0.5 s (an embedding cache of 1M rows)."""
        for start in range(0, len(row_ids), chunk):
            part = np.asarray(row_ids[start : start + chunk], dtype=np.uint64)
            self.table(name).delete(f"_rowid IN ({','.join(map(str, part.tolist()))})")

    def upsert(self, name: str, rows: list[dict]) -> None:
        if not rows:
            return
        tbl = self.table(name)
        data = pa.Table.from_pylist(rows, schema=tbl.schema)
        tbl.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(data)

    def append(self, name: str, rows: list[dict]) -> None:
        """Add rows without looking for existing ones: rows replaced by ``replace_documents``, and
        the embedding cache's (a key names its vector, and an upsert would join against the whole
        cache; a key two batches embedded at once is stored twice, with the same vector)."""
        if rows:
            tbl = self.table(name)
            tbl.add(pa.Table.from_pylist(rows, schema=tbl.schema))

    def index_embedding_cache(self) -> None:
        """(Re)build the B-tree index on the embedding cache's ``id``: ``cached_vectors`` looks keys
        up 2,000 at a time, and without it each lookup scans every id of the cache (1.3 s a lookup
        in a cache of 11M keys, 0.09 s with it; built in 7 s). Rows added after it are scanned
        with it, so it is rebuilt once a run, with the search indexes."""
        tbl = self.table("embeddings")
        if tbl.count_rows():
            tbl.create_index("id", config=BTree(), replace=True)

    def build_text_indexes(self) -> None:
        """(Re)build the full-text index on ``search_text`` of every node table (for fts/hybrid
        search): English stemming, stop words removed, accents folded."""
        for name in NODE_TABLES:
            tbl = self.table(name)
            if tbl.count_rows():
                tbl.create_index("search_text", config=FTS(), replace=True)

