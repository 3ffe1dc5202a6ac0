"""A linear automaton run exactly as the thesis describes it (section 4.3.1).

The thesis' examples use letters as tuples and "tuple is X" as condition of
state X; this driver replays such streams and reports every evaluation to a
:class:`StateStatistics`, so the tests can compare with Table 4.2 step by
step without depending on the production matcher.
"""

from __future__ import annotations

from matchsql.engine.states import StateKind
from matchsql.execution.adaptive.statistics import StateStatistics


class ThesisRun:
    """One FSM over a letter stream with AFTER MATCH SKIP TO NEXT ROW semantics."""

    def __init__(self, stats: StateStatistics) -> None:
        self.stats = stats
        self.cur = 0
        self.window: list[str] = []
        self.open = False

    def feed(self, tup: str) -> str | None:
        """Evaluate one tuple; returns "match", "non-match" or None (window still open)."""
        if not self.open:
            self.stats.window_opened()
            self.open = True
        self.window.append(tup)
        states = self.stats.states
        while True:
            state = states[self.cur]
            holds = tup.startswith(state.name)
            if state.kind is StateKind.STAR:
                self.stats.evaluated(self.cur, left=not holds)
                if holds:
                    return None  # reflexive edge: the star keeps the tuple
                self.cur += 1  # epsilon edge: the same tuple tries the next state
                if self.cur == len(states):
                    return self._end(match=True)
                continue
            self.stats.evaluated(self.cur, left=holds)
            if not holds:
                return self._end(match=False)
            self.cur += 1
            return self._end(match=True) if self.cur == len(states) else None

    def _end(self, match: bool) -> str:
        if match:
            self.stats.match_found()
        self.cur = 0
        self.open = False
        return "match" if match else "non-match"


def replay_next_row(stats: StateStatistics, stream: list[str]) -> list[tuple[str, ...]]:
    """Run windows starting at every tuple (TO NEXT ROW); returns each window's tuples."""
    windows = []
    for start in range(len(stream)):
        run = ThesisRun(stats)
        for tup in stream[start:]:
            if run.feed(tup) is not None:
                break
        windows.append(tuple(run.window))
    return windows
