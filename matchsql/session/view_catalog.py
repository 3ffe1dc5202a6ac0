"""Where the MATCH_RECOGNIZE views live in the catalog (see :mod:`matchsql.session.views`):
read before every statement, so this part loads neither sqlglot nor the matchers."""

from __future__ import annotations

from collections.abc import Mapping

import duckdb

MARKER = "matchsql MATCH_RECOGNIZE view; its query:\n"
STUB_MESSAGE = "this view has a MATCH_RECOGNIZE: query it through matchsql"


def definitions(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Lower-cased view name -> query text of every MATCH_RECOGNIZE view visible on ``con``.

    Empty when the catalog cannot be read (an aborted transaction, say): the
    statement then reaches DuckDB as written and fails with DuckDB's message.
    """
    try:
        rows = con.execute(
            "SELECT view_name, comment FROM duckdb_views() "
            "WHERE starts_with(comment, ?) AND schema_name IN ('main', 'temp') "
            "ORDER BY temporary",
            [MARKER],
        ).fetchall()
    except duckdb.Error:
        return {}
    # Temporary views come last and so hide persistent ones of the same name, as in DuckDB.
    return {name.lower(): comment[len(MARKER) :] for name, comment in rows}


def mentions(statement: str, views: Mapping[str, str]) -> bool:
    """A cheap first look: whether any view name occurs in ``statement`` at all."""
    lowered = statement.lower()
    return any(name in lowered for name in views)
