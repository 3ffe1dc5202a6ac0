"""What a bound expression observes of the match history, and how far it reaches.

The VM merges threads whose observable histories are equal, which is what
keeps ambiguous patterns polynomial; the holder keeps as many rows behind and
ahead of the current one as expressions reach. Both facts are read off the
bound form's pointers and aggregate calls, so every backend's caller gets them
from one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from matchsql.plan.bound import AggregateCall, Pointer, pointers


@dataclass
class HistoryUse:
    """Which parts of the match history an expression can observe.

    Two partial matches that agree on all of these behave identically under
    the expression, so the VM may keep only the preferred one.
    """

    last: dict[frozenset[str], int] = field(default_factory=dict)  # S -> k: last k+1 rows
    first: dict[frozenset[str], int] = field(default_factory=dict)  # S -> k: first k+1 rows
    every: set[frozenset[str]] = field(default_factory=set)  # all rows of S
    count: set[frozenset[str]] = field(default_factory=set)  # only how many rows of S
    labels: set[frozenset[str]] = field(default_factory=set)  # labels of the rows of S
    all_labels: bool = False  # the whole label sequence

    @property
    def empty(self) -> bool:
        return not (
            self.last or self.first or self.every or self.count or self.labels or self.all_labels
        )

    def in_define_of(self, var: str) -> HistoryUse:
        """The history a DEFINE of ``var`` really observes.

        While ``var``'s condition is evaluated the current row is already
        mapped to ``var``, so ``LAST(S.x, k)`` with ``var`` in ``S`` reaches
        only k rows of the earlier history (``A.x`` in DEFINE A is the current
        row and observes none). Without this, ``DEFINE A AS A.x > 0`` would
        keep threads apart by their last A row and defeat merging.
        """
        last = {}
        for s, k in self.last.items():
            if var not in s:
                last[s] = k
            elif k > 0:
                last[s] = k - 1
        labels = {s for s in self.labels if s in last or s in self.first or s in self.every}
        return HistoryUse(
            last, dict(self.first), set(self.every), set(self.count), labels, self.all_labels
        )

    def merge(self, other: HistoryUse) -> None:
        for s, k in other.last.items():
            self.last[s] = max(k, self.last.get(s, k))
        for s, k in other.first.items():
            self.first[s] = max(k, self.first.get(s, k))
        self.every |= other.every
        self.count |= other.count
        self.labels |= other.labels
        self.all_labels |= other.all_labels


@dataclass
class Reach:
    """How far an expression looks physically before/after the rows it is anchored to.

    ``back`` is counted from the match's first row, ``ahead`` from the current (or
    last) row. ``moves`` keeps, per backward navigation, its PREV distance and its
    reach back: in a partition of ``n`` rows a PREV of ``n`` or more rows lands before
    the partition from any row (NULL), so a matcher that knows its partition is
    complete holds only what :meth:`back_within` says instead of ``back`` rows.
    """

    back: int = 0
    ahead: int = 0
    moves: frozenset[tuple[int, int]] = frozenset()  # (PREV distance, reach back)

    def merge(self, other: Reach) -> None:
        self.back = max(self.back, other.back)
        self.ahead = max(self.ahead, other.ahead)
        self.moves = self.moves | other.moves

    def back_within(self, rows: int) -> int:
        """The reach back of the navigations that can land inside a partition of
        ``rows`` rows (the others always give NULL there)."""
        return max((back for distance, back in self.moves if distance < rows), default=0)


def observe(bound: exp.Expression) -> tuple[HistoryUse, Reach]:
    """The history ``bound`` can observe and its navigation reach."""
    use, reach = HistoryUse(), Reach()
    for node in bound.walk():
        if isinstance(node, Pointer) and not node.position.aggregated:
            _observe_pointer(node, use, reach)
        elif isinstance(node, AggregateCall):
            _observe_aggregate(node, use)
    return use, reach


def _observe_pointer(p: Pointer, use: HistoryUse, reach: Reach) -> None:
    at = p.position
    if at.physical:
        # FIRST(S.x, k) lies at least k rows after the match's first row (k rows of S
        # come before it) and LAST(S.x, k) at least k rows before the current one, so a
        # PREV from the first (a NEXT from the second) reaches k rows less far. Without
        # this, PREV(FIRST(B.x, 1e8), 1e8), which never leaves the match, kept 1e8
        # rows before every match and failed on the buffer limit.
        back = max(0, -at.physical - (at.offset if at.first else 0))
        ahead = max(0, at.physical - (0 if at.first else at.offset))
        reach.back = max(reach.back, back)
        reach.ahead = max(reach.ahead, ahead)
        if at.physical < 0:
            reach.moves = reach.moves | {(-at.physical, back)}
    if at.vars is not None:
        table = use.first if at.first else use.last
        table[at.vars] = max(at.offset, table.get(at.vars, at.offset))
    if not p.classifier:
        return
    if at.physical or (at.vars is None and not at.current):
        use.all_labels = True  # the located row may carry any label
    elif at.vars is not None:
        use.labels.add(at.vars)


def _observe_aggregate(call: AggregateCall, use: HistoryUse) -> None:
    reads_labels = any(p.classifier for p in pointers(call))
    if call.vars is None:
        use.all_labels |= reads_labels
        return
    count_only = call.function == "count_star" and call.condition is None
    (use.count if count_only else use.every).add(call.vars)
    if reads_labels:
        use.labels.add(call.vars)
