"""A text embedder that needs no model, for tests and benchmarks of what happens around embedding.

Reads nothing, writes nothing: ``HashingEmbedder`` hashes a text's words into ``dim`` buckets and
returns unit vectors, deterministically; it has the interface the builder's embedders have.
"""

from __future__ import annotations

import zlib

import numpy as np

from laminae.tasks.model_runtime import EmbedderInfo


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
