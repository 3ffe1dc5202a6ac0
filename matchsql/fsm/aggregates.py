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

from matchsql.fsm import scalars


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
    present = [(scalars.to_str(v), sep) for v, sep in pairs if v is not None]
    if not present:
        return None
    out = present[0][0]
    for text, sep in present[1:]:
        out += ("," if sep is None else sep) + text
    return out


Reducer = Callable[[Sequence[Any]], Any]
