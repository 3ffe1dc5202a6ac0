"""Per-connection settings, set by ``connect(**options)`` or ``SET name = value``."""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field, fields
from typing import Any

from matchsql.errors import Error


def _buffered_bytes_default() -> int:
    return default_max_buffered_bytes()  # defined below, with the sizes it reads


@dataclass
class Config:
    """Limits and knobs of one connection.

    The thread and buffer limits exist so that a pathological pattern ends with
    a clear error instead of exhausting memory.
    """

    # Live matcher threads of one match attempt. Equivalent threads are merged,
    # so only patterns whose DEFINEs tell many histories apart get near it.
    max_threads: int = 10_000
    # Bytes of input rows a partition may hold for its open match attempts
    # (matchsql/engine/buffer_limit.py): an attempt that would hold more fails, which also
    # stops a pattern that never decides. The default is a share of the machine's
    # memory (default_max_buffered_bytes).
    max_buffered_bytes: int = field(default_factory=_buffered_bytes_default)
    # An extra bound on the same rows by their number; 0 (the default) sets none.
    max_buffered_rows: int = 0
    # Automaton instructions a row pattern may expand to (bounded quantifiers
    # and PERMUTE are unrolled); checked before anything is built.
    max_pattern_size: int = 100_000
    batch_size: int = 65_536  # rows per Arrow batch from DuckDB to the matchers
    # Worker threads that run a one-time query's partitions (execution/router/parallel.py);
    # 1 runs them one after the other on the calling thread.
    threads: int = field(default_factory=lambda: min(os.cpu_count() or 1, 1_024))
    # A partition's rows still to match are cut into chunks of at least this many
    # rows, matched speculatively on ``threads`` threads and fixed up to the
    # sequential result (engine/compiled/chunks.py); 0 never splits a partition.
    split_rows: int = 16_384
    # Worker processes that run a one-time query's partitions (matchsql/execution/workers/);
    # 1 keeps them in this process. ``SET workers = auto`` takes one per core.
    workers: int = 1
    execution_path: str = "auto"  # auto | reference | row_local | registers (planner.py)
    on_producer_death: str = "error"  # error | wait: what a live query does when its producer dies
    # How a continuous query's tuples reach its matchers (thesis chapters 3-4):
    # pull | push | adaptive. The default is pull because that is what the
    # continuous path does today: the query's own thread reads the live store
    # and routes before running the matchers.
    input_mode: str = "pull"
    # Go4Risk constant U (future matches pushed ahead); 0 is the thesis default, 'auto'
    # lets the switch choose U online under adaptive_memory_budget (execution/adaptive/auto_u.py).
    adaptive_u: int | str = 0
    # Tuples the InputHolders may hold on average under adaptive_u = 'auto'; 0: no budget.
    adaptive_memory_budget: int = 0
    # Which InputHolder(s) the Go4Risk switch watches with PARTITION BY
    # (execution/adaptive/switch.py):
    # the thesis' partition that received most tuples, the total over all holders, or
    # each holder on its own statistics.
    adaptive_rule: str = "most_tuples"
    # The GPU column path (matchsql/engine/gpu/): 'auto' takes it on a CUDA device for
    # partitions whose estimated work (rows x window) reaches gpu_min_work, 'on'
    # forces it (an error names why it cannot apply), 'off' never takes it.
    gpu: str = "auto"
    # Below this many row visits a kernel launch and the transfers cost more than
    # they save; the default is the size where one partition keeps a device busy.
    gpu_min_work: int = 100_000_000

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> Config:
        config = cls()
        for name, value in options.items():
            config.set(name, value)
        return config

    def set(self, name: str, value: Any) -> None:
        """Set one option, converting from SQL text where needed.

        Every setting has a range (:data:`WHOLE_RANGES`) or a list of words
        (:data:`CHOICES`), checked here, so that a value that would break the next
        statement (a hundred thousand workers, a limit past int64) is refused when
        it is set, with the range in the message.
        """
        key = name.lower()
        known = {f.name for f in fields(self)}
        if key not in known:
            raise Error(f"unknown setting {name!r}; known settings: {', '.join(sorted(known))}")
        if key in SIZE_RANGES:
            value = _size(key, value)
        elif key in WHOLE_RANGES:
            value = _whole(key, value)
        else:
            value = str(value).strip().lower()
            if value not in CHOICES[key]:
                raise Error(
                    f"setting {key!r} must be one of {', '.join(CHOICES[key])}, got {value!r}"
                )
        setattr(self, key, value)


#: The most automaton instructions a row pattern may expand to, whatever ``max_pattern_size``.
MAX_PATTERN_SIZE = 10_000_000
#: Worker processes past this share the 64 partition buckets with nothing left to share.
MAX_WORKERS = 64

#: (lowest, highest) of each whole-number setting. The highest values are what the engine
#: can still honour: positions are int64, a thread or a process per unit must start.
WHOLE_RANGES: dict[str, tuple[int, int]] = {
    "max_threads": (1, 10_000_000),
    "max_buffered_rows": (0, 1_000_000_000),
    "max_pattern_size": (1, MAX_PATTERN_SIZE),
    "batch_size": (1, 16_777_216),
    "threads": (1, 1_024),
    "split_rows": (0, 1_000_000_000),
    "workers": (1, MAX_WORKERS),
    "adaptive_u": (0, 1_000_000),
    "adaptive_memory_budget": (0, 10**12),
    "gpu_min_work": (1, 10**18),
}
#: (lowest, highest) bytes of each size setting, which takes a number of bytes or a
#: DuckDB-style size ('512MB', '2GiB'). A partition may always hold one row.
SIZE_RANGES: dict[str, tuple[int, int]] = {
    "max_buffered_bytes": (1 << 10, 1 << 50),
}
#: The words a word setting takes (case-insensitive), the first being what most users want.
CHOICES: dict[str, tuple[str, ...]] = {
    "execution_path": ("auto", "reference", "row_local", "registers"),
    "on_producer_death": ("error", "wait"),
    "input_mode": ("pull", "push", "adaptive"),
    "adaptive_rule": ("most_tuples", "total_pressure", "per_partition"),
    "gpu": ("auto", "on", "off"),
}


def describe_range(key: str) -> str:
    """The allowed values of a setting, as the manual and the errors word them."""
    if key in CHOICES:
        return ", ".join(CHOICES[key])
    if key in SIZE_RANGES:
        low, high = SIZE_RANGES[key]
        return (
            f"a size from {format_size(low)} to {format_size(high)} (a number of bytes, "
            "or a number and a unit: '512MB', '2GiB')"
        )
    low, high = WHOLE_RANGES[key]
    text = f"a whole number from {low:,} to {high:,}"
    return text + _AUTO_MEANS[key] if key in _AUTO_MEANS else text


#: The whole-number settings that also take ``auto``, and what it means.
_AUTO_MEANS = {
    "workers": " or auto (one per core)",
    "adaptive_u": " or auto (chosen online under adaptive_memory_budget)",
}


_WHOLE = re.compile(r"[+-]?[0-9]{1,30}")


def _whole(key: str, value: Any) -> int | str:
    """``value`` as a whole number within ``key``'s range; ``workers = auto`` is the cores,
    ``adaptive_u = auto`` stays the word (the query's switch chooses U)."""
    if key in _AUTO_MEANS and str(value).strip().lower() == "auto":
        return min(os.cpu_count() or 1, MAX_WORKERS) if key == "workers" else "auto"
    low, high = WHOLE_RANGES[key]
    number: int | None = None
    if not isinstance(value, bool):
        if isinstance(value, int):
            number = value
        elif isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
            number = int(value.strip())
    if number is None or not low <= number <= high:
        raise Error(f"setting {key!r} must be {describe_range(key)}, got {value!r}")
    return number


#: Bytes per unit of a size setting, as DuckDB reads ``memory_limit``: KB, MB, ... are
#: powers of 1000, KiB, MiB, ... powers of 1024.
_UNITS = {
    "": 1,
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "pb": 10**15,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
    "pib": 1 << 50,
}
_SIZE = re.compile(r"([0-9]{1,20}(?:\.[0-9]{1,20})?)\s*([a-z]{0,5})")


def parse_size(value: Any) -> int | None:
    """``value`` (a whole number of bytes, or text such as ``'1.5 GB'``) in bytes; None
    where it is no size."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    found = _SIZE.fullmatch(str(value).strip().lower())
    if found is None or found.group(2) not in _UNITS:
        return None
    return int(float(found.group(1)) * _UNITS[found.group(2)])


def format_size(size: float) -> str:
    """``size`` bytes as DuckDB shows memory: ``'512 bytes'``, ``'1.5 KiB'``, ``'2.0 GiB'``."""
    if size < 1024:
        return f"{int(size)} bytes"
    units = ("KiB", "MiB", "GiB", "TiB", "PiB")
    at = 0
    size /= 1024
    while size >= 1024 and at < len(units) - 1:
        size /= 1024
        at += 1
    return f"{size:.1f} {units[at]}"


def _size(key: str, value: Any) -> int:
    """``value`` as bytes within ``key``'s range."""
    low, high = SIZE_RANGES[key]
    number = parse_size(value)
    if number is None or not low <= number <= high:
        raise Error(f"setting {key!r} must be {describe_range(key)}, got {value!r}")
    return number


#: The share of the machine's memory one partition's buffered rows may take by default.
BUFFER_SHARE = 8
#: The default of ``max_buffered_bytes`` where the machine's memory cannot be read.
FALLBACK_BUFFERED_BYTES = 1 << 30


def memory_bytes() -> int | None:
    """The memory this process may use: the machine's physical memory, or the cgroup's
    limit (a container) where that is lower, as DuckDB reads it for ``memory_limit``;
    None where neither can be read."""
    found: int | None = None
    try:
        found = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and (found is None or int(text) < found):
            found = int(text)
    return found if found and found > 0 else None


@functools.cache
def default_max_buffered_bytes() -> int:
    """``max_buffered_bytes``' default: an eighth of :func:`memory_bytes`.

    DuckDB may take 80% of memory (its ``memory_limit``), so the buffer is no share
    of what is left over but a bound that a runaway partition reaches long before the
    process is killed: the compiled matchers make working arrays from the held rows
    of about their size again, several partitions run at once, and the reference
    path holds the rows as Python values, several times their Arrow size.
    """
    found = memory_bytes()
    share = found // BUFFER_SHARE if found else FALLBACK_BUFFERED_BYTES
    low, high = SIZE_RANGES["max_buffered_bytes"]
    return max(low, min(share, high))


#: The start of the names matchsql gives its own tables and views in a user's database
#: (continuous query definitions, registered match streams): kept out of what lists the
#: user's tables (``.tables``, completion), as DuckDB keeps its catalogs out.
INTERNAL_PREFIX = "__matchsql_"


def is_internal(name: str) -> bool:
    """True for a table or view name that matchsql made for itself."""
    return name.lower().startswith(INTERNAL_PREFIX)
