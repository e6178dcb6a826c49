"""The bundled MiniLM embeds for real; identical texts and stored vectors are not embedded twice."""

from __future__ import annotations

import numpy as np
import pytest

from laminae.tasks.config import EmbedConfig
from laminae.tasks.embed.embedders import EmbedderConfigError, TextEmbedder, cache_key, embed_rows


@pytest.fixture(scope="module")
def embedder() -> TextEmbedder:
    return TextEmbedder(EmbedConfig(device="cpu", threads=1))


def test_minilm_semantics(embedder):
    food, bread, stocks = embedder.embed(["food", "bread", "stock market"])
    assert embedder.dim == 384
    assert float(food @ bread) > float(food @ stocks) + 0.1
    vectors = embedder.embed(["A man is eating food.", "A man is eating a piece of bread."])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert abs(float(vectors[0] @ vectors[1]) - 0.755) < 0.02


def test_embed_rows_reuses_known_and_duplicate_texts(embedder):
    rows = [{"text": "bread"}, {"text": "bread"}, {"text": "rye"}]
    known: dict = {}
    new = embed_rows(rows, embedder, known)
    assert len(new) == 2 and set(new) == {cache_key(embedder.model_id, "bread"), cache_key(embedder.model_id, "rye")}
    assert np.array_equal(rows[0]["vector"], rows[1]["vector"])
    again = [{"text": "rye"}, {"text": "bread"}]
    assert embed_rows(again, embedder, known) == {}
    assert np.array_equal(again[1]["vector"], rows[0]["vector"])


def test_bad_device_and_model_fail_with_a_fix():
    with pytest.raises(ValueError, match="auto, cpu, cuda"):
        EmbedConfig(device="tpu")
    with pytest.raises(EmbedderConfigError, match="local"):
        TextEmbedder(EmbedConfig(model="/nonexistent/model/dir", device="cpu"))


def test_embedding_in_chunks_reports_progress_and_keeps_the_vectors(embedder, monkeypatch, capsys):
    import laminae.tasks.embed.embedders as module
    from laminae.tasks import progress

    texts = [f"loaf number {i}" for i in range(7)]
    whole = embed_rows([{"text": t} for t in texts], embedder, {})
    monkeypatch.setattr(module, "PROGRESS_CHUNK", 3)
    with progress.reporting("on") as bars:
        chunked = embed_rows([{"text": t} for t in texts], embedder, {})
        assert bars.counts == {"embed": 7}
    assert set(chunked) == set(whole)
    assert all(np.allclose(chunked[k], whole[k], atol=1e-5) for k in whole)
    err = capsys.readouterr().err
    assert "embed" in err and "7/7" in err


def test_chunks_go_longest_first_and_vectors_land_on_their_rows(embedder, monkeypatch):
    import laminae.tasks.embed.embedders as module

    texts = ["rye", "a long sentence about sourdough starters and their feeding", "oven", "flour and water"]
    calls: list[list[str]] = []
    original = embedder.embed
    monkeypatch.setattr(embedder, "embed", lambda chunk: calls.append(chunk) or original(chunk))
    monkeypatch.setattr(module, "PROGRESS_CHUNK", 2)
    rows = [{"text": t} for t in texts]
    embed_rows(rows, embedder, {})
    assert calls == [[texts[1], texts[3]], [texts[2], texts[0]]]  # similar lengths share a call
    for row in rows:
        assert np.allclose(row["vector"], original([row["text"]])[0], atol=1e-5)


def test_progress_modes():
    from laminae.tasks import progress

    assert progress.enabled("on") and not progress.enabled("off")
    assert not progress.enabled("auto")  # pytest's stderr is not a terminal
    with pytest.raises(ValueError, match="auto, on, off"):
        progress.enabled("loud")
    with progress.reporting("off") as bars:
        bars.expect("parse", 3)
        bars.advance("parse", 3)
        assert bars.counts == {"parse": 3} and not bars.bars
    assert progress.current() is not bars
