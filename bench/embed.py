"""Benchmark the embed stage against the bare model's own ``encode`` on the same texts, same run.

Reads the sample site's pages (parsed into paragraphs, sentences, rows and image proxies, each
made unique per copy), writes only a temporary index. The stage is what a build runs per batch:
embedding-cache lookup in LanceDB, ``embed_rows`` (dedup + encode), cache write. The reference is
``SentenceTransformer.encode`` on the same texts with the same batch size. Runs alternate and the
best of each is kept; prints texts/s and the ratio.

    .venv/bin/python bench/embed.py [--texts 3000] [--device cpu|cuda] [--threads 1] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpora import site_texts  # noqa: E402
from laminae import flows  # noqa: E402,F401
from laminae.tasks.config import EmbedConfig  # noqa: E402
from laminae.tasks.embed.embedders import TextEmbedder, cache_key, embed_rows  # noqa: E402
from laminae.tasks.storage.index_store import IndexStore  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=3000)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    texts = site_texts(args.texts)
    embedder = TextEmbedder(EmbedConfig(device=args.device, threads=args.threads, batch_size=args.batch_size))
    model = embedder._model
    bare_best = stage_best = float("inf")
    for _ in range(args.repeats):
        start = time.perf_counter()
        model.encode(texts, batch_size=embedder.batch_size, normalize_embeddings=True,
                     convert_to_numpy=True, show_progress_bar=False)
        bare_best = min(bare_best, time.perf_counter() - start)

        with tempfile.TemporaryDirectory() as tmp:
            store = IndexStore(tmp)
            store.prepare(embedder.info.as_metadata())
            rows = [{"text": t} for t in texts]
            start = time.perf_counter()
            known = store.cached_vectors([cache_key(embedder.model_id, t) for t in texts])
            new = embed_rows(rows, embedder, known)
            store.upsert("embeddings", [{"id": k, "model_id": embedder.model_id, "vector": v} for k, v in new.items()])
            stage_best = min(stage_best, time.perf_counter() - start)
            assert len(new) == len(set(texts))

    n = len(texts)
    chars = sum(len(t) for t in texts) / n
    print(f"{n} texts (mean {chars:.0f} chars), {embedder.model_id} on {embedder.device}, "
          f"batch {embedder.batch_size}, threads {args.threads}, best of {args.repeats}")
    print(f"bare model encode : {n / bare_best:8.1f} texts/s ({bare_best:.2f} s)")
    print(f"embed stage       : {n / stage_best:8.1f} texts/s ({stage_best:.2f} s)")
    print(f"ratio stage/bare  : {bare_best / stage_best:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
