"""Write: rows → LanceDB tables of one index directory, plus its metadata and manifests.

Reads and writes ``<index>/`` (the LanceDB database), ``<index>/index.json`` (schema version and
embedder) and ``<index>/_manifests/`` (one JSON per published build, ``LATEST`` pointing at the
newest). Node and edge rows of a document are replaced together: upserts keyed by ``id`` plus a
delete of that document's rows that the new parse no longer has.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS, BTree

from laminae.schemas.ids import digest
from laminae.schemas.sql import sql_list
from laminae.schemas.storage import MANIFEST_DIR, SNAPSHOT_DIR, IndexFiles, snapshot_dir, storage_options
from laminae.schemas.tables import NODE_TABLES, SCHEMA_VERSION, TABLES, table_schemas
from laminae.tasks.nodes.search_text import SERIALIZATION

META_FILE = "index.json"


class IndexConfigError(RuntimeError):
    """The index cannot be written as asked; the message says how to fix it."""


CRASH_ENV = "LAMINAE_CRASH_AT"


def crash_point(name: str) -> None:
    """Kill this process with SIGKILL when ``$LAMINAE_CRASH_AT`` names this point (crash-safety tests)."""
    if os.environ.get(CRASH_ENV) == name:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


class IndexStore:
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

        Returns True when the caller must move the whole index (``laminae.tasks.pipeline.reembed_index``):
        it holds another model's vectors and ``reembed`` allows the move, or its nodes were
        serialized by another version of ``laminae.tasks.nodes.search_text`` (always moved).
        """
        meta = self.metadata()
        if meta is not None and "embedder" in meta:
            if meta.get("schema_version") != SCHEMA_VERSION:
                raise IndexConfigError(
                    f"{self.root} has schema version {meta.get('schema_version')}, this laminae writes "
                    f"{SCHEMA_VERSION}: build into a new --index directory"
                )
            old = meta["embedder"]
            if (old["model_id"], old["dim"], old["image_mode"]) != (
                    embedder["model_id"], embedder["dim"], embedder["image_mode"]):
                if reembed:
                    return True
                raise IndexConfigError(
                    f"{self.root} holds vectors of {old['model_id']} ({old['dim']}-d); the configured "
                    f"embedder is {embedder['model_id']} ({embedder['dim']}-d). Vector spaces are never "
                    "mixed: pass --reembed to move the whole index to the new model, build into a new "
                    "--index directory, or configure the index's model"
                )
            if meta.get("serialization", 1) != SERIALIZATION:
                return True  # serialized by another laminae: moved whole, never mixed
        else:
            self.remember(schema_version=SCHEMA_VERSION, embedder=embedder, serialization=SERIALIZATION,
                          created_at=datetime.now(UTC).isoformat())
        existing = set(self.db.list_tables().tables)
        for name, schema in table_schemas(embedder["dim"]).items():
            if name not in existing:
                self.db.create_table(name, schema=schema, exist_ok=True)
                continue
            tbl = self.db.open_table(name)
            missing = [f for f in schema if f.name not in tbl.schema.names]
            if missing:  # nullable columns added since the index was built (videos' times): all null
                tbl.add_columns(pa.schema(missing))
        return False

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

    # -- reads ---------------------------------------------------------------------------------
    def cached_vectors(self, keys: list[str]) -> dict[str, np.ndarray]:
        """Vectors of the embedding cache for these keys (see ``laminae.tasks.embed.embedders.cache_key``)."""
        found: dict[str, np.ndarray] = {}
        tbl = self.table("embeddings")
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 2000):
            chunk = unique[start : start + 2000]
            data = tbl.search().where(f"id IN ({sql_list(chunk)})").select(["id", "vector"]).limit(None).to_arrow()
            if data.num_rows == 0:
                continue
            vectors = data.column("vector").combine_chunks().flatten().to_numpy().reshape(data.num_rows, -1)
            found.update(zip(data.column("id").to_pylist(), vectors, strict=True))
        return found

    def existing_objects(self, document_ids: list[str]) -> dict[tuple[str, str], list[dict]]:
        """Object rows already indexed for these documents, keyed by (parent image id, image_key)."""
        if not document_ids:
            return {}
        scope = f"document_id IN ({sql_list(document_ids)})"
        images = self.table("components").search().where(f"{scope} AND kind = 'image'").select(
            ["id", "image_key"]).limit(None).to_arrow().to_pylist()
        keys = {r["id"]: r["image_key"] for r in images if r["image_key"]}
        objects = self.table("subcomponents").search().where(f"{scope} AND kind = 'object'").limit(None).to_arrow()
        out: dict[tuple[str, str], list[dict]] = {}
        for row in objects.to_pylist():
            if row["parent_id"] in keys:
                out.setdefault((row["parent_id"], keys[row["parent_id"]]), []).append(row)
        for rows in out.values():
            rows.sort(key=lambda r: r["ordinal"])
        return out

    def detected_images(self, document_ids: list[str]) -> set[tuple[str, str]]:
        """(image id, image_key) pairs already run through the detector, objects found or not."""
        if not document_ids:
            return set()
        rows = self.table("components").search().where(
            f"document_id IN ({sql_list(document_ids)}) AND kind = 'image' AND detected = true"
        ).select(["id", "image_key"]).limit(None).to_arrow().to_pylist()
        return {(r["id"], r["image_key"]) for r in rows}

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

    def previous_fetches(self, urls: list[str] | None = None) -> dict[str, dict]:
        """The last ``fetches`` row of every URL, or of ``urls`` only (for conditional requests and
        sitemap lastmods); rows that recorded an error are left out.

        The crawl looks up every URL's validators, so each row is a dict (140 MB and 0.8 s at
        100,000 pages); the rows with an error are left out by the query, not after it."""
        tbl = self.table("fetches")
        if tbl.count_rows() == 0 or urls == []:
            return {}
        where = "error IS NULL"
        if urls is not None:
            where += f" AND id IN ({sql_list(['f' + digest(u) for u in urls])})"
        fields = ["url", "final_url", "etag", "last_modified", "raw_key", "content_type", "size", "fetched_at", "error"]
        data = tbl.search().where(where).select(fields).limit(None).to_arrow()
        columns = [data.column(f).to_pylist() for f in fields]
        return {values[0]: dict(zip(fields, values, strict=True)) for values in zip(*columns, strict=True)}

    def documents_by_url(self) -> dict[str, str]:
        """Requested URL → document id of every indexed document."""
        data = self.table("documents").search().select(["id", "url"]).limit(None).to_arrow()
        return dict(zip(data.column("url").to_pylist(), data.column("id").to_pylist(), strict=True))

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

    def write_snapshot(self, version: int, keep: int = 2, same_as: int | None = None) -> None:
        """Save the reader's in-memory view of manifest ``version``; keep the ``keep`` newest.

        ``same_as``: an earlier version with the same node and edge contents, whose snapshot is
        hard-linked instead of rebuilt (a refresh that changed nothing).
        """
        import shutil

        import laminae

        if self.files.local is None:
            return  # snapshots are memory-mapped files: local indexes only
        source = snapshot_dir(str(self.root), same_as) if same_as else None
        if source is not None and (source / "COMPLETE").exists():
            target = snapshot_dir(str(self.root), version)
            tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-snapshot-"))
            for item in source.iterdir():
                os.link(item, tmp / item.name)
            os.replace(tmp, target)
        else:
            laminae.open(str(self.root), version=version).save_snapshot()
        snapshots = sorted(p for p in (self.files.local / SNAPSHOT_DIR).iterdir() if p.name.isdigit())
        for old in snapshots[:-keep]:
            shutil.rmtree(old, ignore_errors=True)

    # -- manifests -----------------------------------------------------------------------------
    def latest_manifest_version(self) -> int:
        latest = self.files.read_text(f"{MANIFEST_DIR}/LATEST")
        return int(latest.strip()) if latest is not None else 0

    def publish(self, run_id: str, extra: dict) -> int:
        """Write the next manifest (every table's current version) and point ``LATEST`` at it."""
        version = self.latest_manifest_version() + 1
        meta = self.metadata() or {}
        manifest = {
            "version": version,
            "run_id": run_id,
            "created_at": datetime.now(UTC).isoformat(),
            "schema_version": SCHEMA_VERSION,
            "embedder": meta.get("embedder"),
            "serialization": meta.get("serialization", 1),
            "tables": {name: self.table(name).version for name in TABLES},
            **extra,
        }
        crash_point("publish")
        self.files.write_text(f"{MANIFEST_DIR}/{version:08d}.json", json.dumps(manifest, indent=2, default=str))
        self.files.write_text(f"{MANIFEST_DIR}/LATEST", str(version))
        return version
