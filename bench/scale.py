"""Benchmark how a full build's cost grows with the corpus: wall time, peak memory, time per stage.

Serves a generated corpus of linked pages from 127.0.0.1 (``bench/refresh.py``'s generator: three
paragraphs, a table and three links a page) and runs one full build per size, each in a fresh
process so that its peak resident memory is its own. Prints, per size: wall seconds, seconds per
1,000 pages and its ratio to the smallest size (1.00 = linear growth), peak RSS, and seconds per
stage. Writes only temporary files.

    .venv/bin/python bench/scale.py [--sizes 500 2000 8000] [--device cpu|cuda] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def one(pages: int, device: str, threads: int) -> dict:
    """Build a corpus of ``pages`` pages in this process; returns the measurements."""
    sys.path.insert(0, str(HERE.parent))
    sys.path.insert(0, str(HERE))
    from refresh import Site

    from laminae import flows  # noqa: F401
    from laminae.flows.build import build_index

    site = Site(pages)
    with tempfile.TemporaryDirectory() as tmp:
        seeds = Path(tmp) / "seeds.txt"
        seeds.write_text("\n".join(site.url(n) for n in range(pages)) + "\n")
        settings = {"embed": {"device": device, "threads": threads},
                    "crawl": {"respect_robots": False, "per_host_concurrency": 8}}
        start = time.perf_counter()
        summary = build_index(seeds=str(seeds), index=str(Path(tmp) / "index"), settings=settings)
        wall = time.perf_counter() - start
        size = sum(f.stat().st_size for f in (Path(tmp) / "index").rglob("*") if f.is_file())
    counts = summary["counts"]
    return {
        "pages": pages, "status": summary["status"], "wall": wall,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "nodes": counts["documents"] + sum(counts["components"].values()) + sum(counts["subcomponents"].values()),
        "edges": sum(counts["edges"].values()), "index_mb": size / 1e6,
        "stages": summary["seconds_by_stage"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 2000, 8000])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print("RESULT " + json.dumps(one(args.one, args.device, args.threads)))
        return 0

    results = []
    for pages in args.sizes:
        proc = subprocess.run([sys.executable, __file__, "--one", str(pages), "--device", args.device,
                               "--threads", str(args.threads)], capture_output=True, text=True)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if proc.returncode or line is None:
            print(f"{pages} pages: the build failed (exit {proc.returncode})\n{proc.stderr[-3000:]}", file=sys.stderr)
            return 1
        results.append(json.loads(line[len("RESULT "):]))
        r = results[-1]
        print(f"  {pages} pages: {r['wall']:.1f} s, peak {r['peak_rss_mb']:.0f} MB", file=sys.stderr)

    base = results[0]["wall"] / results[0]["pages"]
    stages = sorted({k for r in results for k in r["stages"] if k != "total"},
                    key=lambda k: -results[-1]["stages"].get(k, 0))[:6]
    print(f"device {args.device}, torch threads {args.threads}; one fresh process per build")
    header = f"{'pages':>6} {'nodes':>8} {'wall s':>8} {'s/1k pages':>10} {'× smallest':>10} {'peak MB':>8} {'index MB':>8}"
    print(header + "".join(f" {k[:11]:>11}" for k in stages))
    for r in results:
        per_k = 1000 * r["wall"] / r["pages"]
        print(f"{r['pages']:>6} {r['nodes']:>8} {r['wall']:>8.1f} {per_k:>10.1f} {r['wall'] / r['pages'] / base:>10.2f} "
              f"{r['peak_rss_mb']:>8.0f} {r['index_mb']:>8.1f}" + "".join(f" {r['stages'].get(k, 0):>11.1f}" for k in stages))
    return 0


if __name__ == "__main__":
    sys.exit(main())
