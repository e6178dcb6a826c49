"""The watchdog that stops a run's Prefect server when the run dies (``laminae.flows.prefect_api``),
on real processes: a parent that starts a server stand-in and its watchdog, then is killed with
SIGKILL; and one that dismisses its watchdog, as a run stopping its server itself does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.conftest import ROOT

GONE_WITHIN_S = 20.0  # the stand-in ends on the watchdog's SIGTERM

PARENT = """
import subprocess, sys, time
from laminae.flows.prefect_api import Watchdog
server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
watchdog = Watchdog(server.pid)
if sys.argv[1] == "dismiss":
    watchdog.dismiss()
print(server.pid, watchdog.proc.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _killed_parent(mode: str) -> tuple[int, int]:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, mode], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    server, watchdog = map(int, parent.stdout.readline().split())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    return server, watchdog


def _wait_gone(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + GONE_WITHIN_S
    while (alive := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def test_the_server_dies_with_the_run_that_started_it():
    server, watchdog = _killed_parent("keep")
    try:
        assert _wait_gone([server, watchdog]) == []
    finally:
        for pid in (server, watchdog):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_dismissed_watchdog_leaves_the_server_alone():
    server, watchdog = _killed_parent("dismiss")
    try:
        assert not _alive(watchdog)  # dismiss() waited for it to leave
        assert _alive(server)
    finally:
        if _alive(server):
            os.kill(server, signal.SIGKILL)
