"""Benchmark a refresh's bookkeeping on a synthetic index of millions of subcomponents: seconds and peak RSS per stage.

Reads the index at ``--index DIR``; when there is none, writes one there first with
``tests.support.synthetic.make_synthetic_index`` (``--documents`` × 10 components × 10 subcomponents, no
full-text index). Then it makes the index look like what a build leaves behind where the generator
does not: a ``fetches`` row per document (1 % of them with a redirect hop, so that link
resolution reads redirect chains) and an embedding cache holding the cache key of every node plus
``--stale`` (default 30 %) stale keys, just over the default ``cache_slack`` of 25 %, so that
pruning runs as it would at a real refresh. The cache's vectors are null: pruning reads and
deletes only ``id`` (Lance reads the columns asked for, and a delete writes deletion files), so
the measured work is that of a cache of real vectors, on a fraction of the disk (11M 384-d vectors
would take 17 GB).

Then it runs a refresh in which ``--changed`` (1 %) of the documents changed, one stage per fresh
child process, so that each stage's peak RSS (``ru_maxrss``) is its own; every stage calls the
code the steps of ``laminae.tasks.run.RUN`` call, in their order:

- diff: ``previous_fetches``, ``documents_by_url``, ``plan_refresh`` over a
  ``FetchResult`` for every page (the changed ones with a new raw key, the rest answered 304 as
  the crawl leaves them), the unchanged pages' fetch rows upserted and ``delete_documents``;
- write (not bookkeeping): the changed documents' rows read back, one sentence edited in each,
  written with ``replace_documents`` 64 documents at a time (the default batch), their fetch rows
  and new cache keys added;
- prune: ``prune_embedding_cache`` with the default slack;
- links: ``resolve_links``;
- compact (not bookkeeping): ``IndexStore.compact_tables`` (LanceDB ``optimize``, nothing pruned);
- text index (only when ``--stages`` names it): ``build_text_indexes``;
- stats: ``table_stats``;
- snapshot: ``IndexStore.publish`` then ``write_snapshot`` (the reader's view of the new version);
- cleanup: ``IndexStore.clean_up`` with the default ``keep_manifests`` (table versions before the
  kept manifests, old snapshots, unreferenced raw files), with the bytes on disk before and after.

Prints per stage: wall seconds, RSS at its start (imports, index opened and, for the diff, the
crawl's results built), peak RSS, and whether a bookkeeping stage (diff, prune, links) stays
within 4 GB. Mutates the index as a refresh does: new table versions and a new manifest; when the
snapshot stage fails, ``LATEST`` is put back to the manifest before, so readers keep a snapshot.

At 10M subcomponents every stage stays within 4 GB since the writes delete and add rows instead
of merging them and the snapshot is streamed from the tables (README, Benchmarks).

    .venv/bin/python bench/refresh_scale.py --index /tmp/refresh-1m --documents 10000  # 1M subcomponents
    .venv/bin/python bench/refresh_scale.py --index /tmp/scale-10m  # 10M (bench/reader.py's index)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa

if not __package__:  # run as a file: the repository's bench and tests packages
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import Timer, arguments, table
from laminae.schemas.ids import digest
from laminae.schemas.sql import sql_list
from laminae.schemas.storage import MANIFEST_DIR
from laminae.schemas.tables import NODE_TABLES, TABLES

STAGES = ("diff", "write", "prune", "links", "compact", "text_index", "stats", "snapshot", "cleanup")
BOOKKEEPING = ("diff", "prune", "links")
LIMIT_MB = 4096
RUN_ID = "bench-refresh-scale"


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _store(index: str):
    from laminae.tasks.storage.index_store import IndexStore

    return IndexStore(index)


def _fetch_columns(store, columns: list[str]) -> pa.Table:
    return store.table("fetches").search().select(columns).limit(None).to_arrow()


def changed_urls(store, share: float, seed: int) -> list[str]:
    """The pages that changed: ``share`` of the fetched URLs, the same ones for a seed."""
    urls = np.sort(_fetch_columns(store, ["url"]).column("url").to_numpy(zero_copy_only=False))
    rng = np.random.default_rng(seed)
    return sorted(urls[rng.choice(len(urls), size=max(1, round(share * len(urls))), replace=False)].tolist())


def new_raw_key(raw_key: str) -> str:
    """The raw key of a changed page's new bytes (another at every run)."""
    return digest("changed", raw_key, size=32)


# -- preparing the index ---------------------------------------------------------------------------
def prepare(index: str, documents: int, stale: float) -> dict:
    """Write the synthetic index if there is none, a fetch row per document and the embedding cache."""
    from laminae.schemas.search_text import EMBED_FIELD, embed_text
    from laminae.tasks.embed.embedders import cache_key

    info: dict = {}
    if not (Path(index) / MANIFEST_DIR / "LATEST").exists():
        from tests.support.synthetic import make_synthetic_index

        with Timer()("generate") as generate:
            info["generated"] = make_synthetic_index(index, documents=documents, components_per_document=10,
                                                     subcomponents_per_component=10, text_index=False,
                                                     topics=max(1, documents // 100))
        info["generate_s"] = round(generate.seconds, 1)
    store = _store(index)
    fetches = store.table("fetches")
    if fetches.count_rows() == 0:
        fetched_at = datetime.now(UTC)
        for batch in store.table("documents").search().select(["id", "url"]).limit(None).to_batches(50_000):
            ids, urls = batch.column("id").to_pylist(), batch.column("url").to_pylist()
            hops = [[f"http://synthetic.test/moved/{d}"] if int(d[1:5], 16) % 100 == 0 else [] for d in ids]
            fetches.add(pa.table({
                "id": ["f" + digest(u) for u in urls], "url": urls, "final_url": urls, "redirects": hops,
                "status": pa.array([200] * len(urls), pa.int32()), "content_type": ["text/html"] * len(urls),
                "etag": [f'"{digest(d, size=8)}"' for d in ids], "last_modified": pa.nulls(len(urls), pa.string()),
                "content_hash": [digest(d, size=32) for d in ids], "raw_key": [digest(d, size=32) for d in ids],
                "size": pa.array([20_000] * len(urls), pa.int64()),
                "fetched_at": pa.array([fetched_at] * len(urls), pa.timestamp("us", tz="UTC")),
                "run_id": ["synthetic"] * len(urls), "error": pa.nulls(len(urls), pa.string()),
            }, schema=fetches.schema))
        info["fetch_rows"] = fetches.count_rows()
    cache = store.table("embeddings")
    model_id = store.metadata()["embedder"]["model_id"]
    nodes = sum(store.table(name).count_rows() for name in NODE_TABLES)
    if cache.count_rows() == 0:
        columns = ["id", "kind", EMBED_FIELD, "search_text"]
        for name in NODE_TABLES:
            for batch in store.table(name).search().select(columns).limit(None).to_batches(50_000):
                keys = [cache_key(model_id, embed_text(row)) for row in batch.to_pylist()]
                _add_cache_keys(cache, keys, model_id)
    missing = round((1 + stale) * nodes) - cache.count_rows()
    if missing > 0:
        tag = str(time.time_ns())
        for start in range(0, missing, 200_000):
            _add_cache_keys(cache, ["v" + digest("stale", tag, str(i))
                                    for i in range(start, min(missing, start + 200_000))], model_id)
    info.update(nodes=nodes, cache_rows=cache.count_rows())
    return info


def _add_cache_keys(cache, keys: list[str], model_id: str) -> None:
    """Cache rows with null vectors (see the module docstring)."""
    cache.add(pa.table({"id": keys, "model_id": [model_id] * len(keys),
                        "vector": pa.nulls(len(keys), cache.schema.field("vector").type)}, schema=cache.schema),
              on_bad_vectors="null")


# -- the stages, each run in its own process -------------------------------------------------------
def stage_diff(index: str, share: float, seed: int) -> tuple[dict, dict]:
    from laminae.tasks.batches import fetch_row
    from laminae.tasks.crawl.results import FetchResult
    from laminae.tasks.refresh import documents_by_url, plan_refresh, previous_fetches

    store = _store(index)
    changed = set(changed_urls(store, share, seed))
    # what the crawl hands the diff: a result for every page, the unchanged ones answered 304
    rows = _fetch_columns(store, ["url", "final_url", "etag", "raw_key", "size", "content_type"]).to_pylist()
    results = [FetchResult(url=r["url"], final_url=r["final_url"], status=200, content_type=r["content_type"],
                           etag=r["etag"], size=r["size"], raw_key=new_raw_key(r["raw_key"]), not_modified=False)
               if r["url"] in changed else
               FetchResult(url=r["url"], final_url=r["final_url"], status=304, content_type=r["content_type"],
                           etag=r["etag"], size=r["size"], raw_key=r["raw_key"], not_modified=True)
               for r in rows]
    del rows
    start_mb = rss_mb()
    timer = Timer()
    with timer("previous_fetches"):
        previous = previous_fetches(store)
    with timer("documents_by_url"):
        by_url = documents_by_url(store)
    with timer("plan_refresh"):
        plan = plan_refresh(results, previous, by_url, 0, False)
    with timer("record_unchanged"):
        store.upsert("fetches", [fetch_row(r, RUN_ID) for r in plan.unchanged])
        store.delete_documents(plan.removed)
    return timer.seconds(), {"start_mb": start_mb, "pages": len(results), "changes": dict(plan.changes)}


def stage_write(index: str, share: float, seed: int) -> tuple[dict, dict]:
    from laminae.schemas.search_text import embed_text
    from laminae.tasks.batches import fetch_row
    from laminae.tasks.config import BuildSettings
    from laminae.tasks.crawl.results import FetchResult
    from laminae.tasks.embed.embedders import cache_key

    store = _store(index)
    model_id = store.metadata()["embedder"]["model_id"]
    urls = changed_urls(store, share, seed)
    raw_keys = dict(zip(*(store.table("fetches").search().where(f"url IN ({sql_list(urls)})").select(
        ["url", "raw_key"]).limit(None).to_arrow().column(c).to_pylist() for c in ("url", "raw_key")), strict=True))
    by_url = dict(zip(*(store.table("documents").search().where(f"url IN ({sql_list(urls)})").select(
        ["url", "id"]).limit(None).to_arrow().column(c).to_pylist() for c in ("url", "id")), strict=True))
    doc_ids = [by_url[u] for u in urls if u in by_url]
    start_mb = rss_mb()
    timer = Timer()
    with timer("replace_documents"):
        size = BuildSettings().batch_documents
        new_keys: list[str] = []
        for lo in range(0, len(doc_ids), size):
            ids = doc_ids[lo:lo + size]
            batches = {name: _rows(store, name, ids)
                       for name in ("documents", "components", "subcomponents", "edges")}
            edited: set[str] = set()
            for row in batches["subcomponents"]:
                if row["document_id"] not in edited:
                    edited.add(row["document_id"])
                    row["text"] = row["search_text"] = f"{row['text']} Edited in run {seed}."
                    new_keys.append(cache_key(model_id, embed_text(row)))
            store.replace_documents(batches, ids)
        store.upsert("fetches", [fetch_row(FetchResult(url=u, final_url=u, status=200, content_type="text/html",
                                                       raw_key=new_raw_key(raw_keys[u]), size=20_000), RUN_ID)
                                 for u in urls])
        _add_cache_keys(store.table("embeddings"), new_keys, model_id)
    return timer.seconds(), {"start_mb": start_mb, "documents": len(doc_ids)}


def _rows(store, name: str, document_ids: list[str]) -> list[dict]:
    """A table's rows of these documents as the pipeline hands them to the store (vectors as numpy)."""
    column = "id" if name == "documents" else "document_id"
    data = store.table(name).search().where(f"{column} IN ({sql_list(document_ids)})").limit(None).to_arrow()
    rows = data.drop_columns(["vector"]).to_pylist() if "vector" in data.column_names else data.to_pylist()
    if "vector" in data.column_names and data.num_rows:
        vectors = data.column("vector").combine_chunks().flatten().to_numpy().reshape(data.num_rows, -1)
        for row, vector in zip(rows, vectors, strict=True):
            row["vector"] = vector
    return rows


def stage_prune(index: str) -> tuple[dict, dict]:
    from laminae.tasks.config import BuildSettings
    from laminae.tasks.storage.upkeep import prune_embedding_cache

    store = _store(index)
    embedder = store.metadata()["embedder"]
    before = store.table("embeddings").count_rows()
    start_mb = rss_mb()
    timer = Timer()
    with timer("prune_embedding_cache"):
        pruned = prune_embedding_cache(index, embedder["model_id"], embedder["image_mode"],
                                       BuildSettings().embed.cache_slack)
    return timer.seconds(), {"start_mb": start_mb, "cache_rows": before, "pruned": pruned}


def stage_links(index: str) -> tuple[dict, dict]:
    from laminae.tasks.nodes.link_resolution import resolve_links

    store = _store(index)
    start_mb = rss_mb()
    timer = Timer()
    with timer("resolve_links"):
        links = resolve_links(store)
    return timer.seconds(), {"start_mb": start_mb, **links}


def stage_compact(index: str) -> tuple[dict, dict]:
    store = _store(index)
    start_mb = rss_mb()
    timer = Timer()
    with timer("compact_tables"):
        store.compact_tables()
    return timer.seconds(), {"start_mb": start_mb}


def _disk_gb(index: str) -> float:
    return round(sum(f.stat().st_size for f in Path(index).rglob("*") if f.is_file()) / 1e9, 2)


def stage_cleanup(index: str) -> tuple[dict, dict]:
    from laminae.tasks.config import BuildSettings

    store = _store(index)
    start_mb, before = rss_mb(), _disk_gb(index)
    timer = Timer()
    with timer("clean_up"):
        deleted = store.clean_up(BuildSettings().keep_manifests)
    return timer.seconds(), {"start_mb": start_mb, "disk_gb_before": before, "disk_gb_after": _disk_gb(index),
                             "versions_deleted": sum(deleted.values())}


def stage_text_index(index: str) -> tuple[dict, dict]:
    store = _store(index)
    start_mb = rss_mb()
    timer = Timer()
    with timer("build_text_indexes"):
        store.build_text_indexes()
    return timer.seconds(), {"start_mb": start_mb}


def stage_stats(index: str) -> tuple[dict, dict]:
    from laminae.stats import table_stats

    store = _store(index)
    start_mb = rss_mb()
    timer = Timer()
    with timer("table_stats"):
        stats = table_stats({name: store.table(name) for name in TABLES})
    return timer.seconds(), {"start_mb": start_mb, "documents": stats["documents"]}


def stage_snapshot(index: str) -> tuple[dict, dict]:
    store = _store(index)
    start_mb = rss_mb()
    timer = Timer()
    with timer("publish"):
        version = store.publish(RUN_ID, {"run": {"status": "success", "bench": "refresh_scale"}})
    with timer("write_snapshot"):
        store.write_snapshot(version)
    return timer.seconds(), {"start_mb": start_mb, "version": version}


def run_stage(args: argparse.Namespace) -> dict:
    """One stage in this process (a child of ``main``)."""
    from laminae import flows  # noqa: F401 - the builder's imports, as a refresh has them
    from laminae.tasks import pipeline  # noqa: F401

    base_mb = rss_mb()
    if args.stage == "prepare":
        timer = Timer()
        with timer("prepare"):
            info = prepare(args.index, args.documents, args.stale)
        seconds, info = timer.seconds(), {"start_mb": base_mb, **info}
    elif args.stage in ("diff", "write"):
        seconds, info = globals()[f"stage_{args.stage}"](args.index, args.changed, args.seed)
    else:
        seconds, info = globals()[f"stage_{args.stage}"](args.index)
    return {"stage": args.stage, "seconds": {k: round(v, 2) for k, v in seconds.items()},
            "import_mb": round(base_mb), "peak_mb": round(peak_mb()), **info}


def child(args: argparse.Namespace, stage: str) -> tuple[dict | None, str]:
    command = [sys.executable, __file__, "--index", args.index, "--documents", str(args.documents),
               "--changed", str(args.changed), "--stale", str(args.stale), "--seed", str(args.seed),
               "--stage", stage]
    proc = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PREFECT_LOGGING_LEVEL": "ERROR"})
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        why = "killed by SIGKILL (out of memory?)" if proc.returncode == -9 else f"exit {proc.returncode}"
        return None, f"{why}\n{proc.stderr[-3000:]}"
    return json.loads(line[len("RESULT "):]), ""


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--index", required=True, help="the synthetic index (written there when absent)")
    parser.add_argument("--documents", type=int, default=100_000,
                        help="documents of a new index (× 10 components × 10 subcomponents)")
    parser.add_argument("--changed", type=float, default=0.01, help="share of the documents that changed")
    parser.add_argument("--stale", type=float, default=0.30, help="stale share of the embedding cache before pruning")
    parser.add_argument("--seed", type=int, default=0, help="picks the changed documents; another seed, others")
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=[s for s in STAGES if s != "text_index"],
                        help="the stages to run, in the refresh's order (default: all but text_index)")
    parser.add_argument("--stage", choices=("prepare", *STAGES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.index = str(Path(args.index).resolve())
    if args.stage:
        print("RESULT " + json.dumps(run_stage(args)))
        return 0

    prepared, error = child(args, "prepare")
    if prepared is None:
        print(f"preparing {args.index} failed: {error}", file=sys.stderr)
        return 1
    print(f"{args.index}: {prepared['nodes']} nodes, embedding cache {prepared['cache_rows']} rows; "
          f"prepared in {prepared['seconds']['prepare']:.1f} s", flush=True)
    latest = Path(args.index) / MANIFEST_DIR / "LATEST"
    results = []
    for stage in (s for s in STAGES if s in args.stages):
        before = latest.read_text()
        result, error = child(args, stage)
        if result is None:
            if stage == "snapshot" and latest.read_text() != before:
                latest.write_text(before)  # the new manifest has no snapshot: readers keep the last one
            print(f"{stage}: failed, {error}", file=sys.stderr)
            results.append({"stage": stage, "failed": error.splitlines()[0]})
            continue
        results.append(result)
        print(f"  {stage}: {sum(result['seconds'].values()):.1f} s, peak {result['peak_mb']} MB", file=sys.stderr,
              flush=True)

    print(f"refresh with {args.changed:.0%} of the documents changed; one fresh process per stage "
          f"(RSS after imports {results[0].get('import_mb', '?')} MB)")
    rows = []
    for r in results:
        if "failed" in r:
            rows.append((r["stage"], None, None, None, "-", f"failed: {r['failed']}"))
            continue
        verdict = ("yes" if r["peak_mb"] <= LIMIT_MB else "NO") if r["stage"] in BOOKKEEPING else "-"
        parts = ", ".join(f"{k} {v:.2f}" for k, v in r["seconds"].items())
        extra = {k: v for k, v in r.items() if k not in ("stage", "seconds", "import_mb", "peak_mb", "start_mb")}
        rows.append((r["stage"], sum(r["seconds"].values()), r["start_mb"], r["peak_mb"], verdict,
                     f"{parts}  {json.dumps(extra)}"))
    print(table(["stage", "seconds", "start MB", "peak MB", "≤ 4 GB", "parts"], rows, formats={"start MB": ".0f"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
