"""Counts of an index's tables: rows per layer and kind, edges per kind, resolved links, errors and warnings.

Reads LanceDB tables (any version the caller has checked out); writes nothing.
"""

from __future__ import annotations

import pyarrow.compute as pc

from laminae.schemas.tables import COMPONENT_KINDS, EDGE_KINDS, SUBCOMPONENT_KINDS


def _value_counts(tbl, column: str, where: str | None = None) -> dict[str, int]:
    if tbl.count_rows() == 0:
        return {}
    query = tbl.search().select([column]).limit(None)
    data = (query.where(where) if where else query).to_arrow().column(column)
    counts = pc.value_counts(data).to_pylist()
    return {str(c["values"]): int(c["counts"]) for c in counts}


def table_stats(tables: dict) -> dict:
    """Stats of ``tables`` (name → LanceDB table): the numbers ``laminae stats`` prints."""
    docs = tables["documents"]
    comps = _value_counts(tables["components"], "kind")
    subs = _value_counts(tables["subcomponents"], "kind")
    edges = _value_counts(tables["edges"], "kind")
    links = tables["edges"]
    n_links = edges.get("links_to", 0)
    resolved = links.count_rows("kind = 'links_to' AND resolved = true") if n_links else 0
    errors = _value_counts(tables["errors"], "stage", "severity = 'error'") if "errors" in tables else {}
    warnings = _value_counts(tables["errors"], "stage", "severity = 'warning'") if "errors" in tables else {}
    return {
        "documents": docs.count_rows(),
        "components": {k: comps.get(k, 0) for k in (*COMPONENT_KINDS, *sorted(set(comps) - set(COMPONENT_KINDS)))},
        "subcomponents": {
            k: subs.get(k, 0) for k in (*SUBCOMPONENT_KINDS, *sorted(set(subs) - set(SUBCOMPONENT_KINDS)))
        },
        "edges": {k: edges.get(k, 0) for k in EDGE_KINDS},
        "links_to_resolved": resolved,
        "links_to_unresolved": n_links - resolved,
        "errors_by_stage": errors,  # rows of the errors table by stage: failures
        "warnings_by_stage": warnings,  # and what was indexed with a caveat (a repaired PDF, OCR used)
    }
