"""The engine's long-lived objects kept out of Python's full garbage collections.

Python's full collection walked the engine's objects (sqlglot, pyarrow, numba, the
loaded kernels) every time: 85 ms on the 2-core machine, in the middle of a match
run, where no interrupt can land (the reference VM's allocations trigger one every
few hundred milliseconds: measured up to 96 ms between two looks at the cancel flag).
Frozen, a full collection takes 2-3 ms.
"""

from __future__ import annotations

import gc

#: MATCH_RECOGNIZE runs of this process that still freeze what is alive when they
#: start (see :func:`freeze_engine`).
_freezes_left = 2
FREEZE = True  # False: leave the collector alone (a host that manages it itself)


def freeze_engine() -> None:
    """At the start of the process's first two MATCH_RECOGNIZE runs: collect the young
    generations, then ``gc.freeze()`` what is alive, which is the engine then (and by
    the second run the kernels the first one loaded; the first run's own objects are
    gone by then).

    What is frozen is alive then, or cyclic garbage that had reached the oldest
    generation already; should a frozen object become cyclic garbage later it stays
    (reference counting still frees everything else). A full collection first would
    free that little garbage at the price of a walk over everything the imports made:
    40-90 ms of the first query's second (``python -m bench.startup``), for some
    kilobytes.
    """
    global _freezes_left
    if _freezes_left <= 0 or not FREEZE:
        return
    _freezes_left -= 1
    gc.collect(1)
    gc.freeze()
