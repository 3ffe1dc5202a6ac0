"""Stores: the live stream store (shared-memory queue, producers), the archived store.

``Producer`` is loaded on first access (PEP 562): importing any module of
this package (the demo table, at start-up) must not load the producer's
shared-memory and Parquet spill machinery, which a session without streams
never uses. That lazy import is the point; there is no cycle behind it.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Producer"]


def __getattr__(name: str) -> Any:
    if name == "Producer":
        return importlib.import_module("matchsql.storage.producer").Producer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
