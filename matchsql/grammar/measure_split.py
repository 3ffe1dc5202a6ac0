"""Leave the scalar SQL of MEASURES over a match's results to DuckDB.

A measure such as ``concat_ws('-', FIRST(A.sym), lower(CLASSIFIER()))`` or
``max(B.price) - A.price`` applies SQL to *pattern primitives*: column reads
at the rows of the match, navigations, aggregates, ``CLASSIFIER()`` and
``MATCH_NUMBER()``. Only the primitives need the matcher. Such a measure is
split: the matcher outputs each primitive as a hidden measure
(``__mr_m0``...), and DuckDB computes the measure itself in a projection
over the matcher's output (:attr:`matchsql.plan.spec.MatchSpec.projection`),
with DuckDB's own functions, types and NULL rules.

A measure made only of primitives and the engine's own arithmetic,
comparisons and boolean logic stays with the matcher, which evaluates it
without the projection.

Aggregates: the engine keeps its running ``count``, ``sum``, ``min``, ``max``
and ``avg``. Any other DuckDB aggregate, and these with DISTINCT or ORDER BY,
is DuckDB's: the matcher collects the values the aggregate reads at each row
mapped to its variables (``list({'c0': A.x, 'c1': A.ts})``, RUNNING or FINAL
as written), and DuckDB aggregates them as written, FILTER, DISTINCT and
ORDER BY included: ``(SELECT median(c0) FROM (SELECT unnest(__mr_m0,
recursive := true)))``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from matchsql.grammar.dialect import MatchSQL
from matchsql.grammar.duckdb_aggregates import by_duckdb, over_fields
from matchsql.grammar.pushdown import PushDown, lambda_variable, native
from matchsql.grammar.typer import ExpressionTyper
from matchsql.plan.binder import source_text
from matchsql.plan.row_functions import Classifier, MatchNumber, Navigation, PatternSemantics
from matchsql.plan.spec import Measure, ResultMeasure, as_expression, quoted

__all__ = ["HIDDEN_MEASURE_PREFIX", "MeasureSplit"]

#: Names of the matcher's hidden measures (a primitive of a measure DuckDB computes).
HIDDEN_MEASURE_PREFIX = "__mr_m"


def _primitive(node: exp.Expr, push: PushDown) -> bool:
    """Whether ``node`` is evaluated by the matcher as a whole."""
    if isinstance(node, exp.Column):
        return not lambda_variable(node)
    return isinstance(
        node, Navigation | PatternSemantics | Classifier | MatchNumber
    ) or push.is_aggregate(node)


@dataclass
class MeasureSplit:
    """The split of one MATCH_RECOGNIZE's measures; ``typer`` types the primitives (over
    the input with its derived columns)."""

    typer: ExpressionTyper
    push: PushDown
    #: WITH UNMATCHED ROWS: an unmatched row's measures are NULL, whatever DuckDB's SQL
    #: around them would make of NULLs (``coalesce(FIRST(A.x), 0)``, a constant)
    unmatched: bool = False
    hidden: list[Measure] = field(default_factory=list)
    _by_text: dict[str, str] = field(default_factory=dict)

    def run(self, measures: list[Measure]) -> tuple[list[Measure], list[ResultMeasure]]:
        """The matcher's measures and the projection (every measure, in order, with the
        DuckDB SQL over the matcher's output that computes it); the projection is empty
        where the matcher computes every measure itself."""
        split = [self._split(m) for m in measures]
        if all(top is None for top in split):
            return measures, []
        kept = [m for m, top in zip(measures, split) if top is None]
        if self.unmatched:  # NULL where the row's match number is: it matched nothing
            number = quoted(self._hidden(MatchNumber()))
            split = [
                top and f"CASE WHEN {number} IS NULL THEN NULL ELSE ({top}) END" for top in split
            ]
        elif not kept and not self.hidden:  # constants only: the matcher's output needs a
            self._hidden(MatchNumber())  # column, one row per match or per row
        projection = [
            ResultMeasure(m.name, top or quoted(m.name), m.type, m.duckdb_type)
            for m, top in zip(measures, split)
        ]
        return [*kept, *self.hidden], projection

    def _split(self, measure: Measure) -> str | None:
        """The measure's SQL over its primitives, or None where the matcher computes it."""
        primitives: list[exp.Expr] = []
        if not self._needs_duckdb(measure.expr, primitives):
            return None  # the engine's own
        if not primitives:  # no read of the match: DuckDB's SQL as written, at each row
            return measure.expr.sql(dialect=MatchSQL)
        top = exp.Paren(this=measure.expr.copy())
        copies = {id(n): c for n, c in zip(measure.expr.walk(), top.this.walk())}
        for primitive in primitives:
            copies[id(primitive)].replace(self._replacement(primitive))
        return top.this.sql(dialect=MatchSQL)

    def _replacement(self, primitive: exp.Expr) -> exp.Expr:
        """What reads ``primitive``'s value in the projection."""
        aggregate = by_duckdb(primitive, self.push)
        if aggregate is None:
            return exp.column(exp.to_identifier(self._hidden(primitive), quoted=True))
        node, final = aggregate
        fields, body = over_fields(node)
        if not any(isinstance(read, exp.Column) for read in fields.values()):
            # no column of the rows to collect (COUNT(A.*) with DISTINCT, string_agg of
            # the labels): the matcher's own, column-wise where the path has them
            return exp.column(exp.to_identifier(self._hidden(primitive), quoted=True))
        struct = exp.Struct(
            expressions=[
                exp.PropertyEQ(this=exp.to_identifier(field_name), expression=read.copy())
                for field_name, read in fields.items()
            ]
        )
        collect: exp.Expr = exp.ArrayAgg(this=struct)
        if final is not None:
            collect = PatternSemantics(this=collect, final=final)
        name = self._hidden(collect)
        return exp.maybe_parse(
            f"(SELECT {body.sql(dialect=MatchSQL)} FROM (SELECT unnest("
            f"{quoted(name)}, recursive := true)))",
            dialect=MatchSQL,
        )

    def _needs_duckdb(self, node: exp.Expr, primitives: list[exp.Expr]) -> bool:
        """Whether ``node`` holds SQL beyond the engine's own around its primitives (which
        are collected into ``primitives``)."""
        if _primitive(node, self.push):
            primitives.append(node)
            return by_duckdb(node, self.push) is not None
        needs = not native(node)
        for child in node.iter_expressions():
            needs = self._needs_duckdb(child, primitives) or needs
        return needs

    def _hidden(self, primitive: exp.Expr) -> str:
        text = source_text(primitive)
        name = self._by_text.get(text)
        if name is None:
            name = self._by_text[text] = f"{HIDDEN_MEASURE_PREFIX}{len(self.hidden)}"
            type_ = self.typer.arrow_type(primitive)  # before the rewrite's new columns
            self.hidden.append(Measure(name, as_expression(self.push.rewrite(primitive)), type_))
        return name
