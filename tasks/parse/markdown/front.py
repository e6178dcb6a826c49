"""Front matter: the YAML (``---``) or TOML (``+++``) block a Markdown page opens with, read as
what the page says of itself (title, language, the rest flattened to ``key`` / ``key.sub``
strings for ``ParsedPage.meta``), never as body text.

Reads the block's text; writes a ``FrontMatter`` (warnings for a block that cannot be read or is
cut). Bounded: the block's characters, its keys, each value's characters and the nesting read
(YAML aliases can nest one list in another exponentially often, or in itself).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

MAX_FRONT_MATTER_CHARS = 65_536
MAX_META_KEYS = 200
MAX_META_CHARS = 2000  # a front matter value's characters kept
MAX_META_DEPTH = 4
TOML_FRONT = re.compile(r"\A\+\+\+[ \t]*\r?\n(.*?)\r?\n\+\+\+[ \t]*(?:\r?\n|\Z)", re.S)


@dataclass
class FrontMatter:
    title: str | None = None
    lang: str | None = None
    meta: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def read_front_matter(source: str, syntax: str) -> FrontMatter | None:
    """The front matter of ``syntax`` (``yaml`` or ``toml``); None when it is no mapping of keys
    (a thematic break, prose, another break: body text after all)."""
    out = FrontMatter()
    if len(source) > MAX_FRONT_MATTER_CHARS:
        out.warnings.append(f"front_matter_cut: the front matter ({len(source):,} characters) is longer than "
                            f"{MAX_FRONT_MATTER_CHARS:,}; left out")
        return out
    try:
        if syntax == "toml":
            data: Any = tomllib.loads(source)
        else:
            import yaml

            data = yaml.safe_load(source)
    except Exception as exc:  # noqa: BLE001 - YAML's and TOML's errors are many classes
        out.warnings.append(f"front_matter_unreadable: {syntax.upper()}: {type(exc).__name__}: {str(exc)[:300]}")
        return out
    if data is None:
        return out
    if not isinstance(data, dict):
        return None
    flat: dict[str, str] = {}
    _flatten(data, "", flat, 0)
    out.title = flat.pop("title", "").strip() or None
    out.lang = (flat.get("lang") or flat.get("language") or "").strip() or None
    if len(flat) > MAX_META_KEYS:
        out.warnings.append(f"front_matter_cut: {len(flat)} keys in the front matter, the first {MAX_META_KEYS} kept")
    out.meta = dict(list(flat.items())[:MAX_META_KEYS])
    return out


def _flatten(value: Any, key: str, out: dict[str, str], depth: int) -> None:
    """Front matter as flat ``key`` / ``key.sub`` strings; a list of plain values joined by commas."""
    if len(out) > MAX_META_KEYS:
        return
    if isinstance(value, dict):
        if depth >= MAX_META_DEPTH:
            out[key] = _bounded_text(value)
            return
        for sub, item in value.items():
            _flatten(item, f"{key}.{sub}" if key else str(sub), out, depth + 1)
    elif isinstance(value, list | tuple):
        out[key] = _bounded_text(value)
    elif value is not None:
        out[key] = str(value)[:MAX_META_CHARS]


def _bounded_text(value: Any) -> str:
    """A nested value's text, plain values joined by commas, cut at ``MAX_META_CHARS``: YAML aliases
    can nest one list in another exponentially often (or in itself), so ``str()`` is no bound."""
    parts: list[str] = []
    size = 0
    stack: list[Any] = [value]
    seen = 0
    while stack and size < MAX_META_CHARS and seen < 10 * MAX_META_CHARS:
        item = stack.pop()
        seen += 1
        if isinstance(item, dict):
            stack.extend(reversed([v for kv in item.items() for v in kv]))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
        elif item is not None:
            parts.append(str(item)[:MAX_META_CHARS])
            size += len(parts[-1]) + 2
    return ", ".join(parts)[:MAX_META_CHARS]


