"""What DuckDB's function catalog says about a name sqlglot does not know.

sqlglot parses DuckDB's aggregates it has no class for (``histogram``,
``product``, ``entropy``...) as anonymous function calls, which look like
scalar functions. DuckDB's ``duckdb_functions()`` knows them: the analyzer asks
it once per process, so that such a call is never mistaken for a function of
one row.
"""

from __future__ import annotations

import threading

import duckdb
from sqlglot import exp

from matchsql.plan.binder import is_aggregate

__all__ = ["aggregate_names", "is_any_aggregate"]

_lock = threading.Lock()
_names: frozenset[str] | None = None


def aggregate_names(con: duckdb.DuckDBPyConnection) -> frozenset[str]:
    """The lower-case names of DuckDB's aggregate functions (asked once per process)."""
    global _names
    with _lock:
        if _names is None:
            _names = frozenset(
                name
                for (name,) in con.execute(
                    "SELECT DISTINCT lower(function_name) FROM duckdb_functions() "
                    "WHERE function_type = 'aggregate'"
                ).fetchall()
            )
        return _names


def is_any_aggregate(node: exp.Expr, names: frozenset[str]) -> bool:
    """Whether ``node`` is an aggregate call: one sqlglot knows, or one of DuckDB's
    ``names`` that sqlglot parsed as an anonymous function."""
    return is_aggregate(node) or (isinstance(node, exp.Anonymous) and node.name.lower() in names)
