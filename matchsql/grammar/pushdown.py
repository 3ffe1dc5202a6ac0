"""Push the SQL of DEFINE and MEASURES that reads one row down into DuckDB.

A subexpression whose column references all read the same row (the current
row, the last row of one variable, or one navigated row: ``lower(A.sym)``,
``json_extract_string(PREV(js), '$.a')``) needs no pattern matcher: it is a
function of that row alone. Such a subexpression becomes a *derived column*
that DuckDB computes for every input row in the input scan, and the
expression reads that column at the same row instead (``A.__mr_d0``,
``PREV(__mr_d0)``). Every DuckDB function, cast and type then works inside a
pattern with DuckDB's own values, NULL rules and errors, and the engine's
backends see only a column read.

Two limits keep the rewrite exact:

* A navigation or a variable can point at no row (``PREV`` at a partition's
  first row, ``A.x`` before ``A`` matched); every column read there is NULL. A
  derived column read at no row is NULL too, so a subexpression is pushed down
  only where DuckDB says its value over an all-NULL row is NULL
  (``coalesce(PREV(x), 0)`` is not, and keeps its ``coalesce`` in the engine;
  its argument may still be pushed).
* Only subexpressions that hold something beyond the engine's own arithmetic,
  comparisons and boolean logic are pushed: ``A.price > PREV(price)`` stays
  with the compiled paths, which evaluate it without an extra column.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
from sqlglot import exp

from matchsql.grammar.dialect import MatchSQL
from matchsql.grammar.duckdb_catalog import aggregate_names, is_any_aggregate
from matchsql.plan.row_functions import Classifier, MatchNumber, Navigation, PatternSemantics

__all__ = ["DERIVED_PREFIX", "PushDown", "lambda_variable", "native"]

#: Names of derived columns (numbered past any input column of the same name).
DERIVED_PREFIX = "__mr_d"

#: Nodes every backend of the engine evaluates itself; a subexpression made of these
#: alone is not worth a derived column.
_NATIVE = (
    exp.Column,
    exp.Literal,
    exp.Null,
    exp.Boolean,
    exp.Paren,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Neg,
    exp.EQ,
    exp.NEQ,
    exp.LT,
    exp.LTE,
    exp.GT,
    exp.GTE,
    exp.And,
    exp.Or,
    exp.Not,
    exp.Is,
    exp.Between,
    exp.In,
    exp.Abs,
)
#: Parts of an expression that are not values of their own (a WHEN branch, a sort key,
#: a named argument, a slice, a lambda): never replaced by a column.
_PARTS = (
    exp.If,
    exp.Ordered,
    exp.Order,
    exp.Var,
    exp.Identifier,
    exp.PropertyEQ,
    exp.Kwarg,
    exp.Slice,
    exp.Lambda,
    exp.DataType,
    exp.DataTypeParam,
    exp.Tuple,
)
#: The shape of an unqualified read of the current row.
_CURRENT_ROW: tuple = ((), None)
#: Nodes only the pattern matcher knows; a subexpression holding one stays.
_PATTERN = (Classifier, MatchNumber, PatternSemantics, exp.Star, exp.Subquery, exp.Select)


def native(node: exp.Expr) -> bool:
    """Whether every backend of the engine evaluates ``node`` (given its arguments)."""
    return isinstance(node, _NATIVE)


def lambda_variable(column: exp.Column) -> bool:
    """Whether ``column`` names a parameter of an enclosing lambda (``x -> x + 1``)."""
    if column.table:
        return False
    node = column.parent
    while node is not None:
        if isinstance(node, exp.Lambda) and any(p.name == column.name for p in node.expressions):
            return True
        node = node.parent
    return False


def _chain(node: exp.Expr) -> tuple[tuple, exp.Column] | None:
    """A navigation chain down to one column: its shape and the column, else None.

    The shape holds every navigation's kind, offset and RUNNING/FINAL and the column's
    qualifier, so two reads of one shape read the same row."""
    steps: list[tuple] = []
    while True:
        if isinstance(node, exp.Paren):
            node = node.this
        elif isinstance(node, PatternSemantics):
            steps.append(("final", node.final))
            node = node.this
        elif isinstance(node, Navigation):
            steps.append((node.kind, node.offset))
            node = node.this
        elif isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            return (tuple(steps), node.table.upper() if node.table else None), node
        else:
            return None


@dataclass
class _Candidate:
    node: exp.Expr
    shape: tuple
    read: exp.Expr  # the first read of the shape: replaced by the derived column
    sql: str  # the subexpression over the input row, in DuckDB's dialect


@dataclass
class PushDown:
    """The derived columns of one MATCH_RECOGNIZE, collected over its expressions.

    ``schema`` is the input relation's; ``con`` a DuckDB cursor that types the
    derived columns and tells which of them are NULL over an all-NULL row.
    """

    schema: pa.Schema
    con: duckdb.DuckDBPyConnection
    #: derived column name -> its SQL over the input row (DuckDB's dialect)
    columns: dict[str, str] = field(default_factory=dict)
    fields: list[pa.Field] = field(default_factory=list)
    _by_sql: dict[str, str] = field(default_factory=dict)
    #: SQL text -> (whether it is NULL over an all-NULL row, its type); a text DuckDB
    #: cannot evaluate there has no type and is never pushed
    _strict: dict[str, tuple[bool, pa.DataType | None]] = field(default_factory=dict)
    _present: frozenset[tuple] = frozenset()
    _aggregates: frozenset[str] | None = None
    _null_row: duckdb.DuckDBPyRelation | None = None

    def is_aggregate(self, node: exp.Expr) -> bool:
        """Whether ``node`` is an aggregate call (by DuckDB's catalog too)."""
        if self._aggregates is None:
            self._aggregates = aggregate_names(self.con)
        return is_any_aggregate(node, self._aggregates)

    def rewrite(self, expr: exp.Expr, present: frozenset[tuple] = frozenset()) -> exp.Expr:
        """``expr`` (a copy) reading a derived column wherever one row suffices.

        ``present`` are the shapes of reads that always find their row (in a DEFINE, the
        current row): a subexpression reading one of them need not be NULL over NULLs.

        Rounds: the maximal candidates are judged by DuckDB; one that is not NULL over an
        all-NULL row gives way to its parts; the exact ones are replaced, after which a
        larger expression around a replaced read may have become a candidate."""
        root = exp.Paren(this=expr.copy())
        self._present = present
        while True:
            candidates: list[_Candidate] = []
            self._collect(root.this, candidates)
            unknown = [c.sql for c in candidates if c.sql not in self._strict]
            if unknown:
                self._judge(unknown)
                continue
            if not candidates:
                return root.this
            for c in candidates:
                type_ = self._strict[c.sql][1]
                assert type_ is not None  # _collect takes only typed candidates
                c.node.replace(self._read(c, type_))

    # -- finding candidates --------------------------------------------------------------

    def _collect(self, node: exp.Expr, out: list[_Candidate]) -> None:
        """The maximal candidates at or below ``node``."""
        candidate = self._candidate(node)
        if candidate is not None:
            exact, type_ = self._strict.get(candidate.sql, (True, pa.null()))
            # An aggregate's argument always reads a row, as does a read of ``present``.
            if type_ is not None and (
                exact or candidate.shape in self._present or self._aggregated(candidate.node)
            ):
                out.append(candidate)
                return
        for child in node.iter_expressions():
            self._collect(child, out)

    def _aggregated(self, node: exp.Expr) -> bool:
        """Whether ``node`` lies inside an aggregate's arguments."""
        parent = node.parent
        while parent is not None:
            if self.is_aggregate(parent):
                return True
            parent = parent.parent
        return False

    def _candidate(self, node: exp.Expr) -> _Candidate | None:
        if (
            isinstance(node, (exp.Column, Navigation, *_PATTERN, *_PARTS))
            and not (isinstance(node, exp.If) and not isinstance(node.parent, exp.Case))
            or self.is_aggregate(node)
        ):
            return None
        shape: tuple | None = None
        first: exp.Expr | None = None
        reads: list[tuple[exp.Expr, exp.Column]] = []
        plain = True
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, _PATTERN) or self.is_aggregate(n):
                return None
            if isinstance(n, Navigation | exp.Column):
                if isinstance(n, exp.Column) and lambda_variable(n):
                    continue
                found = _chain(n)
                if found is None:
                    return None
                if shape is None:
                    shape, first = found[0], n
                elif found[0] != shape:
                    return None
                reads.append((n, found[1]))
                continue
            plain = plain and native(n)
            stack.extend(n.iter_expressions())
        if plain:
            return None
        if shape is None or first is None:
            # It reads no column (``CAST('...' AS UUID)``, ``uuid()``): DuckDB computes it
            # at each row as it would in a SELECT, read at the current row.
            shape, first = _CURRENT_ROW, exp.column("_")
        return _Candidate(node, shape, first, self._input_sql(node, reads))

    def _input_sql(self, node: exp.Expr, reads: list[tuple[exp.Expr, exp.Column]]) -> str:
        """``node`` over the input row: every read becomes its plain column (a derived
        column its own SQL)."""
        plain = node.copy()
        copies = {id(n): c for n, c in zip(node.walk(), plain.walk())}
        for read, column in reads:
            target = copies[id(read)]
            name = column.name
            if name in self.columns:
                replacement: exp.Expr = exp.Paren(
                    this=exp.maybe_parse(self.columns[name], dialect=MatchSQL)
                )
            else:
                replacement = exp.column(exp.to_identifier(name, quoted=True))
            if target is plain:
                plain = replacement
            else:
                target.replace(replacement)
        return plain.sql(dialect=MatchSQL)

    # -- judging and naming ----------------------------------------------------------------

    def _judge(self, texts: list[str]) -> None:
        """Type ``texts`` and evaluate them over an all-NULL row, in one DuckDB query
        where that binds (else one by one: a text DuckDB refuses is not pushed)."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._strict]
        if not todo:
            return
        if self._null_row is None:
            # Two rows: an aggregate DuckDB knows by a name sqlglot does not (``mode``)
            # answers one, and is not a function of one row.
            nulls = pa.table({f.name: pa.nulls(2, f.type) for f in self.schema}, schema=self.schema)
            self._null_row = self.con.from_arrow(nulls)
        try:
            self._evaluate(todo)
        except duckdb.Error:
            for text in todo:
                try:
                    self._evaluate([text])
                except duckdb.Error:
                    self._strict[text] = (False, None)

    def _evaluate(self, texts: list[str]) -> None:
        assert self._null_row is not None
        select = ", ".join(f"({text}) AS v{i}" for i, text in enumerate(texts))
        rows = self._null_row.select(select).to_arrow_table()
        for i, text in enumerate(texts):
            column = rows.column(i)
            exact = rows.num_rows == 2 and column.null_count == 2
            self._strict[text] = (exact, rows.schema.field(i).type)

    def _read(self, candidate: _Candidate, type_: pa.DataType) -> exp.Expr:
        """The read that replaces ``candidate``: its shape over the derived column."""
        name = self._by_sql.get(candidate.sql)
        if name is None:
            number = len(self.columns)
            while f"{DERIVED_PREFIX}{number}" in self.schema.names:  # an input column's name
                number += 1
            name = f"{DERIVED_PREFIX}{number}"
            self._by_sql[candidate.sql] = name
            self.columns[name] = candidate.sql
            self.fields.append(pa.field(name, type_))
        read = candidate.read.copy()
        # a candidate's read is a column or a navigation chain down to one (_chain not None)
        column = read if isinstance(read, exp.Column) else _chain(read)[1]  # type: ignore[index]
        column.set("this", exp.to_identifier(name, quoted=True))
        return read
