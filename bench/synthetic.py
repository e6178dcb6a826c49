"""Synthetic indexes for reader tests and benchmarks: random unit vectors in the real schemas.

Writes an index (documents, components, subcomponents, links_to edges; no contains edges,
which parent ids imply,
manifest) into a directory through ``IndexStore``; reads nothing. Deterministic for a seed.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from laminae.schemas.ids import digest
from laminae.schemas.tables import table_schemas
from laminae.tasks.storage.index_store import IndexStore

MODEL_ID = "synthetic/random-unit-vectors"


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _vector_column(v: np.ndarray) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1), pa.float32()), v.shape[1])


def make_synthetic_index(path: str, *, documents: int, components_per_document: int,
                         subcomponents_per_component: int, dim: int = 384, links_per_document: int = 3,
                         seed: int = 0, chunk_documents: int = 2000, text_index: bool = True,
                         snapshot: bool = True) -> dict:
    """Write a synthetic index; returns its sizes. Every 10th sentence mentions a rare word; a
    component's search text holds its subcomponents' (as a built one does)."""
    rng = np.random.default_rng(seed)
    store = IndexStore(path)
    store.prepare({"model_id": MODEL_ID, "dim": dim, "image_mode": "text_proxy"})
    schemas = table_schemas(dim)
    kinds = np.array(["paragraph", "table", "image"])
    sub_kinds = {"paragraph": "sentence", "table": "row", "image": "object"}
    doc_ids = [f"d{digest(str(seed), str(i), size=8)}" for i in range(documents)]
    counts = {"documents": 0, "components": 0, "subcomponents": 0, "edges": 0}
    for lo in range(0, documents, chunk_documents):
        hi = min(documents, lo + chunk_documents)
        n_docs = hi - lo
        n_comp = n_docs * components_per_document
        n_sub = n_comp * subcomponents_per_component
        docs = doc_ids[lo:hi]
        comp_doc = np.repeat(np.arange(lo, hi), components_per_document)
        comp_ids = [f"c{d}-{j}" for d in range(lo, hi) for j in range(components_per_document)]
        comp_kind = kinds[rng.integers(0, 3, n_comp)]
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
                                   "vector": _vector_column(_unit(rng, n_docs, dim))}),
            "components": pa.table({"id": comp_ids, "document_id": [doc_ids[d] for d in comp_doc],
                                    "parent_id": [doc_ids[d] for d in comp_doc], "kind": comp_kind.tolist(),
                                    "ordinal": np.tile(np.arange(components_per_document), n_docs).astype(np.int32),
                                    "text": [f"component {c}" for c in comp_ids],
                                    "search_text": [f"component {c}\n" + "\n".join(
                                        sub_text[j * subcomponents_per_component:(j + 1) * subcomponents_per_component])
                                        for j, c in enumerate(comp_ids)],
                                    "vector": _vector_column(_unit(rng, n_comp, dim))}),
            "subcomponents": pa.table({"id": sub_ids, "document_id": [doc_ids[comp_doc[p]] for p in sub_parent],
                                       "parent_id": [comp_ids[p] for p in sub_parent],
                                       "kind": [sub_kinds[comp_kind[p]] for p in sub_parent],
                                       "ordinal": np.tile(np.arange(subcomponents_per_component), n_comp).astype(np.int32),
                                       "text": sub_text, "search_text": sub_text, "vector": _vector_column(_unit(rng, n_sub, dim))}),
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
    if text_index:
        store.build_text_indexes()
    version = store.publish("synthetic", {"run": {"status": "success", "synthetic": counts}})
    if snapshot:
        store.write_snapshot(version)
    return counts
