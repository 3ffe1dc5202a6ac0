"""What the router and the workers of a scattered one-time query share (see :mod:`.scatter`)."""

from __future__ import annotations

from dataclasses import dataclass

from matchsql.execution.router.presorted import OrderKey

BUCKET = "__matchsql_worker_bucket"
POSITION = "__matchsql_worker_position"
ROWS_VIEW = "__matchsql_worker_rows"
KEYS_VIEW = "__matchsql_worker_keys"
WAVES = 4


@dataclass(frozen=True)
class ScatterPlan:
    """The router's scans (one per wave) and the workers' sort."""

    waves: list[str]
    sort_sql: str  # over ROWS_VIEW: the input columns, then POSITION and BUCKET
    keys: list[str]  # the partition columns
    width: int  # input columns before POSITION and BUCKET
    # The ORDER BY as execution/router/presorted.py reads it: a worker whose rows are in that order
    # already groups them without its sort (None: always sort, as DuckDB's settings or
    # the key types ask).
    order: list[OrderKey] | None = None
