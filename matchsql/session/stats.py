"""``SHOW STATS``: the input metrics of the connection's last continuous query.

A continuous query's :class:`~matchsql.api.connection.Result` carries ``stats``,
a dict that :func:`matchsql.execution.adaptive.continuous_input.continuous_batches` fills with
:meth:`matchsql.execution.adaptive.metrics.InputMetrics.row` when the query ends (or is
closed). The executor keeps the last such dict (``Executor.last_stats``);
``SHOW STATS`` (and the shell's ``.stats``) turns it into a two-column table,
one row per metric, in the thesis' column order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

#: Metric order of the thesis' appendix tables, then the extras.
ORDER = (
    "avg_mem",
    "max_mem",
    "avg_queue",
    "max_queue",
    "result",
    "time",
    "throughput",
    "records",
    "latency",
    "switches",
)


def stats_table(stats: dict | None) -> pa.Table:
    """One row per numeric metric; the input mode (text) is left out of the value column.

    Empty when no continuous query ran, or when the last one is still running.
    """
    import pyarrow as pa  # pyarrow (with numpy): loaded when rows are read as Arrow (start-up)

    schema = pa.schema([("metric", pa.string()), ("value", pa.float64())])
    if not stats:
        return schema.empty_table()
    names = [n for n in ORDER if n in stats]
    names += sorted(
        n
        for n, v in stats.items()
        if n not in ORDER and isinstance(v, int | float) and not isinstance(v, bool)
    )
    return pa.table(
        [pa.array(names, pa.string()), pa.array([float(stats[n]) for n in names], pa.float64())],
        schema=schema,
    )


def describe(stats: dict | None) -> str:
    """A one-line note for the shell when the table would be empty."""
    if stats is None:
        return "(no continuous query has run on this connection yet)"
    if not stats:
        return "(the last continuous query is still running; its metrics arrive when it ends)"
    return f"input mode: {stats.get('input_mode', '?')}"
