"""Keep freed memory in the process for the next statement (glibc's malloc).

A statement over a million rows allocates tens of MiB of numpy, Arrow and
DuckDB buffers and frees them at its end. glibc gives a freed block of 128
KiB or more straight back to the system, so the next statement maps it again
and faults it in page by page, each page zeroed by the kernel. With blocks up
to 32 MiB (glibc's largest setting) taken from the heap and up to 256 MiB of
free heap kept, the next statement finds them mapped and warm.

Measured on 1M rows of 500 partitions, ``A B+ C+``, in a process that ran
other queries before (medians of 12, three processes each): the process that
plans and routes a statement on two workers took 3,400-6,800 page faults per
statement, 130-280 with these settings, and the statement 44.7-48.6 ms
against 39.2-41.2 ms; one process alone (``workers = 1``) 77-83 against
73-74 ms. A worker of a 1M-row Q2 took about 4,500 faults per query before,
150-600 after.

The cost is memory: what a statement freed stays with the process (blocks of
32 MiB or more still go back at once, and so does a free heap top beyond
256 MiB). Settings are per process and made once. They are left alone where
the user set glibc's own ``MALLOC_*`` tunables, where ``MATCHSQL_KEEP_FREED_MEMORY=0``
asks for glibc's defaults, and off glibc.
"""

from __future__ import annotations

import ctypes
import os

#: glibc's mallopt parameters.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: Blocks below this come from the heap (32 MiB: the largest glibc takes).
MMAP_THRESHOLD = 32 << 20
#: Free memory at the heap's top up to this is kept.
TRIM_THRESHOLD = 256 << 20
#: ``0`` leaves glibc's defaults.
OPT_OUT_ENV = "MATCHSQL_KEEP_FREED_MEMORY"
#: glibc's own variables for these settings: where set, the user chose for themselves.
_GLIBC_ENV = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")

_done: bool | None = None


def keep_freed_memory() -> bool:
    """Make the settings once in this process; whether they are in force."""
    global _done
    if _done is None:
        _done = _wanted() and _set()
    return _done


def _wanted() -> bool:
    if os.environ.get(OPT_OUT_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    return not any(name in os.environ for name in _GLIBC_ENV)


def _set() -> bool:
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
