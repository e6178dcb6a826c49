"""Benchmark parsing in worker processes against parsing in the calling process, same pages, same run.

Reads the 258 real-world pages of ``htmlparser-benchmark@1.1.3`` (fetched once into the laminae
cache, as ``bench/build.py`` does) and/or ``--pages`` folders of ``*.html``; writes them into a
temporary raw store. Times ``laminae.tasks.nodes.pages.parse_documents`` (HTML parse, pysbd sentence
splitting, table rows, edges: the build's parse stage) over batches of ``--batch`` pages, in the
calling process and with each ``--workers`` count; starting a pool is timed apart and left out of
the rate. Best of ``--repeats`` runs each. Prints pages/s, the ratio to in-process parsing and
whether every worker count made the same document rows and node and edge ids (ids derive from
content).

    python bench/parse_workers.py [--workers 2 4 8] [--batch 64] [--pages DIR] [--no-htmlparser-benchmark]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpora import fetch_htmlparser_benchmark  # noqa: E402
from laminae.tasks.config import BuildSettings, cache_dir  # noqa: E402
from laminae.tasks.crawl.fetch import FetchResult  # noqa: E402
from laminae.tasks.nodes.pages import parse_documents, parse_page  # noqa: E402
from laminae.tasks.parse.isolated import close_pools, worker_pool  # noqa: E402
from laminae.tasks.storage.rawstore import RawStore  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[2])
    parser.add_argument("--batch", type=int, default=64, help="pages per batch (the build's batch_documents)")
    parser.add_argument("--pages", type=Path, action="append", default=[], help="a folder of *.html (repeatable)")
    parser.add_argument("--no-htmlparser-benchmark", action="store_true")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    folders = list(args.pages)
    if not args.no_htmlparser_benchmark:
        folders.append(fetch_htmlparser_benchmark(cache_dir() / "bench"))
    files = [p for folder in folders for p in sorted(folder.rglob("*.html"))]
    if not files:
        parser.error("no pages: pass --pages DIR or drop --no-htmlparser-benchmark")
    with tempfile.TemporaryDirectory() as index:
        raw = RawStore(index)
        pages = [FetchResult(url=f"http://bench.test/{i}.html", final_url=f"http://bench.test/{i}.html",
                             content_type="text/html", raw_key=raw.put(p.read_bytes())) for i, p in enumerate(files)]
        batches = [pages[i : i + args.batch] for i in range(0, len(pages), args.batch)]
        print(f"corpus: {len(pages)} pages in {len(batches)} batches of {args.batch}; {os.cpu_count()} CPU cores")

        def run(workers: int) -> tuple[float, list]:
            settings = BuildSettings(runner={"parse_workers": workers})
            best, made = float("inf"), []
            for _ in range(args.repeats):
                start = time.perf_counter()
                made = [parse_documents(batch, index, settings, "bench")[0] for batch in batches]
                best = min(best, time.perf_counter() - start)
            # node and edge ids derive from their content: equal ids are equal nodes
            return best, [(d.document, [c["id"] for c in d.components], [x["id"] for x in d.subcomponents],
                           [e["id"] for e in d.edges]) for docs in made for d in docs]

        reference, ref_made = run(0)
        print(f"{'parse_documents':<28} {'pages/s':>9} {'× in-process':>13} {'pool start s':>13}  same nodes")
        print(f"{'in-process':<28} {len(pages) / reference:9.1f} {1.0:13.2f} {'':>13}  -")
        for workers in args.workers:
            start = time.perf_counter()
            warm = (pages[0], index, BuildSettings(), "warm-up")  # each worker imports the parsers
            worker_pool(workers).map(parse_page, [warm] * workers * 4)
            started = time.perf_counter() - start
            seconds, made = run(workers)
            close_pools()
            print(f"{f'{workers} worker processes':<28} {len(pages) / seconds:9.1f} {reference / seconds:13.2f} "
                  f"{started:13.2f}  {made == ref_made}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
