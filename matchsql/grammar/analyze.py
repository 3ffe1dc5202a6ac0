"""Semantic analysis: a parsed MATCH_RECOGNIZE plus its input schema -> MatchSpec.

Checks follow Trino's documentation of row pattern recognition (the SQL:2016
feature); where Oracle differs, Trino wins. Every error is located in the
statement text ``sql`` that the node was parsed from.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
from collections.abc import Callable

import duckdb
import pyarrow as pa
from sqlglot import exp

from matchsql.errors import CatalogError, Error, SemanticError, TypeMismatchError
from matchsql.grammar.checks import ExpressionChecker, position
from matchsql.grammar.duckdb_aggregates import DefineAggregates
from matchsql.grammar.duckdb_catalog import aggregate_names
from matchsql.grammar.measure_split import MeasureSplit
from matchsql.grammar.nodes import MatchRecognizeTable, MeasureDef, VariableDef
from matchsql.grammar.pushdown import PushDown
from matchsql.grammar.subqueries import fold_subqueries
from matchsql.grammar.typer import ExpressionTyper
from matchsql.plan.binder import column_candidates
from matchsql.plan.pattern import Exclusion, PatternNode
from matchsql.plan.spec import (
    MatchSpec,
    Measure,
    RowsPerMatch,
    SkipMode,
    WithinBound,
    as_expression,
)

__all__ = ["analyze"]

# Node argument values -> MatchSpec enum member names.
ROWS = {
    None: "ONE",
    "ONE": "ONE",
    "ALL SHOW": "ALL_SHOW_EMPTY",
    "ALL OMIT": "ALL_OMIT_EMPTY",
    "ALL WITH UNMATCHED": "ALL_WITH_UNMATCHED",
}
SKIPS = {
    None: "PAST_LAST_ROW",
    "PAST LAST ROW": "PAST_LAST_ROW",
    "TO NEXT ROW": "TO_NEXT_ROW",
    "TO FIRST": "TO_FIRST",
    "TO LAST": "TO_LAST",
    "TO": "TO_LAST",  # SKIP TO v means SKIP TO LAST v
}


#: Registers a cursor whose queries an interrupt of the statement must stop, and returns
#: the function that unregisters it, which raises the interrupt error when the statement
#: was interrupted meanwhile (the session's executor keeps such cursors).
Watch = Callable[[duckdb.DuckDBPyConnection], Callable[[], None]]


def analyze(
    node: MatchRecognizeTable,
    schema: pa.Schema,
    *,
    sql: str,
    con: duckdb.DuckDBPyConnection,
    watch: Watch | None = None,
) -> MatchSpec:
    """Check ``node`` against ``schema`` (its input relation) and build its MatchSpec.

    ``sql`` is the text ``node`` was parsed from (errors point into it);
    ``con`` is used to let DuckDB type the expressions. ``watch`` gets the cursor that
    analysis runs its DuckDB queries on (a subquery folded into its value may run for
    minutes): an interrupt of the statement reached every cursor but this one, and a
    subquery ran to its end (2.7 s after the interrupt, measured) before it stopped.
    """
    analyzer = _Analyzer(node, schema, sql, con)
    unwatch = watch(analyzer.con) if watch is not None else None
    try:
        spec = analyzer.run()
    finally:
        try:
            if unwatch is not None:
                unwatch()  # an interrupt's error replaces what analysis raised
        finally:
            analyzer.con.close()
    return spec


class _Analyzer:
    def __init__(
        self,
        node: MatchRecognizeTable,
        schema: pa.Schema,
        sql: str,
        con: duckdb.DuckDBPyConnection,
    ) -> None:
        self.node = node
        self.schema = schema
        self.sql = sql
        # A cursor of its own, so that analysing never disturbs a result the
        # caller is still reading from ``con``.
        self.con = con.cursor()
        self.pattern: PatternNode = node.args["pattern"].this
        self.variables = self.pattern.variables()
        # resolve_columns' copies by the expression they copy (held, so its id stays its
        # own): priming the types and checking each expression then read the same copy.
        self._resolved: dict[int, tuple[exp.Expr, exp.Expr]] = {}

    def error(self, cls: type, message: str, where: exp.Expr | int | None) -> Exception:
        offset = where if isinstance(where, int) or where is None else position(where)
        return cls(message, sql=self.sql, offset=offset)

    def run(self) -> MatchSpec:
        subsets = self.subsets()
        names = set(self.variables) | set(subsets)
        skip, skip_var = self.skip(names)
        fold_subqueries(self.node, names, self.sql, self.con)
        checker = ExpressionChecker(self.sql, names, aggregate_names(self.con))

        typer = ExpressionTyper(self.con, self.schema, self.sql)
        self.prime_types(typer)
        defines = self.defines(checker, typer)
        partition_by = [
            self.key_column(e, "PARTITION BY") for e in self.node.args.get("partition_by") or []
        ]
        order_by = [self.key_column(o.this, "ORDER BY") for o in self._order_items()]
        rows = RowsPerMatch[ROWS[self.node.args.get("rows")]]
        self.check_exclusion(rows)
        measures = self.measures(checker, typer, partition_by, rows)
        push = PushDown(self.schema, self.con)
        # A DEFINE always has its current row (unqualified, or qualified by its variable).
        defines = {
            name: push.rewrite(expr, frozenset({((), None), ((), name.upper())}))
            for name, expr in defines.items()
        }
        measures = [
            dataclasses.replace(m, expr=as_expression(push.rewrite(m.expr))) for m in measures
        ]
        wide = (
            typer
            if not push.fields
            else ExpressionTyper(self.con, pa.schema([*self.schema, *push.fields]), self.sql)
        )
        measures, projection = MeasureSplit(
            wide, push, unmatched=rows is RowsPerMatch.ALL_WITH_UNMATCHED
        ).run(measures)
        in_define = DefineAggregates(wide, push)
        rewritten = {name: as_expression(in_define.rewrite(e)) for name, e in defines.items()}
        columns = pa.schema([*self.schema, *push.fields])  # the split may derive more

        spec = MatchSpec(
            columns=columns,
            pattern=self.pattern,
            partition_by=partition_by,
            order_by=order_by,
            measures=measures,
            rows_per_match=rows,
            skip=skip,
            skip_variable=skip_var,
            initial=self.node.args.get("initial") is not False,
            subsets=subsets,
            defines=rewritten,
            all_matches=bool(self.node.args.get("all_matches")),
            incremental=self.node.args.get("match_mode") == "INCREMENTAL",
            within=self.within(order_by),
            derived=push.columns,
            projection=projection,
        )
        self.check_alias_columns(spec)
        return spec

    def _order_items(self) -> list[exp.Ordered]:
        order = self.node.args.get("order")
        return list(order.expressions) if order is not None else []

    def check_exclusion(self, rows: RowsPerMatch) -> None:
        """Trino: ``{- -}`` cannot be combined with WITH UNMATCHED ROWS."""
        if rows.name != "ALL_WITH_UNMATCHED":
            return
        for part in self.pattern.walk():
            if isinstance(part, Exclusion):
                raise self.error(
                    SemanticError,
                    "pattern exclusion {- -} cannot be used with ALL ROWS PER MATCH "
                    "WITH UNMATCHED ROWS",
                    part.offset,
                )

    # -- variables ---------------------------------------------------------

    def subsets(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for subset in self.node.args.get("subsets") or []:
            name = subset.this.name
            if name in self.variables:
                raise self.error(
                    SemanticError,
                    f"subset name {name} clashes with a pattern variable",
                    subset.this,
                )
            if name in out:
                raise self.error(SemanticError, f"subset {name} is defined twice", subset.this)
            members: list[str] = []
            for member in subset.expressions:
                if member.name not in self.variables:
                    raise self.error(
                        SemanticError,
                        f"subset {name} names {member.name}, which is not a variable in PATTERN",
                        member,
                    )
                if member.name not in members:
                    members.append(member.name)
            out[name] = tuple(members)
        return out

    def skip(self, names: set[str]) -> tuple[SkipMode, str | None]:
        after = self.node.args.get("after")
        var = self.node.args.get("after_var")
        if var is not None and var.name not in names:
            raise self.error(
                SemanticError,
                f"AFTER MATCH SKIP names {var.name}, which is not a pattern variable or subset",
                var,
            )
        return SkipMode[SKIPS[after]], (var.name if var is not None else None)

    def prime_types(self, typer: ExpressionTyper) -> None:
        """Type every DEFINE and MEASURES expression in one DuckDB round trip; an
        expression that fails a check is left for defines()/measures() to report."""
        exprs = [d.expression for d in self.node.args.get("define") or []]
        exprs += [m.this for m in self.node.args.get("measures") or []]
        resolved = []
        for expr in exprs:
            try:
                resolved.append(self.resolve_columns(expr))
            except Error:
                return
        typer.prime(resolved)

    def defines(self, checker: ExpressionChecker, typer: ExpressionTyper) -> dict[str, exp.Expr]:
        out: dict[str, exp.Expr] = {}
        define: VariableDef
        for define in self.node.args.get("define") or []:
            name = define.this.name
            if name not in self.variables:
                raise self.error(
                    SemanticError,
                    f"DEFINE names {name}, which does not appear in PATTERN",
                    define.this,
                )
            if name in out:
                raise self.error(SemanticError, f"variable {name} is defined twice", define.this)
            condition = define.expression
            checker.check(condition, in_define=True)
            resolved = self.resolve_columns(condition)
            kind = typer.duckdb_type(resolved)
            if kind not in ("BOOLEAN", '"NULL"', "NULL"):
                raise self.error(
                    TypeMismatchError,
                    f"the DEFINE condition of {name} must be BOOLEAN, not {kind}",
                    condition,
                )
            out[name] = resolved
        return out

    # -- columns -----------------------------------------------------------

    def column_name(self, ident: exp.Identifier) -> str:
        """The input column ``ident`` names; DuckDB matches names case-insensitively."""
        folded = column_candidates(self.schema.names, ident.name)
        if len(folded) == 1:
            return folded[0]
        if folded:
            raise self.error(CatalogError, f"column name {ident.name} is ambiguous", ident)
        raise self.error(
            CatalogError,
            f'column "{ident.name}" not found in the input of MATCH_RECOGNIZE',
            ident,
        )

    def resolve_columns(self, expr: exp.Expr) -> exp.Expr:
        """A copy of ``expr`` whose column names are the schema's exact names (one copy
        per expression of the node: callers read it, none changes it)."""
        found = self._resolved.get(id(expr))
        if found is not None and found[0] is expr:
            return found[1]
        out = expr.copy()
        for col in list(out.find_all(exp.Column)):
            ident = col.this
            if not isinstance(ident, exp.Identifier):
                continue
            actual = self.column_name(ident)
            quoted = ident.quoted or not (actual.isidentifier() and actual.lower() == actual)
            new = exp.Identifier(this=actual, quoted=quoted)
            new.meta.update(ident.meta)
            col.set("this", new)
        self._resolved[id(expr)] = (expr, out)
        return out

    def key_column(self, expr: exp.Expr, clause: str) -> str:
        if not isinstance(expr, exp.Column) or expr.args.get("table") is not None:
            raise self.error(
                SemanticError, f"{clause} items must be columns of the input relation", expr
            )
        return self.column_name(expr.this)

    # -- measures ----------------------------------------------------------

    def measures(
        self,
        checker: ExpressionChecker,
        typer: ExpressionTyper,
        partition_by: list[str],
        rows: RowsPerMatch,
    ) -> list[Measure]:
        taken = {c.lower(): "a PARTITION BY column" for c in partition_by}
        if rows.all_rows:
            taken.update({c.lower(): "an input column" for c in self.schema.names})
        seen: set[str] = set()
        out: list[Measure] = []
        measure: MeasureDef
        for measure in self.node.args.get("measures") or []:
            alias = measure.args["alias"]
            name = alias.name
            if name.lower() in seen:
                raise self.error(SemanticError, f"measure {name} is defined twice", alias)
            if name.lower() in taken:
                raise self.error(
                    SemanticError,
                    f"measure {name} duplicates {taken[name.lower()]} in the output",
                    alias,
                )
            seen.add(name.lower())
            checker.check(measure.this, in_define=False)
            resolved = self.resolve_columns(measure.this)
            field, duckdb_type = typer.typed(resolved)
            out.append(
                Measure(
                    name=name,
                    expr=as_expression(resolved),
                    type=field.type,
                    duckdb_type=duckdb_type,
                )
            )
        return out

    # -- time bound and alias ------------------------------------------------

    def within(self, order_by: list[str]) -> WithinBound | None:
        bound = self.node.args.get("within")
        if bound is None:
            return None
        if not order_by:
            raise self.error(SemanticError, "WITHIN needs an ORDER BY column to measure", bound)
        try:
            value = self.con.execute(f"SELECT {bound.sql(dialect='duckdb')}").fetchall()[0][0]
        except duckdb.Error as exc:
            message = str(exc).split("\n")[0]
            raise self.error(SemanticError, f"invalid WITHIN bound: {message}", bound) from None
        key = self.schema.field(order_by[0]).type
        temporal = pa.types.is_temporal(key)
        if isinstance(value, datetime.timedelta):
            if not temporal:
                raise self.error(
                    TypeMismatchError,
                    f"WITHIN INTERVAL needs a temporal ORDER BY column, not {key}",
                    bound,
                )
        elif isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool):
            if temporal or not (
                pa.types.is_integer(key) or pa.types.is_floating(key) or pa.types.is_decimal(key)
            ):
                raise self.error(
                    TypeMismatchError,
                    f"a numeric WITHIN bound needs a numeric ORDER BY column, not {key}",
                    bound,
                )
        else:
            raise self.error(TypeMismatchError, "WITHIN takes an INTERVAL or a number", bound)
        zero = datetime.timedelta(0) if isinstance(value, datetime.timedelta) else 0
        if value < zero:
            raise self.error(SemanticError, "WITHIN must not be negative", bound)
        return value

    def check_alias_columns(self, spec: MatchSpec) -> None:
        alias = self.node.args.get("alias")
        columns = alias.args.get("columns") if alias is not None else None
        if columns:
            width = len(spec.result_schema())
            if len(columns) != width:
                raise self.error(
                    SemanticError,
                    f"the alias names {len(columns)} columns but MATCH_RECOGNIZE produces {width}",
                    alias,
                )
