"""The bound form of a DEFINE or MEASURES expression: what every backend evaluates.

After analysis each expression is one scalar tree in which every read of the
input is a :class:`Pointer` (after Trino's value pointers): a column, or a
row's label (``CLASSIFIER``), read at one row that the pointer names by its
:class:`Position`. Navigation no longer appears as an operator: ``PREV(A.x +
A.y, 2)`` binds to ``PREV(A.x, 2) + PREV(A.y, 2)``, which locates the same row
for both columns (a navigation argument names one variable, a checked rule).
Aggregates are :class:`AggregateCall` nodes whose arguments read the row being
aggregated; literals are :class:`Const` nodes holding their Python value;
``MATCH_NUMBER()`` is :class:`MatchNumberRef`. Everything else (arithmetic,
comparisons, AND/OR/NOT, CASE, casts, scalar functions) stays sqlglot's own
expression classes, so a backend handles operators as it would in any
sqlglot-based evaluator and never re-resolves a name or re-parses a literal.

Column names are the input relation's exact names; variable sets are frozen
sets of primary variables (a subset is expanded), ``None`` meaning the
universal variable (every row of the match).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from sqlglot import exp

VarSet = frozenset[str] | None


@dataclass(frozen=True)
class Position:
    """Which row a pointer reads.

    The row is located logically first: the ``offset``-th last (``first`` False)
    or first (``first`` True) row of the match mapped to ``vars``; then moved
    ``physical`` rows in the partition (PREV < 0, NEXT > 0), NULL outside it.
    ``final`` is FINAL (True), RUNNING (False) or the context's default (None).
    ``aggregated`` pointers read the row an enclosing aggregate is visiting and
    ignore the other fields.
    """

    vars: VarSet = None
    first: bool = False
    offset: int = 0
    physical: int = 0
    final: bool | None = None
    aggregated: bool = False

    @property
    def current(self) -> bool:
        """Reads the last row of ``vars`` (in a DEFINE of a member: the tested row)."""
        return not self.aggregated and not self.first and self.offset == 0

    def moved(self, delta: int) -> Position:
        return replace(self, physical=self.physical + delta)


class Pointer(exp.Expression):
    """A value read at one row: input column ``column``, or the row's label when
    ``column`` is None (``CLASSIFIER``); ``text`` is the source, for messages."""

    arg_types = {"column": False, "position": True, "text": False}

    @property
    def column(self) -> str | None:
        return self.args.get("column")

    @property
    def position(self) -> Position:
        position: Position = self.args["position"]
        return position

    @property
    def classifier(self) -> bool:
        return self.args.get("column") is None

    # The source text shadows sqlglot's ``Expression.text(key)``, which is never called on
    # a bound node (their arguments are not identifiers).
    @property
    def text(self) -> str:  # type: ignore[override]
        text: str = self.args.get("text") or (self.column or "CLASSIFIER()")
        return text


class Const(exp.Expression):
    """A literal's value, parsed once (``None`` for NULL)."""

    arg_types = {"value": False, "text": False}

    @property
    def value(self) -> Any:
        return self.args.get("value")


class ValueSet:
    """The distinct values of an uncorrelated ``x IN (SELECT ...)``, folded once per
    statement (:mod:`matchsql.grammar.subqueries`) and kept on the ``exp.In`` node under
    :data:`FOLDED`, beside the SQL text DuckDB reads the same values from.

    Thousands of values as one literal node each made every pass over the expression
    (typing, push-down, copies) cost seconds and the evaluator a scan per row; here
    membership is one hash lookup. ``values`` holds the non-NULL values but NaN;
    ``kind`` is their one Python type (None when they have several), the only type a
    lookup may trust: other values compare by the SQL rules, one by one.
    """

    __slots__ = ("values", "kind", "null", "nan")
    #: Snapshots give the plan's objects paths; a set of a million values is not plan.
    snapshot_opaque = True

    def __init__(self, values: list[Any]) -> None:
        found = set(values)
        self.null = None in found
        found.discard(None)
        kinds = set(map(type, found))
        nans = [v for v in found if v != v] if float in kinds else []
        self.nan = bool(nans)
        self.values = frozenset(found.difference(nans))
        self.kind: type | None = kinds.pop() if len(kinds) == 1 else None

    def __len__(self) -> int:
        return len(self.values) + self.null + self.nan

    def __deepcopy__(self, memo: dict[int, Any]) -> ValueSet:
        return self  # immutable: sqlglot copies expressions often, never this set

    def __getstate__(self) -> tuple[frozenset[Any], type | None, bool, bool]:
        return self.values, self.kind, self.null, self.nan

    def __setstate__(self, state: tuple[frozenset[Any], type | None, bool, bool]) -> None:
        self.values, self.kind, self.null, self.nan = state


#: The ``exp.In`` argument that holds a folded subquery's :class:`ValueSet`.
FOLDED = "folded"


def folded_values(node: exp.Expression) -> ValueSet | None:
    """The folded subquery values an ``IN`` tests against, if it is one of those."""
    found = node.args.get(FOLDED) if isinstance(node, exp.In) else None
    return found if isinstance(found, ValueSet) else None


class MatchNumberRef(exp.Expression):
    """``MATCH_NUMBER()``: the match's number in its partition, from 1."""

    arg_types: ClassVar[dict[str, bool]] = {}


#: :attr:`AggregateCall.function` of an aggregate that DuckDB computes.
BY_DUCKDB = "duckdb"


class AggregateCall(exp.Expression):
    """An aggregate over the rows of the match mapped to ``vars``.

    ``function`` is the canonical lower-case name (``count_star`` for
    ``COUNT(*)``/``COUNT(A.*)``); ``expressions`` are the bound arguments, which
    read the aggregated row through ``aggregated`` pointers; ``filter`` is the
    bound FILTER (WHERE ...) condition; ``final`` as in :class:`Position`.

    ``function`` :data:`BY_DUCKDB`: DuckDB computes the aggregate, ``sql`` over the lists
    of the values each argument takes at the aggregated rows (parameters ``$1``...).
    """

    arg_types = {
        "function": True,
        "expressions": False,
        "vars": False,
        "filter": False,
        "distinct": False,
        "final": False,
        "text": False,
        "sql": False,
    }

    @property
    def function(self) -> str:
        function: str = self.args["function"]
        return function

    @property
    def vars(self) -> VarSet:
        return self.args.get("vars")

    @property
    def condition(self) -> exp.Expression | None:
        return self.args.get("filter")

    @property
    def distinct(self) -> bool:
        return bool(self.args.get("distinct"))

    @property
    def final(self) -> bool | None:
        return self.args.get("final")

    # The source text shadows sqlglot's ``Expression.text(key)``, which is never called on
    # a bound node (their arguments are not identifiers).
    @property
    def text(self) -> str:  # type: ignore[override]
        text: str = self.args.get("text") or self.function
        return text

    @property
    def query(self) -> str | None:
        """DuckDB's query of a :data:`BY_DUCKDB` aggregate."""
        return self.args.get("sql")


def pointers(node: exp.Expression) -> Iterator[Pointer]:
    """Every pointer of ``node`` (those inside aggregates too)."""
    for n in node.walk():
        if isinstance(n, Pointer):
            yield n


def describe(node: exp.Expression) -> str:
    """Source-like text of a bound node, for messages."""
    if isinstance(node, Pointer | AggregateCall):
        return node.text
    if isinstance(node, Const):
        return node.args.get("text") or repr(node.value)
    if isinstance(node, MatchNumberRef):
        return "MATCH_NUMBER()"
    return type(node).__name__.upper()
