"""The input query of a MATCH_RECOGNIZE: its DuckDB SQL, narrowed to the columns the
matchers read where that is safe, and its schema as DuckDB exports it.

Kept apart from the statement handler (:mod:`matchsql.session.matching`) because the
text is built in several forms (sorted, in the input's own order, narrowed) that
EXPLAIN needs too, and each form must keep the input's rows and their order the same.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import duckdb
import pyarrow as pa
from sqlglot import exp

from matchsql.engine.compiled_query import CompiledMatch
from matchsql.errors import Error
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.subqueries import visible_ctes
from matchsql.plan.spec import select_list
from matchsql.session.query_shape import input_error_offset

_POSITION = "__matchsql_input_position"


@dataclasses.dataclass(frozen=True)
class InputText:
    """A MATCH_RECOGNIZE's input as SQL pieces, rendered once: a statement builds its
    input query in several forms (sorted, in the input's own order, narrowed to the
    columns read), each a sqlglot rendering of the same clauses otherwise."""

    source: str
    keys: list[str]  # PARTITION BY then ORDER BY items
    partition_names: list[str]  # the partition columns, unqualified
    ordered: bool  # whether there is an ORDER BY
    ctes: str  # "WITH ... " of the CTEs visible to the input, or ""

    @classmethod
    def of(cls, node: MatchRecognizeTable) -> InputText:
        keys = [p.sql(dialect="duckdb") for p in node.args.get("partition_by") or []]
        order = node.args.get("order")
        if order is not None:
            keys += [o.sql(dialect="duckdb") for o in order.expressions]
        ctes = visible_ctes(node)
        return cls(
            node.this.sql(dialect="duckdb"),
            keys,
            [_column_name(p) for p in node.args.get("partition_by") or []],
            order is not None,
            "WITH " + ", ".join(c.sql(dialect="duckdb") for c in ctes) + " " if ctes else "",
        )

    def query(
        self,
        columns: list[str] | None = None,
        sort: bool = True,
        derived: dict[str, str] | None = None,
    ) -> str:
        """The input query (see :func:`input_query`), with the ``derived`` columns (name
        -> SQL) that ``columns`` names (all of them where ``columns`` is None)."""
        select = select_list(columns, derived or {})
        keys = self.keys if sort else []
        if keys and not self.ordered:
            # Without ORDER BY a partition keeps the input's order; DuckDB's sort is
            # not stable, so the input position breaks ties between equal keys.
            inner = select  # the window carries no other column
            select = f"* EXCLUDE ({_POSITION})" if columns is None else select_list(columns, {})
            query = (
                f"SELECT {select} FROM (SELECT {inner}, row_number() OVER () "
                f"AS {_POSITION} FROM {self.source}) ORDER BY "
                + ", ".join(self.partition_names)
                + f", {_POSITION}"
            )
        else:
            query = f"SELECT {select} FROM {self.source}"
            if keys:
                query += " ORDER BY " + ", ".join(keys)
        return self.ctes + query


def input_query(
    node: MatchRecognizeTable, columns: list[str] | None = None, sort: bool = True
) -> str:
    """DuckDB SQL for the row pattern input table, sorted by partition and order keys
    (in the input's own order when not ``sort``).

    CTEs of the enclosing statement that precede ``node`` stay visible.
    ``columns``, when given, are the only input columns selected.
    """
    return InputText.of(node).query(columns, sort)


def narrowed(text: InputText, compiled: CompiledMatch) -> tuple[CompiledMatch, str] | None:
    """ONE ROW PER MATCH reads only the PARTITION BY and ORDER BY columns and
    those DEFINE and MEASURES name: the query and input query of just those
    (DuckDB then exports no other column), or None where all are needed.

    Analysis already resolved every column reference of DEFINE and MEASURES
    to an exact input column name (``exp.Column`` nodes), and nothing else in
    a ONE ROW PER MATCH spec depends on the other columns, so the narrow spec
    is the same spec over fewer columns.
    """
    spec = compiled.spec
    schema = spec.columns
    names = schema.names
    if spec.rows_per_match.all_rows or len(set(names)) != len(names):
        return None
    used = set(spec.partition_by) | set(spec.order_by)
    folded = {name.lower(): name for name in names}
    for expr in [*spec.defines.values(), *(m.expr for m in spec.measures)]:
        for column in expr.find_all(exp.Column):
            name = column.name if column.name in names else folded.get(column.name.lower())
            if name is not None:
                used.add(name)
    if len(used) == len(names) or not used <= set(names):
        return None
    fields = [f for f in schema if f.name in used]
    narrow = compiled.over(pa.schema(fields))
    if not narrow.spec.output_schema().equals(spec.output_schema()):
        return None
    return narrow, text.query([f.name for f in fields], derived=spec.derived)


def typed_input_schema(
    cursor: duckdb.DuckDBPyConnection,
    input_sql: str,
    node: MatchRecognizeTable,
    statement: str,
    translate: Callable[[duckdb.Error], Error],
) -> tuple[pa.Schema, list[str]]:
    """The input's Arrow schema and DuckDB's names of its column types; an error in the
    input query is pointed at the MATCH_RECOGNIZE's input in ``statement``."""
    try:
        relation = cursor.sql(f"SELECT * FROM ({input_sql}) LIMIT 0")
        return relation.to_arrow_table().schema, [str(kind) for kind in relation.types]
    except duckdb.Error as exc:
        err = translate(exc)
        offset = input_error_offset(err.message, node)
        raise type(err)(err.message, sql=statement, offset=offset) from None


def _column_name(column: exp.Expression) -> str:
    """A partition column as an unqualified identifier, for use outside its table's scope."""
    return exp.to_identifier(column.name, quoted=True).sql(dialect="duckdb")
