"""Compact vector search for layers too large to scan exactly: sign codes, a shortlist, exact re-scoring.

Reads a layer's float32 vectors (in memory or memory-mapped from a snapshot's ``vectors{i}.npy``)
and its sign codes (``codes{i}.npy``, memory-mapped, written by ``laminae.snapshot_writer``);
writes nothing.

A sign code keeps one bit per dimension (``vector > 0``), packed and padded to whole 64-bit
words: 48 bytes a 384-d vector instead of 1,536. The Hamming distance between two codes
estimates the angle between the vectors (SimHash), so a scan of the codes (XOR and popcount,
``hamming``) ranks every row about as exact similarity would, at a thirty-second of the bytes.
When candidates are many, the scan first reads only the codes' first ``PREFILTER_WORDS`` words
(kept contiguous in memory, ``code_prefix``) and keeps ``PREFILTER_FACTOR`` times the shortlist
for a pass over whole codes. A move then re-scores the shortlist of best rows (or documents, or
components) exactly with the float32 vectors, reading only those rows of the snapshot's file
(``RowFile``: plain reads, so the reader's resident memory does not grow with the file): the
scores a move returns are always exact similarities; what the codes can cost is recall (a row
the codes rank below the shortlist is missed), which ``bench/reader.py`` measures against exact
search.

Which layers are scanned through codes (``layer_is_compact``): ``search="exact"`` none,
``search="compact"`` every layer with codes, ``search="auto"`` (the default) the layers whose
float32 vectors take more than ``$LAMINAE_EXACT_SEARCH_LIMIT_GB`` (default 4 GiB: 2.8M 384-d
vectors), so an index of 1M subcomponents is searched exactly as before.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

SEARCH_MODES = ("auto", "exact", "compact")
EXACT_LIMIT_ENV = "LAMINAE_EXACT_SEARCH_LIMIT_GB"
DEFAULT_EXACT_LIMIT_GB = 4.0
SHORTLIST_ROWS = 1000  # rows re-scored exactly after a flat scan of the codes (search, k <= this)
SHORTLIST_GROUPS = 300  # documents or components re-scored exactly after a grouped scan
PREFILTER_WORDS = 3  # a first pass over 192 of the bits (0: none), when candidates are many
PREFILTER_FACTOR = 30  # ... keeps this many times the shortlist for the pass over whole codes
CODE_BLOCK = 32_768  # rows per block of a code scan (stays in cache)
_THREADS = 2

_pool: ThreadPoolExecutor | None = None


class SearchSettingError(ValueError):
    """An exact-search limit the reader cannot use; the message says what is allowed."""


def exact_limit_bytes() -> float:
    """The float32 bytes above which ``search="auto"`` scans a layer's codes (from the environment)."""
    raw = os.environ.get(EXACT_LIMIT_ENV)
    if raw is None or raw == "":
        return DEFAULT_EXACT_LIMIT_GB * 2**30
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise SearchSettingError(f"${EXACT_LIMIT_ENV} must be a number of GiB >= 0 (e.g. 4); got {raw!r}")
    return value * 2**30


def layer_is_compact(vectors: np.ndarray, codes: np.ndarray | None, search: str) -> bool:
    """Whether moves scan this layer's codes (then re-score a shortlist) instead of its vectors."""
    if codes is None or search == "exact" or len(vectors) == 0:
        return False
    return search == "compact" or vectors.nbytes > exact_limit_bytes()


def code_words(dim: int) -> int:
    """64-bit words of one code: one bit per dimension, padded with zero bits."""
    return (dim + 63) // 64


def sign_codes(vectors: np.ndarray) -> np.ndarray:
    """Sign codes of ``vectors`` (n, dim) as (n, words) uint64 (bits past ``dim`` are zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    n, dim = vectors.shape
    packed = np.zeros((n, code_words(dim) * 8), dtype=np.uint8)
    packed[:, : (dim + 7) // 8] = np.packbits(vectors > 0, axis=1)
    return packed.view(np.uint64)


def _scan_part(codes: np.ndarray, query_codes: np.ndarray, out: np.ndarray, lo: int, hi: int) -> None:
    words = codes.shape[1]
    for start in range(lo, hi, CODE_BLOCK):
        end = min(hi, start + CODE_BLOCK)
        block = codes[start:end]
        for j, q in enumerate(query_codes):
            counts = np.bitwise_count(np.bitwise_xor(block, q))
            target = out[start:end, j]
            if words == 1:
                target[:] = counts[:, 0]
                continue
            np.add(counts[:, 0], counts[:, 1], out=target, dtype=np.uint16)
            for w in range(2, words):
                np.add(target, counts[:, w], out=target)


class RowFile:
    """The float32 vectors of a ``.npy`` file read row by row with ``os.pread``: indexing with an
    int, a slice or an array of rows returns those rows (consecutive rows in one read). A compact
    layer's vectors are read this way, not through a memory map: a fault in a mapped file maps
    the kernel's read-ahead window (8 MB on this machine) into the reader's resident memory,
    which grew by about 350 MB a global hop at 10M subcomponents."""

    def __init__(self, path: str | os.PathLike[str], offset: int, shape: tuple[int, int], dtype=np.float32) -> None:
        self.path, self.offset, self.shape = str(path), int(offset), tuple(shape)
        self.dtype = np.dtype(dtype)
        self.ndim = 2
        self.nbytes = shape[0] * shape[1] * self.dtype.itemsize
        self._fd = os.open(self.path, os.O_RDONLY)

    @classmethod
    def of(cls, mapped: np.memmap) -> RowFile:
        return cls(mapped.filename, mapped.offset, mapped.shape, mapped.dtype)

    def __len__(self) -> int:
        return self.shape[0]

    def __del__(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            os.close(fd)

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, int | np.integer):
            return self[np.array([int(key)])][0]
        if isinstance(key, slice):
            key = np.arange(*key.indices(self.shape[0]))
        rows = np.asarray(key, dtype=np.int64).reshape(-1)
        dim = self.shape[1]
        out = np.empty((len(rows), dim), dtype=self.dtype)
        if len(rows) == 0:
            return out
        order = np.argsort(rows, kind="stable")
        ordered = rows[order]
        breaks = np.flatnonzero(np.diff(ordered) != 1) + 1
        starts = np.concatenate([[0], breaks])
        ends = np.concatenate([breaks, [len(ordered)]])
        block = np.empty((len(rows), dim), dtype=self.dtype)
        view = memoryview(block).cast("B")
        row_bytes = dim * self.dtype.itemsize
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            want = (b - a) * row_bytes
            got = os.preadv(self._fd, [view[a * row_bytes:b * row_bytes]], self.offset + int(ordered[a]) * row_bytes)
            if got != want:
                raise OSError(f"{self.path}: read {got} bytes of {want} at row {int(ordered[a])}")
        out[order] = block
        return out


def code_prefix(codes: np.ndarray, block: int = 1 << 20) -> np.ndarray | None:
    """The first ``PREFILTER_WORDS`` words of every code as one contiguous array in memory (a
    fifth of a 384-bit code; its scan takes about half the time of the same columns read from
    the whole codes), or None when there is no first pass. A memory-mapped file is read with
    plain reads, block by block."""
    if not 0 < PREFILTER_WORDS < codes.shape[1]:
        return None
    source = RowFile.of(codes) if isinstance(codes, np.memmap) else codes
    out = np.empty((len(codes), PREFILTER_WORDS), dtype=np.uint64)
    for start in range(0, len(codes), block):
        out[start:start + block] = source[start:start + block][:, :PREFILTER_WORDS]
    return out


def _first_words(codes: np.ndarray, prefix: np.ndarray | None) -> np.ndarray:
    return prefix if prefix is not None and prefix.shape[1] == PREFILTER_WORDS else codes[:, :PREFILTER_WORDS]


def hamming(codes: np.ndarray, query_codes: np.ndarray) -> np.ndarray:
    """Hamming distances (rows × queries, uint16) of every code to each query's code.

    Blocks of ``CODE_BLOCK`` rows, split over two threads (numpy releases the GIL in XOR and
    popcount): about 20 ms per million 384-bit codes and query on this 2-core machine.
    """
    global _pool
    n = len(codes)
    out = np.empty((n, len(query_codes)), dtype=np.uint16)
    if n == 0:
        return out
    if n < 4 * CODE_BLOCK:
        _scan_part(codes, query_codes, out, 0, n)
        return out
    if _pool is None:
        _pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="laminae-codes")
    cuts = np.linspace(0, n, _THREADS + 1).astype(np.int64)
    cuts[1:-1] -= cuts[1:-1] % CODE_BLOCK
    futures = [_pool.submit(_scan_part, codes, query_codes, out, int(cuts[i]), int(cuts[i + 1]))
               for i in range(_THREADS)]
    for future in futures:
        future.result()
    return out


def group_min(values: np.ndarray, starts: np.ndarray, empty: int) -> np.ndarray:
    """Min of ``values[starts[i]:starts[i+1]]`` per group i (``empty`` for an empty group)."""
    n = len(starts) - 1
    out = np.full((n, *values.shape[1:]), empty, dtype=values.dtype)
    nonempty = starts[:-1] < starts[1:]
    if len(values) and nonempty.any():
        out[nonempty] = np.minimum.reduceat(values, starts[:-1][nonempty], axis=0)
    return out


def best_by_distance(distances: np.ndarray, depth: int) -> np.ndarray:
    """Positions of the ``depth`` smallest distances per query column, their union, sorted."""
    if distances.ndim == 1:
        distances = distances[:, None]
    n = len(distances)
    if n <= depth:
        return np.arange(n, dtype=np.int64)
    picks = [np.argpartition(distances[:, j], depth - 1)[:depth] for j in range(distances.shape[1])]
    return np.unique(np.concatenate(picks)).astype(np.int64)


def _coarse(codes: np.ndarray, candidates: int, depth: int) -> bool:
    """Whether a scan starts with the first ``PREFILTER_WORDS`` words of each code (then the whole
    codes of ``PREFILTER_FACTOR`` × ``depth`` candidates): when the codes are longer and the
    candidates many."""
    return 0 < PREFILTER_WORDS < codes.shape[1] and candidates > depth * PREFILTER_FACTOR


def _spans(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Rows ``starts[i] : starts[i] + sizes[i]`` for every i, concatenated."""
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    return np.arange(offsets[-1], dtype=np.int64) + np.repeat(starts - offsets[:-1], sizes)


def shortlist_rows(codes: np.ndarray, queries: np.ndarray, depth: int | None = None,
                   prefix: np.ndarray | None = None) -> np.ndarray:
    """Rows whose codes are among the ``depth`` (default ``SHORTLIST_ROWS``) nearest to any query (sorted)."""
    depth = SHORTLIST_ROWS if depth is None else depth
    q = sign_codes(queries)
    if not _coarse(codes, len(codes), depth):
        return best_by_distance(hamming(codes, q), depth)
    rows = best_by_distance(hamming(_first_words(codes, prefix), q[:, :PREFILTER_WORDS]), depth * PREFILTER_FACTOR)
    return rows[best_by_distance(hamming(np.asarray(codes[rows]), q), depth)]


def shortlist_groups(codes: np.ndarray, starts: np.ndarray, queries: np.ndarray,
                     depth: int | None = None, allowed: np.ndarray | None = None,
                     prefix: np.ndarray | None = None) -> np.ndarray:
    """Groups (documents or components: rows ``starts[i]:starts[i+1]``) whose nearest code is among
    the ``depth`` (default ``SHORTLIST_GROUPS``) nearest to any query (sorted). Empty groups, and
    groups not ``allowed`` (a mask over groups), are never listed. ``prefix``: ``code_prefix(codes)``."""
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64)
    depth = SHORTLIST_GROUPS if depth is None else depth
    empty = np.iinfo(np.uint16).max
    q = sign_codes(queries)
    coarse = _coarse(codes, len(starts) - 1, depth)
    scanned = (_first_words(codes, prefix), q[:, :PREFILTER_WORDS]) if coarse else (codes, q)
    nearest = group_min(hamming(*scanned), starts, empty)
    if allowed is not None:
        nearest[~allowed] = empty
    picked = best_by_distance(nearest, depth * PREFILTER_FACTOR if coarse else depth)
    picked = picked[nearest[picked].min(axis=1) < empty]
    if not coarse or len(picked) <= depth:
        return picked
    sizes = starts[picked + 1] - starts[picked]
    fine = group_min(hamming(np.asarray(codes[_spans(starts[picked], sizes)]), q),
                     np.concatenate([[0], np.cumsum(sizes)]), empty)
    return picked[best_by_distance(fine, depth)]


def rescored_rows(vectors: np.ndarray, codes: np.ndarray, q: np.ndarray, depth: int | None = None,
                  prefix: np.ndarray | None = None) -> np.ndarray:
    """Similarity of every row to ``q``: exact (float32 vectors) for the rows the codes shortlist,
    -inf for the others; only the shortlisted rows of ``vectors`` are read."""
    out = np.full(len(vectors), -np.inf, dtype=np.float32)
    rows = shortlist_rows(codes, q[None, :], depth, prefix)
    if len(rows):
        out[rows] = np.asarray(vectors[rows], dtype=np.float32) @ q
    return out
