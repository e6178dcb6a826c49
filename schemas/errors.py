"""The one base of laminae's errors, at the bottom of the packages so that the common layer, the
reader and the builder can all raise under it.

Reads and writes nothing; imports nothing. The reader re-exports it (``laminae.LaminaeError``).
"""

from __future__ import annotations


class LaminaeError(Exception):
    """An error laminae raises on purpose; each keeps its other bases (``ValueError``,
    ``RuntimeError``, ...), so code that catches those still catches it.

    ``exit_code``: the ``laminae`` command's exit status when one reaches it, which then prints
    ``error: <message>`` on one line: 2 for an input, setting or index to fix. None for the rest
    (a fault, or an error a stage turns into a row before it could reach the command line), which
    end the command as any other exception does."""

    exit_code: int | None = None
