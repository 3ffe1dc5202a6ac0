"""What a row pattern expression sees, and how a pointer's row is located in it.

A :class:`MatchView` is the partition's rows, the start of a (partial) match,
the variable each matched row was mapped to and the row at which the
expression is evaluated. Locating a :class:`~matchsql.plan.bound.Position` is
``last_row``/``first_row`` then ``physical_move``; these functions are the
row-at-a-time statement of the navigation rules (the column-wise and register
backends compute the same rows in bulk).

RUNNING semantics see the match rows up to ``current``; FINAL semantics see
the whole match. Two reads ignore that limit, as Trino's do: ``FIRST`` counts
from the match's start over every row the view has, and ``CLASSIFIER()``
reached through navigation is the label of any row of the match. (In DEFINE
the view has only the rows up to ``current``, so both end there.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from matchsql.plan.bound import VarSet

# -- what an expression sees ---------------------------------------------------------------


class RowSource(Protocol):
    """Partition rows by absolute index (0 = the partition's first row)."""

    @property
    def count(self) -> int:
        """Rows known so far."""
        ...  # pragma: no cover

    @property
    def complete(self) -> bool:
        """True once the partition has ended (``count`` is its length)."""
        ...  # pragma: no cover

    def value(self, index: int, column: str) -> Any: ...  # pragma: no cover


class ListRows:
    """A :class:`RowSource` over a list of dicts or an Arrow table (for oracles and tests)."""

    def __init__(
        self, rows: Sequence[dict[str, Any]] | pa.Table | pa.RecordBatch, complete: bool = True
    ) -> None:
        if isinstance(rows, pa.Table | pa.RecordBatch):
            rows = rows.to_pylist()
        self.rows = list(rows)
        self.complete = complete

    @property
    def count(self) -> int:
        return len(self.rows)

    def value(self, index: int, column: str) -> Any:
        return self.rows[index][column]


@dataclass
class MatchView:
    """What an expression sees when evaluated at one row of a (partial) match."""

    rows: RowSource  # partition rows by absolute index
    start: int  # absolute index of the match's first row
    labels: Sequence[str]  # labels[k] = primary variable of row start+k (so far / whole match)
    current: int  # absolute index of the row at which the expression is evaluated
    match_number: int
    final: bool = False  # default semantics: True = FINAL (whole match known)


Evaluator = Callable[[MatchView], Any]


# -- locating rows ---------------------------------------------------------------------------


def _visible(view: MatchView, final: bool) -> int:
    """How many match rows the semantics can see: all (FINAL) or up to current (RUNNING)."""
    n = len(view.labels)
    if final:
        return n
    k = view.current - view.start + 1  # max(0, min(n, k)), without the calls
    return n if k >= n else (k if k > 0 else 0)


def _backward(labels: Sequence[str], n: int) -> Iterator[tuple[int, str]]:
    if n == len(labels):
        k = n - 1
        for label in reversed(labels):
            yield k, label
            k -= 1
    else:
        for k in range(n - 1, -1, -1):
            yield k, labels[k]


def last_row(view: MatchView, vars_: VarSet, k: int, final: bool) -> int | None:
    """Absolute index of the k-th last visible row mapped to ``vars_`` (0 = last)."""
    n = _visible(view, final)
    if vars_ is None:
        return view.start + n - 1 - k if k < n else None
    tracked = getattr(view.labels, "last_rows", None)
    if tracked is not None and n == len(view.labels):
        found = tracked(vars_)
        if found is not None:
            rows, exhaustive = found
            if k < len(rows):
                row: int = rows[-1 - k]
                return row
            if exhaustive:
                return None
    for idx, label in _backward(view.labels, n):
        if label in vars_:
            if k == 0:
                return view.start + idx
            k -= 1
    return None


def first_row(view: MatchView, vars_: VarSet, k: int) -> int | None:
    """Absolute index of the k-th row of the match mapped to ``vars_`` (0 = first).

    FIRST counts from the match's start over every row the view knows, whatever
    the semantics: Trino resolves it over the whole match even under RUNNING in
    MEASURES, while in DEFINE the view knows only the rows up to the current one,
    so a row beyond it is NULL there.
    """
    n = len(view.labels)
    if vars_ is None:
        return view.start + k if k < n else None
    for idx in range(n):
        if view.labels[idx] in vars_:
            if k == 0:
                return view.start + idx
            k -= 1
    return None


def rows_of(view: MatchView, vars_: VarSet, final: bool) -> list[int]:
    """Absolute indexes of the visible rows mapped to ``vars_``, in match order."""
    n = _visible(view, final)
    if vars_ is None:
        return list(range(view.start, view.start + n))
    labels = view.labels
    if n != len(labels):
        labels = labels[:n]
    return [view.start + idx for idx, label in enumerate(labels) if label in vars_]


def label_at(view: MatchView, row: int | None) -> str | None:
    """The variable of ``row`` when it belongs to the match, else NULL.

    Navigation may name any row of the match, past the current one too under
    RUNNING (``NEXT(CLASSIFIER())``), as in Trino; a row outside the match
    (before it, after it, or not matched yet in DEFINE) has no label.
    """
    if row is None:
        return None
    idx = row - view.start
    return view.labels[idx] if 0 <= idx < len(view.labels) else None


def physical_move(view: MatchView, row: int | None, delta: int) -> int | None:
    """Move ``delta`` rows within the partition; outside it the result is NULL."""
    if row is None:
        return None
    target = row + delta
    if target < 0 or (view.rows.complete and target >= view.rows.count):
        return None
    return target
