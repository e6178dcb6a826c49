"""The framework retrievers' arguments (laminae.integrations.moves.Move, checked by the specs of
laminae.moves), and their imports: the
reader and the framework-free part import with neither framework installed, and each adapter says
which extra to install. Their results on a real index: tests/e2e/test_integrations.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from laminae import ReaderArgumentError
from laminae.integrations.moves import Move, offered
from tests.conftest import ROOT

BLOCKER = r"""
import sys, importlib.abc
BLOCKED = set(sys.argv[1].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None
sys.meta_path.insert(0, Block())
import laminae, laminae.integrations, laminae.integrations.moves
for module, extra in (("langchain", "langchain"), ("llama_index", "llama-index")):
    try:
        __import__(f"laminae.integrations.{module}")
    except ImportError as exc:
        assert f"pip install 'laminae[{extra}]'" in str(exc), str(exc)
    else:
        raise SystemExit(f"laminae.integrations.{module} imported without its framework")
print("ok", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
"""


def test_without_the_frameworks_the_reader_imports_and_each_adapter_names_its_extra():
    proc = subprocess.run([sys.executable, "-c", BLOCKER, "langchain_core,langsmith,llama_index"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok []"


def test_every_move_reads_its_arguments():
    assert offered() == ["retrieve", "search", "documents", "components", "hop"]
    assert Move().name == "retrieve" and Move().k == 10 and Move().kinds is None
    assert Move(k=None).k == 10
    move = Move("components", 3, document_ids=["d1", "d2"], granularity=2)
    assert move.document_ids == move.documents == ("d1", "d2") and move.arguments == {
        "documents": ("d1", "d2"), "granularity": 2}
    Move("documents", scope="local", anchors=["d1"], direction="in", granularity=0)
    Move("search", layer="subcomponents", kinds=["row"], mode="fts")
    Move("hop", anchors=["c1"], start=2, linked=5, granularity=1)


@pytest.mark.parametrize(("move", "arguments", "message"), [
    ("vector", {}, "move must be one of retrieve, search, documents, components, hop"),
    ("retrieve", {"mode": "dense"}, "mode does not apply to move 'retrieve', which reads k, documents, kinds"),
    ("hop", {"scope": "local", "kinds": ["row"]}, "kinds, scope do not apply to move 'hop', which reads k, anchors"),
    ("documents", {"ranking": "rrf", "kinds": ["table"]}, "kinds, ranking do not apply to move 'documents'"),
    ("components", {}, "move 'components' needs documents"),
    ("documents", {"scope": "local"}, "needs anchors"),
    ("documents", {"anchors": ["d1"]}, "anchors need scope='local'"),
    ("retrieve", {"ranking": "bm25"}, "ranking must be one of learned, rrf"),
    ("search", {"layer": 3}, "layer must be one of 0, 1, 2 (or documents"),
    ("hop", {"linked": 101}, "linked must be a whole number from 1 to 100"),
    ("hop", {"granularity": 0}, "granularity must be one of 1, 2 for move 'hop'"),
    ("hop", {"direction": "up"}, "direction must be one of out, in, both"),
    ("retrieve", {"k": 0}, "k must be a whole number of at least 1"),
    ("hop", {"start": True}, "start must be a whole number"),
    ("retrieve", {"kinds": "table"}, "kinds is a list of strings"),
])
def test_a_bad_argument_says_what_is_allowed(move, arguments, message):
    with pytest.raises(ReaderArgumentError, match=message.replace("(", r"\(")):
        Move(move, **arguments)
