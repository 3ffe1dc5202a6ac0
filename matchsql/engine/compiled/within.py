"""WITHIN, written once: the rule every path applies, and its compiled form.

The rule (:func:`past`): an attempt may not consume a row whose ORDER BY
value lies more than the WITHIN bound away from the value of the match's first
row, measured along the ordering: ``|here - first| > bound``. The bound is the
match's *span*; under ``ORDER BY .. ASC`` that is ``here - first`` (later rows
have larger values), under ``ORDER BY .. DESC`` it is ``first - here`` (later
rows have smaller ones), so the same query reads the same way whichever way
the rows are ordered: "a match lasts at most this long". (Before, a DESC
ordering never cut a match, since ``here - first`` is never positive there:
WITHIN silently did nothing.) A row equal to the first row is inside (NaN
equal to itself, as DuckDB orders numbers), as is a NULL on either side; a
NaN span otherwise is outside (DuckDB puts NaN above every bound but a NaN one).

The rule is written once, :func:`past`, over two values measured as numbers: a
compiled function, so that the kernels decide with the same code the reference
runs as Python (its ``py_func``), and not a second copy that could drift from it.
The reference matcher and the oracle call it per row through :func:`outside`,
which measures Python values (numbers as they are, temporal values as whole
nanoseconds); the kernels get, per start, the first row past the bound as an
array (:func:`within_ends`, :func:`past` over the column's values: they are
sorted on that key, so the row only moves forward) and end the attempt there.
Rows whose bound lies past the rows held get :data:`NO_BOUND`: the attempt
waits for more rows as it would without WITHIN.

The array form is exact where :func:`outside` is: integer, date and timestamp
columns are measured as int64 in the column's units (a BIGINT key above 2**53,
or a nanosecond timestamp, has no exact float64; measured as float64 the
compiled paths put rows 1 apart at the same value and let a match run past
the bound the reference keeps), the bound as the whole units it allows; float
columns as float64, as Python measures them.
"""

from __future__ import annotations

import datetime
import math
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from matchsql.engine.compiled.lowering import Unsupported
from matchsql.errors import ExecutionError
from matchsql.expr.values import Interval
from matchsql.plan.spec import MatchSpec

NO_BOUND = 1 << 62
_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


@njit(cache=True, nogil=True)
def past(first, here, bound, ints):
    """The WITHIN rule: whether ``here`` lies more than ``bound`` from ``first``,
    ``|here - first| > bound`` (two valid ORDER BY values, measured as numbers: float64
    ones, or, ``ints``, int64 ones with an int64 ``bound``). Equal values are inside, NaN
    equal to itself; NaN lies above every bound, a NaN bound above every span (DuckDB's
    order of numbers). int64 values are measured without overflow: machine code may
    assume a signed difference never wraps, so none is computed that could."""
    if first == here or (first != first and here != here):
        return False
    if first != first or here != here:
        return bound == bound  # a NaN span: above every bound but a NaN one
    hi = first if first > here else here
    lo = here if first > here else first
    if ints and lo < 0 <= hi:
        # hi - lo may not fit in int64: past when hi alone is, else compare via hi - bound
        # (both in [0, max], so it fits)
        return hi > bound or lo < hi - bound
    return hi - lo > bound


def outside(first: Any, here: Any, bound: Any) -> bool:
    """Whether a row with ORDER BY value ``here`` lies past WITHIN ``bound`` of a match
    whose first row has ``first``: :func:`past` over the values measured as numbers
    (:func:`_measured`); a NULL on either side is never outside."""
    if first is None or here is None:
        return False
    a, b, limit = _measured(first, here, bound)
    ints = all(isinstance(v, int) for v in (a, b, limit))
    return bool(past.py_func(a, b, limit, ints))


_MICRO = datetime.timedelta(microseconds=1)
_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=datetime.UTC)
_DAY_NANOS = 86_400 * 10**9


def _measured(first: Any, here: Any, bound: Any) -> tuple[Any, Any, Any]:
    """``first``, ``here`` and ``bound`` as numbers :func:`past` compares exactly: numbers
    as they are (a DECIMAL beside a DOUBLE as a DOUBLE, as DuckDB computes it), and under
    an INTERVAL bound temporal values as whole nanoseconds from a fixed origin (a
    month as 30 days, as DuckDB orders intervals)."""
    if isinstance(bound, datetime.timedelta):
        return _nanos(first), _nanos(here), _nanos(bound)
    values = (first, here, bound)
    if any(isinstance(v, float) for v in values) and any(isinstance(v, Decimal) for v in values):
        first, here, bound = (float(v) for v in values)
    return first, here, bound


def _nanos(v: Any) -> int:
    """A temporal value (or an INTERVAL) in whole nanoseconds from a fixed origin."""
    if isinstance(v, datetime.datetime):
        origin = _EPOCH if v.tzinfo is None else _EPOCH_UTC
        return int((v - origin) // _MICRO) * 1000 + int(getattr(v, "nanosecond", 0))
    if isinstance(v, datetime.date):
        return (v - datetime.date(1970, 1, 1)).days * _DAY_NANOS
    if isinstance(v, datetime.time):
        seconds = (v.hour * 60 + v.minute) * 60 + v.second
        return (seconds * 10**6 + v.microsecond) * 1000
    if isinstance(v, datetime.timedelta):
        return int(v // _MICRO) * 1000 + int(getattr(v, "nanoseconds", 0))
    if isinstance(v, Interval):
        return (v.months * 30 + v.days) * _DAY_NANOS + v.micros * 1000
    raise ExecutionError(f"WITHIN cannot measure the ORDER BY value {v!r}")


def within_bound(spec: MatchSpec) -> float | None:
    """The WITHIN bound in the ORDER BY column's own units (None: no WITHIN); raises
    :class:`Unsupported` for a column type the compiled paths do not measure."""
    bound = spec.within
    if bound is None:
        return None
    t = spec.columns.field(spec.order_by[0]).type
    if isinstance(bound, datetime.timedelta):
        seconds = bound.total_seconds()
        if pa.types.is_timestamp(t):
            return seconds / _UNITS[t.unit]
        if pa.types.is_date32(t):
            return seconds / 86400.0
        raise Unsupported(f"WITHIN over a {t} column")
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return float(bound)
    raise Unsupported(f"WITHIN over a {t} column")


_INT64_MAX = (1 << 63) - 1


def order_values(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(values, valid)`` of the ORDER BY column in its own units: int64 for an
    integer, date or timestamp column (exact; UBIGINT shifted by 2**63, which keeps
    every difference), float64 for a float one."""
    t = column.type
    if pa.types.is_timestamp(t) or pa.types.is_date32(t):
        column = column.cast(pa.int64() if pa.types.is_timestamp(t) else pa.int32())
    valid = (
        np.ones(len(column), np.uint8)
        if not column.null_count
        else np.asarray(column.is_valid().to_numpy(zero_copy_only=False), np.uint8)
    )
    values = pc.fill_null(column, 0).to_numpy(zero_copy_only=False)
    if values.dtype == np.uint64:
        return values.view(np.int64) ^ np.int64(-(1 << 63)), valid
    if np.issubdtype(values.dtype, np.integer):
        return values.astype(np.int64), valid
    return values.astype(np.float64), valid


def _as_bound(bound: float, values: np.ndarray) -> float | int:
    """``bound`` in the type of ``values``: for int64 values the whole units it allows
    (a difference of whole units is past ``bound`` exactly when past its floor)."""
    if values.dtype != np.int64:
        return float(bound)
    return min(math.floor(bound), _INT64_MAX) if bound == bound else _INT64_MAX


@njit(cache=True, nogil=True)
def _ends(values, valid, bound, ints):
    n = values.shape[0]
    out = np.empty(n, np.int64)
    if n == 0:
        return out
    monotone = True  # the valid values are sorted (either way): the end only moves forward
    direction = 0
    seen = False
    last = values[0]
    for r in range(n):
        if valid[r] and values[r] == values[r]:  # NaN sorts at one end: apart from others
            if seen and values[r] != last:
                d = 1 if values[r] > last else -1
                if direction == 0:
                    direction = d
                elif d != direction:
                    monotone = False
            last = values[r]
            seen = True
    r = 0
    for s in range(n):
        out[s] = NO_BOUND
        if not valid[s]:
            continue
        if not monotone or r <= s:
            r = s + 1
        while r < n and not (valid[r] and past(values[s], values[r], bound, ints)):
            r += 1
        if r < n:
            out[s] = r
    return out


def within_ends(spec: MatchSpec, bound: float | None, column: pa.Array) -> np.ndarray:
    """``int64[rows]``: the first row an attempt from each row may not consume (empty: no
    WITHIN), :data:`NO_BOUND` where it lies past the rows held."""
    if bound is None:
        return np.zeros(0, np.int64)
    values, valid = order_values(column)
    return _ends(values, valid, _as_bound(bound, values), values.dtype == np.int64)
