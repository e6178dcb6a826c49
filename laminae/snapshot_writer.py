"""Write a reader snapshot batch by batch, so that no layer needs to be in memory at once.

Reads rows of the three node layers handed to ``SnapshotWriter.add`` in their final order
(grouped by document, subcomponents by parent) and the link pairs; writes the files of one
``_snapshots/NNNNNNNN/`` directory that ``Graph.load`` reads: per layer ``vectors{i}.npy``
(float32), ``codes{i}.npy`` (sign codes, ``laminae.vectors``), ``doc``/``parent``/``starts``
(and ``parent_starts`` for layer 2) ``.npy``, ``nodes{i}.arrow`` (id, kind, text; title and url
for documents), ``links.npy``, ``component_links.npy``, ``copies1.npy`` (``laminae.copies``) and ``COMPLETE`` (the names:
``laminae.snapshots``). The directory is
written under a temporary name, locked while in use (``laminae.snapshots.temporary``: the next
writer removes one whose writer died), and renamed into place (an older one moved aside first, or
kept when it is whole: ``replace_dir``). Vectors and codes are appended to plain
files (no writable memory map, whose pages would count as the writer's resident memory).
``Graph.save`` writes through it in one batch; ``tests/support/synthetic.py`` streams 10M subcomponents.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from laminae.copies import COPIES_FILE, copies
from laminae.snapshots import (
    COMPLETE,
    COMPONENT_LINKS,
    LINKS,
    OLD_PREFIX,
    PARENT_STARTS,
    TMP_PREFIX,
    crash_point,
    layer_file,
    temporary,
)
from laminae.vectors import code_words, sign_codes

BLOCK = 65_536  # rows per block when vectors are turned into codes


class NpyAppender:
    """A ``.npy`` file of a known shape whose rows are appended in order."""

    def __init__(self, path: Path, dtype, shape: tuple[int, ...]) -> None:
        self.path, self.dtype, self.shape = path, np.dtype(dtype), shape
        self.rows = 0
        self._file: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed by close()
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": shape}
        np.lib.format.write_array_header_2_0(self._file, header)

    def append(self, rows: np.ndarray) -> None:
        rows = np.ascontiguousarray(rows, dtype=self.dtype)
        if rows.shape[1:] != self.shape[1:] or self.rows + len(rows) > self.shape[0]:
            raise ValueError(f"{self.path.name}: rows of shape {rows.shape} do not fit {self.shape} "
                             f"after {self.rows} rows")
        self._file.write(rows.tobytes())
        self.rows += len(rows)

    def close(self) -> None:
        self._file.close()
        if self.rows != self.shape[0]:
            raise ValueError(f"{self.path.name}: {self.rows} rows written of {self.shape[0]}")


class SnapshotWriter:
    """Stream the three layers of a ``Graph`` into a snapshot directory (``close`` publishes it)."""

    def __init__(self, directory: str | os.PathLike[str], sizes: tuple[int, int, int], dim: int) -> None:
        self.target = Path(directory)
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.tmp, self._lock = temporary(self.target.parent, TMP_PREFIX)
        self.sizes, self.dim = sizes, dim
        self._vectors: list[NpyAppender] = []
        self._codes: list[NpyAppender] = []
        self._nodes: list[tuple[pa.NativeFile, pa.ipc.RecordBatchFileWriter] | None] = [None, None, None]
        try:
            self._open_files(sizes, dim)
        except BaseException:
            self.abort()
            raise

    def _open_files(self, sizes: tuple[int, int, int], dim: int) -> None:
        self._vectors = [NpyAppender(self.tmp / layer_file("vectors", i), np.float32, (n, dim)) for i, n in enumerate(sizes)]
        self._codes = [NpyAppender(self.tmp / layer_file("codes", i), np.uint64, (n, code_words(dim)))
                       for i, n in enumerate(sizes)]
        self._doc: list[list[np.ndarray]] = [[], [], []]
        self._parent: list[list[np.ndarray]] = [[], [], []]

    def add(self, layer: int, *, ids, kinds, text, vectors: np.ndarray, doc: np.ndarray, parent: np.ndarray,
            title=None, url=None) -> None:
        """Append rows of one layer: ids, kinds, texts (Arrow arrays or lists of str), float32
        vectors, the row of each one's document and parent (-1 for none)."""
        columns = {"id": pa.array(ids, pa.string()), "kind": pa.array(kinds, pa.string()),
                   "text": pa.array(text, pa.string())}
        if layer == 0:
            columns.update(title=pa.array(title, pa.string()), url=pa.array(url, pa.string()))
        batch = pa.record_batch(columns)
        if self._nodes[layer] is None:
            sink = pa.OSFile(str(self.tmp / layer_file("nodes", layer)), "wb")
            self._nodes[layer] = (sink, pa.ipc.new_file(sink, batch.schema))
        self._nodes[layer][1].write_batch(batch)
        self._vectors[layer].append(vectors)
        for start in range(0, len(vectors), BLOCK):
            self._codes[layer].append(sign_codes(vectors[start:start + BLOCK]))
        self._doc[layer].append(np.asarray(doc, dtype=np.int32))
        self._parent[layer].append(np.asarray(parent, dtype=np.int32))

    def close(self, links: np.ndarray, component_links: np.ndarray,
              keep: Callable[[Path], bool] | None = None) -> None:
        """Write pointers and links ((n, 2) document → document and component → document row
        pairs), mark the snapshot ``COMPLETE`` and move it into place, replacing one there unless
        ``keep(target)`` says to keep that one (``replace_dir``)."""
        try:
            for layer in range(3):
                if self._nodes[layer] is None:  # an empty layer still has its files
                    self.add(layer, ids=[], kinds=[], text=[], vectors=np.zeros((0, self.dim), np.float32),
                             doc=[], parent=[], title=[], url=[])
                self._vectors[layer].close()
                self._codes[layer].close()
                doc = np.concatenate(self._doc[layer]) if self._doc[layer] else np.zeros(0, np.int32)
                parent = np.concatenate(self._parent[layer]) if self._parent[layer] else np.zeros(0, np.int32)
                n_docs = self.sizes[0]
                grouped = np.where(doc >= 0, doc, n_docs)
                np.save(self.tmp / layer_file("doc", layer), doc)
                np.save(self.tmp / layer_file("parent", layer), parent)
                np.save(self.tmp / layer_file("starts", layer), np.searchsorted(grouped, np.arange(n_docs + 1)).astype(np.int64))
                if layer == 2:
                    n_comps = self.sizes[1]
                    by_parent = np.where(parent >= 0, parent, n_comps)
                    np.save(self.tmp / PARENT_STARTS,
                            np.searchsorted(by_parent, np.arange(n_comps + 1)).astype(np.int64))
                sink, writer = self._nodes[layer]
                writer.close()
                sink.close()
            with pa.memory_map(str(self.tmp / layer_file("nodes", 1))) as source:
                texts = pa.ipc.open_file(source).read_all().column("text")
                np.save(self.tmp / COPIES_FILE, copies(texts, np.load(self.tmp / layer_file("doc", 1))))
            np.save(self.tmp / LINKS, np.asarray(links, dtype=np.int64).reshape(-1, 2))
            np.save(self.tmp / COMPONENT_LINKS, np.asarray(component_links, dtype=np.int64).reshape(-1, 2))
            (self.tmp / COMPLETE).write_text("1")
            crash_point("snapshot:rename")
            if not replace_dir(self.tmp, self.target, keep):
                shutil.rmtree(self.tmp, ignore_errors=True)
        except BaseException:
            self.abort()
            raise
        self._unlock()

    def abort(self) -> None:
        """Drop the partial snapshot. Closing a file whose buffer cannot be flushed (a full disk)
        fails: each is closed on its own, so that the folder is removed all the same."""
        for appender in (*self._vectors, *self._codes):
            with contextlib.suppress(OSError):
                appender._file.close()
        for nodes in self._nodes:
            if nodes is not None:
                with contextlib.suppress(OSError, pa.ArrowException):
                    nodes[0].close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        self._unlock()

    def _unlock(self) -> None:
        if self._lock is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock)
            self._lock = None


def replace_dir(source: Path, target: Path, keep: Callable[[Path], bool] | None = None, tries: int = 8) -> bool:
    """Move directory ``source`` to ``target``; False (``source`` left in place) when a directory
    is there and ``keep(target)`` says to keep it: readers rebuilding one damaged snapshot at once
    keep the first whole one instead of replacing each other's. Else the one there is first
    renamed aside, then removed, so a reader never finds a half-removed snapshot at ``target``
    (one that has it memory-mapped keeps reading it)."""
    for _ in range(tries):
        try:
            os.replace(source, target)
            return True
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        if keep is not None and keep(target):
            return False
        aside, lock = temporary(target.parent, OLD_PREFIX)
        try:
            with contextlib.suppress(FileNotFoundError):  # another writer moved it first
                os.replace(target, aside / target.name)
            shutil.rmtree(aside, ignore_errors=True)
        finally:
            os.close(lock)
    raise OSError(f"{target}: replaced by other writers {tries} times while this one tried to put its own there")
