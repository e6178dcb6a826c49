"""In-memory view of an index for scoring: per-layer vectors, parent pointers and link adjacency.

Reads the node tables (``id``, ``document_id``, ``parent_id``, ``kind``, ``text``, ``vector``)
and the ``links_to`` edges at one pinned version, or a snapshot of this view that the builder
saved for that version (``_snapshots/NNNNNNNN/``: numpy arrays memory-mapped, Arrow IPC files;
since issue 19 also each layer's sign codes, ``codes{i}.npy``, see ``laminae.vectors``, and the
components' copies, ``copies1.npy``, see ``laminae.copies``), which loads
in a fraction of the time (its files named in ``laminae.snapshots``). ``Graph.save`` and
``write_snapshot`` write such a snapshot. Rows of every layer are grouped by document (and
subcomponents by parent), so each group is one contiguous slice. Navigation (``children``,
``parent``, ``document_of``, ``neighbors``) is lookups in these arrays. Writes only snapshots.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from laminae.copies import COPIES_FILE
from laminae.errors import check_direction
from laminae.snapshot_writer import SnapshotWriter
from laminae.snapshots import COMPONENT_LINKS, LINKS, layer_file, snapshot_problem
from laminae.vectors import RowFile, code_prefix, layer_is_compact, sign_codes, spans


class ArrowStrings:
    """A string column read like a numpy object array of str, Python strings made only for the rows
    asked (an int gives a str, a slice or an array of rows an object array): a snapshot's 10M
    subcomponent ids open without building 10M Python strings."""

    def __init__(self, column: pa.ChunkedArray | pa.Array) -> None:
        # one chunk: Arrow's take on a chunked array concatenates the chunks at every call
        # (12 ms a call at 1M ids, 5 chunks)
        self.column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column

    def __len__(self) -> int:
        return len(self.column)

    def __getitem__(self, key):
        if isinstance(key, int | np.integer):
            return self.column[int(key)].as_py()
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self.column))
            if step == 1:
                return self.column.slice(start, max(stop - start, 0)).to_numpy(zero_copy_only=False)
            key = np.arange(start, stop, step)
        rows = np.asarray(key)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        if len(rows) == 0:
            return np.zeros(0, dtype=object)
        return self.column.take(pa.array(rows.astype(np.int64, copy=False))).to_numpy(zero_copy_only=False)

    def __iter__(self):
        return iter(self.column.to_pylist())

    def tolist(self) -> list[str]:
        return self.column.to_pylist()


@dataclass
class Layer:
    """One node table: ids, kinds, texts, vectors and pointers, sorted by document (then parent)."""

    ids: np.ndarray | ArrowStrings  # object array of str (ArrowStrings when loaded from a snapshot)
    kinds: np.ndarray
    text: pa.Array  # what a model reads, kept as Arrow (no Python strings until asked)
    vectors: np.ndarray | RowFile  # float32 (n, dim), unit length (RowFile: a compact layer's, read by row)
    doc: np.ndarray  # int32 index into the documents layer
    parent: np.ndarray  # int32 index into the layer above (documents for components)
    starts: np.ndarray  # per document: first row (len = n_documents + 1)
    parent_starts: np.ndarray | None = None  # per parent row: first row (rows are grouped by parent)
    codes: np.ndarray | None = None  # uint64 (n, words) sign codes (laminae.vectors), memory-mapped
    compact: bool = False  # moves scan the codes and re-score a shortlist (Graph.use_search)
    code_prefix: np.ndarray | None = None  # the codes' first words, contiguous in memory (first_words)
    _position: dict[str, int] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def position(self) -> dict[str, int]:
        """Row of each id (built on first use, once: threads asking meanwhile wait for it)."""
        position = self._position
        if position is None:
            with self._lock:
                if self._position is None:
                    self._position = {s: i for i, s in enumerate(self.ids)}
                position = self._position
        return position

    def first_words(self) -> np.ndarray | None:
        """The codes' first words for a compact scan's first pass (``laminae.vectors.code_prefix``),
        read on the first scan rather than at open (about a second at 10M rows), once."""
        prefix = self.code_prefix
        if self.compact and prefix is None:
            with self._lock:
                if self.code_prefix is None:
                    self.code_prefix = code_prefix(self.codes)
                prefix = self.code_prefix
        return prefix

    def rows_of_documents(self, docs: np.ndarray) -> np.ndarray:
        """Row indices of every node of these documents (in the order of ``docs``)."""
        docs = np.asarray(docs, dtype=np.int64)
        return spans(self.starts[docs], self.starts[docs + 1] - self.starts[docs])


SCAN_BLOCK = 2048


def similarities(vectors: np.ndarray, queries: np.ndarray, block: int = SCAN_BLOCK) -> np.ndarray:
    """Dot products of every row of ``vectors`` with each query, as (rows × queries).

    One matrix-vector product per query over blocks of ``block`` rows: each block is read from
    memory once and stays in cache for the other queries. OpenBLAS's matrix product for a handful
    of queries runs at about a third of memory bandwidth; this runs near it (bench/reader.py).
    """
    queries = np.asarray(queries, dtype=np.float32)
    n = len(vectors)
    out = np.empty((len(queries), n), dtype=np.float32)
    if len(queries) == 1:
        np.matmul(vectors, queries[0], out=out[0])
        return out.T
    for start in range(0, n, block):
        chunk = vectors[start:start + block]
        for j, q in enumerate(queries):
            np.matmul(chunk, q, out=out[j, start:start + block])
    return out.T


def group_max(scores: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Max of ``scores[starts[i]:starts[i+1]]`` per group i (-inf for an empty group).

    ``scores`` may be 2-d (rows × queries); groups are contiguous.
    """
    n = len(starts) - 1
    out = np.full((n, *scores.shape[1:]), -np.inf, dtype=np.float32)
    nonempty = starts[:-1] < starts[1:]
    if scores.shape[0] and nonempty.any():
        out[nonempty] = np.maximum.reduceat(scores, starts[:-1][nonempty], axis=0)
    return out


def _index_in(values, universe) -> np.ndarray:
    """Position of each value in ``universe`` (-1 when absent), vectorized."""
    if len(values) == 0:
        return np.zeros(0, dtype=np.int32)
    return pc.fill_null(pc.index_in(values, value_set=universe), -1).to_numpy(
        zero_copy_only=False).astype(np.int32)


def _vectors(table: pa.Table, dim: int) -> np.ndarray:
    """The vector column as one float32 (n, dim) array, filled chunk by chunk (one copy)."""
    if "vector" not in table.column_names or table.num_rows == 0:
        return np.zeros((0, dim), dtype=np.float32)
    out = np.empty((table.num_rows, dim), dtype=np.float32)
    pos = 0
    for chunk in table.column("vector").chunks:
        n = len(chunk)
        if n:
            out[pos : pos + n] = chunk.flatten().to_numpy().reshape(n, dim)
            pos += n
    return out


def _read(tbl, columns: list[str]) -> pa.Table:
    if tbl.count_rows() == 0:
        return pa.table({c: pa.array([], pa.string()) for c in columns if c != "vector"})
    return tbl.search().select(columns).limit(None).to_arrow()


def _reordered(data: pa.Table, order: np.ndarray, dim: int) -> tuple[pa.Table, np.ndarray]:
    """The table's small columns and its vectors in ``order`` (no copy when it is the identity)."""
    vectors = _vectors(data, dim)
    small = data.drop_columns(["vector"]) if "vector" in data.column_names else data
    if small.num_rows == 0 or np.array_equal(order, np.arange(len(order))):
        return small, vectors
    return small.take(order), vectors[order]


class Graph:
    """Layers 0–2 in memory plus document → document link adjacency."""

    def __init__(self, tables: dict, dim: int) -> None:
        docs_raw = _read(tables["documents"], ["id", "kind", "title", "url", "text", "vector"])
        comps_raw = _read(tables["components"], ["id", "document_id", "parent_id", "kind", "text", "vector"])
        subs_raw = _read(tables["subcomponents"], ["id", "document_id", "parent_id", "kind", "text", "vector"])
        n_docs = docs_raw.num_rows
        doc_order, comp_order, sub_order = _orders(docs_raw.column("id"), comps_raw.column("document_id"),
                                                   comps_raw.column("id"), subs_raw.column("parent_id"))
        docs, doc_vectors = _reordered(docs_raw, doc_order, dim)
        doc_ids = np.array(docs.column("id").to_pylist(), dtype=object)
        self.doc_position = {d: i for i, d in enumerate(doc_ids)}
        self.titles = docs.column("title").combine_chunks() if n_docs else pa.array([], pa.string())
        self.urls = docs.column("url").combine_chunks() if n_docs else pa.array([], pa.string())
        self.layers: list[Layer] = [Layer(
            ids=doc_ids, kinds=np.array(docs.column("kind").to_pylist(), dtype=object),
            text=docs.column("text").combine_chunks() if n_docs else pa.array([], pa.string()),
            vectors=doc_vectors,
            doc=np.arange(n_docs, dtype=np.int32), parent=np.full(n_docs, -1, np.int32),
            starts=np.arange(n_docs + 1, dtype=np.int64), _position=self.doc_position,
        )]
        comps, comp_vectors = _reordered(comps_raw, comp_order, dim)
        self.layers.append(self._layer(comps, comp_vectors, docs.column("id"), docs.column("id"), n_docs))
        comps_ids = comps.column("id")
        subs, sub_vectors = _reordered(subs_raw, sub_order, dim)
        self.layers.append(self._layer(subs, sub_vectors, docs.column("id"), comps_ids, n_docs))
        sub_layer = self.layers[2]
        sub_layer.parent_starts = np.searchsorted(
            np.where(sub_layer.parent >= 0, sub_layer.parent, len(comps_ids)), np.arange(len(comps_ids) + 1)
        ).astype(np.int64)
        self._adjacency(*_link_pairs(tables["edges"], docs.column("id"), comps_ids, subs.column("id"),
                                     sub_layer.parent))
        self.saved_copies: np.ndarray | None = None  # copies1.npy of a snapshot (laminae.copies.of_graph)

    def _adjacency(self, links: np.ndarray, component_links: np.ndarray) -> None:
        """Link dictionaries from (document → document) and (component → document) row pairs."""
        self.out_links: dict[int, set[int]] = {}
        self.in_links: dict[int, set[int]] = {}
        # links from one component (or its sentences/rows) to a document, by component row
        self.component_links: dict[int, set[int]] = {}
        for s, d in np.asarray(links).reshape(-1, 2).tolist():
            self.out_links.setdefault(s, set()).add(d)
            self.in_links.setdefault(d, set()).add(s)
        for c, d in np.asarray(component_links).reshape(-1, 2).tolist():
            self.component_links.setdefault(c, set()).add(d)

    @staticmethod
    def _layer(data: pa.Table, vectors: np.ndarray, doc_ids, parent_ids, n_docs: int) -> Layer:
        ids = np.array(data.column("id").to_pylist(), dtype=object)
        doc = _index_in(data.column("document_id"), doc_ids)
        grouped = np.where(doc >= 0, doc, n_docs)
        return Layer(
            ids=ids, kinds=np.array(data.column("kind").to_pylist(), dtype=object),
            text=data.column("text").combine_chunks() if data.num_rows else pa.array([], pa.string()),
            vectors=vectors, doc=doc, parent=_index_in(data.column("parent_id"), parent_ids),
            starts=np.searchsorted(grouped, np.arange(n_docs + 1)).astype(np.int64),
        )

    def use_search(self, search: str) -> None:
        """Pick, per layer, exact scans of the vectors or code scans with exact re-scoring
        (``laminae.vectors.layer_is_compact``); ``compact`` computes codes a layer lacks (a
        snapshot written before codes existed, a view loaded from the tables), reading its
        vectors once."""
        for lay in self.layers:
            if search == "compact" and lay.codes is None:
                lay.codes = _codes_of(lay.vectors)
            lay.compact = layer_is_compact(lay.vectors, lay.codes, search)
            if lay.compact and isinstance(lay.vectors, np.memmap):  # read rows, never map them
                lay.vectors = RowFile.of(lay.vectors)
            lay.code_prefix = None

    # -- navigation ----------------------------------------------------------------------------
    def children(self, node_id: str) -> list[str]:
        """Ids of a node's children (components of a document, subcomponents of a component)."""
        if node_id in self.doc_position:
            d = self.doc_position[node_id]
            comps = self.layers[1]
            return list(comps.ids[comps.starts[d]:comps.starts[d + 1]])
        if node_id in self.layers[1].position:
            row = self.layers[1].position[node_id]
            subs = self.layers[2]
            d = self.layers[1].doc[row]
            span = np.arange(subs.starts[d], subs.starts[d + 1])
            return list(subs.ids[span[subs.parent[span] == row]])
        return []

    def parent(self, node_id: str) -> str | None:
        """Id of a component's document or a subcomponent's component (None for a document or an unknown id)."""
        for layer in (1, 2):
            row = self.layers[layer].position.get(node_id)
            if row is not None:
                return str(self.layers[layer - 1].ids[self.layers[layer].parent[row]])
        return None

    def document_of(self, node_id: str) -> str | None:
        """Id of the document a node belongs to (itself for a document; None for an unknown id)."""
        if node_id in self.doc_position:
            return node_id
        for layer in (1, 2):
            row = self.layers[layer].position.get(node_id)
            if row is not None:
                return str(self.layers[0].ids[self.layers[layer].doc[row]])
        return None

    def neighbors(self, document_ids: Sequence[str], direction: str = "out") -> list[str]:
        """Documents linked from (``out``), linking to (``in``) or either (``both``) these documents."""
        check_direction(direction)
        out: set[int] = set()
        for doc in document_ids:
            d = self.doc_position.get(doc)
            if d is not None:
                out |= self.doc_links(d, direction)
        return sorted(str(self.layers[0].ids[d]) for d in out)

    def doc_links(self, doc: int, direction: str) -> set[int]:
        """Document rows linked from (``out``), linking to (``in``) or either (``both``) document row ``doc``."""
        return ((self.out_links.get(doc, set()) if direction != "in" else set())
                | (self.in_links.get(doc, set()) if direction != "out" else set()))

    # -- snapshots -----------------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write this view to ``directory`` (replaced atomically; ``COMPLETE`` marks a whole one)."""
        dim = self.layers[0].vectors.shape[1]
        writer = SnapshotWriter(directory, tuple(len(lay.ids) for lay in self.layers), dim)
        try:
            for i, lay in enumerate(self.layers):
                extra = {"title": self.titles, "url": self.urls} if i == 0 else {}
                writer.add(i, ids=lay.ids.tolist(), kinds=lay.kinds.tolist(), text=lay.text,
                           vectors=lay.vectors, doc=lay.doc, parent=lay.parent, **extra)
        except BaseException:
            writer.abort()
            raise
        writer.close([(s, d) for s, ds in self.out_links.items() for d in ds],
                     [(c, d) for c, ds in self.component_links.items() for d in ds])

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> Graph:
        """Read a snapshot written by ``save`` (vectors memory-mapped, read-only)."""
        src = Path(directory)
        graph = cls.__new__(cls)
        graph.layers = []
        for i in range(3):
            with pa.memory_map(str(src / layer_file("nodes", i))) as source:
                table = pa.ipc.open_file(source).read_all()
            ids = ArrowStrings(table.column("id"))
            parent_starts = src / layer_file("parent_starts", i)
            codes = src / layer_file("codes", i)  # absent in snapshots written before issue 19
            layer = Layer(
                ids=ids, kinds=_strings(table.column("kind")),
                text=table.column("text").combine_chunks(),
                vectors=np.load(src / layer_file("vectors", i), mmap_mode="r"),
                doc=np.load(src / layer_file("doc", i)), parent=np.load(src / layer_file("parent", i)),
                starts=np.load(src / layer_file("starts", i)),
                parent_starts=np.load(parent_starts) if parent_starts.exists() else None,
                codes=np.load(codes, mmap_mode="r") if codes.exists() else None,
            )
            if i == 0:
                graph.titles = table.column("title").combine_chunks()
                graph.urls = table.column("url").combine_chunks()
                graph.doc_position = layer.position
            graph.layers.append(layer)
        graph._adjacency(np.load(src / LINKS), np.load(src / COMPONENT_LINKS))
        graph.saved_copies = np.load(src / COPIES_FILE) if (src / COPIES_FILE).exists() else None  # before issue 45
        return graph


TAKE_ROWS = 65_536  # rows a streamed snapshot reads from a table at once
RUN_ROWS = 32  # ... adjacent rows read as a range of a scan, not taken one by one


def write_snapshot(tables: dict, dim: int, directory: str | os.PathLike[str], batch_rows: int = TAKE_ROWS,
                   keep_whole: bool = False) -> None:
    """Write the snapshot ``Graph(tables, dim).save(directory)`` writes, without a layer's vectors
    or texts in memory: the row order and pointers come from the id columns (``id``,
    ``document_id``, ``parent_id``: ``_orders``, as for ``Graph``), then every layer is read in that
    order, ``batch_rows`` rows at a time (``_take``: runs of adjacent rows as ranges of a scan),
    and streamed through ``SnapshotWriter``. What a build holds at once is the ids of the largest
    layer; at 10M subcomponents the vectors alone would take 15 GB. ``keep_whole``: a whole
    snapshot (``snapshot_problem``) found at ``directory`` when this one is done is kept, this one
    dropped (readers rebuilding a damaged snapshot at once)."""
    docs = _read(tables["documents"], ["id"])
    comps = _read(tables["components"], ["id", "document_id", "parent_id"])
    subs = _read(tables["subcomponents"], ["id", "document_id", "parent_id"])
    n_docs = docs.num_rows
    doc_order, comp_order, sub_order = _orders(docs.column("id"), comps.column("document_id"), comps.column("id"),
                                               subs.column("parent_id"))
    doc_ids = docs.column("id").take(doc_order) if n_docs else docs.column("id")
    comps = comps.take(comp_order) if comps.num_rows else comps
    comp_ids = comps.column("id")
    subs = subs.take(sub_order) if subs.num_rows else subs
    pointers = [(np.arange(n_docs, dtype=np.int32), np.full(n_docs, -1, np.int32)),
                (_index_in(comps.column("document_id"), doc_ids), _index_in(comps.column("parent_id"), doc_ids)),
                (_index_in(subs.column("document_id"), doc_ids), _index_in(subs.column("parent_id"), comp_ids))]
    writer = SnapshotWriter(directory, (n_docs, comps.num_rows, subs.num_rows), dim)
    try:
        for layer, (name, order) in enumerate((("documents", doc_order), ("components", comp_order),
                                               ("subcomponents", sub_order))):
            columns = ["id", "kind", "text", "vector", *(("title", "url") if layer == 0 else ())]
            doc, parent = pointers[layer]
            for start in range(0, len(order), batch_rows):
                data = _take(tables[name], order[start:start + batch_rows], columns)
                extra = {"title": data.column("title"), "url": data.column("url")} if layer == 0 else {}
                writer.add(layer, ids=data.column("id"), kinds=data.column("kind"), text=data.column("text"),
                           vectors=_vectors(data, dim), doc=doc[start:start + batch_rows],
                           parent=parent[start:start + batch_rows], **extra)
        links, component_links = _link_pairs(tables["edges"], doc_ids, comp_ids, subs.column("id"),
                                              pointers[2][1])
    except BaseException:
        writer.abort()
        raise
    writer.close(links, component_links, (lambda path: snapshot_problem(path, dim) is None) if keep_whole else None)


def _orders(doc_ids, comp_documents, comp_ids, sub_parents) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The view's row order of each layer, from the id columns in storage order: documents in the
    order their components first appear (then those without any), components grouped by document
    and subcomponents by parent, each keeping its storage order within a group (so rows already
    stored that way need no reordering); rows whose document or parent is unknown come last."""
    n_docs = len(doc_ids)
    comp_doc = _index_in(comp_documents, doc_ids)
    known = comp_doc[comp_doc >= 0]
    uniq, first = np.unique(known, return_index=True)
    doc_order = np.concatenate([uniq[np.argsort(first)], np.setdiff1d(np.arange(n_docs), uniq)]).astype(np.int64)
    rank = np.empty(n_docs, dtype=np.int64)
    rank[doc_order] = np.arange(n_docs)
    comp_order = np.argsort(np.where(comp_doc >= 0, rank[np.maximum(comp_doc, 0)], n_docs), kind="stable")
    ordered_comps = comp_ids.take(comp_order) if len(comp_ids) else comp_ids
    sub_parent = _index_in(sub_parents, ordered_comps).astype(np.int64)
    sub_parent[sub_parent < 0] = len(comp_ids)
    return doc_order, comp_order, np.argsort(sub_parent, kind="stable")


def _take(tbl, rows: np.ndarray, columns: list[str]) -> pa.Table:
    """These rows (offsets in the table's version) of a LanceDB table, in the order given. Runs of
    ``RUN_ROWS`` or more adjacent offsets are read as ranges of a scan (offset and limit), the
    rest with ``take_offsets``: a take from a fragment of 200,000 rows written at once took 15-37 s
    for 65,536 rows at 10M subcomponents, the same rows as a range 0.3 s."""
    ordered = np.sort(rows)
    breaks = np.flatnonzero(np.diff(ordered) != 1) + 1
    parts: list[pa.Table] = []
    offsets: list[np.ndarray] = []
    scattered: list[np.ndarray] = []
    for lo, hi in zip(np.concatenate([[0], breaks]).tolist(), np.concatenate([breaks, [len(ordered)]]).tolist(),
                      strict=True):
        if hi - lo >= RUN_ROWS:
            first = int(ordered[lo])
            parts.append(tbl.search().select(columns).offset(first).limit(hi - lo).to_arrow())
            offsets.append(np.arange(first, first + hi - lo))
        else:
            scattered.append(ordered[lo:hi])
    if scattered:
        wanted = np.concatenate(scattered)
        got = tbl.take_offsets(wanted.tolist()).select([*columns, "_rowoffset"]).to_arrow()
        offsets.append(got.column("_rowoffset").to_numpy())
        parts.append(got.drop_columns(["_rowoffset"]))
    data = pa.concat_tables(parts) if parts else tbl.search().select(columns).limit(0).to_arrow()
    found = np.concatenate(offsets) if offsets else np.zeros(0, np.int64)
    order = np.argsort(found, kind="stable")
    if not np.array_equal(found[order], ordered):
        raise RuntimeError(f"{tbl.name}: read {len(found)} rows for {len(rows)} offsets")
    back = np.empty(len(rows), dtype=np.int64)
    back[np.argsort(rows, kind="stable")] = np.arange(len(rows))
    return data.take(order[back])


def _link_pairs(edges, doc_ids: pa.Array, comp_ids: pa.Array, sub_ids: pa.Array,
                sub_parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(document → document, component → document) row pairs of the resolved ``links_to`` edges
    (a subcomponent's link counts for its component; a document's links to itself are left out)."""
    empty = np.zeros((0, 2), dtype=np.int64)
    if not edges.count_rows():
        return empty, empty
    links = edges.search().where("kind = 'links_to' AND resolved = true").select(
        ["src_id", "src_layer", "dst_id", "document_id"]).limit(None).to_arrow()
    if links.num_rows == 0:
        return empty, empty
    owner = _index_in(links.column("document_id"), doc_ids)
    dst = _index_in(links.column("dst_id"), doc_ids)
    keep = (owner >= 0) & (dst >= 0) & (owner != dst)
    comp = _index_in(links.column("src_id"), comp_ids).astype(np.int64)
    from_subs = links.column("src_layer").to_numpy(zero_copy_only=False) != 1
    comp[from_subs] = -1
    if from_subs.any():  # the few subcomponents that hold links, found without hashing every id
        sources = links.column("src_id").combine_chunks()
        holders = np.flatnonzero(pc.is_in(sub_ids, value_set=sources).to_numpy(zero_copy_only=False))
        row = _index_in(sources, sub_ids.take(holders))
        found = from_subs & (row >= 0)
        comp[found] = sub_parent[holders[row[found]]]
    pairs = np.unique(np.stack([owner, dst], axis=1)[keep].astype(np.int64), axis=0)
    with_comp = keep & (comp >= 0)
    component_pairs = np.unique(np.stack([comp, dst], axis=1)[with_comp].astype(np.int64), axis=0)
    return pairs.reshape(-1, 2), component_pairs.reshape(-1, 2)


def _strings(column: pa.ChunkedArray) -> np.ndarray:
    """A column of few distinct strings (kinds) as an object array sharing one str per value."""
    if len(column) == 0:
        return np.zeros(0, dtype=object)
    encoded = pc.dictionary_encode(column).combine_chunks()
    values = np.array(encoded.dictionary.to_pylist(), dtype=object)
    return values[encoded.indices.to_numpy(zero_copy_only=False)]


def _codes_of(vectors: np.ndarray, block: int = 65_536) -> np.ndarray:
    """Sign codes of a layer's vectors computed in memory, block by block."""
    if len(vectors) == 0:
        return sign_codes(vectors)
    return np.concatenate([sign_codes(vectors[s:s + block]) for s in range(0, len(vectors), block)])
