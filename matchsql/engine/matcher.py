"""The contract every execution path's partition matcher keeps.

Routers, the adaptive input modes, Spark and the stream readers drive one
matcher per partition through these calls only, so a new path (the GPU
column path) plugs in by implementing them. Feeding a partition in any split
into batches gives exactly the output of feeding it as one batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import pyarrow as pa

from matchsql.engine.states import StateSpec

#: Go4Risk totals of decided attempts: (tuples in, tuples out per state, windows,
#: matched windows, current state); see :meth:`Matcher.state_counts`.
StateCounts = tuple[np.ndarray, np.ndarray, int, int, int]


class CountingGate:
    """Whether observing matchers count their statistics now, shared by every run of
    one query's adaptive input.

    Only matcher calls on tuples that passed through the InputHolders feed the switch.
    While the switch holds push suspended, the query thread reads and matches the store
    as pull does, and statistics counted there would only slow it: counting takes the
    thread VM where the DFA and the prefilter would run (Q4 at 3M tuples/s ran 6 % below
    pull). One flag the input flips, rather than a call per run, with thousands of runs.
    """

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = True


class Matcher(Protocol):
    """One partition's run of a MATCH_RECOGNIZE on some execution path."""

    @property
    def buffered_rows(self) -> int:
        """Rows of the partition the matcher still holds (its InputHolder's size)."""
        ...  # pragma: no cover

    def feed(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        """The partition's next rows, in ORDER BY order; the output that became final."""
        ...  # pragma: no cover

    def feed_final(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        """The partition's last rows: ``feed(batch) + finish()``, in one pass where it can."""
        ...  # pragma: no cover

    def finish(self) -> list[pa.RecordBatch]:
        """The partition has ended: decide what is open and return the rest of the output."""
        ...  # pragma: no cover

    def observe(
        self,
        states: Sequence[StateSpec],
        label_state: Sequence[int],
        gate: CountingGate | None = None,
    ) -> bool:
        """Count Go4Risk statistics per state from now on, in the calls made while
        ``gate`` is on (always without one); False when the matcher cannot (the caller
        then keeps coarser statistics)."""
        ...  # pragma: no cover

    def state_counts(self) -> StateCounts:
        """The totals counted since :meth:`observe` returned True."""
        ...  # pragma: no cover
