"""Named crash points for the fault-injection suite (``tests/faults``).

``MATCHSQL_CRASH_AT=<point>:<n>`` makes the process kill itself with SIGKILL
the n-th time it reaches ``point`` - in the middle of a checkpoint's
transaction, between an archive part's fsync and its publication, right after
a spill file is written - moments a random kill would rarely hit. Unset (the
normal case) a point costs one comparison.
"""

from __future__ import annotations

import os
import signal

_SPEC = os.environ.get("MATCHSQL_CRASH_AT", "")
_POINT, _, _COUNT = _SPEC.partition(":")
_hits = 0


def point(name: str) -> None:
    """Crash here if the environment asks for it (see the module docstring)."""
    global _hits
    if not _SPEC or name != _POINT:
        return
    _hits += 1
    if _hits >= int(_COUNT or 1):
        os.kill(os.getpid(), signal.SIGKILL)
