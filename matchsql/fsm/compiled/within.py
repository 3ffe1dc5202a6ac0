"""WITHIN on the compiled paths: the first row past each start's time bound.

The reference stops an attempt before it consumes a row whose ORDER BY value
lies more than the WITHIN bound after the start's (``here - first > bound``; a
NULL on either side is never outside). The kernels get that row per start as
an array (:func:`within_ends`) and end the attempt there, so the three paths
share one rule. Rows whose bound lies past the rows held get
:data:`NO_BOUND`: the attempt waits for more rows as it would without WITHIN.
"""

from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from matchsql.fsm.compiled.lowering import Unsupported
from matchsql.plan.spec import MatchSpec

NO_BOUND = 1 << 62
_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


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
        if isinstance(bound, decimal.Decimal):
            return float(bound)
        return float(bound)
    raise Unsupported(f"WITHIN over a {t} column")


def order_values(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(values, valid)`` of the ORDER BY column as float64 in its own units."""
    t = column.type
    if pa.types.is_timestamp(t) or pa.types.is_date32(t):
        column = column.cast(pa.int64() if pa.types.is_timestamp(t) else pa.int32())
    valid = np.ones(len(column), np.uint8) if not column.null_count else \
        np.asarray(column.is_valid().to_numpy(zero_copy_only=False), np.uint8)
    values = pc.fill_null(column, 0).to_numpy(zero_copy_only=False).astype(np.float64)
    return values, valid


@njit(cache=True, nogil=True)
def _ends(values, valid, bound):
    n = values.shape[0]
    out = np.empty(n, np.int64)
    ascending = True
    descending = True
    last = np.nan
    for r in range(n):
        if valid[r]:
            if values[r] < last:
                ascending = False
            if values[r] > last:
                descending = False
            last = values[r]
    if descending and not ascending:
        for s in range(n):  # ORDER BY .. DESC: a later row is never past a bound >= 0
            out[s] = NO_BOUND
        return out
    r = 0
    for s in range(n):
        out[s] = NO_BOUND
        if not valid[s]:
            continue
        if ascending:  # the first row past the bound only moves forward
            if r <= s:
                r = s + 1
            while r < n and not (valid[r] and values[r] - values[s] > bound):
                r += 1
        else:
            r = s + 1
            while r < n and not (valid[r] and values[r] - values[s] > bound):
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
    return _ends(values, valid, bound)
