"""The index reached from outside Python: an MCP server (the SDK's own client, over stdio and over
streamable HTTP on 127.0.0.1) and the terminal commands, against the demo site's index."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

import laminae
import laminae.query
from laminae.flows.cli import main
from laminae.flows.demo import SiteServer
from laminae.schemas.storage import MANIFEST_DIR
from tests.e2e.test_flow import build

TOOLS = {"search", "documents", "components", "hop", "beam_search", "get", "neighbors", "stats", "use_latest"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory, prefect_harness):
    """(index directory, ids of a table, its document, an image with a picture, an object, a row)."""
    tmp = tmp_path_factory.mktemp("reach")
    with SiteServer() as site:
        summary = build(site.seeds(), tmp / "index", tmp)
    assert summary["status"] == "success", summary["errors_by_stage"]
    index = laminae.open(str(tmp / "index"))
    comps = index.table("components").to_arrow().to_pylist()
    subs = index.table("subcomponents").to_arrow().to_pylist()
    table = next(c for c in comps if c["kind"] == "table" and c["table_header"] and len(c["table_rows"] or []) > 2)
    image = next(c for c in comps if c["kind"] == "image" and c["image_key"])
    obj = next(s for s in subs if s["kind"] == "object")
    row = next(s for s in subs if s["kind"] == "row" and s["parent_id"] == table["id"])
    return {"index": tmp / "index", "table": table, "image": image, "object": obj, "row": row}


def _stdio(index: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "laminae.flows.cli", "mcp", "--index", str(index), *extra])


def _json(result) -> dict:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


async def _exercise(client: Client, demo: dict) -> None:
    """The calls both transports must answer alike."""
    assert {t.name for t in (await client.list_tools()).tools} == TOOLS
    index = laminae.open(str(demo["index"]))
    found = _json(await client.call_tool("search", {"query": "rye bread baked for a whole day", "k": 3}))
    assert found["manifest_version"] == index.version and len(found["hits"]) == 3
    assert [h["id"] for h in found["hits"]] == [h.id for h in index.search("rye bread baked for a whole day", k=3)]
    assert any("Pumpernickel" in h["text"] for h in found["hits"])
    page2 = _json(await client.call_tool("search", {"query": "rye bread baked for a whole day", "k": 3, "offset": 3}))
    assert not {h["id"] for h in page2["hits"]} & {h["id"] for h in found["hits"]}

    table = demo["table"]
    got = await client.call_tool("get", {"ids": [table["id"], demo["image"]["id"], demo["object"]["id"], "nope"],
                                         "max_rows": 2})
    payload = _json(got)
    views = {v["id"]: v for v in payload["nodes"]}
    assert payload["unknown_ids"] == ["nope"]
    assert views[table["id"]]["header"] == table["table_header"] and len(views[table["id"]]["rows"]) == 2
    assert views[table["id"]]["rows_total"] == len(table["table_rows"])
    assert views[table["id"]]["url"].endswith(".html") and views[table["id"]]["title"]
    pictures = [c for c in got.content if c.type == "image"]
    assert len(pictures) == 2
    by_node = {p.meta["node_id"]: p for p in pictures}
    stored = index.get([demo["image"]["id"], demo["object"]["id"]])
    assert base64.b64decode(by_node[demo["image"]["id"]].data) == stored[0]["image"]
    assert by_node[demo["object"]["id"]].mime_type == "image/png"
    assert base64.b64decode(by_node[demo["object"]["id"]].data) == stored[1]["crop"]

    hop = _json(await client.call_tool("documents", {"query": "rye", "scope": "local",
                                                     "anchors": [table["document_id"]], "k": 5}))
    linked = set(index.neighbors([table["document_id"]], direction="both"))
    assert hop["hits"] and {h["id"] for h in hop["hits"]} <= linked
    hop = _json(await client.call_tool("hop", {"query": "rye", "k": 4, "offset": 1}))  # FiF's whole local hop
    assert [h["id"] for h in hop["hits"]] == [h.id for h in index.hop("rye", k=5)][1:]
    assert _json(await client.call_tool("stats", {}))["documents"] == index.stats()["documents"]


async def _bad_arguments(client: Client) -> None:
    """Each mistake is a tool error that says what is allowed; the server answers the next call."""
    cases = [
        ("search", {"query": "bread", "k": 51}, "less than or equal to 50"),
        ("search", {"query": "bread", "layer": 5}, "0, 1 or 2"),
        ("search", {"query": "bread", "layer": 2, "kinds": ["table"]}, "sentence, row, object, header"),
        ("get", {"ids": ["no-such-node"]}, "no-such-node"),
        ("documents", {"query": "bread", "scope": "local"}, "anchors"),
        ("documents", {"query": "bread", "scope": "local", "anchors": ["no-such-doc"]}, "no-such-doc"),
        ("components", {"query": "bread", "documents": ["no-such-doc"]}, "no-such-doc"),
        ("get", {"ids": [f"n{i}" for i in range(21)]}, "at most 20"),
    ]
    for tool, arguments, message in cases:
        result = await client.call_tool(tool, arguments)
        assert result.is_error, (tool, arguments)
        assert message in result.content[0].text, result.content[0].text
    assert _json(await client.call_tool("stats", {}))["documents"] > 0


def test_mcp_over_stdio(demo):
    async def run() -> None:
        async with Client(_stdio(demo["index"])) as client:
            await _exercise(client, demo)
            await _bad_arguments(client)

    anyio.run(run)


def test_mcp_pins_a_manifest_until_use_latest(demo, tmp_path):
    index = tmp_path / "index"
    shutil.copytree(demo["index"], index)
    manifests = index / MANIFEST_DIR
    first = int((manifests / "LATEST").read_text())

    async def run() -> None:
        async with Client(_stdio(index, "--no-warm")) as client:
            before = _json(await client.call_tool("stats", {}))["manifest_version"]
            # a refresh publishes a new manifest: here, the same tables under the next number
            manifest = json.loads((manifests / f"{first:08d}.json").read_text())
            manifest["version"] = first + 1
            (manifests / f"{first + 1:08d}.json").write_text(json.dumps(manifest))
            (manifests / "LATEST").write_text(str(first + 1))
            still = _json(await client.call_tool("search", {"query": "bread", "k": 1}))["manifest_version"]
            moved = _json(await client.call_tool("use_latest", {}))
            after = _json(await client.call_tool("search", {"query": "bread", "k": 1}))["manifest_version"]
        assert (before, still, moved, after) == (first, first, {"previous_version": first,
                                                                 "manifest_version": first + 1}, first + 1)

    anyio.run(run)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_mcp_over_streamable_http(demo):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "laminae.flows.cli", "mcp", "--index", str(demo["index"]),
                             "--http", f"127.0.0.1:{port}"], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stderr.read()
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert time.monotonic() < deadline, "the MCP HTTP server did not start"
            time.sleep(0.3)

        async def run() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                await _exercise(client, demo)
                await _bad_arguments(client)

        anyio.run(run)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_terminal_search_get_and_hop(demo, tmp_path):
    index = str(demo["index"])
    code, out, _ = _cli("search", "rye bread baked for a whole day", "--index", index, "--k", "3", "--json")
    hits = json.loads(out)["hits"]
    assert code == 0 and [h["id"] for h in hits] == [h.id for h in laminae.open(index).search(
        "rye bread baked for a whole day", k=3)]
    code, out, _ = _cli("search", "bread", "--index", index, "--layer", "2", "--kinds", "row", "--json")
    assert code == 0 and {h["kind"] for h in json.loads(out)["hits"]} == {"row"}

    code, out, _ = _cli("search", "rye bread baked for a whole day", "--index", index, "--k", "2")
    assert code == 0 and hits[0]["id"] in out and hits[0]["title"] in out  # the readable form

    def no_model(embedder):
        raise laminae.QueryModelError("string queries need the index's embedder: install the ml extra")

    with pytest.MonkeyPatch.context() as patch:  # a machine without the ml extra: one line, no traceback
        patch.setattr(laminae.query, "load_query_model", no_model)  # where the reader loads the builder's model
        code, out, err = _cli("search", "rye", "--index", index)
    assert code == 2 and not out and err.strip() == "error: string queries need the index's embedder: install the ml extra"

    row, image = demo["row"], demo["image"]
    code, out, err = _cli("get", row["id"], image["id"], "missing-id", "--index", index, "--json",
                          "--save-images", str(tmp_path / "pictures"))
    nodes = {n["id"]: n for n in json.loads(out)["nodes"]}
    assert code == 0 and "missing-id" in err
    assert nodes[row["id"]]["cells"] == row["cells"] and nodes[row["id"]]["section_path"]
    saved = Path(nodes[image["id"]]["saved_image"])
    assert saved.read_bytes() == laminae.open(index).get([image["id"]])[0]["image"]
    code, out, _ = _cli("get", demo["table"]["id"], "--index", index, "--max-rows", "1")
    assert code == 0 and demo["table"]["table_header"][0] in out and "more row" in out

    doc = demo["table"]["document_id"]
    code, out, _ = _cli("documents", "rye", "--scope", "local", "--from", doc, "--index", index, "--json")
    linked = set(laminae.open(index).neighbors([doc], direction="both"))
    assert code == 0 and json.loads(out)["hits"] and {h["id"] for h in json.loads(out)["hits"]} <= linked
    code, out, _ = _cli("hop", "rye", "--from", doc, "--index", index, "--json", "--k", "5")  # the whole hop
    hits = json.loads(out)["hits"]
    assert code == 0 and [h["id"] for h in hits] == [h.id for h in laminae.open(index).hop("rye", k=5, anchors=[doc])]
    assert {h["document_id"] for h in hits} <= linked | {doc}


def test_terminal_errors_say_what_to_do(demo, tmp_path):
    index = str(demo["index"])
    code, _, err = _cli("get", "missing-id", "--index", index)
    assert code == 1 and "missing-id" in err
    code, _, err = _cli("hop", "rye", "--from", "missing-id", "--index", index)
    assert code == 2 and "missing-id" in err
    code, _, err = _cli("search", "rye", "--index", str(tmp_path / "none"))
    assert code == 2 and "laminae build" in err
    with pytest.raises(SystemExit):
        _cli("search", "rye", "--index", index, "--layer", "4")
