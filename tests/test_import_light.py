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
    laminae.open(sys.argv[1])
except laminae.IndexOpenError as exc:
    assert "laminae build" in str(exc)
else:
    raise SystemExit("opening an empty directory should fail")
print("ok", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
"""


def test_reader_imports_without_heavy_packages(tmp_path):
    proc = subprocess.run([sys.executable, "-c", BLOCKER, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok []"
