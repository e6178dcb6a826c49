"""A build killed with SIGKILL at any point, then run again, ends with the same tables as an uninterrupted one."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import laminae
from laminae.flows.demo import SiteServer
from tests.conftest import ROOT

pytestmark = pytest.mark.slow
CONTENT_TABLES = ("documents", "components", "subcomponents", "edges")


def _cli(args: list[str], log: Path, crash_at: str | None = None) -> subprocess.CompletedProcess:
    """Run the CLI in its own session; after it ends, kill what it left (its Prefect server)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(LAMINAE_EMBED__THREADS="1", LAMINAE_BATCH_DOCUMENTS="4")
    env.pop("LAMINAE_CRASH_AT", None)
    if crash_at:
        env["LAMINAE_CRASH_AT"] = crash_at
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "laminae.flows.cli", *args], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=300)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(args, code, log.read_text(), "")


def _contents(index: Path) -> dict:
    opened = laminae.open(str(index))
    return {name: opened.table(name).to_arrow().sort_by("id") for name in CONTENT_TABLES}


def test_killed_builds_converge_to_the_uninterrupted_result(tmp_path):
    with SiteServer() as site:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(site.seeds()) + "\n")
        reference = _cli(["build", "--seeds", str(seeds), "--index", str(tmp_path / "ref")], tmp_path / "ref.log")
        assert reference.returncode == 0, reference.stdout[-2000:]
        expected = _contents(tmp_path / "ref")
        for point in ("write:subcomponents", "write:components", "publish"):
            index = tmp_path / point.replace(":", "-")
            killed = _cli(["build", "--seeds", str(seeds), "--index", str(index)], tmp_path / "k.log", point)
            assert killed.returncode == -signal.SIGKILL, killed.stdout[-2000:]
            again = _cli(["build", "--seeds", str(seeds), "--index", str(index)], tmp_path / "a.log")
            assert again.returncode == 0, again.stdout[-2000:]
            got = _contents(index)
            for name in CONTENT_TABLES:
                assert got[name].equals(expected[name]), f"{name} differs after a kill at {point}"
        # a refresh killed mid-write recovers too
        index = tmp_path / "write-subcomponents"
        killed = _cli(["refresh", "--index", str(index)], tmp_path / "rk.log", "publish")
        assert killed.returncode == -signal.SIGKILL
        assert _cli(["refresh", "--index", str(index)], tmp_path / "r.log").returncode == 0
        got = _contents(index)
        for name in CONTENT_TABLES:
            assert got[name].equals(expected[name])
