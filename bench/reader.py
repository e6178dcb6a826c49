"""Benchmark the reader's moves on a synthetic index: p50/p95 latency and resident memory.

Writes a synthetic index (random unit vectors in the real schemas, ``bench.synthetic``) into a
temporary directory (or ``--index DIR`` to keep and reuse it), then times each operation over
random queries. The reference measured in the same run is one bare numpy matrix-vector product
over all subcomponent vectors (the memory-bandwidth floor of an exact scan); each operation's
p50 is also printed as a ratio to it.

    .venv/bin/python bench/reader.py --documents 10000 --components 10 --subcomponents 10
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import laminae  # noqa: E402


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(fn, runs: int) -> np.ndarray:
    out = []
    for i in range(runs):
        start = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - start) * 1000)
    return np.array(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--components", type=int, default=10, help="per document")
    parser.add_argument("--subcomponents", type=int, default=10, help="per component")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--index", help="reuse or keep the synthetic index here")
    args = parser.parse_args()

    path = Path(args.index or tempfile.mkdtemp(prefix="laminae-bench-reader-"))
    if not (path / "_manifests" / "LATEST").exists():
        from bench.synthetic import make_synthetic_index

        start = time.perf_counter()
        sizes = make_synthetic_index(str(path), documents=args.documents, components_per_document=args.components,
                                     subcomponents_per_component=args.subcomponents, dim=args.dim)
        print(f"built {sizes} in {time.perf_counter() - start:.1f} s")

    rss0 = rss_mb()
    start = time.perf_counter()
    index = laminae.open(str(path))
    t_open = time.perf_counter() - start
    start = time.perf_counter()
    graph = index.graph
    t_load = time.perf_counter() - start
    n_docs, n_comps, n_subs = (len(graph.layers[i].ids) for i in range(3))
    print(f"index: {n_docs} documents, {n_comps} components, {n_subs} subcomponents, {args.dim}-d")
    print(f"open {t_open * 1000:.0f} ms; loading vectors and pointers into memory {t_load:.2f} s; "
          f"RSS {rss_mb():.0f} MB (+{rss_mb() - rss0:.0f} MB)")

    rng = np.random.default_rng(1)
    queries = rng.standard_normal((args.runs * 3, args.dim)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    docs = graph.layers[0].ids
    anchors = [str(docs[i]) for i in rng.integers(0, n_docs, args.runs)]
    subs = graph.layers[2].vectors

    results = {}
    results["reference: numpy scan of all subcomponents"] = timed(lambda i: subs @ queries[i], args.runs)
    results["numpy Q @ V.T, 3 queries (beam's scan before)"] = timed(lambda i: queries[3 * i: 3 * i + 3] @ subs.T,
                                                                     args.runs)
    results["global hop k=30 g=0"] = timed(lambda i: index.documents(queries[i], k=30, granularity=0), args.runs)
    results["global hop k=30 g=1"] = timed(lambda i: index.documents(queries[i], k=30, granularity=1), args.runs)
    results["global hop k=30 g=2"] = timed(lambda i: index.documents(queries[i], k=30, granularity=2), args.runs)
    results["local hop k=30 g=2"] = timed(lambda i: index.documents(
        queries[i], k=30, granularity=2, scope="local", anchors=[anchors[i]]), args.runs)
    hop = [h.id for h in index.documents(queries[0], k=30, granularity=0)]
    results["component hop (30 docs) g=2"] = timed(lambda i: index.components(queries[i], hop, k=10, granularity=2),
                                                   args.runs)
    results["beam search b=30, 3 subqueries"] = timed(
        lambda i: index.beam_search(list(queries[3 * i: 3 * i + 3]), beam=30, iterations=1, k=10), args.runs)
    results["dense search layer 2 k=10"] = timed(lambda i: index.search(queries[i], layer=2, k=10), args.runs)
    results["fts search layer 2 k=10"] = timed(lambda i: index.search(f"keyword{i}", layer=2, k=10, mode="fts"),
                                               args.runs)
    # text queries (the defaults an agent gets): dense + full text fused; the synthetic index has no
    # model, so each text is embedded as one of the random query vectors. A question names a rare
    # word and words every component holds, as real questions do.
    def question(i: int) -> str:
        return f"which sentence of the component holds keyword{i}"

    texts = laminae.open(str(path), embed=lambda text: queries[int(text.rsplit("keyword", 1)[1]) % len(queries)])
    texts.graph  # noqa: B018 - loaded once, as above
    results["retrieve k=10 (text)"] = timed(lambda i: texts.retrieve(question(i), k=10), args.runs)
    results["global hop k=30 g=2 hybrid (text)"] = timed(
        lambda i: texts.documents(question(i), k=30, granularity=2), args.runs)
    results["component hop (30 docs) g=2 hybrid (text)"] = timed(
        lambda i: texts.components(question(i), hop, k=10, granularity=2), args.runs)
    reference = float(np.median(results["reference: numpy scan of all subcomponents"]))
    print(f"{'operation':<42} {'p50 ms':>8} {'p95 ms':>8} {'p50/ref':>8}")
    for name, ms in results.items():
        print(f"{name:<42} {np.median(ms):8.1f} {np.percentile(ms, 95):8.1f} {np.median(ms) / reference:8.2f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"RSS now {rss_mb():.0f} MB, peak {peak:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
