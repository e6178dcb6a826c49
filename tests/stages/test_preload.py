"""The CLI's build starts a new index's parse workers before it imports the flows and loads its
models while Prefect starts: the same models the run asks for, none for an existing index or a
cluster run."""

from __future__ import annotations

import subprocess
import sys

from laminae.flows.preload import await_preload, preload_models, start_parse_workers
from laminae.tasks.config import BuildSettings
from laminae.tasks.embed.embedders import load_embedder
from laminae.tasks.model_runtime import forget_models, loaded_models
from laminae.tasks.nodes.objects import Detector, resolve_weights
from laminae.tasks.nodes.ocr_lines import recognizer_slots, workers
from laminae.tasks.parse.isolated import close_pools, worker_pool
from laminae.tasks.parse.ocr import recognizer, spelling_dictionary
from laminae.tasks.storage.index_store import IndexStore


def test_a_new_index_has_its_models_loaded_as_the_run_asks_for_them(tmp_path):
    settings = BuildSettings()
    forget_models()
    close_pools()
    start_parse_workers(str(tmp_path / "new"), settings)
    thread = preload_models(str(tmp_path / "new"), settings)
    assert thread is not None
    await_preload()  # what the run does before it loads anything itself
    assert not thread.is_alive()
    held = set(loaded_models())
    assert {key[0] for key in held} >= {"onnx", "yolo", "rapidocr", "symspellpy"}, held
    assert not (tmp_path / "new").exists()  # nothing written for an index the run has not created
    pool = worker_pool(settings.runner.parse_workers)
    assert settings.runner.parse_workers and len(pool.pids()) == settings.runner.parse_workers
    in_worker = "sorted({'pysbd', 'laminae.tasks.nodes.pages'} & set(__import__('sys').modules))"
    assert pool.map(eval, [(in_worker,)]) == [["laminae.tasks.nodes.pages", "pysbd"]]  # imported when started
    # what the run then asks for is what was loaded: nothing new
    load_embedder(settings.embed).embed(["rye bread"] * 64)  # batches side by side: every session
    Detector(settings.detect, resolve_weights(settings.detect), settings.embed.threads, settings.embed.spin)
    for slot, threads in recognizer_slots(settings.ocr, workers(settings.ocr)):
        recognizer(settings.ocr, slot, threads)
    spelling_dictionary()
    assert set(loaded_models()) == held
    close_pools()


def test_no_preload_for_an_existing_index_or_a_cluster(tmp_path):
    IndexStore(tmp_path / "old").remember(embedder={"model_id": "m", "dim": 4, "image_mode": "text"})
    forget_models()
    assert preload_models(str(tmp_path / "old"), BuildSettings()) is None
    assert preload_models(str(tmp_path / "new"), BuildSettings(runner={"kind": "dask"})) is None
    assert not loaded_models()
    close_pools()
    start_parse_workers(str(tmp_path / "old"), BuildSettings())
    start_parse_workers(str(tmp_path / "new"), BuildSettings(runner={"kind": "dask"}))
    assert not worker_pool(BuildSettings().runner.parse_workers).pids()


def test_starting_the_workers_imports_nothing_heavy_in_the_caller():
    code = ("import sys, laminae.flows.preload; "
            "print(sorted(m for m in ('prefect', 'onnxruntime', 'transformers', 'torch', 'ultralytics', "
            "'rapidocr_onnxruntime', 'pysbd', 'laminae.tasks.nodes.pages') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
