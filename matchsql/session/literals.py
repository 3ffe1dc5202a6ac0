"""Python values as SQL literals, as DuckDB would bind them as parameters."""

from __future__ import annotations

import datetime
import decimal
import math
from typing import Any

from matchsql.errors import Error


def literal(value: Any) -> str:
    """SQL text for a Python parameter value, as DuckDB would bind it."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return f"CAST('{value}' AS DOUBLE)"
        return f"CAST({value!r} AS DOUBLE)"
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, datetime.datetime):
        kind = "TIMESTAMPTZ" if value.tzinfo is not None else "TIMESTAMP"
        return f"{kind} {quote(value.isoformat(sep=' '))}"
    if isinstance(value, datetime.date):
        return f"DATE {quote(value.isoformat())}"
    if isinstance(value, datetime.time):
        return f"TIME {quote(value.isoformat())}"
    if isinstance(value, datetime.timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        return f"INTERVAL '{micros} microseconds'"
    raise Error(
        f"a parameter of type {type(value).__name__} cannot be bound into a "
        f"MATCH_RECOGNIZE statement"
    )


def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
