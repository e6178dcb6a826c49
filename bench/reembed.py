"""Peak memory of moving a whole index to another embedder (``reembed_index``).

Writes a synthetic index (``bench.synthetic``) into a temporary directory, then re-embeds it in a
fresh process with a feature-hashing embedder (words hashed into ``--dim`` buckets: no model, so
the numbers are the pipeline's own memory and time) and prints that process's peak RSS, the
seconds it took and the rows it embedded. Reads and writes only the temporary directory.

    .venv/bin/python -m bench.reembed --subcomponents 200000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

from laminae.tasks.embed.runtime import EmbedderInfo


class HashingEmbedder:
    """Unit vectors from the words of a text hashed into ``dim`` buckets (deterministic)."""

    image_mode = "text_proxy"

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.model_id = f"bench/hashing-{dim}"

    @property
    def info(self) -> EmbedderInfo:
        return EmbedderInfo(self.model_id, self.dim, self.image_mode, "cpu")

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.split():
                out[i, zlib.crc32(word.encode()) % self.dim] += 1.0
        out[:, 0] += 1e-3  # an empty text still gets a unit vector
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed_images(self, images: list) -> np.ndarray:
        raise NotImplementedError("a text embedder")


def _peak_rss_kib() -> int:
    """This process's peak resident set (VmHWM: unlike ru_maxrss, not inherited from the parent
    that started it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _child(index: str, dim: int) -> None:
    from laminae.tasks.storage.upkeep import reembed_index

    started = time.perf_counter()
    embedded = reembed_index(index, HashingEmbedder(dim))
    seconds = time.perf_counter() - started
    peak_mib = _peak_rss_kib() / 1024
    print(json.dumps({"embedded": embedded, "seconds": round(seconds, 1), "peak_rss_mib": round(peak_mib)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subcomponents", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=384, help="the index's and the new embedder's dimension")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.dim)
        return
    from bench.synthetic import make_synthetic_index

    with tempfile.TemporaryDirectory(prefix="laminae-reembed-") as tmp:
        per_doc, per_comp = 10, 10
        counts = make_synthetic_index(tmp, documents=max(1, args.subcomponents // (per_doc * per_comp)),
                                      components_per_document=per_doc, subcomponents_per_component=per_comp,
                                      dim=args.dim, text_index=False, snapshot=False)
        out = subprocess.run([sys.executable, "-m", "bench.reembed", "--child", tmp, "--dim", str(args.dim)],
                             capture_output=True, text=True, check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps({**{k: counts[k] for k in ("documents", "components", "subcomponents")}, **result}))


if __name__ == "__main__":
    main()
