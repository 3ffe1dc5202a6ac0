"""One key's matcher across micro-batches: what goes into Spark's state store.

A streaming key's partition arrives in pieces, one per micro-batch. Between
micro-batches the key's matcher lives in Spark's checkpointed state store as
bytes (:func:`matchsql.saved_state.snapshot.snapshot_matcher`), next to the last row fed
to it, so that:

* a restarted query resumes every key exactly where its last committed
  micro-batch left it: Spark re-runs an uncommitted micro-batch against the
  state version of the one before, so nothing is fed twice and no match is
  lost or duplicated;
* a row older (in ORDER BY order) than the last row already fed is caught
  and reported instead of silently giving rows the embedded engine would
  not give.

No pyspark import at module level: the logic is tested without Spark.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from matchsql.config import Config
from matchsql.errors import ExecutionError
from matchsql.integrations.spark.spark_plan import MatchPlan
from matchsql.integrations.spark.worker import (
    _arrow_comparable,
    _sort_indices,
    as_table,
    duckdb_connection,
    input_rows,
    new_matcher,
    partition_key,
    results,
    sort_rows,
)
from matchsql.saved_state import state_format
from matchsql.saved_state.snapshot import restore_like, snapshot_matcher


@dataclass
class KeyState:
    """A key's stored state: the matcher snapshot and the last row it was fed (Arrow IPC)."""

    matcher: bytes
    last_row: bytes


@dataclass
class StepResult:
    output: pa.Table
    state: KeyState | None  # None: the key's partition has ended, remove its state


def step(
    plan: MatchPlan,
    config: Config | None,
    state: KeyState | None,
    rows: pa.Table | None,
    *,
    end: bool,
    out_schema: pa.Schema,
) -> StepResult:
    """Feed one micro-batch's ``rows`` of a key (any order) and, if ``end``, finish it."""
    config = settings(plan, config)
    matcher = restore_matcher(plan, state.matcher, config) if state is not None else None
    last = _read_ipc(state.last_row) if state is not None else None
    out: list[pa.RecordBatch] = []
    if rows is not None and rows.num_rows:
        ordered = sort_rows(plan, rows)
        if last is not None:
            _check_order(plan, last, ordered)
        fed = input_rows(plan, ordered)
        if matcher is None:
            matcher = new_matcher(plan, partition_key(plan, fed), config)
        for batch in fed.to_batches():
            if batch.num_rows:
                out.extend(matcher.feed(batch))
        last = ordered.slice(ordered.num_rows - 1)
    if matcher is None:
        return StepResult(as_table([], out_schema), None)
    if end:
        out.extend(matcher.finish())
        return StepResult(as_table(results(plan, out), out_schema), None)
    assert last is not None
    return StepResult(
        as_table(results(plan, out), out_schema),
        KeyState(snapshot_matcher(matcher), _write_ipc(last)),
    )


def _check_order(plan: MatchPlan, last: pa.Table, ordered: pa.Table) -> None:
    """Raise unless ``ordered``'s first row sorts at or after ``last`` (DuckDB's order)."""
    if _sorts_before(plan, last, ordered.slice(0, 1)):
        raise ExecutionError(
            "a streaming MATCH_RECOGNIZE received a row that sorts before rows of an earlier "
            "micro-batch of the same partition; rows must arrive in ORDER BY order across "
            "micro-batches (within one micro-batch any order is fine)"
        )


def _sorts_before(plan: MatchPlan, last: pa.Table, first: pa.Table) -> bool:
    """Whether the row ``first`` sorts strictly before the row ``last``.

    pyarrow compares where :func:`~matchsql.integrations.spark.worker.sort_rows` would let it
    sort (the same keys compared as DuckDB compares them): a stable sort of the pair puts
    ``first`` ahead only if it sorts strictly before. DuckDB answers otherwise; a query
    through it cost about 6 ms, once per key and micro-batch."""
    prior = last.select(first.schema.names).cast(first.schema)
    pair = pa.concat_tables([prior, first])
    keys = plan.arrow_sort
    if keys is not None and all(_arrow_comparable(pair.column(name)) for name, _, _ in keys):
        indices = _sort_indices(pair, keys)
        if indices is not None:
            return indices[0].as_py() == 1
    con = duckdb_connection()
    con.register("__matchsql_pair", pair.append_column("__matchsql_new", pa.array([0, 1])))
    try:
        order = ", ".join([*plan.sort_keys, "__matchsql_new"])
        ((flag,),) = con.sql(
            f"SELECT __matchsql_new FROM __matchsql_pair ORDER BY {order} LIMIT 1"
        ).fetchall()
    finally:
        con.unregister("__matchsql_pair")
    return bool(flag != 0)


def _write_ipc(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _read_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(io.BytesIO(bytes(data))).read_all()


# One (settings, template matcher) per plan and config in this worker process; see settings.
_TEMPLATES: dict[tuple[int, int], tuple[MatchPlan, Config | None, Config, Any]] = {}
_MAX_TEMPLATES = 16


def _template(plan: MatchPlan, config: Config | None) -> tuple[Config, Any]:
    key = (id(plan), id(config))
    found = _TEMPLATES.get(key)
    if found is None or found[0] is not plan or found[1] is not config:
        if len(_TEMPLATES) >= _MAX_TEMPLATES:
            _TEMPLATES.pop(next(iter(_TEMPLATES)))
        resolved = config or Config()
        # The plan and config are kept in the entry, so their ids are not reused.
        found = _TEMPLATES[key] = (plan, config, resolved, new_matcher(plan, (), resolved))
    return found[2], found[3]


def settings(plan: MatchPlan, config: Config | None) -> Config:
    """The one Config object every matcher of ``plan`` gets in this process.

    A snapshot writes the plan objects a matcher shares with its query (the config among
    them) as paths, from an index built once per set of such objects
    (:func:`~matchsql.saved_state.snapshot.matcher_index`, a few ms). A fresh ``Config()``
    per key made every key's snapshot and restore build the index again: with hundreds of
    keys per micro-batch, most of a micro-batch's time."""
    return _template(plan, config)[0]


def restore_matcher(plan: MatchPlan, data: bytes, config: Config | None = None) -> Any:
    """Rebuild a matcher from :func:`~matchsql.saved_state.snapshot.snapshot_matcher` bytes, on this
    worker's plan of the query.

    The template (a fresh matcher of the query, whose plan objects the bytes' paths are
    looked up in) is built once per process, not once per key and micro-batch; restoring
    copies nothing of its partition state."""
    try:
        matcher = restore_like(_template(plan, config)[1], data)
    except state_format.SnapshotError as exc:
        raise ExecutionError(
            f"unreadable matcher state in the Spark state store: {exc.message}"
        ) from None
    if matcher is None:
        raise ExecutionError("corrupt matcher state in the Spark state store")
    return matcher
