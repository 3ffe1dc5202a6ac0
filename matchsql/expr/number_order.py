"""DuckDB's order of numbers, written once for every backend that compares them.

DuckDB puts a floating NaN above every other number (+inf included) and makes it
equal to itself, where the IEEE comparisons that Python, numpy, CuPy and Arrow
all make leave NaN unordered (``NaN < x``, ``NaN > x`` and ``NaN = NaN`` all
false). So ``a < b`` is ``a < b or (b is NaN and a is not)``, ``a > b`` its
mirror, and the other four comparisons follow from those two (which also keeps
``a < b`` and ``a > b`` from both holding).

Each backend compares in its own primitives, so the rule is written over them:
Python scalars in the value library (:data:`SCALAR_TESTS`); Arrow arrays on the
column-wise path (:data:`ARROW`, with Kleene's NULLs), numpy or CuPy arrays on
the GPU path and in the prefilter (:func:`array_ops`), both through
:func:`compare_columns`. The compiled kernel spells the two tests in numba
(engine/compiled/kernel.py), self-contained because the GPU compiles it for the
device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

__all__ = [
    "ARROW",
    "COMPARISON_NAMES",
    "SCALAR_TESTS",
    "ColumnOps",
    "array_ops",
    "compare_columns",
    "number_gt",
    "number_lt",
]

#: SQL comparisons (sqlglot classes) -> their names, as Arrow's and numpy's functions.
COMPARISON_NAMES: dict[type, str] = {
    exp.LT: "less",
    exp.LTE: "less_equal",
    exp.GT: "greater",
    exp.GTE: "greater_equal",
    exp.EQ: "equal",
    exp.NEQ: "not_equal",
}


def number_lt(a: Any, b: Any) -> bool:
    """``a < b`` for two int/float values in DuckDB's order (``x != x``: x is NaN)."""
    less: bool = a < b or (b != b and a == a)
    return less


def number_gt(a: Any, b: Any) -> bool:
    """``a > b`` for two int/float values in DuckDB's order (see :func:`number_lt`)."""
    greater: bool = a > b or (a != a and b == b)
    return greater


#: Comparison name -> its test on two int/float values, from the two above.
SCALAR_TESTS: dict[str, Callable[[Any, Any], bool]] = {
    "less": number_lt,
    "less_equal": lambda a, b: not number_gt(a, b),
    "greater": number_gt,
    "greater_equal": lambda a, b: not number_lt(a, b),
    "equal": lambda a, b: not (number_lt(a, b) or number_gt(a, b)),
    "not_equal": lambda a, b: number_lt(a, b) or number_gt(a, b),
}


class ColumnOps(NamedTuple):
    """One backend's element-wise primitives: ``compare(name, a, b)`` is its own (IEEE)
    comparison of that name; ``nan(v)`` says where ``v`` is NaN, None when ``v`` is not
    floating; ``never(v)``, for such a ``v``, says the same to a floating other side
    (false, NULL where ``v`` is NULL); ``or_``, ``and_``, ``not_`` its logical operators."""

    compare: Callable[[str, Any, Any], Any]
    nan: Callable[[Any], Any]
    never: Callable[[Any], Any]
    or_: Callable[[Any, Any], Any]
    and_: Callable[[Any, Any], Any]
    not_: Callable[[Any], Any]


def compare_columns(ops: ColumnOps, name: str, a: Any, b: Any) -> Any:
    """``a name b`` element-wise in DuckDB's order of numbers, in ``ops``' primitives."""
    a_nan, b_nan = ops.nan(a), ops.nan(b)
    if a_nan is None and b_nan is None:  # no NaN possible: the backend's own comparison
        return ops.compare(name, a, b)
    a_nan = ops.never(a) if a_nan is None else a_nan
    b_nan = ops.never(b) if b_nan is None else b_nan
    if name in ("less", "greater_equal", "equal", "not_equal"):
        lt = ops.or_(ops.compare("less", a, b), ops.and_(b_nan, ops.not_(a_nan)))
    if name in ("greater", "less_equal", "equal", "not_equal"):
        gt = ops.or_(ops.compare("greater", a, b), ops.and_(a_nan, ops.not_(b_nan)))
    if name == "less":
        return lt
    if name == "greater":
        return gt
    if name == "less_equal":
        return ops.not_(gt)
    if name == "greater_equal":
        return ops.not_(lt)
    unequal = ops.or_(lt, gt)
    return unequal if name == "not_equal" else ops.not_(unequal)


_FALSE = pa.scalar(False)
_NULL_BOOL = pa.scalar(None, pa.bool_())


def _arrow_nan(v: pa.Array | pa.ChunkedArray | pa.Scalar) -> Any:
    return pc.is_nan(v) if pa.types.is_floating(v.type) else None


def _arrow_never(v: pa.Array | pa.ChunkedArray | pa.Scalar) -> Any:
    """False, NULL where ``v`` is NULL: a NULL operand keeps the comparison NULL even
    where the other side's NaN would decide it (Kleene's ``NULL OR true`` is true)."""
    nulls = (not v.is_valid) if isinstance(v, pa.Scalar) else v.null_count > 0
    return pc.and_kleene(pc.is_null(v), _NULL_BOOL) if nulls else _FALSE


#: Arrow arrays and scalars, NULLs as Kleene's logic has them (a NULL operand: NULL).
ARROW = ColumnOps(
    compare=lambda name, a, b: getattr(pc, name)(a, b),
    nan=_arrow_nan,
    never=_arrow_never,
    or_=pc.or_kleene,
    and_=pc.and_kleene,
    not_=pc.invert,
)

_ARRAY_OPS: dict[ModuleType, ColumnOps] = {}


def array_ops(xp: ModuleType) -> ColumnOps:
    """The primitives of the array module ``xp`` (numpy, or CuPy on a device): arrays of
    its own or Python numbers, no NULLs (the callers keep NULL masks apart)."""
    ops = _ARRAY_OPS.get(xp)
    if ops is None:

        def nan(v: Any) -> Any:
            dtype = getattr(v, "dtype", None)
            if dtype is None:
                return math.isnan(v) if isinstance(v, float) else None
            return xp.isnan(v) if np.issubdtype(dtype, np.floating) else None

        ops = ColumnOps(
            compare=lambda name, a, b: getattr(xp, name)(a, b),
            nan=nan,
            never=lambda v: False,
            or_=xp.logical_or,
            and_=xp.logical_and,
            not_=xp.logical_not,
        )
        _ARRAY_OPS[xp] = ops
    return ops
