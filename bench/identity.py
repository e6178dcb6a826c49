"""Check that a refactor changed nothing a user gets: the same tables, the same move outputs.

Reads the bundled sample site (``examples/site``) or ``../shared/bench/wtq-dev``; writes an index
directory (``build``), a JSON file of every reader move's hits on fixed queries (``moves``), or
nothing (``compare``: prints each table's differences between two index directories and exits 1
when there is one). A build serves its pages on a fixed port, so document ids match across builds.

    .venv/bin/python bench/identity.py build --set demo --index /tmp/a/demo
    .venv/bin/python bench/identity.py build --set wtq-dev --index /tmp/a/wtq
    .venv/bin/python bench/identity.py compare /tmp/a/demo /tmp/b/demo
    .venv/bin/python bench/identity.py moves /tmp/a/demo /tmp/a/moves.json   # then: cmp a b

``moves`` dumps ``Index.hop`` (FiF's whole local hop) where the reader has it, else the same hop
through ``laminae.integrations.moves.Move("hop")``, the one place it was written before.

Columns that name the run or the clock (run ids, times, the runs table) are left out of the
comparison; everything else, vectors included, must be equal row for row (rows ordered by id).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "bench"
PORTS = {"demo": 18761, "wtq-dev": 18762}
VOLATILE = {"run_id", "created_at", "fetched_at", "started_at", "finished_at"}
SKIPPED_TABLES = {"runs"}  # one row per run: its times and timings
QUERIES = ("what is the population of the largest city", "how do I install it", "picture of a bicycle")


def build(which: str, index: Path) -> None:
    laminae_cli = str(Path(sys.executable).parent / "laminae")
    if which == "demo":
        subprocess.run([laminae_cli, "demo", "--index", str(index), "--port", str(PORTS["demo"])], check=True)
        return
    from laminae.flows.demo import SiteServer

    bench = SHARED / which
    with SiteServer(bench / "corpus", port=PORTS[which]) as server, tempfile.TemporaryDirectory() as tmp:
        lines = (bench / "urls.txt").read_text().splitlines()
        seeds = Path(tmp) / "seeds.txt"
        seeds.write_text("\n".join(server.base_url + line.split("/", 3)[3] for line in lines if line.strip()))
        subprocess.run([laminae_cli, "build", "--seeds", str(seeds), "--index", str(index), "--progress", "off"],
                       check=True)


def _rows(index: Path, name: str) -> dict[str, dict]:
    import lancedb

    table = lancedb.connect(str(index)).open_table(name).to_arrow()
    keep = [c for c in table.column_names if c not in VOLATILE]
    rows = table.select(keep).to_pylist()
    key = "id" if "id" in keep else keep[0]
    out: dict[str, dict] = {}
    for row in rows:
        out[json.dumps(row[key], default=str) + ("#" + str(len(out)) if name == "errors" else "")] = row
    return out


def _same(a, b) -> bool:
    if isinstance(a, (list, np.ndarray)) and isinstance(b, (list, np.ndarray)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def compare(first: Path, second: Path) -> int:
    import lancedb

    names = sorted(set(lancedb.connect(str(first)).list_tables().tables) | set(lancedb.connect(str(second)).list_tables().tables))
    different = 0
    for name in names:
        if name in SKIPPED_TABLES:
            continue
        if name == "errors":  # its ids hold the run id: compare the rows as a multiset
            a, b = ([json.dumps({c: v for c, v in r.items() if c != "id"}, sort_keys=True, default=str)
                     for r in _rows(index, name).values()] for index in (first, second))
            a, b = sorted(a), sorted(b)
            bad = [] if a == b else ["rows differ"]
            print(f"{name:14} {len(a):8} rows  {'same' if not bad else 'DIFFERENT'}")
            different += bool(bad)
            continue
        a, b = _rows(first, name), _rows(second, name)
        only = (a.keys() - b.keys()) | (b.keys() - a.keys())
        changed = [k for k in a.keys() & b.keys() if not _same(a[k], b[k])]
        status = "same" if not only and not changed else f"DIFFERENT: {len(only)} ids in one only, {len(changed)} changed"
        print(f"{name:14} {len(a):8} rows  {status}")
        for key in sorted(changed)[:3]:
            cols = [c for c in a[key] if not _same(a[key][c], b[key].get(c))]
            print(f"    {key}: columns {cols}")
        different += bool(only or changed)
    return 1 if different else 0


def moves(index: Path, out: Path) -> None:
    import laminae

    idx = laminae.open(str(index))
    docs = idx.table("documents").to_arrow().column("id").to_pylist()
    dump: dict[str, object] = {}

    def hop(q: str, **arguments) -> list:
        if hasattr(idx, "hop"):
            return idx.hop(q, **arguments)
        from laminae.integrations.moves import Move  # a reader before Index.hop: the retrievers' hop

        return Move("hop", **arguments).run(idx, q)

    def hits(hs) -> list:
        return [[h.id, h.layer, h.kind, round(float(h.score), 6), h.text] for h in hs]

    for q in QUERIES:
        dump[f"retrieve {q}"] = hits(idx.retrieve(q, k=10))
        for layer in (0, 1, 2):
            dump[f"search {layer} {q}"] = hits(idx.search(q, layer=layer, k=10))
        for g in (0, 1, 2):
            dump[f"documents g{g} {q}"] = hits(idx.documents(q, k=5, granularity=g))
        dump[f"documents local {q}"] = hits(idx.documents(q, k=5, granularity=2, scope="local", anchors=docs[:3]))
        dump[f"components {q}"] = hits(idx.components(q, docs[:5], k=10, granularity=2))
        dump[f"hop {q}"] = hits(hop(q))
        dump[f"hop anchors {q}"] = hits(hop(q, k=5, anchors=docs[:1], direction="out", granularity=1))
        beam = idx.beam_search([q, q.split()[-1]], beam=10, k=5)
        dump[f"beam {q}"] = json.loads(json.dumps(beam, default=lambda o: getattr(o, "__dict__", str(o))))
    dump["neighbors"] = idx.neighbors(docs[:3], direction="both")
    dump["get"] = json.loads(json.dumps(idx.get(docs[:2]), default=str))
    out.write_text(json.dumps(dump, indent=1, sort_keys=True, default=str))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("build")
    p.add_argument("--set", choices=sorted(PORTS), required=True)
    p.add_argument("--index", type=Path, required=True)
    p = sub.add_parser("compare")
    p.add_argument("first", type=Path)
    p.add_argument("second", type=Path)
    p = sub.add_parser("moves")
    p.add_argument("index", type=Path)
    p.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.command == "build":
        build(args.set, args.index)
        return 0
    if args.command == "compare":
        return compare(args.first, args.second)
    moves(args.index, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
