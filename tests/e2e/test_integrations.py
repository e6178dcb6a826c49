"""The LangChain and LlamaIndex retrievers (laminae.integrations) on the demo site's index, built by
the real flow: each move gives the ids of the reader move it wraps in its order, with the hit's
metadata; pictures and object crops come back as LlamaIndex ImageNodes (in LangChain's metadata
on request); the async paths give the same; and neither framework reaches the network, at import
or at query time (a child process with every connection beyond loopback refused and recorded).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys

import pytest
from langchain_core.documents import Document
from llama_index.core.schema import ImageNode, NodeRelationship, NodeWithScore, TextNode

import laminae
from laminae.flows.demo import SiteServer
from laminae.integrations.langchain import IMAGE_NOTE
from laminae.integrations.langchain import LaminaeRetriever as LangChainRetriever
from laminae.integrations.llama_index import PROMPT_METADATA
from laminae.integrations.llama_index import LaminaeRetriever as LlamaIndexRetriever
from tests.conftest import ROOT
from tests.e2e.test_flow import build

QUESTION = "Which bread bakes for a whole day at low heat?"


@pytest.fixture(scope="module")
def index(tmp_path_factory, prefect_harness) -> laminae.Index:
    tmp = tmp_path_factory.mktemp("integrations")
    with SiteServer() as site:
        summary = build(site.seeds(), tmp / "index", tmp)
    assert summary["status"] == "success", summary["errors_by_stage"]
    return laminae.open(str(tmp / "index"))


def _moves(index: laminae.Index) -> list[tuple[dict, list]]:
    """(retriever arguments, the reader's own hits for QUESTION) for every move."""
    docs = index.documents(QUESTION, k=5, granularity=2)
    anchor = docs[0].id
    ids = [d.id for d in docs]
    return [
        ({}, index.retrieve(QUESTION, k=10)),
        ({"move": "retrieve", "k": 4, "kinds": ["table"], "ranking": "rrf"},
         index.retrieve(QUESTION, k=4, kinds=["table"], ranking="rrf")),
        ({"move": "retrieve", "k": 6, "pages": "one"}, index.retrieve(QUESTION, k=6, pages="one")),
        ({"move": "search", "k": 6, "layer": 2, "kinds": ["sentence", "row"]},
         index.search(QUESTION, layer=2, k=6, kinds=["sentence", "row"])),
        ({"move": "documents", "k": 5, "granularity": 2}, docs),
        ({"move": "documents", "k": 5, "granularity": 1, "scope": "local", "anchors": [anchor], "direction": "out"},
         index.documents(QUESTION, k=5, granularity=1, scope="local", anchors=[anchor], direction="out")),
        ({"move": "components", "k": 8, "document_ids": ids, "granularity": 2},
         index.components(QUESTION, ids, k=8, granularity=2)),
        ({"move": "hop"}, index.hop(QUESTION)),  # the local hop bench/quality.py scores
        ({"move": "hop", "anchors": [anchor], "k": 5},
         index.components(QUESTION, [anchor, *(h.id for h in index.documents(
             QUESTION, k=10, granularity=2, scope="local", anchors=[anchor]))], k=5, granularity=2)),
    ]


def test_the_hop_is_fifs_local_hop(index):
    """Index.hop: the best 3 documents, the 10 best linked to or from them, then the best
    components of all of those, all at granularity 2 (as bench/quality.py scores it)."""
    start = [h.id for h in index.documents(QUESTION, k=3, granularity=2)]
    linked = [h.id for h in index.documents(QUESTION, k=10, granularity=2, scope="local", anchors=start)]
    assert start and set(linked) - set(start)
    expected = index.components(QUESTION, list(dict.fromkeys(start + linked)), k=10, granularity=2)
    assert [h.id for h in index.hop(QUESTION)] == [h.id for h in expected]
    assert [h.score for h in index.hop(QUESTION)] == [h.score for h in expected]


def _check_metadata(index: laminae.Index, hits: list, metadata: list[dict], move: str) -> None:
    nodes = {n["id"]: n for n in index.get([h.id for h in hits])}
    for hit, meta in zip(hits, metadata, strict=True):
        node = nodes[hit.id]
        section = node.get("section_path") if hit.layer == 1 else (
            index.get([node["parent_id"]])[0]["section_path"] if hit.layer == 2 else None)
        assert meta["id"] == hit.id and meta["layer"] == hit.layer and meta["kind"] == hit.kind
        assert meta["document_id"] == hit.document_id == (index.document_of(hit.id))
        assert meta["title"] == hit.extra["title"] and meta["title"]
        assert meta["url"] == hit.extra["url"] and meta["url"].startswith("http://127.0.0.1:")
        assert meta["section_path"] == list(section or [])
        assert meta["score"] == pytest.approx(hit.score)
        assert meta["manifest_version"] == index.version and meta["move"] == move
        for key in ("similarity", "probability"):
            assert meta.get(key) == (pytest.approx(hit.extra[key]) if key in hit.extra else None)
    assert any(m["section_path"] for m in metadata) or all(h.layer == 0 for h in hits)


def test_each_move_gives_the_readers_ids_in_order_with_metadata(index):
    spread = [h.id for h in index.retrieve(QUESTION, k=6, pages="one")]
    assert spread != [h.id for h in index.retrieve(QUESTION, k=6)]  # so the retrievers' pages case tells it apart
    for arguments, hits in _moves(index):
        assert hits, arguments
        move = arguments.get("move", "retrieve")
        documents = LangChainRetriever(index=index, **arguments).invoke(QUESTION)
        assert all(isinstance(d, Document) for d in documents)
        assert [d.id for d in documents] == [h.id for h in hits], arguments
        assert [d.page_content for d in documents] == [h.text or "" for h in hits]
        _check_metadata(index, hits, [d.metadata for d in documents], move)

        nodes = LlamaIndexRetriever(index, **arguments).retrieve(QUESTION)
        assert all(isinstance(n, NodeWithScore) for n in nodes)
        assert [n.node.node_id for n in nodes] == [h.id for h in hits], arguments
        assert [n.score for n in nodes] == pytest.approx([h.score for h in hits])
        assert [n.node.get_content() for n in nodes] == [h.text or "" for h in hits]
        _check_metadata(index, hits, [n.node.metadata for n in nodes], move)
        for node, hit in zip(nodes, hits, strict=True):
            source = node.node.relationships.get(NodeRelationship.SOURCE)
            assert (source.node_id if source else None) == (hit.document_id if hit.layer else None)
            prompt = node.node.get_content(metadata_mode="llm")
            assert hit.extra["title"] in prompt and hit.id not in prompt  # where it comes from, not its id


def test_async_calls_give_the_same(index):
    arguments, hits = _moves(index)[-2]  # the hop: three reader moves
    documents = asyncio.run(LangChainRetriever(index=index, **arguments).ainvoke(QUESTION))
    nodes = asyncio.run(LlamaIndexRetriever(index, **arguments).aretrieve(QUESTION))
    assert [d.id for d in documents] == [n.node.node_id for n in nodes] == [h.id for h in hits]


def test_pictures_and_crops(index):
    images = index.retrieve("people waiting by a bus", k=3, kinds=["image"])
    objects = index.search("person", layer=2, k=2, kinds=["object"])
    lines = index.search("Millbrook harvest fair", layer=2, k=1, kinds=["text"])
    assert images and objects and lines
    expected = {n["id"]: n for n in index.get([h.id for h in [*images, *objects, *lines]])}

    nodes = [*LlamaIndexRetriever(index, k=3, kinds=["image"]).retrieve("people waiting by a bus"),
             *LlamaIndexRetriever(index, "search", 2, layer=2, kinds=["object"]).retrieve("person"),
             *LlamaIndexRetriever(index, "search", 1, layer=2, kinds=["text"]).retrieve("Millbrook harvest fair")]
    assert [n.node.node_id for n in nodes] == [h.id for h in [*images, *objects, *lines]]
    for scored in nodes:
        node, row = scored.node, expected[scored.node.node_id]
        assert isinstance(node, ImageNode) and node.metadata["has_image"]
        if row["layer"] == 1:  # the picture itself, with where it was found
            assert base64.b64decode(node.image) == row["image"] and node.image_mimetype == row["image_mime"]
            assert node.image_url == row["image_url"] == node.metadata["image_url"]
        else:  # the object's (the line's) crop, cut from its picture
            assert base64.b64decode(node.image) == row["crop"] and node.image_mimetype == "image/png"
            assert node.relationships[NodeRelationship.PARENT].node_id == row["parent_id"] == node.metadata["parent_id"]
    assert nodes[0].node.resolve_image().read()[:3] == b"\xff\xd8\xff"  # a JPEG photograph

    plain = LlamaIndexRetriever(index, k=3, kinds=["image"], images=False).retrieve("people waiting by a bus")
    assert all(type(n.node) is TextNode and n.node.metadata["has_image"] for n in plain)

    documents = LangChainRetriever(index=index, move="search", k=2, layer=2, kinds=["object"]).invoke("person")
    assert all(d.metadata["has_image"] and d.metadata["image_note"] == IMAGE_NOTE for d in documents)
    assert all("image_base64" not in d.metadata for d in documents)
    documents = LangChainRetriever(index=index, k=3, kinds=["image"], image_base64=True).invoke("people waiting by a bus")
    assert [base64.b64decode(d.metadata["image_base64"]) for d in documents] == [expected[h.id]["image"] for h in images]
    assert [d.metadata["image_mime"] for d in documents] == [expected[h.id]["image_mime"] for h in images]


def test_keyframes_say_where_in_the_video(index):
    frames = [r for r in index.table("components").to_arrow().to_pylist() if r["time_s"] is not None]
    assert frames
    nodes = LlamaIndexRetriever(index, "search", 50, layer=1, kinds=["image"]).retrieve("a deck oven loaded with bread")
    by_id = {n.node.node_id: n.node for n in nodes}
    assert {f["id"] for f in frames} <= set(by_id)
    for frame in frames:
        node = by_id[frame["id"]]
        assert isinstance(node, ImageNode) and base64.b64decode(node.image)[:3] == b"\xff\xd8\xff"
        assert node.metadata["time_s"] == frame["time_s"] and node.metadata["video_url"] == frame["video_url"]


def test_text_nodes_carry_no_picture(index):
    nodes = LlamaIndexRetriever(index, k=10, kinds=["paragraph", "table"]).retrieve(QUESTION)
    assert nodes and all(type(n.node) is TextNode and "has_image" not in n.node.metadata for n in nodes)
    assert set(PROMPT_METADATA) >= {"title", "url", "section_path"}


OFFLINE = r"""
import json, sys
refused = []

def hook(event, args):  # nothing here needs a socket: any connection, the proxy's included, is refused
    if event in ("socket.connect", "socket.getaddrinfo"):
        refused.append(f"{event} {args[1] if event == 'socket.connect' else args[0]!r}")
        raise ConnectionRefusedError("no network in this test")

sys.addaudithook(hook)
import laminae
from laminae.integrations.langchain import LaminaeRetriever as LangChainRetriever
from laminae.integrations.llama_index import LaminaeRetriever as LlamaIndexRetriever

index = laminae.open(sys.argv[1])
question = sys.argv[2]
counts = []
for arguments in ({}, {"move": "hop"}, {"k": 3, "kinds": ["image"]}):
    counts.append(len(LangChainRetriever(index=index, **arguments).invoke(question)))
    nodes = LlamaIndexRetriever(index, **arguments).retrieve(question)
    counts.append(len(nodes))
    for n in nodes:  # what a LlamaIndex pipeline does with a node: its text for a model, its picture
        n.node.get_content(metadata_mode="llm")
        if getattr(n.node, "image", None):
            n.node.resolve_image()
print(json.dumps({"refused": refused, "counts": counts}))
"""


def test_no_download_at_import_or_query(index):
    env = {**os.environ, "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
           "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}
    proc = subprocess.run([sys.executable, "-c", OFFLINE, index.root, QUESTION], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["refused"] == []
    assert all(report["counts"]) and len(report["counts"]) == 6
