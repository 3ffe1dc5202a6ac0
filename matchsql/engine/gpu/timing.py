"""Where the GPU path's time goes: host-to-device copies, kernels, device-to-host copies.

The benchmark reports the copies apart from the kernels (a GPU only pays where
the kernel time it saves is not spent again on the PCIe bus). The GPU matchers
wrap every copy and every launch in :func:`timed`; a launch is followed by a
synchronisation, so its time is the kernel's (the copy of its results, which
would wait for it anyway, is then timed alone). The totals are per process
(:data:`TOTALS`), read and reset by ``bench/gpu.py``; under numba's simulator
they are the simulator's figures (numpy copies, kernels run in Python), which
the benchmark labels as such.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields

from matchsql.saved_state.state_format import state_class

H2D, KERNEL, D2H = "h2d", "kernel", "d2h"


@state_class
@dataclass
class Totals:
    """Seconds and bytes per kind since the last :func:`reset`."""

    h2d_s: float = 0.0
    kernel_s: float = 0.0
    d2h_s: float = 0.0
    h2d_bytes: int = 0
    d2h_bytes: int = 0

    def copy(self) -> Totals:
        return Totals(**{f.name: getattr(self, f.name) for f in fields(self)})


TOTALS = Totals()
_LOCK = threading.Lock()  # partitions may run on several threads


@contextmanager
def timed(kind: str, nbytes: int = 0) -> Iterator[None]:
    """Add the block's wall time (and ``nbytes`` for a copy) to ``kind``'s total."""
    began = time.perf_counter()
    try:
        yield
    finally:
        spent = time.perf_counter() - began
        with _LOCK:
            setattr(TOTALS, f"{kind}_s", getattr(TOTALS, f"{kind}_s") + spent)
            if kind != KERNEL:
                setattr(TOTALS, f"{kind}_bytes", getattr(TOTALS, f"{kind}_bytes") + nbytes)


def reset() -> Totals:
    """The totals so far, then zero them."""
    with _LOCK:
        out = TOTALS.copy()
        for f in fields(TOTALS):
            setattr(TOTALS, f.name, type(getattr(TOTALS, f.name))())
        return out
