"""Driver side: turn a query over a DataFrame into a :class:`MatchPlan`.

Spark never sees the query text. The driver parses it with matchsql's own
grammar, checks that it has a shape Spark can run, compiles the
MATCH_RECOGNIZE against the DataFrame's schema (converted to Arrow) exactly as
the embedded engine compiles it against a DuckDB relation
(:func:`matchsql.engine.compiled_query.compile_match`: the same analysis and checks),
and ships the query to the executors as plain data (:func:`plan_data`: its text, the
table's Arrow schema, the settings), where the same compilation builds the same plan
again. So a query is accepted or rejected, and typed, the same way in both places.

Supported shapes (everything else is rejected with a :class:`SemanticError`)::

    SELECT <select list> FROM <table> MATCH_RECOGNIZE (...) [AS alias [(cols)]]
        [WHERE ...] [GROUP BY ...] [HAVING ...] [ORDER BY ...] [LIMIT ...]

``<table>`` is the name the caller gives the DataFrame. The MATCH_RECOGNIZE
runs in the executors; the rest of the statement (if it is more than
``SELECT *``) is translated to Spark SQL by sqlglot and runs in Spark over the
matches. Joins, CTEs, subqueries, set operations and nested
MATCH_RECOGNIZEs are not supported: run those around the returned DataFrame.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import duckdb
import pyarrow as pa
from sqlglot import exp

from matchsql.config import Config
from matchsql.engine.compiled_query import compile_match
from matchsql.errors import ParseError, SemanticError
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse
from matchsql.plan.spec import MatchSpec

# The name of the matches inside the translated outer statement.
MATCHES_VIEW = "__matchsql_spark_matches"
# Extra columns the Spark paths add and drop again.
ROW_ID = "__matchsql_row"
ALL_KEY = "__matchsql_all"
AS_READ = "as_read"


@dataclass
class MatchPlan:
    """Everything an executor needs to run one MATCH_RECOGNIZE, and nothing Spark-specific.

    ``sort_keys`` are DuckDB ORDER BY items (SQL text) that put one
    partition's rows in the order the embedded engine feeds them: the query's
    ORDER BY, or the caller's ``input_order`` when the query has none.
    ``outer_sql`` is the rest of the statement in Spark SQL over
    :data:`MATCHES_VIEW`, or None when it is a plain ``SELECT *``.
    """

    sql: str
    table: str
    spec: MatchSpec
    sort_keys: list[str]
    row_id: bool = False  # sort by the ROW_ID column the driver added (input order as read)
    outer_sql: str | None = None
    # The same order as (column, "ascending"|"descending", "at_start"|"at_end") for
    # pyarrow, when every key is a plain column; see matchsql.integrations.spark.worker.sort_rows.
    arrow_sort: list[tuple[str, str, str]] | None = None
    # What build_plan compiled the query against, for the executors to build it again
    # from (see plan_data): the table's Arrow schema and the input_order given.
    source_schema: pa.Schema | None = None
    input_order: str | tuple[str, ...] | None = None

    @property
    def partition_by(self) -> list[str]:
        return list(self.spec.partition_by)

    def output_schema(self) -> pa.Schema:
        return self.spec.result_schema()


def build_plan(
    query: str,
    table: str,
    schema: pa.Schema,
    *,
    input_order: str | list[str] | tuple[str, ...] | None = None,
    config: Config | None = None,
) -> MatchPlan:
    """Parse and compile ``query``, whose MATCH_RECOGNIZE reads the table ``table``.

    ``schema`` is the table's Arrow schema. ``input_order`` stands in for the
    row order the embedded engine would read a table in when the query has no
    ORDER BY: a column name or list of names (sorted ascending), or
    :data:`AS_READ` for the order in which Spark reads the DataFrame. ``config``'s
    ``max_pattern_size`` limits the pattern, as it does in a session.
    """
    trees = parse(query)
    if len(trees) != 1:
        raise ParseError("expected exactly one statement", sql=query, offset=0)
    tree = trees[0]
    nodes = list(tree.find_all(MatchRecognizeTable))
    if len(nodes) != 1:
        raise SemanticError(
            f"Spark runs statements with exactly one MATCH_RECOGNIZE, this one has {len(nodes)}",
            sql=query,
            offset=0,
        )
    node = nodes[0]
    select = _check_shape(tree, node, table, query)

    con = duckdb.connect()
    try:
        spec = compile_match(node, schema, sql=query, con=con, config=config or Config()).spec
    finally:
        con.close()

    order = node.args.get("order")
    sort_keys = [o.sql(dialect="duckdb") for o in order.expressions] if order is not None else []
    row_id = False
    if not sort_keys:
        if input_order is None:
            raise SemanticError(
                "this MATCH_RECOGNIZE has no ORDER BY: the embedded engine reads rows in "
                "table order, but a Spark DataFrame has no defined row order; add ORDER BY, "
                "or pass input_order=<column(s)> (or input_order='as_read' for the order in "
                "which Spark reads the DataFrame)",
                sql=query,
                offset=0,
            )
        if input_order == AS_READ:
            row_id = True
            sort_keys = [_quote(ROW_ID)]
        else:
            names = [input_order] if isinstance(input_order, str) else list(input_order)
            missing = [n for n in names if n not in schema.names]
            if missing:
                raise SemanticError(f"input_order names unknown column(s) {missing}")
            sort_keys = [_quote(n) for n in names]

    columns = [o.this for o in order.expressions] if order is not None else []
    arrow_sort = _arrow_sort(columns, sort_keys, schema, row_id)

    outer = None
    alias = node.args.get("alias")
    matches = exp.Table(this=exp.to_identifier(MATCHES_VIEW), alias=alias)
    node.replace(matches)
    if not _is_select_star(select, matches):
        outer = select.sql(dialect="spark")
    return MatchPlan(
        sql=query,
        table=table,
        spec=spec,
        sort_keys=sort_keys,
        row_id=row_id,
        outer_sql=outer,
        arrow_sort=arrow_sort,
        source_schema=schema,
        input_order=_order_names(input_order),
    )


def plan_data(plan: MatchPlan, config: Config | None) -> dict[str, Any]:
    """``plan`` and ``config`` as plain data, from which an executor builds them again
    (:func:`matchsql.integrations.spark.worker.shipped_plan`): the query text, the table
    name and schema (Arrow IPC bytes), the input order, and the settings' values. A
    shipped function carries this, not the plan's objects, so that Spark unpickles it
    without matchsql (see :func:`matchsql.integrations.spark.executors.shipped_function`)."""
    if plan.source_schema is None:
        raise ValueError("this MatchPlan was not made by build_plan: no schema to ship")
    return {
        "query": plan.sql,
        "table": plan.table,
        "schema": schema_bytes(plan.source_schema),
        "input_order": plan.input_order,
        "config": config_values(config),
    }


def _order_names(
    input_order: str | list[str] | tuple[str, ...] | None,
) -> str | tuple[str, ...] | None:
    """``input_order`` with a list of names as a tuple (the plan keeps no mutable list)."""
    return (
        input_order if input_order is None or isinstance(input_order, str) else tuple(input_order)
    )


def config_values(config: Config | None) -> tuple[tuple[str, Any], ...] | None:
    """``config``'s settings as ``(name, value)`` pairs in name order, or None for the
    defaults: hashable as they are, so an executor looks its plan up by them directly.

    The values go through :meth:`Config.from_options` here as they will on the
    executors, so a setting out of range fails at the call, not in a task."""
    if config is None:
        return None
    values = asdict(config)
    Config.from_options(values)
    return tuple(sorted(values.items()))


def schema_bytes(schema: pa.Schema) -> bytes:
    """``schema`` as Arrow IPC bytes (read back with ``pa.ipc.read_schema``: data only)."""
    return schema.serialize().to_pybytes()


def _arrow_sort(
    columns: list[exp.Expression], sort_keys: list[str], schema: pa.Schema, row_id: bool
) -> list[tuple[str, str, str]] | None:
    """The DuckDB sort of ``sort_keys`` as pyarrow sort keys, or None.

    Sorting a group in pyarrow is much cheaper than a round trip through
    DuckDB, and gives the same order where both compare values alike (see
    the worker). Direction and NULL placement are asked of DuckDB itself, one
    tiny query per key, so DuckDB's defaults are never guessed.
    """
    if row_id:
        return [(ROW_ID, "ascending", "at_end")]
    names: list[str | None] = []
    if columns:
        for column in columns:
            if not isinstance(column, exp.Column):
                return None
            names.append(_schema_name(column.name, schema))
    else:
        names = [text.strip('"').replace('""', '"') for text in sort_keys]
    con = duckdb.connect()
    try:
        out = []
        for name, text in zip(names, sort_keys):
            if name is None:
                return None
            probe = con.execute(
                f"SELECT x IS NULL, x FROM (VALUES (1), (NULL), (2)) AS t(x) "
                f"ORDER BY {_rename(text, name)}"
            ).fetchall()
            nulls = "at_start" if probe[0][0] else "at_end"
            values = [v for null, v in probe if not null]
            out.append((name, "ascending" if values == [1, 2] else "descending", nulls))
        return out
    except duckdb.Error:
        return None
    finally:
        con.close()


def _schema_name(name: str, schema: pa.Schema) -> str | None:
    if name in schema.names:
        return name
    folded = [n for n in schema.names if n.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def _rename(order_item: str, column: str) -> str:
    """``order_item`` (DuckDB ORDER BY text over ``column``) with the column called ``x``."""
    tree = parse(f"SELECT 1 ORDER BY {order_item}")[0]
    for col in tree.find_all(exp.Column):
        col.replace(exp.column("x"))
    return ", ".join(o.sql(dialect="duckdb") for o in tree.args["order"].expressions)


def _check_shape(tree: exp.Expr, node: exp.Expr, table: str, query: str) -> exp.Select:
    """Reject statements Spark cannot run as one MATCH_RECOGNIZE plus a Spark SQL wrapper;
    ``tree`` as the SELECT the rest of the plan takes it for."""
    source = node.this
    if not isinstance(source, exp.Table) or source.args.get("db") or source.alias:
        raise SemanticError(
            f"under Spark the MATCH_RECOGNIZE input must be the plain table name {table!r}",
            sql=query,
            offset=0,
        )
    if source.name.lower() != table.lower():
        raise SemanticError(
            f"the MATCH_RECOGNIZE reads {source.name!r}, but the DataFrame is named {table!r}",
            sql=query,
            offset=0,
        )
    if not isinstance(tree, exp.Select) or tree.args.get("with_") is not None:
        raise SemanticError(
            "under Spark only SELECT ... FROM <table> MATCH_RECOGNIZE (...) [WHERE/GROUP BY/"
            "ORDER BY/LIMIT] is supported (no CTEs or set operations)",
            sql=query,
            offset=0,
        )
    from_ = tree.args.get("from_") or tree.args.get("from")
    if from_ is None or from_.this is not node or tree.args.get("joins"):
        raise SemanticError(
            "under Spark the MATCH_RECOGNIZE must be the only table of the FROM clause",
            sql=query,
            offset=0,
        )
    for sub in tree.find_all(exp.Subquery, exp.Select):
        if sub is not tree and not _inside(sub, node):
            raise SemanticError(
                "under Spark the statement may not contain subqueries", sql=query, offset=0
            )
    return tree


def _inside(expr: exp.Expr, ancestor: exp.Expr) -> bool:
    parent = expr.parent
    while parent is not None:
        if parent is ancestor:
            return True
        parent = parent.parent
    return False


def _is_select_star(tree: exp.Select, matches: exp.Table) -> bool:
    """True for ``SELECT * FROM matches`` without any other clause or column alias
    (``matches`` the table that stands for the MATCH_RECOGNIZE, the FROM's only one)."""
    if len(tree.expressions) != 1 or not isinstance(tree.expressions[0], exp.Star):
        return False
    alias = matches.args.get("alias")
    if alias is not None and alias.args.get("columns"):
        return False
    extra = {k for k, v in tree.args.items() if v and k not in ("expressions", "from_", "from")}
    return not extra


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
