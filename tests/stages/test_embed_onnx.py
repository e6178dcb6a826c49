"""The ONNX Runtime embedder gives TextEmbedder's vectors, caches its export, and fails with a fix."""

from __future__ import annotations

import json
import logging
import os
import string
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import laminae.tasks.embed.onnx_backend as embed_onnx
from laminae.tasks.config import EmbedConfig
from laminae.tasks.embed.embedders import (
    EmbedderConfigError,
    TextEmbedder,
    configured_model_id,
    default_model_path,
    load_embedder,
    query_embedder,
    resolve_quantize,
)
from laminae.tasks.embed.onnx_backend import OnnxTextEmbedder
from tests.conftest import ROOT

WORDS = ["the", "a", "bread", "oven", "flour", "water", "man", "is", "eating", "food", "."]
TEXTS = [
    "the man is eating bread.",
    "",
    "flour " * 400,  # past max_chars and far past the 16-token limit
    "a",
    "oven water food, and a loaf of rye",
    "the oven is hot and the bread is eating the flour of the man",
    "zzz",
]


def tiny_model(path: Path, pooling: str | list[str] = "mean") -> str:
    """A random two-layer BERT saved as a sentence-transformers directory (16-token limit)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizer

    raw = path / "raw"
    raw.mkdir(parents=True)
    letters = string.ascii_lowercase
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *letters, *(f"##{c}" for c in letters)]
    (raw / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizer(str(raw / "vocab.txt")).save_pretrained(raw)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    BertModel(config).save_pretrained(raw)
    modules = [Transformer(str(raw), max_seq_length=16), Pooling(32, pooling), Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(path / "st"))
    return str(path / "st")


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("LAMINAE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return tiny_model(tmp_path_factory.mktemp("tiny"))


def exports() -> int:
    return embed_onnx.EXPORTS


def cfg(model: str | None, **kwargs) -> EmbedConfig:
    return EmbedConfig(model=model, device="cpu", threads=1, max_chars=300, **kwargs)


@pytest.mark.parametrize("pooling", ["mean", "cls", ["max", "mean"]])
def test_fp32_vectors_match_torch_in_input_order(tmp_path, cache, pooling):
    model = tiny_model(tmp_path / "model", pooling)
    torch_embedder = TextEmbedder(cfg(model))
    onnx = OnnxTextEmbedder(cfg(model, batch_size=2))
    want = torch_embedder.embed(TEXTS)
    got = onnx.embed(TEXTS)
    assert got.shape == want.shape == (len(TEXTS), onnx.dim) and got.dtype == np.float32
    assert onnx.dim == torch_embedder.dim
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert (got * want).sum(1).min() > 0.9999
    alone = np.stack([onnx.embed([t])[0] for t in TEXTS])  # each text alone: batch order undone
    assert np.allclose(got, alone, atol=1e-5)
    assert float(onnx.embed_query("the bread") @ torch_embedder.embed_query("the bread")) > 0.9999
    assert onnx.model_id == torch_embedder.model_id == model
    assert onnx.info.as_metadata() == torch_embedder.info.as_metadata()
    assert onnx.device == "cpu" and onnx.image_mode == "text_proxy"
    with pytest.raises(EmbedderConfigError, match="text proxy"):
        onnx.embed_images([object()])


def test_prompts_are_applied_as_sentence_transformers_does(tmp_path, cache):
    model = Path(tiny_model(tmp_path / "model"))
    settings = json.loads((model / "config_sentence_transformers.json").read_text())
    settings.update(prompts={"query": "the man ", "document": "a "}, default_prompt_name="document")
    (model / "config_sentence_transformers.json").write_text(json.dumps(settings))
    torch_embedder, onnx = TextEmbedder(cfg(str(model))), OnnxTextEmbedder(cfg(str(model)))
    assert (onnx.embed(TEXTS) * torch_embedder.embed(TEXTS)).sum(1).min() > 0.9999
    query = onnx.embed_query("bread")
    assert float(query @ torch_embedder.embed_query("bread")) > 0.9999
    assert float(query @ onnx.embed(["bread"])[0]) < 0.9999  # the query prompt is not the document one


def test_int8_vectors_are_close_and_have_their_own_model_id(tiny, cache, caplog):
    want = TextEmbedder(cfg(tiny)).embed(TEXTS)
    with caplog.at_level(logging.INFO):
        int8 = OnnxTextEmbedder(cfg(tiny), quantize=True)
    assert not [r.getMessage() for r in caplog.records if r.name == "root"]  # the quantizer's chatter
    assert int8.model_id == tiny + "#onnx-int8" and int8.info.model_id == int8.model_id
    got = int8.embed(TEXTS)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = (got * want).sum(1)
    # random init leaves the layers near identity, so int8 costs this model almost nothing (cos 1.0000);
    # all-MiniLM-L6-v2 measured 0.99 (bench/embed_onnx.py)
    assert cos.min() > 0.99, cos
    assert int8.onnx_path.name.endswith("-int8.onnx")
    import onnx

    ops = [node.op_type for node in onnx.load(str(int8.onnx_path)).graph.node]
    assert ops.count("MatMulInteger") == 2 * 6  # q, k, v, attention output, FFN in and out per layer
    assert int8.onnx_path.stat().st_size < OnnxTextEmbedder(cfg(tiny)).onnx_path.stat().st_size


def test_second_construction_reuses_the_cached_export(tiny, cache):
    before = exports()
    first = OnnxTextEmbedder(cfg(tiny))
    assert exports() == before + 1
    path = first.onnx_path
    assert path.parent == cache / "onnx" and path.exists()
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary files left
    stamp = path.stat().st_mtime_ns
    time.sleep(0.01)
    second = OnnxTextEmbedder(cfg(tiny))
    assert exports() == before + 1 and path.stat().st_mtime_ns == stamp
    assert np.array_equal(first.embed(TEXTS), second.embed(TEXTS))
    for spin, entry in (("off", "0"), ("on", "1")):  # threads that sleep or spin between calls
        options = OnnxTextEmbedder(cfg(tiny, spin=spin))._sessions[0].get_session_options()
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == entry
        assert options.intra_op_num_threads == 1

    script = (
        "import sys, laminae.tasks.embed.onnx_backend as m\n"
        "from laminae.tasks.config import EmbedConfig\n"
        f"e = m.OnnxTextEmbedder(EmbedConfig(model={tiny!r}, device='cpu', threads=1))\n"
        "print(m.EXPORTS, e.onnx_path)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env=os.environ.copy(), cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", str(path)]
    assert path.stat().st_mtime_ns == stamp


def test_cpu_batches_run_side_by_side_on_single_threaded_sessions(tiny, cache):
    one = OnnxTextEmbedder(cfg(tiny, batch_size=2))
    three = OnnxTextEmbedder(EmbedConfig(model=tiny, device="cpu", threads=3, max_chars=300, batch_size=2))
    assert three.workers == 3 and len(three._sessions) == 1  # a reader's query embedder holds one
    three.embed_query("bread")
    three.embed(TEXTS[:2])
    assert len(three._sessions) == 1
    texts = TEXTS * 5
    got = three.embed(texts)
    assert len(three._sessions) == 3 and len({id(s) for s in three._sessions}) == 3
    assert [s.get_session_options().intra_op_num_threads for s in three._sessions] == [1, 1, 1]
    assert np.allclose(got, one.embed(texts), atol=1e-6)
    assert np.allclose(got[:len(TEXTS)], got[len(TEXTS):2 * len(TEXTS)], atol=1e-6)


def test_a_changed_model_gets_a_new_export(tmp_path, cache):
    model = Path(tiny_model(tmp_path / "model"))
    first = OnnxTextEmbedder(cfg(str(model))).onnx_path
    settings = json.loads((model / "sentence_bert_config.json").read_text())
    settings["max_seq_length"] = 8
    (model / "sentence_bert_config.json").write_text(json.dumps(settings))
    second = OnnxTextEmbedder(cfg(str(model)))
    assert second.onnx_path != first and second.max_seq_length == 8


def test_empty_list_gives_no_rows(tiny, cache):
    onnx = OnnxTextEmbedder(cfg(tiny))
    assert onnx.embed([]).shape == (0, 32) and onnx.embed([]).dtype == np.float32


def test_models_the_backend_cannot_run_fail_with_a_fix(tmp_path, cache):
    with pytest.raises(EmbedderConfigError, match="local sentence-transformers model directory"):
        OnnxTextEmbedder(cfg(str(tmp_path / "missing")))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(EmbedderConfigError, match="cannot load .* for the ONNX export"):
        OnnxTextEmbedder(cfg(str(empty)))
    weighted = Path(tiny_model(tmp_path / "weighted", "weightedmean"))
    with pytest.raises(EmbedderConfigError, match=r"1_Pooling/config\.json.*weightedmean"):
        OnnxTextEmbedder(cfg(str(weighted)))
    assert not (cache / "onnx").exists() or not any((cache / "onnx").iterdir())


def test_bundled_minilm_matches_torch(cache):
    sentences = ["A man is eating food.", "A man is eating a piece of bread.", "The stock market fell.",
                 "Laminae builds layered indexes of web pages. " * 60]
    start = time.perf_counter()
    onnx = OnnxTextEmbedder(EmbedConfig(device="cpu"))
    got = onnx.embed(sentences)
    assert time.perf_counter() - start < 30
    want = TextEmbedder(EmbedConfig(device="cpu")).embed(sentences)
    assert onnx.model_id == "sentence-transformers/all-MiniLM-L6-v2" and onnx.dim == 384
    assert onnx.max_seq_length == 256 and Path(onnx.layout.root) == Path(default_model_path())
    assert (got * want).sum(1).min() > 0.9999


def test_auto_quantize_keeps_an_index_vector_space(tiny, cache):
    int8 = tiny + "#onnx-int8"
    assert resolve_quantize(cfg(tiny)).quantize == "int8"  # a new index on CPU
    assert configured_model_id(cfg(tiny)) == int8
    assert resolve_quantize(cfg(tiny), tiny).quantize == "none"  # built before int8 was the default
    assert resolve_quantize(cfg(tiny), int8).quantize == "int8"
    assert resolve_quantize(cfg(tiny), "another/model").quantize == "int8"
    assert resolve_quantize(cfg(tiny, quantize="none"), int8).quantize == "none"  # said is kept
    assert resolve_quantize(cfg(tiny, backend="sentence-transformers")).quantize == "none"
    assert load_embedder(cfg(tiny)).model_id == int8
    # the reader embeds a question in the space the index recorded
    assert query_embedder(tiny).__self__.model_id == tiny
    assert query_embedder(int8).__self__.model_id == int8


@pytest.mark.parametrize("recorded", ["fp32", "int8"])
def test_a_refresh_with_defaults_keeps_the_index_model(tiny, cache, tmp_path, recorded):
    from laminae.tasks.config import BuildSettings
    from laminae.tasks.run import prepare_index
    from laminae.tasks.storage.index_store import IndexStore

    embed = cfg(tiny, quantize="none" if recorded == "fp32" else "int8")
    settings = BuildSettings(embed=embed, detect={"enabled": False})
    first = prepare_index(str(tmp_path / "index"), settings)
    assert first["model_id"] == load_embedder(embed).model_id
    again = prepare_index(str(tmp_path / "index"), BuildSettings(embed=cfg(tiny), detect={"enabled": False}))
    assert again["model_id"] == first["model_id"] and again["device"] == "not loaded"
    assert IndexStore(str(tmp_path / "index")).metadata()["embedder"]["model_id"] == first["model_id"]


def test_reembed_moves_an_fp32_index_to_int8(tiny, cache, tmp_path):
    from laminae.tasks.config import BuildSettings
    from laminae.tasks.run import prepare_index
    from laminae.tasks.storage.index_store import IndexStore

    index = str(tmp_path / "index")
    prepare_index(index, BuildSettings(embed=cfg(tiny, quantize="none"), detect={"enabled": False}))
    int8 = BuildSettings(embed=cfg(tiny, quantize="int8"), detect={"enabled": False})
    with pytest.raises(Exception, match="--reembed"):
        prepare_index(index, int8)
    assert prepare_index(index, int8, reembed=True)["model_id"] == tiny + "#onnx-int8"
    assert IndexStore(index).metadata()["embedder"]["model_id"] == tiny + "#onnx-int8"
