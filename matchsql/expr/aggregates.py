"""Aggregate functions over the rows of a (partial) match, with DuckDB's semantics.

Each reducer takes the argument values of the rows in match order and returns
the aggregate. Kept apart from the expression compiler because the compiled
and GPU paths need the same definitions of empty-input results (``COUNT`` 0,
everything else NULL) and NULL handling (ignored except by ``array_agg`` and
``arbitrary``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from matchsql.expr import values as scalars


def _non_null(values: Sequence[Any]) -> list[Any]:
    return [v for v in values if v is not None]


def agg_count(values: Sequence[Any]) -> int:
    return len(_non_null(values))


def agg_count_distinct(values: Sequence[Any]) -> int:
    seen: list[Any] = []
    for v in _non_null(values):
        if not any(scalars.equal(v, w) for w in seen):
            seen.append(v)
    return len(seen)


def agg_sum(values: Sequence[Any]) -> Any:
    present = _non_null(values)
    if not present:
        return None
    total = present[0]
    for v in present[1:]:
        total = scalars.add(total, v)
    return total


def agg_avg(values: Sequence[Any]) -> Any:
    present = _non_null(values)
    if not present:
        return None
    total = agg_sum(present)
    if isinstance(total, Decimal):
        return float(total) / len(present)
    return scalars.div(total, len(present))


def _extreme(values: Sequence[Any], sign: int) -> Any:
    best = None
    for v in values:
        if v is not None and (best is None or scalars.compare(v, best) == sign):
            best = v
    return best


def agg_min(values: Sequence[Any]) -> Any:
    return _extreme(values, -1)


def agg_max(values: Sequence[Any]) -> Any:
    return _extreme(values, 1)


def agg_any_value(values: Sequence[Any]) -> Any:
    """DuckDB's ``any_value``: the first non-NULL value."""
    present = _non_null(values)
    return present[0] if present else None


def agg_arbitrary(values: Sequence[Any]) -> Any:
    """DuckDB's ``arbitrary``/``first``: the first value, NULL included."""
    return values[0] if values else None


def agg_list(values: Sequence[Any]) -> Any:
    """``array_agg``/``list`` keep NULLs; over no rows the result is NULL."""
    return list(values) if values else None


def _arg_extreme(pairs: Sequence[tuple[Any, Any]], sign: int) -> Any:
    best_key = None
    best_arg = None
    for arg, key in pairs:
        if key is not None and (best_key is None or scalars.compare(key, best_key) == sign):
            best_key, best_arg = key, arg
    return best_arg


def agg_arg_max(pairs: Sequence[tuple[Any, Any]]) -> Any:
    """``max_by(arg, key)``: rows with a NULL key are ignored; ties keep the first row."""
    return _arg_extreme(pairs, 1)


def agg_arg_min(pairs: Sequence[tuple[Any, Any]]) -> Any:
    return _arg_extreme(pairs, -1)


def agg_bool_and(values: Sequence[Any]) -> Any:
    present = [scalars.truth(v) for v in _non_null(values)]
    return all(present) if present else None


def agg_bool_or(values: Sequence[Any]) -> Any:
    present = [scalars.truth(v) for v in _non_null(values)]
    return any(present) if present else None


def agg_count_if(values: Sequence[Any]) -> int:
    return sum(1 for v in values if scalars.truth(v) is True)


def agg_string_agg(pairs: Sequence[tuple[Any, Any]]) -> Any:
    present = [(scalars.as_text(v), sep) for v, sep in pairs if v is not None]
    if not present:
        return None
    out = present[0][0]
    for text, sep in present[1:]:
        out += ("," if sep is None else sep) + text
    return out


Reducer = Callable[[Sequence[Any]], Any]


# -- running folds ---------------------------------------------------------------------------


class Fold:
    """A reducer as a left fold: ``finish(step(...step(initial, v1)..., vn))`` equals
    ``reducer([v1, ..., vn])`` exactly (the same operations in the same order), so a
    DEFINE can carry a running aggregate from row to row instead of recomputing it."""

    __slots__ = ("initial", "step", "finish")

    def __init__(
        self,
        initial: Any,
        step: Callable[[Any, Any], Any],
        finish: Callable[[Any], Any] = lambda state: state,
    ) -> None:
        self.initial = initial
        self.step = step
        self.finish = finish


def _sum_step(total: Any, v: Any) -> Any:
    if v is None:
        return total
    return v if total is None else scalars.add(total, v)


def _extreme_step(sign: int) -> Callable[[Any, Any], Any]:
    def step(best: Any, v: Any) -> Any:
        if v is not None and (best is None or scalars.compare(v, best) == sign):
            return v
        return best

    return step


def _avg_step(state: tuple[Any, int], v: Any) -> tuple[Any, int]:
    return state if v is None else (_sum_step(state[0], v), state[1] + 1)


def _avg_finish(state: tuple[Any, int]) -> Any:
    total, n = state
    if not n:
        return None
    if isinstance(total, Decimal):
        return float(total) / n
    return scalars.div(total, n)


def _bool_step(every: bool) -> Callable[[Any, Any], Any]:
    def step(state: Any, v: Any) -> Any:
        if v is None:
            return state
        t = scalars.truth(v)
        if state is None:
            return bool(t)
        return (state and bool(t)) if every else (state or bool(t))

    return step


#: The reducers that have a running form (the others are recomputed per row).
FOLDS: dict[Reducer, Fold] = {
    agg_count: Fold(0, lambda n, v: n if v is None else n + 1),
    agg_sum: Fold(None, _sum_step),
    agg_avg: Fold((None, 0), _avg_step, _avg_finish),
    agg_min: Fold(None, _extreme_step(-1)),
    agg_max: Fold(None, _extreme_step(1)),
    agg_bool_and: Fold(None, _bool_step(True)),
    agg_bool_or: Fold(None, _bool_step(False)),
    agg_count_if: Fold(0, lambda n, v: n + 1 if scalars.truth(v) is True else n),
    agg_any_value: Fold(None, lambda first, v: v if first is None else first),
}

#: Canonical aggregate names (as :mod:`matchsql.plan.binder` names them) -> reducers.
#: ``count_star`` counts rows: its reducer receives a 1 per row.
REDUCERS: dict[str, Reducer] = {
    "count": agg_count,
    "count_star": agg_count,
    "sum": agg_sum,
    "avg": agg_avg,
    "min": agg_min,
    "max": agg_max,
    "any_value": agg_any_value,
    "arbitrary": agg_arbitrary,
    "list": agg_list,
    "bool_and": agg_bool_and,
    "bool_or": agg_bool_or,
    "count_if": agg_count_if,
    "arg_max": agg_arg_max,
    "arg_min": agg_arg_min,
    "string_agg": agg_string_agg,
}
#: Aggregates whose reducer takes (value, second argument) pairs.
PAIR_AGGREGATES = frozenset({"arg_max", "arg_min", "string_agg"})
