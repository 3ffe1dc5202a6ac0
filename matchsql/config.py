"""Per-connection settings, set by ``connect(**options)`` or ``SET name = value``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import Any

from matchsql.errors import Error


@dataclass
class Config:
    """Limits and knobs of one connection.

    The thread and row limits exist so that a pathological pattern ends with
    a clear error instead of exhausting memory.
    """

    # Live matcher threads of one match attempt. Equivalent threads are merged,
    # so only patterns whose DEFINEs tell many histories apart get near it.
    max_threads: int = 10_000
    # Rows a partition may hold for its open match attempts: an attempt longer
    # than this fails, which also stops a pattern that never decides (e.g. a
    # final variable that never holds) after one long attempt instead of one
    # per row. The demo table's partitions hold 10k rows.
    max_buffered_rows: int = 50_000
    # Automaton instructions a row pattern may expand to (bounded quantifiers
    # and PERMUTE are unrolled); checked before anything is built.
    max_pattern_size: int = 100_000
    batch_size: int = 65_536  # rows per Arrow batch from DuckDB to the matchers
    # Worker threads that run a one-time query's partitions (router/parallel.py);
    # 1 runs them one after the other on the calling thread.
    threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    # A partition's rows still to match are cut into chunks of at least this many
    # rows, matched speculatively on ``threads`` threads and fixed up to the
    # sequential result (fsm/compiled/chunks.py); 0 never splits a partition.
    split_rows: int = 16_384
    # Worker processes that run a one-time query's partitions (matchsql/workers/);
    # 1 keeps them in this process. ``SET workers = auto`` takes one per core.
    workers: int = 1
    execution_path: str = "auto"  # auto | reference | row_local | registers (planner.py)
    on_producer_death: str = "error"  # error | wait: what a live query does when its producer dies
    # How a continuous query's tuples reach its matchers (thesis chapters 3-4):
    # pull | push | adaptive. The default is pull because that is what the
    # continuous path does today: the query's own thread reads the live store
    # and routes before running the matchers.
    input_mode: str = "pull"
    adaptive_u: int = 0  # Go4Risk constant U (future matches pushed ahead); 0 is the thesis default
    # Which InputHolder(s) the Go4Risk switch watches with PARTITION BY (adaptive/switch.py):
    # the thesis' partition that received most tuples, or the total over all holders.
    adaptive_rule: str = "most_tuples"
    # The GPU column path (matchsql/gpu/): 'auto' takes it on a CUDA device for
    # partitions whose estimated work (rows x window) reaches gpu_min_work, 'on'
    # forces it (an error names why it cannot apply), 'off' never takes it.
    gpu: str = "auto"
    # Below this many row visits a kernel launch and the transfers cost more than
    # they save; the default is the size where one partition keeps a device busy.
    gpu_min_work: int = 100_000_000

    #: Whole-number settings for which 0 is meaningful; all others must be positive.
    _ZERO_ALLOWED = frozenset({"adaptive_u", "split_rows"})

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
        """Set one option, converting from SQL text where needed; unknown names are errors."""
        key = name.lower()
        known = {f.name: f for f in fields(self)}
        if key not in known:
            raise Error(f"unknown setting {name!r}; known settings: {', '.join(known)}")
        current = getattr(self, key)
        if key == "workers" and str(value).strip().lower() == "auto":
            value = os.cpu_count() or 1
        try:
            if isinstance(current, bool):
                value = str(value).lower() in ("1", "true", "on", "yes")
            elif isinstance(current, int):
                value = int(value)
                if value < 0 or (value == 0 and key not in self._ZERO_ALLOWED):
                    raise ValueError
            else:
                value = str(value)
        except (TypeError, ValueError):
            need = "a whole number >= 0" if key in self._ZERO_ALLOWED else "a positive whole number"
            raise Error(f"setting {name!r} needs {need}, got {value!r}") from None
        paths = ("auto", "reference", "row_local", "registers")
        if key == "execution_path" and value not in paths:
            raise Error(f"execution_path must be one of {', '.join(paths)}, got {value!r}")
        modes = ("pull", "push", "adaptive")
        if key == "input_mode" and value.lower() not in modes:
            raise Error(f"input_mode must be one of {', '.join(modes)}, got {value!r}")
        if key == "input_mode":
            value = value.lower()
        rules = ("most_tuples", "total_pressure")
        if key == "adaptive_rule":
            value = value.lower()
            if value not in rules:
                raise Error(f"adaptive_rule must be one of {', '.join(rules)}, got {value!r}")
        if key == "gpu":
            value = value.lower()
            if value not in ("auto", "on", "off"):
                raise Error(f"gpu must be one of auto, on, off, got {value!r}")
        if key == "on_producer_death" and value not in ("error", "wait"):
            raise Error(f"on_producer_death must be 'error' or 'wait', got {value!r}")
        setattr(self, key, value)


#: The start of the names matchsql gives its own tables and views in a user's database
#: (continuous query definitions, registered match streams): kept out of what lists the
#: user's tables (``.tables``, completion), as DuckDB keeps its catalogs out.
INTERNAL_PREFIX = "__matchsql_"


def is_internal(name: str) -> bool:
    """True for a table or view name that matchsql made for itself."""
    return name.lower().startswith(INTERNAL_PREFIX)
