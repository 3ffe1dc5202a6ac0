"""Unbounded scale-out: MATCH_RECOGNIZE over a streaming DataFrame.

Rows are grouped by the PARTITION BY keys with ``applyInPandasWithState``;
each key's matcher lives in Spark's checkpointed state store between
micro-batches (see :mod:`matchsql.integrations.spark.state`), so a query stopped and
restarted from its checkpoint neither loses nor repeats a match.

End of partition. A stream's partition only ends when the producer says so,
and greedy patterns (``B+`` at the end) or ``$`` / ``NEXT`` wait for it. Two
ways to say it, both optional:

* ``end_marker``: a BOOLEAN column; a row where it is true ends its key's
  partition after all rows of that key in the same and earlier micro-batches.
  Marker rows are not matched, and the column is not part of the input
  relation the query sees. A key that receives rows after its end starts a
  new partition (match numbers restart at 1), as a new partition would.
* ``idle_timeout``: a processing-time duration (timedelta or seconds); a key
  without rows for that long is finished. Time-dependent, so it gives the
  embedded engine's rows only if no row of the key arrives later.

Key buckets (``key_buckets=N``): Spark calls the state function once per group and
micro-batch, and each call costs several milliseconds of Spark's own work (the
group's rows and state to pandas and back) before any matching; with hundreds of
keys per micro-batch that, not matching, bounds the rate. With ``key_buckets`` the
rows are grouped by a hash of the PARTITION BY keys into N buckets instead: one
call per bucket matches each of its keys in turn and stores all of their matchers
as one state value (keys absent from the micro-batch keep their bytes untouched).
The results and the restart guarantee are the same; N must stay the same across
restarts of one checkpoint (the state is stored per bucket), and ``idle_timeout``,
which Spark measures per group, is refused with it.

Row order: rows of a key may arrive in any order within a micro-batch (they
are sorted by the query's ORDER BY), but a row that sorts before a row of an
earlier micro-batch of its key fails the query with a clear error.
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from matchsql.config import Config
from matchsql.errors import SemanticError
from matchsql.integrations.spark.executors import check_executors, shipped_function
from matchsql.integrations.spark.schema import (
    arrow_schema_of,
    as_spark_arrow,
    require_pyspark,
    session_time_zone,
    spark_schema_of,
)
from matchsql.integrations.spark.spark_batch import (
    _col,
    _table_name,
    _warn_single_task,
    _zero,
    apply_outer,
)
from matchsql.integrations.spark.spark_plan import (
    ALL_KEY,
    AS_READ,
    MatchPlan,
    build_plan,
    plan_data,
    schema_bytes,
)
from matchsql.integrations.spark.state import KeyState, step
from matchsql.integrations.spark.worker import (
    partition_ends,
    read_schema,
    shipped_plan,
    sort_rows,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_STATE_DDL = "matcher BINARY, last_row BINARY"
_BUCKET_DDL = "keys BINARY"
BUCKET = "__matchsql_bucket"


def match_recognize_stream(
    df: DataFrame,
    query: str,
    *,
    table: str | None = None,
    input_order: str | list[str] | None = None,
    end_marker: str | None = None,
    idle_timeout: datetime.timedelta | float | None = None,
    config: Config | dict | None = None,
    key_buckets: int | None = None,
) -> DataFrame:
    """Run ``query`` continuously over the streaming DataFrame ``df``.

    Returns a streaming DataFrame of matches (append mode) with the schema
    the embedded engine would give; write it with any sink. See the module
    docstring for ``end_marker``, ``idle_timeout`` and ``key_buckets``; ``table``,
    ``input_order`` and ``config`` are as in :func:`matchsql.integrations.spark.match_recognize`
    (``input_order='as_read'`` is refused: a stream has no read order across
    micro-batches).
    """
    from pyspark.sql.streaming.state import GroupStateTimeout

    require_pyspark()
    if input_order == AS_READ:
        raise SemanticError(
            "input_order='as_read' has no meaning for a stream; "
            "add ORDER BY or name the order column(s)"
        )
    schema = arrow_schema_of(df)
    if end_marker is not None:
        if end_marker not in schema.names:
            raise SemanticError(f"end_marker column {end_marker!r} is not in the DataFrame")
        schema = schema.remove(schema.get_field_index(end_marker))
    settings = Config.from_options(config) if isinstance(config, dict) else config
    plan = build_plan(
        query, table or _table_name(query), schema, input_order=input_order, config=settings
    )
    check_executors(df.sparkSession)
    out_schema = plan.output_schema()
    returned = as_spark_arrow(out_schema, session_time_zone(df.sparkSession))
    timeout_ms = _duration_ms(idle_timeout) if idle_timeout is not None else None
    if key_buckets is not None:
        if timeout_ms is not None:
            raise SemanticError(
                "idle_timeout is measured per state group, and with key_buckets a group is "
                "a bucket of keys: use end_marker, or leave key_buckets out"
            )
        return apply_outer(plan, _bucketed(df, plan, settings, returned, end_marker, key_buckets))

    if plan.partition_by:
        grouped = df.groupBy(*[_col(name) for name in plan.partition_by])
    else:
        _warn_single_task("a stream has no ORDER BY ranges: its rows arrive over time")
        grouped = df.withColumn(ALL_KEY, _zero()).groupBy(ALL_KEY)
    fn = state_function(plan, settings, returned, end_marker, timeout_ms)
    matches = grouped.applyInPandasWithState(
        fn,
        spark_schema_of(out_schema),
        _STATE_DDL,
        "append",
        GroupStateTimeout.ProcessingTimeTimeout if timeout_ms else GroupStateTimeout.NoTimeout,
    )
    return apply_outer(plan, matches)


def state_function(
    plan: MatchPlan,
    config: Config | None,
    out_schema: pa.Schema,
    end_marker: str | None,
    timeout_ms: int | None,
):
    """The ``applyInPandasWithState`` function: a closure over plain data (see
    :func:`~matchsql.integrations.spark.executors.shipped_function`) that runs
    :func:`shipped_key` on the executor."""
    data = (plan_data(plan, config), schema_bytes(out_schema), end_marker, timeout_ms)
    return shipped_function(__name__, shipped_key.__name__, data)


def shipped_key(
    data: tuple[Any, ...], key: tuple, frames: Iterator[Any], group_state: Any
) -> Iterator[Any]:
    """One key, one micro-batch, with what :func:`state_function` shipped."""
    plan_of, schema, end_marker, timeout_ms = data
    plan, config = shipped_plan(plan_of)
    return match_key(plan, config, read_schema(schema), end_marker, timeout_ms, frames, group_state)


def match_key(
    plan: MatchPlan,
    config: Config | None,
    out_schema: pa.Schema,
    end_marker: str | None,
    timeout_ms: int | None,
    frames: Iterator[Any],
    group_state: Any,
) -> Iterator[Any]:
    """Feed one key's rows of a micro-batch (``frames``) to its matcher in ``group_state``,
    or finish the key when its idle timeout passed; yield its matches as pandas."""
    stored = KeyState(*group_state.get) if group_state.exists else None
    if group_state.hasTimedOut:
        result = step(plan, config, stored, None, end=True, out_schema=out_schema)
    else:
        rows, end = _rows_and_end(frames, end_marker)
        result = step(plan, config, stored, rows, end=end, out_schema=out_schema)
    if result.state is None:
        if group_state.exists:
            group_state.remove()
    else:
        group_state.update((result.state.matcher, result.state.last_row))
        if timeout_ms:
            group_state.setTimeoutDuration(timeout_ms)
    if result.output.num_rows:
        # No thread pool: a key's output is small, and pyarrow's threads cost more
        # than they save (3-5x the conversion, on a loaded machine, per key).
        yield result.output.to_pandas(use_threads=False)


def _bucketed(
    df: DataFrame,
    plan: MatchPlan,
    config: Config | None,
    out_schema: pa.Schema,
    end_marker: str | None,
    buckets: int,
) -> DataFrame:
    """The matches with one state group per bucket of keys (see the module docstring)."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    if not plan.partition_by:
        raise SemanticError("key_buckets needs a query with PARTITION BY")
    if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 1:
        raise SemanticError(f"key_buckets must be a positive integer, got {buckets!r}")
    bucket = F.pmod(F.hash(*[_col(name) for name in plan.partition_by]), F.lit(buckets))
    fn = bucket_function(plan, config, out_schema, end_marker)
    return (
        df.withColumn(BUCKET, bucket)
        .groupBy(BUCKET)
        .applyInPandasWithState(
            fn,
            spark_schema_of(plan.output_schema()),
            _BUCKET_DDL,
            "append",
            GroupStateTimeout.NoTimeout,
        )
    )


def bucket_function(
    plan: MatchPlan, config: Config | None, out_schema: pa.Schema, end_marker: str | None
):
    """The ``applyInPandasWithState`` function of ``key_buckets``: a closure over plain
    data (see :func:`~matchsql.integrations.spark.executors.shipped_function`) that runs
    :func:`shipped_bucket` on the executor."""
    data = (plan_data(plan, config), schema_bytes(out_schema), end_marker)
    return shipped_function(__name__, shipped_bucket.__name__, data)


def shipped_bucket(
    data: tuple[Any, ...], bucket: tuple, frames: Iterator[Any], group_state: Any
) -> Iterator[Any]:
    """One bucket of keys, one micro-batch, with what :func:`bucket_function` shipped."""
    plan_of, schema, end_marker = data
    plan, config = shipped_plan(plan_of)
    return match_bucket(plan, config, read_schema(schema), end_marker, frames, group_state)


def match_bucket(
    plan: MatchPlan,
    config: Config | None,
    out_schema: pa.Schema,
    end_marker: str | None,
    frames: Iterator[Any],
    group_state: Any,
) -> Iterator[Any]:
    """One bucket of keys, one micro-batch; each key of the micro-batch goes through
    :func:`step` as alone, and the bucket's keys' states are stored as one value."""
    stored = read_keys(group_state.get[0]) if group_state.exists else {}
    rows, _ = _rows_and_end(frames, None)
    if rows is None:
        return
    rows = sort_rows(plan, rows, grouped=True)
    ends = partition_ends(rows, plan.partition_by)
    out: list[pa.Table] = []
    start = 0
    for stop in ends.tolist():
        piece = rows.slice(start, stop - start)
        start = stop
        key = repr(tuple(piece.column(name)[0].as_py() for name in plan.partition_by))
        end = False
        if end_marker is not None:
            marks = pc.fill_null(piece.column(end_marker), False)
            end = bool(pc.any(marks).as_py())
            piece = piece.filter(pc.invert(marks)).drop_columns([end_marker])
        result = step(
            plan,
            config,
            stored.get(key),
            piece if piece.num_rows else None,
            end=end,
            out_schema=out_schema,
        )
        if result.state is None:
            stored.pop(key, None)
        else:
            stored[key] = result.state
        if result.output.num_rows:
            out.append(result.output)
    if stored:
        group_state.update((write_keys(stored),))
    elif group_state.exists:
        group_state.remove()
    if out:
        yield pa.concat_tables(out).to_pandas(use_threads=False)


_KEYS_SCHEMA = pa.schema(
    [("key", pa.string()), ("matcher", pa.binary()), ("last_row", pa.binary())]
)


def write_keys(states: dict[str, KeyState]) -> bytes:
    """A bucket's keys' states as one Arrow IPC stream (data only: reading it runs nothing)."""
    table = pa.table(
        [
            pa.array(list(states), pa.string()),
            pa.array([s.matcher for s in states.values()], pa.binary()),
            pa.array([s.last_row for s in states.values()], pa.binary()),
        ],
        schema=_KEYS_SCHEMA,
    )
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, _KEYS_SCHEMA) as writer:
        writer.write_table(table)
    return sink.getvalue()


def read_keys(data: bytes) -> dict[str, KeyState]:
    """The states :func:`write_keys` wrote, by key."""
    table = pa.ipc.open_stream(io.BytesIO(bytes(data))).read_all()
    keys, matchers, lasts = (table.column(i).to_pylist() for i in range(3))
    return {k: KeyState(m, last) for k, m, last in zip(keys, matchers, lasts, strict=True)}


def _rows_and_end(frames: Iterator[Any], end_marker: str | None) -> tuple[pa.Table | None, bool]:
    """The micro-batch's rows of a key as Arrow, and whether an end marker came with them.

    One thread per conversion, as for the output: a key's frame is small."""
    tables = [
        pa.Table.from_pandas(frame, preserve_index=False, nthreads=1)
        for frame in frames
        if len(frame)
    ]
    if not tables:
        return None, False
    rows = pa.concat_tables(tables, promote_options="permissive")
    if end_marker is None:
        return rows, False
    marks = pc.fill_null(rows.column(end_marker), False)
    end = bool(pc.any(marks).as_py())
    return rows.filter(pc.invert(marks)).drop_columns([end_marker]), end


def _duration_ms(value: datetime.timedelta | float) -> int:
    """A positive duration (timedelta or seconds) in milliseconds."""
    seconds = value.total_seconds() if isinstance(value, datetime.timedelta) else float(value)
    if seconds <= 0:
        raise SemanticError(f"idle_timeout must be a positive duration, got {value!r}")
    return max(1, int(seconds * 1000))
