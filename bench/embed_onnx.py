"""Benchmark the ONNX Runtime text embedder (fp32 and int8) against the torch one on real node texts.

Reads N node texts (the ``text`` column of the ``subcomponents`` and ``components`` tables of an
existing laminae index; unique, non-empty, a seeded sample of both); writes the ONNX exports to a
temporary cache directory (``--cache`` to keep them), so the first export is timed for real.
Each embedder runs ``embed`` as the embed stage calls it (longest texts first, 1024 per call),
best of ``--repeats`` runs; the export and model load are timed apart from the rate. Prints
texts/s, the ratio to torch, and the mean and minimum cosine of each ONNX variant to torch's
vectors.

    .venv/bin/python bench/embed_onnx.py [--index /tmp/q/wtq] [--texts 3000] [--threads 0] [--repeats 2]
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

if not __package__:  # run as a file: the repository's bench package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import Timer, arguments, table
from laminae.tasks.config import EmbedConfig
from laminae.tasks.embed.embedders import PROGRESS_CHUNK, TextEmbedder
from laminae.tasks.embed.onnx_backend import OnnxTextEmbedder


def node_texts(index: str, n: int, seed: int = 0) -> list[str]:
    import lancedb

    db = lancedb.connect(index)
    pool: dict[str, None] = {}
    for name in ("subcomponents", "components"):
        for text in db.open_table(name).to_arrow().column("text").to_pylist():
            if text:
                pool.setdefault(text)
    texts = list(pool)
    random.Random(seed).shuffle(texts)
    return texts[:n]


def run(embedder, texts: list[str]) -> tuple[float, np.ndarray]:
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
    ordered = [texts[i] for i in order]
    with Timer()("embed") as lap:
        parts = [embedder.embed(ordered[s:s + PROGRESS_CHUNK]) for s in range(0, len(ordered), PROGRESS_CHUNK)]
    seconds = lap.seconds
    vectors = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
    vectors[order] = np.concatenate(parts)
    return seconds, vectors


def main() -> int:
    parser = arguments(__doc__, threads=0, repeats=2)
    parser.add_argument("--index", default="/tmp/q/wtq")
    parser.add_argument("--texts", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=0)
    parser.add_argument("--cache", help="LAMINAE_CACHE_DIR for the exports (default: a temporary one)")
    args = parser.parse_args()

    texts = node_texts(args.index, args.texts)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["LAMINAE_CACHE_DIR"] = args.cache or tmp
        cfg = EmbedConfig(device="cpu", threads=args.threads, batch_size=args.batch_size)
        builders = {
            "torch fp32": lambda: TextEmbedder(cfg),
            "onnx fp32": lambda: OnnxTextEmbedder(cfg),
            "onnx int8": lambda: OnnxTextEmbedder(cfg, quantize=True),
        }
        results: dict[str, tuple[float, float, np.ndarray]] = {}
        timer = Timer()
        for name, build in builders.items():
            with timer(name) as lap:
                embedder = build()
            setup = lap.seconds
            best, vectors = min((run(embedder, texts) for _ in range(args.repeats)), key=lambda r: r[0])
            results[name] = (setup, best, vectors)
        script = ("import time; t = time.perf_counter(); from laminae.tasks.config import EmbedConfig; "
                  "from laminae.tasks.embed.onnx_backend import OnnxTextEmbedder; "
                  f"OnnxTextEmbedder(EmbedConfig(device='cpu', threads={args.threads})); "
                  "print(f'{time.perf_counter() - t:.2f}')")
        root = Path(__file__).resolve().parent.parent
        reloaded = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True,
                                  check=True).stdout.strip()

    n = len(texts)
    chars = sum(len(t) for t in texts) / n
    threads = args.threads or len(os.sched_getaffinity(0))
    print(f"{n} node texts from {args.index} (mean {chars:.0f} chars), {embedder.model_id.split('#')[0]}, "
          f"batch {embedder.batch_size}, threads {threads}, best of {args.repeats}")
    reference = results["torch fp32"][2]
    rows = []
    for name, (setup, best, vectors) in results.items():
        cos = (vectors * reference).sum(1)
        rows.append((name, setup, n / best, float(cos.mean()), float(cos.min())))
    print(table(["variant", "setup s", "texts/s", "cos mean", "cos min"], rows,
                formats={"texts/s": ".1f", "cos mean": ".5f", "cos min": ".5f"},
                ratio_of="texts/s", ratio_title="x torch", ratio_format=".2f"))
    print("setup: torch = model load; onnx fp32 = export, check against torch, session; onnx int8 = "
          "quantization of the cached fp32 export, session")
    print(f"onnx fp32 from the cache in a new process (imports included): {reloaded} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
