"""The errors a reader raises, each with a message that names what was wrong and the fix.

Reads and writes nothing. Each derives from ``LaminaeError`` (``laminae.schemas.errors``, the base
the builder's errors share), and each the ``laminae`` command reports on one line has ``exit_code``.
"""

from __future__ import annotations

from laminae.schemas.errors import LaminaeError


class IndexOpenError(LaminaeError, RuntimeError):
    """The index cannot be opened or read: a file of it is missing or damaged, or a table version
    its manifest names is gone; the message names the file and says what to do."""

    exit_code = 2


class QueryModelError(LaminaeError, RuntimeError):
    """A string query, and the index's embedder cannot be loaded here (the ml extra is missing)."""

    exit_code = 2


class ReaderArgumentError(LaminaeError, ValueError):
    """An argument a reader move cannot use (a layer, mode, granularity, query vector); the message
    says what is allowed."""

    exit_code = 2


class UnknownIdError(ReaderArgumentError, KeyError):
    """An id that is not a node of this index version where one is required (an anchor)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none), at most 300
    characters: what an error message quotes of the error beneath it."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def check_direction(direction: str) -> None:
    """A link direction a move follows: ``out``, ``in`` or ``both``."""
    if direction not in ("out", "in", "both"):
        raise ReaderArgumentError(f"direction must be out, in or both; got {direction!r}")
