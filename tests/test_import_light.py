"""The reader and schemas import and run with the builder's heavy stack blocked."""

from __future__ import annotations

import subprocess
import sys

BLOCKER = r"""
import sys, importlib.abc
BLOCKED = {"torch", "transformers", "ultralytics", "prefect", "sentence_transformers", "torchvision"}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"blocked heavy import: {name}", name=name)
        return None
sys.meta_path.insert(0, Block())
import laminae, schemas
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
except RuntimeError as exc:
    assert "ml" in str(exc) and "vector" in str(exc)
else:
    raise SystemExit("a string query without the ml extra should fail with a fix")
print("ok", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
"""


def test_reader_imports_and_runs_without_heavy_packages(tmp_path):
    from tasks.synthetic import make_synthetic_index

    make_synthetic_index(str(tmp_path / "index"), documents=6, components_per_document=2,
                         subcomponents_per_component=3, dim=8, seed=3)
    proc = subprocess.run([sys.executable, "-c", BLOCKER, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok []"
