"""Benchmark parsing in worker processes against parsing in the calling process, same pages, same run.

Reads the 258 real-world pages of ``htmlparser-benchmark@1.1.3`` (fetched once into the laminae
cache, as ``bench/build_speed.py`` does) and/or ``--pages`` folders of ``*.html``; writes them into a
temporary raw store. Times ``laminae.tasks.nodes.pages.parse_documents`` (HTML parse, pysbd sentence
splitting, table rows, edges: the build's parse stage) over batches of ``--batch`` pages, in the
calling process and with each ``--workers`` count; starting a pool is timed apart and left out of
the rate. Best of ``--repeats`` runs each. Prints pages/s, the ratio to in-process parsing and
whether every worker count made the same document rows and node and edge ids (ids derive from
content).

    python bench/parse_workers.py [--workers 2 4 8] [--batch 64] [--pages DIR] [--no-htmlparser-benchmark]
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

if not __package__:  # run as a file: the repository's bench package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpora import fetch_htmlparser_benchmark
from bench.harness import Timer, arguments, table
from laminae.tasks.config import BuildSettings, cache_dir
from laminae.tasks.crawl.results import FetchResult
from laminae.tasks.nodes.pages import parse_documents, parse_page
from laminae.tasks.parse.isolated import close_pools, worker_pool
from laminae.tasks.storage.rawstore import RawStore


def main() -> int:
    parser = arguments(__doc__, repeats=2)
    parser.add_argument("--workers", type=int, nargs="+", default=[2])
    parser.add_argument("--batch", type=int, default=64, help="pages per batch (the build's batch_documents)")
    parser.add_argument("--pages", type=Path, action="append", default=[], help="a folder of *.html (repeatable)")
    parser.add_argument("--no-htmlparser-benchmark", action="store_true")
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

        timer = Timer()

        def run(name: str, workers: int) -> list:
            settings = BuildSettings(runner={"parse_workers": workers})
            made = []
            for _ in range(args.repeats):
                with timer(name):
                    made = [parse_documents(batch, index, settings, "bench")[0] for batch in batches]
            # node and edge ids derive from their content: equal ids are equal nodes
            return [(d.document, [c["id"] for c in d.components], [x["id"] for x in d.subcomponents],
                     [e["id"] for e in d.edges]) for docs in made for d in docs]

        ref_made = run("in-process", 0)
        rows = [("in-process", len(pages) / timer.best("in-process"), None, "-")]
        for workers in args.workers:
            name = f"{workers} worker processes"
            with timer(f"pool start {workers}") as started:
                warm = (pages[0], index, BuildSettings(), "warm-up")  # each worker imports the parsers
                worker_pool(workers).map(parse_page, [warm] * workers * 4)
            made = run(name, workers)
            close_pools()
            rows.append((name, len(pages) / timer.best(name), started.seconds, str(made == ref_made)))
        print(table(["parse_documents", "pages/s", "pool start s", "same nodes"], rows,
                    formats={"pages/s": ".1f"}, ratio_of="pages/s", ratio_title="× in-process", ratio_format=".2f"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
