"""Measures that read nothing of the match: literals, casts of them, folded subqueries.

``MEASURES 'up' AS trend`` or a subquery folded into ``CAST('4.5' AS
DOUBLE)`` has one value for every output row. The column-wise output takes
it as a repeated Arrow scalar instead of handing the whole output (every
other measure included) to the reference evaluator row by row. The value is
the reference evaluator's own, computed once, and the type is the one
analysis declared for the measure, so both paths give the same column.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from matchsql.engine.compiled.lowering import Unsupported
from matchsql.engine.compiled.match_arrays import Expansion, Matches, Rows
from matchsql.errors import Error
from matchsql.expr.rowwise import evaluator
from matchsql.plan.binder import bind
from matchsql.plan.bound import AggregateCall, MatchNumberRef, Pointer, describe
from matchsql.plan.spec import MatchSpec

__all__ = ["ConstantMeasure", "constant_measure"]

_READS_MATCH = (Pointer, AggregateCall, MatchNumberRef)


@dataclass
class ConstantMeasure:
    """One value, repeated for every match or output row."""

    value: pa.Scalar

    @property
    def type(self) -> pa.DataType:
        return self.value.type

    def final(self, m: Matches, rows: Rows) -> pa.Array:
        return pa.repeat(self.value, len(m.starts))

    def running(self, m: Matches, e: Expansion, rows: Rows) -> pa.Array:
        return pa.repeat(self.value, len(e.match))


def constant_measure(spec: MatchSpec, node: exp.Expression) -> ConstantMeasure | None:
    """The constant measure ``node`` (the bound form of one of ``spec``'s measures); None
    when ``node`` reads the match or is no measure's."""
    if any(isinstance(n, _READS_MATCH) for n in node.walk()):
        return None
    declared = next((m.type for m in spec.measures if bind(m.expr, spec) is node), None)
    if declared is None:
        return None
    try:
        # a constant reads no match: its evaluator is called without a view
        value = evaluator(node)(None)  # type: ignore[arg-type]
        return ConstantMeasure(pa.scalar(value, type=declared))
    except (Error, pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        # the reference evaluator reports it (an invalid CAST, say) where it occurs
        raise Unsupported(f"constant measure {describe(node)}: {exc}") from None
