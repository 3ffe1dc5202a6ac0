"""Uncorrelated subqueries in DEFINE and MEASURES, folded into constants before matching.

A subquery that does not look at the match (Trino allows no other kind in
row pattern recognition) has one value for the whole query. DuckDB
evaluates each one once, here, and the expression keeps a constant in its
place, so every execution path sees only literals:

* a scalar subquery ``(SELECT max(y) FROM o)`` becomes its value, cast to
  the type DuckDB gave it (so that types, and overflow and division rules,
  stay DuckDB's);
* ``x IN (SELECT ...)`` becomes ``x IN (v1, v2, ...)`` over the distinct
  values (and FALSE for an empty result, whatever ``x`` is, as in SQL); past
  :data:`INLINE_VALUES` values, ``x IN (SELECT UNNEST(CAST('[v1, ...]' AS T[])))``
  with the values kept once as a :class:`~matchsql.plan.bound.ValueSet` on the node:
  DuckDB reads the list from one string constant (a hash join where it computes
  the test in the input) and the evaluator looks a value up in the set, where ten
  thousand literal nodes made every pass over the expression take seconds;
* ``EXISTS (SELECT ...)`` becomes TRUE or FALSE.

A subquery that refers to a pattern variable or subset (``A.x``), or uses
navigation, CLASSIFIER or MATCH_NUMBER, is correlated with the match and
rejected with a located :class:`SemanticError`. The statement's CTEs that
the MATCH_RECOGNIZE can see are visible to its subqueries too.
"""

from __future__ import annotations

import datetime
from functools import cache

import duckdb
from sqlglot import exp

from matchsql.errors import (
    CatalogError,
    Error,
    ExecutionError,
    SemanticError,
    one_line,
    without_kind,
)
from matchsql.grammar.checks import position
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.plan.bound import FOLDED, ValueSet
from matchsql.plan.row_functions import Classifier, MatchNumber, Navigation, PatternSemantics

__all__ = ["fold_subqueries", "has_subqueries", "visible_ctes"]

_INTEGERS = frozenset(
    (
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "HUGEINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "UHUGEINT",
    )
)
_FLOATS = frozenset(("FLOAT", "DOUBLE"))
_MATCH_ONLY = (Navigation, Classifier, MatchNumber, PatternSemantics)
#: Up to this many values an IN list stays literals, which every backend evaluates
#: (column-wise too); more become one folded set (see the module docstring).
INLINE_VALUES = 64


def fold_subqueries(
    node: MatchRecognizeTable, names: set[str], sql: str, con: duckdb.DuckDBPyConnection
) -> None:
    """Replace, in place, every subquery of ``node``'s DEFINE and MEASURES by its value.

    ``names`` are the pattern variables and subsets (a subquery must not
    name them); ``sql`` is the statement text errors point into.
    """
    ctes = [c for c in visible_ctes(node) if not any(c.find_all(MatchRecognizeTable))]
    prefix = "WITH " + ", ".join(c.sql(dialect="duckdb") for c in ctes) + " " if ctes else ""
    folder = _Folder(names, sql, con, prefix)
    for item in node.args.get("define") or []:
        item.set("expression", folder.fold(item.expression))
    for measure in node.args.get("measures") or []:
        measure.set("this", folder.fold(measure.this))


def has_subqueries(node: MatchRecognizeTable) -> bool:
    """Whether any clause of ``node`` but its input holds a subquery: analysing it then
    reads table data (:func:`fold_subqueries`, or a WITHIN bound DuckDB evaluates), so
    its result holds values of the moment, which no cache may keep."""
    return any(
        isinstance(sub, exp.Query)
        for name, value in node.args.items()
        if name != "this"
        for item in (value if isinstance(value, list) else [value])
        if isinstance(item, exp.Expr)
        for sub in item.walk()
    )


class _Folder:
    def __init__(
        self, names: set[str], sql: str, con: duckdb.DuckDBPyConnection, prefix: str
    ) -> None:
        self.names = names
        self.sql = sql
        self.con = con
        self.prefix = prefix  # WITH clause of the statement's CTEs visible here

    def error(self, cls: type[Error], message: str, node: exp.Expr) -> Error:
        return cls(message, sql=self.sql, offset=position(node))

    def fold(self, expr: exp.Expr) -> exp.Expr:
        holder = exp.Paren(this=expr)
        while True:
            target = next((n for n in holder.walk() if _is_subquery_use(n)), None)
            if target is None:
                return holder.this
            target.replace(self.constant_for(target))

    def constant_for(self, node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Any | exp.All):
            raise self.error(
                SemanticError,
                "ANY/ALL subqueries are not supported in MATCH_RECOGNIZE; use IN or EXISTS",
                node,
            )
        if isinstance(node, exp.In):
            query = node.args["query"]
            self.check_uncorrelated(query)
            # The distinct values, and the text of their list, which DuckDB reads back
            # exactly (strings quoted where they must be): one run of the subquery.
            kind, rows = self.run(
                query,
                f"SELECT list(v), CAST(list(v) AS VARCHAR) FROM "
                f"(SELECT DISTINCT * FROM ({_select_sql(query)}) AS s) "
                "AS d(v)",
                values=f"SELECT * FROM ({_select_sql(query)})",
            )
            values, text = rows[0]
            if not values:
                return exp.false()  # x IN (empty set) is FALSE, even for a NULL x
            if len(values) > INLINE_VALUES:
                return folded_in(node.this, values, text, kind)
            return exp.In(
                this=node.this,
                expressions=[
                    exp.Null() if v is None else self.literal(v, kind, query) for v in values
                ],
            )
        if isinstance(node, exp.Exists):
            self.check_uncorrelated(node.this)
            _, rows = self.run(node, f"SELECT EXISTS ({_select_sql(node.this)})")
            return exp.Boolean(this=bool(rows[0][0]))
        self.check_uncorrelated(node)
        kind, rows = self.run(node, f"SELECT ({_select_sql(node)}) AS v")
        return self.literal(rows[0][0], kind, node)

    def run(self, node: exp.Expr, text: str, values: str | None = None) -> tuple[str, list[tuple]]:
        """The DuckDB type of the one column ``text`` returns (of ``values``, a query
        over the same values, when ``text`` returns something else), and its rows."""
        try:
            relation = self.con.sql(self.prefix + text)
            typed = relation if values is None else self.con.sql(self.prefix + values)
            types = [str(t) for t in typed.types]
            if len(types) != 1:
                raise self.error(
                    SemanticError,
                    f"a subquery in MATCH_RECOGNIZE must return one column, not {len(types)}",
                    node,
                )
            if not _constant_type(types[0]):
                raise self.error(
                    SemanticError,
                    f"a subquery of type {types[0]} is not "
                    "supported in MATCH_RECOGNIZE expressions",
                    node,
                )
            return types[0], relation.fetchall()
        except duckdb.CatalogException as exc:
            raise self.error(CatalogError, without_kind(one_line(str(exc))), node) from None
        except (duckdb.BinderException, duckdb.ParserException) as exc:
            raise self.error(
                SemanticError,
                f"{without_kind(one_line(str(exc)))} (a subquery in "
                "MATCH_RECOGNIZE cannot refer to the input rows)",
                node,
            ) from None
        except duckdb.Error as exc:
            raise self.error(
                ExecutionError, f"subquery failed: {without_kind(one_line(str(exc)))}", node
            ) from None

    def check_uncorrelated(self, query: exp.Expr) -> None:
        """Reject a subquery that reads the match: Trino forbids those."""
        for sub in query.walk():
            if isinstance(sub, MatchRecognizeTable):
                raise self.error(
                    SemanticError,
                    "MATCH_RECOGNIZE inside a subquery of DEFINE or MEASURES is not supported",
                    sub,
                )
            if isinstance(sub, _MATCH_ONLY):
                raise self.error(
                    SemanticError,
                    "a subquery in MATCH_RECOGNIZE cannot use "
                    "navigation, RUNNING/FINAL, CLASSIFIER or MATCH_NUMBER",
                    sub,
                )
        # DuckDB matches names case-insensitively; a table alias inside the
        # subquery may shadow a pattern variable's name.
        tables = {t.alias_or_name.lower() for t in query.find_all(exp.Table)}
        tables |= {s.alias.lower() for s in query.find_all(exp.Subquery, exp.CTE) if s.alias}
        for column in query.find_all(exp.Column):
            qualifier = column.table
            if (
                qualifier
                and qualifier.lower() not in tables
                and (qualifier in self.names or qualifier.upper() in self.names)
            ):
                raise self.error(
                    SemanticError,
                    f"a subquery in MATCH_RECOGNIZE cannot refer to pattern variable "
                    f"{qualifier.upper()} ({column.sql(dialect='duckdb')}): correlated "
                    "subqueries are not supported",
                    column,
                )

    def literal(self, value: object, kind: str, node: exp.Expr) -> exp.Expr:
        """An expression of DuckDB type ``kind`` (one :func:`_constant_type` accepts) whose
        value is ``value``: a plain literal where DuckDB gives it that type, else a CAST."""
        if value is None:
            return exp.Null() if kind == '"NULL"' else exp.Cast(this=exp.Null(), to=_type(kind))
        if kind == "BOOLEAN":
            return exp.Boolean(this=bool(value))
        if kind == "INTEGER":
            return exp.Literal.number(value)
        if kind == "VARCHAR":
            return exp.Literal.string(str(value))
        if isinstance(value, float):
            text = repr(value)
        elif isinstance(value, datetime.datetime):
            text = value.isoformat(sep=" ")
        elif isinstance(value, datetime.date):
            text = value.isoformat()
        else:
            text = str(value)
        return exp.Cast(this=exp.Literal.string(text), to=_type(kind))


def _constant_type(kind: str) -> bool:
    """Types whose values become literals (or casts of them) the evaluators read back."""
    return (
        kind in _INTEGERS
        or kind in _FLOATS
        or kind.startswith("DECIMAL")
        or kind in ("BOOLEAN", "VARCHAR", "DATE", "TIMESTAMP", '"NULL"')
    )


@cache
def _type(kind: str) -> exp.DataType:
    """The sqlglot type of a DuckDB type name (parsed once: an IN list has one type)."""
    return exp.DataType.build(kind, dialect="duckdb")


def folded_in(value: exp.Expr, values: list[object], text: str, kind: str) -> exp.In:
    """``value IN (SELECT UNNEST(CAST(text AS kind[])))``: ``values`` (DuckDB's results,
    of the :func:`_constant_type` ``kind``) as DuckDB's list ``text`` of them, and kept as
    a :class:`ValueSet` for the evaluator. DuckDB parses the list from one string at run
    time: 500,000 timestamps as a list of literals took it 18 s to bind, as a string
    1.5 s."""
    quoted = "'" + text.replace("'", "''") + "'"
    unnest = exp.Var(this=f"(SELECT UNNEST(CAST({quoted} AS {kind}[])))")
    return exp.In(this=value, field=unnest, **{FOLDED: ValueSet(values)})


def visible_ctes(node: exp.Expr) -> list[exp.CTE]:
    """CTEs that the input of ``node`` may reference, outermost first."""
    visible: list[exp.CTE] = []
    child: exp.Expr | None = node
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.With):
            # ``node`` sits inside one of these CTEs: only the earlier ones are
            # visible, and the owning statement must not add them all again.
            index = next(i for i, cte in enumerate(parent.expressions) if cte is child)
            visible = list(parent.expressions[:index]) + visible
            child = parent.parent
            parent = child.parent if child is not None else None
            continue
        with_ = parent.args.get("with_")
        if isinstance(with_, exp.With):
            visible = list(with_.expressions) + visible
        child, parent = parent, parent.parent
    return visible


def _is_subquery_use(node: exp.Expr) -> bool:
    if isinstance(node, exp.In):
        return node.args.get("query") is not None
    if isinstance(node, exp.Any | exp.All):
        return isinstance(node.this, exp.Subquery | exp.Select)
    return isinstance(node, exp.Exists | exp.Subquery)


def _select_sql(node: exp.Expr) -> str:
    """DuckDB text of the query inside ``node`` (a Subquery or a bare query)."""
    inner = node.this if isinstance(node, exp.Subquery) else node
    return inner.sql(dialect="duckdb")
