"""The temporary Prefect API server of a run dies with the run, even one killed with SIGKILL.

With no ``PREFECT_API_URL``, Prefect starts an API server (uvicorn, about 230 MB) in a process of
its own for the run and stops it at exit (``atexit``); a run killed with SIGKILL (the OOM killer, a
scheduler's timeout) never gets there, and the server ran on, orphaned: one more per kill.
``install`` has Prefect start its server through ``RunServer``, which gives the server a watchdog:
a small process (this file run as a script, the standard library only) that holds the read end of
a pipe whose write end only the run holds. The kernel closes it when the run ends, however it
ends; the watchdog then stops the server as Prefect would (SIGTERM, SIGKILL 5 s later). A server
that the run stops itself dismisses its watchdog first (one byte down the pipe). On Linux the
watchdog holds the server by a pidfd, so it never signals a reused process id. Where there is no
ephemeral server to start (``PREFECT_API_URL`` set), ``install`` does nothing; it must run before
Prefect starts its server (the commands call it just before their flow).

Not ``PR_SET_PDEATHSIG``: Prefect starts the server with its own ``Popen`` (no hook to set it in
the child), the signal is Linux's only, and it fires when the *thread* that started the child
ends, while Prefect starts its server from whichever thread first asks for a client.

Reads and writes nothing but that pipe.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from typing import Any

GRACE_S = 5.0  # what Prefect's own stop waits between SIGTERM and SIGKILL
_DISMISS = b"x"  # the run stopped its server itself: the watchdog leaves quietly


class Watchdog:
    """The watchdog process of one server process: it stops the server once the run that started
    it (this process) ends without dismissing it."""

    def __init__(self, pid: int) -> None:
        watched, self._lifeline = os.pipe()  # not inherited: only this process holds the write end
        try:
            self.proc = subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__), str(watched), str(pid)],
                                         stdin=subprocess.DEVNULL, close_fds=True, pass_fds=(watched,))
        except BaseException:
            os.close(self._lifeline)
            raise
        finally:
            os.close(watched)

    def dismiss(self) -> None:
        """The server is being stopped by the run (or is gone): end the watchdog without a signal."""
        if self._lifeline is None:
            return
        with contextlib.suppress(OSError):  # the watchdog is gone already
            os.write(self._lifeline, _DISMISS)
        os.close(self._lifeline)
        self._lifeline = None
        try:
            self.proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def install() -> None:
    """Have Prefect start its temporary API server as a ``RunServer`` (registered where Prefect's own
    ``prefect_test_harness`` registers its server, so the client, the log and the event workers all
    find it), unless the run uses a server of its own (``PREFECT_API_URL``) or one is running already."""
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        return
    from prefect.server.api.server import SubprocessASGIServer

    if None not in SubprocessASGIServer._instances:
        SubprocessASGIServer._instances[None] = _server_class()()


def _server_class() -> type:
    """``RunServer``: Prefect's ``SubprocessASGIServer`` whose server processes have a watchdog
    (a class made on demand: Prefect's server module takes seconds to import)."""
    from prefect.server.api.server import SubprocessASGIServer

    class RunServer(SubprocessASGIServer):
        _watchdog: Watchdog | None = None

        def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
            self._dismiss()  # a server started again on another port (its first one was taken)
            proc = super()._run_uvicorn_command()
            try:
                self._watchdog = Watchdog(proc.pid)
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            return proc

        def stop(self) -> None:
            self._dismiss()
            super().stop()

        def _dismiss(self) -> None:
            watchdog, self._watchdog = self._watchdog, None
            if watchdog is not None:
                watchdog.dismiss()

    return RunServer


# --- the watchdog process ------------------------------------------------------------------------


def watch(lifeline: int, pid: int) -> None:
    """Wait until the run ends (end of file on ``lifeline``), then stop process ``pid``; leave it
    be when the run says so (a byte) or when the process ends first."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the run stops its server
    try:
        handle = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
    except ProcessLookupError:
        return
    waits = [lifeline] if handle is None else [lifeline, handle]
    ready = select.select(waits, [], [])[0]
    if lifeline not in ready or os.read(lifeline, 1) == _DISMISS:
        return
    _stop(pid, handle)


def _stop(pid: int, handle: int | None) -> None:
    def send(sig: int) -> bool:
        try:
            if handle is None:
                os.kill(pid, sig)
            else:
                signal.pidfd_send_signal(handle, sig)
        except ProcessLookupError:
            return False
        return True

    if not send(signal.SIGTERM):
        return
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline:
        if handle is not None:
            if select.select([handle], [], [], deadline - time.monotonic())[0]:
                return
        elif not send(0):
            return
        else:
            time.sleep(0.1)
    send(signal.SIGKILL)


if __name__ == "__main__":
    watch(int(sys.argv[1]), int(sys.argv[2]))
