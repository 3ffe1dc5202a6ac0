"""Is a process still alive? Used to detect dead producers, readers and stream owners.

``os.kill(pid, 0)`` alone is not enough: a killed child that its parent has
not reaped yet is a zombie and still "exists", and pids are reused. On Linux
``/proc/<pid>/stat`` gives the state (``Z``/``X`` mean dead) and the start
time, which identifies one incarnation of a pid; elsewhere ``os.kill`` is the
fallback.
"""

from __future__ import annotations

import os


def start_time(pid: int) -> int:
    """The start time of ``pid`` in clock ticks since boot (0 when unknown)."""
    stat = _stat_fields(pid)
    if stat is None or len(stat) < 20:
        return 0
    try:
        return int(stat[19])
    except ValueError:
        return 0


def alive(pid: int, started: int = 0) -> bool:
    """Whether ``pid`` runs and, when ``started`` is given, is the same incarnation."""
    if pid <= 0:
        return False
    stat = _stat_fields(pid)
    if stat is None:
        if os.path.isdir("/proc/self"):
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if stat[0] in ("Z", "X", "x"):
        return False
    if started and len(stat) >= 20 and stat[19].isdigit() and int(stat[19]) != started:
        return False
    return True


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name is in parentheses and may itself contain spaces or ')'.
    return text[text.rfind(")") + 2 :].split()
