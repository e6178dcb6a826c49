"""Benchmark the reader's moves on a synthetic index: p50/p95 latency, recall of the compact path, memory.

Writes a synthetic index (``tests.support.synthetic``, streamed to the tables and the reader snapshot
``chunk_documents`` documents at a time) into a temporary directory (or ``--index DIR`` to keep
and reuse it), then times each move over questions, once per ``--modes`` entry (the reader's
``search`` setting: ``exact`` scans every vector, ``compact`` scans sign codes and re-scores a
shortlist exactly, ``auto`` is what a reader gets by default; see ``laminae.vectors``).

Vectors are clustered (``--topics``, by default one per 100 documents: documents near topic
directions, passages near their document) and every question is a stored subcomponent's vector plus noise, because embeddings of
real text have that structure and real questions have answers; ``--topics 0`` gives random unit
vectors, where every similarity is near 0 and the ranking of the top is noise, the worst case for
codes (recall printed all the same). Recall@30 of the compact global hop (and @10 of the compact
dense search over subcomponents) is measured against exact search computed in the same run by
reading the snapshot's float32 vectors in blocks with plain reads, so the reference adds no
resident memory. The reference row of the exact mode is one bare numpy matrix-vector product over
all subcomponent vectors (the memory-bandwidth floor of an exact scan).

    .venv/bin/python bench/reader.py --documents 10000 --modes exact compact          # 1M subcomponents
    .venv/bin/python bench/reader.py --documents 100000 --no-text --index /tmp/scale-10m --refresh  # 10M
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

if not __package__:  # run as a file: the repository's bench and tests packages
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import laminae
from bench.harness import Timer, arguments, table
from laminae import vectors
from laminae.schemas.storage import snapshot_dir

REFERENCE_BLOCK = 65_536  # subcomponent rows read per block for the exact reference


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn: Callable[[int], object], runs: int) -> np.ndarray:
    """Milliseconds of ``fn(i)`` for each of ``runs`` questions."""
    timer = Timer()
    for i in range(runs):
        with timer("run"):
            fn(i)
    return np.array(timer.runs["run"]) * 1000


def exact_reference(snapshot: Path, starts: np.ndarray, queries: np.ndarray, k_docs: int, k_rows: int):
    """Exact top ``k_docs`` documents (max over their subcomponents) and top ``k_rows`` subcomponents
    per query, from the snapshot's vectors read in blocks of whole documents (no memory map)."""
    vectors = np.load(snapshot / "vectors2.npy", mmap_mode="r")  # for the header's offset and shape only
    n, dim = vectors.shape
    offset = vectors.offset
    del vectors
    doc_best = np.full((len(starts) - 1, len(queries)), -np.inf, dtype=np.float32)
    row_top: list[tuple[np.ndarray, np.ndarray]] = []
    with open(snapshot / "vectors2.npy", "rb") as f:
        doc = 0
        while doc < len(starts) - 1:
            end_doc = int(np.searchsorted(starts, starts[doc] + REFERENCE_BLOCK, side="right")) - 1
            end_doc = min(max(end_doc, doc + 1), len(starts) - 1)
            lo, hi = int(starts[doc]), int(starts[end_doc])
            f.seek(offset + lo * dim * 4)
            block = np.fromfile(f, dtype=np.float32, count=(hi - lo) * dim).reshape(hi - lo, dim)
            scores = block @ queries.T
            local = starts[doc:end_doc + 1] - lo
            nonempty = local[:-1] < local[1:]
            if nonempty.any():
                doc_best[doc:end_doc][nonempty] = np.maximum.reduceat(scores, local[:-1][nonempty], axis=0)
            top = np.argpartition(-scores, min(k_rows, len(scores) - 1), axis=0)[:k_rows]
            row_top.append((top + lo, np.take_along_axis(scores, top, axis=0)))
            doc = end_doc
    docs = [set(np.argsort(-doc_best[:, j], kind="stable")[:k_docs].tolist()) for j in range(len(queries))]
    rows_all = np.concatenate([r for r, _ in row_top])
    scores_all = np.concatenate([s for _, s in row_top])
    rows = [set(rows_all[np.argsort(-scores_all[:, j])[:k_rows], j].tolist()) for j in range(len(queries))]
    return docs, rows


def _row_of(graph, hit) -> int:
    """Row of a subcomponent hit, searched among its document's rows (no 10M-entry id map)."""
    lay = graph.layers[2]
    doc = graph.doc_position[hit.document_id]
    span = np.arange(lay.starts[doc], lay.starts[doc + 1])
    return int(span[lay.ids[span] == hit.id][0])


def moves(index, texts, queries: np.ndarray, anchors: list[str], hop: list[str], runs: int) -> dict[str, np.ndarray]:
    """Latencies (ms) of every reader move over ``runs`` questions."""
    results = {}
    results["global hop k=30 g=0"] = timed(lambda i: index.documents(queries[i], k=30, granularity=0), runs)
    results["global hop k=30 g=1"] = timed(lambda i: index.documents(queries[i], k=30, granularity=1), runs)
    results["global hop k=30 g=2"] = timed(lambda i: index.documents(queries[i], k=30, granularity=2), runs)
    results["local hop k=30 g=2"] = timed(lambda i: index.documents(
        queries[i], k=30, granularity=2, scope="local", anchors=[anchors[i]]), runs)
    results["component hop (30 docs) g=2"] = timed(lambda i: index.components(queries[i], hop, k=10, granularity=2),
                                                   runs)
    results["beam search b=30, 3 subqueries"] = timed(
        lambda i: index.beam_search(list(queries[3 * i: 3 * i + 3]), beam=30, iterations=1, k=10), runs)
    results["dense search layer 2 k=10"] = timed(lambda i: index.search(queries[i], layer=2, k=10), runs)
    if texts is None:
        return results
    results["fts search layer 2 k=10"] = timed(lambda i: index.search(f"keyword{i}", layer=2, k=10, mode="fts"),
                                               runs)

    # text queries (the defaults an agent gets): dense + full text fused; the synthetic index has no
    # model, so each text is embedded as one of the query vectors. A question names a rare word and
    # words every component holds, as real questions do.
    def question(i: int) -> str:
        return f"which sentence of the component holds keyword{i}"

    results["retrieve k=10 (text)"] = timed(lambda i: texts.retrieve(question(i), k=10), runs)
    results["global hop k=30 g=2 hybrid (text)"] = timed(
        lambda i: texts.documents(question(i), k=30, granularity=2), runs)
    results["component hop (30 docs) g=2 hybrid (text)"] = timed(
        lambda i: texts.components(question(i), hop, k=10, granularity=2), runs)
    return results


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--components", type=int, default=10, help="per document")
    parser.add_argument("--subcomponents", type=int, default=10, help="per component")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--topics", type=int, help="topic directions (default: one per 100 documents); 0: random unit vectors")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--modes", nargs="+", default=["auto"], choices=["auto", "exact", "compact"])
    parser.add_argument("--no-text", action="store_true",
                        help="no full-text index (built in minutes at 10M) and no text moves")
    parser.add_argument("--index", help="reuse or keep the synthetic index here")
    parser.add_argument("--refresh", action="store_true",
                        help="then a refresh of 1 %% of the documents on the same index (bench/refresh_scale.py: "
                             "seconds and peak RSS per stage; adds versions to the index)")
    parser.add_argument("--prefilter", type=int, default=vectors.PREFILTER_WORDS,
                        help="64-bit words of each code in a compact scan's first pass (0: whole codes only)")
    args = parser.parse_args()
    vectors.PREFILTER_WORDS = args.prefilter
    if args.topics is None:
        args.topics = max(1, args.documents // 100)

    path = Path(args.index or tempfile.mkdtemp(prefix="laminae-bench-reader-"))
    if not (path / "_manifests" / "LATEST").exists():
        from tests.support.synthetic import make_synthetic_index

        with Timer()("build") as build:
            sizes = make_synthetic_index(str(path), documents=args.documents, components_per_document=args.components,
                                         subcomponents_per_component=args.subcomponents, dim=args.dim,
                                         topics=args.topics, text_index=not args.no_text)
        print(f"built {sizes} in {build.seconds:.1f} s; generator peak RSS {peak_mb():.0f} MB")
        print("(the numbers below are for a fresh process: run again with --index to measure the reader alone)")

    from tests.support.synthetic import query_near

    rng = np.random.default_rng(1)
    n_queries = args.runs * 3
    snapshot = snapshot_dir(str(path), laminae.open(str(path)).version)
    subs_file = vectors.RowFile.of(np.load(snapshot / "vectors2.npy", mmap_mode="r"))  # rows read, not mapped
    if args.topics:
        queries = query_near(rng, subs_file, n_queries)
    else:
        queries = rng.standard_normal((n_queries, args.dim)).astype(np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    del subs_file
    timer = Timer()
    with timer("exact reference") as reference:
        ref_docs, ref_rows = exact_reference(snapshot, np.load(snapshot / "starts2.npy"), queries[:args.runs], 30, 10)
    print(f"exact reference for recall (blocked reads of the snapshot): {reference.seconds:.1f} s; "
          f"peak RSS {peak_mb():.0f} MB")
    anchor_rows = rng.integers(0, int(np.load(snapshot / "starts0.npy").shape[0]) - 1, args.runs)

    def embed(text: str) -> np.ndarray:  # the synthetic index has no model: keyword i is question i
        return queries[int(text.rsplit("keyword", 1)[1]) % len(queries)]

    latency: dict[str, dict[str, np.ndarray]] = {}
    recall: dict[str, tuple[float, float]] = {}
    for mode in args.modes:
        rss0 = rss_mb()
        with timer(f"open {mode}") as opened:
            index = laminae.open(str(path), search=mode)
            graph = index.graph
        t_open = opened.seconds
        n_docs, n_comps, n_subs = (len(graph.layers[i].ids) for i in range(3))
        compact = [i for i, lay in enumerate(graph.layers) if lay.compact]
        print(f"[{mode}] index: {n_docs} documents, {n_comps} components, {n_subs} subcomponents, {args.dim}-d; "
              f"layers scanned through codes: {compact or 'none'}")
        print(f"[{mode}] open (manifest + vectors, pointers, ids) {t_open:.2f} s; RSS {rss_mb():.0f} MB "
              f"(+{rss_mb() - rss0:.0f} MB)")
        with timer(f"first hop {mode}") as first:
            index.documents(queries[-1], k=30, granularity=2)
        print(f"[{mode}] first global hop g=2 after open (reads a compact layer's code prefix) "
              f"{first.seconds:.2f} s")
        anchors = [str(graph.layers[0].ids[i]) for i in anchor_rows]
        hop = [h.id for h in index.documents(queries[0], k=30, granularity=0)]
        texts = None
        if not args.no_text:
            texts = laminae.open(str(path), search=mode, embed=embed)
            texts._graph = graph  # the same view, loaded once
        results = {}
        if 2 not in compact:
            subs = graph.layers[2].vectors
            results["reference: numpy scan of all subcomponents"] = timed(lambda i, v=subs: v @ queries[i], args.runs)
            del subs
        results.update(moves(index, texts, queries, anchors, hop, args.runs))
        latency[mode] = results
        got_docs = [{graph.doc_position[h.id] for h in index.documents(queries[i], k=30, granularity=2, mode="dense")}
                    for i in range(args.runs)]
        rows = [index.search(queries[i], layer=2, k=10) for i in range(args.runs)]
        got_rows = [{_row_of(graph, h) for h in hits} for hits in rows]
        recall[mode] = (float(np.mean([len(a & b) / len(b) for a, b in zip(got_docs, ref_docs, strict=True)])),
                        float(np.mean([len(a & b) / len(b) for a, b in zip(got_rows, ref_rows, strict=True)])))
        print(f"[{mode}] RSS now {rss_mb():.0f} MB, process peak so far {peak_mb():.0f} MB")
        del index, texts, graph

    names = list(dict.fromkeys(name for results in latency.values() for name in results))
    columns = [f"{m} {q}" for m in latency for q in ("p50", "p95")]
    rows = [(name, *(x for r in latency.values()
                     for x in ((float(np.median(r[name])), float(np.percentile(r[name], 95))) if name in r
                               else (None, None)))) for name in names]
    print(table(["operation (ms)", *columns], rows, formats=dict.fromkeys(columns, ".1f")))
    for mode, (docs_recall, rows_recall) in recall.items():
        print(f"[{mode}] recall against exact: global hop g=2 recall@30 {docs_recall:.3f}; "
              f"dense search layer 2 recall@10 {rows_recall:.3f}")
    print(f"RSS now {rss_mb():.0f} MB, peak {peak_mb():.0f} MB", flush=True)
    if args.refresh:
        script = Path(__file__).resolve().parent / "refresh_scale.py"
        return subprocess.run([sys.executable, str(script), "--index", str(path), "--documents",
                               str(args.documents)]).returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
