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
from pathlib import Path

if not __package__:  # run as a file: the repository's bench package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import Timer, arguments, table


def one(pages: int, device: str, threads: int) -> dict:
    """Build a corpus of ``pages`` pages in this process; returns the measurements."""
    from bench.refresh import Site
    from laminae import flows  # noqa: F401
    from laminae.flows.build import build_index

    site = Site(pages)
    with tempfile.TemporaryDirectory() as tmp:
        seeds = Path(tmp) / "seeds.txt"
        seeds.write_text("\n".join(site.url(n) for n in range(pages)) + "\n")
        settings = {"embed": {"device": device, "threads": threads},
                    "crawl": {"respect_robots": False, "per_host_concurrency": 8}}
        timer = Timer()
        with timer("build") as build:
            summary = build_index(seeds=str(seeds), index=str(Path(tmp) / "index"), settings=settings)
        size = sum(f.stat().st_size for f in (Path(tmp) / "index").rglob("*") if f.is_file())
    counts = summary["counts"]
    return {
        "pages": pages, "status": summary["status"], "wall": build.seconds,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "nodes": counts["documents"] + sum(counts["components"].values()) + sum(counts["subcomponents"].values()),
        "edges": sum(counts["edges"].values()), "index_mb": size / 1e6,
        "stages": summary["seconds_by_stage"],
    }


def main() -> int:
    parser = arguments(__doc__, device="cpu", threads=1)
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 2000, 8000])
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

    stages = sorted({k for r in results for k in r["stages"] if k != "total"},
                    key=lambda k: -results[-1]["stages"].get(k, 0))[:6]
    print(f"device {args.device}, torch threads {args.threads}; one fresh process per build")
    rows = [(r["pages"], r["nodes"], r["wall"], 1000 * r["wall"] / r["pages"], r["peak_rss_mb"], r["index_mb"],
             *(r["stages"].get(k, 0.0) for k in stages)) for r in results]
    print(table(["pages", "nodes", "wall s", "s/1k pages", "peak MB", "index MB", *(k[:11] for k in stages)], rows,
                formats={"wall s": ".1f", "s/1k pages": ".1f", "peak MB": ".0f", "index MB": ".1f",
                         **{k[:11]: ".1f" for k in stages}},
                ratio_of="s/1k pages", ratio_title="× smallest", ratio_format=".2f"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
