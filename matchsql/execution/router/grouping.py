"""Compiled passes of the grouping of ordered input (execution/router/presorted.py), each O(n).

Numpy's stable argsort of small partition codes (a radix sort) and the
vectorised check of adjacent ORDER BY keys cost several passes over the rows
each, and the check needed every key column permuted first. These do each job
in one pass over the rows in input order, without holding the GIL
(``nogil``) and compiled once into the on-disk numba cache:

* :class:`CountingSort`: a counting sort of the partition codes - the stable
  permutation that groups the rows (equal codes keep their input order), where
  each partition starts, and a column's values moved straight to their grouped
  places (:meth:`CountingSort.scatter`);
* :func:`partitions_in_order`: whether each partition's rows, in input order,
  are in ORDER BY order, comparing every row with the previous row of its own
  partition (kept per partition code): no permutation needed.

Both may run over spans of rows on several threads (:func:`spans`,
:func:`in_threads`), each span's result joined to the ones before it.

Inputs under :data:`COMPILED_FROM_ROWS` rows on one thread take numpy's
vectorised passes instead (:func:`group_order`, :func:`each_partition_in_order`):
on them the compiled passes gain a millisecond or two, while compiling them
costs a first query about a second on an empty cache; both give the same answers
(the tests hold them to each other).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

import numpy as np
from numba import njit

from matchsql.execution.router.partitions import group_order, narrow_codes
from matchsql.runtime.compile_cache import use_keyed_cache

use_keyed_cache()  # before the kernels below are defined: see compile_cache

T = TypeVar("T")


def partitions_in_order(
    codes: np.ndarray, count: int, values: np.ndarray, nulls: np.ndarray, nulls_first: np.ndarray
) -> bool:
    """Whether the rows of each partition (``codes``, ``[0, count)``), in input order, are
    in the order of the keys ``values[k, row]`` (ascending; ``nulls[k, row]`` NULL, where
    ``nulls`` has rows, placed first or last by ``nulls_first[k]``); ties are in order.
    Empty ``codes``: one partition (no array of zeros to write and read)."""
    return bool(span_in_order(codes, count, values, nulls, nulls_first, 0, values.shape[1])[0])


@njit(cache=True, nogil=True)
def span_in_order(
    codes: np.ndarray,
    count: int,
    values: np.ndarray,
    nulls: np.ndarray,
    nulls_first: np.ndarray,
    lo: int,
    hi: int,
) -> tuple[bool, np.ndarray, np.ndarray]:
    """:func:`partitions_in_order` of rows ``lo:hi``, with each partition's first and last
    row there (-1: none), so that spans checked apart can be joined
    (:func:`parallel_in_order`)."""
    n = values.shape[1]
    keys = values.shape[0]
    has_nulls = nulls.shape[1] == n
    has_codes = len(codes) > 0
    first = np.full(max(count, 1), -1, np.int64)
    previous = np.full(max(count, 1), -1, np.int64)
    for i in range(lo, hi):
        c = codes[i] if has_codes else 0
        j = previous[c]
        previous[c] = i
        if j < 0:
            first[c] = i
            continue
        if not _row_in_order(values, nulls, nulls_first, has_nulls, keys, j, i):
            return False, first, previous
    return True, first, previous


@njit(cache=True, nogil=True)
def _row_in_order(
    values: np.ndarray,
    nulls: np.ndarray,
    nulls_first: np.ndarray,
    has_nulls: bool,
    keys: int,
    j: int,
    i: int,
) -> bool:
    """Whether row ``i`` may follow row ``j`` of its partition."""
    for k in range(keys):
        if has_nulls and (nulls[k, i] or nulls[k, j]):
            if nulls[k, i] and nulls[k, j]:
                continue  # equal: the next key decides
            return nulls[k, i] != nulls_first[k]  # a NULL before a value, or the reverse
        if values[k, i] < values[k, j]:
            return False
        if values[k, i] > values[k, j]:
            return True
    return True


@njit(cache=True, nogil=True)
def pairs_in_order(
    values: np.ndarray,
    nulls: np.ndarray,
    nulls_first: np.ndarray,
    earlier: np.ndarray,
    later: np.ndarray,
) -> bool:
    """Whether each row ``later[p]`` may follow row ``earlier[p]`` of its partition."""
    has_nulls = nulls.shape[1] == values.shape[1]
    for p in range(len(earlier)):
        if not _row_in_order(
            values, nulls, nulls_first, has_nulls, values.shape[0], earlier[p], later[p]
        ):
            return False
    return True


@njit(cache=True, nogil=True)
def count_codes(
    codes: np.ndarray, count: int, lo: int, hi: int
) -> tuple[np.ndarray, bool, np.ndarray]:
    """Rows per code among rows ``lo:hi``, whether their codes never go down, and each
    code's first row there (-1: none)."""
    counts = np.zeros(count, np.int64)
    firsts = np.full(count, -1, np.int64)
    grouped = True
    for i in range(lo, hi):
        c = codes[i]
        if counts[c] == 0:
            firsts[c] = i
        counts[c] += 1
        if i > lo and c < codes[i - 1]:
            grouped = False
    return counts, grouped, firsts


@njit(cache=True, nogil=True)
def scatter_rows(codes: np.ndarray, lo: int, hi: int, fill: np.ndarray, perm: np.ndarray) -> None:
    """The counting sort's second pass over rows ``lo:hi``: each row to the next place of
    its code (``fill``, advanced); spans with disjoint places may run at once."""
    for i in range(lo, hi):
        c = codes[i]
        perm[fill[c]] = i
        fill[c] += 1


@njit(cache=True, nogil=True)
def remap_codes(indices: np.ndarray, table: np.ndarray, out: np.ndarray, at: int) -> None:
    """``out[at + i] = table[indices[i]]``, a negative index (NULL) taking the last entry."""
    last = len(table) - 1
    for i in range(len(indices)):
        t = indices[i]
        out[at + i] = table[t if t >= 0 else last]


@njit(cache=True, nogil=True)
def scatter_values(
    codes: np.ndarray,
    lo: int,
    hi: int,
    fill: np.ndarray,
    values: np.ndarray,
    out: np.ndarray,
    at: int,
) -> None:
    """:func:`scatter_rows` of a column's values rather than row numbers; ``values`` holds
    the rows from row ``at`` on (a chunk of the column)."""
    for i in range(lo, hi):
        c = codes[i]
        out[fill[c]] = values[i - at]
        fill[c] += 1


SHORT = 7  # bytes of the longest string :func:`short_string_codes` encodes
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, nogil=True)
def short_string_codes(
    offsets: np.ndarray, data: np.ndarray, validity: np.ndarray, bit_offset: int, limit: int
) -> tuple[np.ndarray, np.ndarray, bool, bool]:
    """``(codes, firsts, has_null, done)`` of a string column given as its Arrow buffers
    (``offsets`` already sliced to the column's rows, ``validity`` its bitmap or empty,
    whose first row is bit ``bit_offset``): each row's distinct value numbered in order
    of first appearance (a NULL: -1) and the first row of each distinct value.

    Each string of at most :data:`SHORT` bytes is one 64-bit key (its bytes and its
    length + 1 in the top byte, so distinct strings have distinct keys: no collision
    to check), found in an open-addressing table at most an eighth full. Its bytes are
    read as one word (from the two aligned words around it), not byte by byte: 1M
    symbols of 1 to 7 bytes, 8.0 -> 4.1 ms. ``done`` is False where a longer
    string comes or more than ``limit`` distinct values: the caller encodes otherwise.
    Values are equal when their bytes are, as :func:`pyarrow.compute.dictionary_encode`
    sees them."""
    n = len(offsets) - 1
    codes = np.empty(n, np.int32)
    bits = 8
    keys = np.zeros(1 << bits, np.uint64)  # 0: a free slot (every key is non-zero)
    slot_codes = np.empty(1 << bits, np.int32)
    firsts = np.empty(limit + 1, np.int64)  # untouched pages cost nothing
    values = np.empty(limit + 1, np.uint64)
    count = 0
    has_null = False
    has_validity = len(validity) > 0
    mask = (1 << bits) - 1  # of the table's slots (grows with it)
    words = data[: len(data) // 8 * 8].view(np.uint64)
    for i in range(n):
        if has_validity:
            bit = bit_offset + i
            if not (validity[bit >> 3] >> (bit & 7)) & 1:
                codes[i] = -1
                has_null = True
                continue
        start = offsets[i]
        length = offsets[i + 1] - start
        if length > SHORT:
            return codes, firsts[:count], has_null, False
        key = np.uint64(length + 1) << np.uint64(56)
        w = start >> 3
        if w + 1 < len(words):  # the two words around the bytes; the bytes are the low ones
            shift = np.uint64((start & 7) * 8)
            low = (words[w] >> shift) | ((words[w + 1] << (np.uint64(63) - shift)) << np.uint64(1))
            key |= low & ((np.uint64(1) << np.uint64(8 * length)) - np.uint64(1))
        else:  # near the buffer's end
            for t in range(length):
                key |= np.uint64(data[start + t]) << np.uint64(8 * t)
        pos = np.int64((key * _GOLDEN) >> np.uint64(64 - bits))
        while keys[pos] != key and keys[pos] != 0:
            pos = (pos + 1) & mask
        if keys[pos] == 0:
            if count == limit:
                return codes, firsts[:count], has_null, False
            keys[pos] = key
            slot_codes[pos] = count
            firsts[count] = i
            values[count] = key
            count += 1
            codes[i] = count - 1
            if 8 * count > 1 << bits:  # at most an eighth full: short probes
                bits += 1
                mask = (1 << bits) - 1
                keys = np.zeros(1 << bits, np.uint64)
                slot_codes = np.empty(1 << bits, np.int32)
                for e in range(count):
                    p = np.int64((values[e] * _GOLDEN) >> np.uint64(64 - bits))
                    while keys[p] != 0:
                        p = (p + 1) & mask
                    keys[p] = values[e]
                    slot_codes[p] = e
        else:
            codes[i] = slot_codes[pos]
    return codes, firsts[:count], has_null, True


COMPILED_FROM_ROWS = 1 << 17  # rows from which the compiled passes run (fewer: numpy's)


def each_partition_in_order(
    codes: np.ndarray,
    count: int,
    values: np.ndarray,
    nulls: np.ndarray,
    nulls_first: np.ndarray,
    compiled: bool = False,
) -> bool:
    """:func:`partitions_in_order`, on small inputs by comparing adjacent rows once the
    rows are grouped (numpy's stable sort of the codes). The compiled pass from
    :data:`COMPILED_FROM_ROWS` rows, or whatever the rows with ``compiled``."""
    n = values.shape[1]
    if compiled or n >= COMPILED_FROM_ROWS:
        return partitions_in_order(codes, count, values, nulls, nulls_first)
    has_nulls = nulls.shape[1] == n
    undecided = np.ones(max(n - 1, 0), bool)  # pairs of adjacent rows not yet decided
    if len(codes):
        perm = np.argsort(narrow_codes(codes, count), kind="stable")
        values = values[:, perm]
        nulls = nulls[:, perm] if has_nulls else nulls
        grouped = codes[perm]
        undecided = grouped[1:] == grouped[:-1]  # only rows of one partition compare
    for k in range(values.shape[0]):
        before, row = values[k, :-1], values[k, 1:]
        if has_nulls and nulls[k].any():
            null_before, null_row = nulls[k, :-1], nulls[k, 1:]
            valued = ~(null_before | null_row)
            one_null = null_before != null_row
            early = (valued & (row < before)) | (one_null & (null_row == bool(nulls_first[k])))
            late = (valued & (row > before)) | (one_null & (null_row != bool(nulls_first[k])))
        else:
            early, late = row < before, row > before
        if bool((undecided & early).any()):
            return False
        undecided &= ~late
    return True


PARALLEL_FROM_ROWS = 1 << 18  # rows from which the passes run on several threads


def spans(n: int, threads: int, least: int = PARALLEL_FROM_ROWS // 2) -> list[tuple[int, int]]:
    """Up to ``threads`` consecutive row ranges covering ``n`` rows, each of at least
    ``least`` rows (one range where there are too few)."""
    parts = max(1, min(threads, n // max(least, 1)))
    cuts = [n * k // parts for k in range(parts + 1)]
    return list(zip(cuts[:-1], cuts[1:]))


def in_threads(calls: list[Callable[[], T]]) -> list[T]:
    """Run ``calls`` at once, the first on this thread (each a compiled pass without the
    GIL); their results in order, or the first one's exception. The caller compiles (or
    loads) the passes first, on its own thread (an empty span): a compilation cannot be
    interrupted, and on a helper thread it would go on after an interrupt."""
    if len(calls) == 1:
        return [calls[0]()]
    results: list = [None] * len(calls)
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            results[k] = calls[k]()
        except BaseException as exc:  # handed to the caller below
            errors.append(exc)

    threads = [
        threading.Thread(target=run, args=(k,), name="matchsql-grouping")
        for k in range(1, len(calls))
    ]
    for thread in threads:
        thread.start()
    run(0)
    for thread in threads:
        # An interrupt (Ctrl-C) while waiting still waits for the pass (a fraction of a
        # second): nothing of the statement may run on once it has been reported.
        while thread.is_alive():
            try:
                thread.join()
            except BaseException as exc:  # raised below, after the others
                errors.append(exc)
    if errors:
        raise errors[0]
    return results


@dataclass
class CountingSort:
    """The counting sort that groups rows by code, and how to move more columns by it.

    Both passes may run over spans of rows at once: each span counts its codes,
    then writes its rows to places that follow the earlier spans' rows of the same
    code (the same stable permutation). :meth:`scatter` moves a column's values
    the same way: read in input order, written to their grouped places (about 500
    places written in turn, not rows read from all over the column: several times
    faster than a take through the permutation on large inputs).
    """

    codes: np.ndarray
    starts: np.ndarray  # each code's first grouped row (count + 1 entries)
    firsts: np.ndarray  # each code's first row in input order (-1: none)
    grouped: bool  # the rows were grouped already (the permutation is the identity)
    parts: list[tuple[int, int]] = field(default_factory=list)  # the spans of rows
    fills: list[np.ndarray] = field(default_factory=list)  # each span's first places
    _perm: np.ndarray | None = None

    @classmethod
    def of(
        cls, codes: np.ndarray, count: int, threads: int, least: int = PARALLEL_FROM_ROWS // 2
    ) -> CountingSort:
        """The counting pass (the permutation itself is written when first asked for:
        where every column is moved by :meth:`scatter`, it never is)."""
        parts = spans(len(codes), threads, least)
        if len(parts) == 1 and len(codes) < COMPILED_FROM_ROWS:
            perm, starts, grouped = group_order(codes, count)
            if grouped:
                perm = np.arange(len(codes), dtype=np.int64)
            firsts = np.full(count, -1, np.int64)
            present = starts[1:] > starts[:-1]
            firsts[present] = perm[starts[:-1][present]]
            return cls(
                codes,
                starts,
                firsts,
                grouped,
                [(0, len(codes))],
                [starts[:-1]],
                np.empty(0, np.int64) if grouped else perm,
            )
        count_codes(codes, count, 0, 0)  # compiled (or loaded) here: see in_threads
        counted = in_threads([partial(count_codes, codes, count, lo, hi) for lo, hi in parts])
        starts = np.zeros(count + 1, np.int64)
        np.cumsum(sum(counts for counts, _, _ in counted), out=starts[1:])
        fills = []
        fill = starts[:-1]
        firsts = counted[0][2]
        for counts, _, span_firsts in counted:
            fills.append(fill)
            fill = fill + counts
            firsts = np.where(firsts >= 0, firsts, span_firsts)
        grouped = all(grouped for _, grouped, _ in counted) and all(
            codes[lo - 1] <= codes[lo] for lo, _ in parts[1:]
        )
        return cls(
            codes, starts, firsts, grouped, parts, fills, np.empty(0, np.int64) if grouped else None
        )

    @property
    def perm(self) -> np.ndarray:
        """The stable permutation that groups the rows (empty where they were grouped)."""
        if self._perm is None:
            perm = np.empty(len(self.codes), np.int64)
            scatter_rows(self.codes, 0, 0, np.zeros(0, np.int64), perm)  # see in_threads

            def scatter(lo: int, hi: int, fill: np.ndarray) -> None:
                scatter_rows(self.codes, lo, hi, fill.copy(), perm)

            in_threads(
                [partial(scatter, lo, hi, fill) for (lo, hi), fill in zip(self.parts, self.fills)]
            )
            self._perm = perm
        return self._perm

    def scatter(self, chunks: list[np.ndarray], out: np.ndarray) -> None:
        """Write a column's values (one per row, in input order, given as consecutive
        ``chunks``: those of the export, never joined into one copy) into ``out`` in
        grouped order, over the same spans of rows at once."""
        bounds = np.cumsum([0] + [len(chunk) for chunk in chunks]).tolist()
        if self.grouped:
            for chunk, at in zip(chunks, bounds):
                out[at : at + len(chunk)] = chunk
            return

        def span(lo: int, hi: int, fill: np.ndarray) -> None:
            fill = fill.copy()
            for k in range(bisect.bisect_right(bounds, lo) - 1, len(chunks)):
                if bounds[k] >= hi:
                    break
                scatter_values(
                    self.codes,
                    max(lo, bounds[k]),
                    min(hi, bounds[k + 1]),
                    fill,
                    chunks[k],
                    out,
                    bounds[k],
                )

        if chunks:  # compiled (or loaded) here: see in_threads
            scatter_values(self.codes, 0, 0, self.fills[0].copy(), chunks[0], out, 0)
        in_threads([partial(span, lo, hi, fill) for (lo, hi), fill in zip(self.parts, self.fills)])


def parallel_in_order(
    codes: np.ndarray,
    count: int,
    values: np.ndarray,
    nulls: np.ndarray,
    nulls_first: np.ndarray,
    threads: int,
    least: int = PARALLEL_FROM_ROWS // 2,
    compiled: bool = False,
) -> bool:
    """:func:`each_partition_in_order` over ``threads`` spans of rows at once, then each
    partition's first row in a span against its last row in the spans before."""
    parts = spans(values.shape[1], threads, least)
    if len(parts) == 1:
        return each_partition_in_order(codes, count, values, nulls, nulls_first, compiled)
    none = np.zeros(0, np.int64)
    span_in_order(codes, count, values, nulls, nulls_first, 0, 0)
    pairs_in_order(values, nulls, nulls_first, none, none)
    checked = in_threads(
        [
            partial(span_in_order, codes, count, values, nulls, nulls_first, lo, hi)
            for lo, hi in parts
        ]
    )
    if not all(ok for ok, _, _ in checked):
        return False
    last = checked[0][2]
    for _, first, span_last in checked[1:]:
        joined = (last >= 0) & (first >= 0)
        if not pairs_in_order(values, nulls, nulls_first, last[joined], first[joined]):
            return False
        last = np.where(span_last >= 0, span_last, last)
    return True
