"""The input of a MATCH_RECOGNIZE in partition and ORDER BY order, without DuckDB's sort
where the input is in that order already (see matchsql/execution/router/presorted.py).

The input query is first run without its ORDER BY (DuckDB scans and exports
in parallel, no sort); its rows are checked and grouped by partition here. When
a partition is out of ORDER BY order the sorted query runs instead. Both give
the rows of the sorted query, so the matchers see no difference. The one rule
serves both routers: the matchers of this process and the worker processes'
router (``SET workers``), which get the same batches.

The check is done on all the rows before the first batch goes out; the
batches are then taken one at a time as the consumer asks for them, so it
matches (or ships to workers) batch *k* before batch *k + 1* is taken.

What the unsorted attempt costs when it fails is bounded: the first rows are
checked on their own once a second batch comes (most unsorted inputs show it at
once; an input of one batch is checked whole right after), and at most
:data:`PRESORTED_BYTES` of input are held before giving up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from matchsql.engine.reference import held_columns
from matchsql.execution.router.grouping import COMPILED_FROM_ROWS
from matchsql.execution.router.presorted import GroupedRows, OrderKey, grouped_rows, in_order
from matchsql.plan.spec import MatchSpec

PRESORTED_BYTES = 1 << 30  # input held to check its order before falling back to the sort
#: Rows of the first batch checked on their own (the whole input is checked later): an
#: unsorted input shows it in its first rows as a rule. DuckDB's export waits while the
#: reader checks (it is pulled): on two threads the check of a whole 65,536-row batch took
#: 2 ms of the export's 10 (1M rows of 500 symbols), its first 16,384 rows a quarter.
FIRST_CHECK_ROWS = 1 << 14
ENABLED = True  # False: always DuckDB's sort (the benchmarks' "before")
PLACE = True  # False: grouped batches taken through the permutation (bench.grouped_input)

# The DuckDB settings under which the input query's ORDER BY means what OrderKey says.
_DEFAULTS = ("NULLS_LAST", "ASCENDING")


@dataclass
class InputQueries:
    """The input query of one MATCH_RECOGNIZE, sorted and in the input's own order."""

    sorted_sql: str
    unsorted_sql: str | None  # None: the input may be read once only, so DuckDB sorts it
    partition_by: list[str]
    order: list[OrderKey]
    # How the last run got its rows: True in their own order (no sort), False from
    # DuckDB's sort, None not yet (or nothing to sort).
    presorted: bool | None = None
    # Columns no matcher reads (see unread_columns): grouped rows carry them as NULLs.
    unread: frozenset[str] = frozenset()

    @property
    def sorts(self) -> bool:
        return bool(self.partition_by or self.order)


def unread_columns(spec: MatchSpec) -> frozenset[str]:
    """The input columns of ``spec`` that only order the rows: ORDER BY columns that
    ONE ROW PER MATCH neither outputs nor reads in DEFINE, MEASURES or WITHIN (the
    rule of :func:`~matchsql.engine.reference.held_columns`). Once the order is checked
    the grouping need not take them through its permutation (5M rows of 50
    partitions: one take of 8-byte keys, a sixth of the grouping)."""
    held = held_columns(spec)
    if held is None:
        return frozenset()
    return frozenset(spec.order_by) - frozenset(held)


def rereadable(value: object) -> bool:
    """Whether DuckDB can scan a Python object registered for the input more than once:
    Arrow tables and batches, and data frames; not readers, scanners or iterators."""
    if isinstance(value, (pa.Table, pa.RecordBatch)):
        return True
    module = type(value).__module__.split(".")[0]
    return module in ("pandas", "polars") and not hasattr(value, "__next__")


def order_keys(node, order_by: list[str]) -> list[OrderKey]:
    """The ORDER BY items of MATCH_RECOGNIZE ``node`` on the resolved columns ``order_by``."""
    order = node.args.get("order")
    items = list(order.expressions) if order is not None else []
    return [
        OrderKey(name, bool(item.args.get("desc")), bool(item.args.get("nulls_first")))
        for name, item in zip(order_by, items)
    ]


def default_ordering(cursor) -> bool:
    """Whether DuckDB orders as by default here: ASC unless DESC, NULLs last both ways
    (settings that change it make the caller keep the sort)."""
    # execute, not sql: no relation is built for it (0.5 -> 0.35 ms of every statement)
    row = cursor.execute(
        "SELECT current_setting('default_null_order'), current_setting('default_order')"
    ).fetchall()[0]
    return tuple(str(v).upper() for v in row) == _DEFAULTS


def may_skip_sort(cursor) -> bool:
    """Whether rows found in ORDER BY order may skip DuckDB's sort here: the rule that
    both the input of this process and the workers' own sorts (scatter mode) follow."""
    return ENABLED and default_ordering(cursor)


def input_batches(
    queries: InputQueries,
    open_input: Callable[[str], Iterable[pa.RecordBatch]],
    batch_size: int,
    cursor,
    threads: int = 1,
) -> Iterator[pa.RecordBatch]:
    """The rows of ``queries.sorted_sql`` in batches of at most ``batch_size`` rows:
    from the unsorted query when its rows are in order, else sorted by DuckDB
    (``cursor``: the input query's, whose settings say what its ORDER BY means)."""
    rows = ordered_rows(queries, open_input, cursor, threads)
    if isinstance(rows, GroupedRows):
        # Moved into grouped order by the counting sort, then sliced: several times
        # faster than batches taken through the permutation on large inputs.
        if PLACE:
            rows.place_all()
        yield from rows.batches(batch_size)
    elif isinstance(rows, pa.Table):
        yield from rows.to_batches(max_chunksize=batch_size)
    else:
        yield from rows


def ordered_rows(
    queries: InputQueries,
    open_input: Callable[[str], Iterable[pa.RecordBatch]],
    cursor,
    threads: int = 1,
) -> GroupedRows | pa.Table | Iterable[pa.RecordBatch]:
    """The rows of ``queries.sorted_sql``: the :class:`GroupedRows` of the unsorted query's
    rows (or those rows themselves, where they are grouped already) when they are in
    order, else DuckDB's sorted batches. The unsorted query is read, and its order
    checked (on up to ``threads`` threads), before this returns."""
    if queries.sorts and queries.unsorted_sql and may_skip_sort(cursor):
        table = _held_in_order(queries.unsorted_sql, queries, open_input)
        if table is not None:
            rows = grouped_rows(table, queries.partition_by, queries.order, queries.unread, threads)
            if rows is not None:
                queries.presorted = True
                return rows
    if queries.sorts:
        queries.presorted = False
    return open_input(queries.sorted_sql)


def _held_in_order(
    sql: str, queries: InputQueries, open_input: Callable[[str], Iterable[pa.RecordBatch]]
) -> pa.Table | None:
    """The rows of ``sql`` (the unsorted input query), or None once they show they are
    out of order or grow past PRESORTED_BYTES."""
    reader = open_input(sql)
    batches: list[pa.RecordBatch] = []
    size = 0
    schema = None
    try:
        for batch in reader:
            schema = batch.schema
            if len(batches) == 1 and not _first_in_order(batches[0], batch, queries):
                return None
            batches.append(batch)
            size += batch.nbytes
            if size > PRESORTED_BYTES:
                return None
    finally:
        close = getattr(reader, "close", None)
        if close is not None:
            close()
    if schema is None:
        return None  # no rows: the sorted query says what an empty input looks like
    return pa.Table.from_batches(batches, schema=schema)


def _first_in_order(first: pa.RecordBatch, second: pa.RecordBatch, queries: InputQueries) -> bool:
    """Whether the first :data:`FIRST_CHECK_ROWS` rows of an input of more than one batch
    are in order (False also where its key types are left to the sort), by the compiled
    passes where the two batches make an input the grouping compiles for anyway (65,536
    rows of 500 symbols: 1.3 ms by numpy's passes, 0.5 ms compiled)."""
    compiled = first.num_rows + second.num_rows >= COMPILED_FROM_ROWS
    head = first.slice(0, FIRST_CHECK_ROWS)
    return bool(
        in_order(pa.Table.from_batches([head]), queries.partition_by, queries.order, compiled)
    )
