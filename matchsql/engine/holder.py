"""InputHolder: the rows of one partition that a matcher can still reach.

Rows are addressed by their absolute index in the partition (the matcher
never sees batch boundaries). Rows before the oldest index any live thread,
pending output or navigation offset can reach are dropped, so memory follows
the live window, not the partition. Columns are kept as Python lists because
the reference path evaluates expressions on Python values.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pyarrow as pa

from matchsql.errors import ExecutionError
from matchsql.expr.values import from_arrow_interval
from matchsql.saved_state.state_format import state_class


@state_class
class InputHolder:
    """A sliding window over a partition's rows; implements ``RowSource``."""

    def __init__(self, schema: pa.Schema, columns: Collection[str] | None = None) -> None:
        # Only ``columns`` (default: all) are kept: converting Arrow values to
        # Python objects is a large part of the reference path's cost (a
        # timestamp costs about a microsecond), so columns that no expression
        # or output reads are never converted.
        wanted = None if columns is None else set(columns)
        self.names = [n for n in schema.names if wanted is None or n in wanted]
        # Arrow hands intervals out as MonthDayNano; expressions work on timedelta.
        self._intervals = {f.name for f in schema if pa.types.is_interval(f.type)}
        self._columns: dict[str, list[Any]] = {name: [] for name in self.names}
        self.base = 0  # absolute index of the first row held
        self._count = 0  # absolute index one past the last row received
        self._complete = False
        self._low = 0  # absolute index of the first row still needed

    # RowSource ------------------------------------------------------------------------

    @property
    def count(self) -> int:
        return self._count

    @property
    def complete(self) -> bool:
        return self._complete

    def column_list(self, column: str) -> list[Any]:
        """The live list behind ``column``: absolute row ``r`` is at ``r - self.base``.

        The list object stays the same for the holder's lifetime (appends
        extend it, drops delete its head in place), so specialised DEFINE
        closures bind it once per partition instead of calling :meth:`value`.
        """
        return self._columns[column]

    def value(self, index: int, column: str) -> Any:
        if index < self.base or index >= self._count:
            raise ExecutionError(
                f"internal error: partition row {index} is not held "
                f"(held rows {self.base}..{self._count - 1})"
            )
        values = self._columns.get(column)
        if values is None:
            raise ExecutionError(f"internal error: column {column!r} is not held")
        return values[index - self.base]

    def values(self, index: int, columns: list[str]) -> list[Any]:
        """``[value(index, c) for c in columns]`` with one bounds check (output rows)."""
        if index < self.base or index >= self._count:
            raise ExecutionError(
                f"internal error: partition row {index} is not held "
                f"(held rows {self.base}..{self._count - 1})"
            )
        at = index - self.base
        try:
            return [self._columns[c][at] for c in columns]
        except KeyError as exc:
            raise ExecutionError(f"internal error: column {exc} is not held") from None

    # window ---------------------------------------------------------------------------

    @property
    def held(self) -> int:
        """Tuples the matcher still needs (the DejaVu memory metric)."""
        return self._count - self._low

    def append(self, batch: pa.RecordBatch) -> None:
        if self._complete:
            raise ExecutionError("internal error: rows fed after the partition finished")
        for name in self.names:
            values = batch.column(name).to_pylist()
            if name in self._intervals:
                values = [from_arrow_interval(v) for v in values]
            self._columns[name].extend(values)
        self._count += batch.num_rows

    def finish(self) -> None:
        self._complete = True

    def drop_before(self, index: int) -> None:
        """Forget rows before absolute ``index``; never called with rows still needed.

        The physical trim is batched (once at least half of the stored rows are
        garbage) so that shifting the lists stays amortised O(1) per row.
        """
        self._low = max(self._low, min(index, self._count))
        garbage = self._low - self.base
        if garbage > 0 and garbage * 2 >= self._count - self.base:
            for name in self.names:
                del self._columns[name][:garbage]
            self.base = self._low

    def row(self, index: int) -> dict[str, Any]:
        return {name: self.value(index, name) for name in self.names}
