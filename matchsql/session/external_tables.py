"""What a MATCH_RECOGNIZE statement's table names stand for outside the database.

A MATCH_RECOGNIZE's input query runs on a cursor of its own (DuckDB allows one open
result per connection, and the statement around it needs the connection). A cursor
does not see the caller's data frames (DuckDB's replacement scan looks only at its
direct caller) nor the connection's temporary tables and registered objects, so the
statement finds them first and registers them on each cursor it makes, and EXPLAIN
does the same on its own.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.session.host import StatementHost
from matchsql.session.scope import lookup
from matchsql.session.temporary import temporary

#: Name -> (the object, whether the statement's own connection needs it too).
ExternalTables = dict[str, tuple[Any, bool]]


def external_tables(
    host: StatementHost, tree: exp.Expr, nodes: list[MatchRecognizeTable]
) -> ExternalTables:
    """What the statement's unqualified table names stand for when they are not in
    the database: the caller's data frames, and this connection's temporary tables
    and registered objects, which the cursors that run MATCH_RECOGNIZE inputs do
    not see (read into Arrow tables; only those the inputs name). Each with whether
    the statement's own connection needs it too (the caller's variables)."""
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    names = {
        t.name
        for t in tree.find_all(exp.Table)
        if not t.args.get("db")
        and isinstance(t.this, exp.Identifier)
        and t.name.lower() not in ctes
        and not t.name.startswith("__matchsql_")
    }
    if not names:
        return {}
    inputs = {t.name.lower() for node in nodes for t in node.this.find_all(exp.Table)}
    con = host.con
    temp = temporary(con, sorted(names))
    outer = {}  # names the catalog may still have: a caller's variable unless it has
    for name in sorted(names - temp):
        value = lookup(host.scope, name)
        if value is not None:
            outer[name] = value
    persistent: set[str] = set()
    if outer:  # (rare: a variable named as a table; the catalog's tables come first)
        lowered = sorted({n.lower() for n in outer})
        rows = con.execute(
            "SELECT lower(table_name) FROM duckdb_tables() "
            "WHERE lower(table_name) IN (SELECT unnest(?)) AND NOT temporary "
            "UNION ALL SELECT lower(view_name) FROM duckdb_views() "
            "WHERE lower(view_name) IN (SELECT unnest(?)) AND NOT internal "
            "AND NOT temporary",
            [lowered, lowered],
        ).fetchall()
        persistent = {name for (name,) in rows}
    found: ExternalTables = {}
    for name in sorted(names):
        if name in temp:
            if name.lower() in inputs:
                quoted = exp.to_identifier(name, quoted=True).sql(dialect="duckdb")
                table = con.sql(f"SELECT * FROM {quoted}").to_arrow_table()
                found[name] = (table, False)
        elif name in outer and name.lower() not in persistent:
            found[name] = (outer[name], True)
    return found
