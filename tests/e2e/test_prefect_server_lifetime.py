"""A build or refresh killed with SIGKILL takes its temporary Prefect API server with it
(``laminae.flows.prefect_api``): real ``laminae`` processes, real Prefect servers, real SIGKILLs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow
GONE_WITHIN_S = 30.0  # the watchdog gives the server 5 s to stop on SIGTERM before SIGKILL


def _session(sid: int) -> dict[int, str]:
    """The processes of session ``sid`` still running (zombies left out), with their command lines."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile
            continue
        fields = stat.rpartition(")")[2].split()  # state, ppid, pgrp, session, ...
        if int(fields[3]) == sid and fields[0] != "Z":
            found[int(entry.name)] = cmdline
    return found


def _run(args: list[str], log: Path, crash_at: str | None = None) -> tuple[int, int, set[str]]:
    """Run the CLI in a session of its own (killing itself with SIGKILL at ``crash_at``); returns its
    exit status, its session's id and the command lines its session held while it ran. The session
    outlives its leader, so whatever the run started can be found after it ended."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(LAMINAE_EMBED__THREADS="1")
    env.pop("LAMINAE_CRASH_AT", None)
    if crash_at:
        env["LAMINAE_CRASH_AT"] = crash_at
    seen: set[str] = set()
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "laminae.flows.cli", *args], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            while proc.poll() is None:
                seen.update(_session(proc.pid).values())
                time.sleep(0.2)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return proc.returncode, proc.pid, seen


def _assert_nothing_left(sid: int) -> None:
    try:
        deadline = time.monotonic() + GONE_WITHIN_S
        while (left := _session(sid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, f"still running after the run ended: {left}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sid, signal.SIGKILL)  # what a failed run left, so that it does not outlive the test


def test_a_killed_build_or_refresh_leaves_no_prefect_server(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for n in range(3):
        (folder / f"note{n}.html").write_text(f"<html><head><title>Note {n}</title></head><body><main><p>Note "
                                              f"number {n} says that rye bread keeps for a week.</p></main></body></html>")
    index = str(tmp_path / "index")
    runs = ((["build", "--seeds", str(folder), "--index", index], "publish"),
            (["build", "--seeds", str(folder), "--index", index], None),
            (["refresh", "--index", index], "publish"))
    for n, (args, crash_at) in enumerate(runs):
        log = tmp_path / f"{n}-{args[0]}.log"
        code, sid, seen = _run(args, log, crash_at)
        assert code == (-signal.SIGKILL if crash_at else 0), log.read_text()[-3000:]
        assert any("uvicorn" in line and "prefect.server" in line for line in seen), seen  # it had a server
        _assert_nothing_left(sid)


def test_a_process_with_the_watchdog_installed_takes_its_prefect_server_along(tmp_path):
    """What the commands rely on: ``install`` before Prefect starts its server, whoever starts it."""
    started = ("import sys, time\n"
               "from laminae.flows import prefect_api\n"
               "prefect_api.install()\n"
               "from prefect.client.orchestration import get_client\n"
               "get_client(sync_client=True)\n"
               "from prefect.server.api.server import SubprocessASGIServer\n"
               "server = SubprocessASGIServer()\n"
               "print(type(server).__name__, server.server_process.pid, flush=True)\n"
               "time.sleep(600)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    proc = subprocess.Popen([sys.executable, "-c", started], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        kind, pid = proc.stdout.readline().split()
        assert kind == "RunServer" and int(pid) in _session(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _assert_nothing_left(proc.pid)
