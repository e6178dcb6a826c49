"""The batch pipeline as data: ``STAGES`` (parse → pictures → video → detect → ocr → embed → summarize
→ embed documents), run in order over one batch of fetched pages by ``run_stages``; the result is
written by ``laminae.tasks.batches.write_batch``.

Reads fetch results (raw bodies from the raw store) and, through the stages, the index's stored
objects, readings and vectors; writes no table: returns the batch's documents with all their
nodes and edges, errors, new vectors and fetches (a ``ProcessedBatch``). Each stage's body lives
in the module of what it produces; the entries here adapt it to the batch (``BatchWork``), naming
the fields each reads and writes. Bad input becomes ``errors`` rows; nothing here raises for a
broken page. Every stage returns one ``StageOutput`` (documents, subcomponent rows, edges,
errors, fetches, vectors) that ``absorb`` adds to the batch. Prefect-free: ``flows/`` wraps it.
"""

from __future__ import annotations

import time
from collections import ChainMap, Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property, partial

import numpy as np

from laminae.schemas.search_text import embed_text, serialize_document
from laminae.schemas.tables import error_row
from laminae.tasks import progress
from laminae.tasks.batches import ProcessedBatch
from laminae.tasks.config import BuildSettings
from laminae.tasks.crawl.pictures import attach_images
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.embed.embedders import (
    LazyEmbedder,
    cache_key,
    cached_vectors,
    configured_model_id,
    embed_pixels,
    embed_rows,
    load_embedder,
    pixel_key,
    resolve_quantize,
    split_by_modality,
)
from laminae.tasks.nodes.document_nodes import DocumentNodes, id_maker
from laminae.tasks.nodes.objects import detect_stage
from laminae.tasks.nodes.ocr_lines import read_image_text
from laminae.tasks.nodes.pages import parse_documents
from laminae.tasks.nodes.summaries import summarize_stage
from laminae.tasks.nodes.videos import add_video_nodes
from laminae.tasks.refresh import previous_fetches
from laminae.tasks.storage.index_store import IndexStore
from laminae.tasks.storage.rawstore import RawStore


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


@dataclass(frozen=True)
class StageOutput:
    """What one stage made of its batch, for ``absorb`` to add to it: parsed ``docs`` (parse only),
    subcomponent ``rows`` and their ``edges`` (each joins its document, which is serialized again),
    ``errors`` rows, ``fetches`` of pictures and videos, new ``vectors`` and ``known`` ones (found
    in the embedding cache, and the new ones again, as the embedders add them) by cache key, and
    how many node rows it gave a vector (``embedded``). Node rows a stage completes in place (an
    image's key, a document's summary) are not in it."""

    docs: list[DocumentNodes] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    edges: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    fetches: list[FetchResult] = field(default_factory=list)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    known: dict[str, np.ndarray] = field(default_factory=dict)
    embedded: int = 0


def _parse(work: BatchWork) -> StageOutput:
    docs, errors = parse_documents(work.results, work.index_dir, work.settings, work.run_id)
    progress.current().advance("parse", len(work.results))
    return StageOutput(docs=docs, errors=errors)


def _fetch_pictures(work: BatchWork) -> StageOutput:
    fetches, problems = attach_images(work.components, work.settings.crawl, work.raw, work.seed_hosts)
    return StageOutput(fetches=fetches, errors=[
        error_row(work.run_id, url, "image", reason, message, document=comp["document_id"])
        for comp, url, reason, message in problems])


def _videos(work: BatchWork) -> StageOutput:
    found = add_video_nodes(work.docs, work.raw, work.store.files, work.settings, work.run_id, work.seed_hosts,
                            id_maker, partial(previous_fetches, work.store))
    return StageOutput(fetches=found.fetches, errors=found.problems)


def _detect(work: BatchWork) -> StageOutput:
    objects, object_edges, problems = detect_stage(work.components, work.raw, work.settings, work.store, work.run_id)
    return StageOutput(rows=objects, edges=object_edges, errors=problems)


def _read_image_text(work: BatchWork) -> StageOutput:
    found = read_image_text(work.components, work.raw, work.store.files, work.settings.ocr, work.run_id, id_maker)
    return StageOutput(rows=found.rows, edges=found.edges, errors=found.problems)


def _embedder(work: BatchWork):
    if work.embedder is None:
        work.embedder = batch_embedder(work.settings, work.store)
    return work.embedder


def _embed_nodes(work: BatchWork) -> StageOutput:
    embedder = _embedder(work)
    nodes = work.components + work.subcomponents
    text_rows, pixel_rows = split_by_modality(nodes, embedder.image_mode)
    keys = [cache_key(embedder.model_id, embed_text(r)) for r in text_rows]
    keys += [pixel_key(embedder.model_id, image_key, bbox) for _, image_key, bbox in pixel_rows]
    found = cached_vectors(work.store.table("embeddings"), keys)
    # what the embedders add lands in found; the batch's known stay as they are
    known = ChainMap(found, work.known)
    vectors = embed_rows(text_rows, embedder, known)
    vectors.update(embed_pixels(pixel_rows, embedder, known, work.raw.get))
    return StageOutput(vectors=vectors, known=found, embedded=len(nodes))


def _summarize(work: BatchWork) -> StageOutput:
    return StageOutput(errors=summarize_stage(work.docs, work.settings, work.run_id))


def _embed_documents(work: BatchWork) -> StageOutput:
    embedder = _embedder(work)
    documents = [d.document for d in work.docs]
    keys = [cache_key(embedder.model_id, embed_text(r)) for r in documents]
    found = cached_vectors(work.store.table("embeddings"), keys)
    vectors = embed_rows(documents, embedder, ChainMap(found, work.known))
    return StageOutput(vectors=vectors, known=found, embedded=len(documents))


def absorb(work: BatchWork, out: StageOutput) -> None:
    """Add what a stage made to its batch: the one place the stages' results join ``BatchWork``."""
    work.docs.extend(out.docs)
    work.errors.extend(out.errors)
    work.image_fetches.extend(out.fetches)
    work.known.update(out.known)
    work.new_vectors.update(out.vectors)
    work.rows_embedded += out.embedded
    if not out.rows:
        return
    by_doc: dict[str, list[dict]] = {}
    for row in out.rows:
        by_doc.setdefault(row["document_id"], []).append(row)
    edges_by_doc: dict[str, list[dict]] = {}
    for edge in out.edges:
        edges_by_doc.setdefault(edge["document_id"], []).append(edge)
    for d in work.docs:
        doc_id = d.document["id"]
        if doc_id in by_doc:
            d.subcomponents.extend(by_doc[doc_id])
            d.edges.extend(edges_by_doc.get(doc_id, []))
            d.document["n_subcomponents"] = len(d.subcomponents)
            serialize_document(d.document, d.components, d.subcomponents)


@dataclass(frozen=True)
class Stage:
    """One step of a batch: its entry point and the ``BatchWork`` fields it reads and writes, which
    ``tests/stages/test_pipeline.py`` checks against its code; what its ``StageOutput`` holds counts
    as writes of the fields ``absorb`` adds it to. Node rows changed in place count as
    writes of ``docs``, ``components`` or ``subcomponents``; bytes added to the raw store or files
    to the index (readings, keyframe choices) as writes of ``raw`` or ``store``. A stage that reads
    ``store`` (the index's tables and files) cannot run ahead, beside the batch before it. ``name``
    is where its seconds are reported; two steps may share one."""

    name: str
    run: Callable[[BatchWork], StageOutput]
    reads: tuple[str, ...]
    writes: tuple[str, ...]

    @property
    def reads_index(self) -> bool:
        return "store" in self.reads


STAGES: tuple[Stage, ...] = (
    Stage("parse", _parse, reads=("results", "index_dir", "settings", "run_id"), writes=("docs", "errors")),
    Stage("images", _fetch_pictures, reads=("components", "settings", "raw", "seed_hosts", "run_id"),
          writes=("components", "raw", "image_fetches", "errors")),
    Stage("video", _videos, reads=("docs", "raw", "store", "settings", "run_id", "seed_hosts"),
          writes=("docs", "raw", "store", "image_fetches", "errors")),
    Stage("detect", _detect, reads=("components", "raw", "settings", "store", "run_id", "docs"),
          writes=("components", "docs", "errors")),
    Stage("ocr", _read_image_text, reads=("components", "raw", "store", "settings", "run_id", "docs"),
          writes=("components", "docs", "store", "errors")),
    Stage("embed", _embed_nodes, reads=("embedder", "settings", "store", "components", "subcomponents", "known", "raw"),
          writes=("embedder", "components", "subcomponents", "known", "new_vectors", "rows_embedded")),
    Stage("summarize", _summarize, reads=("docs", "settings", "run_id"), writes=("docs", "errors")),
    Stage("embed", _embed_documents, reads=("embedder", "settings", "store", "docs", "known"),
          writes=("embedder", "docs", "known", "new_vectors", "rows_embedded")),
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


@contextmanager
def timed(seconds: Counter[str], name: str) -> Iterator[None]:
    """Add the seconds the block takes (raising or not) to ``seconds[name]``: how each stage of a
    batch (``run_stages``) and each whole-index step of a run (``laminae.flows.build``) is timed,
    under the names the run summary's ``seconds_by_stage`` reports."""
    started = time.perf_counter()
    try:
        yield
    finally:
        seconds[name] += time.perf_counter() - started


def run_stages(work: BatchWork, stages: Sequence[Stage]) -> BatchWork:
    """Run ``stages`` in order on ``work``, timing each under its name and adding its output
    (``absorb``)."""
    for stage in stages:
        with timed(work.seconds, stage.name):
            absorb(work, stage.run(work))
        work.stages_run.append(stage.name)
    return work


def parse_batch(results: list[FetchResult], index_dir: str, settings: BuildSettings, run_id: str,
                seed_hosts: set[str], stages: Sequence[Stage] = STAGES) -> BatchWork:
    """The stages of one batch that read no index table (parse, fetch its pictures): they may run
    beside the detection, embedding and writing of the batch before it."""
    work = BatchWork(results, index_dir, settings, run_id, seed_hosts)
    return run_stages(work, stages[:ahead_stages(stages)])


def process_batch(results: list[FetchResult], index_dir: str, settings: BuildSettings, run_id: str,
                  seed_hosts: set[str], parsed: BatchWork | None = None,
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
    cfg = resolve_quantize(settings.embed, (recorded or {}).get("model_id"))
    if recorded and recorded.get("model_id") == configured_model_id(cfg):
        return LazyEmbedder(cfg, recorded)
    return load_embedder(cfg)
