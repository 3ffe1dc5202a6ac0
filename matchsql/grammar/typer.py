"""Type DEFINE/MEASURES expressions by asking DuckDB.

Rather than re-implementing DuckDB's type rules, each expression is turned
into an ordinary SQL expression with the same result type and bound by
DuckDB against a zero-row relation with the input schema:

* navigation (``PREV(A.x)``) and ``RUNNING``/``FINAL`` are replaced by their
  argument (navigation does not change a value's type);
* ``A.x`` becomes the plain column ``x``; ``COUNT(A.*)`` becomes ``COUNT(*)``;
* ``CLASSIFIER()`` becomes a VARCHAR NULL, ``MATCH_NUMBER()`` a BIGINT NULL;
* aggregates become window aggregates ``agg(...) OVER ()`` so they can mix
  with row-level values as they do in MATCH_RECOGNIZE.

The result's Arrow schema is what DuckDB itself would export, so measure
types agree with the rest of the query. When binding fails, subexpressions
are bound one by one, innermost first, so the error points at the smallest
offending piece of the user's text.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
from sqlglot import exp

from matchsql.errors import CatalogError, Error, SemanticError, TypeMismatchError
from matchsql.expr.duckdb_calls import duckdb_type
from matchsql.grammar.checks import position
from matchsql.grammar.duckdb_catalog import aggregate_names, is_any_aggregate
from matchsql.plan.row_functions import Classifier, MatchNumber, Navigation, PatternSemantics

__all__ = ["ExpressionTyper"]

#: DuckDB types whose Arrow form no setting changes (strings, timestamps with a zone,
#: HUGEINT and others depend on settings): a projection of only these is typed without
#: running it, which was a third of typing a statement's DEFINE and MEASURES.
_PLAIN_ARROW = {
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INTEGER": pa.int32(),
    "BIGINT": pa.int64(),
    "UTINYINT": pa.uint8(),
    "USMALLINT": pa.uint16(),
    "UINTEGER": pa.uint32(),
    "UBIGINT": pa.uint64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "DATE": pa.date32(),
}

# Leaves that cannot fail to bind on their own; probing them is wasted work.
_LEAVES = (exp.Column, exp.Literal, exp.Identifier, exp.Null, exp.Boolean, exp.DataType, exp.Star)


#: Expressions typed by one projection when priming: a projection of 1,000 columns
#: needs DuckDB blocks that a capped address space may refuse, and then every
#: expression was typed on its own (a round trip each: 1,000 measures took 5-10 s).
PRIME_CHUNK = 128

#: Types whose Arrow form a cast cannot take back to them: a UHUGEINT above 10^38
#: leaves as a wrapped decimal128(38, 0), a BIT's bytes mean another thing as a BLOB.
_NO_WAY_BACK = frozenset(("UHUGEINT", "BIT", "BIGNUM", "VARINT"))


def cast_back(arrow_type: pa.DataType, name: str) -> str | None:
    """``name``, DuckDB's type of a column that leaves as ``arrow_type``, where DuckDB
    reads ``arrow_type`` as another type and a cast takes it back (HUGEINT: Arrow's
    decimal128(38, 0); UUID, JSON: strings; an ENUM: a dictionary); else None."""
    kept = duckdb_type(arrow_type) in (name, None) or name in _NO_WAY_BACK
    return None if kept else name


class ExpressionTyper:
    """Binds expressions over an empty relation with ``schema``."""

    def __init__(self, con: duckdb.DuckDBPyConnection, schema: pa.Schema, sql: str) -> None:
        self.relation = con.from_arrow(schema.empty_table())
        # DuckDB's aggregates sqlglot parses as anonymous calls (histogram, entropy, ...)
        self.aggregates = aggregate_names(con)
        self.sql = sql
        # Types bound ahead by prime(): plain SQL text -> (DuckDB type name, Arrow field).
        self._known: dict[str, tuple[str, pa.Field]] = {}
        # Each expression's plain SQL text, by the expression (held, so its id stays its
        # own): priming and typing it then build its stand-in once.
        self._texts: dict[int, tuple[exp.Expr, str]] = {}

    def _text(self, expr: exp.Expr) -> str:
        held = self._texts.get(id(expr))
        if held is None or held[0] is not expr:
            held = self._texts[id(expr)] = (
                expr,
                to_plain_sql(expr, self.aggregates).sql(dialect="duckdb"),
            )
        return held[1]

    def prime(self, exprs: list[exp.Expr]) -> None:
        """Bind ``exprs`` in a DuckDB query per :data:`PRIME_CHUNK` of them, so that
        typing them later costs no round trip (each costs a few ms; a query has
        several). Failures are left to the one-by-one typing, which locates them."""
        texts = list(dict.fromkeys(self._text(e) for e in exprs))
        for start in range(0, len(texts), PRIME_CHUNK):
            self._prime_texts(texts[start : start + PRIME_CHUNK])

    def _prime_texts(self, texts: list[str]) -> None:
        select = ", ".join(f"{text} AS v{i}" for i, text in enumerate(texts))
        try:
            relation = self.relation.select(select)
            types = [str(t) for t in relation.types]
            if all(t in _PLAIN_ARROW for t in types):
                fields = [pa.field("v", _PLAIN_ARROW[t]) for t in types]
            else:
                schema = relation.to_arrow_table().schema
                fields = [schema.field(i).with_name("v") for i in range(len(texts))]
        except duckdb.Error:
            return
        for text, type_, field in zip(texts, types, fields):
            self._known[text] = (type_, field)

    def arrow_type(self, expr: exp.Expr) -> pa.DataType:
        """Arrow type of ``expr``'s value, raising a located matchsql error."""
        return self.field(expr).type

    def duckdb_type(self, expr: exp.Expr) -> str:
        """DuckDB's name for the type of ``expr`` (e.g. ``BOOLEAN``)."""
        known = self._known.get(self._text(expr))
        if known is not None:
            return known[0]
        try:
            return str(self._bind(to_plain_sql(expr, self.aggregates)).types[0])
        except duckdb.Error as exc:
            raise self._locate(expr, exc) from None

    def typed(self, expr: exp.Expr) -> tuple[pa.Field, str | None]:
        """``expr``'s Arrow field, and DuckDB's name for its type where DuckDB would read
        that field as another type (HUGEINT: Arrow's decimal128(38, 0); UUID: a string),
        else None; from one binding."""
        known = self._known.get(self._text(expr))
        if known is not None:
            field, name = known[1], known[0]
        else:
            try:
                relation = self._bind(to_plain_sql(expr, self.aggregates))
                field, name = relation.to_arrow_table().schema.field(0), str(relation.types[0])
            except duckdb.Error as exc:
                raise self._locate(expr, exc) from None
        return field, cast_back(field.type, name)

    def field(self, expr: exp.Expr) -> pa.Field:
        known = self._known.get(self._text(expr))
        if known is not None:
            return known[1]
        try:
            return self._bind(to_plain_sql(expr, self.aggregates)).to_arrow_table().schema.field(0)
        except duckdb.Error as exc:
            raise self._locate(expr, exc) from None

    def _bind(self, plain: exp.Expr) -> duckdb.DuckDBPyRelation:
        text = plain.sql(dialect="duckdb")
        # A projection of the relation: DuckDB binds it without the temporary view a
        # query over the relation creates and drops (half the time of typing a statement).
        return self.relation.select(f"{text} AS v")

    def _locate(self, expr: exp.Expr, exc: duckdb.Error) -> Error:
        """Find the innermost subexpression that fails and report it there."""
        culprit, error = expr, exc
        for sub in _post_order(expr):
            if sub is expr or isinstance(sub, _LEAVES):
                continue
            try:
                self._bind(to_plain_sql(sub, self.aggregates))
            except (
                duckdb.BinderException,
                duckdb.CatalogException,
                duckdb.ConversionException,
            ) as sub_exc:
                culprit, error = sub, sub_exc
                break
            except duckdb.Error:
                continue  # not an expression on its own (e.g. a CASE branch)
        return _translate(error, self.sql, position(culprit))


def _post_order(node: exp.Expr):
    for child in node.iter_expressions():
        yield from _post_order(child)
    yield node


def _translate(exc: duckdb.Error, sql: str, offset: int | None) -> Error:
    message = str(exc).split("\n")[0]
    for prefix in ("Binder Error: ", "Catalog Error: ", "Conversion Error: "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
    if isinstance(exc, duckdb.CatalogException):
        return CatalogError(message, sql=sql, offset=offset)
    if isinstance(exc, (duckdb.BinderException, duckdb.ConversionException)):
        return TypeMismatchError(message, sql=sql, offset=offset)
    return SemanticError(message, sql=sql, offset=offset)


def to_plain_sql(expr: exp.Expr, aggregates: frozenset[str] = frozenset()) -> exp.Expr:
    """The row-level SQL stand-in for a MATCH_RECOGNIZE expression (see module doc);
    ``aggregates``: the names of DuckDB's aggregates."""

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, (Navigation, PatternSemantics)):
            return node.this
        if isinstance(node, Classifier):
            return _typed_null("VARCHAR", node)
        if isinstance(node, MatchNumber):
            return _typed_null("BIGINT", node)
        if isinstance(node, exp.Column) and node.args.get("table") is not None:
            if isinstance(node.this, exp.Star):
                return exp.Star()
            return exp.Column(this=node.this.copy())
        return node

    plain = _bottom_up(expr.copy(), visit)
    if _aggregate_call(plain, aggregates):  # replace() cannot swap the root: wrap it here
        window = exp.Window(this=plain)
        window.meta.update(plain.meta)
        return window
    calls = [
        n
        for n in plain.walk()
        if _aggregate_call(n, aggregates) and not isinstance(n, exp.Filter | exp.IgnoreNulls)
    ]
    for agg in calls:
        # ``agg FILTER (WHERE ...)`` is one call: the window goes around both (and around
        # the IGNORE NULLS that DuckDB's dialect puts on ``any_value``).
        call = agg
        while isinstance(call.parent, exp.Filter | exp.IgnoreNulls):
            call = call.parent
        if not isinstance(call.parent, exp.Window):
            window = exp.Window(this=call.copy())
            window.meta.update(call.meta)
            call.replace(window)
    return plain


def _aggregate_call(node: exp.Expr, aggregates: frozenset[str]) -> bool:
    """An aggregate, with its FILTER clause if it has one."""
    while isinstance(node, exp.Filter | exp.IgnoreNulls):
        node = node.this
    return is_any_aggregate(node, aggregates)


def _bottom_up(node: exp.Expr, fun) -> exp.Expr:
    """Apply ``fun`` to every node, children first (so nested navigation unwraps fully)."""
    for child in list(node.iter_expressions()):
        new = _bottom_up(child, fun)
        if new is not child:
            child.replace(new)
    return fun(node)


def _typed_null(type_name: str, origin: exp.Expr) -> exp.Expr:
    cast = exp.Cast(this=exp.Null(), to=exp.DataType.build(type_name))
    cast.meta.update(origin.meta)
    return cast
