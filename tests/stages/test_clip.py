"""A tiny random CLIP built here, saved to a temp dir and loaded by path through the real code."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from laminae.tasks.config import EmbedConfig
from laminae.tasks.embed.embedders import ClipEmbedder, EmbedderConfigError, load_embedder


def test_tiny_clip_loads_by_path_and_embeds_text_and_images(tiny_clip):
    embedder = load_embedder(EmbedConfig(model=tiny_clip, device="cpu", batch_size=2))
    assert isinstance(embedder, ClipEmbedder)
    assert embedder.image_mode == "pixels" and embedder.dim == 16
    texts = ["a red square", "x", "a much longer caption about a blue circle", "a red square"]
    vectors = embedder.embed(texts)
    assert vectors.shape == (4, 16) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert np.allclose(vectors[0], vectors[3], atol=1e-5)  # batching and length sorting keep order
    assert np.allclose(embedder.embed(["x"])[0], vectors[1], atol=1e-5)
    pics = [Image.new("RGB", (64, 48), (255, 0, 0)), Image.new("RGB", (20, 20), (0, 0, 255)),
            Image.new("RGB", (64, 48), (255, 0, 0))]
    image_vectors = embedder.embed_images(pics)
    assert image_vectors.shape == (3, 16)
    assert np.allclose(np.linalg.norm(image_vectors, axis=1), 1, atol=1e-5)
    assert np.allclose(image_vectors[0], image_vectors[2], atol=1e-5)
    assert not np.allclose(image_vectors[0], image_vectors[1], atol=1e-3)
    similarity = image_vectors @ vectors.T  # one space: image-text scores are defined
    assert similarity.shape == (3, 4)
    assert embedder.embed_query("a red square").shape == (16,)
    assert embedder.info.as_metadata() == {"model_id": tiny_clip, "dim": 16, "image_mode": "pixels"}


def test_clip_backend_refuses_a_text_model():
    from laminae.tasks.embed.embedders import default_model_path

    with pytest.raises(EmbedderConfigError, match="not CLIP"):
        ClipEmbedder(EmbedConfig(model=default_model_path(), backend="clip", device="cpu"))


def test_text_model_does_not_embed_pixels():
    embedder = load_embedder(EmbedConfig(device="cpu"))
    assert embedder.image_mode == "text_proxy"
    with pytest.raises(EmbedderConfigError, match="text proxy"):
        embedder.embed_images([Image.new("RGB", (4, 4))])


def test_tiny_open_clip_loads_local_weights(tmp_path):
    import open_clip
    import torch

    config = {"embed_dim": 16, "vision_cfg": {"image_size": 32, "layers": 2, "width": 32, "patch_size": 8,
                                              "head_width": 16},
              "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2}}
    config_path = tmp_path / "laminae-tiny-test.json"
    config_path.write_text(json.dumps(config))
    open_clip.add_model_config(str(config_path))
    torch.manual_seed(0)
    model = open_clip.create_model("laminae-tiny-test", pretrained=None)
    torch.save(model.state_dict(), tmp_path / "weights.bin")

    cfg = EmbedConfig(model=f"open_clip:laminae-tiny-test:{tmp_path / 'weights.bin'}",
                      open_clip_config=str(config_path), device="cpu", batch_size=2)
    embedder = load_embedder(cfg)
    assert embedder.image_mode == "pixels" and embedder.dim == 16
    texts = ["a bus", "two people talking about bread and ovens for a long time", "a bus"]
    vectors = embedder.embed(texts)
    assert vectors.shape == (3, 16) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert np.allclose(vectors[0], vectors[2], atol=1e-5)
    with torch.no_grad():
        direct = model.encode_text(open_clip.get_tokenizer("laminae-tiny-test")(["a bus"]))
    assert np.allclose(vectors[0], (direct / direct.norm()).numpy()[0], atol=1e-5)  # the saved weights
    images = embedder.embed_images([Image.new("RGB", (50, 40), (0, 200, 0)), Image.new("RGB", (8, 8))])
    assert images.shape == (2, 16) and np.allclose(np.linalg.norm(images, axis=1), 1, atol=1e-5)
    with pytest.raises(EmbedderConfigError, match="local weights"):
        load_embedder(EmbedConfig(model=f"open_clip:laminae-tiny-test:{tmp_path / 'missing.bin'}",
                                  device="cpu"))
