"""Go4Risk statistic model of one matcher (DejaVu thesis, section 4.3.1 and 4.4.1).

The adaptive switch needs a cheap prediction of how many unprocessed tuples
``R`` an InputHolder should hold: enough that the matcher never waits for the
store, few enough that memory stays low. The thesis predicts it from the
*selectivity* of the automaton's states, counted while matching:

* every evaluation of a tuple at a state counts one tuple *in*;
* a tuple *leaves* a singleton when its condition holds, and leaves a star
  when the reflexive condition fails (the same tuple then goes on to the next
  state; thesis Assumption 1 - a tuple is consumed by one state only);
* ``sel = out / in`` (Definition 1).

From the current state the model derives ``Sel_remain`` (stars count 1,
Definition 3), the expectation ``K`` (0.5 per singleton, Definition 5), the
predicted lengths ``l_seq`` and ``l_pattern`` (Definitions 7 and 8) and
``R_Bound`` (Table 4.3). The module is pure bookkeeping - no threads, no
locks - so that it can be tested against the thesis' worked examples and
shared by every execution path; callers serialise access.

Reading of the thesis where it is ambiguous (tests pin each choice):

* ``avg`` of a star (Definition 6, "average number of tuples *inside* a Star
  state") is taken as ``(in - out) / out``: the tuples that stayed per exit.
  The printed formula ``sel^-1`` also counts the exit evaluation, whose tuple
  belongs to the next state; the worked example (``ceil(3/4)`` for ``A*`` with
  ``sel = 4/7`` after Table 4.2, giving ``R_Bound = 3``) uses the count of
  tuples inside, and so do we.
* ``Match_overall > 0.5`` is strict, as in Table 4.3 (Listing 4.2 uses >=).
* With no match seen yet, ``R_Bound`` is the number of states (Listing 4.2).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

from matchsql.engine.states import StateKind, StateSpec


class Sliding(Enum):
    """The two sliding strategies of Table 4.3.

    ``PAST_LAST_ROW`` is the tumbling window: a match empties the holder.
    Every other AFTER MATCH SKIP keeps rows of the match, so it behaves like
    ``NEXT_ROW`` for memory purposes.
    """

    NEXT_ROW = "next_row"
    PAST_LAST_ROW = "past_last_row"


@dataclass
class _Counts:
    tuples_in: int = 0
    tuples_out: int = 0


class StateStatistics:
    """Per-state in/out counts and the overall match statistic of one matcher."""

    def __init__(self, states: Sequence[StateSpec]) -> None:
        if not states:
            raise ValueError("a statistic model needs at least one state")
        self.states: tuple[StateSpec, ...] = tuple(states)
        self._counts = [_Counts() for _ in self.states]
        self.windows = 0  # windows opened (denominator of Match_overall)
        self.matches = 0  # windows that ended in a match
        self.current = 0  # state of the open window's most preferred thread (0: none open)

    # -- updates, called by the matcher -------------------------------------

    def evaluated(self, state: int, left: bool) -> None:
        """A tuple was evaluated at ``state``; ``left`` when it left the state."""
        counts = self._counts[state]
        counts.tuples_in += 1
        if left:
            counts.tuples_out += 1

    def load(
        self, ins: Iterable[int], outs: Iterable[int], windows: int, matches: int, current: int
    ) -> None:
        """Replace every count with a matcher's running totals (see ``state_counts``)."""
        for counts, tuples_in, tuples_out in zip(self._counts, ins, outs):
            counts.tuples_in = int(tuples_in)
            counts.tuples_out = int(tuples_out)
        self.windows = int(windows)
        self.matches = int(matches)
        self.current = min(max(int(current), 0), len(self.states) - 1)

    def window_opened(self) -> None:
        self.windows += 1

    def match_found(self) -> None:
        self.matches += 1

    # -- the model ----------------------------------------------------------

    def counts(self, state: int) -> tuple[int, int]:
        """``(in, out)`` of ``state``."""
        c = self._counts[state]
        return c.tuples_in, c.tuples_out

    def selectivity(self, state: int) -> Fraction:
        """``out / in`` (Definition 1); 0 before any tuple came in, as Table 4.2 prints it."""
        c = self._counts[state]
        return Fraction(c.tuples_out, c.tuples_in) if c.tuples_in else Fraction(0)

    def sel_remain(self, cur: int) -> Fraction:
        """Product of selectivities from ``cur`` to the last state, stars as 1 (Def. 3)."""
        product = Fraction(1)
        for i in range(cur, len(self.states)):
            if self.states[i].kind is StateKind.SINGLETON:
                product *= self.selectivity(i)
        return product

    def expectation(self, cur: int) -> Fraction:
        """``K``: 0.5 per remaining singleton, 1 per star (Definition 5)."""
        singletons = sum(1 for s in self.states[cur:] if s.kind is StateKind.SINGLETON)
        return Fraction(1, 2**singletons)

    def remain_is_high(self, cur: int) -> bool:
        """Definition 4: ``Sel_remain >= K``."""
        return self.sel_remain(cur) >= self.expectation(cur)

    def match_overall(self) -> Fraction:
        """Matches per window opened (Definition 2); 0 before any window."""
        return Fraction(self.matches, self.windows) if self.windows else Fraction(0)

    def tuples_inside(self, state: int) -> Fraction | None:
        """Average tuples a star holds per exit, ``(in - out) / out``; None if never left.

        See the module docstring for why this, not ``1/sel``, is the thesis'
        ``avg`` of Definition 6.
        """
        c = self._counts[state]
        if c.tuples_out == 0:
            return None
        return Fraction(c.tuples_in - c.tuples_out, c.tuples_out)

    def _length(self, start: int) -> int:
        """Sum of Definition 7/8 terms from ``start``: singletons 1, the first star its avg."""
        total = 0
        first_star = True
        for i in range(start, len(self.states)):
            if self.states[i].kind is StateKind.SINGLETON:
                total += 1
            elif first_star:
                first_star = False
                inside = self.tuples_inside(i)
                # A star never left yet has held every tuple it saw: a lower bound.
                total += (
                    math.ceil(inside) if inside is not None else max(1, self._counts[i].tuples_in)
                )
        return total

    def l_seq(self, cur: int) -> int:
        """Predicted tuples needed to finish the pattern from ``cur`` (Definition 7)."""
        return self._length(cur)

    def l_pattern(self) -> int:
        """Predicted length of a whole future match (Definition 8)."""
        return self._length(0)

    def r_bound(self, cur: int, u: int = 0, sliding: Sliding = Sliding.NEXT_ROW) -> int:
        """How many unprocessed tuples are worth holding (Table 4.3)."""
        if u < 0:
            raise ValueError("U must be >= 0")
        if self.matches == 0:
            return len(self.states)
        bound = self.l_seq(cur)
        if sliding is Sliding.PAST_LAST_ROW:
            bound += 1  # after a tumbling slide the holder is empty: keep one more
        if self.remain_is_high(cur) and self.match_overall() > Fraction(1, 2):
            bound += u * self.l_pattern()
        return bound
