"""Output rows of a partition's matches, built as Arrow batches.

ONE ROW PER MATCH gives the partition columns and the measures evaluated with
FINAL semantics at the match's last row. ALL ROWS PER MATCH gives, for every
matched row not inside ``{- -}``, the partition and order columns, the
measures evaluated at that row (RUNNING by default), and the remaining input
columns. An empty match is one row at the row where it was attempted, its
measures seeing an empty match; an unmatched row (WITH UNMATCHED ROWS) has
NULL measures.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from matchsql.engine.holder import InputHolder
from matchsql.errors import ExecutionError
from matchsql.expr import values as sc
from matchsql.expr.rows import Evaluator, MatchView, RowSource
from matchsql.plan.spec import MatchSpec, RowsPerMatch
from matchsql.saved_state.state_format import state_class


@state_class
@dataclass
class MatchRecord:
    """A reported match: where it starts, its labels, its number in the partition."""

    start: int
    labels: Sequence[str]  # a list, or the reference's lazily built HistorySequence
    excluded: Sequence[bool]
    match_number: int

    @property
    def end(self) -> int:
        """Absolute index of the last row (``start - 1`` when empty)."""
        return self.start + len(self.labels) - 1

    @property
    def empty(self) -> bool:
        return not self.labels


@state_class
@dataclass
class UnmatchedRow:
    """A row in no match, reported by ALL ROWS PER MATCH WITH UNMATCHED ROWS."""

    row: int

    @property
    def start(self) -> int:
        return self.row

    @property
    def end(self) -> int:
        return self.row


@state_class
class OutputBuilder:
    """Accumulates output rows column-wise and hands them out as record batches."""

    def __init__(
        self, spec: MatchSpec, measures: list[Evaluator], check: Callable[[], None] = lambda: None
    ) -> None:
        self.spec = spec
        # Raises once the statement is cancelled: a long match's rows are many
        # measure evaluations, so ALL ROWS PER MATCH calls it every 1024 rows.
        self.check = check
        self.schema = spec.output_schema()
        self.measures = measures
        self.all_rows = spec.rows_per_match.all_rows
        self.show_empty = spec.rows_per_match is not RowsPerMatch.ALL_OMIT_EMPTY
        self.rest = spec.passed_columns
        self._lead = list(spec.partition_by) + list(spec.order_by)
        self._columns: list[list[Any]] = [[] for _ in self.schema]

    @property
    def pending_rows(self) -> int:
        return len(self._columns[0]) if self._columns else 0

    def add(self, rows: RowSource, item: MatchRecord | UnmatchedRow) -> None:
        if isinstance(item, UnmatchedRow):
            self._row(rows, item.row, [None] * len(self.measures))
        elif not self.all_rows:
            view = MatchView(rows, item.start, item.labels, item.end, item.match_number, final=True)
            self._one_row(rows, item.start, [m(view) for m in self.measures])
        elif item.empty:
            if self.show_empty:
                view = MatchView(rows, item.start, item.labels, item.start, item.match_number)
                self._row(rows, item.start, [m(view) for m in self.measures])
        else:
            for k, excluded in enumerate(item.excluded):
                if k & 1023 == 1023:
                    self.check()
                if excluded:
                    continue
                r = item.start + k
                view = MatchView(rows, item.start, item.labels, r, item.match_number)
                self._row(rows, r, [m(view) for m in self.measures])

    def _one_row(self, rows: RowSource, start: int, measures: list[Any]) -> None:
        values = [rows.value(start, c) for c in self.spec.partition_by] + measures
        for column, value in zip(self._columns, values):
            column.append(value)

    def _row(self, rows: RowSource, r: int, measures: list[Any]) -> None:
        if isinstance(rows, InputHolder):  # reads a row's columns with one bounds check
            values = rows.values(r, self._lead) + measures + rows.values(r, self.rest)
        else:
            values = [rows.value(r, c) for c in self._lead]
            values += measures
            values += [rows.value(r, c) for c in self.rest]
        for column, value in zip(self._columns, values):
            column.append(value)

    def take(self) -> list[pa.RecordBatch]:
        """The rows built so far as one batch (none when there are no rows)."""
        if not self.pending_rows:
            return []
        arrays = [_to_arrow(values, f) for values, f in zip(self._columns, self.schema)]
        self._columns = [[] for _ in self.schema]
        return [pa.RecordBatch.from_arrays(arrays, schema=self.schema)]


def _natural(v: Any, t: pa.DataType) -> bool:
    """Whether Arrow converts ``v`` to ``t`` the way DuckDB's cast would (no silent truncation)."""
    if pa.types.is_integer(t):
        return isinstance(v, int)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return isinstance(v, str)
    if pa.types.is_floating(t):
        return isinstance(v, float | int) and not isinstance(v, bool)
    return not isinstance(v, sc.Interval)


def _to_arrow(values: list[Any], f: pa.Field) -> pa.Array:
    # _natural depends on the value's type only: check each type once.
    samples = {type(v): v for v in values}
    if all(v is None or _natural(v, f.type) for v in samples.values()):
        try:
            return pa.array(values, type=f.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            pass
    try:
        return pa.array([_convert(v, f.type) for v in values], type=f.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
        raise ExecutionError(f"measure {f.name}: cannot convert value to {f.type}: {exc}") from None


def _convert(v: Any, t: pa.DataType) -> Any:
    """Python value -> something Arrow accepts as type ``t`` (DuckDB's implicit casts)."""
    if v is None:
        return None
    if pa.types.is_integer(t):
        return sc.to_int(v)
    if pa.types.is_floating(t):
        return sc.to_float(v)
    if pa.types.is_decimal(t):
        return sc.to_decimal(v, t.scale)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return sc.to_str(v)
    if pa.types.is_boolean(t):
        return sc.to_bool(v)
    if pa.types.is_timestamp(t):
        return sc.to_timestamp(v)
    if pa.types.is_date(t):
        return sc.to_date(v)
    if pa.types.is_interval(t) and isinstance(v, sc.Interval):
        return pa.MonthDayNano([v.months, v.days, v.micros * 1000])
    if pa.types.is_duration(t) and isinstance(v, sc.Interval):
        return dt.timedelta(days=v.days, microseconds=v.micros)
    return v
