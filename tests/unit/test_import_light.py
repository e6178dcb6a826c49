"""The reader and schemas import and run with the builder's heavy stack blocked."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib

from tests.conftest import ROOT

BLOCKER = r"""
import sys, importlib.abc
BLOCKED = set(sys.argv[2].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"blocked heavy import: {name}", name=name)
        return None
sys.meta_path.insert(0, Block())
import laminae
from laminae import schemas
from laminae import stats, index
assert laminae.open is laminae.open_index
try:
    laminae.open(sys.argv[1] + "/empty")
except laminae.IndexOpenError as exc:
    assert "laminae build" in str(exc)
else:
    raise SystemExit("opening an empty directory should fail")
import numpy as np
index = laminae.open(sys.argv[1] + "/index")
q = np.ones(8, dtype=np.float32)
assert index.search(q, layer=2, k=3) and index.search("keyword10", layer=2, k=3, mode="fts")
doc = index.documents(q, k=2, granularity=2)[0].id
index.documents(q, k=2, granularity=1, scope="local", anchors=[doc])
index.components(q, [doc], k=2, granularity=2)
index.beam_search([q, -q], beam=4, k=2)
index.get([doc]); index.children(doc); index.stats()
try:
    index.search("a string query", layer=1)
except laminae.QueryModelError as exc:
    assert "ml" in str(exc) and "vector" in str(exc)
else:
    raise SystemExit("a string query without the ml extra should fail with a fix")
print("ok", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
"""


def blocked_imports() -> set[str]:
    """The top-level import names of every package the build, ml and scale extras require, but for
    those the reader's own dependencies bring themselves (lancedb needs pydantic)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = {_dist(spec) for name in ("build", "ml", "scale") for spec in extras[name]}
    wanted -= _closure({_dist(spec) for spec in project["dependencies"]})
    installed = importlib.metadata.packages_distributions()
    names = {top for top, dists in installed.items()
             if any(_norm(d) in wanted for d in dists) and not top.startswith("_")}
    missing = wanted - {_norm(d) for dists in installed.values() for d in dists}
    assert not missing, f"extras not installed here: {missing}"
    return names


def _dist(spec: str) -> str:
    return _norm(re.split(r"[<>=!~\[; ]", spec.strip(), maxsplit=1)[0])


def _closure(dists: set[str]) -> set[str]:
    """``dists`` and everything they require (unconditional requirements only), installed."""
    seen: set[str] = set()
    todo = list(dists)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo.extend(_dist(r) for r in requires if ";" not in r or "extra ==" not in r.split(";", 1)[1])
    return seen


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_reader_imports_and_runs_without_heavy_packages(tmp_path):
    from tests.support.synthetic import make_synthetic_index

    blocked = blocked_imports()
    assert {"torch", "prefect", "pydantic_settings", "PIL", "bs4", "onnxruntime", "prefect_dask"} <= blocked
    make_synthetic_index(str(tmp_path / "index"), documents=6, components_per_document=2,
                         subcomponents_per_component=3, dim=8, seed=3)
    proc = subprocess.run([sys.executable, "-c", BLOCKER, str(tmp_path), ",".join(sorted(blocked))],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok []"
