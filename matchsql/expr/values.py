"""Scalar value semantics for the reference evaluator, following DuckDB.

Values are plain Python objects as ``pyarrow`` hands them out (``int``,
``float``, ``Decimal``, ``str``, ``bool``, ``date``, ``datetime``,
``timedelta``) plus :class:`Interval` for month-based intervals. ``None`` is
SQL NULL and propagates through every operator here unless DuckDB says
otherwise (``concat``, ``coalesce``, ``greatest``...). The point of this
module is that the reference matcher computes the same values DuckDB would,
so that measures agree with what the outer query computes around them.
"""

from __future__ import annotations

import calendar
import datetime as dt
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from matchsql.errors import ExecutionError, SemanticError
from matchsql.expr.number_order import COMPARISON_NAMES, SCALAR_TESTS, number_gt, number_lt
from matchsql.saved_state.state_format import state_class


@state_class
@dataclass(frozen=True)
class Interval:
    """A DuckDB interval with a month part, which ``timedelta`` cannot express."""

    months: int = 0
    days: int = 0
    micros: int = 0

    def as_timedelta(self) -> dt.timedelta | None:
        if self.months:
            return None
        return dt.timedelta(days=self.days, microseconds=self.micros)


def from_arrow_interval(v: Any) -> Any:
    """Arrow's MonthDayNano as a ``timedelta``, or :class:`Interval` when it has months."""
    if v is None:
        return None
    months, days, nanos = v.months, v.days, v.nanoseconds
    if months:
        return Interval(months, days, nanos // 1000)
    return dt.timedelta(days=days, microseconds=nanos // 1000)


_NUMBER = (int, float, Decimal)


def is_number(v: Any) -> bool:
    return isinstance(v, _NUMBER) and not isinstance(v, bool)


def _num_pair(a: Any, b: Any) -> tuple[Any, Any]:
    """Decimal and float do not mix in Python; DuckDB turns such pairs into DOUBLE."""
    if isinstance(a, Decimal) and isinstance(b, float):
        return float(a), b
    if isinstance(b, Decimal) and isinstance(a, float):
        return a, float(b)
    return a, b


def _as_datetime(v: dt.date) -> dt.datetime:
    return v if isinstance(v, dt.datetime) else dt.datetime(v.year, v.month, v.day)


def _add_months(v: dt.date, months: int) -> dt.date:
    total = v.year * 12 + (v.month - 1) + months
    year, month = divmod(total, 12)
    day = min(v.day, calendar.monthrange(year, month + 1)[1])
    return v.replace(year=year, month=month + 1, day=day)


def _shift(v: dt.date, delta: Any, sign: int) -> dt.date:
    """date/timestamp +/- interval; a date plus a sub-day interval becomes a timestamp."""
    if isinstance(delta, Interval):
        v = _add_months(v, sign * delta.months) if delta.months else v
        delta = dt.timedelta(days=delta.days, microseconds=delta.micros)
    if not isinstance(v, dt.datetime) and (delta.seconds or delta.microseconds):
        v = _as_datetime(v)
    shifted: dt.date = v + delta if sign > 0 else v - delta
    return shifted


def _is_interval(v: Any) -> bool:
    return isinstance(v, dt.timedelta | Interval)


def add(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    if isinstance(a, dt.date) and _is_interval(b):
        return _shift(a, b, 1)
    if isinstance(b, dt.date) and _is_interval(a):
        return _shift(b, a, 1)
    if isinstance(a, dt.date) and isinstance(b, int):
        return a + dt.timedelta(days=b)
    if isinstance(a, Interval) or isinstance(b, Interval):
        a, b = _to_interval(a), _to_interval(b)
        return Interval(a.months + b.months, a.days + b.days, a.micros + b.micros)
    a, b = _num_pair(a, b)
    return _arith(lambda x, y: x + y, a, b, "+")


def sub(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    if isinstance(a, dt.date) and _is_interval(b):
        return _shift(a, b, -1)
    if isinstance(a, dt.datetime) or isinstance(b, dt.datetime):
        if isinstance(a, dt.date) and isinstance(b, dt.date):
            return _as_datetime(a) - _as_datetime(b)
    if isinstance(a, dt.date) and isinstance(b, dt.date):
        return (a - b).days  # DuckDB: date - date is a number of days
    if isinstance(a, dt.date) and isinstance(b, int):
        return a - dt.timedelta(days=b)
    a, b = _num_pair(a, b)
    return _arith(lambda x, y: x - y, a, b, "-")


def mul(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    a, b = _num_pair(a, b)
    return _arith(lambda x, y: x * y, a, b, "*")


def div(a: Any, b: Any) -> Any:
    """DuckDB's ``/``: always a fractional result; x/0 is +-inf (NaN for 0/0)."""
    if a is None or b is None:
        return None
    if isinstance(a, dt.timedelta) and is_number(b):
        return a / b
    if isinstance(a, Decimal) and isinstance(b, int | Decimal) and b != 0:
        return float(a / b)
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError):
        raise ExecutionError(f"cannot divide {_type_name(a)} by {_type_name(b)}") from None
    if y == 0.0:
        if x == 0.0 or math.isnan(x):
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    return x / y


def int_div(a: Any, b: Any) -> Any:
    """DuckDB's ``//``: truncating on integers, ordinary division otherwise."""
    if a is None or b is None:
        return None
    if b == 0:
        raise ExecutionError("division by zero in //")
    if isinstance(a, int) and isinstance(b, int):
        return _trunc_div(a, b)
    return div(a, b)


def mod(a: Any, b: Any) -> Any:
    """DuckDB's ``%``: the result takes the sign of the dividend (C semantics)."""
    if a is None or b is None:
        return None
    if b == 0:
        raise ExecutionError("division by zero in %")
    if isinstance(a, int) and isinstance(b, int):
        return a - b * _trunc_div(a, b)
    a, b = _num_pair(a, b)
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return Decimal(a) % Decimal(b)  # Decimal's % already truncates
    return math.fmod(a, b)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def power(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    try:
        return float(a) ** float(b)
    except (OverflowError, ZeroDivisionError):
        return math.inf
    except ValueError:
        return math.nan


def neg(a: Any) -> Any:
    if a is None:
        return None
    if isinstance(a, Interval):
        return Interval(-a.months, -a.days, -a.micros)
    return -a


def _arith(op: Callable[[Any, Any], Any], a: Any, b: Any, symbol: str) -> Any:
    try:
        return op(a, b)
    except TypeError:
        raise ExecutionError(
            f"cannot apply {symbol} to {_type_name(a)} and {_type_name(b)}"
        ) from None


def _to_interval(v: Any) -> Interval:
    if isinstance(v, Interval):
        return v
    if isinstance(v, dt.timedelta):
        return Interval(0, v.days, v.seconds * 1_000_000 + v.microseconds)
    raise ExecutionError(f"cannot add an interval and {_type_name(v)}")


def _type_name(v: Any) -> str:
    return {
        bool: "BOOLEAN",
        int: "INTEGER",
        float: "DOUBLE",
        Decimal: "DECIMAL",
        str: "VARCHAR",
        dt.date: "DATE",
        dt.datetime: "TIMESTAMP",
        dt.timedelta: "INTERVAL",
        Interval: "INTERVAL",
    }.get(type(v), type(v).__name__)


# -- comparison ---------------------------------------------------------------------


def coerce_pair(a: Any, b: Any) -> tuple[Any, Any]:
    """Bring two non-NULL values to comparable Python types the way DuckDB casts them."""
    if type(a) is type(b):
        return a, b
    if isinstance(a, dt.date) and isinstance(b, dt.date):
        return _as_datetime(a), _as_datetime(b)
    if isinstance(a, str) and not isinstance(b, str):
        return cast_like(a, b), b
    if isinstance(b, str) and not isinstance(a, str):
        return a, cast_like(b, a)
    if isinstance(a, dt.timedelta) and isinstance(b, Interval):
        return _to_interval(a), b
    if isinstance(b, dt.timedelta) and isinstance(a, Interval):
        return a, _to_interval(b)
    return _num_pair(a, b)


def cast_like(text: str, other: Any) -> Any:
    """Cast a string to the type of ``other`` (DuckDB casts string literals implicitly)."""
    try:
        if isinstance(other, bool):
            return to_bool(text)
        if isinstance(other, dt.datetime):
            return parse_timestamp(text)
        if isinstance(other, dt.date):
            return parse_timestamp(text) if len(text.strip()) > 10 else parse_date(text)
        if isinstance(other, int | Decimal):
            return Decimal(text.strip())
        if isinstance(other, float):
            return float(text)
    except (ValueError, InvalidOperation):
        pass
    raise ExecutionError(f"cannot compare VARCHAR {text!r} with {_type_name(other)}")


def compare(a: Any, b: Any) -> int | None:
    """-1/0/1, or None when either side is NULL."""
    if a is None or b is None:
        return None
    a, b = coerce_pair(a, b)
    try:
        if isinstance(a, Interval):
            a, b = _interval_key(a), _interval_key(b)
        return int(number_gt(a, b)) - int(number_lt(a, b))
    except TypeError:
        raise ExecutionError(f"cannot compare {_type_name(a)} with {_type_name(b)}") from None


def _interval_key(v: Interval) -> int:
    # DuckDB orders intervals by normalising a month to 30 days.
    return (v.months * 30 + v.days) * 86_400_000_000 + v.micros


def equal(a: Any, b: Any) -> bool | None:
    c = compare(a, b)
    return None if c is None else c == 0


# -- three-valued logic ---------------------------------------------------------------


def truth(v: Any) -> bool | None:
    """A condition's value as SQL boolean (None = UNKNOWN)."""
    if v is None or isinstance(v, bool):
        return v
    if is_number(v):
        nonzero: bool = v != 0
        return nonzero
    if isinstance(v, str):
        return to_bool(v)
    raise ExecutionError(f"{_type_name(v)} value {v!r} used as a condition")


def _connective(
    parts: tuple[Callable[..., Any], ...], decisive: bool
) -> Callable[..., bool | None]:
    """Three-valued AND (``decisive`` False) or OR (True) of operands evaluated on
    demand: the result is a function of the operands' arguments that evaluates them
    left to right and stops at the first that decides (the evaluators' AND/OR, with
    no sequence built per row). Values other than booleans go through :func:`truth`."""

    def apply(*args: Any) -> bool | None:
        unknown = False
        for part in parts:
            v = part(*args)
            if v is not True and v is not False and v is not None:
                v = truth(v)
            if v is decisive:
                return decisive
            if v is None:
                unknown = True
        return None if unknown else not decisive

    return apply


def every(parts: Iterable[Callable[..., Any]]) -> Callable[..., bool | None]:
    """Lazy three-valued AND of ``parts`` (see :func:`_connective`)."""
    return _connective(tuple(parts), False)


def some(parts: Iterable[Callable[..., Any]]) -> Callable[..., bool | None]:
    """Lazy three-valued OR of ``parts``."""
    return _connective(tuple(parts), True)


def both(left: Callable[..., Any], right: Callable[..., Any]) -> Callable[..., bool | None]:
    return every((left, right))


def either(left: Callable[..., Any], right: Callable[..., Any]) -> Callable[..., bool | None]:
    return some((left, right))


def and_(values: Iterable[Any]) -> bool | None:
    """Three-valued AND of values already computed."""
    return every(_constant(v) for v in values)()


def or_(values: Iterable[Any]) -> bool | None:
    return some(_constant(v) for v in values)()


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


def not_(v: Any) -> bool | None:
    t = truth(v)
    return None if t is None else not t


# -- casts ------------------------------------------------------------------------------


def to_bool(v: Any) -> bool | None:
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str):
        text = v.strip().lower()
        if text in ("true", "t", "1", "yes", "y", "on"):
            return True
        if text in ("false", "f", "0", "no", "n", "off"):
            return False
        raise ExecutionError(f"cannot cast {v!r} to BOOLEAN")
    return bool(v)


def round_half_away(x: Any, digits: int = 0) -> Any:
    """DuckDB rounds halves away from zero (Python's ``round`` rounds to even)."""
    if x is None:
        return None
    if isinstance(x, int) and not isinstance(x, bool):
        if digits >= 0:
            return x
        q = Decimal(x).quantize(Decimal(f"1E{-digits}"), rounding=ROUND_HALF_UP)
        return int(q)
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            return x
        return float(Decimal(repr(x)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))
    if isinstance(x, Decimal):
        return x.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    raise ExecutionError(f"cannot round {_type_name(x)}")


def to_int(v: Any) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            raise ExecutionError(f"cannot cast {v} to an integer")
        return int(round_half_away(v))
    if isinstance(v, Decimal):
        return int(round_half_away(v))
    if isinstance(v, str):
        try:
            return int(Decimal(v.strip()).quantize(Decimal(1), rounding=ROUND_HALF_UP))
        except InvalidOperation:
            raise ExecutionError(f"cannot cast {v!r} to an integer") from None
    raise ExecutionError(f"cannot cast {_type_name(v)} to an integer")


def to_float(v: Any) -> float | None:
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ExecutionError(f"cannot cast {v!r} to DOUBLE") from None


def to_decimal(v: Any, scale: int | None) -> Decimal | None:
    if v is None:
        return None
    try:
        d = Decimal(repr(v)) if isinstance(v, float) else Decimal(str(v).strip())
    except InvalidOperation:
        raise ExecutionError(f"cannot cast {v!r} to DECIMAL") from None
    if scale is not None:
        d = d.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
    return d


def to_str(v: Any) -> str | None:
    return None if v is None else as_text(v)


def as_text(v: Any) -> str:
    """:func:`to_str` of a value that is not NULL."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, float):
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    return str(v)


def parse_date(text: str) -> dt.date:
    return dt.date.fromisoformat(text.strip())


def parse_timestamp(text: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(text.strip())
    return value


def to_date(v: Any) -> dt.date | None:
    if v is None:
        return None
    if isinstance(v, dt.datetime):
        return v.date()
    if isinstance(v, dt.date):
        return v
    if isinstance(v, str):
        try:
            return parse_date(v) if len(v.strip()) <= 10 else parse_timestamp(v).date()
        except ValueError:
            raise ExecutionError(f"cannot cast {v!r} to DATE") from None
    raise ExecutionError(f"cannot cast {_type_name(v)} to DATE")


def to_timestamp(v: Any) -> dt.datetime | None:
    if v is None:
        return None
    if isinstance(v, dt.date):
        return _as_datetime(v)
    if isinstance(v, str):
        try:
            return parse_timestamp(v)
        except ValueError:
            raise ExecutionError(f"cannot cast {v!r} to TIMESTAMP") from None
    raise ExecutionError(f"cannot cast {_type_name(v)} to TIMESTAMP")


# -- intervals ------------------------------------------------------------------------

_UNIT_MICROS = {
    "microsecond": 1,
    "us": 1,
    "millisecond": 1_000,
    "ms": 1_000,
    "second": 1_000_000,
    "sec": 1_000_000,
    "s": 1_000_000,
    "minute": 60_000_000,
    "min": 60_000_000,
    "m": 60_000_000,
    "hour": 3_600_000_000,
    "h": 3_600_000_000,
}
_UNIT_DAYS = {"day": 1, "d": 1, "week": 7, "w": 7}
_UNIT_MONTHS = {
    "month": 1,
    "mon": 1,
    "year": 12,
    "y": 12,
    "quarter": 3,
    "decade": 120,
    "century": 1200,
}


def _unit(text: str) -> str:
    unit = text.strip().lower()
    if unit.endswith("s") and unit[:-1] in (*_UNIT_MICROS, *_UNIT_DAYS, *_UNIT_MONTHS):
        unit = unit[:-1]
    return unit


def make_interval(amount: Any, unit: str) -> Any:
    """``INTERVAL amount unit`` as a ``timedelta``, or :class:`Interval` for months."""
    if amount is None:
        return None
    u = _unit(unit)
    number = Decimal(str(amount).strip())
    if u in _UNIT_MICROS:
        return dt.timedelta(microseconds=int(number * _UNIT_MICROS[u]))
    if u in _UNIT_DAYS:
        return dt.timedelta(days=float(number * _UNIT_DAYS[u]))
    if u in _UNIT_MONTHS:
        return Interval(months=int(number * _UNIT_MONTHS[u]))
    raise ExecutionError(f"unknown interval unit {unit!r}")


def parse_interval(text: str) -> Any:
    """``'1 hour 30 minutes'`` style interval text."""
    parts = text.split()
    if len(parts) % 2:
        raise ExecutionError(f"cannot parse interval {text!r}")
    total: Any = dt.timedelta()
    for amount, unit in zip(parts[::2], parts[1::2]):
        total = add(total, make_interval(amount, unit))
    return total


# -- strings and dates ----------------------------------------------------------------


def like_regex(pattern: str, case_insensitive: bool, escape: str | None = None) -> re.Pattern[str]:
    """Translate a SQL LIKE pattern (``%``, ``_``) to an anchored regex."""
    out = []
    chars = iter(pattern)
    for ch in chars:
        if escape is not None and ch == escape:
            out.append(re.escape(next(chars, "")))
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out) + r"\Z", re.DOTALL | (re.IGNORECASE if case_insensitive else 0))


def substring(text: Any, start: Any, length: Any = None) -> Any:
    """DuckDB's 1-based ``substring``; a negative start counts from the end."""
    if text is None or start is None:
        return None
    n = len(text)
    begin = start - 1 if start > 0 else (n + start if start < 0 else -1)
    if length is None:
        end = n
    else:
        end = begin + length
    begin, end = max(begin, 0), max(min(end, n), 0)
    return text[begin:end] if end > begin else ""


def date_part(unit: str, v: Any) -> Any:
    if v is None:
        return None
    u = _unit(unit)
    if isinstance(v, dt.timedelta | Interval):
        iv = _to_interval(v)
        parts = {
            "day": iv.days,
            "hour": iv.micros // 3_600_000_000,
            "minute": iv.micros // 60_000_000 % 60,
            "second": iv.micros // 1_000_000 % 60,
            "month": iv.months % 12,
            "year": iv.months // 12,
            "epoch": (iv.months * 30 + iv.days) * 86400 + iv.micros / 1e6,
        }
        if u in parts:
            return parts[u]
        raise ExecutionError(f"unknown date part {unit!r}")
    if u == "epoch":
        if _aware(v):
            return v.timestamp()
        return (_as_datetime(v) - dt.datetime(1970, 1, 1)).total_seconds()
    simple = {
        "year": v.year,
        "month": v.month,
        "day": v.day,
        "dow": (v.isoweekday() % 7),
        "isodow": v.isoweekday(),
        "doy": v.timetuple().tm_yday,
        "week": v.isocalendar()[1],
        "quarter": (v.month - 1) // 3 + 1,
    }
    if u in simple:
        return simple[u]
    t = _as_datetime(v)
    timed = {
        "hour": t.hour,
        "minute": t.minute,
        "second": t.second,
        "millisecond": t.second * 1000 + t.microsecond // 1000,
        "microsecond": t.second * 1_000_000 + t.microsecond,
    }
    if u in timed:
        return timed[u]
    raise ExecutionError(f"unknown date part {unit!r}")


def _aware(v: Any) -> bool:
    return isinstance(v, dt.datetime) and v.tzinfo is not None


def date_trunc(unit: str, v: Any) -> Any:
    if v is None:
        return None
    u = _unit(unit)
    t = _as_datetime(v)
    if u == "year":
        t = t.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    elif u == "quarter":
        t = t.replace(
            month=(t.month - 1) // 3 * 3 + 1, day=1, hour=0, minute=0, second=0, microsecond=0
        )
    elif u == "month":
        t = t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    elif u == "week":
        t = (t - dt.timedelta(days=t.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
    elif u == "day":
        t = t.replace(hour=0, minute=0, second=0, microsecond=0)
    elif u == "hour":
        t = t.replace(minute=0, second=0, microsecond=0)
    elif u == "minute":
        t = t.replace(second=0, microsecond=0)
    elif u == "second":
        t = t.replace(microsecond=0)
    else:
        raise ExecutionError(f"unknown date_trunc unit {unit!r}")
    return t


def epoch_seconds(v: Any) -> Any:
    if v is None:
        return None
    return date_part("epoch", v)


def caster(to: exp.DataType) -> Callable[[Any], Any]:
    """A conversion function for ``CAST(... AS to)``."""
    T = exp.DataType.Type
    kind = to.this
    ints = {
        T.TINYINT,
        T.SMALLINT,
        T.MEDIUMINT,
        T.INT,
        T.BIGINT,
        T.INT128,
        T.UTINYINT,
        T.USMALLINT,
        T.UINT,
        T.UBIGINT,
        T.UINT128,
    }
    floats = {T.FLOAT, T.DOUBLE}
    texts = {T.TEXT, T.VARCHAR, T.CHAR, T.NVARCHAR, T.NCHAR, T.BPCHAR}
    stamps = {
        T.TIMESTAMP,
        T.TIMESTAMPNTZ,
        T.DATETIME,
        T.TIMESTAMP_S,
        T.TIMESTAMP_MS,
        T.TIMESTAMP_NS,
    }
    if kind in ints:
        return to_int
    if kind in floats:
        return to_float
    if kind in texts:
        return to_str
    if kind == T.BOOLEAN:
        return to_bool
    if kind == T.DATE:
        return to_date
    if kind in stamps:
        return to_timestamp
    if kind == T.DECIMAL:
        params = [p.this for p in to.expressions]
        scale = int(params[1].this) if len(params) > 1 else (3 if not params else 0)
        return lambda v: to_decimal(v, scale)
    if kind == T.INTERVAL:
        return lambda v: parse_interval(v) if isinstance(v, str) else v
    raise SemanticError(
        f"CAST to {to.sql(dialect='duckdb')} is not supported in row pattern expressions"
    )


#: SQL arithmetic operators (sqlglot classes) -> their value functions.
ARITHMETIC: dict[type, Callable[[Any, Any], Any]] = {
    exp.Add: add,
    exp.Sub: sub,
    exp.Mul: mul,
    exp.Div: div,
    exp.IntDiv: int_div,
    exp.Mod: mod,
    exp.Pow: power,
}

#: SQL comparisons (sqlglot classes) -> (the test on two int/float values, the test on
#: :func:`compare`'s sign). The number tests are DuckDB's order of numbers, NaN greatest
#: and equal to itself, as every backend has it (matchsql.expr.number_order).
COMPARISONS: dict[type, tuple[Callable[[Any, Any], bool], Callable[[int], bool]]] = {
    kind: (SCALAR_TESTS[COMPARISON_NAMES[kind]], sign)
    for kind, sign in [
        (exp.LT, lambda c: c < 0),
        (exp.LTE, lambda c: c <= 0),
        (exp.GT, lambda c: c > 0),
        (exp.GTE, lambda c: c >= 0),
        (exp.EQ, lambda c: c == 0),
        (exp.NEQ, lambda c: c != 0),
    ]
}
