"""Run the ``laminae`` command line as a real process, killed at a named point if asked.

Reads nothing of its own; writes the process's output to the log file given. The process runs in
its own session, and whatever it leaves (its temporary Prefect server, after a SIGKILL) is
killed with that session when it ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def run_cli(args: list[str], log: Path, crash_at: str | None = None, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m laminae.flows.cli ARGS``, with ``$LAMINAE_CRASH_AT`` set to ``crash_at`` (the
    process kills itself with SIGKILL there: ``laminae.snapshots.crash_point``); returns the exit
    status (``-9`` for a kill) and the output."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API") and k != "LAMINAE_CRASH_AT"}
    environ.update(LAMINAE_EMBED__THREADS="1", LAMINAE_BATCH_DOCUMENTS="4", **(env or {}))
    if crash_at:
        environ["LAMINAE_CRASH_AT"] = crash_at
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "laminae.flows.cli", *args], cwd=ROOT, env=environ,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(args, code, log.read_text(), "")
