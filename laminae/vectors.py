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
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np

from laminae.schemas.errors import LaminaeError

SEARCH_MODES = ("auto", "exact", "compact")
EXACT_LIMIT_ENV = "LAMINAE_EXACT_SEARCH_LIMIT_GB"
DEFAULT_EXACT_LIMIT_GB = 4.0
SHORTLIST_ROWS = 1000  # rows re-scored exactly after a flat scan of the codes (search, k <= this)
SHORTLIST_GROUPS = 300  # documents or components re-scored exactly after a grouped scan
PREFILTER_WORDS = 3  # a first pass over 192 of the bits (0: none), when candidates are many
PREFILTER_FACTOR = 30  # ... keeps this many times the shortlist for the pass over whole codes
CODE_BLOCK = 32_768  # rows per block of a code scan (stays in cache)
SELECT_MIN = 1 << 19  # from this many values (rows, or groups) on, a selection starts from a sampled threshold
SELECT_SAMPLE = 65_536  # ... read from this many values
_THREADS = 2

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


class SearchSettingError(LaminaeError, ValueError):
    """An exact-search limit the reader cannot use; the message says what is allowed."""

    exit_code = 2


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


def _scan_part(codes: np.ndarray, query_codes: np.ndarray, out: np.ndarray, lo: int, hi: int,
               columns: bool = False) -> None:
    """Distances of rows ``lo:hi`` into ``out`` (queries × rows). Each 64-bit word of a block is
    XORed and counted as one contiguous run over the block's rows: with a row's few words as the
    inner axis, numpy's loops would run three to six elements at a time (five times slower)."""
    words = query_codes.shape[1]
    xor = np.empty(CODE_BLOCK, dtype=np.uint64)
    count = np.empty(CODE_BLOCK, dtype=np.uint8)
    for start in range(lo, hi, CODE_BLOCK):
        end = min(hi, start + CODE_BLOCK)
        m = end - start
        block = codes[:, start:end] if columns else np.ascontiguousarray(np.asarray(codes[start:end]).T)
        for j, q in enumerate(query_codes):
            target = out[j, start:end]
            for w in range(words):
                np.bitwise_xor(block[w], q[w], out=xor[:m])
                np.bitwise_count(xor[:m], out=count[:m])
                if w == 0:
                    target[:] = count[:m]
                else:
                    np.add(target, count[:m], out=target)


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
    """The first ``PREFILTER_WORDS`` words of every code, word by word ((words, n): one contiguous
    run of the rows' first words, then of their second, ...) in memory, a fifth of a 384-bit
    code; or None when there is no first pass. A memory-mapped file is read with plain reads,
    block by block."""
    if not 0 < PREFILTER_WORDS < codes.shape[1]:
        return None
    source = RowFile.of(codes) if isinstance(codes, np.memmap) else codes
    out = np.empty((PREFILTER_WORDS, len(codes)), dtype=np.uint64)
    for start in range(0, len(codes), block):
        out[:, start:start + block] = np.asarray(source[start:start + block])[:, :PREFILTER_WORDS].T
    return out


def _first_words(codes: np.ndarray, prefix: np.ndarray | None) -> tuple[np.ndarray, bool]:
    """The codes' first words to scan, and whether they are laid out word by word (``code_prefix``)."""
    if prefix is not None and prefix.shape[0] == PREFILTER_WORDS:
        return prefix, True
    return codes[:, :PREFILTER_WORDS], False


def hamming(codes: np.ndarray, query_codes: np.ndarray, columns: bool = False) -> np.ndarray:
    """Hamming distances (rows × queries, uint16) of every code to each query's code; ``columns``:
    ``codes`` is laid out word by word, (words, n), as ``code_prefix`` returns it.

    Blocks of ``CODE_BLOCK`` rows, split over two threads (numpy releases the GIL in XOR and
    popcount): about 3.3 ms per million 192-bit prefixes and query on this 2-core machine, bound
    by memory (one thread takes about as long).
    """
    global _pool
    n = codes.shape[1] if columns else len(codes)
    out = np.empty((len(query_codes), n), dtype=np.uint16)
    if n == 0:
        return out.T
    if n < 4 * CODE_BLOCK:
        _scan_part(codes, query_codes, out, 0, n, columns)
        return out.T
    with _pool_lock:  # threads sharing a reader start one pool
        if _pool is None:
            _pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="laminae-codes")
    cuts = np.linspace(0, n, _THREADS + 1).astype(np.int64)
    cuts[1:-1] -= cuts[1:-1] % CODE_BLOCK
    futures = [_pool.submit(_scan_part, codes, query_codes, out, int(cuts[i]), int(cuts[i + 1]), columns)
               for i in range(_THREADS)]
    for future in futures:
        future.result()
    return out.T


def group_min(values: np.ndarray, starts: np.ndarray, empty: int) -> np.ndarray:
    """Min of ``values[starts[i]:starts[i+1]]`` per group i (``empty`` for an empty group)."""
    n = len(starts) - 1
    out = np.full((n, *values.shape[1:]), empty, dtype=values.dtype)
    nonempty = starts[:-1] < starts[1:]
    if len(values) and nonempty.any():
        out[nonempty] = np.minimum.reduceat(values, starts[:-1][nonempty], axis=0)
    return out


def _at_most(values: np.ndarray, wanted: int, take):
    """``take(positions, last)`` of the positions (sorted) of the values at or below a threshold,
    read from a strided sample of ``SELECT_SAMPLE`` values for about ``wanted`` positions and
    raised until ``take`` returns something other than None (``last``: every position, where it
    must). One comparison over the values instead of a partition (or a per-group reduction) of
    all of them."""
    n = len(values)
    sample = np.sort(values[:: max(1, n // SELECT_SAMPLE)])
    while True:
        rank = int(wanted / n * len(sample) * 1.5) + 16
        if rank >= len(sample) - 1:
            return take(np.arange(n, dtype=np.int64), True)
        found = take(np.flatnonzero(values <= sample[rank]), False)
        if found is not None:
            return found
        wanted *= 4


def smallest(values: np.ndarray, count: int) -> np.ndarray:
    """Positions of ``count`` smallest values of a 1-D array (any of those tied at the boundary), unsorted."""
    if len(values) <= count:
        return np.arange(len(values), dtype=np.int64)
    if len(values) < SELECT_MIN:
        return np.argpartition(values, count - 1)[:count]
    positions = _at_most(values, count, lambda p, last: p if last or len(p) >= count else None)
    return positions[np.argpartition(values[positions], count - 1)[:count]]


def best_by_distance(distances: np.ndarray, depth: int) -> np.ndarray:
    """Positions of the ``depth`` smallest distances per query column, their union, sorted."""
    if distances.ndim == 1:
        distances = distances[:, None]
    if len(distances) <= depth:
        return np.arange(len(distances), dtype=np.int64)
    picks = [smallest(distances[:, j], depth) for j in range(distances.shape[1])]
    return np.unique(np.concatenate(picks)).astype(np.int64)


def nearest_groups(distances: np.ndarray, starts: np.ndarray, depth: int,
                   allowed: np.ndarray | None = None) -> np.ndarray:
    """Groups (rows ``starts[i]:starts[i+1]``) whose nearest row is among the ``depth`` nearest of
    any query column of ``distances`` (rows × queries), their union, sorted; empty groups and
    groups not ``allowed`` (a mask) never. With many groups (a million components), only the rows
    at or below a distance threshold are grouped (``_at_most``): a reduction over every group
    costs more than the scan that gave the distances."""
    empty = np.iinfo(distances.dtype).max
    n_groups = len(starts) - 1
    if n_groups < SELECT_MIN or len(distances) < SELECT_MIN:
        nearest = group_min(distances, starts, empty)
        if allowed is not None:
            nearest[~allowed] = empty
        picked = best_by_distance(nearest, depth)
        return picked[nearest[picked].min(axis=1) < empty]
    picks = [_at_most(distances[:, j], depth, partial(_nearest_among, distances[:, j], starts, allowed, depth))
             for j in range(distances.shape[1])]
    return np.unique(np.concatenate(picks)).astype(np.int64)


def _nearest_among(column: np.ndarray, starts: np.ndarray, allowed: np.ndarray | None, depth: int,
                   rows: np.ndarray, last: bool) -> np.ndarray | None:
    """The ``depth`` groups nearest by these rows of ``column`` (sorted rows, so a group's rows are
    adjacent), or None when they hold fewer groups and are not ``last``."""
    groups = np.searchsorted(starts, rows, side="right") - 1
    if allowed is not None:
        keep = allowed[groups]
        rows, groups = rows[keep], groups[keep]
    firsts = np.flatnonzero(np.diff(groups, prepend=-1))
    if len(firsts) < depth and not last:
        return None
    if len(firsts) == 0:
        return firsts
    return groups[firsts][smallest(np.minimum.reduceat(column[rows], firsts), depth)]


def _coarse(codes: np.ndarray, candidates: int, depth: int) -> bool:
    """Whether a scan starts with the first ``PREFILTER_WORDS`` words of each code (then the whole
    codes of ``PREFILTER_FACTOR`` × ``depth`` candidates): when the codes are longer and the
    candidates many."""
    return 0 < PREFILTER_WORDS < codes.shape[1] and candidates > depth * PREFILTER_FACTOR


def spans(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
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
    first, columns = _first_words(codes, prefix)
    rows = best_by_distance(hamming(first, q[:, :PREFILTER_WORDS], columns), depth * PREFILTER_FACTOR)
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
    q = sign_codes(queries)
    if not _coarse(codes, len(starts) - 1, depth):
        return nearest_groups(hamming(codes, q), starts, depth, allowed)
    first, columns = _first_words(codes, prefix)
    groups = nearest_groups(hamming(first, q[:, :PREFILTER_WORDS], columns), starts, depth * PREFILTER_FACTOR,
                            allowed)
    if len(groups) <= depth:
        return groups
    sizes = starts[groups + 1] - starts[groups]
    fine = hamming(np.asarray(codes[spans(starts[groups], sizes)]), q)
    return groups[nearest_groups(fine, np.concatenate([[0], np.cumsum(sizes)]), depth)]


def rescored_rows(vectors: np.ndarray, codes: np.ndarray, q: np.ndarray, depth: int | None = None,
                  prefix: np.ndarray | None = None) -> np.ndarray:
    """Similarity of every row to ``q``: exact (float32 vectors) for the rows the codes shortlist,
    -inf for the others; only the shortlisted rows of ``vectors`` are read."""
    out = np.full(len(vectors), -np.inf, dtype=np.float32)
    rows = shortlist_rows(codes, q[None, :], depth, prefix)
    if len(rows):
        out[rows] = np.asarray(vectors[rows], dtype=np.float32) @ q
    return out
