"""``SET adaptive_u = 'auto'``: the Go4Risk constant U chosen online under a memory budget.

U says how many future matches' worth of tuples an InputHolder may hold ahead
(thesis Table 4.3): more U, fewer suspensions of the push thread and more memory.
What a user knows is the memory they can spare (``adaptive_memory_budget``, in
tuples held, the experiment's Avg Mem), not the U that keeps under it for their
query and rate; so the controller measures Avg Mem over short periods and moves U
the way TCP moves its window: multiplicatively down (halved) as soon as a period
is over the budget, up (doubled plus one) while a period uses less than half of
it, and otherwise not at all, which damps the oscillation between the two. Without
a budget (0) U climbs to :data:`MAX_AUTO_U`, the top of the experiment's grid.

Below U = 0 the thesis has nothing left to give: ``R_Bound`` is then the predicted
rest of the current match, counted in units of thousands of tuples (see
:data:`matchsql.execution.adaptive.push.UNIT_ROWS`), and a budget under what that holds
(Q3 at saturation: 14-17k tuples) would never be met. So past U = 0 the
controller halves the unit instead (:attr:`AutoU.shrink`, up to
:data:`MAX_SHRINK` times), trading throughput (smaller slices, more switches) for
memory, and undoes those halvings first when memory allows.

The controller reads the running totals of :class:`InputMetrics`, so its memory is
the same per-routed-tuple average the experiment reports.
"""

from __future__ import annotations

#: Seconds of input over which one decision averages the memory held.
PERIOD_S = 0.25
#: The highest U the controller chooses (the experiment's grid ends there).
MAX_AUTO_U = 50
#: A period below this share of the budget raises U.
RAISE_BELOW = 0.5
#: Halvings of the unit of ``R`` the controller may apply below U = 0 (4096 / 2^4 = 256;
#: each holder's unit stops at :data:`matchsql.execution.adaptive.push.MIN_SHRUNK_ROWS`).
MAX_SHRINK = 4


class AutoU:
    """U for the next period, from the Avg Mem of the last (see the module docstring)."""

    def __init__(self, budget: int, now: float, u: int = 0) -> None:
        if budget < 0:
            raise ValueError("a memory budget is a number of tuples >= 0")
        self.budget = budget
        self.u = u
        self.shrink = 0  # halvings of the unit of R, below U = 0
        self.changes = 0
        self._since = now
        self._mem_total = 0
        self._samples = 0

    def update(self, mem_total: int, samples: int, now: float) -> int:
        """U after this call, given the metrics' running ``mem_total`` and ``samples``."""
        if now - self._since < PERIOD_S or samples <= self._samples:
            return self.u
        mean = (mem_total - self._mem_total) / (samples - self._samples)
        self._since, self._mem_total, self._samples = now, mem_total, samples
        u, shrink = self.u, self.shrink
        if self.budget and mean > self.budget:
            if u:
                u //= 2
            else:
                shrink = min(MAX_SHRINK, shrink + 1)
        elif not self.budget or mean < RAISE_BELOW * self.budget:
            if shrink:
                shrink -= 1
            else:
                u = min(MAX_AUTO_U, 2 * u + 1)
        if (u, shrink) != (self.u, self.shrink):
            self.u, self.shrink = u, shrink
            self.changes += 1
        return u
