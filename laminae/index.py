"""Open a laminae index pinned to one published manifest, and the agent's moves over it.

Reads ``<index>/_manifests/`` (the build manifests), the LanceDB tables at the versions the
manifest names (so every table is seen as one build left it), the reader snapshot of that version
(``_snapshots/NNNNNNNN/``, ``laminae.graph``) and ``raw/`` for image bytes. Writes nothing, except
a damaged snapshot, rebuilt from the tables where the index is writable, and the snapshot cache of
an index on object storage. Every damaged or missing file on this path is an ``IndexOpenError``
naming the file and the fix. An ``Index`` may be shared by threads. Operations: get/children/parent/document_of/neighbors, ``search`` (dense, full-text,
hybrid with reciprocal rank fusion), FiF's document- and component-level traversers, LILaC's
late-interaction beam search, and ``frame``: a table as a polars LazyFrame (polars imported there only).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa

from laminae import fusion, snapshots
from laminae.graph import Graph, group_max, similarities, write_snapshot
from laminae.schemas.pictures import crop_png
from laminae.schemas.sql import sql_list
from laminae.schemas.storage import (
    MANIFEST_DIR,
    IndexFiles,
    StorageError,
    is_remote,
    raw_path,
    snapshot_dir,
    storage_options,
)
from laminae.schemas.tables import NODE_TABLES, SCHEMA_VERSION
from laminae.snapshots import snapshot_problem
from laminae.stats import table_stats
from laminae.vectors import SEARCH_MODES, rescored_rows, shortlist_groups, spans

log = logging.getLogger(__name__)

LAYER_NAMES = {0: "documents", 1: "components", 2: "subcomponents",
               "documents": "documents", "components": "components", "subcomponents": "subcomponents"}
RRF_K = 60
FUSION_DEPTH = 100  # candidates each ranked list contributes to a fusion
COVERAGE_DEPTH = 1000  # at least this many components are read per question term (a tenth of them when more)
FRAME_BATCH = 65_536  # rows per batch a frame reads
TERM = re.compile(r"\w+")
MAX_QUERY_TERMS = 32  # distinct terms of a query the full-text part searches (query_terms)
# characters of a query string that are embedded: the longest benchmark question has 311, and a
# 2,000-character query embedded whole (256 tokens) cost 8-13x a question's embedding, so that it
# alone took a search to 4x a question's time; the rest of a longer query still reaches the
# full-text part (bounded by MAX_QUERY_TERMS)
MAX_EMBEDDED_QUERY_CHARS = 400
# The English stop words the full-text index drops (LanceDB's tokenizer, as
# IndexStore.build_text_indexes configures it): a query for one of them finds nothing, so it is
# never sent. tests/unit/test_damaged_index.py checks each against a real index.
_STOP_WORDS = """
a about after again against ain all am an and are aren as at be been being below between both but by can
couldn d did didn do doesn doing don down each few for from further had hadn has hasn have haven having he
her here hers herself him himself his how i if in into is isn it its itself just ll m ma me mightn more
most mustn my myself needn no nor not now o of off on or other our ours out over own re s same shan she
should shouldn so some such t than that the their theirs them then there these they this those through to
too under until up ve was wasn we were weren what when where which while who whom will with won wouldn y
you your yours yourself
"""
STOP_WORDS = frozenset(_STOP_WORDS.split())
MAX_TERM_CHARS = 39  # the full-text index drops longer tokens (its max_token_length, 40, is exclusive)
MODES = ("auto", "dense", "fts", "hybrid")
RANKINGS = ("learned", "rrf")  # how retrieve orders what its rankings found
VIEW_TABLES = (*NODE_TABLES, "edges")  # what the in-memory view (and its snapshot) is made of
# every table the reader reads (stats adds errors); fetches, runs and the embedding cache are the
# builder's, and the cleanup keeps only the newest version of the cache
READ_TABLES = (*VIEW_TABLES, "errors")
BOXED_KINDS = ("object", "text")  # subcomponents that are a box of their picture: get() cuts their crop


@dataclass
class Hit:
    """A scored node: its id, score and enough content to show a model."""

    id: str
    score: float
    layer: int
    kind: str
    document_id: str
    text: str | None = None
    extra: dict = field(default_factory=dict)


@dataclass
class BeamResult:
    """LILaC beam search: the best component pairs (edges) and the components they rank."""

    edges: list[tuple[str, str, float]]
    components: list[Hit]

class IndexOpenError(RuntimeError):
    """The index cannot be opened or read: a file of it is missing or damaged, or a table version
    its manifest names is gone; the message names the file and says what to do."""


class QueryModelError(RuntimeError):
    """A string query, and the index's embedder cannot be loaded here (the ml extra is missing)."""


class ReaderArgumentError(ValueError):
    """An argument a reader move cannot use (a layer, mode, granularity, query vector); the message
    says what is allowed."""


class UnknownIdError(ReaderArgumentError, KeyError):
    """An id that is not a node of this index version where one is required (an anchor)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Index:
    """A read-only view of one index at one manifest version."""

    def __init__(self, root: str, manifest: dict, embed: Callable[[str], np.ndarray] | None = None,
                 search: str = "auto") -> None:
        self.root = root
        self.search_mode = _check_search(search)
        self.manifest = manifest
        self.version: int = manifest["version"]
        self._db = lancedb.connect(root, storage_options=storage_options(root))
        self._files = IndexFiles(root)
        self._tables: dict[str, object] = {}
        self._async_tables: dict[str, object] = {}
        self._fts_columns: dict[int, str] = {}
        self._graph: Graph | None = None
        self._embed = embed
        # Threads may share an Index: what is built on first use is built once, under these locks
        self._tables_lock = threading.Lock()  # table handles (opened and checked out once)
        self._graph_lock = threading.Lock()  # the view, held for as long as it loads
        self._embed_lock = threading.Lock()  # the query model: loaded once, called by one thread at a time

    @property
    def embedder(self) -> dict:
        """The embedder's ``model_id``, ``dim`` and ``image_mode`` (how images were embedded)."""
        return dict(self.manifest.get("embedder") or {})

    def table(self, name: str):
        """The LanceDB table ``name`` checked out at this manifest's version (``IndexOpenError`` when
        the table or that version of it is gone)."""
        tbl = self._tables.get(name)
        if tbl is None:
            if name not in self.manifest["tables"]:
                raise KeyError(f"unknown table {name!r}; tables are {', '.join(self.manifest['tables'])}")
            with self._tables_lock:
                if name not in self._tables:
                    self._tables[name] = self._checked_out(name)
                tbl = self._tables[name]
        return tbl

    def _checked_out(self, name: str):
        version = self.manifest["tables"][name]
        try:
            tbl = self._db.open_table(name)
        except (ValueError, FileNotFoundError, OSError, RuntimeError) as exc:
            raise IndexOpenError(
                f"{self.root}: table {name!r} that manifest {self.version} names cannot be opened "
                f"({_first_line(exc)}): the "
                f"index is damaged; rebuild it with `laminae build`") from None
        try:
            tbl.checkout(version)
        except (ValueError, OSError, RuntimeError) as exc:
            raise IndexOpenError(self._gone_message(name, version, exc)) from None
        return tbl

    def _gone_message(self, name: str, version: int, exc: Exception) -> str:
        return (f"{self.root}: version {version} of table {name!r}, which manifest {self.version} names, no longer "
                f"exists ({_first_line(exc)}): it was cleaned up after newer manifests were published. Open the "
                "latest manifest (laminae.open without version=, or the MCP server's use_latest tool), or keep "
                "more manifests' table versions (LAMINAE_KEEP_MANIFESTS, `laminae compact --keep N`)")

    def verify(self) -> None:
        """Check what ``laminae.open`` leaves for later because it costs a round trip per table: that
        the version of every table the reader reads (``READ_TABLES``) that the manifest names can
        still be checked out (a manifest older than the kept ones loses its versions to a
        cleanup). ``IndexOpenError`` naming the table and the fix otherwise. The MCP server calls
        this at start; a reader that skips it gets the same error from its first read of such a
        table."""
        for name in READ_TABLES:
            if name in self.manifest["tables"]:
                self.table(name)

    @contextmanager
    def _reading(self, *names: str):
        """Reads of tables ``names``: a LanceDB error there becomes an ``IndexOpenError`` when a
        version this manifest names has been cleaned up since the table was checked out (its
        files are gone); any other error passes unchanged."""
        try:
            yield
        except IndexOpenError:
            raise
        except (OSError, RuntimeError, ValueError) as exc:
            for name in names:
                version = self.manifest["tables"].get(name)
                try:
                    self._db.open_table(name).checkout(version)
                except (ValueError, OSError, RuntimeError):
                    raise IndexOpenError(self._gone_message(name, version, exc)) from None
            raise

    def frame(self, layer: int | str = 1, vectors: bool = False, batch_size: int = FRAME_BATCH):
        """A polars ``LazyFrame`` over one table at this manifest's version, for exploring an index
        in a notebook: layer 0, 1 or 2 (or ``documents``, ``components``, ``subcomponents``) or
        ``edges``. Every column of the table but ``vector`` (``vectors=True`` adds it, as
        ``Array(Float32, dim)``). Nothing is read until the frame is collected; then only the
        columns the query uses are read, in batches of ``batch_size`` rows, filters applied batch by
        batch (``collect(engine="streaming")`` keeps no more than a few batches in memory). Needs
        polars (``pip install 'laminae[frames]'``)."""
        if layer != "edges":
            layer = NODE_TABLES[self._frame_layer(layer)]
        try:
            import polars as pl
            from polars.io.plugins import register_io_source
        except ImportError as exc:
            raise ImportError(f"Index.frame needs polars: pip install 'laminae[frames]' (or polars>=2.1) ({exc})") \
                from None
        tbl = self.table(layer)
        arrow = tbl.schema
        if not vectors and "vector" in arrow.names:
            arrow = arrow.remove(arrow.get_field_index("vector"))
        schema = pl.from_arrow(arrow.empty_table()).schema

        def scan(with_columns: list[str] | None, predicate, n_rows: int | None, hint: int | None):
            wanted = list(schema) if with_columns is None else with_columns
            needed = [*wanted, *(c for c in _root_names(predicate) if c not in wanted)]
            query = tbl.search().select(needed or list(schema)[:1])
            query = query.limit(n_rows if n_rows is not None and predicate is None else None)
            left = n_rows
            for batch in query.to_batches(batch_size):
                data = pl.from_arrow(batch)
                if predicate is not None:
                    data = data.filter(predicate)
                data = data.select(wanted)
                if left is not None:
                    data = data.head(left)
                    left -= data.height
                yield data
                if left == 0:
                    return

        return register_io_source(scan, schema=schema)

    @staticmethod
    def _frame_layer(layer) -> int:
        if not isinstance(layer, int | str) or isinstance(layer, bool) or layer not in LAYER_NAMES:
            raise ReaderArgumentError(
                f"frame() reads layer 0, 1, 2, documents, components, subcomponents or edges; got {layer!r}")
        return {"documents": 0, "components": 1, "subcomponents": 2}[LAYER_NAMES[layer]]

    def stats(self) -> dict:
        """Rows per layer and kind, edges per kind, resolved links, and the build's run summary."""
        names = [name for name in READ_TABLES if name in self.manifest["tables"]]  # what table_stats reads
        with self._reading(*names):
            stats = table_stats({name: self.table(name) for name in names})
        stats["manifest_version"] = self.version
        stats["embedder"] = self.embedder
        stats["last_run"] = self.manifest.get("run")
        return stats

    def __repr__(self) -> str:
        return f"laminae.Index({self.root!r}, version={self.version})"

    # -- in-memory view ------------------------------------------------------------------------
    @property
    def graph(self) -> Graph:
        """Vectors, parent pointers and link adjacency in memory (loaded on first use, once, whatever
        the number of threads asking)."""
        graph = self._graph
        if graph is None:
            with self._graph_lock:
                if self._graph is None:
                    loaded = self._load_graph()
                    loaded.use_search(self.search_mode)
                    self._graph = loaded
                graph = self._graph
        return graph

    @property
    def snapshot_path(self) -> Path:
        """Where the reader snapshot of this manifest lives (``laminae.schemas.storage.snapshot_dir``)."""
        return snapshot_dir(self.root, self.version, self.manifest.get("run_id"))

    def _load_graph(self) -> Graph:
        snapshot = self.snapshot_path
        dim = int(self.embedder["dim"])
        if is_remote(self.root) and snapshot_problem(snapshot, dim) is not None:
            # one folder per manifest version and run id (snapshot_dir), so an index rebuilt at the
            # same URI is never served from the old one's cache
            snapshots.cache(self.root, snapshot, lambda: self.save_snapshot(keep_whole=True))
            if snapshot_problem(snapshot, dim) is not None:  # the cache cannot be written: logged
                with self._reading(*VIEW_TABLES):
                    return Graph({name: self.table(name) for name in VIEW_TABLES}, dim)
        if snapshot.is_dir():
            try:
                return Graph.load(snapshot)
            except (OSError, ValueError, pa.ArrowException) as exc:
                # checked at open: damaged or removed since (a cleanup of old versions' snapshots)
                problem = snapshot_problem(snapshot, dim) or f"{snapshot}: {exc}"
                raise IndexOpenError(self._snapshot_message(problem, None)) from None
        with self._reading(*VIEW_TABLES):
            return Graph({name: self.table(name) for name in VIEW_TABLES}, dim)

    def _check_snapshot(self, latest: int | None) -> None:
        """At open: a snapshot of this version that exists must be whole (``snapshot_problem``: file
        headers and sizes, no data read). A damaged one is rebuilt from the tables with a warning
        (written beside and renamed into place, as a build writes it) where the index (or, on
        object storage, the cache) is writable; otherwise ``IndexOpenError`` saying how to rebuild it.
        No snapshot at all is no error: the view then loads from the tables, into memory."""
        snapshot = self.snapshot_path
        if not snapshot.exists():
            return
        problem = snapshot_problem(snapshot, int(self.embedder["dim"]))
        if problem is None:
            return
        if is_remote(self.root):  # the cache's copy: replaced on first use (_load_graph)
            log.warning("%s: the cached snapshot is damaged (%s); it is streamed again from the tables",
                        self.root, problem)
            return
        log.debug("%s: rebuilding the damaged reader snapshot of manifest %d (%s)", self.root, self.version, problem)
        started = time.monotonic()
        try:
            self.save_snapshot(keep_whole=True)
        except OSError as exc:
            raise IndexOpenError(self._snapshot_message(problem, latest, f"it cannot be rebuilt here: {exc}")) \
                from None
        again = snapshot_problem(snapshot, int(self.embedder["dim"]))
        if again is not None:
            raise IndexOpenError(self._snapshot_message(again, latest, "rebuilt, it is still damaged"))
        log.warning("%s: the reader snapshot of manifest %d was damaged (%s); rebuilt it from the tables in %.1f s",
                    self.root, self.version, problem, time.monotonic() - started)

    def _snapshot_message(self, problem: str, latest: int | None, why: str = "") -> str:
        fix = f"run `laminae compact --index {self.root}`, which rebuilds the latest manifest's snapshot"
        if latest is not None and latest != self.version:
            fix = f"open the latest manifest ({latest}), or delete {self.snapshot_path} (the view then loads " \
                  "from the tables, into memory)"
        return f"{problem}: the reader snapshot of manifest {self.version} is damaged{'; ' + why if why else ''}. " \
               f"To fix it, {fix}"

    def save_snapshot(self, keep_whole: bool = False) -> Path:
        """Write the reader's view of this version for fast loading (the builder calls this; a reader
        of an index on object storage, into its cache), streamed from the tables
        (``laminae.graph.write_snapshot``): no layer is held in memory. ``keep_whole``: keep a
        whole snapshot another process put there meanwhile instead of replacing it."""
        path = self.snapshot_path
        with self._reading(*VIEW_TABLES):
            write_snapshot({name: self.table(name) for name in VIEW_TABLES}, int(self.embedder["dim"]),
                           path, keep_whole=keep_whole)
        return path

    def embed_query(self, text: str) -> np.ndarray:
        """Embed a query string with the index's own model (needs the ``ml`` extra) or ``embed=``.

        One thread at a time: a Hugging Face fast tokenizer shared by threads fails ("Already
        borrowed"), and an ``embed=`` callable need not be thread-safe either; the lock covers only
        this call (about 2 ms for a question, 26 ms for 2,000 characters with the default model).
        Only a query's first ``MAX_EMBEDDED_QUERY_CHARS`` are embedded (``embedded_part``)."""
        text = embedded_part(text)
        with self._embed_lock:
            if self._embed is None:
                self._embed = self._load_embedder()
            return np.asarray(self._embed(text), dtype=np.float32)

    def _load_embedder(self) -> Callable[[str], np.ndarray]:
        model = self.embedder["model_id"]
        try:
            from laminae.tasks.embed.embedders import query_embedder

            return query_embedder(model)
        except ImportError as exc:
            raise QueryModelError(
                f"string queries need the index's embedder ({model}): install laminae with the ml and "
                "build extras (pip install -e '.[build,ml]'), pass embed=callable to laminae.open, or "
                f"pass a query vector of {self.embedder['dim']} floats ({exc})"
            ) from None

    def _query_vector(self, query) -> np.ndarray:
        vector = self.embed_query(query) if isinstance(query, str) else np.asarray(query, dtype=np.float32)
        dim = int(self.embedder["dim"])
        if vector.shape != (dim,):
            raise ReaderArgumentError(
                f"query vector has shape {vector.shape}; this index holds {dim}-d vectors of "
                f"{self.embedder['model_id']}: embed the query with that model"
            )
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm else vector

    @staticmethod
    def _layer_number(layer) -> int:
        if layer not in LAYER_NAMES:
            raise ReaderArgumentError(f"layer must be 0, 1, 2 or documents/components/subcomponents; got {layer!r}")
        return {"documents": 0, "components": 1, "subcomponents": 2}[LAYER_NAMES[layer]]

    # -- nodes ---------------------------------------------------------------------------------
    def get(self, ids: Sequence[str]) -> list[dict]:
        """Nodes with their content, in the order asked; unknown ids are left out.

        Images carry ``image`` (bytes); objects and text lines read in pictures carry ``bbox`` and,
        when Pillow is installed, ``crop`` (PNG bytes cut from the parent image).
        """
        wanted = list(dict.fromkeys(ids))
        found: dict[str, dict] = {}
        quoted = sql_list(wanted)
        for layer, name in enumerate(NODE_TABLES):
            if not wanted:
                break
            with self._reading(name):
                rows = self.table(name).search().where(f"id IN ({quoted})").limit(None).to_arrow().to_pylist()
            for row in rows:
                row.pop("vector", None)
                row["layer"] = layer
                found[row["id"]] = row
        parents = {}
        for row in found.values():
            if row["layer"] == 1 and row["kind"] == "image" and row.get("image_key"):
                row["image"] = self._raw(row["image_key"])
            if row["layer"] == 2 and row["kind"] in BOXED_KINDS:
                parents[row["id"]] = row["parent_id"]
        if parents:
            images = {p["id"]: p for p in self.get(sorted(set(parents.values())))}
            for oid, pid in parents.items():
                parent = images.get(pid)
                if parent and parent.get("image"):
                    found[oid]["crop"] = _crop(parent["image"], found[oid]["bbox"])
        return [found[i] for i in wanted if i in found]

    def _raw(self, key: str) -> bytes | None:
        return self._files.read_bytes(raw_path(key))

    def children(self, node_id: str) -> list[str]:
        """Ids of a node's children (components of a document, subcomponents of a component)."""
        g = self.graph
        if node_id in g.doc_position:
            d = g.doc_position[node_id]
            comps = g.layers[1]
            return list(comps.ids[comps.starts[d]:comps.starts[d + 1]])
        if node_id in g.layers[1].position:
            row = g.layers[1].position[node_id]
            subs = g.layers[2]
            d = g.layers[1].doc[row]
            span = np.arange(subs.starts[d], subs.starts[d + 1])
            return list(subs.ids[span[subs.parent[span] == row]])
        return []

    def parent(self, node_id: str) -> str | None:
        g = self.graph
        for layer in (1, 2):
            row = g.layers[layer].position.get(node_id)
            if row is not None:
                return str(g.layers[layer - 1].ids[g.layers[layer].parent[row]])
        return None

    def document_of(self, node_id: str) -> str | None:
        g = self.graph
        if node_id in g.doc_position:
            return node_id
        for layer in (1, 2):
            row = g.layers[layer].position.get(node_id)
            if row is not None:
                return str(g.layers[0].ids[g.layers[layer].doc[row]])
        return None

    def neighbors(self, document_ids: Sequence[str], direction: str = "out") -> list[str]:
        """Documents linked from (``out``), linking to (``in``) or either (``both``) these documents."""
        _check_direction(direction)
        g = self.graph
        out: set[int] = set()
        for doc in document_ids:
            d = g.doc_position.get(doc)
            if d is not None:
                out |= self._doc_links(d, direction)
        return sorted(str(g.layers[0].ids[d]) for d in out)

    def _doc_links(self, doc: int, direction: str) -> set[int]:
        """Document rows linked from (``out``), linking to (``in``) or either (``both``) document row ``doc``."""
        g = self.graph
        return ((g.out_links.get(doc, set()) if direction != "in" else set())
                | (g.in_links.get(doc, set()) if direction != "out" else set()))

    # -- search --------------------------------------------------------------------------------
    def _hits(self, layer: int, rows: np.ndarray | None, scores: np.ndarray, k: int) -> list[Hit]:
        """The top-``k`` of ``scores`` (over ``rows``, or the whole layer when None), best first."""
        if len(scores) == 0 or k <= 0:
            return []
        g = self.graph
        lay = g.layers[layer]
        rows = np.arange(len(scores)) if rows is None else rows
        if len(scores) > k:  # every row tied with the k-th best competes on its id
            top = np.flatnonzero(scores >= scores[np.argpartition(-scores, k - 1)[k - 1]])
        else:
            top = np.arange(len(scores))
        top = top[np.lexsort((lay.ids[rows[top]], -scores[top]))][:k]
        hits = []
        for i in top:
            row = int(rows[i])
            doc = int(lay.doc[row])
            hits.append(Hit(str(lay.ids[row]), float(scores[i]), layer, str(lay.kinds[row]), str(g.layers[0].ids[doc]),
                            text=lay.text[row].as_py(),
                            extra={"title": g.titles[doc].as_py(), "url": g.urls[doc].as_py()}))
        return hits

    def _rows(self, layer: int, kinds: Sequence[str] | None, documents: Sequence[str] | None) -> np.ndarray | None:
        """Rows of a layer passing the filters; None means every row (no copy of the vectors)."""
        g = self.graph
        lay = g.layers[layer]
        if documents is None and kinds is None:
            return None
        if documents is not None:
            docs = np.array(sorted({g.doc_position[d] for d in documents if d in g.doc_position}), dtype=np.int64)
            rows = lay.rows_of_documents(docs) if layer else docs
        else:
            rows = np.arange(len(lay.ids))
        if kinds is not None:
            rows = rows[np.isin(lay.kinds[rows], list(kinds))]
        return rows

    def _dense(self, layer: int, rows: np.ndarray | None, q: np.ndarray) -> np.ndarray:
        lay = self.graph.layers[layer]
        if rows is None and lay.compact:  # exact for the codes' shortlist, -inf elsewhere
            return rescored_rows(lay.vectors, lay.codes, q, prefix=lay.first_words())
        return lay.vectors @ q if rows is None else lay.vectors[rows] @ q

    def search(self, query, layer=1, k: int = 10, kinds: Sequence[str] | None = None,
               documents: Sequence[str] | None = None, mode: str = "auto") -> list[Hit]:
        """Top-``k`` nodes of one layer by dense similarity, full-text (BM25) or both fused (RRF).

        ``mode="auto"`` (the default): for a text query, components (layer 1) come from
        ``retrieve`` and the other layers from ``hybrid``; a vector query is searched ``dense``.
        """
        layer = self._layer_number(layer)
        mode = self._mode(query, mode)
        if mode == "auto":
            if layer == 1:
                return self.retrieve(query, k=k, kinds=kinds, documents=documents)
            mode = "hybrid"
        if mode == "dense":
            rows = self._rows(layer, kinds, documents)
            return self._hits(layer, rows, self._dense(layer, rows, self._query_vector(query)), k)
        if not isinstance(query, str):
            raise ReaderArgumentError(f"mode={mode} needs the query text, not a vector")
        depth = max(k * 4, 50)
        fts = self._fts(query, layer, depth, kinds, documents)
        if mode == "fts":
            rows = np.array([r for r, _ in fts], dtype=np.int64)
            return self._hits(layer, rows, np.array([s for _, s in fts], dtype=np.float32), k)
        rows = self._rows(layer, kinds, documents)
        scores = self._dense(layer, rows, self._query_vector(query))
        dense = _ranked(np.arange(len(scores)) if rows is None else rows, scores, depth)
        rows, fused = rrf([dense, np.array([r for r, _ in fts], dtype=np.int64)])
        return self._hits(layer, rows, fused, k)

    @staticmethod
    def _mode(query, mode: str) -> str:
        if mode not in MODES:
            raise ReaderArgumentError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        if mode == "auto" and not isinstance(query, str):
            return "dense"
        if mode in ("fts", "hybrid") and not isinstance(query, str):
            raise ReaderArgumentError(f"mode={mode} needs the query text, not a vector")
        return mode

    def retrieve(self, query, k: int = 10, documents: Sequence[str] | None = None,
                 kinds: Sequence[str] | None = None, ranking: str = "learned") -> list[Hit]:
        """The best ``k`` components (paragraphs, tables, images) for a question: the default move.

        Gathers one dense ranking per component kind (a component scores the best similarity of
        its sentences, rows or objects; its own vector when it has none; kinds are ranked apart so
        that short sentences cannot crowd table rows out), one full-text ranking (BM25 over the
        subcomponents' search text, which carries the page title, section and caption; a component
        scores its best match plus half its second) and one term-coverage ranking. With
        ``ranking="learned"`` (the default) every component in any of them is scored by the
        learned fusion (``laminae.fusion``: the ranks, the scores' margins and, for a question
        rather than a keyword query, a prior per kind; fitted on table and multi-hop questions; a
        hit's score is the estimated probability that it is evidence); ``ranking="rrf"`` fuses the rankings by reciprocal rank instead, with no
        learned weights. ``documents`` and ``kinds`` restrict the candidates. A hit's
        ``extra["similarity"]`` is its dense score. A vector query has only the dense rankings,
        fused by reciprocal rank.
        """
        if ranking not in RANKINGS:
            raise ReaderArgumentError(f"ranking must be one of {', '.join(RANKINGS)}; got {ranking!r}")
        rows = self._rows(1, kinds, documents)
        rows = np.arange(len(self.graph.layers[1].ids)) if rows is None else rows
        fused_rows, fused, similarity = self._fused_components(query, None, rows, documents, granularity=2,
                                                               learned=ranking == "learned")
        return self._with_similarity(self._hits(1, fused_rows, fused, k), rows, similarity)

    def _with_similarity(self, hits: list[Hit], rows: np.ndarray, similarity: np.ndarray) -> list[Hit]:
        comps = self.graph.layers[1]
        by_row = np.empty(len(comps.ids), dtype=np.float32)
        by_row[rows] = similarity
        for hit in hits:
            hit.extra["similarity"] = float(by_row[comps.position[hit.id]])
        return hits

    def _fused_components(self, query, q: np.ndarray | None, rows: np.ndarray, documents, granularity: int,
                          learned: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``retrieve``'s fusion over component ``rows``: (fused rows best first, their fused scores,
        the dense similarity of every row of ``rows``). Granularity 2 scores a component by its
        subcomponents (dense max, BM25 over layer 2); granularity 1 by its own vector and text.
        ``q`` is the query's vector (None: embedded here, while the term-coverage lookups, sent
        first, run). A text ``query`` adds the full-text and term-coverage
        rankings; at granularity 2 every component found by any ranking is then scored by the
        learned fusion (``laminae.fusion``) unless ``learned`` is False; elsewhere by reciprocal
        rank fusion."""
        evidence = self._fusion_evidence(query, q, rows, documents, granularity)
        if evidence is None:
            return np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(0, np.float32)
        lists, ev, similarity = evidence
        if ev is None or not learned:
            fused_rows, fused = rrf(lists)
            return fused_rows, fused, similarity
        probability = fusion.scores(fusion.features(ev), ev.kinds, question=fusion.is_question(query),
                                    procedural=ev.procedural)
        order = np.lexsort((ev.rows, -probability))
        return ev.rows[order], probability[order], similarity

    def _fusion_evidence(self, query, q: np.ndarray | None, rows: np.ndarray, documents, granularity: int,
                         signals: bool = False):
        """The rankings ``_fused_components`` fuses, and for a text query at granularity 2 the
        ``fusion.Evidence`` of every component they hold (None otherwise); None when ``rows`` is
        empty. Returns (rankings, evidence, dense similarity of every row of ``rows``). The
        evidence holds ``fusion.component_signals`` when the question's weights read them or
        ``signals`` asks for them (fitting), zeros otherwise."""
        comps = self.graph.layers[1]
        if len(rows) == 0:
            return None
        lookups = self._coverage_lookups(query) if isinstance(query, str) else None  # they run meanwhile
        q = self._query_vector(query) if q is None else q
        similarity = (self.component_query_max(q[None, :], rows)[:, 0] if granularity == 2
                      else self._dense(1, rows, q))
        kinds = comps.kinds[rows]
        lists = [_ranked(rows[kinds == kind], similarity[kinds == kind], FUSION_DEPTH) for kind in sorted(set(kinds))]
        if not isinstance(query, str):
            return lists, None, similarity
        if granularity != 2:
            allowed = set(rows.tolist())
            lists.append(np.array([r for r, _ in self._fts(query, 1, FUSION_DEPTH, None, documents)
                                   if r in allowed], dtype=np.int64))
            lists.append(self._term_coverage(query, rows, lookups)[0])
            return lists, None, similarity
        bm25_rows, bm25 = self._fts_components(query, rows, documents)
        coverage_rows, coverage, coverage_total = self._term_coverage(query, rows, lookups)
        candidates = np.array(sorted(set(np.concatenate([*lists, bm25_rows, coverage_rows]).tolist())),
                              dtype=np.int64)
        by_row = np.empty(len(comps.ids), dtype=np.float32)
        by_row[rows] = similarity
        unscored = candidates[~np.isfinite(by_row[candidates])]
        if len(unscored):  # found by text but outside the compact scan's shortlist: score them exactly
            by_row[unscored] = self.component_query_max(q[None, :], unscored, exact=True)[:, 0]
            similarity = by_row[rows]
        bm25_by_row = dict(zip(bm25_rows.tolist(), bm25.tolist(), strict=True))
        procedural = fusion.is_procedural(query)
        ev = fusion.Evidence(
            rows=candidates, kinds=comps.kinds[candidates], similarity=by_row[candidates].astype(np.float64),
            own_similarity=(comps.vectors[candidates] @ q).astype(np.float64),
            dense_rank=fusion.ranks(lists, candidates),
            bm25=np.array([bm25_by_row.get(r, 0.0) for r in candidates.tolist()]),
            bm25_rank=fusion.ranks([bm25_rows], candidates),
            coverage=coverage[candidates].astype(np.float64),
            coverage_rank=fusion.ranks([coverage_rows], candidates), coverage_total=coverage_total,
            signals=(fusion.component_signals(self.graph, candidates) if signals or fusion.reads_signals(procedural)
                     else np.zeros((len(candidates), len(fusion.SIGNALS)))),
            docs=comps.doc[candidates], procedural=procedural,
            page_similarity=self._page_similarity(q, comps.doc[candidates]))
        return [*lists, bm25_rows, coverage_rows], ev, similarity

    def _page_similarity(self, q: np.ndarray, docs: np.ndarray) -> np.ndarray:
        """The query against the document vectors (title and summary) of ``docs`` (0 outside any)."""
        docs = np.asarray(docs, dtype=np.int64)
        out = np.zeros(len(docs), np.float64)
        inside = docs >= 0
        if inside.any():
            unique, back = np.unique(docs[inside], return_inverse=True)
            out[inside] = (np.asarray(self.graph.layers[0].vectors[unique], np.float32) @ q)[back]
        return out

    def _fts_components(self, text: str, rows: np.ndarray, documents) -> tuple[np.ndarray, np.ndarray]:
        """Component rows ranked by BM25 over their subcomponents (best match + half the second),
        and those scores."""
        subs = self.graph.layers[2]
        matches = self._fts(text, 2, FUSION_DEPTH * 2, None, documents)
        best: dict[int, list[float]] = {}
        for row, score in matches:
            parent = int(subs.parent[row])
            if parent >= 0:
                best.setdefault(parent, []).append(score)
        allowed = set(rows.tolist()) if len(rows) != len(self.graph.layers[1].ids) else None
        scored = {c: s[0] + 0.5 * (s[1] if len(s) > 1 else 0.0) for c, s in best.items()
                  if allowed is None or c in allowed}  # scores arrive best first
        order = sorted(scored, key=lambda c: (-scored[c], c))
        return np.array(order, dtype=np.int64), np.array([scored[c] for c in order], dtype=np.float64)

    def _coverage_lookups(self, text: str) -> Callable[[], list[list[tuple[int, float]]]]:
        """Send term coverage's full-text lookups (``_sent_each``); the function returned waits for them."""
        depth = max(COVERAGE_DEPTH, len(self.graph.layers[1].ids) // 10)
        return self._sent_each(query_terms(text), 1, depth)

    def _term_coverage(self, text: str, rows: np.ndarray,
                       lookups: Callable[[], list[list[tuple[int, float]]]] | None = None,
                       ) -> tuple[np.ndarray, np.ndarray, float]:
        """Component rows ranked by how much of the question's vocabulary they hold anywhere in
        their search text (title, section, caption and every sentence or row): the sum of the idf
        of the question's terms they contain, with no term frequency and no length normalization,
        so a table that names both entities of a question in different rows outranks a short
        passage that repeats one. The full-text index decides what a term is (stemming, stop
        words); a term in more than ``max(COVERAGE_DEPTH, components / 10)`` components counts
        for its best-matching ones only, with the idf of that many. The question's terms are
        ``query_terms``: at most ``MAX_QUERY_TERMS``, one full-text query each, sent at once
        (``_coverage_lookups``, or ``lookups`` sent earlier). Returns (the ranking, the coverage of
        every component, the summed idf of the terms found in any component)."""
        comps = self.graph.layers[1]
        n = len(comps.ids)
        score = np.zeros(n, np.float64)
        if n == 0:
            return np.zeros(0, np.int64), score, 0.0
        total = 0.0
        for found in (lookups or self._coverage_lookups(text))():
            if found:
                idf = math.log((n + 1) / (len(found) + 0.5))
                score[[r for r, _ in found]] += idf
                total += idf
        candidates = rows[score[rows] > 0]
        return _ranked(candidates, score[candidates], FUSION_DEPTH), score, total

    def _fts_column(self, layer: int) -> str:
        column = self._fts_columns.get(layer)
        if column is None:  # the schema is a round trip to LanceDB: asked once
            names = self.table(NODE_TABLES[layer]).schema.names
            column = self._fts_columns[layer] = "search_text" if "search_text" in names else "text"
        return column

    def _fts(self, text: str, layer: int, k: int, kinds, documents) -> list[tuple[int, float]]:
        """(row, BM25 score) of the ``k`` best matches of ``text`` in one layer, best first; a text
        of more than ``MAX_QUERY_TERMS`` terms is searched for those ``query_terms`` keeps."""
        name = NODE_TABLES[layer]
        tbl = self.table(name)
        query = tbl.search(bounded_query(text), query_type="fts", fts_columns=self._fts_column(layer))
        query = query.select(["id", "_score"]).limit(k)
        clauses = []
        if kinds is not None:
            clauses.append(f"kind IN ({sql_list(kinds)})")
        if documents is not None:
            column = "id" if layer == 0 else "document_id"
            clauses.append(f"{column} IN ({sql_list(documents)})")
        if clauses:
            query = query.where(" AND ".join(clauses), prefilter=True)
        with self._reading(name):
            try:
                data = query.to_arrow()
            except (ValueError, RuntimeError) as exc:
                raise RuntimeError(f"full-text search needs the index built by laminae >= 0.1 ({exc})") from None
        return self._fts_rows(layer, data)

    def _fts_rows(self, layer: int, data: pa.Table) -> list[tuple[int, float]]:
        position = self.graph.layers[layer].position
        return [(position[i], float(s)) for i, s in zip(data.column("id").to_pylist(),
                                                          data.column("_score").to_pylist(), strict=True)
                if i in position]

    def _sent_each(self, terms: Sequence[str], layer: int, k: int) -> Callable[[], list[list[tuple[int, float]]]]:
        """Send ``_fts`` of each term alone (no filter), all at once, through LanceDB's async API on
        the reader's event loop (``_LOOP``: through the synchronous API each query waits for its
        own round trips, 1.8 ms a term on the demo index against 0.9 ms this way); returns the
        function that waits for their answers, so that the caller can work meanwhile (``retrieve``
        embeds the query)."""
        if not terms:
            return list
        name = NODE_TABLES[layer]
        column = self._fts_column(layer)
        tbl = self._async_table(name)

        async def every() -> list[pa.Table]:
            return await asyncio.gather(*(tbl.query().nearest_to_text(term, columns=column)
                                          .select(["id", "_score"]).limit(k).to_arrow() for term in terms))

        sent = _LOOP.submit(every())

        def answers() -> list[list[tuple[int, float]]]:
            with self._reading(name):
                try:
                    found = sent.result()
                except (ValueError, RuntimeError) as exc:
                    raise RuntimeError(f"full-text search needs the index built by laminae >= 0.1 ({exc})") \
                        from None
            return [self._fts_rows(layer, data) for data in found]

        return answers

    def _async_table(self, name: str):
        """Table ``name`` at this manifest's version through LanceDB's async API (opened once)."""
        tbl = self._async_tables.get(name)
        if tbl is None:
            with self._tables_lock:
                if name not in self._async_tables:
                    version = self.manifest["tables"][name]

                    async def checked_out():
                        db = await lancedb.connect_async(self.root, storage_options=storage_options(self.root))
                        opened = await db.open_table(name)
                        await opened.checkout(version)
                        return opened

                    try:
                        self._async_tables[name] = _LOOP.run(checked_out())
                    except (ValueError, OSError, RuntimeError) as exc:
                        raise IndexOpenError(self._gone_message(name, version, exc)) from None
                tbl = self._async_tables[name]
        return tbl

    # -- FiF -----------------------------------------------------------------------------------
    def documents(self, query, k: int = 10, granularity: int = 0, scope: str = "global",
                  anchors: Sequence[str] | None = None, mode: str = "auto", direction: str = "both") -> list[Hit]:
        """FiF document-level hop: documents scored through their layer-g nodes.

        ``scope="global"``: every document. ``scope="local"``: the anchors' neighbours along
        hyperlinks. ``direction="out"``: documents linked from the anchors (document ids: from any
        of their components and subcomponents; component ids: from that component and its
        sentences/rows); ``"in"``: documents that link to the anchors' documents; ``"both"`` (the
        default): either, so a hop from a passage reaches the table that cites it as well as a hop
        from a table reaches its passages. ``mode="dense"``: max similarity over the layer-g
        nodes. ``mode="hybrid"`` (what ``auto`` means for a text query): g=0 fuses dense and
        full-text rankings of the documents; g=1 and g=2 rank documents by their best component in
        ``retrieve``'s fusion at that granularity (documents without any fused evidence follow,
        by dense score, with score 0).
        """
        if granularity not in (0, 1, 2):
            raise ReaderArgumentError(f"granularity must be 0, 1 or 2; got {granularity!r}")
        if scope not in ("global", "local"):
            raise ReaderArgumentError(f"scope must be global or local; got {scope!r}")
        _check_direction(direction)
        mode = self._mode(query, mode)
        if mode == "fts":
            raise ReaderArgumentError("documents() scores with mode dense, hybrid or auto")
        g = self.graph
        candidates = self._linked(anchors, direction) if scope == "local" else None
        if mode == "dense" or (granularity == 0 and mode == "auto" and not isinstance(query, str)):
            rows, scores = self._dense_documents(self._query_vector(query), granularity, candidates)
            return self._hits(0, rows, scores, k)
        doc_ids = None if candidates is None else [str(g.layers[0].ids[d]) for d in candidates]
        q = self._query_vector(query)
        if granularity == 0:
            dense_rows, dense_scores = self._dense_documents(q, 0, candidates)
            fts = np.array([r for r, _ in self._fts(query, 0, FUSION_DEPTH, None, doc_ids)], dtype=np.int64)
            rows, fused = rrf([_ranked(dense_rows, dense_scores, FUSION_DEPTH), fts])
            return self._hits(0, rows, fused, k)
        comp_rows = g.layers[1].rows_of_documents(candidates) if candidates is not None \
            else np.arange(len(g.layers[1].ids))
        fused_rows, fused, _ = self._fused_components(query, q, comp_rows, doc_ids, granularity)
        best: dict[int, float] = {}
        for row, score in zip(g.layers[1].doc[fused_rows].tolist(), fused.tolist(), strict=True):
            best.setdefault(row, score)  # fused rows come best first
        rest: list[int] = []
        if len(best) < k:  # the dense scan of the fallback only when fused evidence runs short
            dense_rows, dense_scores = self._dense_documents(q, granularity, candidates)
            rest = [r for r in _ranked(dense_rows, dense_scores, len(dense_rows)).tolist() if r not in best]
        order = [*best, *rest[:k]]
        return self._hits(0, np.array(order, dtype=np.int64),
                          np.array([best.get(r, 0.0) for r in order], dtype=np.float32), k)

    def _linked(self, anchors: Sequence[str] | None, direction: str = "out") -> np.ndarray:
        """Document rows linked from (``out``), linking to (``in``) or either (``both``) the anchors
        (documents or components; ``in`` reads a component's document)."""
        if not anchors:
            raise ReaderArgumentError("scope='local' needs anchors: document or component ids")
        g = self.graph
        linked: set[int] = set()
        for anchor in anchors:
            if anchor in g.doc_position:
                linked |= self._doc_links(g.doc_position[anchor], direction)
            elif anchor in g.layers[1].position:
                row = g.layers[1].position[anchor]
                if direction != "in":  # a component's own links, not its document's
                    linked |= g.component_links.get(row, set())
                if direction != "out":
                    linked |= self._doc_links(int(g.layers[1].doc[row]), "in")
            else:
                raise UnknownIdError(f"anchor {anchor!r} is not a document or component of this index")
        return np.array(sorted(linked), dtype=np.int64)

    def _dense_documents(self, q: np.ndarray, granularity: int,
                         candidates: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(document rows, max similarity over their layer-g nodes), documents without nodes left out."""
        lay = self.graph.layers[granularity]
        if candidates is None and lay.compact:  # exact over the documents the codes shortlist
            candidates = shortlist_groups(lay.codes, lay.starts, q[None, :], prefix=lay.first_words())
        if candidates is None:
            if granularity == 0:
                return np.arange(len(lay.ids)), lay.vectors @ q
            best = group_max(lay.vectors @ q, lay.starts)
            keep = np.flatnonzero(np.isfinite(best))
            return keep, best[keep]
        if granularity == 0:
            return candidates, lay.vectors[candidates] @ q
        rows = lay.rows_of_documents(candidates)
        sizes = lay.starts[candidates + 1] - lay.starts[candidates]
        best = group_max(lay.vectors[rows] @ q, np.concatenate([[0], np.cumsum(sizes)]))
        keep = np.isfinite(best)
        return candidates[keep], best[keep]

    def components(self, query, documents: Sequence[str], k: int = 10, granularity: int = 1,
                   mode: str = "auto") -> list[Hit]:
        """FiF component-level hop: components of these documents scored at layer g (1: own vector,
        2: max over its subcomponents) with ``mode="dense"``; ``hybrid`` (what ``auto`` means for
        a text query) is ``retrieve``'s fusion at that granularity, over these documents."""
        if granularity not in (1, 2):
            raise ReaderArgumentError(f"granularity must be 1 or 2; got {granularity!r}")
        mode = self._mode(query, mode)
        if mode == "fts":
            raise ReaderArgumentError("components() scores with mode dense, hybrid or auto")
        rows = self._rows(1, None, documents)
        if mode != "dense":
            fused_rows, fused, similarity = self._fused_components(query, None, rows, documents,
                                                                   granularity)
            return self._with_similarity(self._hits(1, fused_rows, fused, k), rows, similarity)
        q = self._query_vector(query)
        if granularity == 1:
            return self._hits(1, rows, self.graph.layers[1].vectors[rows] @ q, k)
        best = self._component_max(rows, q[None, :])[:, 0]
        keep = np.isfinite(best)
        return self._hits(1, rows[keep], best[keep], k)

    def _component_max(self, rows: np.ndarray, queries: np.ndarray) -> np.ndarray:
        """Per component row: max similarity over its subcomponents for each query (-inf if none)."""
        subs = self.graph.layers[2]
        starts = subs.parent_starts
        sizes = starts[rows + 1] - starts[rows]
        if len(rows) == 0:
            return np.zeros((0, len(queries)), dtype=np.float32)
        sub_rows = spans(starts[rows], sizes)
        return group_max((queries @ subs.vectors[sub_rows].T).T, np.concatenate([[0], np.cumsum(sizes)]))

    # -- LILaC ---------------------------------------------------------------------------------
    def component_query_max(self, queries: np.ndarray, rows: np.ndarray | None = None,
                            exact: bool = False) -> np.ndarray:
        """M[c, q]: max similarity of subquery q over component c's subcomponents (the component's
        own vector when it has none), for the given component rows (default: all). When the
        subcomponents are searched through their codes (``laminae.vectors``), only the components the
        codes shortlist for some subquery (and those without subcomponents) are scored, exactly;
        the others are -inf."""
        g = self.graph
        comps, subs = g.layers[1], g.layers[2]
        rows_all = np.arange(len(comps.ids)) if rows is None else rows
        if exact and rows is not None:
            out = self._component_max(rows_all, queries)
        elif len(rows_all) * 4 >= len(comps.ids) and subs.compact:
            allowed = None
            if rows is not None:
                allowed = np.zeros(len(comps.ids), dtype=bool)
                allowed[rows] = True
            picked = shortlist_groups(subs.codes, subs.parent_starts, queries, allowed=allowed,
                                      prefix=subs.first_words())
            position = np.full(len(comps.ids), -1, dtype=np.int64)
            position[rows_all] = np.arange(len(rows_all))
            out = np.full((len(rows_all), len(queries)), -np.inf, dtype=np.float32)
            out[position[picked]] = self._component_max(picked, queries)
        elif len(rows_all) * 4 >= len(comps.ids):  # a blocked scan of every subcomponent beats gathering most of them
            out = group_max(similarities(subs.vectors, queries), subs.parent_starts)
            out = out if rows is None else out[rows]
        else:
            out = self._component_max(rows_all, queries)
        starts = subs.parent_starts
        lonely = np.flatnonzero(starts[rows_all + 1] == starts[rows_all])
        if len(lonely):
            out[lonely] = comps.vectors[rows_all[lonely]] @ queries.T
        return out

    def beam_search(self, subqueries: Sequence, beam: int = 30, iterations: int = 1, k: int = 10) -> BeamResult:
        """LILaC late-interaction beam search over component pairs.

        An edge e = (u, v) joins two components of one document, or a component to a component of
        a document it links to; s(e) = Σ_q max over the subcomponents of u and v of sim(q, c). The
        beam starts at the ``beam`` best components (as self-pairs), then for ``iterations`` rounds
        expands every beam component along its edges and keeps the ``beam`` best edges. A
        component without edges stays as a self-pair; a subquery matched by only one endpoint
        counts that endpoint's score.
        """
        if beam < 1 or iterations < 0 or k < 1:
            raise ReaderArgumentError("beam and k must be >= 1 and iterations >= 0")
        g = self.graph
        comps = g.layers[1]
        queries = np.stack([self._query_vector(q) for q in subqueries])
        m_all = self.component_query_max(queries)
        own = np.sum([m_all[:, j] for j in range(len(queries))], axis=0)  # axis=1 runs 3 columns at a time: slow
        start = _top(own, beam)
        edges: dict[tuple[int, int], float] = {(int(c), int(c)): float(own[c]) for c in start}
        frontier = set(int(c) for c in start)
        for _ in range(iterations):
            candidates: dict[tuple[int, int], float] = dict(edges)
            hood: dict[int, np.ndarray] = {}
            for u in frontier:
                docs = np.array([comps.doc[u], *g.component_links.get(u, ())], dtype=np.int64)
                vs = comps.rows_of_documents(docs)
                hood[u] = vs[vs != u]
            reached = np.unique(np.concatenate([np.zeros(0, np.int64), *hood.values()]))
            unscored = reached[np.isneginf(m_all[reached, 0])]  # left out by a code shortlist: score exactly
            if len(unscored):  # at once: a document's components are adjacent rows, read together
                m_all[unscored] = self.component_query_max(queries, unscored, exact=True)
            for u, vs in hood.items():
                if len(vs) == 0:
                    continue
                scores = np.maximum(m_all[u][None, :], m_all[vs]).sum(axis=1)
                for v, score in zip(vs.tolist(), scores.tolist(), strict=True):
                    key = (u, v) if u < v else (v, u)
                    candidates[key] = max(candidates.get(key, -np.inf), score)
            ranked = sorted(candidates.items(), key=lambda kv: (-kv[1], kv[0]))[:beam]
            edges = dict(ranked)
            frontier = {c for pair in edges for c in pair}
        ranked_edges = sorted(edges.items(), key=lambda kv: (-kv[1], kv[0]))
        best: dict[int, float] = {}
        for (u, v), score in ranked_edges:
            for c in (u, v):
                best.setdefault(c, score)
        order = sorted(best, key=lambda c: (-best[c], -own[c], comps.ids[c]))[:k]
        rows = np.array(order, dtype=np.int64)
        hits = self._hits(1, rows, np.array([best[c] for c in order], dtype=np.float32), k)
        return BeamResult(
            edges=[(str(comps.ids[u]), str(comps.ids[v]), s) for (u, v), s in ranked_edges],
            components=hits,
        )


def _distinct_terms(text: str) -> list[str]:
    return [t for t in dict.fromkeys(TERM.findall(text.lower())) if t not in STOP_WORDS]


def query_terms(text: str, limit: int | None = None) -> list[str]:
    """The terms of a query that its full-text part searches: lower-cased words (``TERM``), each
    once, in the order they come, without the ``STOP_WORDS`` the full-text index drops; of more
    than ``limit`` (default ``MAX_QUERY_TERMS``), the ``limit`` longest (ties: the first), still in
    query order. Longer words are rarer on the whole, so they stand in for the rarest: how rare a
    term is in the index would cost the full-text query per term that the bound saves. Words
    longer than the index keeps (``MAX_TERM_CHARS``) come last. A question has fewer (the
    development sets' longest has 26): the bound is for pasted passages, 2,000 characters at most
    through the MCP server."""
    limit = MAX_QUERY_TERMS if limit is None else limit
    terms = _distinct_terms(text)
    if len(terms) <= limit:
        return terms
    ranked = sorted(range(len(terms)), key=lambda i: (len(terms[i]) > MAX_TERM_CHARS, -len(terms[i]), i))
    return [terms[i] for i in sorted(ranked[:limit])]


def bounded_query(text: str, limit: int | None = None) -> str:
    """``text`` itself when it has at most ``limit`` distinct terms (``query_terms``), else the terms
    kept, joined by spaces: the text a full-text query searches for."""
    limit = MAX_QUERY_TERMS if limit is None else limit
    terms = _distinct_terms(text)
    return text if len(terms) <= limit else " ".join(query_terms(text, limit))


class _EventLoop:
    """An asyncio event loop on a daemon thread, started on first use (again in a forked child),
    for LanceDB's async API: callers on any thread (a notebook's, with its own loop running) wait
    for a coroutine run there."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def submit(self, coroutine: Coroutine) -> Future:
        """Start ``coroutine`` on the loop; its result comes through the future returned."""
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="laminae-reader-loop", daemon=True).start()
                self._loop, self._pid = loop, os.getpid()
            loop = self._loop
        return asyncio.run_coroutine_threadsafe(coroutine, loop)

    def run(self, coroutine: Coroutine):
        return self.submit(coroutine).result()


_LOOP = _EventLoop()

def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def _top(scores: np.ndarray, n: int) -> np.ndarray:
    """Positions of the ``n`` highest scores, best first, ties by position (a stable sort's order)
    without sorting all of them."""
    if len(scores) <= n:
        return np.argsort(-scores, kind="stable")
    bound = np.partition(scores, len(scores) - n)[len(scores) - n]
    above = np.flatnonzero(scores >= bound)
    return above[np.lexsort((above, -scores[above]))][:n]


def _root_names(predicate) -> list[str]:
    """The columns a polars expression reads (none for no expression)."""
    return [] if predicate is None else predicate.meta.root_names()


def _check_search(search: str) -> str:
    if search not in SEARCH_MODES:
        raise ReaderArgumentError(f"search must be one of {', '.join(SEARCH_MODES)}; got {search!r}")
    return search


def _check_direction(direction: str) -> None:
    if direction not in ("out", "in", "both"):
        raise ReaderArgumentError(f"direction must be out, in or both; got {direction!r}")


def _ranked(rows: np.ndarray, scores: np.ndarray, depth: int) -> np.ndarray:
    """The ``depth`` best of ``rows`` by ``scores`` (ties by row), best first; -inf never ranks."""
    keep = np.isfinite(scores)
    rows, scores = rows[keep], scores[keep]
    if len(rows) > depth:
        top = np.argpartition(-scores, depth - 1)[:depth]
        rows, scores = rows[top], scores[top]
    return rows[np.lexsort((rows, -scores))]


def rrf(rankings: Sequence[np.ndarray], k: int = RRF_K) -> tuple[np.ndarray, np.ndarray]:
    """Reciprocal rank fusion: every row scores Σ 1 / (k + rank) over the rankings it appears in
    (rank from 1). Returns (rows, scores), best first, ties by row."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, row in enumerate(np.asarray(ranking).tolist(), start=1):
            fused[row] = fused.get(row, 0.0) + 1.0 / (k + rank)
    rows = np.array(sorted(fused, key=lambda r: (-fused[r], r)), dtype=np.int64)
    return rows, np.array([fused[r] for r in rows.tolist()], dtype=np.float32)


def _crop(image: bytes, bbox: list[float]) -> bytes | None:
    """The object's crop as PNG bytes; None without Pillow (the reader does not require it)."""
    try:
        return crop_png(image, bbox)
    except ImportError:
        return None


def embedded_part(text: str, limit: int = MAX_EMBEDDED_QUERY_CHARS) -> str:
    """The part of a query string that is embedded: all of it up to ``limit`` characters, else its
    first ``limit`` characters cut back to the last whole word."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = head.rfind(" ")
    return head[:cut] if cut > limit // 2 else head


def open_index(index_dir: str, version: int | None = None,
               embed: Callable[[str], np.ndarray] | None = None, search: str = "auto") -> Index:
    """Open the index at ``index_dir``, pinned to manifest ``version`` (default: the latest).

    ``embed`` turns query strings into vectors; without it the index's own model is loaded on the
    first string query (needs the ``ml`` extra). ``search``: ``"exact"`` scans every vector;
    ``"compact"`` scans sign codes and re-scores a shortlist exactly; ``"auto"`` (the default) is
    compact for the layers whose vectors exceed ``$LAMINAE_EXACT_SEARCH_LIMIT_GB`` (4 GiB), exact
    otherwise (``laminae.vectors``).

    Checks at once what costs no scan of data: ``_manifests/LATEST`` (unless ``version`` is
    given), the manifest, and the snapshot of that version if there is one (``snapshot_problem``:
    file headers and sizes; a damaged one is rebuilt from the tables where the index is
    writable). ``IndexOpenError`` names the damaged file and the fix. ``Index.verify`` also checks
    that the manifest's table versions still exist.
    """
    _check_search(search)
    root = str(index_dir)
    try:
        files = IndexFiles(root)
    except StorageError as exc:
        raise IndexOpenError(str(exc)) from None
    latest_path = _shown(root, f"{MANIFEST_DIR}/LATEST")
    raw = _read_index_file(files, root, f"{MANIFEST_DIR}/LATEST")
    if raw is None:
        raise IndexOpenError(
            f"{root} holds no published laminae index (no {MANIFEST_DIR}/LATEST): "
            "build one with `laminae build --seeds FILE --index DIR`"
        )
    latest = _manifest_number(raw)
    if version is None and latest is None:
        shown = raw[:40].decode("utf-8", "replace")
        raise IndexOpenError(
            f"{latest_path} {'is empty' if not raw.strip() else f'holds {shown!r}'}, not a manifest number: "
            f"it is damaged. Run `laminae refresh --index {root}` (it publishes a new manifest and rewrites "
            f"LATEST), or write the number of the newest manifest in {_shown(root, MANIFEST_DIR)}/ into it, or "
            "open a version explicitly (laminae.open(DIR, version=N), --version N)")
    if version is None:
        number = latest
    else:
        try:
            number = int(version)
        except (TypeError, ValueError):
            raise ReaderArgumentError(f"version must be a manifest number (an int); got {version!r}") from None
    path = f"{MANIFEST_DIR}/{number:08d}.json"
    text = _read_index_file(files, root, path)
    if text is None:
        if version is None:
            raise IndexOpenError(
                f"{latest_path} names manifest {number}, but {_shown(root, path)} is missing: the index is "
                f"damaged. Run `laminae refresh --index {root}` to publish a new manifest, or open another "
                "version (laminae.open(DIR, version=N), --version N)")
        raise IndexOpenError(f"{root} has no manifest version {number}"
                             + (f"; the latest is {latest}" if latest is not None else ""))
    manifest = _checked_manifest(text, _shown(root, path), number, latest, root)
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise IndexOpenError(
            f"{root} was written with schema version {manifest.get('schema_version')}; this laminae "
            f"reads version {SCHEMA_VERSION}. Install the laminae release that built it, or rebuild the index"
        )
    index = Index(root, manifest, embed, search)
    index._check_snapshot(latest)
    return index


def _shown(root: str, rel: str) -> str:
    return f"{root.rstrip('/')}/{rel}"


def _read_index_file(files: IndexFiles, root: str, rel: str) -> bytes | None:
    """A file of the index, None if absent; ``IndexOpenError`` if it cannot be read."""
    try:
        return files.read_bytes(rel)
    except OSError as exc:
        raise IndexOpenError(f"{_shown(root, rel)} cannot be read ({_first_line(exc)}): check that it is a file this "
                             "user may read") from None


def _manifest_number(raw: bytes) -> int | None:
    """The manifest number ``LATEST`` holds, None when it holds anything else."""
    text = raw.decode("ascii", "replace").strip()
    return int(text) if re.fullmatch(r"[0-9]{1,12}", text) else None


JSON_NAMES = {int: "number", str: "string", dict: "object"}
MANIFEST_KEYS = {"version": int, "run_id": str, "tables": dict, "embedder": dict}


def _checked_manifest(raw: bytes, path: str, number: int, latest: int | None, root: str) -> dict:
    """The manifest in ``raw``, checked for what the reader uses (its version, the versions of the
    tables the view reads, the embedder's dimension); ``IndexOpenError`` saying how it is damaged."""
    earlier = ", or open an earlier version (laminae.open(DIR, version=N), --version N)" if number > 1 else ""
    fix = f"run `laminae refresh --index {root}` to publish a new manifest{earlier}" \
        if number == latest or latest is None else f"open another version (the latest is {latest})"
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise IndexOpenError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}): the manifest is "
                             f"damaged; {fix}") from None
    except json.JSONDecodeError as exc:
        raise IndexOpenError(f"{path} is not valid JSON ({exc.msg}: character {exc.pos} of {len(raw)}): the "
                             f"manifest is truncated or damaged; {fix}") from None
    problems = []
    if not isinstance(manifest, dict):
        problems.append(f"it holds a JSON {type(manifest).__name__}, not an object")
        manifest = {}
    for key, kind in MANIFEST_KEYS.items():
        if key in manifest and not isinstance(manifest[key], kind):
            problems.append(f"{key!r} is not a JSON {JSON_NAMES[kind]}")
    missing = [k for k in MANIFEST_KEYS if k not in manifest]
    if missing and not problems:
        problems.append(f"it lacks {', '.join(map(repr, missing))}")
    if not problems:
        tables = manifest["tables"]
        absent = [t for t in VIEW_TABLES if t not in tables]
        wrong = [t for t, v in tables.items() if not isinstance(v, int) or isinstance(v, bool)]
        if absent:
            problems.append(f"its tables lack {', '.join(absent)}")
        elif wrong:
            problems.append(f"the versions of {', '.join(wrong)} are not numbers")
        dim = manifest["embedder"].get("dim")
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
            problems.append(f"its embedder has no dimension ({dim!r})")
        if manifest["version"] != number:
            problems.append(f"it says version {manifest['version']}")
    if problems:
        raise IndexOpenError(f"{path} is damaged: {'; '.join(problems)}; {fix}")
    return manifest
