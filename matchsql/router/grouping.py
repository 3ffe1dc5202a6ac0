"""Compiled passes of the grouping of ordered input (router/presorted.py), each O(n).

Numpy's stable argsort of small partition codes (a radix sort) and the
vectorised check of adjacent ORDER BY keys cost several passes over the rows
each, and the check needed every key column permuted first. These do each job
in one pass over the rows in input order, without holding the GIL
(``nogil``) and compiled once into the on-disk numba cache:

* :func:`grouping_order`: a counting sort of the partition codes, the stable
  permutation that groups the rows (equal codes keep their input order) and
  where each partition starts;
* :func:`partitions_in_order`: whether each partition's rows, in input order,
  are in ORDER BY order, comparing every row with the previous row of its own
  partition (kept per partition code): no permutation needed.

Inputs under :data:`COMPILED_FROM_ROWS` rows take numpy's vectorised passes
instead (:func:`group_order`, :func:`each_partition_in_order`): on them the
compiled passes gain a millisecond or two, while compiling them costs a first
query about a second on an empty cache; both give the same answers (the tests
hold them to each other).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from matchsql.compile_cache import use_keyed_cache

use_keyed_cache()  # before the kernels below are defined: see compile_cache


@njit(cache=True, nogil=True)
def grouping_order(codes: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(perm, starts, grouped)``: the stable permutation that sorts ``codes`` (values in
    ``[0, count)``), each code's first position in it (``count + 1`` entries) and whether
    the rows were grouped already (then ``perm`` is empty: the identity)."""
    n = len(codes)
    starts = np.zeros(count + 1, np.int64)
    grouped = True
    for i in range(n):
        starts[codes[i] + 1] += 1
        if i and codes[i] < codes[i - 1]:
            grouped = False
    for c in range(count):
        starts[c + 1] += starts[c]
    if grouped:
        return np.empty(0, np.int64), starts, True
    perm = np.empty(n, np.int64)
    fill = starts[:-1].copy()
    for i in range(n):
        c = codes[i]
        perm[fill[c]] = i
        fill[c] += 1
    return perm, starts, False


@njit(cache=True, nogil=True)
def partitions_in_order(codes: np.ndarray, count: int, values: np.ndarray, nulls: np.ndarray,
                        nulls_first: np.ndarray) -> bool:
    """Whether the rows of each partition (``codes``, ``[0, count)``), in input order, are
    in the order of the keys ``values[k, row]`` (ascending; ``nulls[k, row]`` NULL, where
    ``nulls`` has rows, placed first or last by ``nulls_first[k]``); ties are in order.
    Empty ``codes``: one partition (no array of zeros to write and read)."""
    n = values.shape[1]
    keys = values.shape[0]
    has_nulls = nulls.shape[1] == n
    has_codes = len(codes) > 0
    previous = np.full(count, -1, np.int64)
    for i in range(n):
        c = codes[i] if has_codes else 0
        j = previous[c]
        previous[c] = i
        if j < 0:
            continue
        for k in range(keys):
            if has_nulls and (nulls[k, i] or nulls[k, j]):
                if nulls[k, i] and nulls[k, j]:
                    continue  # equal: the next key decides
                if nulls[k, i] == nulls_first[k]:
                    return False  # a NULL before a value, or a value before a NULL
                break
            if values[k, i] < values[k, j]:
                return False
            if values[k, i] > values[k, j]:
                break
    return True


SHORT = 7  # bytes of the longest string :func:`short_string_codes` encodes
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, nogil=True)
def short_string_codes(offsets: np.ndarray, data: np.ndarray, validity: np.ndarray,
                       bit_offset: int, limit: int) -> tuple[np.ndarray, np.ndarray, bool, bool]:
    """``(codes, firsts, has_null, done)`` of a string column given as its Arrow buffers
    (``offsets`` already sliced to the column's rows, ``validity`` its bitmap or empty,
    whose first row is bit ``bit_offset``): each row's distinct value numbered in order
    of first appearance (a NULL: -1) and the first row of each distinct value.

    Each string of at most :data:`SHORT` bytes is one 64-bit key (its bytes and its
    length + 1 in the top byte, so distinct strings have distinct keys: no collision
    to check), found in an open-addressing table. ``done`` is False where a longer
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
            if 4 * count > 1 << bits:  # at most a quarter full: short probes
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


def group_order(codes: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """:func:`grouping_order`, by numpy's stable sort of the codes on small inputs."""
    if len(codes) >= COMPILED_FROM_ROWS:
        return grouping_order(codes, count)
    starts = np.zeros(count + 1, np.int64)
    np.cumsum(np.bincount(codes, minlength=count), out=starts[1:])
    if len(codes) < 2 or bool(np.all(codes[1:] >= codes[:-1])):
        return np.empty(0, np.int64), starts, True
    return np.argsort(_narrow(codes, count), kind="stable").astype(np.int64), starts, False


def _narrow(codes: np.ndarray, count: int) -> np.ndarray:
    """``codes`` (values below ``count``) in 8 or 16 bits where they fit: numpy's stable
    argsort sorts those by radix, several times faster than 64-bit keys."""
    if count > 1 << 16:
        return codes
    return codes.astype(np.uint8 if count <= 1 << 8 else np.uint16)


def each_partition_in_order(codes: np.ndarray, count: int, values: np.ndarray,
                            nulls: np.ndarray, nulls_first: np.ndarray) -> bool:
    """:func:`partitions_in_order`, on small inputs by comparing adjacent rows once the
    rows are grouped (numpy's stable sort of the codes)."""
    n = values.shape[1]
    if n >= COMPILED_FROM_ROWS:
        return partitions_in_order(codes, count, values, nulls, nulls_first)
    has_nulls = nulls.shape[1] == n
    undecided = np.ones(max(n - 1, 0), bool)  # pairs of adjacent rows not yet decided
    if len(codes):
        perm = np.argsort(_narrow(codes, count), kind="stable")
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
