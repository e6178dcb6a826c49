"""A reader move declared once (laminae.moves) reaches every surface: a toy move registered here
with one spec, and nothing else, is an ``Index`` method that checks its arguments, an MCP tool a
real MCP client lists and calls, a terminal command and a move of the LangChain and LlamaIndex
retrievers; unregistered, it is gone from each. The moves declared in laminae.moves are each an
Index method, a tool, a command and a retriever move where their spec offers them."""

from __future__ import annotations

import contextlib
import inspect
import io
import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import numpy as np
import pytest
from langchain_core.documents import Document
from mcp import Client

import laminae
from laminae import moves
from laminae.flows.cli import main
from laminae.integrations.langchain import LaminaeRetriever as LangChainRetriever
from laminae.integrations.llama_index import LaminaeRetriever as LlamaIndexRetriever
from laminae.integrations.moves import offered
from laminae.mcp.reads import Pinned
from laminae.mcp.tools import build_server
from tests.support.synthetic import make_synthetic_index

QUESTION = "keyword10 keyword20 keyword30"


def _lead(index: laminae.Index, query: str, k: int, words: int, layer: int) -> list:
    """The toy move: a full-text search for the query's first ``words`` words (no query model needed)."""
    return index.search(" ".join(query.split()[:words]), layer=layer, k=k, mode="fts")


LEAD = moves.MoveSpec("lead", "Full-text search for the first words of the question.", "nodes", (
    moves.Arg("words", int, 1, "how many of the question's first words are searched", low=1, high=3,
              aliases=("first",)),
    moves.Arg("layer", int, 2, "the layer searched", choices=(1, 2)),
), function=_lead)


@pytest.fixture(scope="module")
def path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("specs") / "index"
    make_synthetic_index(str(path), documents=30, components_per_document=3, subcomponents_per_component=3, dim=16,
                         links_per_document=2, seed=5)
    return path


@pytest.fixture
def lead() -> Iterator[moves.MoveSpec]:
    moves.register(LEAD)
    try:
        yield LEAD
    finally:
        moves.unregister("lead")


def _expected(path: Path, words: int = 1, k: int = 10, layer: int = 2) -> list[str]:
    hits = laminae.open(str(path)).search(" ".join(QUESTION.split()[:words]), layer=layer, k=k, mode="fts")
    assert hits
    return [h.id for h in hits]


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


async def _tools(path: Path, calls: list[tuple[str, dict]]) -> tuple[dict, list]:
    """The tools a real MCP client lists (by name) and its results for ``calls``."""
    async with Client(build_server(Pinned(str(path)), warm=False)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        return tools, [await client.call_tool(name, arguments) for name, arguments in calls]


def test_a_move_with_one_spec_is_an_index_method_that_checks_its_arguments(path, lead):
    index = laminae.open(str(path))
    assert [h.id for h in index.lead(QUESTION)] == _expected(path)
    assert [h.id for h in index.lead(QUESTION, k=3, words=2, layer=1)] == _expected(path, 2, 3, 1)
    with pytest.raises(laminae.ReaderArgumentError, match="words must be a whole number from 1 to 3; got 4"):
        index.lead(QUESTION, words=4)
    with pytest.raises(laminae.ReaderArgumentError, match="layer must be one of 1, 2 for move 'lead'; got 0"):
        index.lead(QUESTION, layer=0)
    with pytest.raises(laminae.ReaderArgumentError, match="k must be a whole number of at least 1"):
        index.lead(QUESTION, k=0)
    with pytest.raises(laminae.ReaderArgumentError, match="scope does not apply to move 'lead', which reads k, "
                       "words, layer"):
        index.lead(QUESTION, scope="local")
    # an alias is read as its argument, and None keeps the default, as for the declared moves
    assert [h.id for h in index.lead(QUESTION, k=3, first=2, layer=1)] == _expected(path, 2, 3, 1)
    assert [h.id for h in index.lead(QUESTION, k=3, words=None, layer=1)] == _expected(path, 1, 3, 1)


def test_a_move_with_one_spec_is_an_mcp_tool(path, lead):
    tools, (first, page, bad) = anyio.run(_tools, path, [
        ("lead", {"query": QUESTION, "words": 2, "k": 2}),
        ("lead", {"query": QUESTION, "words": 2, "k": 2, "offset": 2, "layer": 1}),
        ("lead", {"query": QUESTION, "words": 4})])
    tool = tools["lead"]
    assert tool.description == LEAD.description and tool.annotations.read_only_hint
    schema = tool.input_schema["properties"]
    assert schema["words"]["maximum"] == 3 and schema["words"]["minimum"] == 1 and schema["words"]["default"] == 1
    assert schema["words"]["description"] == LEAD.args[0].description
    assert schema["layer"]["enum"] == [1, 2] and schema["k"]["maximum"] == 50
    assert {"query", "k", "words", "layer", "offset", "max_chars"} == set(schema)
    assert [h["id"] for h in json.loads(first.content[0].text)["hits"]] == _expected(path, 2, 2)
    assert [h["id"] for h in json.loads(page.content[0].text)["hits"]] == _expected(path, 2, 4, 1)[2:]
    assert bad.is_error and "less than or equal to 3" in bad.content[0].text


def test_a_move_with_one_spec_is_a_terminal_command(path, lead):
    code, out, _ = _cli("lead", QUESTION, "--index", str(path), "--words", "2", "--k", "3", "--json")
    assert code == 0 and [h["id"] for h in json.loads(out)["hits"]] == _expected(path, 2, 3)
    code, out, _ = _cli("lead", QUESTION, "--index", str(path), "--layer", "1")
    assert code == 0 and "nodes from lead (layer=1)" in out
    code, _, err = _cli("lead", QUESTION, "--index", str(path), "--words", "4")
    assert code == 2 and "words must be a whole number from 1 to 3" in err
    with pytest.raises(SystemExit):  # a choice argparse knows from the spec
        _cli("lead", QUESTION, "--index", str(path), "--layer", "0")


def test_a_move_with_one_spec_is_a_move_of_both_retrievers(path, lead):
    index = laminae.open(str(path))
    assert "lead" in offered()
    documents = LangChainRetriever(index=index, move="lead", k=4, words=2).invoke(QUESTION)
    assert all(isinstance(d, Document) for d in documents)
    assert [d.id for d in documents] == _expected(path, 2, 4)
    assert {d.metadata["move"] for d in documents} == {"lead"}
    nodes = LlamaIndexRetriever(index, "lead", k=4, words=2).retrieve(QUESTION)
    assert [n.node.node_id for n in nodes] == _expected(path, 2, 4)
    with pytest.raises(ValueError, match="words must be a whole number from 1 to 3"):
        LangChainRetriever(index=index, move="lead", words=4)
    with pytest.raises(laminae.ReaderArgumentError, match="ranking does not apply to move 'lead', which reads k, "
                                                          "words, layer"):
        LlamaIndexRetriever(index, "lead", ranking="rrf")


def test_an_unregistered_move_is_on_no_surface(path):
    assert "lead" not in moves.MOVES and not hasattr(laminae.Index, "lead")
    tools, _ = anyio.run(_tools, path, [])
    assert "lead" not in tools
    with pytest.raises(SystemExit):
        _cli("lead", QUESTION, "--index", str(path))
    with pytest.raises(laminae.ReaderArgumentError, match="move must be one of"):
        LlamaIndexRetriever(laminae.open(str(path)), "lead")
    with pytest.raises(ValueError, match="a new move name"):
        moves.register(moves.MoveSpec("search", "again", "nodes", (), function=_lead))


def test_every_declared_move_is_on_the_surfaces_its_spec_names(path):
    tools, _ = anyio.run(_tools, path, [])
    for spec in moves.MOVES.values():
        # the Index method's signature is the spec's: the same arguments with the same defaults
        parameters = inspect.signature(getattr(laminae.Index, spec.name)).parameters
        assert list(parameters)[:2] == ["self", "query"] and set(parameters) - {"self", "query"} == {
            a.name for a in spec.arguments}, spec.name
        for arg in spec.arguments:
            default = parameters[arg.name].default
            assert default is inspect.Parameter.empty if arg.required else default == arg.default, (spec.name, arg)
        assert (spec.name in tools) == ("mcp" in spec.surfaces)
        assert (spec.name in offered()) == ("retrievers" in spec.surfaces)
        if "mcp" in spec.surfaces:
            schema = tools[spec.name].input_schema
            assert set(schema["properties"]) == {"query", "offset", "max_chars", *(a.name for a in spec.arguments)}
            assert set(schema.get("required", [])) == {"query", *(a.name for a in spec.args if a.required)}
        if "terminal" in spec.surfaces:
            with pytest.raises(SystemExit) as shown:
                _cli(spec.name, "--help")
            assert shown.value.code == 0
    assert {s.name for s in moves.offered("mcp")} == {"search", "documents", "components", "hop"}


def test_an_argument_given_as_none_keeps_its_declared_default(path):
    opened = laminae.open(str(path))
    vector = np.ones(16, np.float32) / 4.0  # the synthetic index has no query model: one fixed unit vector
    index = laminae.Index(opened.root, opened.manifest, embed=lambda text: vector)
    docs = [h.document_id for h in index.retrieve(QUESTION, k=3)]
    calls = {  # every declared move, each of its arguments None
        "search": ({"layer": None, "mode": None, "kinds": None, "documents": None}, {}),
        "retrieve": ({"documents": None, "kinds": None, "ranking": None, "pages": None}, {}),
        "documents": ({"granularity": None, "scope": None, "anchors": None, "mode": None, "direction": None}, {}),
        "components": ({"granularity": None, "mode": None}, {"documents": docs}),
        "hop": ({"anchors": None, "start": None, "linked": None, "granularity": None, "direction": None,
                 "mode": None}, {}),
    }
    assert set(calls) == set(moves.MOVES)
    for name, (nones, given) in calls.items():
        assert set(nones) | set(given) == {a.name for a in moves.MOVES[name].args}
        move = getattr(index, name)
        expected = [(h.id, h.score) for h in move(QUESTION, **given)]
        assert expected and [(h.id, h.score) for h in move(QUESTION, k=None, **nones, **given)] == expected, name
    with pytest.raises(laminae.ReaderArgumentError, match="move 'components' needs documents"):
        index.components(QUESTION, documents=None)


def test_an_argument_given_by_its_name_and_an_alias_is_an_error(path, lead):
    index = laminae.open(str(path))
    with pytest.raises(laminae.ReaderArgumentError, match="documents of move 'components' is given twice, as "
                       "documents and document_ids"):
        moves.spec("components").given({"documents": ["a"], "document_ids": ["b"]})
    with pytest.raises(laminae.ReaderArgumentError, match="words of move 'lead' is given twice"):
        index.lead(QUESTION, words=1, first=2)
