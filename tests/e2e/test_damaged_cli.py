"""The command line's reading commands on a damaged index (issue 28): ``laminae stats``, ``search``,
``get``, ``hop`` and ``report`` in real processes print one line on stderr and exit 2, never a
traceback; a damaged snapshot is rebuilt where the index is writable, and where it is not (the
processes' file-size limit set to 0, so every write fails as on a read-only disk) the line names
``laminae compact``."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import laminae
from laminae.graph import snapshot_problem
from tests.support.synthetic import make_synthetic_index
from tests.unit.test_damaged_index import DIM, OPEN_DAMAGE, SNAPSHOT, SNAPSHOT_DAMAGE

pytestmark = pytest.mark.slow

COMMANDS = ("stats", "search", "get", "hop", "report")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("cli") / "index"
    make_synthetic_index(str(path), documents=12, components_per_document=3, subcomponents_per_component=3,
                         dim=DIM, links_per_document=2, seed=3)
    return path, str(laminae.open(str(path)).graph.layers[0].ids[0])


def _argv(command: str, index: Path, document: str, tmp: Path, version: int | None) -> list[str]:
    pinned = ["--version", str(version)] if version is not None else []
    return {"stats": ["stats", "--index", str(index), *pinned],
            "search": ["search", "keyword10", "--index", str(index), *pinned],
            "get": ["get", document, "--index", str(index), *pinned],
            "hop": ["hop", "what links here", "--from", document, "--index", str(index), *pinned],
            "report": ["report", "--index", str(index), "--out", str(tmp / "report.html")]}[command]


def _no_writes() -> None:  # in the child: every write to a file fails (EFBIG), as on a read-only disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def _run_all(index: Path, document: str, tmp: Path, commands=COMMANDS, version: int | None = None,
             preexec: Callable[[], None] | None = None) -> dict[str, subprocess.CompletedProcess]:
    """Every command at once, each in its own process."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LAMINAE_CACHE_DIR": str(tmp / "cache")}
    running = {c: subprocess.Popen([sys.executable, "-m", "laminae.flows.cli", *_argv(c, index, document, tmp, version)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                   preexec_fn=preexec)
               for c in commands}
    done = {}
    for command, process in running.items():
        out, err = process.communicate(timeout=300)
        done[command] = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    return done


def _assert_one_line(results: dict[str, subprocess.CompletedProcess], named: str) -> None:
    for command, result in results.items():
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, (command, result.returncode, result.stderr)
        assert lines[0].startswith("error: ") and named in lines[0], (command, lines[0])
        assert "Traceback" not in result.stderr + result.stdout


@pytest.fixture
def copy(built, tmp_path) -> tuple[Path, str]:
    path, document = built
    shutil.copytree(path, tmp_path / "index")
    return tmp_path / "index", document


# every case is a test of the reader (tests/unit/test_damaged_index.py); these are one of each kind
@pytest.mark.parametrize("case", ["latest-garbage", "latest-names-a-missing-manifest", "manifest-truncated"])
def test_a_damaged_latest_or_manifest(copy, tmp_path, case):
    index, document = copy
    damage, named = OPEN_DAMAGE[case]
    damage(index)
    _assert_one_line(_run_all(index, document, tmp_path), named)


@pytest.mark.parametrize("case", ["vectors-truncated", "starts-missing"])
def test_a_damaged_snapshot_that_cannot_be_rebuilt_here(copy, tmp_path, case):
    index, document = copy
    damage, named = SNAPSHOT_DAMAGE[case]
    damage(index)
    results = _run_all(index, document, tmp_path, preexec=_no_writes)
    _assert_one_line(results, named)
    assert all(f"laminae compact --index {index}" in r.stderr for r in results.values())
    assert snapshot_problem(index / SNAPSHOT, DIM) is not None  # nothing was written


def test_a_damaged_snapshot_is_rebuilt_where_the_index_is_writable(copy, tmp_path):
    index, document = copy
    damage, named = SNAPSHOT_DAMAGE["nodes-truncated"]
    damage(index)
    (result,) = _run_all(index, document, tmp_path, commands=("stats",)).values()
    assert result.returncode == 0 and "documents       12" in result.stdout
    warnings = [line for line in result.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and named in warnings[0] and "rebuilt it from the tables" in warnings[0]
    assert snapshot_problem(index / SNAPSHOT, DIM) is None


def test_a_table_version_cleaned_up_under_a_pinned_version(tmp_path):
    from tests.unit.test_damaged_index import _two_versions_first_cleaned

    index = tmp_path / "index"
    _two_versions_first_cleaned(index)
    document = str(laminae.open(str(index), version=2).graph.layers[0].ids[0])
    results = _run_all(index, document, tmp_path, commands=("stats", "search", "get", "hop"), version=1)
    _assert_one_line(results, "which manifest 1 names, no longer exists")
    assert all("LAMINAE_KEEP_MANIFESTS" in r.stderr for r in results.values())
