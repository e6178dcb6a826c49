"""The reader's moves, each declared once: its arguments (typed, with their default, their allowed
values or bounds and one description), one description of the move and what it returns.

Reads and writes nothing. ``Index`` checks a move's arguments here (``check``: one place for the
allowed values and the messages of ``ReaderArgumentError``); ``laminae.mcp.tools`` makes one MCP
tool, ``laminae.flows.terminal`` one command and ``laminae.integrations.moves`` the framework
retrievers' arguments from each ``MoveSpec`` in ``MOVES``. A move added with ``register`` (its
spec and its function) is an ``Index`` method and reaches all of them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any

from laminae.errors import ReaderArgumentError
from laminae.ranking import LAYER_NAMES, MODES
from laminae.retrieval import PAGES, RANKINGS

REQUIRED = object()  # the default of an argument a move cannot do without
SURFACES = ("mcp", "terminal", "retrievers")  # where a move is offered beside its Index method


@dataclass(frozen=True)
class Arg:
    """One argument of a move. ``type``: ``int``, ``str`` or ``list`` (a list of strings);
    ``choices``: the allowed values (``names``: other names of them, accepted but not offered);
    ``low``/``high``: the bounds of a whole number."""

    name: str
    type: type
    default: Any
    description: str
    choices: tuple = ()
    low: int | None = None
    high: int | None = None
    names: tuple = ()
    aliases: tuple[str, ...] = ()  # other names a caller may give it (the retrievers' document_ids)

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def check(self, value: Any, move: str) -> None:
        """``ReaderArgumentError`` unless ``value`` is one this argument takes (None: its default)."""
        if value is None:
            return
        if self.type is list:
            if isinstance(value, (str, bytes)):
                raise ReaderArgumentError(f"{self.name} is a list of strings; got the string {value!r}")
            return  # the elements are not read here: a move's documents may be a million ids
        if self.choices:
            if isinstance(value, bool) or (value not in self.choices and value not in self.names):
                extra = f" (or {', '.join(map(str, self.names))})" if self.names else ""
                raise ReaderArgumentError(f"{self.name} must be one of {', '.join(map(str, self.choices))}{extra} "
                                          f"for move {move!r}; got {value!r}")
            return
        if self.type is int:
            if isinstance(value, bool) or not isinstance(value, Integral) or (
                    self.low is not None and value < self.low) or (self.high is not None and value > self.high):
                bounds = (f"from {self.low} to {self.high}" if self.high is not None else f"of at least {self.low}")
                raise ReaderArgumentError(f"{self.name} must be a whole number {bounds}; got {value!r}")
        elif not isinstance(value, self.type):
            raise ReaderArgumentError(f"{self.name} must be a {self.type.__name__}; got {value!r}")


K = Arg("k", int, 10, "how many hits, best first", low=1)


@dataclass(frozen=True)
class MoveSpec:
    """A move: ``Index.<name>(query, k, **args)``, its hits best first. ``rule`` checks what one
    argument alone cannot say (a pair that goes together); ``function`` is the move of a spec
    added with ``register`` (``function(index, query, k=..., **args)``)."""

    name: str
    description: str
    returns: str  # what the hits are, for a title: "components", "documents", ...
    args: tuple[Arg, ...]
    rule: Callable[[Mapping[str, Any]], None] | None = None
    surfaces: tuple[str, ...] = SURFACES
    function: Callable[..., list] | None = field(default=None, compare=False)

    @property
    def arguments(self) -> tuple[Arg, ...]:
        """``k`` and the move's own arguments."""
        return (K, *self.args)

    def arg(self, name: str) -> Arg | None:
        """The argument called ``name`` or one of its aliases, if the move has it."""
        for arg in self.arguments:
            if name == arg.name or name in arg.aliases:
                return arg
        return None

    def given(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The move's own ``arguments`` (not ``k``) under their names, an alias read as its
        argument and None left out (it keeps the default); ``ReaderArgumentError`` naming those the
        move does not read."""
        out: dict[str, Any] = {}
        named: dict[str, str] = {}
        foreign = []
        for key, value in arguments.items():
            arg = self.arg(key)
            if arg is None or arg is K:
                foreign.append(key)
                continue
            if arg.name in named:
                raise ReaderArgumentError(f"{arg.name} of move {self.name!r} is given twice, as {named[arg.name]} and "
                                          f"{key}")
            named[arg.name] = key
            if value is not None:
                out[arg.name] = value
        if foreign:
            verb = "does" if len(foreign) == 1 else "do"
            raise ReaderArgumentError(f"{', '.join(sorted(foreign))} {verb} not apply to move {self.name!r}, which "
                                      f"reads {', '.join(a.name for a in self.arguments)}")
        return out

    def check(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """``k`` and the move's arguments as the move runs them: the values of ``values`` (by name),
        an argument None or absent taking its default; ``ReaderArgumentError`` naming the first one
        the move cannot take, and what it allows."""
        out = {}
        for arg in self.arguments:
            value = values.get(arg.name)
            if value is None and arg.required:
                raise ReaderArgumentError(f"move {self.name!r} needs {arg.name}: {arg.description}")
            arg.check(value, self.name)
            out[arg.name] = arg.default if value is None else value
        if self.rule is not None:
            self.rule(out)
        return out


def _local_scope(values: Mapping[str, Any]) -> None:
    if (values.get("scope") == "local") != bool(values.get("anchors") is not None and len(values["anchors"])):
        raise ReaderArgumentError("move 'documents' with scope='local' needs anchors (document or component ids "
                                  "from earlier results), and anchors need scope='local'")


DOCUMENT_IDS = "document ids (the document_id of earlier results)"
HOP_MODES = ("auto", "dense", "hybrid")

MOVES: dict[str, MoveSpec] = {spec.name: spec for spec in (
    MoveSpec("retrieve", "The best components (paragraphs, tables, images) for a question: the default move, "
             "the learned fusion of dense, full-text and term-coverage rankings.", "components", (
                 Arg("documents", list, None, f"only the components of these {DOCUMENT_IDS}", aliases=("document_ids",)),
                 Arg("kinds", list, None, "only these component kinds, e.g. table"),
                 Arg("ranking", str, "learned", "learned (fitted fusion) or rrf (reciprocal rank fusion)",
                     choices=RANKINGS),
                 Arg("pages", str, "auto", "one: each page's best component before any page's second; any: by "
                     "score alone; auto: one for a how-to question (a page answers it), any for the others",
                     choices=PAGES)),
             surfaces=("retrievers",)),  # the MCP tool and the command `search` at layer 1 are retrieve
    MoveSpec("search", "Search one layer: 0 documents, 1 components (paragraphs, tables, images, videos and their "
             "transcripts; keyframes are images with a time; the default and the best first move for a question), "
             "2 subcomponents (sentences, table rows, objects). mode: auto (fused dense + full-text), dense, fts "
             "(BM25 words) or hybrid. kinds: e.g. [\"table\"] at layer 1, [\"transcript\"] for what is said in "
             "videos, [\"row\"] at layer 2. documents: restrict to these document ids.", "nodes", (
                 Arg("layer", int, 1, "0 documents, 1 components, 2 sentences, rows and objects", choices=(0, 1, 2),
                     names=LAYER_NAMES),
                 Arg("mode", str, "auto", "auto (fused dense and full-text), dense, fts (BM25 words) or hybrid",
                     choices=MODES),
                 Arg("kinds", list, None, "only these kinds of the layer, e.g. table or row"),
                 Arg("documents", list, None, f"only in these {DOCUMENT_IDS}", aliases=("document_ids", "document")))),
    MoveSpec("documents", "Rank documents for a question (FiF document hop). granularity: score a document by its "
             "own summary (0), its best component (1) or its best sentence/row (2). scope=\"local\" with anchors "
             "(document or component ids) ranks only the documents linked from (\"out\"), linking to (\"in\") or "
             "either (\"both\") the anchors: the multi-hop move from a table row to the page it links.", "documents", (
                 Arg("granularity", int, 0, "score a document by its summary (0), best component (1) or best "
                     "sentence/row (2)", choices=(0, 1, 2)),
                 Arg("scope", str, "global", "global (every document) or local (those linked with the anchors)",
                     choices=("global", "local")),
                 Arg("anchors", list, None, "document or component ids to hop from (scope local)", aliases=("from",)),
                 Arg("mode", str, "auto", "auto (fused for a text query), dense or hybrid", choices=HOP_MODES),
                 Arg("direction", str, "both", "links from the anchors (out), to them (in) or either (both)",
                     choices=("out", "in", "both"))),
             rule=_local_scope),
    MoveSpec("components", "Rank the components of the given documents for a question (FiF component hop): "
             "granularity 1 scores a component by its own text, 2 by its best sentence, row or object.",
             "components", (
                 Arg("documents", list, REQUIRED, f"the {DOCUMENT_IDS} whose components are ranked",
                     aliases=("document_ids", "document")),
                 Arg("granularity", int, 2, "score a component by its own text (1) or its best sentence, row or "
                     "object (2)", choices=(1, 2)),
                 Arg("mode", str, "auto", "auto (fused for a text query), dense or hybrid", choices=HOP_MODES))),
    MoveSpec("hop", "FiF's local hop, whole: from the anchors (document or component ids) or, without them, from "
             "the best `start` documents for the question, to the `linked` best documents linked to or from them, "
             "then the best k components of all of those (scored at granularity 1 or 2).", "components", (
                 Arg("anchors", list, None, "document or component ids to hop from (default: the best start "
                     "documents)", aliases=("from",)),
                 Arg("start", int, 3, "documents to hop from when no anchors are given", low=1, high=100),
                 Arg("linked", int, 10, "linked documents to hop to", low=1, high=100),
                 Arg("granularity", int, 2, "score documents and components by their best component (1) or best "
                     "sentence/row (2)", choices=(1, 2)),
                 Arg("direction", str, "both", "links from the anchors (out), to them (in) or either (both)",
                     choices=("out", "in", "both")),
                 Arg("mode", str, "auto", "auto (fused for a text query), dense or hybrid", choices=HOP_MODES))),
)}


def check(name: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of move ``name`` checked, None taking the default (``MoveSpec.check``; an
    ``Index`` method passes its ``locals()`` and runs what this returns)."""
    return MOVES[name].check(values)


def spec(name: str) -> MoveSpec:
    """The move called ``name``; ``ReaderArgumentError`` naming the moves otherwise."""
    found = MOVES.get(name)
    if found is None:
        raise ReaderArgumentError(f"move must be one of {', '.join(MOVES)}; got {name!r}")
    return found


def offered(surface: str) -> list[MoveSpec]:
    """The moves ``surface`` (``mcp``, ``terminal`` or ``retrievers``) offers, in ``MOVES`` order."""
    return [s for s in MOVES.values() if surface in s.surfaces]


def register(new: MoveSpec) -> None:
    """Add a move: ``new.function`` becomes ``Index.<name>`` (checking its arguments first), and the
    MCP servers, terminal parsers and retrievers made after this offer it."""
    index_class = _index_class()
    if new.function is None or new.name in MOVES or hasattr(index_class, new.name):
        raise ValueError(f"register needs a new move name (not {', '.join(MOVES)} or another Index "
                         f"attribute) and its function; got {new.name!r}")
    function = new.function

    def method(self: Any, query, k: int = K.default, **arguments: Any) -> list:
        return function(self, query, **new.check({**new.given(arguments), "k": k}))

    method.__name__ = method.__qualname__ = new.name
    method.__doc__ = new.description
    MOVES[new.name] = new
    setattr(index_class, new.name, method)


def unregister(name: str) -> None:
    """Remove a move ``register`` added (the moves declared here stay)."""
    found = MOVES.get(name)
    if found is None or found.function is None:
        raise ValueError(f"{name!r} is not a registered move")
    del MOVES[name]
    delattr(_index_class(), name)


def _index_class() -> type:
    """``laminae.Index``: laminae.index imports this module, so it is loaded by now (an import
    here would be a cycle)."""
    return sys.modules["laminae.index"].Index


__all__ = ["K", "MOVES", "REQUIRED", "Arg", "MoveSpec", "check", "offered", "register", "spec", "unregister"]
