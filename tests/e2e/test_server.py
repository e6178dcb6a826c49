"""A real Prefect server on 127.0.0.1, infra/prefect.yaml deployed to a process work pool, a worker,
and a build of the sample site triggered through the API: same stats as the command line's build."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import laminae
from laminae.flows.demo import SiteServer
from tests.conftest import ROOT

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
SETTINGS = {"embed": {"device": "cpu", "threads": 1}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prefect(env: dict, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(BIN / "prefect"), "--no-prompt", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, f"prefect {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture
def prefect_server(tmp_path):
    port = _free_port()
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"),
           "PREFECT_API_URL": f"http://127.0.0.1:{port}/api", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "DO_NOT_TRACK": "1", "PREFECT_UI_ENABLED": "false", "LAMINAE_HOME": str(ROOT),
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    Path(env["PREFECT_HOME"]).mkdir()
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as resp:
                if resp.status == 200:
                    break
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            pytest.fail(f"prefect server did not start:\n{(tmp_path / 'server.log').read_text()[-3000:]}")
        time.sleep(0.5)
    yield env
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
    log.close()


def test_build_deployed_to_a_process_pool_runs_through_the_api(prefect_server, tmp_path):
    from laminae.flows.cli import main

    env = prefect_server
    assert shutil.which("prefect", path=env["PATH"])
    _prefect(env, "work-pool", "create", "laminae", "--type", "process")
    _prefect(env, "deploy", "--prefect-file", "infra/prefect.yaml", "--all")
    with SiteServer(port=0) as site:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(site.seeds()) + "\n")
        params = {"seeds": str(seeds), "index": str(tmp_path / "served"), "settings": SETTINGS}
        run = _prefect(env, "deployment", "run", "build-index/build", "--params", json.dumps(params))
        assert "Created flow run" in run.stdout
        _prefect(env, "worker", "start", "--pool", "laminae", "--run-once", timeout=600)  # runs it, then exits
        cli_seeds = tmp_path / "cli-seeds.txt"
        cli_seeds.write_text(seeds.read_text())
        assert main(["build", "--seeds", str(cli_seeds), "--index", str(tmp_path / "cli"), "--threads", "1",
                     "--device", "cpu"]) == 0
    served, cli = laminae.open(str(tmp_path / "served")).stats(), laminae.open(str(tmp_path / "cli")).stats()
    for key in ("documents", "components", "subcomponents", "edges", "links_to_resolved", "links_to_unresolved"):
        assert served[key] == cli[key], key
    assert served["last_run"]["status"] == "success" and served["documents"] == 14
    request = urllib.request.Request(env["PREFECT_API_URL"] + "/flow_runs/filter", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        runs = json.loads(resp.read())
    states = sorted(r["state_type"] for r in runs)
    assert states[0] == "COMPLETED" and set(states[1:]) <= {"SCHEDULED"}  # the others: refresh-nightly's schedule
