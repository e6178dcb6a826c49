"""Peak memory of moving a whole index to another embedder (``reembed_index``).

Writes a synthetic index (``tests.support.synthetic``) into a temporary directory, then
re-embeds it in a fresh process with a feature-hashing embedder (``tests.support.embedders``:
words hashed into ``--dim`` buckets, no model, so the numbers are the pipeline's own memory and
time) and prints that process's peak RSS, the seconds it took and the rows it embedded. Reads
and writes only the temporary directory.

    .venv/bin/python bench/reembed.py --subcomponents 200000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

if not __package__:  # run as a file: the repository's bench and tests packages
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import Timer, arguments
from tests.support.embedders import HashingEmbedder


def _peak_rss_kib() -> int:
    """This process's peak resident set (VmHWM: unlike ru_maxrss, not inherited from the parent
    that started it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _child(index: str, dim: int) -> None:
    from laminae.tasks.storage.upkeep import reembed_index

    with Timer()("reembed") as lap:
        embedded = reembed_index(index, HashingEmbedder(dim))
    seconds = lap.seconds
    peak_mib = _peak_rss_kib() / 1024
    print(json.dumps({"embedded": embedded, "seconds": round(seconds, 1), "peak_rss_mib": round(peak_mib)}))


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--subcomponents", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=384, help="the index's and the new embedder's dimension")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.dim)
        return
    from tests.support.synthetic import make_synthetic_index

    with tempfile.TemporaryDirectory(prefix="laminae-reembed-") as tmp:
        per_doc, per_comp = 10, 10
        counts = make_synthetic_index(tmp, documents=max(1, args.subcomponents // (per_doc * per_comp)),
                                      components_per_document=per_doc, subcomponents_per_component=per_comp,
                                      dim=args.dim, text_index=False, snapshot=False)
        out = subprocess.run([sys.executable, __file__, "--child", tmp, "--dim", str(args.dim)],
                             capture_output=True, text=True, check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps({**{k: counts[k] for k in ("documents", "components", "subcomponents")}, **result}))


if __name__ == "__main__":
    main()
