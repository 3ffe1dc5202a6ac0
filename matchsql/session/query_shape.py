"""The shape of a parsed statement around its MATCH_RECOGNIZE table factors.

Shared by the executor and the stream statements, which both decide from it
how a statement runs; it depends on nothing of either.
"""

from __future__ import annotations

import ast
import re

import sqlglot
import sqlglot.errors
from sqlglot import exp

from matchsql.errors import Error
from matchsql.grammar.checks import offset_of
from matchsql.grammar.dialect import first_offset
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse, parsed


def direct_select(tree, nodes: list, limit_ok: bool = False):
    """The MATCH_RECOGNIZE of ``SELECT * FROM <row pattern recognition>`` with no other
    clause, whose result is exactly that table factor's output; None for any other
    statement. ``limit_ok``: a ``LIMIT n`` (:func:`plain_limit`) is allowed too; the
    caller then keeps the first n rows."""
    if len(nodes) != 1 or not isinstance(tree, exp.Select):
        return None
    if limit_ok and tree.args.get("limit") is not None and plain_limit(tree) is not None:
        tree = tree.copy()
        tree.set("limit", None)
        nodes = [next(tree.find_all(type(nodes[0]), bfs=False))]
    node = nodes[0]
    from_ = tree.args.get("from_") or tree.args.get("from")
    alias = node.args.get("alias")
    plain = (
        from_ is not None
        and from_.this is node
        and len(tree.expressions) == 1
        and isinstance(tree.expressions[0], exp.Star)
        and not (isinstance(alias, exp.TableAlias) and alias.columns)
        and not any(
            tree.args.get(k)
            for k in (
                "joins",
                "where",
                "group",
                "having",
                "order",
                "limit",
                "offset",
                "qualify",
                "distinct",
                "with_",
                "with",
                "windows",
                "laterals",
                "pivots",
            )
        )
    )
    return node if plain else None


def prefix_limit(tree, node) -> int | None:
    """n of a statement that reads at most the first n rows of MATCH_RECOGNIZE ``node``
    (``SELECT <columns> FROM <node> LIMIT n``); None where it may read more or all of
    them (WHERE, ORDER BY, GROUP BY, DISTINCT, aggregates, windows, joins) or has no
    plain LIMIT."""
    if not isinstance(tree, exp.Select):
        return None
    limit = plain_limit(tree)
    from_ = tree.args.get("from_") or tree.args.get("from")
    if (
        limit is None
        or from_ is None
        or from_.this is not node
        or any(
            tree.args.get(k)
            for k in (
                "joins",
                "where",
                "group",
                "having",
                "order",
                "qualify",
                "distinct",
                "windows",
                "laterals",
                "pivots",
            )
        )
    ):
        return None
    for item in tree.expressions:
        if item.find(exp.AggFunc, exp.Window) is not None:
            return None
    return limit


def plain_limit(tree) -> int | None:
    """n of ``LIMIT n`` with a whole-number literal n; None for no LIMIT or any other."""
    limit = tree.args.get("limit")
    if not isinstance(limit, exp.Limit) or limit.args.get("offset") is not None:
        return None
    value = limit.args.get("expression")
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        return int(value.this)
    return None


def partition_columns(sql: str, columns: list[str]) -> list[str]:
    """The columns of a result (named ``columns``) that are a PARTITION BY column of a
    MATCH_RECOGNIZE in ``sql``: a plot draws one line per partition along them, because
    match numbers count per partition. Empty when there are none or ``sql`` does not parse."""
    try:
        trees = parsed(sql)  # read only
    except Error:
        return []
    named = {c.lower(): c for c in columns}
    found: list[str] = []
    for tree in trees:
        for node in tree.find_all(MatchRecognizeTable):
            for key in node.args.get("partition_by") or []:
                if isinstance(key, exp.Column) and key.name.lower() in named:
                    found.append(named[key.name.lower()])
    return list(dict.fromkeys(found))


#: A runtime error's message -> the kind of node of a DEFINE or MEASURES expression that
#: caused it (the values of :mod:`matchsql.expr.values` know no positions).
_DIVISIONS = (
    ("division by zero in //", exp.IntDiv),
    ("division by zero in %", exp.Mod),
    ("cannot divide", exp.Div),
)
#: DuckDB's division by zero in an expression over one row it computes (a derived column
#: of the input scan): the message names the division as DuckDB renders it.
_DUCKDB_DIVISION = re.compile(r"Division by zero in expression \((.*)\)\. ", re.S)
#: A value the message quotes (Python's repr of a string): the string literal written.
_QUOTED = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")


def runtime_offset(message: str, sql: str) -> int | None:
    """Where in ``sql`` the DEFINE or MEASURES expression that raised ``message`` at run
    time is: the divisor of a failed division, the string literal a failed comparison or
    cast quotes. None when the statement has no such node (the error keeps no position)."""
    try:
        trees = parse(sql)
    except Error:
        return None
    expressions = [
        expression
        for tree in trees
        for node in tree.find_all(MatchRecognizeTable)
        for expression in _row_expressions(node)
    ]
    for text, kind in _DIVISIONS:
        if message.startswith(text):
            for expression in expressions:
                for found in expression.find_all(kind):
                    return first_offset(found.expression)
    named = _DUCKDB_DIVISION.match(message)
    if named is not None:
        return _named_division(named.group(1), expressions)
    quoted = _QUOTED.search(message)
    if quoted is not None:
        value = ast.literal_eval(quoted.group(0))
        for expression in expressions:
            for literal in expression.find_all(exp.Literal):
                if literal.is_string and literal.this == value:
                    return first_offset(literal)
    return None


def _named_division(text: str, expressions: list[exp.Expression]) -> int | None:
    """The divisor of the division among ``expressions`` that DuckDB names as ``text``
    (``price // 0.0``: its rendering of ``price // 0``): of the divisions of that kind,
    the one whose operands are the named ones, else the first."""
    try:
        named = sqlglot.parse_one(text, read="duckdb")
    except sqlglot.errors.SqlglotError:
        return None
    if not isinstance(named, (exp.IntDiv, exp.Mod, exp.Div)):
        return None
    found = [node for expression in expressions for node in expression.find_all(type(named))]
    if not found:
        return None
    best = max(
        found,
        key=lambda node: _same(node.expression, named.expression) + _same(node.this, named.this),
    )
    return first_offset(best.expression)


def _same(ours: exp.Expression, theirs: exp.Expression) -> int:
    """1 where DuckDB's rendering ``theirs`` is the operand ``ours`` (numbers by value)."""
    if (
        isinstance(ours, exp.Literal)
        and isinstance(theirs, exp.Literal)
        and not ours.is_string
        and not theirs.is_string
    ):
        try:
            return int(float(ours.this) == float(theirs.this))
        except ValueError:
            return 0
    return int(
        ours.sql(dialect="duckdb").lower().replace('"', "")
        == theirs.sql(dialect="duckdb").lower().replace('"', "")
    )


def _row_expressions(node: MatchRecognizeTable) -> list[exp.Expression]:
    """The DEFINE conditions and MEASURES expressions of ``node``, in that order."""
    defines = [define.expression for define in node.args.get("define") or []]
    measures = [measure.this for measure in node.args.get("measures") or []]
    return defines + measures


_MISSING_COLUMN = re.compile(r'column "([^"]+)" not found', re.IGNORECASE)


def input_error_offset(message: str, node: MatchRecognizeTable) -> int | None:
    """Where an error of ``node``'s input query points: at the PARTITION BY or ORDER BY
    key that names a column the input lacks (DuckDB's message names it), else at the
    input itself."""
    missing = _MISSING_COLUMN.search(message)
    if missing is not None:
        name = missing.group(1).lower()
        order = node.args.get("order")
        keys = [
            *(node.args.get("partition_by") or []),
            *(order.expressions if order is not None else []),
        ]
        for key in keys:
            for column in key.find_all(exp.Column):
                if column.name.lower() == name:
                    return first_offset(column)
    return offset_of(node.this)
