"""Link resolution: point every ``links_to`` edge at the document its target URL really is.

Reads ``documents`` (url, final and canonical URLs), ``fetches`` (redirect chains) and the
``links_to`` rows of ``edges``; rewrites ``dst_id`` and ``resolved`` of the edges whose target
now resolves differently (a page indexed later, a redirect, a canonical URL, a removed page).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from laminae.schemas.ids import document_id
from laminae.tasks.storage.index_store import IndexStore


def alias_map(store: IndexStore) -> dict[str, str]:
    """Id of any URL a document is known by (seed, redirect hop, final, canonical) → its document id."""
    docs = store.table("documents").search().select(["id", "url", "final_url", "canonical_url"]).limit(None).to_arrow()
    aliases: dict[str, str] = {}
    by_final: dict[str, str] = {}
    for row in docs.to_pylist():
        for url in (row["url"], row["final_url"], row["canonical_url"]):
            if url:
                aliases.setdefault(document_id(url), row["id"])
        if row["final_url"]:
            by_final[row["final_url"]] = row["id"]
    fetches = store.table("fetches").search().where("array_length(redirects) > 0").select(
        ["url", "final_url", "redirects"]).limit(None).to_arrow()
    for row in fetches.to_pylist():
        doc = by_final.get(row["final_url"] or "")
        if doc:
            for url in [row["url"], *(row["redirects"] or [])]:
                aliases.setdefault(document_id(url), doc)
    for doc in docs.column("id").to_pylist():
        aliases[doc] = doc
    return aliases


def resolve_links(store: IndexStore) -> dict[str, int]:
    """Re-resolve every link edge; returns how many changed and how many resolve in-corpus."""
    edges_tbl = store.table("edges")
    links = edges_tbl.search().where("kind = 'links_to'").limit(None).to_arrow()
    if links.num_rows == 0:
        return {"changed": 0, "resolved": 0, "unresolved": 0}
    aliases = alias_map(store)
    keys = pa.array(list(aliases.keys()), pa.string())
    values = pa.array(list(aliases.values()), pa.string())
    target = links.column("target_id")
    index = pc.index_in(target, value_set=keys)
    mapped = pc.take(values, index)
    new_dst = pc.coalesce(mapped, target)
    new_resolved = pc.is_valid(index)
    changed = pc.or_(
        pc.not_equal(new_dst, links.column("dst_id")),
        pc.fill_null(pc.not_equal(new_resolved, links.column("resolved")), True),
    )
    n_changed = pc.sum(changed).as_py() or 0
    if n_changed:
        updated = links.set_column(links.schema.get_field_index("dst_id"), "dst_id", new_dst)
        updated = updated.set_column(updated.schema.get_field_index("resolved"), "resolved", new_resolved)
        updated = updated.filter(changed)
        edges_tbl.merge_insert("id").when_matched_update_all().execute(updated)
    n_resolved = pc.sum(new_resolved).as_py() or 0
    return {"changed": n_changed, "resolved": n_resolved, "unresolved": links.num_rows - n_resolved}
