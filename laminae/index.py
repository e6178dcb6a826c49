"""Open a laminae index pinned to one published manifest, and the agent's moves over it.

``open_index`` reads ``<index>/_manifests/`` (``laminae.opening``); an ``Index`` reads the LanceDB
tables at the versions the manifest names (``laminae.pinned_tables``), the reader snapshot of that
version (``laminae.view_loading``) and ``raw/`` for image bytes. It writes nothing itself; a
damaged snapshot is rebuilt where the index is writable, and the snapshot of an index on object
storage is cached locally (``laminae.snapshots``). An ``Index`` may be shared by threads. Each
move is one call into the module that does it: ``laminae.contents`` (get), ``laminae.graph``
(children, parent, document_of, neighbors), ``laminae.ranking`` (search: dense, full-text,
hybrid), ``laminae.retrieval`` (retrieve), ``laminae.hops`` (FiF's hops, LILaC's beam search),
``laminae.frames`` (a table as a polars LazyFrame).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from laminae import contents, frames, hops, moves, ranking, retrieval, view_loading
from laminae.errors import IndexOpenError, QueryModelError, ReaderArgumentError, UnknownIdError
from laminae.fulltext import FullText
from laminae.graph import Graph
from laminae.hits import BeamResult, Hit
from laminae.opening import check_search, read_manifest
from laminae.pinned_tables import READ_TABLES, PinnedTables
from laminae.query import QueryEncoder
from laminae.ranking import LAYER_NAMES, MODES, Sources, rrf
from laminae.retrieval import RANKINGS
from laminae.schemas.storage import IndexFiles, snapshot_dir
from laminae.stats import table_stats

# what other code imports from here: the facade, its results and errors, and the argument values
# laminae.integrations and the benchmarks read
__all__ = ["LAYER_NAMES", "MODES", "RANKINGS", "BeamResult", "Hit", "Index", "IndexOpenError", "QueryModelError",
           "ReaderArgumentError", "UnknownIdError", "open_index", "rrf"]


class Index:
    """A read-only view of one index at one manifest version."""

    def __init__(self, root: str, manifest: dict, embed: Callable[[str], np.ndarray] | None = None,
                 search: str = "auto") -> None:
        self.root = root
        self.search_mode = check_search(search)
        self.manifest = manifest
        self.version: int = manifest["version"]
        self._pinned = PinnedTables(root, manifest)
        self._files = IndexFiles(root)
        self._graph: Graph | None = None
        self._graph_lock = threading.Lock()  # held for as long as the view loads
        self._sources = Sources(lambda: self.graph, FullText(self._pinned), QueryEncoder(self.embedder, embed))

    @property
    def embedder(self) -> dict:
        """The embedder's ``model_id``, ``dim`` and ``image_mode`` (how images were embedded)."""
        return dict(self.manifest.get("embedder") or {})

    def table(self, name: str):
        """The LanceDB table ``name`` checked out at this manifest's version (``IndexOpenError`` when
        the table or that version of it is gone)."""
        return self._pinned.table(name)

    def verify(self) -> None:
        """Check what ``laminae.open`` leaves for later because it costs a round trip per table: that
        the version of every table the reader reads (``READ_TABLES``) that the manifest names can
        still be checked out (a manifest older than the kept ones loses its versions to a
        cleanup). ``IndexOpenError`` naming the table and the fix otherwise. The MCP server calls
        this at start; a reader that skips it gets the same error from its first read of such a
        table."""
        self._pinned.verify()

    def _reading(self, *names: str):
        """Reads of tables ``names``: ``IndexOpenError`` when a version they read was cleaned up."""
        return self._pinned.reading(*names)

    def frame(self, layer: int | str = 1, vectors: bool = False, batch_size: int = frames.FRAME_BATCH):
        """A polars ``LazyFrame`` over one table at this manifest's version, for exploring an index
        in a notebook: layer 0, 1 or 2 (or ``documents``, ``components``, ``subcomponents``) or
        ``edges``. Every column of the table but ``vector`` (``vectors=True`` adds it, as
        ``Array(Float32, dim)``). Nothing is read until the frame is collected; then only the
        columns the query uses are read, in batches of ``batch_size`` rows, filters applied batch by
        batch (``collect(engine="streaming")`` keeps no more than a few batches in memory). Needs
        polars (``pip install 'laminae[frames]'``). ``IndexOpenError`` when a table version of this
        manifest has been cleaned up (an unpinned reader older than the kept manifests)."""
        gone = self._pinned.missing_version()
        if gone is not None:
            raise gone
        return frames.frame(self._pinned, layer, vectors, batch_size)

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
        the number of threads asking). ``IndexOpenError`` once a table version of this manifest is
        found cleaned up (``PinnedTables.check_alive``): the moves answered from the view fail as
        those reading tables do, never answering from a manifest whose tables are gone."""
        self._pinned.check_alive()
        graph = self._graph
        if graph is None:
            with self._graph_lock:
                if self._graph is None:
                    loaded = view_loading.load(self._pinned, int(self.embedder["dim"]), self.snapshot_path)
                    loaded.use_search(self.search_mode)
                    self._graph = loaded
                graph = self._graph
        return graph

    @property
    def snapshot_path(self) -> Path:
        """Where the reader snapshot of this manifest lives (``laminae.schemas.storage.snapshot_dir``)."""
        return snapshot_dir(self.root, self.version, self.manifest.get("run_id"))

    def save_snapshot(self, keep_whole: bool = False) -> Path:
        """Write the reader's view of this version for fast loading (the builder calls this; a reader
        of an index on object storage, into its cache), streamed from the tables: no layer is held
        in memory. ``keep_whole``: keep a whole snapshot another process put there meanwhile
        instead of replacing it."""
        return view_loading.save(self._pinned, int(self.embedder["dim"]), self.snapshot_path, keep_whole)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed a query string with the index's own model (needs the ``ml`` extra) or ``embed=``.

        One thread at a time: a Hugging Face fast tokenizer shared by threads fails ("Already
        borrowed"), and an ``embed=`` callable need not be thread-safe either; the lock covers only
        this call (about 2 ms for a question, 26 ms for 2,000 characters with the default model).
        Only a query's first ``MAX_EMBEDDED_QUERY_CHARS`` are embedded (``embedded_part``)."""
        return self._sources.query.embed(text)

    def _query_vector(self, query) -> np.ndarray:
        return self._sources.query.vector(query)

    # -- nodes ---------------------------------------------------------------------------------
    def get(self, ids: Sequence[str]) -> list[dict]:
        """Nodes with their content, in the order asked; unknown ids are left out.

        Images carry ``image`` (bytes); objects and text lines read in pictures carry ``bbox`` and,
        when Pillow is installed, ``crop`` (PNG bytes cut from the parent image).
        """
        return contents.get(self._pinned, self._files, ids)

    def children(self, node_id: str) -> list[str]:
        """Ids of a node's children (components of a document, subcomponents of a component)."""
        return self.graph.children(node_id)

    def parent(self, node_id: str) -> str | None:
        return self.graph.parent(node_id)

    def document_of(self, node_id: str) -> str | None:
        return self.graph.document_of(node_id)

    def neighbors(self, document_ids: Sequence[str], direction: str = "out") -> list[str]:
        """Documents linked from (``out``), linking to (``in``) or either (``both``) these documents."""
        return self.graph.neighbors(document_ids, direction)

    # -- search --------------------------------------------------------------------------------
    def search(self, query, layer=1, k: int = 10, kinds: Sequence[str] | None = None,
               documents: Sequence[str] | None = None, mode: str = "auto") -> list[Hit]:
        """Top-``k`` nodes of one layer by dense similarity, full-text (BM25) or both fused (RRF).

        ``mode="auto"`` (the default): for a text query, components (layer 1) come from
        ``retrieve`` and the other layers from ``hybrid``; a vector query is searched ``dense``.
        """
        a = moves.check("search", locals())
        layer, mode = ranking.layer_number(a["layer"]), ranking.checked_mode(query, a["mode"])
        if mode == "auto" and layer == 1:
            return self.retrieve(query, k=a["k"], kinds=a["kinds"], documents=a["documents"])
        return ranking.search(self._sources, query, layer, a["k"], a["kinds"], a["documents"], mode)

    def retrieve(self, query, k: int = 10, documents: Sequence[str] | None = None,
                 kinds: Sequence[str] | None = None, ranking: str = "learned", pages: str = "auto") -> list[Hit]:
        """The best ``k`` components (paragraphs, tables, images) for a question: the default move.

        Gathers one dense ranking per component kind (a component scores the best similarity of
        its sentences, rows or objects; its own vector when it has none; kinds are ranked apart so
        that short sentences cannot crowd table rows out), one full-text ranking (BM25 over the
        subcomponents' search text, which carries the page title, section and caption; a component
        scores its best match plus half its second) and one term-coverage ranking. With
        ``ranking="learned"`` (the default) every component in any of them is scored by the
        learned fusion (``laminae.fusion``: the ranks, the scores' margins and, for a question
        rather than a keyword query, a prior per kind; fitted on table and multi-hop questions; a
        hit's score is the estimated probability that it is evidence); ``ranking="rrf"`` fuses the
        rankings by reciprocal rank instead, with no learned weights. ``documents`` and ``kinds``
        restrict the candidates. A hit's ``extra["similarity"]`` is its dense score. A vector
        query has only the dense rankings, fused by reciprocal rank. ``pages="auto"`` (the
        default) gives a question the gate sends to the how-to weights (a documentation site's
        how-to or concept question, which a page answers) each page's best component before any
        page's second (``fusion.one_per_page``): the others are scaled below the last page's
        best, so their score is no longer a probability (``extra["probability"]`` keeps it, for
        every hit the learned fusion scored); ``"one"`` does so for every query, ``"any"`` for
        none (every learned score a probability).
        """
        a = moves.check("retrieve", locals())
        return retrieval.retrieve(self._sources, query, a["k"], a["documents"], a["kinds"], a["ranking"], a["pages"])

    def _fusion_evidence(self, query, q: np.ndarray | None, rows: np.ndarray, documents, granularity: int,
                         signals: bool = False) -> retrieval.Evidence | None:
        """``retrieve``'s evidence (``laminae.retrieval.fusion_evidence``), for ``bench/fusion_fit.py``."""
        return retrieval.fusion_evidence(self._sources, query, q, rows, documents, granularity, signals)

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
        a = moves.check("documents", locals())
        return hops.documents(self._sources, query, a["k"], a["granularity"], a["scope"], a["anchors"], a["mode"],
                              a["direction"])

    def components(self, query, documents: Sequence[str], k: int = 10, granularity: int = 2,
                   mode: str = "auto") -> list[Hit]:
        """FiF component-level hop: components of these documents scored at layer g (1: own vector,
        2, the default: max over its subcomponents) with ``mode="dense"``; ``hybrid`` (what
        ``auto`` means for a text query) is ``retrieve``'s fusion at that granularity, over these
        documents."""
        a = moves.check("components", locals())
        return hops.components(self._sources, query, a["documents"], a["k"], a["granularity"], a["mode"])

    def hop(self, query, k: int = 10, anchors: Sequence[str] | None = None, start: int = 3, linked: int = 10,
            granularity: int = 2, direction: str = "both", mode: str = "auto") -> list[Hit]:
        """FiF's local hop, whole: from the ``anchors`` (document or component ids; their documents)
        or, without them, from the best ``start`` documents for the query (``documents`` at this
        granularity), to the ``linked`` best documents linked to or from them (``direction``), then
        the best ``k`` components of all of those (``components`` at this granularity)."""
        a = moves.check("hop", locals())
        return hops.hop(self._sources, query, a["k"], a["anchors"], a["start"], a["linked"], a["granularity"],
                        a["direction"], a["mode"])

    # -- LILaC ---------------------------------------------------------------------------------
    def component_query_max(self, queries: np.ndarray, rows: np.ndarray | None = None,
                            exact: bool = False) -> np.ndarray:
        """M[c, q]: max similarity of subquery q over component c's subcomponents (the component's
        own vector when it has none), for the given component rows (default: all). When the
        subcomponents are searched through their codes (``laminae.vectors``), only the components the
        codes shortlist for some subquery (and those without subcomponents) are scored, exactly;
        the others are -inf."""
        return ranking.component_query_max(self.graph, queries, rows, exact)

    def beam_search(self, subqueries: Sequence, beam: int = 30, iterations: int = 1, k: int = 10) -> BeamResult:
        """LILaC late-interaction beam search over component pairs.

        An edge e = (u, v) joins two components of one document, or a component to a component of
        a document it links to; s(e) = Σ_q max over the subcomponents of u and v of sim(q, c). The
        beam starts at the ``beam`` best components (as self-pairs), then for ``iterations`` rounds
        expands every beam component along its edges and keeps the ``beam`` best edges. A
        component without edges stays as a self-pair; a subquery matched by only one endpoint
        counts that endpoint's score.
        """
        return hops.beam_search(self._sources, subqueries, beam, iterations, k)


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
    check_search(search)
    root = str(index_dir)
    manifest, latest = read_manifest(root, version)
    index = Index(root, manifest, embed, search)
    view_loading.check_at_open(index._pinned, int(index.embedder["dim"]), index.snapshot_path, latest)
    return index
