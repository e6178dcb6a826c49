"""Retrieval quality: every reader strategy against the shared development sets and their BM25.

Reads ``../shared/bench/wtq-dev`` (table questions) and ``../shared/bench/hybridqa-dev``
(multi-hop: table rows, then the passage a cell links to); serves each on 127.0.0.1 and builds its
index with ``laminae build`` defaults in a fresh process (hybridqa-dev with ``--follow-links 1``),
or reuses an index given with ``--index SET=DIR``. Runs each strategy through the public reader,
writes one run file per strategy into ``--out`` (default: a temporary folder), scores them with
the set's own ``score.py`` and prints one table per set, with the set's ``baseline_bm25.py``
(and its one-hop link expansion, where the set has one) run in the same invocation, and ms per
query. Pages and questions are read from the shared folder, never copied.

    .venv/bin/python bench/quality.py [--sets wtq-dev,hybridqa-dev] [--index wtq-dev=DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import laminae  # noqa: E402
from laminae.flows.demo import SiteServer  # noqa: E402

SHARED = ROOT.parent / "shared" / "bench"
SETS = {"wtq-dev": {"follow_links": 0}, "hybridqa-dev": {"follow_links": 1}}
LAYER2_DEPTH = 50  # layer-2 hits read to find 10 distinct components


def build_index(bench: Path, index: Path, follow_links: int) -> float:
    """Serve the set's corpus and build its index with the CLI's defaults; returns seconds."""
    with SiteServer(bench / "corpus") as server:
        seeds = index.parent / f"{index.name}-seeds.txt"
        lines = (bench / "urls.txt").read_text().splitlines()
        seeds.write_text("\n".join(server.base_url + line.split("/", 3)[3] for line in lines if line.strip()))
        started = time.perf_counter()
        cmd = [str(Path(sys.executable).parent / "laminae"), "build", "--seeds", str(seeds), "--index", str(index),
               "--progress", "off"]
        if follow_links:
            cmd += ["--follow-links", str(follow_links)]
        subprocess.run(cmd, check=True)
        return time.perf_counter() - started


def hits_to_items(hits: list[laminae.index.Hit]) -> list[dict]:
    return [{"doc_url": h.extra.get("url") or h.document_id, "text": h.text or "", "id": h.id} for h in hits]


def mapped(index: laminae.Index, hits: list[laminae.index.Hit], k: int = 10) -> list[dict]:
    """Layer-2 hits reduced to their first ``k`` distinct parent components."""
    g = index.graph
    subs, comps = g.layers[2], g.layers[1]
    out, seen = [], set()
    for hit in hits:
        parent = int(subs.parent[subs.position[hit.id]])
        if parent < 0 or parent in seen:
            continue
        seen.add(parent)
        doc = int(comps.doc[parent])
        out.append({"doc_url": g.urls[doc].as_py(), "text": comps.text[parent].as_py() or "",
                    "id": str(comps.ids[parent])})
        if len(out) == k:
            break
    return out


def fif_hop(index: laminae.Index, q: str, mode: str) -> list[laminae.index.Hit]:
    """FiF local hop: the best 3 documents, the 10 best documents linked to or from them, their components."""
    start = [h.id for h in index.documents(q, k=3, granularity=2, mode=mode)]
    linked = index.documents(q, k=10, granularity=2, scope="local", anchors=start, mode=mode) if start else []
    return index.components(q, start + [h.id for h in linked], k=10, granularity=2, mode=mode)


def fif(granularity: int, mode: str) -> Callable[[laminae.Index, str], list[dict]]:
    """FiF global: the 30 best documents at granularity g, then their 10 best components."""
    def run(ix: laminae.Index, q: str) -> list[dict]:
        docs = [h.id for h in ix.documents(q, k=30, granularity=granularity, mode=mode)]
        return hits_to_items(ix.components(q, docs, k=10, granularity=max(granularity, 1), mode=mode))
    return run


def strategies() -> dict[str, Callable[[laminae.Index, str], list[dict]]]:
    s: dict[str, Callable[[laminae.Index, str], list[dict]]] = {
        "search(q) default = retrieve(q)": lambda ix, q: hits_to_items(ix.search(q, k=10)),
    }
    for layer in (1, 2):
        for mode in ("dense", "fts", "hybrid"):
            if layer == 1:
                s[f"search layer=1 {mode}"] = (lambda m: lambda ix, q: hits_to_items(ix.search(q, 1, 10, mode=m)))(mode)
            else:
                s[f"search layer=2 {mode}, mapped"] = (lambda m: lambda ix, q: mapped(
                    ix, ix.search(q, 2, LAYER2_DEPTH, mode=m)))(mode)
    for mode in ("dense", "hybrid"):
        for g in (0, 1, 2):
            s[f"FiF g={g} {mode}"] = fif(g, mode)
        s[f"FiF local hop {mode}"] = (lambda m: lambda ix, q: hits_to_items(fif_hop(ix, q, m)))(mode)
    s["beam search (1 subquery)"] = lambda ix, q: hits_to_items(ix.beam_search([q], beam=30, iterations=1).components)
    return s


def score(bench: Path, run: Path, by: str) -> dict:
    out = run.with_suffix(".score.json")
    subprocess.run([sys.executable, str(bench / "score.py"), "--bench", str(bench), "--run", str(run),
                    "--level", "component", "--by", by, "--json", str(out)], check=True, capture_output=True)
    return json.loads(out.read_text())["component"]


def bm25_runs(bench: Path, out: Path) -> dict[str, Path]:
    runs = {"BM25 (the set's baseline_bm25.py)": out / f"{bench.name}-bm25.jsonl"}
    subprocess.run([sys.executable, str(bench / "baseline_bm25.py"), "--bench", str(bench), "--out",
                    str(runs["BM25 (the set's baseline_bm25.py)"])], check=True, capture_output=True)
    if "--hop" in (bench / "baseline_bm25.py").read_text():
        runs["BM25 + one-hop expansion (--hop 3)"] = out / f"{bench.name}-bm25_hop3.jsonl"
        subprocess.run([sys.executable, str(bench / "baseline_bm25.py"), "--bench", str(bench), "--out",
                        str(runs["BM25 + one-hop expansion (--hop 3)"]), "--hop", "3"], check=True, capture_output=True)
    return runs


def run_set(name: str, index_dir: Path | None, out: Path) -> None:
    bench = SHARED / name
    questions = [json.loads(line) for line in (bench / "questions.jsonl").read_text().splitlines() if line.strip()]
    if index_dir is None:
        index_dir = out / f"index-{name}"
        seconds = build_index(bench, index_dir, SETS[name]["follow_links"])
        print(f"\n{name}: built {index_dir} in {seconds:.0f} s")
    index = laminae.open(str(index_dir))
    index.search(questions[0]["question"], k=1)  # loads the model and the in-memory view
    multi_hop = any(q.get("hops") == 2 for q in questions)
    by = "hops" if multi_hop else ""
    rows = []
    for label, path in bm25_runs(bench, out).items():
        rows.append((label, score(bench, path, by), None))
    for label, strategy in strategies().items():
        path = out / f"{name}-{label.replace(' ', '_').replace('/', '_').replace('=', '')}.jsonl"
        times = []
        with path.open("w") as f:
            for q in questions:
                started = time.perf_counter()
                items = strategy(index, q["question"])
                times.append(time.perf_counter() - started)
                f.write(json.dumps({"qid": q["qid"], "results": items}) + "\n")
        rows.append((label, score(bench, path, by), 1000 * float(np.median(times))))
    bm25 = rows[0][1]["overall"]
    cols = "R@1   R@5   R@10  MRR@10" + ("  All@10 (2-hop)" if multi_hop else "")
    print(f"\n{name}: {len(questions)} questions, component level, index {index_dir}")
    print(f"{'strategy':<38} {cols}   ×BM25 R@10   ms/query (p50)")
    for label, result, ms in rows:
        o = result["overall"]
        line = f"{label:<38} {o['R@1']:.3f} {o['R@5']:.3f} {o['R@10']:.3f} {o['MRR@10']:.3f}"
        if multi_hop:
            line += f"  {result['by'].get('hops=2', {}).get('All@10', 0.0):.3f}         "
        ratio = o["R@10"] / bm25["R@10"] if bm25["R@10"] else float("nan")
        line += f"   {ratio:.2f}" + (f"          {ms:.1f}" if ms is not None else "")
        print(line, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default=",".join(SETS), help="comma list of: " + ", ".join(SETS))
    parser.add_argument("--index", action="append", default=[], metavar="SET=DIR",
                        help="reuse an index built for SET instead of building one (repeatable)")
    parser.add_argument("--out", help="folder for run files, scores and built indexes (default: temporary)")
    args = parser.parse_args()
    given = dict(item.split("=", 1) for item in args.index)
    names = [n for n in args.sets.split(",") if n]
    for n in [*names, *given]:
        if n not in SETS:
            parser.error(f"unknown set {n!r}; sets are {', '.join(SETS)}")
        if not (SHARED / n / "questions.jsonl").exists():
            parser.error(f"{SHARED / n} is missing: the development sets live in ../shared/bench")
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="laminae-quality-"))
    out.mkdir(parents=True, exist_ok=True)
    for n in names:
        run_set(n, Path(given[n]) if n in given else None, out)
    print(f"\nrun files and scores: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
