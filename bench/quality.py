"""Retrieval quality: every reader strategy against the shared development sets and their BM25.

Reads ``../shared/bench/wtq-dev`` (table questions), ``../shared/bench/hybridqa-dev`` (multi-hop:
table rows, then the passage a cell links to) ``../shared/bench/docs-dev`` and ``docs-more`` (how-to questions
over four documentation sites Debian ships, each from another generator: ``docs-django``, Sphinx;
``docs-postgresql``, DocBook; ``docs-maxima``, Texinfo; ``docs-fltk``, Doxygen). Serves wtq-dev and hybridqa-dev on 127.0.0.1 and builds each index with ``laminae
build`` defaults in a fresh process (hybridqa-dev with ``--follow-links 1``); a docs site is built
from its installed folder (``apt-get install`` the ``PACKAGES``); or reuses an
index given with ``--index SET=DIR``. Runs each strategy through the public reader. wtq-dev and
hybridqa-dev: one run file per strategy in ``--out`` (default: a temporary folder), scored by the
set's own ``score.py``, beside its ``baseline_bm25.py`` (and one-hop link expansion) run in the
same invocation. A docs site: Hit@1/5/10 and MRR@10 of the first result on a page that answers the
question, as docs-dev's ``score.py`` counts them, beside its two BM25 references over the same
index (whole pages, and the components' search text). Prints one table per set with ms per query,
then one summary table: the default ``retrieve`` against the set's BM25 reference, with ratios.
Pages and questions are read from the shared folder, never copied.

    .venv/bin/python bench/quality.py [--sets wtq-dev,hybridqa-dev,docs-django,docs-postgresql,docs-maxima,docs-fltk] \
        [--index SET=DIR] [--out DIR]
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

import laminae
from laminae.flows.demo import SiteServer

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "bench"
SETS = {"wtq-dev": {"follow_links": 0}, "hybridqa-dev": {"follow_links": 1}}
DOCS = {  # documentation sites: set name -> (corpus in questions.jsonl, the folder the package installs, the set)
    "docs-django": ("django", "/usr/share/doc/python-django-doc/html", "docs-dev"),
    "docs-postgresql": ("postgresql", "/usr/share/doc/postgresql-doc-15/html", "docs-dev"),
    "docs-maxima": ("maxima", "/usr/share/doc/maxima-doc/html", "docs-more"),
    "docs-fltk": ("fltk", "/usr/share/doc/fltk1.3-doc/HTML", "docs-more"),
}
PACKAGES = "python-django-doc postgresql-doc-15 maxima-doc fltk1.3-doc"


def docs_questions(name: str) -> list[dict]:
    """The how-to questions of documentation site ``name`` (a ``DOCS`` key), from its set's file."""
    corpus, _, folder = DOCS[name]
    lines = (SHARED / folder / "questions.jsonl").read_text().splitlines()
    return [q for q in (json.loads(line) for line in lines if line.strip()) if q.get("corpus") == corpus]
ONLY: list[str] = []  # --only: run the strategies whose label holds one of these (and the default)
SUMMARY: list[tuple[str, str, float, str, float]] = []  # set, metric, retrieve, reference, its value
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


def local_hop_documents(index: laminae.Index, q: str, mode: str = "auto") -> list[str]:
    """The documents whose components ``Index.hop`` ranks (the best 3, then the 10 best linked to or from
    them), for bench/fusion_fit.py."""
    start = [h.id for h in index.documents(q, k=3, granularity=2, mode=mode)]
    linked = index.documents(q, k=10, granularity=2, scope="local", anchors=start, mode=mode) if start else []
    return start + [h.id for h in linked]


def fif_hop(index: laminae.Index, q: str, mode: str) -> list[laminae.index.Hit]:
    """FiF local hop: the reader's ``Index.hop`` (3 documents, 10 linked, components at granularity 2)."""
    return index.hop(q, k=10, mode=mode)


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
        if ONLY and not label.startswith("search(q) default") and not any(part in label for part in ONLY):
            continue
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
    default = next(result["overall"] for label, result, _ in rows if label.startswith("search(q) default"))
    SUMMARY.append((name, "R@10", default["R@10"], rows[0][0], bm25["R@10"]))
    SUMMARY.append((name, "MRR@10", default["MRR@10"], rows[0][0], bm25["MRR@10"]))
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


def docs_strategies() -> dict[str, Callable[[laminae.Index, str], list[str]]]:
    """Strategies for a docs site: each returns the document ids of its ranked results."""
    def comps(fn):
        return lambda ix, q: [h.document_id for h in fn(ix, q)]
    return {
        "retrieve(q) (default)": comps(lambda ix, q: ix.retrieve(q, k=10)),
        'retrieve(q, pages="any")': comps(lambda ix, q: ix.retrieve(q, k=10, pages="any")),
        'retrieve(q, ranking="rrf")': comps(lambda ix, q: ix.retrieve(q, k=10, ranking="rrf")),
        'retrieve(q, kinds=["paragraph", "code"])': comps(
            lambda ix, q: ix.retrieve(q, k=10, kinds=[k for k in ("paragraph", "code") if k in kinds_of(ix)])),
        "documents(q, granularity=2)": lambda ix, q: [h.id for h in ix.documents(q, k=10, granularity=2)],
        "search(q, layer=2, mode=hybrid), mapped": lambda ix, q: [
            ix.graph.layers[0].ids[int(ix.graph.layers[1].doc[ix.graph.layers[1].position[i["id"]]])]
            for i in mapped(ix, ix.search(q, 2, LAYER2_DEPTH, mode="hybrid"))],
    }


def kinds_of(index: laminae.Index) -> set[str]:
    return set(np.unique(index.graph.layers[1].kinds).tolist())


def docs_scorer():
    """docs-dev's score.py as a module (its BM25 references and its hit metrics)."""
    import importlib.util

    path = SHARED / "docs-dev" / "score.py"
    spec = importlib.util.spec_from_file_location("docs_dev_score", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_docs(name: str, index_dir: Path | None, out: Path) -> None:
    _, folder, _ = DOCS[name]
    root = folder.rstrip("/") + "/"
    if index_dir is None:
        if not Path(folder).is_dir():
            raise SystemExit(f"{name}: {folder} is missing: apt-get install -y {PACKAGES}, "
                             f"or give --index {name}=DIR")
        index_dir = out / f"index-{name}"
        started = time.perf_counter()
        subprocess.run([str(Path(sys.executable).parent / "laminae"), "build", "--seeds", folder, "--index",
                        str(index_dir), "--progress", "off"], check=True)
        print(f"\n{name}: built {index_dir} in {time.perf_counter() - started:.0f} s")
    score = docs_scorer()
    questions = docs_questions(name)
    index = laminae.open(str(index_dir))
    g = index.graph
    page_of = {g.layers[0].ids[d]: score.relative(g.urls[d].as_py(), root) for d in range(len(g.urls))}
    docs = index.table("documents").to_arrow().select(["id", "title"]).to_pylist()
    comps = index.table("components").to_arrow().select(["document_id", "search_text", "text"]).to_pylist()
    by_doc: dict[str, list[str]] = {}
    for c in comps:
        by_doc.setdefault(c["document_id"], []).append(c["text"] or "")
    pages_bm25 = score.BM25([(d["title"] or "") + " " + " ".join(by_doc.get(d["id"], [])) for d in docs])
    comps_bm25 = score.BM25([c["search_text"] or c["text"] or "" for c in comps])
    rows = []
    references = {
        "BM25 whole pages (title + all text)": lambda q: [docs[i]["id"] for i in pages_bm25.top(q, 10)],
        "BM25 over the same components": lambda q: [comps[i]["document_id"] for i in comps_bm25.top(q, 10)],
    }
    index.retrieve(questions[0]["q"], k=1)  # loads the model and the in-memory view
    runs = {**{label: (fn, False) for label, fn in references.items()},
            **{label: ((lambda f: lambda q: f(index, q))(fn), True) for label, fn in docs_strategies().items()}}
    for label, (fn, timed) in runs.items():
        if timed and ONLY and label != "retrieve(q) (default)" and not any(part in label for part in ONLY):
            continue
        found, times = [], []
        for q in questions:
            started = time.perf_counter()
            ids = fn(q["q"])
            times.append(time.perf_counter() - started)
            found.append(score.metrics([page_of.get(i) for i in ids], set(q["pages"])))
        n = max(1, len(found))
        result = {"Hit@1": sum(m["h1"] for m in found) / n, "Hit@5": sum(m["h5"] for m in found) / n,
                  "Hit@10": sum(m["h10"] for m in found) / n, "MRR@10": sum(m["rr"] for m in found) / n}
        rows.append((label, result, 1000 * float(np.median(times)) if timed else None))
        (out / f"{name}-{label.split('(')[0].strip().replace(' ', '_')}.json").write_text(json.dumps(result))
    bm25 = rows[0][1]
    default = next(r for label, r, _ in rows if label == "retrieve(q) (default)")
    SUMMARY.append((name, "Hit@1", default["Hit@1"], rows[0][0], bm25["Hit@1"]))
    SUMMARY.append((name, "MRR@10", default["MRR@10"], rows[0][0], bm25["MRR@10"]))
    print(f"\n{name}: {len(questions)} questions, {len(docs)} pages, {len(comps)} components, index {index_dir}")
    print(f"{'strategy':<42} Hit@1 Hit@5 Hit@10 MRR@10  ×BM25 pages MRR   ms/query (p50)")
    for label, r, ms in rows:
        ratio = r["MRR@10"] / bm25["MRR@10"] if bm25["MRR@10"] else float("nan")
        print(f"{label:<42} {r['Hit@1']:.3f} {r['Hit@5']:.3f} {r['Hit@10']:.3f}  {r['MRR@10']:.3f}  {ratio:.2f}"
              + (f"             {ms:.1f}" if ms is not None else ""), flush=True)


def print_summary() -> None:
    print("\nsummary: the default retrieve(q) against each set's BM25 reference")
    print(f"{'set':<17}{'metric':<8}{'retrieve':>9}  {'BM25 reference':<36}{'BM25':>6}  ratio")
    for name, metric, value, reference, base in SUMMARY:
        ratio = value / base if base else float("nan")
        print(f"{name:<17}{metric:<8}{value:>9.3f}  {reference[:36]:<36}{base:>6.3f}  {ratio:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    every = [*SETS, *DOCS]
    parser.add_argument("--sets", default=",".join(every), help="comma list of: " + ", ".join(every))
    parser.add_argument("--index", action="append", default=[], metavar="SET=DIR",
                        help="reuse an index built for SET instead of building one (repeatable)")
    parser.add_argument("--out", help="folder for run files, scores and built indexes (default: temporary)")
    parser.add_argument("--only", default="", help="comma list: run only the strategies whose label holds one of "
                        "these words (the default retrieve and the BM25 references always run), e.g. 'local hop'")
    args = parser.parse_args()
    ONLY[:] = [part for part in args.only.split(",") if part]
    given = dict(item.split("=", 1) for item in args.index)
    names = [n for n in args.sets.split(",") if n]
    for n in [*names, *given]:
        if n not in every:
            parser.error(f"unknown set {n!r}; sets are {', '.join(every)}")
        bench = SHARED / (DOCS[n][2] if n in DOCS else n)
        if not (bench / "questions.jsonl").exists():
            parser.error(f"{bench} is missing: the development sets live in ../shared/bench")
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="laminae-quality-"))
    out.mkdir(parents=True, exist_ok=True)
    for n in names:
        index_dir = Path(given[n]) if n in given else None
        if n in DOCS:
            run_docs(n, index_dir, out)
        else:
            run_set(n, index_dir, out)
    print_summary()
    print(f"\nrun files and scores: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
