"""Synthetic indexes for reader tests and benchmarks: unit vectors in the real schemas.

Writes an index (documents, components, subcomponents, links_to edges; no contains edges,
which parent ids imply, manifest, reader snapshot) into a directory through ``IndexStore``; reads
nothing. Deterministic for a seed. Written in streaming fashion: ``chunk_documents`` documents at a
time go to the tables and, through ``laminae.snapshot_writer``, to the snapshot, so 10M
subcomponents never sit in memory at once.

Vectors are random unit vectors (``topics=0``, the default: no structure, every similarity near
0), or, with ``topics=T``, clustered as embeddings of real text are: each document draws one of T
topic directions and lies near it (cosine about 0.8), each of its components and subcomponents
near its document (about 0.7), so passages of one document resemble each other, documents of a
topic less, other topics not at all. ``query_near`` makes questions for such an index: a stored
subcomponent's vector plus noise (cosine about 0.8 to it), i.e. a question that has an answer.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from laminae.schemas.ids import digest
from laminae.schemas.storage import snapshot_dir
from laminae.schemas.tables import table_schemas
from laminae.snapshot_writer import SnapshotWriter
from laminae.tasks.storage.index_store import IndexStore

MODEL_ID = "synthetic/random-unit-vectors"


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _near(rng: np.random.Generator, centers: np.ndarray, noise: float) -> np.ndarray:
    """Unit vectors around ``centers`` (unit rows): cosine to its center about 1 / sqrt(1 + noise²)."""
    v = rng.standard_normal(centers.shape, dtype=np.float32)
    v *= noise / np.linalg.norm(v, axis=1, keepdims=True)
    v += centers
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def query_near(rng: np.random.Generator, vectors: np.ndarray, n: int, noise: float = 0.75) -> np.ndarray:
    """``n`` questions with an answer: random rows of ``vectors`` (may be a memory map) plus noise."""
    rows = np.sort(rng.choice(len(vectors), size=n, replace=False))
    return _near(rng, np.asarray(vectors[rows], dtype=np.float32), noise)[rng.permutation(n)]


def _vector_column(v: np.ndarray) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1), pa.float32()), v.shape[1])


def make_synthetic_index(path: str, *, documents: int, components_per_document: int,
                         subcomponents_per_component: int, dim: int = 384, links_per_document: int = 3,
                         seed: int = 0, chunk_documents: int = 2000, text_index: bool = True,
                         snapshot: bool = True, topics: int = 0) -> dict:
    """Write a synthetic index; returns its sizes. Every 10th sentence mentions a rare word; a
    component's search text holds its subcomponents' (as a built one does). ``topics``: 0 for
    random vectors, else clustered around that many topic directions (see the module)."""
    rng = np.random.default_rng(seed)
    store = IndexStore(path)
    store.prepare({"model_id": MODEL_ID, "dim": dim, "image_mode": "text_proxy"})
    topic_vectors = _unit(rng, topics, dim) if topics else None
    n_comps = documents * components_per_document
    version = store.next_manifest_version()
    writer = SnapshotWriter(snapshot_dir(path, version), (documents, n_comps, n_comps * subcomponents_per_component),
                            dim) if snapshot else None
    links: list[np.ndarray] = []
    schemas = table_schemas(dim)
    kinds = np.array(["paragraph", "table", "image"])
    sub_kinds = {"paragraph": "sentence", "table": "row", "image": "object"}
    doc_ids = [f"d{digest(str(seed), str(i), size=8)}" for i in range(documents)]
    counts = {"documents": 0, "components": 0, "subcomponents": 0, "edges": 0}
    for lo in range(0, documents, chunk_documents):
        hi = min(documents, lo + chunk_documents)
        n_docs = hi - lo
        n_comp = n_docs * components_per_document
        docs = doc_ids[lo:hi]
        comp_doc = np.repeat(np.arange(lo, hi), components_per_document)
        comp_ids = [f"c{d}-{j}" for d in range(lo, hi) for j in range(components_per_document)]
        comp_kind = kinds[rng.integers(0, 3, n_comp)]
        if topic_vectors is None:
            vectors = [_unit(rng, n_docs, dim), _unit(rng, n_comp, dim), _unit(rng, n_comp * subcomponents_per_component,
                                                                                dim)]
        else:
            doc_v = _near(rng, topic_vectors[rng.integers(0, topics, n_docs)], 0.75)
            vectors = [doc_v, _near(rng, np.repeat(doc_v, components_per_document, axis=0), 1.0),
                       _near(rng, np.repeat(doc_v, components_per_document * subcomponents_per_component, axis=0),
                             1.0)]
        sub_parent = np.repeat(np.arange(n_comp), subcomponents_per_component)
        sub_ids = [f"s{c}-{j}" for c in comp_ids for j in range(subcomponents_per_component)]
        sub_text = [f"sentence {i} of {comp_ids[p]}" + (f" keyword{i % 997}" if i % 10 == 0 else "")
                    for i, p in zip(range(len(sub_ids)), sub_parent, strict=True)]
        tables = {
            "documents": pa.table({"id": docs, "kind": ["html"] * n_docs,
                                   "url": [f"http://synthetic.test/{d}" for d in docs],
                                   "title": [f"Document {i}" for i in range(lo, hi)],
                                   "text": [f"Document {i}" for i in range(lo, hi)],
                                   "search_text": [f"Document {i}" for i in range(lo, hi)],
                                   "vector": _vector_column(vectors[0])}),
            "components": pa.table({"id": comp_ids, "document_id": [doc_ids[d] for d in comp_doc],
                                    "parent_id": [doc_ids[d] for d in comp_doc], "kind": comp_kind.tolist(),
                                    "ordinal": np.tile(np.arange(components_per_document), n_docs).astype(np.int32),
                                    "text": [f"component {c}" for c in comp_ids],
                                    "search_text": [f"component {c}\n" + "\n".join(
                                        sub_text[j * subcomponents_per_component:(j + 1) * subcomponents_per_component])
                                        for j, c in enumerate(comp_ids)],
                                    "vector": _vector_column(vectors[1])}),
            "subcomponents": pa.table({"id": sub_ids, "document_id": [doc_ids[comp_doc[p]] for p in sub_parent],
                                       "parent_id": [comp_ids[p] for p in sub_parent],
                                       "kind": [sub_kinds[comp_kind[p]] for p in sub_parent],
                                       "ordinal": np.tile(np.arange(subcomponents_per_component), n_comp).astype(np.int32),
                                       "text": sub_text, "search_text": sub_text, "vector": _vector_column(vectors[2])}),
        }
        src = rng.integers(0, n_comp, n_docs * links_per_document)
        dst = rng.integers(0, documents, n_docs * links_per_document)
        link_rows = {"id": [f"e{lo}-{i}" for i in range(len(src))], "kind": ["links_to"] * len(src),
                     "src_id": [comp_ids[s] for s in src], "src_layer": np.ones(len(src), np.int8),
                     "dst_id": [doc_ids[d] for d in dst], "document_id": [doc_ids[comp_doc[s]] for s in src],
                     "target_url": [f"http://synthetic.test/{doc_ids[d]}" for d in dst],
                     "target_id": [doc_ids[d] for d in dst], "resolved": np.ones(len(src), bool)}
        for name, data in tables.items():
            full = pa.table({f.name: data.column(f.name) if f.name in data.column_names
                             else pa.nulls(data.num_rows, f.type) for f in schemas[name]}, schema=schemas[name])
            store.table(name).add(full)
            counts[name] += full.num_rows
        edges = pa.table({f.name: pa.array(link_rows[f.name], f.type) if f.name in link_rows
                          else pa.nulls(len(src), f.type) for f in schemas["edges"]}, schema=schemas["edges"])
        store.table("edges").add(edges)
        counts["edges"] += edges.num_rows
        if writer is not None:
            comp_rows = np.arange(lo * components_per_document, hi * components_per_document)
            writer.add(0, ids=docs, kinds=tables["documents"].column("kind"), text=tables["documents"].column("text"),
                       vectors=vectors[0], doc=np.arange(lo, hi), parent=np.full(n_docs, -1),
                       title=tables["documents"].column("title"), url=tables["documents"].column("url"))
            writer.add(1, ids=comp_ids, kinds=comp_kind.tolist(), text=tables["components"].column("text"),
                       vectors=vectors[1], doc=comp_doc, parent=comp_doc)
            writer.add(2, ids=sub_ids, kinds=tables["subcomponents"].column("kind"), text=sub_text,
                       vectors=vectors[2], doc=comp_doc[sub_parent], parent=comp_rows[sub_parent])
            links.append(np.stack([comp_doc[src], dst, comp_rows[src]], axis=1))
    if text_index:
        store.build_text_indexes()
    published = store.publish("synthetic", {"run": {"status": "success", "synthetic": counts}})
    if writer is not None:
        if published != version:
            writer.abort()
            raise RuntimeError(f"{path}: published version {published}, snapshot written for {version}")
        pairs = np.concatenate(links) if links else np.zeros((0, 3), np.int64)
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]  # the reader drops a document's links to itself
        writer.close(np.unique(pairs[:, :2], axis=0), np.unique(pairs[:, [2, 1]], axis=0))
    return counts
