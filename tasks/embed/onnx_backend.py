"""ONNX Runtime backend of the text embedder: a sentence-transformers model exported to ONNX once
and run by onnxruntime, a faster CPU path than torch.

Reads the sentence-transformers model directory (``embed.model`` or the bundled all-MiniLM-L6-v2):
``modules.json``, the transformer's config, weights and fast tokenizer, ``sentence_bert_config.json``
(max_seq_length, do_lower_case), ``1_Pooling/config.json`` and ``config_sentence_transformers.json``
(prompts). Writes the exported graph once to ``<cache>/onnx/<name>-<digest>.onnx``, the digest
covering the directory's file contents and the export options, and with ``quantize=True`` its int8
dynamic quantization beside it; each file is written to a temporary name and renamed, so concurrent
processes never read half a file, and later constructions (in any process) load it without
exporting. Exporting needs torch and the ``onnx`` package; loading a cached file needs neither.

fp32 vectors equal ``TextEmbedder``'s (cosine > 0.9999), so they keep its ``model_id`` and the
embedding cache stays valid; int8 vectors differ slightly and their ``model_id`` ends in
``#onnx-int8``, which keeps them out of fp32 indexes and caches. ``embed.precision`` is ignored: the
graph is fp32 (or int8 weights).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import logging
import os
import shutil
import tempfile
import threading
import uuid
import warnings
from pathlib import Path

import numpy as np

from laminae.schemas.ids import digest
from laminae.tasks.config import EmbedConfig, cache_dir
from laminae.tasks.model_runtime import (
    DEFAULT_MODEL_ID,
    EmbedderConfigError,
    EmbedderInfo,
    default_model_path,
    loaded_once,
    on_free_models,
    session_options,
    spins,
    usable_cores,
)

log = logging.getLogger("laminae.embed")

OPSET = 17
EXPORT_OPTIONS = f"torchscript-opset{OPSET}-eager-attention-v1"
QUANT_OPTIONS = "dynamic-qint8-per-channel-matmul-v1"
INT8_SUFFIX = "#onnx-int8"
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "lasttoken")
_LEGACY_POOLING_KEYS = {  # sentence-transformers' concatenation order
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}

EXPORTS = 0  # exports done by this process (the tests read it)
# texts per call on the CPU, each of ``threads`` sessions running one thread and its own batches:
# 6,000 wtq-dev texts (int8, two cores, in one process, alternating) took 7.0-7.1 s in batches of
# 4 against 7.4 (8), 8.0 (16), 8.9 (32), 7.6 (2) and 8.5 s (1); the int8 vectors also come out
# nearer fp32 with fewer texts a call (per-tensor activation scales: mean cosine 0.99306 with 4,
# 0.99295 with 8, 0.99257 with 64). One session of two threads sharing each batch of 8: 7.0 s
# spinning, 8.1 s sleeping, against 6.0-6.1 s for two single-threaded ones (4,000 texts)
CPU_BATCH = 4
_LOCK = threading.Lock()
_DIGESTS: dict[tuple, str] = {}


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise EmbedderConfigError(f"cannot read {path}: {exc}") from None


class ModelLayout:
    """What the ONNX backend needs from a sentence-transformers directory: where the transformer
    lives, how texts are tokenized and how token vectors are pooled."""

    def __init__(self, model_dir: str) -> None:
        root = Path(model_dir)
        if not root.is_dir():
            raise EmbedderConfigError(
                f"embedding model {model_dir!r} is not a directory: set LAMINAE_EMBED__MODEL to a local "
                "sentence-transformers model directory (model hubs are not reachable from every machine)"
            )
        self.root = root
        transformer, pooling = "", None
        modules_file = root / "modules.json"
        if modules_file.exists():
            modules = _read_json(modules_file)
            kinds = {str(m.get("type")).rsplit(".", 1)[-1]: m.get("path", "") for m in modules}
            unsupported = sorted(set(kinds) - {"Transformer", "Pooling", "Normalize"})
            if unsupported or "Transformer" not in kinds:
                raise EmbedderConfigError(
                    f"{modules_file} lists modules {sorted(kinds)}; the onnx backend runs Transformer, "
                    "Pooling and Normalize only: use the torch backend (TextEmbedder) for this model"
                )
            transformer, pooling = kinds["Transformer"], kinds.get("Pooling")
        self.transformer_dir = root / transformer
        st_config = self.transformer_dir / "sentence_bert_config.json"
        settings = _read_json(st_config) if st_config.exists() else {}
        text_kwargs = (settings.get("processing_kwargs") or {}).get("text") or {}
        # None: the tokenizer's model_max_length capped at max_position_embeddings, as sentence-transformers
        self.max_seq_length: int | None = text_kwargs.get("max_length") or settings.get("max_seq_length")
        self.do_lower_case = bool(settings.get("do_lower_case", False))
        self.modes, self.include_prompt = ("mean",), True
        if pooling is not None:
            self.modes, self.include_prompt = _pooling(root / pooling / "config.json")
        model_config = root / "config_sentence_transformers.json"
        extra = _read_json(model_config) if model_config.exists() else {}
        prompts = extra.get("prompts") or {}
        self.default_prompt = prompts.get(extra.get("default_prompt_name") or "", "")
        self.query_prompt = prompts.get("query", self.default_prompt)
        if not self.include_prompt and (self.default_prompt or self.query_prompt):
            raise EmbedderConfigError(
                f"{root / pooling / 'config.json'} sets include_prompt=false and the model has prompts: "
                "the onnx backend does not exclude prompt tokens; use the torch backend (TextEmbedder)"
            )


def _pooling(path: Path) -> tuple[tuple[str, ...], bool]:
    config = _read_json(path)
    if "pooling_mode" in config:
        mode = config["pooling_mode"]
        modes = (mode,) if isinstance(mode, str) else tuple(mode)
    else:
        modes = tuple(mode for key, mode in _LEGACY_POOLING_KEYS.items() if config.get(key)) or ("mean",)
    unsupported = [m for m in modes if m not in POOLING_MODES]
    if unsupported:
        raise EmbedderConfigError(
            f"{path} asks for pooling {unsupported}; the onnx backend supports {list(POOLING_MODES)}: "
            "use the torch backend (TextEmbedder) for this model"
        )
    return modes, bool(config.get("include_prompt", True))


def model_digest(model_dir: str) -> str:
    """sha256 of the model directory's files (names and contents), remembered per process by
    path, size and mtime. Hub leftovers (``onnx/``, ``openvino/``, dot-directories, READMEs) are
    left out: they do not change the exported graph."""
    root = Path(model_dir).resolve()
    files = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if (not path.is_file() or rel.parts[0] in ("onnx", "openvino") or rel.name.lower().startswith("readme")
                or any(part.startswith(".") for part in rel.parts)):
            continue
        files.append((rel.as_posix(), path))
    stamp = (str(root), *((rel, p.stat().st_size, p.stat().st_mtime_ns) for rel, p in files))
    with _LOCK:
        if stamp in _DIGESTS:
            return _DIGESTS[stamp]
    h = hashlib.sha256()
    for rel, path in files:
        h.update(rel.encode() + b"\0")
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        h.update(b"\0")
    with _LOCK:
        _DIGESTS[stamp] = h.hexdigest()
    return _DIGESTS[stamp]


def onnx_path(model_dir: str, name: str, quantize: bool) -> Path:
    """Where the exported (``quantize``: int8) graph of ``model_dir`` is cached."""
    key = model_digest(model_dir)
    options = (EXPORT_OPTIONS, QUANT_OPTIONS) if quantize else (EXPORT_OPTIONS,)
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[-60:]
    return cache_dir() / "onnx" / f"{slug}-{digest(key, *options)}{'-int8' if quantize else ''}.onnx"


def _check_onnx_package() -> None:
    if importlib.util.find_spec("onnx") is None:
        raise EmbedderConfigError(
            "exporting or quantizing a model for the onnx backend needs the onnx package: "
            "pip install -c constraints.txt onnx"
        )


def export_onnx(layout: ModelLayout, target: Path) -> None:
    """Export the transformer of ``layout`` (token ids → token vectors, dynamic batch and sequence
    axes) to ``target``, written atomically, after checking the graph against torch."""
    global EXPORTS
    _check_onnx_package()
    import torch
    from transformers import AutoModel, AutoTokenizer

    source = str(layout.transformer_dir)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        try:
            model = AutoModel.from_pretrained(source, attn_implementation="eager")
        except ValueError:  # a model without an eager attention path exports with its default one
            model = AutoModel.from_pretrained(source)
    except (OSError, ValueError) as exc:
        raise EmbedderConfigError(
            f"cannot load {source!r} for the ONNX export: {exc}. Pass a local sentence-transformers model "
            "directory (config.json, weights and a tokenizer)"
        ) from None
    model.eval()
    names = _input_names(tokenizer, model)

    class TokenVectors(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            return self.model(**dict(zip(names, inputs, strict=True)), return_dict=True).last_hidden_state

    sample = tokenizer(["a short text", "a somewhat longer text that pads the first one"],
                       padding=True, truncation=True, return_tensors="pt")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # tracer and deprecation notices of the TorchScript exporter
            try:
                # the TorchScript exporter: the dynamo one needs onnxscript and gave no speed-up here
                torch.onnx.export(
                    TokenVectors().eval(), tuple(sample[n] for n in names), str(tmp / "model.onnx"),
                    input_names=names, output_names=["token_embeddings"],
                    dynamic_axes={n: {0: "batch", 1: "sequence"} for n in [*names, "token_embeddings"]},
                    opset_version=OPSET, do_constant_folding=True, dynamo=False,
                )
            except Exception as exc:
                raise EmbedderConfigError(
                    f"torch.onnx.export failed for {source!r}: {type(exc).__name__}: {exc}. Use the torch "
                    "backend (TextEmbedder) for this model"
                ) from None
        if sorted(p.name for p in tmp.iterdir()) != ["model.onnx"]:
            raise EmbedderConfigError(
                f"{source!r} exported with external weight files (a model over 2 GB): the onnx backend "
                "caches single-file graphs only; use the torch backend (TextEmbedder)"
            )
        _check_against_torch(tmp / "model.onnx", tokenizer, model, names, layout)
        os.replace(tmp / "model.onnx", target)
        EXPORTS += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _input_names(tokenizer, model) -> list[str]:
    accepted = inspect.signature(model.forward).parameters
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids")
             if n in tokenizer.model_input_names and n in accepted]
    if names[:2] != ["input_ids", "attention_mask"]:
        raise EmbedderConfigError(
            f"the tokenizer of {tokenizer.name_or_path!r} gives {tokenizer.model_input_names}: the onnx "
            "backend needs input_ids and attention_mask; use the torch backend (TextEmbedder)"
        )
    return names


def _check_against_torch(path: Path, tokenizer, model, names: list[str], layout: ModelLayout) -> None:
    """Refuse a graph whose token vectors differ from torch's on shapes other than the traced one
    (a trace can freeze a shape-dependent branch)."""
    import onnxruntime as ort
    import torch

    texts = ["one", "two words here", "a third text, longer than the others, to pad the batch"] * 2
    enc = tokenizer(texts, padding=True, truncation=True, max_length=layout.max_seq_length or 128,
                    return_tensors="np")
    feeds = {n: enc[n].astype(np.int64) for n in names}
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, feeds)[0]
    with torch.inference_mode():
        want = model(**{n: torch.from_numpy(v) for n, v in feeds.items()}).last_hidden_state.float().numpy()
    mask = feeds["attention_mask"]
    cos = (_pool(got, mask, layout.modes) * _pool(want, mask, layout.modes)).sum(1)
    if cos.min() < 0.9999:
        raise EmbedderConfigError(
            f"the ONNX export of {str(layout.transformer_dir)!r} disagrees with torch (cosine "
            f"{cos.min():.4f}): use the torch backend (TextEmbedder) for this model"
        )


def quantize_onnx(source: Path, target: Path) -> None:
    """int8 dynamic quantization of ``source``'s MatMul weights (per output channel), written
    atomically to ``target``."""
    _check_onnx_package()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = target.with_name(f".{target.stem}-{os.getpid()}-{uuid.uuid4().hex}.onnx")
    # quantize_dynamic logs on the root logger: a pre-processing hint (pre-processing changed neither
    # the speed nor the cosine on MiniLM) and two INFO lines per layer, into a user's build log
    hint = _DropLog("pre-processing before quantization")
    logging.getLogger().addFilter(hint)
    try:
        # per-tensor weights gave cosine 0.945 to fp32 on MiniLM; per-channel 0.992 at the same speed.
        # The embedding tables stay fp32 (MatMul only).
        quantize_dynamic(source, tmp, weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"])
        os.replace(tmp, target)
    finally:
        logging.getLogger().removeFilter(hint)
        tmp.unlink(missing_ok=True)


class _DropLog(logging.Filter):
    """Drops records below WARNING and those holding ``fragment``."""

    def __init__(self, fragment: str) -> None:
        super().__init__()
        self.fragment = fragment

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING and self.fragment not in record.getMessage()


def _providers(device: str) -> tuple[str, list]:
    import onnxruntime as ort

    available = ort.get_available_providers()
    if device == "auto":
        device = "cuda" if "CUDAExecutionProvider" in available else "cpu"
    if not device.startswith("cuda"):
        return "cpu", ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" not in available:
        raise EmbedderConfigError(
            f"device {device!r} asked for, but onnxruntime has no CUDAExecutionProvider (it needs the "
            "onnxruntime-gpu package); use auto or cpu"
        )
    index = int(device.split(":")[1]) if ":" in device else 0
    return device, [("CUDAExecutionProvider", {"device_id": index}), "CPUExecutionProvider"]


def _session(path: Path, providers: list, threads: int, spin: bool, slot: int = 0):
    def load():
        import onnxruntime as ort

        try:
            return ort.InferenceSession(str(path), session_options(threads, spin), providers=providers)
        except Exception as exc:
            raise EmbedderConfigError(
                f"onnxruntime cannot load {path}: {exc}. Delete the file to export the model again"
            ) from None

    return loaded_once(("onnx", str(path), repr(providers), threads, spin, slot), load)


def _pool(hidden: np.ndarray, mask: np.ndarray, modes: tuple[str, ...]) -> np.ndarray:
    """Sentence vectors from token vectors, as sentence-transformers' Pooling, then L2-normalized."""
    weights = mask.astype(np.float32)
    rows = np.arange(len(hidden))
    out = []
    for mode in modes:
        if mode == "cls":
            out.append(hidden[rows, mask.argmax(1)])
        elif mode == "lasttoken":
            out.append(hidden[rows, mask.shape[1] - 1 - mask[:, ::-1].argmax(1)])
        elif mode == "max":
            out.append(np.where(weights[..., None] > 0, hidden, -np.inf).max(1))
        else:
            counts = np.maximum(weights.sum(1, keepdims=True), 1e-9)
            total = np.einsum("bsd,bs->bd", hidden, weights)
            out.append(total / (counts if mode == "mean" else np.sqrt(counts)))
    vectors = np.concatenate(out, axis=1) if len(out) > 1 else out[0]
    norms = np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return (vectors / norms).astype(np.float32)


class OnnxTextEmbedder:
    """``TextEmbedder``'s interface on onnxruntime: the model is exported (and quantized) on first
    use, cached on disk, and one session per file, providers and threads is kept per process."""

    image_mode = "text_proxy"

    def __init__(self, cfg: EmbedConfig | None = None, quantize: bool = False) -> None:
        self.cfg = cfg or EmbedConfig()
        self.quantize = quantize
        self.model_path = self.cfg.model or default_model_path()
        base_id = DEFAULT_MODEL_ID if self.cfg.model is None else self.cfg.model
        self.model_id = base_id + (INT8_SUFFIX if quantize else "")
        self.device, providers = _providers(self.cfg.device)
        self.batch_size = self.cfg.batch_size or (256 if self.device.startswith("cuda") else CPU_BATCH)
        self.threads = self.cfg.threads or usable_cores()
        self.workers = 1 if self.device.startswith("cuda") else self.threads
        self.layout = ModelLayout(self.model_path)
        self.onnx_path = self._prepare(base_id.rstrip("/").rsplit("/", 1)[-1])
        self._providers = providers
        self._spin = spins(self.cfg.spin)
        self._sessions = [self._worker_session(0)]
        self._inputs = [i.name for i in self._sessions[0].get_inputs()]
        self._tokenizer = self._load_tokenizer()
        self.max_seq_length = self.layout.max_seq_length or self._model_max_length()
        self.dim = int(self._encode(["probe"]).shape[1])

    def _worker_session(self, slot: int):
        return _session(self.onnx_path, self._providers, 1 if self.workers > 1 else self.threads, self._spin, slot)

    def load_workers(self) -> None:
        """Load the sessions that embed batches side by side (one a thread on the CPU); the first
        call embedding more than one batch does it otherwise, so a reader embedding its queries
        holds one."""
        self._sessions = [self._worker_session(slot) for slot in range(self.workers)]

    def _prepare(self, name: str) -> Path:
        fp32 = onnx_path(self.model_path, name, quantize=False)
        if not fp32.exists() and not (self.quantize and onnx_path(self.model_path, name, True).exists()):
            log.info("exporting %s to ONNX at %s", self.model_path, fp32)
            export_onnx(self.layout, fp32)
        if not self.quantize:
            return fp32
        int8 = onnx_path(self.model_path, name, quantize=True)
        if not int8.exists():
            log.info("quantizing %s to int8 at %s", fp32, int8)
            quantize_onnx(fp32, int8)
        return int8

    def _load_tokenizer(self):
        from transformers import AutoTokenizer

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(self.layout.transformer_dir))
        except (OSError, ValueError) as exc:
            raise EmbedderConfigError(f"cannot load the tokenizer of {self.model_path!r}: {exc}") from None
        if not tokenizer.is_fast:
            raise EmbedderConfigError(f"{self.model_path!r} has no fast tokenizer (tokenizer.json)")
        if self.layout.do_lower_case:
            from tokenizers.normalizers import Lowercase, Sequence

            normalizer = tokenizer.backend_tokenizer.normalizer
            steps = [Lowercase(), *([normalizer] if normalizer is not None else [])]
            tokenizer.backend_tokenizer.normalizer = Sequence(steps)
        return tokenizer

    def _model_max_length(self) -> int:
        config = _read_json(self.layout.transformer_dir / "config.json")
        limit = config.get("max_position_embeddings") or 512
        return int(min(self._tokenizer.model_max_length, limit))

    @property
    def info(self) -> EmbedderInfo:
        return EmbedderInfo(self.model_id, self.dim, self.image_mode, self.device)

    def _encode(self, texts: list[str], prompt: str = "") -> np.ndarray:
        if prompt:
            texts = [prompt + t for t in texts]
        enc = self._tokenizer(texts, truncation=True, max_length=self.max_seq_length, padding=False,
                              return_token_type_ids="token_type_ids" in self._inputs)
        lengths = np.array([len(ids) for ids in enc["input_ids"]])
        order = np.argsort(-lengths, kind="stable")
        pad_id = self._tokenizer.pad_token_id or 0
        left = self._tokenizer.padding_side == "left"

        def run(chunk: np.ndarray, session) -> np.ndarray:
            width = int(lengths[chunk].max())
            feeds = {name: np.full((len(chunk), width), pad_id if name == "input_ids" else 0, dtype=np.int64)
                     for name in self._inputs}
            for row, i in enumerate(chunk):
                span = slice(width - lengths[i], width) if left else slice(0, lengths[i])
                for name in self._inputs:
                    feeds[name][row, span] = 1 if name == "attention_mask" else enc[name][i]
            return _pool(session.run(None, feeds)[0], feeds["attention_mask"], self.layout.modes)

        chunks = [order[start:start + self.batch_size] for start in range(0, len(order), self.batch_size)]
        if len(chunks) == 1 or self.workers == 1:
            outputs = [run(chunk, self._sessions[0]) for chunk in chunks]
        else:
            if len(self._sessions) < self.workers:
                self.load_workers()
            outputs = [done.result() for done in on_free_models(self._sessions, run, chunks, "embed")]
        result = np.empty((len(texts), outputs[0].shape[1]), dtype=np.float32)
        for chunk, vectors in zip(chunks, outputs, strict=True):
            result[chunk] = vectors
        return result

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in input order."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._encode([t[: self.cfg.max_chars] if t else " " for t in texts], self.layout.default_prompt)

    def embed_query(self, text: str) -> np.ndarray:
        """A query vector, with the model's query prompt when it defines one (e5, bge, ...)."""
        return self._encode([text[: self.cfg.max_chars]], self.layout.query_prompt)[0]

    def embed_images(self, images: list) -> np.ndarray:
        raise EmbedderConfigError(f"{self.model_id} is a text model: it embeds images through their text proxy")
