"""Input already in ORDER BY order: checked in one pass and grouped by partition without a sort.

The router needs each partition's rows together and in ORDER BY order.
DuckDB's sort of the whole input gives that at a price (1M trades, one
thread: 59 ms for the sorted export against 18 ms unsorted, where the whole
row-local ``A B+ C+`` took about 75 ms), while data very often arrives in
order already: a table loaded in time order,
a ``_seq`` column, Parquet written in order. For such input a counting sort of
small partition numbers is all the grouping needed, and one pass comparing
each row's ORDER BY keys with the previous row of its partition tells whether
each partition is in order (compiled passes of execution/router/grouping.py, in the
on-disk numba cache after the first query).

The result must be an order DuckDB's sort could have produced:

* partitions come in ascending key order, NULL last (DuckDB's default order
  for the ``ORDER BY <partition keys>`` of the input query);
* rows of a partition are in ORDER BY order with the DuckDB placement of
  NULLs and NaNs (NaN above every number); rows with equal keys keep their
  input order, one of the orders the unstable sort may give.

Only plain types are handled (integers, booleans, dates, times, timestamps,
durations, floats for ORDER BY; the same minus floats for PARTITION BY,
where ``-0.0 = 0.0`` and NaN grouping would need DuckDB's equality), and at
most MAX_PARTITIONS partitions: anything else makes :func:`grouped` return
None and the caller sorts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from matchsql.execution.router.grouping import (
    COMPILED_FROM_ROWS,
    CountingSort,
    in_threads,
    parallel_in_order,
    remap_codes,
    short_string_codes,
    spans,
)
from matchsql.execution.router.partitions import range_positions


@dataclass(frozen=True)
class OrderKey:
    """One ORDER BY item as DuckDB sorts it."""

    column: str
    descending: bool = False
    nulls_first: bool = False


def _integral(type_: pa.DataType) -> bool:
    return (
        (pa.types.is_integer(type_) and type_ != pa.uint64())
        or pa.types.is_boolean(type_)
        or pa.types.is_temporal(type_)
    )


def _partition_type(type_: pa.DataType) -> bool:
    return _integral(type_) or pa.types.is_string(type_) or pa.types.is_large_string(type_)


def partition_codes(table: pa.Table, keys: list[str]) -> tuple[np.ndarray, int] | None:
    """``(codes, count)``: each row's partition as a number in ``[0, count)`` that
    follows DuckDB's ascending NULLS LAST order of the partition keys; None for
    key types handled by the sort only."""
    encoding = _partition_encoding(table, keys)
    return None if encoding is None else encoding[:2]


#: Per partition key column: its distinct values in order (a NULL last) and each row's
#: index into them. The grouped column is a take from those few values.
KeyValues = dict[str, tuple[pa.Array, np.ndarray]]


def _partition_encoding(
    table: pa.Table, keys: list[str], threads: int = 1, compiled: bool = False
) -> tuple[np.ndarray, int, KeyValues] | None:
    """:func:`partition_codes` and the :data:`KeyValues` of the key columns (``compiled``:
    see :func:`_distinct_span`)."""
    n = table.num_rows
    codes: np.ndarray | None = None
    count = 1
    values: KeyValues = {}
    for name in keys:
        column = table.column(name)
        if not _partition_type(column.type):
            return None
        column = column.combine_chunks()
        # Input grouped already (one partition, or stored by key): encode one value per
        # run. Its first rows tell whether looking for runs may pay off.
        probe = min(n, 4096)
        starts = (
            _run_starts(column) if len(_run_starts(column.slice(0, probe))) * 8 <= probe else None
        )
        heads = (
            column.take(pa.array(starts)) if starts is not None and len(starts) * 8 <= n else column
        )
        distinct = _distinct(heads, threads, compiled)
        dictionary, has_null = distinct.dictionary, distinct.has_null
        # Codes in 16 bits where they fit (MAX_PARTITIONS): the grouping's passes read
        # them several times, and on large inputs memory traffic is their cost.
        rank: np.ndarray = np.empty(len(dictionary) + 1, _code_type(len(dictionary) + 1))
        ascending = pc.sort_indices(dictionary)
        rank[np.asarray(ascending, np.int64)] = np.arange(len(dictionary))
        rank[len(dictionary)] = len(dictionary)  # NULL (index -1 or len): after every value
        width = len(dictionary) + (1 if has_null else 0)
        column_codes = distinct.codes(rank)
        if len(heads) == 1 and n != 1:
            column_codes = np.zeros(n, rank.dtype)
        elif len(heads) != n:
            assert starts is not None  # the heads are the runs' first rows
            column_codes = np.repeat(column_codes, np.diff(np.append(starts, n)))
        values[name] = (
            pa.concat_arrays([dictionary.take(ascending), pa.nulls(1, column.type)]),
            column_codes,
        )
        codes = column_codes if codes is None else codes.astype(np.int64) * width + column_codes
        count *= width
        if count > max(4 * n, 1 << 16):
            return None  # too sparse to densify with a count per value
        if len(keys) > 1:  # keep the codes dense: only partitions that occur count
            present = np.bincount(codes, minlength=count) > 0
            dense = np.cumsum(present) - 1
            count = int(present.sum())
            codes = dense.astype(_code_type(count))[codes]
    assert codes is not None
    return codes, count, values


def _code_type(count: int) -> type:
    """The integer type of partition codes below ``count``."""
    return np.uint16 if count <= 1 << 16 else np.int64


@dataclass
class _Distinct:
    """A column's distinct values (in order of first appearance) and each row's index
    into them, as one or more spans of rows encoded apart: a span's own indices, and
    where its values lie in the joined dictionary (None: the same places)."""

    dictionary: pa.Array
    spans: list[tuple[int, int, np.ndarray, np.ndarray | None]]
    has_null: bool

    def codes(self, table: np.ndarray) -> np.ndarray:
        """Each row's ``table[index]`` (a NULL's: ``table[-1]``), over the spans at once."""
        if len(self.spans) == 1:  # one thread: numpy's gather (nothing to compile)
            return table[self.spans[0][2]]
        rows = self.spans[-1][1]
        out = np.empty(rows, table.dtype)
        calls: list[Callable[[], None]] = []
        for lo, _, indices, numbers in self.spans:
            mapped = table if numbers is None else table[np.append(numbers, -1)]
            calls.append(partial(remap_codes, indices, mapped, out, lo))
        remap_codes(self.spans[0][2][:0], table, out, 0)  # compiled here: see in_threads
        in_threads(calls)
        return out


def _distinct(column: pa.Array, threads: int = 1, compiled: bool = False) -> _Distinct:
    """The :class:`_Distinct` of ``column``: with ``threads`` > 1, spans of the rows are
    encoded at once and their dictionaries joined (:func:`_joined`)."""
    parts = spans(len(column), threads)
    if len(parts) == 1:
        return _joined([_distinct_span(column, compiled)])
    buffers = _string_buffers(column.slice(0, 0))
    if buffers is not None:  # compiled (or loaded) here: see in_threads
        short_string_codes(*buffers, MAX_PARTITIONS)
    return _joined(in_threads([partial(_distinct_slice, column, lo, hi) for lo, hi in parts]))


def _distinct_slice(column: pa.Array, lo: int, hi: int) -> tuple[pa.Array, np.ndarray, bool]:
    return _distinct_span(column.slice(lo, hi - lo))


def _distinct_span(column: pa.Array, compiled: bool = False) -> tuple[pa.Array, np.ndarray, bool]:
    """:func:`_distinct` on one thread. Short strings (symbols, codes) in columns of
    :data:`COMPILED_FROM_ROWS` rows or more (or whatever their rows, with ``compiled``)
    are encoded by a compiled pass over their buffers (measured 2.5x faster than
    dictionary_encode on 5M symbols of 50 values); other strings and types, and small
    columns, by Arrow."""
    buffers = _string_buffers(column)
    if buffers is not None and (compiled or len(column) >= COMPILED_FROM_ROWS):
        codes, firsts, has_null, done = short_string_codes(*buffers, MAX_PARTITIONS)
        if done:
            return column.take(pa.array(firsts)), codes, has_null
    encoded = pc.dictionary_encode(column)
    indices = encoded.indices.fill_null(-1) if encoded.null_count else encoded.indices
    return encoded.dictionary, np.asarray(indices), bool(encoded.null_count)


def _joined(encoded: list[tuple[pa.Array, np.ndarray, bool]]) -> _Distinct:
    """The :class:`_Distinct` of consecutive spans from each span's own ``(dictionary,
    indices, has_null)``: values new in a span are numbered after those of the spans
    before it."""
    dictionary, indices, has_null = encoded[0]
    parts: list[tuple[int, int, np.ndarray, np.ndarray | None]] = [
        (0, len(indices), _read_only(np.asarray(indices, np.int32)), None)
    ]
    for values, span_indices, span_null in encoded[1:]:
        found = pc.index_in(values, value_set=dictionary)
        new = found.is_null()
        fresh = values.filter(new)
        numbers = np.asarray(found.fill_null(-1), np.int64)
        numbers[np.asarray(new)] = len(dictionary) + np.arange(len(fresh))
        if len(fresh):
            dictionary = pa.concat_arrays([dictionary, fresh])
        start = parts[-1][1]
        parts.append(
            (
                start,
                start + len(span_indices),
                _read_only(np.asarray(span_indices, np.int32)),
                numbers,
            )
        )
        has_null = has_null or span_null
    return _Distinct(dictionary, parts, has_null)


def _string_buffers(column: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """A string column as the compiled passes of execution/router/grouping.py read it: its
    offsets (from its first row), bytes, validity bitmap (empty: no NULL) and the
    bit of its first row; None for other types."""
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return None
    validity, offsets, data = column.buffers()
    wide = np.int64 if pa.types.is_large_string(column.type) else np.int32
    nothing = _read_only(np.zeros(0, np.uint8))
    return (
        np.frombuffer(offsets, wide)[column.offset : column.offset + len(column) + 1],
        np.frombuffer(data, np.uint8) if data is not None else nothing,
        np.frombuffer(validity, np.uint8)
        if validity is not None and column.null_count
        else nothing,
        column.offset,
    )


def _read_only(array: np.ndarray) -> np.ndarray:
    """``array`` marked read-only, as arrays over Arrow buffers are: numba compiles one
    variant of a kernel per writability (0.4 s each on an empty cache), so the compiled
    passes always get read-only arrays."""
    array.flags.writeable = False
    return array


def _run_starts(column: pa.Array) -> np.ndarray:
    """The rows where a run of equal values (NULLs equal to each other) starts."""
    n = len(column)
    left, right = column.slice(0, n - 1), column.slice(1)
    same = pc.equal(left, right)
    if column.null_count:
        same = pc.or_(pc.fill_null(same, False), pc.and_(pc.is_null(left), pc.is_null(right)))
    change = np.flatnonzero(~np.asarray(same, dtype=bool)) + 1
    return np.concatenate(([0], change)).astype(np.int64)


def order_values(
    table: pa.Table, keys: list[OrderKey]
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(values, nulls, nulls_first)``: the ORDER BY keys as ``int64[keys, rows]`` whose
    ascending order is DuckDB's order of the key (DESC folded in), their NULL flags
    (``bool[keys, rows]``, or ``bool[keys, 0]`` when no key has a NULL) and placement;
    None for key types handled by the sort only. One ascending integral key without
    NULLs in one chunk is a view of its column: no copy."""
    n = table.num_rows
    columns: list[np.ndarray] = []
    null_flags: list[np.ndarray | None] = []
    first = np.zeros(len(keys), bool)
    for k, key in enumerate(keys):
        column = table.column(key.column)
        column = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
        type_ = column.type
        null_flags.append(np.asarray(column.is_null()) if column.null_count else None)
        if _integral(type_):
            if pa.types.is_boolean(type_):
                column = column.cast(pa.int8())
            elif pa.types.is_temporal(type_):
                column = column.view(pa.int64() if type_.bit_width == 64 else pa.int32())
            if column.null_count:
                column = column.fill_null(0)
            values = column.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        elif pa.types.is_floating(type_):
            column = column.cast(pa.float64())
            if column.null_count:
                column = column.fill_null(0.0)
            values = _float_order(column.to_numpy(zero_copy_only=False))
        else:
            return None
        columns.append(~values if key.descending else values)
        first[k] = key.nulls_first
    if len(columns) == 1:
        values = columns[0].reshape(1, n)
    else:
        values = np.stack(columns) if columns else np.zeros((0, n), np.int64)
    values = _read_only(values)  # a column's own buffer where it could be, else a copy
    if any(flags is not None for flags in null_flags):
        nulls = np.zeros((len(keys), n), bool)
        for k, flags in enumerate(null_flags):
            if flags is not None:
                nulls[k] = flags
    else:
        nulls = np.zeros((len(keys), 0), bool)
    return values, nulls, first


def _ascending_throughout(values: np.ndarray, nulls: np.ndarray, nulls_first: np.ndarray) -> bool:
    """Whether the rows are in the order of one ORDER BY key without NULLs as a whole
    (``order_values``'s arrays): input stored in time order, the usual case. Telling it
    takes no partition codes, the larger part of checking the first rows of an input
    (16,384 rows of 500 symbols: 0.6-1.0 ms in a statement, while DuckDB's export waited)."""
    if values.shape[0] != 1 or nulls.shape[1]:
        return False
    column = values[0]
    return bool(np.all(column[1:] >= column[:-1]))


def _float_order(x: np.ndarray) -> np.ndarray:
    """int64 codes of ``x`` in DuckDB's order of doubles: ``-0.0 = 0.0``, NaN above +inf."""
    x = np.where(np.isnan(x), np.nan, x + 0.0)  # one NaN; -0.0 + 0.0 is 0.0
    bits = x.view(np.int64)
    return np.where(bits < 0, bits ^ np.int64(0x7FFF_FFFF_FFFF_FFFF), bits)


MAX_PARTITIONS = 1 << 16  # more: DuckDB sorts
_ONE_PARTITION = np.zeros(0, np.uint16)  # the codes of rows all in one partition


def in_order(
    table: pa.Table, partition_by: list[str], order: list[OrderKey], compiled: bool = False
) -> bool | None:
    """Whether every partition of ``table`` is in ``order`` already; None when the key
    types are left to the sort. ``compiled``: the compiled passes whatever the rows (else
    from :data:`COMPILED_FROM_ROWS` rows), as for a first batch of a longer input, whose
    grouping loads them anyway."""
    result = _ordered(table, partition_by, order, grouping=False, compiled=compiled)
    return None if result is None else result is not False


def grouped(table: pa.Table, partition_by: list[str], order: list[OrderKey]) -> pa.Table | None:
    """``table``'s rows grouped by partition in DuckDB's order, each partition in ORDER BY
    order: the rows of the sorted input query; None when the input is not in order
    (or has key types left to the sort), and only a sort can give them."""
    result = _ordered(table, partition_by, order)
    if result is None or result is False:
        return None
    if result is True:
        return table
    rows = GroupedRows.of(table, result)
    return pa.Table.from_batches(list(rows.batches(max(rows.num_rows, 1))), table.schema)


def grouped_rows(
    table: pa.Table,
    partition_by: list[str],
    order: list[OrderKey],
    unread: frozenset[str] = frozenset(),
    threads: int = 1,
) -> GroupedRows | pa.Table | None:
    """:func:`grouped`, not taken yet: the :class:`GroupedRows` whose batches the consumer
    takes one at a time (matching batch *k*, or sending it to a worker, before batch
    *k + 1* is taken: no second copy of the whole input is ever held), or ``table``
    itself where its rows are in order as they are; None when only a sort can give the
    rows. The whole order is checked first. Columns named in ``unread`` (read by no one
    once the order is checked) come as NULLs where the rows had to be grouped, rather
    than taken through the permutation. The compiled passes run on up to ``threads``
    threads."""
    result = _ordered(table, partition_by, order, threads=threads)
    if result is None or result is False:
        return None
    if result is True:
        return table
    return GroupedRows.of(table, result, unread)


def grouped_batches(
    table: pa.Table,
    partition_by: list[str],
    order: list[OrderKey],
    batch_size: int,
    unread: frozenset[str] = frozenset(),
) -> Iterator[pa.RecordBatch] | None:
    """:func:`grouped_rows` in batches of at most ``batch_size`` rows."""
    rows = grouped_rows(table, partition_by, order, unread)
    if rows is None:
        return None
    if isinstance(rows, pa.Table):
        return iter(rows.to_batches(max_chunksize=batch_size))
    return rows.batches(batch_size)


@dataclass
class GroupedRows:
    """Rows in input order and the permutation that groups them by partition: the grouped
    input before any row is taken through it.

    The grouped rows are taken a batch at a time, here (:meth:`batches`) or in a
    worker process that got the columns through shared memory (:meth:`gather`).
    A column may also be given already in grouped order (:attr:`placed`, moved
    there by the counting sort: :meth:`place`); its rows are then sliced, not taken.
    """

    schema: pa.Schema
    #: Per field: the column in input order; None for a partition key (see
    #: :attr:`keys`), for a column no one reads (NULLs) and for a placed one. Combined
    #: into one chunk when first taken from (:meth:`column`), once the caller has let
    #: go of the export's table: the chunks and their copy are then never held together.
    columns: list[pa.Array | pa.ChunkedArray | None]
    #: Per partition key field (by index): its value in each partition, in grouped order.
    #: The key column is decoded from these runs (5M strings of 50 partitions: a quarter
    #: of the time of their permutation, half that of a take of the values).
    keys: dict[int, pa.Array]
    given_perm: np.ndarray | None  # grouped row i is input row perm[i] (None: see sort)
    ends: np.ndarray  # where each partition ends in the grouped rows
    rows: int
    sort: CountingSort | None = None  # how the rows were grouped (where they were)
    #: Per field: its values in grouped order (fixed width, no NULLs), by :meth:`place`.
    placed: dict[int, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of(
        cls, table: pa.Table, grouping: _Grouping, unread: frozenset[str] = frozenset()
    ) -> GroupedRows:
        schema = table.schema
        counts = np.diff(grouping.sort.starts)
        present = counts > 0
        ends = np.cumsum(counts[present])
        firsts = grouping.sort.firsts[present]  # each partition's first row
        columns: list[pa.Array | pa.ChunkedArray | None] = []
        keys: dict[int, pa.Array] = {}
        for i, field_ in enumerate(schema):
            unique = schema.get_field_index(field_.name) == i
            key = grouping.keys.get(field_.name) if unique else None
            if key is not None:
                values, codes = key
                keys[i] = values.take(pa.array(codes[firsts]))
                columns.append(None)
            elif unique and field_.name in unread and field_.nullable:
                columns.append(None)
            else:
                column = table.column(i)
                columns.append(column.chunk(0) if column.num_chunks == 1 else column)
        return cls(schema, columns, keys, None, ends, len(grouping.sort.codes), grouping.sort)

    @property
    def num_rows(self) -> int:
        return self.rows

    @property
    def perm(self) -> np.ndarray:
        """The permutation that groups the rows (written when first needed: a column
        moved into grouped order by :meth:`place` needs none)."""
        if self.given_perm is None:
            assert self.sort is not None
            self.given_perm = self.sort.perm
        return self.given_perm

    def column(self, i: int) -> pa.Array | None:
        """Field ``i``'s column in input order, in one chunk (a take over one chunk
        measured twice as fast as over the export's chunks)."""
        column = self.columns[i]
        if isinstance(column, pa.ChunkedArray):
            column = self.columns[i] = column.combine_chunks()
        return column

    def placeable(self, i: int) -> np.dtype | None:
        """The integer type of field ``i``'s values where :meth:`place` can move them
        (fixed width, no NULLs, the counting sort known); else None."""
        column = self.columns[i]
        type_ = self.schema.field(i).type
        if (
            column is None
            or self.sort is None
            or column.null_count
            or not (
                pa.types.is_integer(type_)
                or pa.types.is_floating(type_)
                or pa.types.is_temporal(type_)
            )
            or type_.bit_width not in _WIDTHS
        ):
            return None
        return _WIDTHS[type_.bit_width]

    def place(self, i: int, out: np.ndarray) -> None:
        """Move field ``i``'s values into ``out`` (of :meth:`placeable`'s type) in grouped
        order, and take its rows from there from now on."""
        assert self.sort is not None
        column = self.columns[i]
        assert column is not None  # placeable
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        self.sort.scatter(
            [
                np.frombuffer(chunk.buffers()[1], out.dtype)[
                    chunk.offset : chunk.offset + len(chunk)
                ]
                for chunk in chunks
            ],
            out,
        )
        self.placed[i] = out
        self.columns[i] = None

    def place_all(self) -> None:
        """:meth:`place` every column that can be, here (a column at a time: its input
        order copy goes as its grouped one is made)."""
        for i in range(len(self.columns)):
            dtype = self.placeable(i)
            if dtype is not None:
                self.place(i, np.empty(self.rows, dtype))

    def batches(self, batch_size: int) -> Iterator[pa.RecordBatch]:
        """The grouped rows in batches of at most ``batch_size`` rows, cut where partitions
        end (:func:`batch_cuts`), each taken only when asked for."""
        for start, stop in batch_cuts(self.ends, batch_size):
            yield self.gather(np.array([start]), np.array([stop]), None, copy=False)

    def gather(
        self, starts: np.ndarray, stops: np.ndarray, parts: np.ndarray | None, copy: bool = True
    ) -> pa.RecordBatch:
        """Grouped rows ``starts[j]:stops[j]`` one range after the other, range ``j`` lying
        in partition ``parts[j]`` (None: find the partitions from :attr:`ends`): one
        batch of the pieces of partitions a worker got. Placed columns are copied out
        unless ``copy`` is False (then one range is a view: not for shared memory,
        which the next query writes over)."""
        lengths = stops - starts
        total = int(lengths.sum())
        taken: pa.Array | None = None
        if any(column is not None for column in self.columns):
            taken = pa.array(self.perm[range_positions(starts, lengths)])
        arrays = []
        for i, field_ in enumerate(self.schema):
            if i in self.keys:
                arrays.append(self._key_column(i, starts, stops, parts))
            elif i in self.placed:
                values = (
                    self.placed[i][starts[0] : stops[0]]
                    if not copy and len(starts) == 1
                    else np.concatenate([self.placed[i][a:b] for a, b in zip(starts, stops)])
                )
                arrays.append(
                    pa.Array.from_buffers(field_.type, total, [None, pa.py_buffer(values)])
                )
            else:
                column = self.column(i)  # None: a column of NULLs
                arrays.append(
                    pa.nulls(total, field_.type) if column is None else column.take(taken)
                )
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _key_column(
        self, i: int, starts: np.ndarray, stops: np.ndarray, parts: np.ndarray | None
    ) -> pa.Array:
        """Key field ``i`` over ranges ``starts[j]:stops[j]``: each range in partition
        ``parts[j]``, or (None) crossing the partitions that :attr:`ends` finds."""
        lengths = stops - starts
        kept = lengths > 0
        if parts is not None:
            return pc.run_end_decode(
                pa.RunEndEncodedArray.from_arrays(
                    pa.array(np.cumsum(lengths[kept])), self.keys[i].take(pa.array(parts[kept]))
                )
            )
        starts, stops, lengths = starts[kept], stops[kept], lengths[kept]
        first = np.searchsorted(self.ends, starts, "right")  # the partition of a range's first row
        crossed = np.searchsorted(self.ends, stops - 1, "right") - first + 1
        of_range = np.repeat(np.arange(len(starts)), crossed)
        partition = (
            first[of_range]
            + np.arange(len(of_range))
            - np.repeat(np.cumsum(crossed) - crossed, crossed)
        )
        # Where each crossed partition ends in the concatenation of the ranges.
        run_ends = (
            np.minimum(self.ends[partition], stops[of_range])
            - starts[of_range]
            + (np.cumsum(lengths) - lengths)[of_range]
        )
        return pc.run_end_decode(
            pa.RunEndEncodedArray.from_arrays(
                pa.array(run_ends), self.keys[i].take(pa.array(partition))
            )
        )


#: Integer types of the widths whose values :meth:`GroupedRows.place` moves.
_WIDTHS: dict[int, np.dtype] = {
    64: np.dtype(np.int64),
    32: np.dtype(np.int32),
    16: np.dtype(np.int16),
    8: np.dtype(np.int8),
}


def batch_cuts(ends: np.ndarray, batch_size: int) -> Iterator[tuple[int, int]]:
    """Row ranges of at most ``batch_size`` rows over partitions ending at ``ends``, cut
    where a partition ends: the router then matches all partitions of a batch together
    (execution/router/partitions.py) where a partition cut in two would need a run of its own.
    Batches stay at least half ``batch_size`` long: a longer partition is cut."""
    total = int(ends[-1]) if len(ends) else 0
    start = 0
    while start < total:
        stop = start + batch_size
        if stop >= total:
            stop = total
        else:
            i = int(np.searchsorted(ends, stop, "right")) - 1
            if i >= 0 and ends[i] - start >= max(batch_size // 2, 1):
                stop = int(ends[i])
        yield start, stop
        start = stop


@dataclass
class _Grouping:
    """The rows of a table in order within partitions, but not grouped by partition."""

    keys: KeyValues  # of the partition key columns
    sort: CountingSort  # that groups them (rows per partition code: its starts)


def _ordered(
    table: pa.Table,
    partition_by: list[str],
    order: list[OrderKey],
    grouping: bool = True,
    threads: int = 1,
    compiled: bool = False,
) -> bool | _Grouping | None:
    """None: key types left to the sort; False: out of order; True: in order as it is
    (or, without ``grouping``, each partition in order: the rows are not grouped);
    else the :class:`_Grouping` of the partitions (each in order)."""
    n = table.num_rows
    if n < 2:
        return True
    keys = order_values(table, order) if order else None
    if order and keys is None:
        return None
    # (No more rows than partitions allowed: the answer needs no count of partitions.)
    if (
        not grouping
        and keys is not None
        and n <= MAX_PARTITIONS
        and all(_partition_type(table.column(name).type) for name in partition_by)
        and _ascending_throughout(*keys)
    ):
        return True  # in order as a whole, so in order within every partition
    codes = _ONE_PARTITION
    count = 1
    key_values: KeyValues = {}
    if partition_by:
        parts = _partition_encoding(table, partition_by, threads, compiled)
        if parts is None or parts[1] > MAX_PARTITIONS:
            return None
        codes, count, key_values = parts
    if keys is not None and not parallel_in_order(
        codes if count > 1 else _ONE_PARTITION, count, *keys, threads, compiled=compiled
    ):
        return False
    if count == 1 or not grouping:
        return True
    sort = CountingSort.of(codes, count, threads)
    return True if sort.grouped else _Grouping(key_values, sort)
