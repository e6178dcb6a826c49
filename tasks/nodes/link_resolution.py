"""Link resolution: point every ``links_to`` edge at the document its target URL really is.

Reads ``documents`` (url, final and canonical URLs), ``fetches`` (redirect chains) and the
``links_to`` rows of ``edges``; rewrites ``dst_id`` and ``resolved`` of the edges whose target
now resolves differently (a page indexed later, a redirect, a canonical URL, a removed page).
The tables are read as columns and joined in polars; Python runs only to hash each distinct URL.
"""

from __future__ import annotations

import polars as pl

from laminae.schemas.ids import document_id
from laminae.tasks.storage.index_store import IndexStore


def _read(store: IndexStore, name: str, columns: list[str], where: str | None = None) -> pl.DataFrame:
    query = store.table(name).search()
    if where:
        query = query.where(where)
    return pl.from_arrow(query.select(columns).limit(None).to_arrow())


def alias_map(store: IndexStore) -> pl.DataFrame:
    """Id of any URL a document is known by (seed, redirect hop, final, canonical) → its document id,
    as columns ``alias`` and ``document`` (one row per alias).

    A document's own id names it; otherwise the first claim wins, in the order of the documents
    table (a document's URL, then its final, then its canonical URL), then of the redirect chains
    of ``fetches`` (requested URL, then each hop), which name the document whose final URL the
    chain ended at (the last document recorded with that final URL)."""
    docs = _read(store, "documents", ["id", "url", "final_url", "canonical_url"]).with_row_index("row").with_columns(
        pl.col("row").cast(pl.Int64))
    claims = docs.unpivot(index=["id", "row"], on=["url", "final_url", "canonical_url"], variable_name="field",
                          value_name="address").with_columns(
        pl.col("field").replace_strict({"url": 0, "final_url": 1, "canonical_url": 2}, return_dtype=pl.Int64))
    claims = claims.filter(pl.col("address").is_not_null() & (pl.col("address") != ""))
    by_final = docs.filter(pl.col("final_url").is_not_null() & (pl.col("final_url") != "")).unique(
        "final_url", keep="last").select(pl.col("final_url"), pl.col("id").alias("final_id"))
    chains = _read(store, "fetches", ["url", "final_url", "redirects"], "array_length(redirects) > 0")
    hops = (chains.with_row_index("row").join(by_final, on="final_url", how="inner")
            .select(pl.col("final_id").alias("id"), pl.col("row").cast(pl.Int64) + len(docs),
                    pl.concat_list(pl.col("url"), pl.col("redirects")).alias("address"))
            .explode("address").with_columns(pl.int_range(pl.len()).over("row").alias("field")))
    claims = pl.concat([claims.select("id", "row", "field", "address"),
                        hops.select("id", "row", pl.col("field").cast(pl.Int64), "address")])
    urls = claims.select(pl.col("address").unique())
    urls = urls.with_columns(pl.Series("alias", [document_id(u) for u in urls["address"]], pl.String))
    own = docs.select(pl.col("id").alias("alias"), pl.col("id").alias("document"),
                      pl.lit(-1, pl.Int64).alias("row"), pl.lit(0, pl.Int64).alias("field"))
    named = claims.join(urls, on="address").select("alias", pl.col("id").alias("document"), "row", "field")
    return (pl.concat([own, named]).sort("row", "field").unique("alias", keep="first", maintain_order=True)
            .select("alias", "document"))


def resolve_links(store: IndexStore) -> dict[str, int]:
    """Re-resolve every link edge; returns how many changed and how many resolve in-corpus."""
    edges_tbl = store.table("edges")
    links = _read(store, "edges", edges_tbl.schema.names, "kind = 'links_to'")
    if links.height == 0:
        return {"changed": 0, "resolved": 0, "unresolved": 0}
    aliases = alias_map(store)
    resolved = links.join(aliases, left_on="target_id", right_on="alias", how="left", maintain_order="left")
    resolved = resolved.with_columns(new_dst=pl.coalesce("document", "target_id"),
                                     new_resolved=pl.col("document").is_not_null())
    changed = resolved.filter((pl.col("new_dst") != pl.col("dst_id"))
                              | (pl.col("new_resolved") != pl.col("resolved")).fill_null(True))
    if changed.height:
        updated = changed.with_columns(dst_id=pl.col("new_dst"), resolved=pl.col("new_resolved")).select(
            links.columns).to_arrow().cast(edges_tbl.schema)
        edges_tbl.merge_insert("id").when_matched_update_all().execute(updated)
    n_resolved = int(resolved["new_resolved"].sum())
    return {"changed": changed.height, "resolved": n_resolved, "unresolved": links.height - n_resolved}
