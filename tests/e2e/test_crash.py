"""A build killed with SIGKILL at any point, then run again, ends with the same tables as an uninterrupted one."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

import laminae
from laminae.flows.demo import SiteServer
from tests.support.cli_runs import run_cli

pytestmark = pytest.mark.slow
CONTENT_TABLES = ("documents", "components", "subcomponents", "edges")


def _contents(index: Path) -> dict:
    opened = laminae.open(str(index))
    return {name: opened.table(name).to_arrow().sort_by("id") for name in CONTENT_TABLES}


def test_killed_builds_converge_to_the_uninterrupted_result(tmp_path):
    with SiteServer() as site:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(site.seeds()) + "\n")
        reference = run_cli(["build", "--seeds", str(seeds), "--index", str(tmp_path / "ref")], tmp_path / "ref.log")
        assert reference.returncode == 0, reference.stdout[-2000:]
        expected = _contents(tmp_path / "ref")
        for point in ("write:subcomponents", "write:components", "publish"):
            index = tmp_path / point.replace(":", "-")
            killed = run_cli(["build", "--seeds", str(seeds), "--index", str(index)], tmp_path / "k.log", point)
            assert killed.returncode == -signal.SIGKILL, killed.stdout[-2000:]
            again = run_cli(["build", "--seeds", str(seeds), "--index", str(index)], tmp_path / "a.log")
            assert again.returncode == 0, again.stdout[-2000:]
            got = _contents(index)
            for name in CONTENT_TABLES:
                assert got[name].equals(expected[name]), f"{name} differs after a kill at {point}"
        # a refresh killed mid-write recovers too
        index = tmp_path / "write-subcomponents"
        killed = run_cli(["refresh", "--index", str(index)], tmp_path / "rk.log", "publish")
        assert killed.returncode == -signal.SIGKILL
        assert run_cli(["refresh", "--index", str(index)], tmp_path / "r.log").returncode == 0
        got = _contents(index)
        for name in CONTENT_TABLES:
            assert got[name].equals(expected[name])
