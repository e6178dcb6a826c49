"""What ``laminae.open`` reads before an ``Index`` exists: ``_manifests/LATEST`` and one manifest.

Reads ``<index>/_manifests/LATEST`` (unless a version is given) and ``_manifests/NNNNNNNN.json``
through the index's own files (a local directory or object storage); writes nothing. A missing
or damaged file is an ``IndexOpenError`` naming it and the fix; an index of another schema version
one saying which release reads it.
"""

from __future__ import annotations

import json
import re

from laminae.errors import IndexOpenError, ReaderArgumentError, first_line
from laminae.pinned_tables import VIEW_TABLES
from laminae.schemas.storage import MANIFEST_DIR, IndexFiles, StorageError
from laminae.schemas.tables import SCHEMA_VERSION
from laminae.vectors import SEARCH_MODES


def check_search(search: str) -> str:
    """A ``search=`` setting of ``laminae.open`` (``laminae.vectors.SEARCH_MODES``)."""
    if search not in SEARCH_MODES:
        raise ReaderArgumentError(f"search must be one of {', '.join(SEARCH_MODES)}; got {search!r}")
    return search


def read_manifest(root: str, version: int | None) -> tuple[dict, int | None]:
    """The manifest ``version`` (default: the one ``LATEST`` names) of the index at ``root``,
    checked for what the reader uses, and the latest version (None when ``LATEST`` is damaged
    and ``version`` given)."""
    try:
        files = IndexFiles(root)
    except StorageError as exc:
        raise IndexOpenError(str(exc)) from None
    latest_path = _shown(root, f"{MANIFEST_DIR}/LATEST")
    raw = _read_index_file(files, root, f"{MANIFEST_DIR}/LATEST")
    if raw is None:
        raise IndexOpenError(
            f"{root} holds no published laminae index (no {MANIFEST_DIR}/LATEST): "
            "build one with `laminae build --seeds FILE --index DIR`"
        )
    latest = _manifest_number(raw)
    if version is None and latest is None:
        shown = raw[:40].decode("utf-8", "replace")
        raise IndexOpenError(
            f"{latest_path} {'is empty' if not raw.strip() else f'holds {shown!r}'}, not a manifest number: "
            f"it is damaged. Run `laminae refresh --index {root}` (it publishes a new manifest and rewrites "
            f"LATEST), or write the number of the newest manifest in {_shown(root, MANIFEST_DIR)}/ into it, or "
            "open a version explicitly (laminae.open(DIR, version=N), --version N)")
    if version is None:
        number = latest
    else:
        try:
            number = int(version)
        except (TypeError, ValueError):
            raise ReaderArgumentError(f"version must be a manifest number (an int); got {version!r}") from None
    path = f"{MANIFEST_DIR}/{number:08d}.json"
    text = _read_index_file(files, root, path)
    if text is None:
        if version is None:
            raise IndexOpenError(
                f"{latest_path} names manifest {number}, but {_shown(root, path)} is missing: the index is "
                f"damaged. Run `laminae refresh --index {root}` to publish a new manifest, or open another "
                "version (laminae.open(DIR, version=N), --version N)")
        raise IndexOpenError(f"{root} has no manifest version {number}"
                             + (f"; the latest is {latest}" if latest is not None else ""))
    manifest = _checked_manifest(text, _shown(root, path), number, latest, root)
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise IndexOpenError(
            f"{root} was written with schema version {manifest.get('schema_version')}; this laminae "
            f"reads version {SCHEMA_VERSION}. Install the laminae release that built it, or rebuild the index"
        )
    return manifest, latest


def _shown(root: str, rel: str) -> str:
    return f"{root.rstrip('/')}/{rel}"


def _read_index_file(files: IndexFiles, root: str, rel: str) -> bytes | None:
    """A file of the index, None if absent; ``IndexOpenError`` if it cannot be read."""
    try:
        return files.read_bytes(rel)
    except OSError as exc:
        raise IndexOpenError(f"{_shown(root, rel)} cannot be read ({first_line(exc)}): check that it is a file this "
                             "user may read") from None


def _manifest_number(raw: bytes) -> int | None:
    """The manifest number ``LATEST`` holds, None when it holds anything else."""
    text = raw.decode("ascii", "replace").strip()
    return int(text) if re.fullmatch(r"[0-9]{1,12}", text) else None


JSON_NAMES = {int: "number", str: "string", dict: "object"}
MANIFEST_KEYS = {"version": int, "run_id": str, "tables": dict, "embedder": dict}


def _checked_manifest(raw: bytes, path: str, number: int, latest: int | None, root: str) -> dict:
    """The manifest in ``raw``, checked for what the reader uses (its version, the versions of the
    tables the view reads, the embedder's dimension); ``IndexOpenError`` saying how it is damaged."""
    earlier = ", or open an earlier version (laminae.open(DIR, version=N), --version N)" if number > 1 else ""
    fix = f"run `laminae refresh --index {root}` to publish a new manifest{earlier}" \
        if number == latest or latest is None else f"open another version (the latest is {latest})"
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise IndexOpenError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}): the manifest is "
                             f"damaged; {fix}") from None
    except json.JSONDecodeError as exc:
        raise IndexOpenError(f"{path} is not valid JSON ({exc.msg}: character {exc.pos} of {len(raw)}): the "
                             f"manifest is truncated or damaged; {fix}") from None
    problems = []
    if not isinstance(manifest, dict):
        problems.append(f"it holds a JSON {type(manifest).__name__}, not an object")
        manifest = {}
    for key, kind in MANIFEST_KEYS.items():
        if key in manifest and not isinstance(manifest[key], kind):
            problems.append(f"{key!r} is not a JSON {JSON_NAMES[kind]}")
    missing = [k for k in MANIFEST_KEYS if k not in manifest]
    if missing and not problems:
        problems.append(f"it lacks {', '.join(map(repr, missing))}")
    if not problems:
        tables = manifest["tables"]
        absent = [t for t in VIEW_TABLES if t not in tables]
        wrong = [t for t, v in tables.items() if not isinstance(v, int) or isinstance(v, bool)]
        if absent:
            problems.append(f"its tables lack {', '.join(absent)}")
        elif wrong:
            problems.append(f"the versions of {', '.join(wrong)} are not numbers")
        dim = manifest["embedder"].get("dim")
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
            problems.append(f"its embedder has no dimension ({dim!r})")
        if manifest["version"] != number:
            problems.append(f"it says version {manifest['version']}")
    if problems:
        raise IndexOpenError(f"{path} is damaged: {'; '.join(problems)}; {fix}")
    return manifest
