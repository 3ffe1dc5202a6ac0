"""Views whose query has a MATCH_RECOGNIZE (directly or through other such views).

DuckDB cannot run MATCH_RECOGNIZE, so such a view is stored twice in the
database itself, where it survives reopening and is seen by every
connection:

* a DuckDB view of the same name and columns whose rows raise an error
  ("query it through matchsql"): ``DESCRIBE``, ``.tables``, name clashes,
  ``DROP VIEW``, ``CREATE OR REPLACE VIEW`` and ``ALTER VIEW ... RENAME``
  are then DuckDB's own;
* the original query text, in that view's comment (prefix :data:`MARKER`).

A statement that names such a view gets the view's text in its place, in
parentheses, before it runs; views over views expand until none is left.
A view replaced by a plain one loses its comment and with it its matchsql
text.
"""

from __future__ import annotations

from collections.abc import Mapping

import duckdb
import pyarrow as pa
from sqlglot import exp

from matchsql.errors import ParseError, SemanticError
from matchsql.grammar.statements import parse
from matchsql.session.literals import quote
from matchsql.session.view_catalog import MARKER, STUB_MESSAGE, mentions
from matchsql.session.view_statement import CreateView

#: Views nested deeper than this are taken for a view that refers to itself.
MAX_DEPTH = 32


def expand(statement: str, views: Mapping[str, str]) -> str:
    """``statement`` with every reference to a MATCH_RECOGNIZE view replaced by its query.

    A statement that does not parse here is left as it is (DuckDB reports
    its error, or the view's stub does).
    """
    for _ in range(MAX_DEPTH):
        if not mentions(statement, views):
            return statement
        try:
            expanded = _expand_once(statement, views)
        except ParseError:
            return statement
        if expanded == statement:
            return statement
        statement = expanded
    raise SemanticError("views nest more than 32 deep: does a view refer to itself?")


def _expand_once(statement: str, views: Mapping[str, str]) -> str:
    trees = parse(statement)
    if len(trees) != 1:
        return statement
    tree = trees[0]
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    spans: list[tuple[int, int, str]] = []
    for table in tree.find_all(exp.Table):
        ident = table.this
        if (
            table.args.get("db")
            or not isinstance(ident, exp.Identifier)
            or table.find_ancestor(exp.Query) is None
        ):  # DROP VIEW v, INSERT INTO v, ...
            continue
        name = ident.name.lower()
        start, end = ident.meta.get("start"), ident.meta.get("end")
        if name not in views or name in ctes or start is None or end is None:
            continue
        body = f"({views[name]}\n)"
        if not table.args.get("alias"):
            body += " AS " + statement[start : end + 1]
        spans.append((start, end + 1, body))
    for start, end, body in sorted(spans, reverse=True):
        statement = statement[:start] + body + statement[end:]
    return statement


def view_query(create: CreateView) -> str:
    """The text stored for ``create``: its query, under its column names if it lists them."""
    if create.columns is None:
        return create.query
    return f"SELECT * FROM ({create.query}\n) AS __matchsql_view{create.columns}"


def create_stub(
    con: duckdb.DuckDBPyConnection, create: CreateView, schema: pa.Schema, stored: str
) -> None:
    """Create the DuckDB side of the view (see the module notes); DuckDB's errors pass."""
    cursor = con.cursor()
    try:
        cursor.register("__matchsql_view_columns", schema.empty_table())
        described = cursor.execute("DESCRIBE __matchsql_view_columns").fetchall()
    finally:
        cursor.close()
    columns = ", ".join(
        f"CAST(NULL AS {row[1]}) AS " + exp.to_identifier(row[0], quoted=True).sql(dialect="duckdb")
        for row in described
    )
    if not columns:
        raise SemanticError("a view needs at least one column")
    head = (
        "CREATE "
        + ("OR REPLACE " if create.replace else "")
        + ("TEMPORARY " if create.temporary else "")
        + "VIEW "
        + ("IF NOT EXISTS " if create.if_not_exists else "")
    )
    if create.if_not_exists and _exists(con, create.name):
        return
    con.execute(f"{head}{create.name} AS SELECT {columns} WHERE error({quote(STUB_MESSAGE)})")
    con.execute(f"COMMENT ON VIEW {create.name} IS {quote(MARKER + stored)}")


def _exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    try:
        con.execute(f"SELECT * FROM {name} LIMIT 0")
    except duckdb.CatalogException:
        return False
    return True
