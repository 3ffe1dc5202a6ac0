"""The handler of ``CREATE VIEW``: matchsql stores a view whose query has a MATCH_RECOGNIZE
(see :mod:`matchsql.session.views`); DuckDB creates any other.

Whether the query has a MATCH_RECOGNIZE is known only with the views it names
expanded, and its columns only by preparing it: both need the dialect, so this
handler loads with the MATCH_RECOGNIZE machinery, not with the executor.
"""

from __future__ import annotations

from typing import Any

import duckdb

from matchsql.session.host import StatementHost
from matchsql.session.statement_kinds import DefineView, MatchQuery, query
from matchsql.session.views import create_stub, expand, view_query


def define_match_view(host: StatementHost, statement: DefineView, views: dict[str, str]) -> Any:
    """CREATE VIEW: stored here when its query (views expanded) has a MATCH_RECOGNIZE,
    checked by preparing it (not reading it); else DuckDB's."""
    create = statement.view
    if create is not None:
        text = expand(create.query, views)
        body = query(" " * create.query_offset + text, statement.offset)
        if isinstance(body, MatchQuery):
            check = host.dispatch(body)
            try:
                schema = check.schema
            finally:
                check.close()
            try:
                create_stub(host.con, create, schema, view_query(create))
            except duckdb.Error as exc:
                raise host.translate(exc) from None
            return None
    return host.run_duckdb(statement.text, [])
