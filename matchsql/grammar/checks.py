"""Structural rules for DEFINE and MEASURES expressions (Trino's, SQL:2016's).

These are the rules that do not need the input schema: where navigation,
aggregates, RUNNING/FINAL, CLASSIFIER and MATCH_NUMBER may appear, and that
variable qualifiers name pattern variables or subsets. Each violation raises
a :class:`~matchsql.errors.SemanticError` located at the offending token.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from matchsql.errors import SemanticError
from matchsql.grammar.dialect import first_offset
from matchsql.grammar.duckdb_catalog import is_any_aggregate
from matchsql.plan.row_functions import Classifier, MatchNumber, Navigation, PatternSemantics

__all__ = ["ExpressionChecker", "position"]


def position(node: exp.Expr) -> int | None:
    """Offset of ``node`` itself when recorded, else of its first descendant."""
    meta = node._meta
    if meta and meta.get("start") is not None:
        return meta["start"]
    return first_offset(node)


def offset_of(node: exp.Expr) -> int | None:
    """Where ``node`` starts in the statement text (its first identifier), if known."""
    for ident in node.find_all(exp.Identifier):
        start = ident.meta.get("start")
        if start is not None:
            return start
    return None


@dataclass
class _Scope:
    """What encloses the node being checked."""

    navigation: Navigation | None = None
    aggregate: exp.Expr | None = None


class ExpressionChecker:
    """Checks one MATCH_RECOGNIZE's expressions against its variables and subsets."""

    def __init__(self, sql: str, names: set[str], aggregates: frozenset[str] = frozenset()) -> None:
        self.sql = sql
        self.names = names  # primary variables and subset names
        # DuckDB's aggregates that sqlglot parses as anonymous calls (histogram, ...)
        self.aggregates = aggregates

    def error(self, message: str, node: exp.Expr) -> SemanticError:
        return SemanticError(message, sql=self.sql, offset=position(node))

    def check(self, expr: exp.Expr, *, in_define: bool) -> None:
        self.in_define = in_define
        self.visit(expr, _Scope())

    def visit(self, node: exp.Expr, scope: _Scope) -> None:
        if isinstance(node, PatternSemantics):
            self.semantics(node)
        elif isinstance(node, Navigation):
            scope = self.navigation(node, scope)
        elif isinstance(node, exp.AggFunc) or (
            isinstance(node, exp.Anonymous) and node.name.lower() in self.aggregates
        ):
            scope = self.aggregate(node, scope)
        elif isinstance(node, exp.Column):
            self.column(node)
        elif isinstance(node, Classifier):
            self.classifier(node)
        elif isinstance(node, MatchNumber):
            # Allowed in aggregate arguments (Trino: they may contain CLASSIFIER and
            # MATCH_NUMBER); navigation of a per-match constant makes no sense.
            if scope.navigation is not None:
                raise self.error("MATCH_NUMBER() cannot be used inside navigation functions", node)
        elif isinstance(node, exp.Window):
            raise self.error("window functions are not allowed in MATCH_RECOGNIZE", node)
        elif isinstance(node, (exp.Select, exp.Subquery, exp.SetOperation)):
            # scalar, IN and EXISTS subqueries were folded into constants before the checks
            raise self.error(
                "only scalar, IN (SELECT ...) and EXISTS (SELECT ...) subqueries "
                "are supported in MATCH_RECOGNIZE expressions",
                node,
            )
        for child in node.iter_expressions():
            self.visit(child, scope)

    def semantics(self, node: PatternSemantics) -> None:
        word = "FINAL" if node.final else "RUNNING"
        if node.final and self.in_define:
            raise self.error("FINAL is not allowed in DEFINE", node)
        target = node.this
        # is_aggregate: also the aggregates DuckDB's dialect leaves anonymous (arbitrary,
        # any_value, ...) and RUNNING count(*) FILTER (WHERE ...)
        if not isinstance(target, (Navigation, Classifier, MatchNumber)) and not is_any_aggregate(
            target, self.aggregates
        ):
            raise self.error(f"{word} applies only to navigation functions and aggregates", target)

    def navigation(self, node: Navigation, scope: _Scope) -> _Scope:
        if scope.aggregate is not None:
            raise self.error(
                f"{node.kind} cannot be used inside the arguments of an aggregate", node
            )
        outer = scope.navigation
        if outer is not None:
            if node.physical:
                raise self.error(f"{node.kind} cannot be nested inside {outer.kind}", node)
            if not outer.physical:
                raise self.error(
                    f"{node.kind} cannot be nested inside {outer.kind}; only PREV/NEXT may "
                    "wrap FIRST/LAST",
                    node,
                )
        if not _has_reference(node.this):
            raise self.error(f"the argument of {node.kind} must contain a column reference", node)
        self.single_variable(node.this, f"{node.kind}")
        return _Scope(navigation=node, aggregate=None)

    def aggregate(self, node: exp.Expr, scope: _Scope) -> _Scope:
        name = node.sql_name() if hasattr(node, "sql_name") else node.key.upper()
        if scope.navigation is not None:
            raise self.error(
                f"aggregate {name} cannot be used inside {scope.navigation.kind}", node
            )
        if scope.aggregate is not None:
            raise self.error("aggregate functions cannot be nested", node)
        self.single_variable(node, f"aggregate {name}")
        return _Scope(navigation=None, aggregate=node)

    def column(self, node: exp.Column) -> None:
        if node.args.get("db") is not None:
            raise self.error(
                "column references in MATCH_RECOGNIZE take at most one qualifier", node
            )
        table = node.args.get("table")
        if table is not None and table.name not in self.names:
            raise self.error(
                f"{table.name} is not a pattern variable or subset of this MATCH_RECOGNIZE",
                table,
            )
        if isinstance(node.this, exp.Star) and not isinstance(node.parent, exp.Count):
            raise self.error(f"{table.name if table else ''}.* is only allowed in COUNT", node)

    def classifier(self, node: Classifier) -> None:
        var = node.variable
        if var is not None and var not in self.names:
            raise self.error(
                f"{var} is not a pattern variable or subset of this MATCH_RECOGNIZE", node
            )

    def single_variable(self, arg: exp.Expr, what: str) -> None:
        """All column references in ``arg`` must use one variable (or none)."""
        first: str | None = None
        seen = False
        for col in arg.find_all(exp.Column):
            table = col.args.get("table")
            label = table.name if table is not None else None
            if not seen:
                first, seen = label, True
            elif label != first:
                shown = label or "the universal row pattern variable"
                raise self.error(
                    f"the argument of {what} mixes pattern variables "
                    f"({first or 'unqualified'} and {shown})",
                    table if table is not None else col,
                )


def _has_reference(arg: exp.Expr) -> bool:
    """True when ``arg`` mentions a column or CLASSIFIER (navigation needs one)."""
    return any(isinstance(n, (exp.Column, Classifier)) for n in arg.walk())
