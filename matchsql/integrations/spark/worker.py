"""Executor side: sort one partition's rows, run the matcher, snapshot its state.

This module does not import pyspark: it runs inside Spark's Python workers,
and it is also what the tests call directly. Matchers come from the same
factory as the embedded engine's (``matchsql.engine.planner``), so the same
execution path (reference or compiled) runs the query in both.

Rows are put in order by DuckDB with the query's own ORDER BY text, so NULL
placement (DuckDB: NULLS LAST for ASC by default), NaN, collation and DESC
behave exactly as in the embedded engine, which sorts with DuckDB too (rows
that tie on every ORDER BY key are in no defined order in either).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from matchsql.config import Config
from matchsql.engine.planner import new_partition_matcher, whole_partitions
from matchsql.execution.router.partition_batches import PartitionBatch
from matchsql.execution.router.partitions import PartitionRun
from matchsql.expr.batch_select import derive_input, project_result
from matchsql.integrations.spark.executors import shipped_function
from matchsql.integrations.spark.spark_plan import MatchPlan, build_plan, plan_data, schema_bytes

_DUCKDB: list[duckdb.DuckDBPyConnection] = []


def duckdb_connection() -> duckdb.DuckDBPyConnection:
    """This worker process's DuckDB connection, for sorting and comparing rows."""
    if not _DUCKDB:
        con = duckdb.connect()
        con.execute("SET enable_progress_bar = false")
        con.execute("SET threads = 1")  # Spark already runs one worker per core
        _DUCKDB.append(con)
    return _DUCKDB[0]


def input_rows(plan: MatchPlan, table: pa.Table) -> pa.Table:
    """``table`` with the input relation's columns and types (helper columns dropped),
    and the derived columns DuckDB computes from them."""
    columns = plan.spec.input_schema
    table = table.select(columns.names)
    if table.schema != columns:
        table = table.cast(columns)
    derive = derive_input(plan.spec)
    if derive is None:
        return table
    return pa.Table.from_batches([derive(b) for b in table.to_batches()], schema=plan.spec.columns)


def results(plan: MatchPlan, batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
    """The matcher's output ``batches`` as the query's result (DuckDB's measures computed)."""
    project = project_result(plan.spec)
    return batches if project is None else [project(b) for b in batches]


def sort_rows(plan: MatchPlan, table: pa.Table, grouped: bool = False) -> pa.Table:
    """One partition's rows (``grouped``: a task's rows, grouped by the partition keys
    first) in the order the embedded engine feeds them.

    pyarrow sorts when it compares the key columns exactly as DuckDB does
    (integers, decimals, dates, times, timestamps, booleans, strings by
    bytes, floats without NaN, with DuckDB's direction and NULL placement);
    anything else goes through DuckDB itself. The partition keys' own order does
    not matter, only that equal keys end up together.
    """
    if table.num_rows <= 1:
        return table
    names = plan.partition_by if grouped else []
    keys = plan.arrow_sort
    if keys is not None:
        keys = [(name, "ascending", "at_end") for name in names] + keys
        if all(_arrow_comparable(table.column(name)) for name, _, _ in keys):
            indices = _sort_indices(table, keys)
            if indices is not None:
                return table.take(indices)
    con = duckdb_connection()
    con.register("__matchsql_part", table)
    try:
        order = ", ".join([*(_quoted(name) for name in names), *plan.sort_keys])
        return con.sql(f"SELECT * FROM __matchsql_part ORDER BY {order}").to_arrow_table()
    finally:
        con.unregister("__matchsql_part")


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def partition_ends(table: pa.Table, names: list[str]) -> np.ndarray:
    """Where each partition of ``table`` (grouped by the key columns ``names``) ends:
    rows whose keys are not DISTINCT FROM the row before's belong to its partition (two
    NULLs, or two NaNs, are one key, as in DuckDB's PARTITION BY)."""
    n = table.num_rows
    if n == 0:
        return np.zeros(0, np.int64)
    change = np.zeros(n - 1, bool)
    for name in names:
        column = table.column(name).combine_chunks()
        before, after = column.slice(0, n - 1), column.slice(1)
        same = pc.fill_null(pc.equal(before, after), False)
        same = pc.or_(same, pc.and_(pc.is_null(before), pc.is_null(after)))
        if pa.types.is_floating(column.type):
            same = pc.or_(same, pc.fill_null(pc.and_(pc.is_nan(before), pc.is_nan(after)), False))
        change |= ~np.asarray(same, dtype=bool)
    return np.append(np.flatnonzero(change) + 1, n).astype(np.int64)


def groupable(schema: pa.Schema, names: list[str]) -> bool:
    """Whether :func:`partition_ends` compares these key columns (the driver checks it
    before it sends the query to tasks; other key types are grouped by Spark)."""

    def scalar(kind: pa.DataType) -> bool:
        return not (
            pa.types.is_nested(kind) or pa.types.is_dictionary(kind) or pa.types.is_null(kind)
        )

    return all(scalar(schema.field(name).type) for name in names)


def _arrow_comparable(column: pa.ChunkedArray) -> bool:
    kind = column.type
    if pa.types.is_floating(kind):
        return not pc.any(pc.is_nan(column)).as_py()
    return (
        pa.types.is_integer(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_date(kind)
        or pa.types.is_timestamp(kind)
        or pa.types.is_time(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
    )


def _sort_indices(table: pa.Table, keys: list[tuple[str, str, str]]) -> pa.Array | None:
    """Stable sort indices, per-key NULL placement (older pyarrow: one placement for all)."""
    try:
        return pc.sort_indices(table, sort_keys=keys)
    except (TypeError, ValueError, pa.ArrowException):
        placements = {nulls for _, _, nulls in keys}
        if len(placements) != 1:
            return None
        return pc.sort_indices(
            table, sort_keys=[(n, o) for n, o, _ in keys], null_placement=placements.pop()
        )


def new_matcher(plan: MatchPlan, key: tuple, config: Config | None) -> PartitionRun:
    """The matcher run of one partition, on the path the embedded engine would choose.

    The planner keeps its lowering in the spec's memo; the plan's spec is one
    object per worker process and query (built once by :func:`shipped_plan`), so the
    lowering happens once per process, not once per group.
    """
    return new_partition_matcher(plan.spec, key, config)


def partition_key(plan: MatchPlan, table: pa.Table) -> tuple:
    return tuple(table.column(name)[0].as_py() for name in plan.partition_by)


def run_group(
    plan: MatchPlan, config: Config | None, table: pa.Table, out_schema: pa.Schema | None = None
) -> pa.Table:
    """All matches of one complete partition (a group of ``applyInArrow``).

    ``out_schema`` is the output schema as Spark wants it back (time zones
    of timestamps differ in name only); by default the MatchSpec's.
    """
    out_schema = out_schema or plan.output_schema()
    if table.num_rows == 0:
        return out_schema.empty_table()
    ordered = sort_rows(plan, table)
    rows = input_rows(plan, ordered)
    matcher = new_matcher(plan, partition_key(plan, rows), config)
    batches = [b for b in rows.to_batches() if b.num_rows]
    out = [*_feed_all(matcher, batches), *matcher.finish()]
    return as_table(results(plan, out), out_schema)


def _feed_all(matcher: PartitionRun, batches: list[pa.RecordBatch]) -> Iterator:
    for batch in batches:
        yield from matcher.feed(batch)


def as_table(batches: list[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    if not batches:
        return schema.empty_table()
    table = pa.Table.from_batches(batches)
    if table.schema != schema:
        table = table.cast(schema)
    return table


def group_function(plan: MatchPlan, config: Config | None, out_schema: pa.Schema):
    """The ``applyInArrow`` function: a closure over plain data (see
    :func:`~matchsql.integrations.spark.executors.shipped_function`) that runs
    :func:`shipped_group` on the executor."""
    data = (plan_data(plan, config), schema_bytes(out_schema))
    return shipped_function(__name__, shipped_group.__name__, data)


def shipped_group(data: tuple[dict[str, Any], bytes], table: pa.Table) -> pa.Table:
    """One ``applyInArrow`` group, with the plan and schema :func:`group_function` shipped."""
    plan, config = shipped_plan(data[0])
    return run_group(plan, config, table, read_schema(data[1]))


def run_task(
    plan: MatchPlan,
    config: Config | None,
    batches: Iterable[pa.RecordBatch],
    out_schema: pa.Schema | None = None,
) -> Iterator[pa.RecordBatch]:
    """All matches of the partitions in one Spark task's rows (every row of a key lies in
    one task: the driver hash-partitioned by the keys).

    The rows are grouped by key and put in ORDER BY order, then matched as the embedded
    engine matches a sorted input: runs of complete partitions of up to ``batch_size``
    rows together through one compiled call where the planner allows it
    (:func:`~matchsql.engine.planner.whole_partitions`; real data has thousands of short
    partitions), a longer partition by its own matcher. One plan and one set of
    matchers serve the whole task, where a group per key planned and built them again
    for every key.
    """
    config = config or Config()
    out_schema = out_schema or plan.output_schema()
    collected = [b for b in batches if b.num_rows]
    if not collected:
        return
    rows = input_rows(plan, sort_rows(plan, pa.Table.from_batches(collected), grouped=True))
    del collected
    ends = partition_ends(rows, plan.partition_by)
    starts = np.concatenate(([0], ends[:-1])).astype(np.int64)
    whole, _ = whole_partitions(plan.spec, config)
    size = max(1, config.batch_size)
    # Partitions of up to ``size`` rows go through the batch matcher, as many as fit in
    # ``size`` rows per call (partition_batches' rule, cut here by row count: a task
    # holds all of its rows, so every partition is complete).
    short = ends - starts <= size
    long_at = np.flatnonzero(~short)
    table = _one_batch(rows)
    pending = PartitionBatch(whole.match_counted) if whole is not None else None
    part = 0
    while part < len(ends):
        if pending is not None and short[part]:
            fits = int(np.searchsorted(ends, starts[part] + size, side="right"))
            after = int(np.searchsorted(long_at, part))
            stop = min(fits, int(long_at[after]) if after < len(long_at) else len(ends))
            pending.add(table, int(starts[part]), (ends[part:stop] - starts[part:stop]).tolist())
            yield from _typed(plan, pending.take().matched()[0], out_schema)
            part = stop
            continue
        piece = rows.slice(int(starts[part]), int(ends[part] - starts[part]))
        matcher = new_matcher(plan, partition_key(plan, piece), config)
        produced = [
            *_feed_all(matcher, [b for b in piece.to_batches(max_chunksize=size) if b.num_rows]),
            *matcher.finish(),
        ]
        yield from _typed(plan, produced, out_schema)
        part += 1


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    batches = table.to_batches()
    if len(batches) == 1:
        return batches[0]
    return (
        pa.concat_batches(batches)
        if batches
        else pa.RecordBatch.from_pylist([], schema=table.schema)
    )


def _typed(
    plan: MatchPlan, batches: list[pa.RecordBatch], schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The matcher's output as the query's result batches, in Spark's schema."""
    for batch in results(plan, [b for b in batches if b.num_rows]):
        yield batch if batch.schema == schema else batch.cast(schema)


def task_function(plan: MatchPlan, config: Config | None, out_schema: pa.Schema):
    """The ``mapInArrow`` function: a closure over plain data (see
    :func:`~matchsql.integrations.spark.executors.shipped_function`) that runs
    :func:`shipped_task` on the executor."""
    data = (plan_data(plan, config), schema_bytes(out_schema))
    return shipped_function(__name__, shipped_task.__name__, data)


def shipped_task(
    data: tuple[dict[str, Any], bytes], batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """One ``mapInArrow`` task, with the plan and schema :func:`task_function` shipped."""
    plan, config = shipped_plan(data[0])
    return run_task(plan, config, batches, read_schema(data[1]))


def shipped_plan(data: dict[str, Any]) -> tuple[MatchPlan, Config | None]:
    """The plan and settings of :func:`~matchsql.integrations.spark.spark_plan.plan_data`,
    built again from the query text as the driver built them (the same parse, checks and
    compilation), once per worker process and query: every task and group of a query
    gets the same objects, so the planner's lowering, kept in the spec's memo, and the
    stream's matcher templates are made once."""
    return _built(data["query"], data["table"], data["schema"], data["input_order"], data["config"])


@functools.lru_cache(maxsize=16)
def _built(
    query: str,
    table: str,
    schema: bytes,
    input_order: str | tuple[str, ...] | None,
    settings: tuple[tuple[str, Any], ...] | None,
) -> tuple[MatchPlan, Config | None]:
    """:func:`shipped_plan`'s plans, by their (hashable) data; settings are set through
    :meth:`Config.from_options`, which checks each value's range again."""
    config = None if settings is None else Config.from_options(dict(settings))
    plan = build_plan(query, table, read_schema(schema), input_order=input_order, config=config)
    return plan, config


@functools.lru_cache(maxsize=64)
def read_schema(data: bytes) -> pa.Schema:
    """An Arrow schema from the IPC bytes the driver shipped (data only: reading runs nothing)."""
    return pa.ipc.read_schema(pa.py_buffer(data))
