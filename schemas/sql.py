"""SQL literals for LanceDB filters (``where`` clauses), quoted in one place.

Reads and writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable


def sql_string(value: str) -> str:
    """``value`` as a single-quoted SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def sql_list(values: Iterable[str]) -> str:
    """Comma-separated string literals, for ``column IN (...)``."""
    return ", ".join(sql_string(v) for v in values)
