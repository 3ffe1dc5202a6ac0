"""Which aggregates of a pattern query DuckDB computes, and over what.

The engine keeps its running ``count``, ``sum``, ``min``, ``max`` and ``avg``
(without DISTINCT or ORDER BY inside): the compiled paths carry them per
thread. Every other DuckDB aggregate, and these with DISTINCT or ORDER BY, is
DuckDB's, with its own values and types. The matcher only collects, at each
row mapped to the aggregate's variables, the values the aggregate reads
(``A.price``, ``A.ts``: its *reads*), and DuckDB aggregates the collected rows
as written, FILTER, DISTINCT and ORDER BY included. The rule is written here
once for MEASURES (:mod:`matchsql.grammar.measure_split`, where DuckDB works
over the matcher's output) and DEFINE (:class:`DefineAggregates`, where the
engine asks DuckDB while it matches, see :mod:`matchsql.expr.duckdb_calls`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from matchsql.grammar.dialect import MatchSQL
from matchsql.grammar.pushdown import PushDown, lambda_variable
from matchsql.grammar.typer import ExpressionTyper
from matchsql.plan.binder import source_text
from matchsql.plan.row_functions import Classifier, DuckDBAggregate, MatchNumber, PatternSemantics

__all__ = ["DefineAggregates", "by_duckdb", "over_fields"]

#: The aggregates the matcher keeps running itself (without DISTINCT or ORDER BY).
_HOT = (exp.Count, exp.Sum, exp.Min, exp.Max, exp.Avg)


def by_duckdb(node: exp.Expr, push: PushDown) -> tuple[exp.Expr, bool | None] | None:
    """The aggregate (with its FILTER) that DuckDB computes for ``node``, and its RUNNING
    (False) / FINAL (True) / default (None); None where the matcher does (or ``node`` is
    no aggregate)."""
    final = None
    if isinstance(node, PatternSemantics):
        final, node = node.final, node.this
    if not push.is_aggregate(node):
        return None
    core = node.this if isinstance(node, exp.Filter) else node
    hot = isinstance(core, _HOT) and not any(
        isinstance(n, exp.Distinct | exp.Order) for n in core.walk()
    )
    return None if hot else (node, final)


def _reads(node: exp.Expr) -> list[exp.Expr]:
    """What aggregate ``node`` reads of each row it visits: its columns, labels
    (``CLASSIFIER()``) and ``MATCH_NUMBER()``."""
    return [
        n
        for n in node.walk()
        if (
            isinstance(n, exp.Column)
            and not lambda_variable(n)
            and not isinstance(n.this, exp.Star)
        )
        or isinstance(n, Classifier | MatchNumber)
    ]


def _key(read: exp.Expr) -> str:
    return read.name if isinstance(read, exp.Column) else source_text(read)


def over_fields(node: exp.Expr) -> tuple[dict[str, exp.Expr], exp.Expr]:
    """The reads of aggregate ``node`` by their fields, and ``node`` over the fields.

    Returns each field (``c0``, ``c1``...) -> the first read it stands for, and a copy of
    ``node`` in which every read is its field: ``median(A.price)`` -> ``{'c0': A.price}``,
    ``median(c0)``."""
    node = _filter_reads_visited_row(node)
    names: dict[str, str] = {}
    fields: dict[str, exp.Expr] = {}
    for read in _reads(node):
        if _key(read) not in names:
            names[_key(read)] = field = f"c{len(names)}"
            fields[field] = read
    body = node.copy()
    for read in _reads(body):
        replacement = exp.column(names[_key(read)])
        if read is body:
            return fields, replacement
        read.replace(replacement)
    return fields, body


def _filter_reads_visited_row(node: exp.Expr) -> exp.Expr:
    """``node`` with its FILTER's reads qualified as its argument's are.

    The FILTER is evaluated at each row the aggregate visits, and the argument's
    variable decides which rows those are: ``any_value(U.x) FILTER (WHERE y > 1)``
    reads the ``y`` of each row mapped to ``U`` (as the engine's own running
    aggregates read it). Collected as written, the reads ``U.x`` and ``y`` would
    name two variables.
    """
    if not isinstance(node, exp.Filter):
        return node
    argument = _reads(node.this)
    qualifiers = {r.table for r in argument if isinstance(r, exp.Column) and r.table}
    qualifiers |= {r.variable for r in argument if isinstance(r, Classifier) and r.variable}
    if len(qualifiers) > 1:
        return node  # the argument itself names two variables: the binder says so
    target = next(iter(qualifiers), None)
    node = node.copy()
    for read in _reads(node.expression):
        if isinstance(read, exp.Column):
            read.set("table", exp.to_identifier(target) if target else None)
        elif isinstance(read, Classifier) and read.variable:
            read.set("this", target)
    return node


@dataclass
class DefineAggregates:
    """Replaces the aggregates of a DEFINE that DuckDB computes by
    :class:`~matchsql.plan.row_functions.DuckDBAggregate` nodes; ``typer`` types their
    reads (over the input with its derived columns)."""

    typer: ExpressionTyper
    push: PushDown

    def rewrite(self, expr: exp.Expr) -> exp.Expr:
        root = exp.Paren(this=expr.copy())
        for node in list(root.walk()):
            if (
                node.parent is not None
                and self.push.is_aggregate(node)
                and by_duckdb(node, self.push) is not None
            ):
                node.replace(self._call(node))
        return root.this

    def _call(self, node: exp.Expr) -> DuckDBAggregate:
        fields, body = over_fields(node)
        if fields:
            rows = ", ".join(
                f"unnest(${i + 1}::{self.typer.duckdb_type(read)}[]) AS {field}"
                for i, (field, read) in enumerate(fields.items())
            )
        else:  # nothing of the rows is read (mode(1)): one NULL per row
            rows = "unnest($1) AS c0"
        return DuckDBAggregate(
            expressions=[read.copy() for read in fields.values()],
            sql=f"SELECT {body.sql(dialect=MatchSQL)} FROM (SELECT {rows})",
            text=node.sql(dialect=MatchSQL),
        )
