"""The ONNX Runtime embedder gives TextEmbedder's vectors, caches its export, and fails with a fix."""

from __future__ import annotations

import json
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
from laminae.tasks.embed.embedders import EmbedderConfigError, TextEmbedder, default_model_path
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


def test_int8_vectors_are_close_and_have_their_own_model_id(tiny, cache):
    want = TextEmbedder(cfg(tiny)).embed(TEXTS)
    int8 = OnnxTextEmbedder(cfg(tiny), quantize=True)
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
