"""A connection's temporary tables and views (registered objects among them): what the
cursors that run MATCH_RECOGNIZE inputs do not see.

Every MATCH_RECOGNIZE statement asks which of the table names it uses are temporary.
The catalog functions answer by listing every table and view with its SQL text
(``duckdb_views()`` renders each of DuckDB's internal views): 1.2-1.9 ms of each
statement's planning, which runs in one process however many workers match it.
Looking each name up in the temporary catalog (``temp.main``, where every temporary
object lives) costs a third of that.

A name DuckDB does not find in its catalog may still be taken by its replacement scan
for a Python variable of the frame that asked (even a qualified one). The lookup runs
in :func:`_in_temp`, whose variables (the connection, names as text) and module
globals (modules, functions) are nothing DuckDB scans, so a missing name fails there.
"""

from __future__ import annotations

from collections.abc import Iterable

import duckdb
from sqlglot import exp


def temporary(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> set[str]:
    """Those of ``names`` (unqualified, any case) that are temporary tables or views of
    ``con``: the ones it resolves to its temporary objects."""
    return {name for name in names if _in_temp(con, name)}


def _in_temp(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    quoted = exp.to_identifier(name, quoted=True).sql(dialect="duckdb")
    try:
        con.table(f'"temp"."main".{quoted}')
    except duckdb.CatalogException:
        return False
    except duckdb.Error:
        return True  # there, but it does not bind (reading it reports why)
    return True
