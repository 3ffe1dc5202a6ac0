"""Measures that combine column-wise parts: ``count(B.x) + count(*)``, ``max(x) - A.x``.

A measure whose top is an operator over aggregates, column reads,
``CLASSIFIER()`` and ``MATCH_NUMBER()`` is computed part by part with the
measure compilers (each part one array per output row, RUNNING or FINAL as
the part says), and the operator tree is then evaluated over those arrays by
the aggregate-argument compiler (:mod:`.aggregate_inputs`), each part standing
in as a named column. Its exactness rules apply unchanged: a part whose type
Arrow would compute differently from the reference (a SUM over integers is a
HUGEINT, a Python ``Decimal`` in the reference) may be the whole measure but
not an operand, and the measure stays on the reference evaluator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from sqlglot import exp

from matchsql.engine.compiled.aggregate_inputs import ArgumentCompiler
from matchsql.plan.bound import AggregateCall, Const, MatchNumberRef, Pointer, Position, describe
from matchsql.plan.spec import MatchSpec

__all__ = ["composite", "is_composite"]

_PARTS = (AggregateCall, Pointer, MatchNumberRef)
Part = Callable[..., pa.Array]  # (m, rows) or (m, e, rows) -> one value per output row


def _parts(node: exp.Expression) -> list[exp.Expression]:
    """The part nodes of ``node``, outermost only (an aggregate's own pointers are its)."""
    out: list[exp.Expression] = []
    pending = [node]
    while pending:
        n = pending.pop()
        if isinstance(n, _PARTS):
            out.append(n)
        else:
            pending.extend(n.iter_expressions())
    return out


def is_composite(node: exp.Expression) -> bool:
    """An operator (not a part or literal itself) over at least one part."""
    return not isinstance(node, (*_PARTS, Const)) and bool(_parts(node))


def composite(
    spec: MatchSpec,
    node: exp.Expression,
    part: Callable[[exp.Expression], tuple[Part, pa.DataType]],
) -> tuple[Part, pa.DataType]:
    """``node`` computed from its parts (each compiled by ``part``); raises Unsupported
    where a part or the operator tree is not computed column-wise exactly."""
    tree = node.copy()
    fns: dict[str, Part] = {}
    types: dict[str, pa.DataType] = {}
    for i, leaf in enumerate(_parts(tree)):
        key = f"\0part {i}"
        fns[key], types[key] = part(leaf)
        leaf.replace(Pointer(column=key, position=Position(aggregated=True), text=describe(leaf)))
    argument = ArgumentCompiler(spec, types).argument(tree)

    def evaluate(*args: Any) -> pa.Array:
        columns = {key: fn(*args) for key, fn in fns.items()}
        return argument.evaluate(columns, len(next(iter(columns.values()))))

    return evaluate, argument.type
