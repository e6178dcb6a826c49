"""The summarize stage within its batch deadline (``summarize.batch_timeout_s``): an OpenAI-style
chat endpoint on 127.0.0.1 that answers some documents at once and never answers the others
(until the test lets it): those keep their lead text as summary, with a warning row each."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler

import numpy as np

from laminae.tasks.config import BuildSettings, SummarizeConfig
from laminae.tasks.nodes.document_nodes import DocumentNodes
from laminae.tasks.nodes.summaries import lead_summary, summarize_stage
from tests.stages.test_ml_stages import server_post

SENTENCES = ["Rye bread keeps for a week.", "It is baked in a hot oven for an hour.",
             "Its crumb is dense and moist.", "A starter gives it its sour taste."]


def _doc(n: int, quick: bool) -> DocumentNodes:
    doc_id = f"d{n}"
    sentences = [{"kind": "sentence", "text": f"{'Quick' if quick else 'Slow'} note {n}. {s}",
                  "vector": np.random.default_rng(n * 10 + i).random(8, dtype=np.float32)}
                 for i, s in enumerate(SENTENCES)]
    return DocumentNodes({"id": doc_id, "url": f"http://h.test/{doc_id}.html", "title": f"Note {n}", "text": ""},
                         subcomponents=sentences)


def test_summaries_past_the_batch_deadline_keep_their_lead_text(server):
    release = threading.Event()

    def chat(handler: BaseHTTPRequestHandler) -> None:
        text = json.loads(handler.rfile.read(int(handler.headers["Content-Length"])))["messages"][1]["content"]
        if not text.startswith("Quick"):
            release.wait()  # a model that never answers, until the test ends
        reply = json.dumps({"choices": [{"message": {"content": "Made by the model."}}]}).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(reply)))
        handler.end_headers()
        handler.wfile.write(reply)

    server_post(server)
    server.routes["/v1/chat/completions"] = chat
    docs = [_doc(n, quick=n % 2 == 0) for n in range(6)]
    settings = BuildSettings(summarize={"mode": "endpoint", "base_url": server.url("/v1"), "endpoint_model": "tiny",
                                        "timeout": 600, "retries": 0, "concurrency": 8, "batch_timeout_s": 2})
    try:
        problems = summarize_stage(docs, settings, "run")
    finally:
        release.set()

    late = {p["document_id"]: p for p in problems}
    assert set(late) == {"d1", "d3", "d5"} and len(problems) == 3
    for doc_id, row in late.items():
        assert row["reason"] == "summarize_timeout" and row["severity"] == "warning" and row["stage"] == "summarize"
        assert "batch_timeout_s (2 s" in row["message"] and row["url"] == f"http://h.test/{doc_id}.html"
    for d in docs:
        texts = [s["text"] for s in d.subcomponents]
        if d.document["id"] in late:
            assert d.document["summary"] == " ".join(texts[:3])  # the first max_sentences sentences
        else:
            assert d.document["summary"] == "Made by the model."
        assert d.document["text"] == f"{d.document['title']}\n{d.document['summary']}"


def test_the_lead_text_is_cut_as_the_extractive_summary_is():
    sentences = ["One two three.", "Four five six seven.", "Eight.", "Nine ten."]
    assert lead_summary(sentences, SummarizeConfig(max_sentences=2)) == "One two three. Four five six seven."
    cut = SummarizeConfig(max_sentences=3, max_chars=50)
    assert lead_summary(["A" * 30, "B" * 30, "C"], cut) == "A" * 30  # the second would overrun max_chars
    assert lead_summary(["D" * 80], cut) == "D" * 50  # a first sentence longer than max_chars is cut
    assert lead_summary([], cut) is None
