"""What a new index's build starts before its flow runs: the parse worker processes, light to
import, so the CLI calls ``start_parse_workers`` before it imports the flows (about 1.5 s of one
core, while the other would idle); then the models, loaded by ``preload_models`` on a thread while
Prefect starts (the model packages are imported by that thread, not by this module).

Reads the index's ``index.json`` (a new index has none) and the build settings; writes nothing.
"""

from __future__ import annotations

import logging
import threading

from laminae.schemas.storage import IndexFiles
from laminae.tasks.config import BuildSettings
from laminae.tasks.parse.isolated import start_workers, worker_pool
from laminae.tasks.storage.index_store import META_FILE

log = logging.getLogger("laminae.build")

PARSE_MODULES = ("laminae.tasks.nodes.pages",)  # what a parse worker imports to parse a page


def preloads(index: str, settings: BuildSettings) -> bool:
    """Whether a build starts its workers and loads its models before the flow: only for a new
    index (a run on an existing one may need no model at all) built on this machine (a cluster's
    batches load them on its workers)."""
    return settings.runner.kind == "local" and IndexFiles(index).read_text(META_FILE) is None


def start_parse_workers(index: str, settings: BuildSettings) -> None:
    """Start the parse worker processes of a new index's build (each importing the parser, about
    3 s) on a thread of their own; the first batch's parse waits for them."""
    if preloads(index, settings) and settings.runner.parse_workers:
        start_workers(worker_pool(settings.runner.parse_workers), PARSE_MODULES)


_PRELOADING: list[threading.Thread] = []


def preload_models(index: str, settings: BuildSettings) -> threading.Thread | None:
    """Load the models a new index's batches run (embedder, detector, recognizers, the OCR's
    spelling dictionary) on a thread of their own, started before the flow: Prefect then starts
    its temporary API server (about 4 s here, the process waiting on it) meanwhile, and the run's
    own loads find them loaded (``loaded_once``). None where ``preloads`` says no. A load that
    fails is left to the run, which raises it. (The parse workers are started earlier, by
    ``start_parse_workers``.)"""
    if not preloads(index, settings):
        return None

    def load() -> None:
        from laminae.tasks.embed.embedders import load_embedder
        from laminae.tasks.embed.onnx_backend import OnnxTextEmbedder
        from laminae.tasks.nodes.objects import Detector, resolve_weights
        from laminae.tasks.nodes.ocr_lines import recognizer_slots, workers
        from laminae.tasks.parse.ocr import recognizer, spelling_dictionary

        try:
            embedder = load_embedder(settings.embed)
            if isinstance(embedder, OnnxTextEmbedder):
                embedder.load_workers()
            weights = resolve_weights(settings.detect) if settings.detect.enabled else None
            if weights is not None:
                Detector(settings.detect, weights, settings.embed.threads, settings.embed.spin)
            if settings.ocr.enabled:
                for slot, threads in recognizer_slots(settings.ocr, workers(settings.ocr)):
                    recognizer(settings.ocr, slot, threads)
                if settings.ocr.repair_spacing:
                    spelling_dictionary()
        except Exception:  # noqa: BLE001 - loaded again by the stage that needs it, which reports it
            log.debug("preloading the models failed; the run loads them itself", exc_info=True)

    thread = threading.Thread(target=load, name="laminae-preload", daemon=True)
    thread.start()
    _PRELOADING.append(thread)
    return thread


def await_preload() -> None:
    """Wait for this process's preloading thread, before the run loads anything itself: two threads
    importing one package at once can see it half initialized (transformers' lazy modules: "cannot
    import name 'AutoTokenizer'" when the flow started at once on an already running API server)."""
    while _PRELOADING:
        _PRELOADING.pop().join()
