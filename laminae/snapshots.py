"""Reader snapshots: the facts the builder and the reader share about them.

A snapshot is the in-memory view of one manifest version saved as files (``laminae.graph``;
written by ``laminae.snapshot_writer``) in one folder: ``_snapshots/NNNNNNNN/`` of a local index,
or ``snapshots/<digest>/NNNNNNNN-<digest>`` in the local cache of an index on object storage
(``laminae.schemas.storage.snapshot_dir`` makes both names). This module names the files in one
(``layer_file``, ``COMPLETE``...), checks one without reading its data (``snapshot_problem``),
hard-links one for another version (``link``), caches one (``cache``) and removes old ones
(``prune``, ``keep_newest``) and the temporary folders of writers that died
(``remove_abandoned``). Reads and writes only the snapshot folders it is given.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

from laminae.copies import COPIES_FILE
from laminae.schemas.errors import LaminaeError
from laminae.vectors import code_words

log = logging.getLogger(__name__)

COMPLETE = "COMPLETE"  # written last: a snapshot without it was not written to the end
LINKS = "links.npy"  # (n, 2) document → document row pairs
COMPONENT_LINKS = "component_links.npy"  # (n, 2) component → document row pairs
NAME = re.compile(r"\d{8}(-[0-9a-f]+)?")  # a snapshot folder (snapshot_dir), not a temporary one
TMP_PREFIX = ".tmp-snapshot-"  # a snapshot being written, renamed into place when whole
OLD_PREFIX = ".old-snapshot-"  # a snapshot moved aside to be removed


CRASH_ENV = "LAMINAE_CRASH_AT"


def crash_point(name: str) -> None:
    """Kill this process with SIGKILL when ``$LAMINAE_CRASH_AT`` names this point (crash-safety
    tests kill builds, refreshes and compactions at named points between two writes)."""
    if os.environ.get(CRASH_ENV) == name:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def layer_file(name: str, layer: int) -> str:
    """The file of one layer's ``name``: ``nodes`` (Arrow IPC: id, kind, text; title and url for
    documents), or the ``.npy`` arrays ``vectors``, ``codes``, ``doc``, ``parent``, ``starts``
    and (layer 2 only) ``parent_starts``."""
    return f"{name}{layer}.arrow" if name == "nodes" else f"{name}{layer}.npy"


PARENT_STARTS = layer_file("parent_starts", 2)


def snapshots_in(folder: Path) -> list[Path]:
    """The snapshot folders in ``folder`` (none when it does not exist), temporary ones left out."""
    return [p for p in folder.iterdir() if NAME.fullmatch(p.name)] if folder.is_dir() else []


def version_of(snapshot: Path) -> int:
    """The manifest version a snapshot folder holds the view of."""
    return int(snapshot.name[:8])


def prune(folder: Path, keep: Callable[[Path], bool]) -> None:
    """Remove every snapshot in ``folder`` that ``keep`` does not keep."""
    for snapshot in snapshots_in(folder):
        if not keep(snapshot):
            shutil.rmtree(snapshot, ignore_errors=True)


def keep_newest(folder: Path, keep: int, current: Path) -> None:
    """Remove every snapshot in ``folder`` but ``current`` and the ``keep`` most recently written."""
    newest = set(sorted(snapshots_in(folder), key=_mtime)[-keep:]) if keep else set()
    prune(folder, lambda snapshot: snapshot in newest or snapshot == current)


def cache(root: str, snapshot: Path, save: Callable[[], object], keep: int = 2) -> None:
    """Put the view of a version of the index at ``root`` (on object storage) into the local cache
    at ``snapshot`` by calling ``save``, so that it is memory-mapped like a local index's; keep the
    ``keep`` most recently written snapshots of this index there. A cache that cannot be written
    (a full disk, a read-only home) is logged and left to the caller, who loads the view from the
    tables, in memory. Temporary folders left there by readers that died go first
    (``remove_abandoned``: a live reader's is locked)."""
    with contextlib.suppress(OSError):  # an unreadable cache is reported by the save below
        remove_abandoned(snapshot.parent)
    try:
        save()
    except OSError as exc:
        log.warning("%s: no local snapshot in %s (%s); loading the view from the tables into memory"
                    " (set LAMINAE_CACHE_DIR to a writable directory with room for it)",
                    root, snapshot.parent, exc)
        return
    keep_newest(snapshot.parent, keep, snapshot)


def link(source: Path, target: Path) -> None:
    """Make ``target`` a snapshot of the same view as ``source``, its files hard-linked (a
    version whose nodes and edges are those of an earlier one)."""
    tmp, lock = temporary(target.parent, TMP_PREFIX)
    try:
        for item in source.iterdir():
            os.link(item, tmp / item.name)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        os.close(lock)


def temporary(parent: Path, prefix: str) -> tuple[Path, int]:
    """A new temporary folder in ``parent`` and a descriptor holding an exclusive ``flock`` on it,
    which says the folder is in use until the descriptor is closed or its process dies (the
    kernel drops the lock, SIGKILL included: ``remove_abandoned``)."""
    import fcntl

    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=prefix))
    fd = os.open(tmp, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return tmp, fd


def remove_abandoned(folder: Path) -> int:
    """Remove the temporary folders in ``folder`` (a snapshot being written, an old one moved
    aside) whose writers are gone: their ``flock`` (``temporary``) can be taken. One a live
    process still writes is left alone. Returns how many were removed."""
    import fcntl

    removed = 0
    for path in sorted(folder.iterdir()) if folder.is_dir() else ():
        if not path.name.startswith((TMP_PREFIX, OLD_PREFIX)) or not path.is_dir():
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue  # removed meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # in use
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    return removed


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


class SnapshotDamage(LaminaeError, ValueError):
    """A file of a snapshot is missing, truncated or disagrees with the others (``snapshot_problem``)."""


NODE_COLUMNS = (("id", "kind", "text", "title", "url"), ("id", "kind", "text"), ("id", "kind", "text"))


def snapshot_problem(directory: str | os.PathLike[str], dim: int | None = None) -> str | None:
    """None when the snapshot in ``directory`` is whole, else one line naming the first bad file.

    Cheap (no data is read, whatever the index's size): ``COMPLETE`` and every file ``Graph.load``
    reads must exist; each ``.npy`` file's header must parse and its size be the header's plus
    its shape's bytes (a truncated or padded file fails), with the dtype and rank the reader
    expects; each ``nodes{i}.arrow`` must open (its footer is the file's last bytes, so a
    truncated one fails) with the columns the reader reads; and the row counts must agree across
    a layer's files (vectors, codes, doc, parent, nodes), ``starts{i}`` hold one more than the
    documents, ``parent_starts2`` one more than the components, every layer's vectors have one
    width (``dim`` when given) and codes the words of that width, and ``copies1.npy`` one row per
    component. ``codes{i}.npy`` may be absent (snapshots written before issue 19), and
    ``copies1.npy`` (before issue 45). A missing directory is reported as such.
    """
    try:
        _check_snapshot(Path(directory), dim)
    except SnapshotDamage as exc:
        return str(exc)
    return None


def _check_snapshot(src: Path, dim: int | None) -> None:
    if not src.is_dir():
        raise SnapshotDamage(f"{src}: no snapshot (the directory is missing)")
    if not (src / COMPLETE).is_file():
        raise SnapshotDamage(f"{src / COMPLETE} is missing: the snapshot was not written to the end")
    rows: list[int] = []
    for i in range(3):
        n = _arrow_rows(src / layer_file("nodes", i), NODE_COLUMNS[i])
        vectors = _npy_shape(src / layer_file("vectors", i), np.float32, 2)
        if dim is not None and vectors[1] != dim:
            raise SnapshotDamage(f"{src / layer_file('vectors', i)} holds {vectors[1]}-d vectors; the index's are {dim}-d")
        dim = vectors[1]
        sized = {layer_file("vectors", i): vectors[0],
                 layer_file("doc", i): _npy_shape(src / layer_file("doc", i), np.int32, 1)[0],
                 layer_file("parent", i): _npy_shape(src / layer_file("parent", i), np.int32, 1)[0]}
        if (src / layer_file("codes", i)).exists():
            codes = _npy_shape(src / layer_file("codes", i), np.uint64, 2)
            if codes[1] != code_words(dim):
                raise SnapshotDamage(f"{src / layer_file('codes', i)} has {codes[1]} words a row; "
                                     f"{dim}-d vectors need {code_words(dim)}")
            sized[layer_file("codes", i)] = codes[0]
        for name, count in sized.items():
            if count != n:
                raise SnapshotDamage(f"{src / name} holds {count} rows; {layer_file('nodes', i)} holds {n}")
        rows.append(n)
    for i in range(3):
        starts = _npy_shape(src / layer_file("starts", i), np.int64, 1)[0]
        if starts != rows[0] + 1:
            raise SnapshotDamage(f"{src / layer_file('starts', i)} holds {starts} values for {rows[0]} documents "
                                 f"(one more expected)")
    parent_starts = _npy_shape(src / PARENT_STARTS, np.int64, 1)[0]
    if parent_starts != rows[1] + 1:
        raise SnapshotDamage(f"{src / PARENT_STARTS} holds {parent_starts} values for {rows[1]} components "
                             f"(one more expected)")
    if (src / COPIES_FILE).exists():  # absent in snapshots written before issue 45
        copies = _npy_shape(src / COPIES_FILE, np.int64, 1)[0]
        if copies != rows[1]:
            raise SnapshotDamage(f"{src / COPIES_FILE} holds {copies} rows for {rows[1]} components")
    for name in (LINKS, COMPONENT_LINKS):
        shape = _npy_shape(src / name, np.int64, 2)
        if shape[1] != 2:
            raise SnapshotDamage(f"{src / name} has {shape[1]} columns; pairs have 2")


def _npy_shape(path: Path, dtype, ndim: int) -> tuple[int, ...]:
    """The shape in a ``.npy`` file's header, checked against its dtype, rank and the file's size."""
    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                           (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if read_header is None:
                raise ValueError(f"unexpected .npy format version {version}")
            shape, fortran, found = read_header(fh)
            offset = fh.tell()
            size = os.fstat(fh.fileno()).st_size
    except FileNotFoundError:
        raise SnapshotDamage(f"{path} is missing") from None
    except (OSError, ValueError, SyntaxError) as exc:  # numpy raises ValueError for a bad magic or header
        raise SnapshotDamage(f"{path} is not a readable .npy file ({exc})") from None
    if found != np.dtype(dtype) or fortran or len(shape) != ndim:
        raise SnapshotDamage(f"{path} holds a {'x'.join(map(str, shape))} {found} array; "
                             f"the reader expects {ndim}-d {np.dtype(dtype)}")
    expected = offset + int(np.prod(shape, dtype=np.int64)) * found.itemsize
    if size != expected:
        raise SnapshotDamage(f"{path} is {'truncated' if size < expected else 'longer than its header says'}: "
                             f"{size} bytes, {expected} expected for {'x'.join(map(str, shape))} {found}")
    return tuple(shape)


def _arrow_rows(path: Path, columns: tuple[str, ...]) -> int:
    """Rows of an Arrow IPC file, read from its footer and batch headers (the data is memory-mapped,
    not read), after checking it has ``columns``."""
    try:
        with pa.memory_map(str(path)) as source:
            reader = pa.ipc.open_file(source)
            missing = [c for c in columns if c not in reader.schema.names]
            n = sum(reader.get_batch(b).num_rows for b in range(reader.num_record_batches))
    except FileNotFoundError:
        raise SnapshotDamage(f"{path} is missing") from None
    except (OSError, pa.ArrowException) as exc:
        raise SnapshotDamage(f"{path} is not a readable Arrow file ({exc})") from None
    if missing:
        raise SnapshotDamage(f"{path} lacks the column(s) {', '.join(missing)}")
    return n
