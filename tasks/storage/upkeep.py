"""Whole-index upkeep of the vectors: pruning the embedding cache, moving every node to another
embedder or serialization.

``prune_embedding_cache`` reads the node tables' texts (and picture keys) and the ``embeddings``
cache's ids, and deletes the cache's vectors no current node was embedded from. ``reembed_index``
reads every node table and the raw store's pictures and rewrites each table whole with new
``search_text`` and ``vector``, adding the new vectors to ``embeddings`` and recording the model and
serialization in the index metadata. Both stream the tables in batches.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from laminae.schemas.pictures import raster_picture
from laminae.schemas.search_text import (
    EMBED_FIELD,
    SERIALIZATION,
    component_search_text,
    embed_text,
    subcomponent_search_text,
)
from laminae.schemas.tables import NODE_TABLES, table_schemas
from laminae.tasks.embed.embedders import (
    cache_key,
    cached_vectors,
    embed_pixels,
    embed_rows,
    pixel_key,
    split_by_modality,
)
from laminae.tasks.storage.index_store import IndexStore
from laminae.tasks.storage.rawstore import RawStore

TABLE_BATCH = 10_000  # rows a pass over a whole node table holds at once
CACHE_BATCH = 500_000  # cache ids read at once while pruning (about 40 bytes each)


def prune_embedding_cache(index_dir: str, model_id: str, image_mode: str, slack: float,
                          batch_rows: int = TABLE_BATCH) -> int:
    """Delete the embedding cache's vectors that no current node was embedded from, once the cache
    holds more than ``(1 + slack)`` × the node count; returns how many were deleted.

    Reads the node tables' texts (and image keys when images are embedded from pixels) in batches
    of ``batch_rows``, keeping of each cache key they were embedded under only its first 64 bits
    (a sorted numpy array: 8 bytes a node), then the cache's ids in batches; a cached id whose
    prefix no node has is stale, and is deleted by its row address. Two keys sharing a prefix
    (about one pair in 10^5 at 10M keys) can only keep a stale vector, never delete a live one."""
    store = IndexStore(index_dir)
    cache = store.table("embeddings")
    nodes = sum(store.table(name).count_rows() for name in NODE_TABLES)
    if cache.count_rows() <= (1 + slack) * nodes:
        return 0
    images: dict[str, str] = {}
    columns = ["kind", EMBED_FIELD, "search_text"]
    if image_mode == "pixels":
        pictures = _columns(store.table("components"), ["id", "kind", "image_key", "image_mime"])
        images = {row["id"]: row["image_key"] for row in pictures.iter_rows(named=True) if raster_picture(row)}
        columns += ["id", "parent_id", "image_key", "image_mime", "bbox"]
    live: list[np.ndarray] = []
    for name in NODE_TABLES:
        tbl = store.table(name)
        wanted = [c for c in columns if c in tbl.schema.names]
        for batch in tbl.search().select(wanted).limit(None).to_batches(batch_rows):
            rows = batch.to_pylist()
            keys = [cache_key(model_id, embed_text(row)) for row in rows]
            if image_mode == "pixels" and name != "documents":
                visual = [row for row in rows if row["kind"] in ("image", "object")]
                _, pixel_rows = split_by_modality(visual, image_mode, images)
                keys += [pixel_key(model_id, image_key, bbox) for _, image_key, bbox in pixel_rows]
            live.append(_key_prefixes(pl.Series(keys, dtype=pl.String)).to_numpy())
    known = np.unique(np.concatenate(live)) if live else np.zeros(0, np.uint64)
    del live
    stale: list[np.ndarray] = []
    for batch in cache.search().select(["id"]).with_row_id(True).limit(None).to_batches(CACHE_BATCH):
        prefixes = _key_prefixes(pl.from_arrow(batch.column("id")))
        values = prefixes.fill_null(0).to_numpy()
        is_live = np.zeros(len(values), bool)
        if len(known):
            is_live = (known[np.minimum(np.searchsorted(known, values), len(known) - 1)] == values
                       ) & prefixes.is_not_null().to_numpy()
        stale.append(batch.column("_rowid").to_numpy()[~is_live])
    gone = np.concatenate(stale) if stale else np.zeros(0, np.uint64)
    store.delete_rows("embeddings", gone)
    return len(gone)


def _key_prefixes(keys: pl.Series) -> pl.Series:
    """The first 64 bits of cache keys ("v" + hex digest, ``cache_key``) as UInt64; null for an id
    that is not such a key."""
    return keys.str.slice(1, 16).str.to_integer(base=16, dtype=pl.UInt64, strict=False)


# the columns of a component that its subcomponents' search texts and pixels need, as they are
# joined onto a subcomponent batch
PARENT_CONTEXT = {"id": "parent_id", "document_id": "_parent_document", "kind": "_parent_kind",
                  "section_path": "_parent_section_path", "caption": "_parent_caption",
                  "image_key": "_parent_image_key", "image_mime": "_parent_image_mime"}


def reembed_index(index_dir: str, embedder, batch_rows: int = TABLE_BATCH) -> int:
    """Move every node of the index into ``embedder``'s vector space and the current serialization
    (``laminae.schemas.search_text``); returns how many were embedded.

    Each node table is rewritten whole with the new search texts and vectors (a new table version:
    readers pinned to older manifests keep the old space) and the index metadata names the new
    model and serialization. The tables are streamed: ``batch_rows`` rows at a time are read,
    serialized, embedded (their new vectors added to the embedding cache) and handed to the
    table's writer, which commits the new version once the last batch is in; only the context a
    node's search text needs (document titles; components' kind, section path, caption and
    picture) is held whole, as columns. Moving to another model empties the embedding cache first;
    a move to another serialization under the same model embeds only texts the cache lacks.
    Re-running after a crash starts over and converges.
    """
    store = IndexStore(index_dir)
    raw = RawStore(index_dir)
    schemas = table_schemas(embedder.dim)
    same_model = ((store.metadata() or {}).get("embedder") or {}).get("model_id") == embedder.model_id
    titles = _columns(store.table("documents"), ["id", "title"]).unique("id", keep="last", maintain_order=True)
    parents = _columns(store.table("components"), list(PARENT_CONTEXT)).rename(PARENT_CONTEXT).unique(
        "parent_id", keep="last", maintain_order=True)
    # keys this run wrote to an emptied cache: only they can be found there, so other keys are not
    # looked up (a lookup scans the cache; about 100 bytes a node, against 1.5 kB for its vector)
    written: set[str] | None = None
    if not same_model:
        store.db.create_table("embeddings", schema=schemas["embeddings"], mode="overwrite")
        written = set()
    embedded = 0
    for name in NODE_TABLES:
        old = store.table(name)
        columns = [c for c in old.schema.names if c != "vector"]
        schema = schemas[name]

        def batches(old=old, columns=columns, name=name, schema=schema):
            nonlocal embedded
            for batch in old.search().select(columns).limit(None).to_batches(batch_rows):
                data = _with_search_text(name, pl.from_arrow(batch), titles, parents)
                vectors, new = _embed_stored(data, embedder, store, raw, written)
                store.append("embeddings", [{"id": k, "model_id": embedder.model_id, "vector": v}
                                            for k, v in new.items()])
                embedded += len(new)
                yield _stored_batch(data.drop([c for c in data.columns if c.startswith("_")]), vectors, schema)

        store.db.create_table(name, data=pa.RecordBatchReader.from_batches(schema, batches()), mode="overwrite")
    store.remember(embedder=embedder.info.as_metadata(), serialization=SERIALIZATION)
    return embedded


def _columns(tbl, columns: list[str]) -> pl.DataFrame:
    """These columns of a table, whole (nulls for a column it lacks: an older index)."""
    have = [c for c in columns if c in tbl.schema.names]
    data = pl.from_arrow(tbl.search().select(have).limit(None).to_arrow())
    return data.with_columns(pl.lit(None).alias(c) for c in columns if c not in have).select(columns)


def _with_search_text(name: str, data: pl.DataFrame, titles: pl.DataFrame, parents: pl.DataFrame) -> pl.DataFrame:
    """A batch of stored node rows with ``search_text`` set as ``serialize_document`` sets it (a
    node whose document is gone keeps the one it has), and for subcomponents their parent's kind
    and picture (``_parent_*``)."""
    if "search_text" not in data.columns:
        data = data.with_columns(pl.lit(None, pl.String).alias("search_text"))
    if name != "documents" and "search_terms" not in data.columns:
        data = data.with_columns(pl.lit(None, pl.List(pl.String)).alias("search_terms"))
    if name == "documents":
        return data.with_columns(pl.col("text").alias("search_text"))
    data = data.join(titles.rename({"id": "document_id", "title": "_title"}).with_columns(_document=True),
                     on="document_id", how="left", maintain_order="left")
    if name == "components":
        texts = [component_search_text({"section_path": path, "text": text, "search_terms": terms}, title)
                 if known else stored
                 for path, text, terms, title, known, stored in data.select(
                     "section_path", "text", "search_terms", "_title", "_document", "search_text").iter_rows()]
    else:
        data = data.join(parents, on="parent_id", how="left", maintain_order="left")
        texts = [(subcomponent_search_text({"kind": kind, "text": text, "search_terms": terms},
                                           {"kind": p_kind, "section_path": p_path, "caption": p_caption}, title)
                  if p_doc == doc else text) if known else stored
                 for kind, text, terms, doc, title, known, stored, p_doc, p_kind, p_path, p_caption in data.select(
                     "kind", "text", "search_terms", "document_id", "_title", "_document", "search_text",
                     "_parent_document", "_parent_kind", "_parent_section_path", "_parent_caption").iter_rows()]
    return data.with_columns(pl.Series("search_text", texts, pl.String))


def _embed_stored(data: pl.DataFrame, embedder, store: IndexStore, raw: RawStore,
                  written: set[str] | None) -> tuple[np.ndarray, dict]:
    """Vectors of a batch of node rows, in order, from the embedding cache or ``embedder``; and
    the new ones by cache key. ``written``: when not None, the only keys the cache can hold
    (extended with the new ones)."""
    fields = [c for c in ("id", "kind", "text", "search_text", "parent_id", "image_key", "image_mime", "bbox")
              if c in data.columns]
    rows = data.select(fields).to_dicts()
    images = {}
    if embedder.image_mode == "pixels" and "_parent_image_key" in data.columns:
        parents = data.filter(pl.col("kind") == "object").select(
            "parent_id", kind="_parent_kind", image_key="_parent_image_key", image_mime="_parent_image_mime")
        images = {row["parent_id"]: row["image_key"] for row in parents.iter_rows(named=True) if raster_picture(row)}
    text_rows, pixel_rows = split_by_modality(rows, embedder.image_mode, images)
    keys = ([cache_key(embedder.model_id, embed_text(r)) for r in text_rows]
            + [pixel_key(embedder.model_id, key, bbox) for _, key, bbox in pixel_rows])
    known = cached_vectors(store.table("embeddings"), keys if written is None else [k for k in keys if k in written])
    new = embed_rows(text_rows, embedder, known)
    new.update(embed_pixels(pixel_rows, embedder, known, raw.get))
    if written is not None:
        written.update(new)
    vectors = np.stack([r["vector"] for r in rows]) if rows else np.zeros((0, embedder.dim), np.float32)
    return vectors.astype(np.float32, copy=False), new


def _stored_batch(data: pl.DataFrame, vectors: np.ndarray, schema: pa.Schema) -> pa.RecordBatch:
    """A batch in the table's schema: its columns, the new vectors, nulls for a column it lacks."""
    table = data.to_arrow()
    arrays = []
    for f in schema:
        if f.name == "vector":
            arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()),
                                                            vectors.shape[1] if vectors.ndim == 2 else 0))
        elif f.name in table.column_names:
            arrays.append(table.column(f.name).combine_chunks().cast(f.type))
        else:
            arrays.append(pa.nulls(table.num_rows, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
