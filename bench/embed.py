"""Benchmark the embed stage against the bare model's own ``encode`` on the same texts, same run.

Reads the sample site's pages (parsed into paragraphs, sentences, rows and image proxies, each
made unique per copy), writes only a temporary index. The stage is what a build runs per batch:
embedding-cache lookup in LanceDB, ``embed_rows`` (dedup + encode), cache write. The reference is
``SentenceTransformer.encode`` on the same texts with the same batch size. Runs alternate and the
best of each is kept; prints texts/s and the ratio.

    .venv/bin/python bench/embed.py [--texts 3000] [--device cpu|cuda] [--threads 1] [--repeats 3]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

if not __package__:  # run as a file: the repository's bench package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpora import site_texts
from bench.harness import Timer, arguments, table
from laminae import flows  # noqa: F401 - Prefect's offline defaults before anything imports prefect
from laminae.tasks.config import EmbedConfig
from laminae.tasks.embed.embedders import TextEmbedder, cache_key, cached_vectors, embed_rows
from laminae.tasks.storage.index_store import IndexStore


def main() -> int:
    parser = arguments(__doc__, device="cpu", threads=1, repeats=3)
    parser.add_argument("--texts", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=0)
    args = parser.parse_args()

    texts = site_texts(args.texts)
    embedder = TextEmbedder(EmbedConfig(device=args.device, threads=args.threads, batch_size=args.batch_size))
    model = embedder._model
    timer = Timer()
    for _ in range(args.repeats):
        with timer("bare model encode"):
            model.encode(texts, batch_size=embedder.batch_size, normalize_embeddings=True,
                         convert_to_numpy=True, show_progress_bar=False)

        with tempfile.TemporaryDirectory() as tmp:
            store = IndexStore(tmp)
            store.prepare(embedder.info.as_metadata())
            rows = [{"text": t} for t in texts]
            with timer("embed stage"):
                known = cached_vectors(store.table("embeddings"), [cache_key(embedder.model_id, t) for t in texts])
                new = embed_rows(rows, embedder, known)
                store.upsert("embeddings", [{"id": k, "model_id": embedder.model_id, "vector": v}
                                            for k, v in new.items()])
            assert len(new) == len(set(texts))

    n = len(texts)
    chars = sum(len(t) for t in texts) / n
    print(f"{n} texts (mean {chars:.0f} chars), {embedder.model_id} on {embedder.device}, "
          f"batch {embedder.batch_size}, threads {args.threads}, best of {args.repeats}")
    runs = ("bare model encode", "embed stage")
    print(table(["run", "texts/s", "seconds"], [(name, n / timer.best(name), timer.best(name)) for name in runs],
                formats={"texts/s": ".1f"}, ratio_of="texts/s", ratio_title="× bare"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
