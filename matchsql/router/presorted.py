"""Input already in ORDER BY order: checked in one pass and grouped by partition without a sort.

The router needs each partition's rows together and in ORDER BY order.
DuckDB's sort of the whole input gives that, but it is most of the time of a
row-local query (measured 60 ms of 75 ms for 1M rows, 1 partition), while
data very often arrives in order already: a table loaded in time order,
a ``_seq`` column, Parquet written in order. For such input a stable counting
sort by partition (one pass) is all the grouping needed, and one pass over
the ORDER BY keys tells whether each partition is in order.

The result must be an order DuckDB's sort could have produced:

* partitions come in ascending key order, NULL last (DuckDB's default order
  for the ``ORDER BY <partition keys>`` of the input query);
* rows of a partition are in ORDER BY order with the DuckDB placement of
  NULLs and NaNs (NaN above every number); rows with equal keys keep their
  input order, one of the orders the unstable sort may give.

Only plain types are handled (integers, booleans, dates, times, timestamps,
durations, floats for ORDER BY; the same minus floats for PARTITION BY,
where ``-0.0 = 0.0`` and NaN grouping would need DuckDB's equality): any
other key makes :func:`grouped` return None and the caller sorts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit


@dataclass(frozen=True)
class OrderKey:
    """One ORDER BY item as DuckDB sorts it."""

    column: str
    descending: bool = False
    nulls_first: bool = False


def _integral(type_: pa.DataType) -> bool:
    return (pa.types.is_integer(type_) and type_ != pa.uint64()) or pa.types.is_boolean(type_) \
        or pa.types.is_temporal(type_)


def _partition_type(type_: pa.DataType) -> bool:
    return _integral(type_) or pa.types.is_string(type_) or pa.types.is_large_string(type_)


def partition_codes(table: pa.Table, keys: list[str]) -> tuple[np.ndarray, int] | None:
    """``(codes, count)``: each row's partition as a number in ``[0, count)`` that
    follows DuckDB's ascending NULLS LAST order of the partition keys; None for
    key types handled by the sort only."""
    n = table.num_rows
    codes: np.ndarray | None = None
    count = 1
    for name in keys:
        column = table.column(name)
        if not _partition_type(column.type):
            return None
        column = column.combine_chunks()
        # Input grouped already (one partition, or stored by key): encode one value per
        # run. Its first rows tell whether looking for runs may pay off.
        probe = min(n, 4096)
        starts = _run_starts(column) if len(_run_starts(column.slice(0, probe))) * 8 <= probe \
            else None
        heads = column.take(pa.array(starts)) if starts is not None and len(starts) * 8 <= n \
            else column
        encoded = pc.dictionary_encode(heads)
        dictionary = encoded.dictionary
        rank = np.empty(len(dictionary) + 1, np.int64)
        rank[np.asarray(pc.sort_indices(dictionary), np.int64)] = np.arange(len(dictionary))
        rank[len(dictionary)] = len(dictionary)  # NULL: after every value
        indices = encoded.indices.fill_null(len(dictionary)) if encoded.null_count \
            else encoded.indices
        width = len(dictionary) + (1 if encoded.null_count else 0)
        column_codes = rank[np.asarray(indices)]
        if len(heads) != n:
            column_codes = np.zeros(n, np.int64) if len(heads) == 1 else \
                np.repeat(column_codes, np.diff(np.append(starts, n)))
        codes = column_codes if codes is None else codes * width + column_codes
        count *= width
        if count > max(4 * n, 1 << 16):
            return None  # too sparse to densify with a count per value
        if len(keys) > 1:  # keep the codes dense: only partitions that occur count
            present = np.bincount(codes, minlength=count) > 0
            dense = np.cumsum(present) - 1
            codes = dense[codes]
            count = int(present.sum())
    assert codes is not None
    return codes, count


def _run_starts(column: pa.Array) -> np.ndarray:
    """The rows where a run of equal values (NULLs equal to each other) starts."""
    n = len(column)
    left, right = column.slice(0, n - 1), column.slice(1)
    same = pc.equal(left, right)
    if column.null_count:
        same = pc.or_(pc.fill_null(same, False), pc.and_(pc.is_null(left), pc.is_null(right)))
    change = np.flatnonzero(~np.asarray(same, dtype=bool)) + 1
    return np.concatenate(([0], change)).astype(np.int64)


def order_values(table: pa.Table, keys: list[OrderKey]) \
        -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(values, nulls, nulls_first)``: the ORDER BY keys as ``int64[keys, rows]`` whose
    ascending order is DuckDB's order of the key (DESC folded in), their NULL flags
    and placement; None for key types handled by the sort only."""
    n = table.num_rows
    values = np.zeros((len(keys), n), np.int64)
    nulls = np.zeros((len(keys), n), np.uint8)
    first = np.zeros(len(keys), np.uint8)
    for k, key in enumerate(keys):
        column = table.column(key.column).combine_chunks()
        type_ = column.type
        if column.null_count:
            nulls[k] = np.asarray(column.is_null())
        if _integral(type_):
            if pa.types.is_boolean(type_):
                column = column.cast(pa.int8())
            elif pa.types.is_temporal(type_):
                column = column.view(pa.int64() if type_.bit_width == 64 else pa.int32())
            if column.null_count:
                column = column.fill_null(0)
            values[k] = column.to_numpy(zero_copy_only=False)
        elif pa.types.is_floating(type_):
            column = column.cast(pa.float64())
            if column.null_count:
                column = column.fill_null(0.0)
            floats = column.to_numpy(zero_copy_only=False)
            values[k] = _float_order(floats)
        else:
            return None
        if key.descending:
            np.invert(values[k], out=values[k])
        first[k] = key.nulls_first
    return values, nulls, first


def _float_order(x: np.ndarray) -> np.ndarray:
    """int64 codes of ``x`` in DuckDB's order of doubles: ``-0.0 = 0.0``, NaN above +inf."""
    x = np.where(np.isnan(x), np.nan, x + 0.0)  # one NaN; -0.0 + 0.0 is 0.0
    bits = x.view(np.int64)
    return np.where(bits < 0, bits ^ np.int64(0x7FFF_FFFF_FFFF_FFFF), bits)


@njit(cache=True, nogil=True)
def _in_order(codes, count, values, nulls, nulls_first):  # pragma: no cover - compiled
    """Whether each partition's rows (in input order) are in ORDER BY order."""
    last = np.full(count, -1, np.int64)
    keys = values.shape[0]
    for i in range(len(codes)):
        p = codes[i]
        j = last[p]
        last[p] = i
        if j < 0:
            continue
        for k in range(keys):
            nj = nulls[k, j]
            ni = nulls[k, i]
            if nj and ni:
                continue
            if nj != ni:  # one NULL: in order when it is on its side
                if ni == nulls_first[k]:
                    return False
                break
            if values[k, i] > values[k, j]:
                break
            if values[k, i] < values[k, j]:
                return False
    return True


@njit(cache=True, nogil=True)
def _grouping(codes, count):  # pragma: no cover - compiled
    """The stable counting sort of the rows by ``codes``, and whether it moves any row."""
    n = len(codes)
    start = np.zeros(count + 1, np.int64)
    moved = False
    for i in range(n):
        start[codes[i] + 1] += 1
        if i and codes[i] < codes[i - 1]:
            moved = True
    for p in range(count):
        start[p + 1] += start[p]
    perm = np.empty(n, np.int64)
    for i in range(n):
        p = codes[i]
        perm[start[p]] = i
        start[p] += 1
    return perm, moved


def in_order(table: pa.Table, partition_by: list[str], order: list[OrderKey]) -> bool | None:
    """Whether every partition of ``table`` is in ``order`` already; None when the key
    types are left to the sort."""
    if not order or table.num_rows < 2:
        return True
    parts = partition_codes(table, partition_by) if partition_by else \
        (np.zeros(table.num_rows, np.int64), 1)
    keys = order_values(table, order)
    if parts is None or keys is None:
        return None
    return bool(_in_order(parts[0], parts[1], *keys))


def grouped(table: pa.Table, partition_by: list[str], order: list[OrderKey]) -> pa.Table | None:
    """``table``'s rows grouped by partition in DuckDB's order, each partition in ORDER BY
    order: the rows of the sorted input query; None when the input is not in order
    (or has key types left to the sort), and only a sort can give them."""
    n = table.num_rows
    if n < 2:
        return table
    if partition_by:
        parts = partition_codes(table, partition_by)
        if parts is None:
            return None
    else:
        parts = np.zeros(n, np.int64), 1
    if order:
        keys = order_values(table, order)
        if keys is None or not _in_order(parts[0], parts[1], *keys):
            return None
    if parts[1] == 1:
        return table
    perm, moved = _grouping(*parts)
    # A take over one chunk per column measured twice as fast as over the export's chunks.
    return table.combine_chunks().take(perm) if moved else table
