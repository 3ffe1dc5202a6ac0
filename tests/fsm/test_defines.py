"""Specialised DEFINEs (matchsql.engine.defines) against the general evaluator.

The specialised closures must give exactly what ``truth(fn(MatchView)) is
True`` gives (errors included) for every expression they accept, and must
refuse everything else. The comparison runs over random rows with NULLs,
NaN, infinities, mixed int/float, decimals and strings, over histories of
random labellings, and over a holder whose first rows were dropped (so
absolute and stored indexes differ).
"""

from __future__ import annotations

import math
import random
from decimal import Decimal

import pyarrow as pa
import pytest

from matchsql.engine.defines import compile_define
from matchsql.engine.holder import InputHolder
from matchsql.engine.vm import HistoryKey, HistoryLabels
from matchsql.errors import ExecutionError
from matchsql.expr.rows import MatchView
from matchsql.expr.rowwise import analyze_expression
from matchsql.expr.values import number_lt, truth
from matchsql.plan.spec import MatchSpec

from .specs import expr, pattern

SCHEMA = pa.schema(
    [
        ("x", pa.float64()),
        ("y", pa.int64()),
        ("s", pa.string()),
        ("d", pa.decimal128(10, 2)),
        ("f", pa.bool_()),
    ]
)
SPEC = MatchSpec(columns=SCHEMA, pattern=pattern("A B+ C*"), subsets={"U": ("A", "C")})

SPECIALISED = [
    "x < PREV(x)",
    "B.x < A.x AND B.x <= PREV(B.x)",
    "x > B.x AND x >= PREV(x) AND x <= A.x",
    "x > PREV(x) AND x > A.x",
    "x = y",
    "x <> y",
    "x >= 2",
    "1.5 < x",
    "y = 3",
    "x != A.y",
    "PREV(x, 2) < NEXT(x)",
    "NEXT(A.x) > x",
    "PREV(A.y, 3) = y",
    "PREV(U.x) > x",
    "x > PREV(x) OR y < 2 OR x IS NULL",
    "NOT (x < y)",
    "NOT x < 1 AND y IS NULL",
    "x + y > A.x * 2",
    "x - PREV(x) > 0.5",
    "y / 2 <= 1",
    "-x < y",
    "s < 'm'",
    "s = A.s",
    "s > PREV(s)",
    "d > x",
    "d < 1",
    "d = A.d",
    "d + 1 > y",
    "f",
    "f AND x > 1",
    "f OR A.f",
    "NOT f",
    "y",
    "y AND x",
    "x OR y",
    "s < x",  # string vs number: an error on non-NULL pairs
    "TRUE",
    "FALSE AND x > 0",
    "NULL",
    "NULL OR x > 0",
    "(x < 2) = (y < 2)",
    "RUNNING (x > PREV(x))",
]

GENERAL_ONLY = [
    "FIRST(A.x) < x",
    "LAST(B.x, 1) > x",
    "COUNT(*) > 2",
    "SUM(B.x) > 3",
    "CLASSIFIER() = 'B'",
    "MATCH_NUMBER() > 1",
    "abs(x) > 1",
    "CASE WHEN x > 1 THEN TRUE END",
    "x IN (1, 2)",
    "x BETWEEN 1 AND 2",
    "COALESCE(x, 0) > 1",
    "PREV(FIRST(A.x)) > 1",
]


def _value(rng: random.Random, kind: str):
    if rng.random() < 0.15:
        return None
    if kind == "x":
        return rng.choice(
            [0.0, 1.0, 1.5, 2.0, 3.0, -1.0, math.nan, math.inf, -math.inf, rng.uniform(-3, 3)]
        )
    if kind == "y":
        return rng.choice([0, 1, 2, 3, -2])
    if kind == "s":
        return rng.choice(["a", "m", "z", "", "mm"])
    if kind == "d":
        return rng.choice([Decimal("0.00"), Decimal("1.00"), Decimal("2.50"), Decimal("-1.25")])
    return rng.choice([True, False])


def _holder(rng: random.Random, n: int, dropped: int, complete: bool) -> InputHolder:
    rows = {name: [_value(rng, name) for _ in range(n)] for name in SCHEMA.names}
    holder = InputHolder(SCHEMA)
    half = n // 2
    table = pa.table(rows, schema=SCHEMA)
    for batch in (table.slice(0, half), table.slice(half)):
        holder.append(batch.to_batches()[0])
    holder.drop_before(dropped)
    if complete:
        holder.finish()
    return holder


def _outcome(fn, *args):
    try:
        return ("value", fn(*args))
    except ExecutionError as exc:
        return ("error", type(exc))


def _general(compiled, view) -> bool:
    return truth(compiled.fn(view)) is True


def _specialised(test, history, key, row) -> bool:
    return bool(test(history, key, row))


@pytest.mark.parametrize("text", SPECIALISED)
def test_specialised_defines_agree_with_the_general_evaluator(text: str) -> None:
    rng = random.Random(text)
    tree = expr(text)
    for var in ("A", "B", "C"):
        compiled = analyze_expression(tree, SPEC)
        use = compiled.history.in_define_of(var)
        key_of = HistoryKey(use)
        fast = compile_define(tree, SPEC, var, key_of, row_local=use.empty)
        assert fast is not None, text
        for trial in range(40):
            n = 12
            complete = trial % 3 != 0
            holder = _holder(rng, n, dropped=rng.choice([0, 2, 4]), complete=complete)
            test = fast.bind(holder)
            start = rng.randrange(holder.base + 3, n - 3)
            row = rng.randrange(start, n - 2 if not complete else n)
            # A random history from start to row - 1, then ``var`` at row.
            history = None
            key = key_of.initial
            labels = []
            for r in range(start, row):
                label = rng.choice(["A", "B", "C"])
                labels.append(label)
                history = (history, label, False)
                key = key_of.advance(key, r, label)
            seq = HistoryLabels(history, var, row, key, key_of, length=row - start + 1)
            view = MatchView(holder, start, seq, row, 1)
            want = _outcome(_general, compiled, view)
            got = _outcome(_specialised, test, history, key, row)
            assert got == want, (text, var, start, row, labels)


@pytest.mark.parametrize("text", GENERAL_ONLY)
def test_everything_else_stays_with_the_general_evaluator(text: str) -> None:
    tree = expr(text)
    use = analyze_expression(tree, SPEC).history.in_define_of("B")
    assert compile_define(tree, SPEC, "B", HistoryKey(use), row_local=use.empty) is None


def test_row_local_results_are_cached_per_row() -> None:
    tree = expr("x < PREV(x)")
    use = analyze_expression(tree, SPEC).history.in_define_of("B")
    fast = compile_define(tree, SPEC, "B", HistoryKey(use), row_local=use.empty)
    assert fast is not None and fast.row_local
    holder = _holder(random.Random(1), 12, dropped=0, complete=True)
    test = fast.bind(holder)
    first = [test(None, (), r) for r in range(12)]
    assert [test(None, (), r) for r in range(12)] == first
    values = holder.column_list("x")
    expected = [
        r > 0
        and values[r] is not None
        and values[r - 1] is not None
        and number_lt(values[r], values[r - 1])
        for r in range(12)
    ]
    assert first == expected
