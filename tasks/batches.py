"""Writing one processed batch: its documents with all their nodes and edges, new vectors and fetch
rows; and the rows that record fetches and their problems.

Reads a ``ProcessedBatch`` (what the stages of ``laminae.tasks.pipeline`` made of a batch) and
fetch results; writes the ``documents``, ``components``, ``subcomponents``, ``edges``,
``embeddings`` and ``fetches`` tables, and completes the batch's record with what writing decided
(documents written, counts, the document id each page URL now has) for the run's ``errors`` and
summary.

One record per batch travels from the stages to the writer and to the run's summary: the stages
themselves share a ``BatchWork``, which also holds the batch's store handles and loaded model
and never leaves the process that ran them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from laminae.schemas.ids import digest
from laminae.schemas.tables import duplicate_row, error_row
from laminae.tasks import progress
from laminae.tasks.crawl.formats import PAGE_TYPES
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.nodes.document_nodes import DocumentNodes
from laminae.tasks.storage.index_store import IndexStore


@dataclass
class ProcessedBatch:
    """One batch: what the stages made of it (``process_batch``), then what writing it decided
    (``write_batch``: ``documents``, ``counts``, ``resolved``, the ``write`` seconds, duplicates
    among ``errors``)."""

    docs: list[DocumentNodes]
    errors: list[dict]
    new_vectors: dict[str, np.ndarray]
    fetches: list[FetchResult]
    seconds: dict[str, float]
    model_id: str  # the embedder of ``new_vectors``
    embedded: int = 0
    reused: int = 0
    documents: int = 0  # written; a document an earlier batch wrote is not
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
                                  f"{res.content_type} (declared {res.declared_type}) is not a format laminae reads (HTML, PDF, Markdown, text, CSV, Word, PowerPoint, Excel, EPUB, video); skipped"))
    return rows


def write_batch(batch: ProcessedBatch, index_dir: str, run_id: str, seen: set[str]) -> ProcessedBatch:
    """Write one processed batch: its documents (all their nodes and edges replaced), new vectors
    and fetch rows; returns ``batch`` with what was written. ``seen`` holds the documents written
    earlier in this run; a document already in it (the same canonical URL reached by another URL)
    is skipped with a warning."""
    started = time.perf_counter()
    docs = []
    for d in batch.docs:
        doc_id = d.document["id"]
        if doc_id in seen:  # written by an earlier batch: drop this copy and the problems it had
            batch.errors = [e for e in batch.errors
                            if e["document_id"] != doc_id or e["reason"] == "duplicate_document"]
            batch.errors.append(duplicate_row(run_id, d.document["url"], doc_id))
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
    batch.resolved = {e["url"]: e["document_id"] for e in batch.errors if e["reason"] == "duplicate_document"}
    batch.resolved.update((d.document["url"], d.document["id"]) for d in docs)
    batch.documents = len(docs)
    batch.counts = {
        "documents": len(docs),
        "components": sum(len(d.components) for d in docs),
        "subcomponents": sum(len(d.subcomponents) for d in docs),
        "edges": sum(len(d.edges) for d in docs),
    }
    batch.seconds = {**batch.seconds, "write": time.perf_counter() - started}
    return batch
