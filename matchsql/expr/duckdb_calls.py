"""DuckDB evaluates the parts of a DEFINE the value library has no rule for.

Analysis hands DuckDB everything it can compute without the pattern: a
subexpression of one row becomes a column of the input scan, a measure's SQL
a projection over the matcher's output. What remains for the engine is a
DEFINE that combines values of *different* rows of the match in a function
the value library lacks (``levenshtein(A.s, B.s) < 3``), or that compares
with an aggregate DuckDB computes (``B.price > median(A.price)``). Its value
depends on which rows the match maps to which variable, so the matcher must
ask while it matches: such a part becomes a query over parameters (the
values the matcher read: ``SELECT levenshtein($1, $2)``) that DuckDB answers.

Every value is then DuckDB's own, and no valid DuckDB expression is refused.
The queries run on DuckDB connections that hold no user data (the parts read
only their parameters), kept in a pool that a caller takes one from for its
query; answers are remembered per query and parameters, because the threads
of a pattern ask about the same rows again and again as they branch.

The pool is not per thread (``threading.local``): a forked child clears the
other threads' locals, and a DuckDB connection closed there joins worker
threads the child does not have, which crashed every forked child (a
subprocess with ``preexec_fn``, a fork pool) of a process that had asked.
A child drops the pool without closing what it inherited.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa

from matchsql.errors import ExecutionError
from matchsql.expr.values import Interval, from_arrow_interval

__all__ = ["DuckDBCall", "duckdb_type"]

#: Answers remembered per query (least recently used first out).
_REMEMBERED = 4096

_idle: list[duckdb.DuckDBPyConnection] = []
_idle_lock = threading.Lock()
#: A forked child's copies of the parent's connections: never used, never closed.
_inherited: list[duckdb.DuckDBPyConnection] = []


@contextmanager
def _connection() -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory connection of the pool for one query (a new one when all are taken)."""
    with _idle_lock:
        con = _idle.pop() if _idle else None
    if con is None:
        con = duckdb.connect()
    try:
        yield con
    finally:
        with _idle_lock:
            _idle.append(con)


def _forget_connections() -> None:
    global _idle_lock
    _idle_lock = threading.Lock()  # a thread of the parent may have held it
    _inherited.extend(_idle)
    _idle.clear()


os.register_at_fork(after_in_child=_forget_connections)


@functools.lru_cache(maxsize=256)
def duckdb_type(arrow_type: pa.DataType) -> str | None:
    """DuckDB's name for the type it reads ``arrow_type`` as (None: one it cannot read)."""
    try:
        with _connection() as con:
            return str(con.from_arrow(pa.table({"v": pa.nulls(0, arrow_type)})).types[0])
    except (duckdb.Error, pa.ArrowException):
        return None


_PLAIN = (str, int, float, bool, Decimal, dt.date, dt.time, dt.timedelta, bytes)


def _parameter(value: Any) -> Any:
    """``value`` as DuckDB's Python client binds it (numpy scalars as Python values,
    an interval with months in DuckDB's text form, lists and structs element-wise)."""
    if value is None or isinstance(value, _PLAIN):
        return value
    if isinstance(value, list | tuple):
        return [_parameter(v) for v in value]
    if isinstance(value, dict):
        return {k: _parameter(v) for k, v in value.items()}
    if isinstance(value, Interval):
        return f"{value.months} months {value.days} days {value.micros} microseconds"
    item = getattr(value, "item", None)  # numpy scalar
    return item() if callable(item) else value


def _key(params: list[Any]) -> Any:
    """A hashable key of ``params`` that tells ``1``, ``1.0`` and ``True`` apart."""
    try:
        key = tuple((type(p), p) for p in params)
        hash(key)
        return key
    except TypeError:  # lists, structs
        return repr(params)


class DuckDBCall:
    """One query over parameters, ``sql`` (``SELECT ...`` of one value); ``text`` is the
    expression as written, which a DuckDB error names."""

    def __init__(self, sql: str, text: str) -> None:
        self.sql = sql
        self.text = text
        self._answers: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, params: list[Any]) -> Any:
        values = [_parameter(p) for p in params]
        key = _key(values)
        with self._lock:
            if key in self._answers:
                self._answers.move_to_end(key)
                return self._answers[key]
        try:
            with _connection() as con:
                table = con.sql(self.sql, params=values).to_arrow_table()
        except duckdb.Error as exc:
            raise ExecutionError(f"{self.text}: {str(exc).splitlines()[0]}") from None
        # Through Arrow, as the matcher reads its rows: a MAP, a STRUCT or an INTERVAL
        # answered is then the same value as one read from the input.
        answer = table.column(0)[0].as_py() if table.num_rows else None
        if pa.types.is_interval(table.schema.field(0).type):
            answer = from_arrow_interval(answer)
        with self._lock:
            self._answers[key] = answer
            if len(self._answers) > _REMEMBERED:
                self._answers.popitem(last=False)
        return answer
