"""DuckDB's replacement scans, seen from matchsql: data frames named by their Python variable.

DuckDB finds ``df`` in ``con.sql("SELECT * FROM df")`` by looking at the
variables of the frame that called it. matchsql runs its queries from its
own frames, on cursors of its own and partly in other threads, so it takes
the caller's variables when a statement starts (:func:`caller_scope`) and
registers the objects it names on the connections that run the statement.
"""

from __future__ import annotations

import sys
from collections import ChainMap
from collections.abc import Mapping
from types import FrameType
from typing import Any

#: Classes DuckDB scans, by top-level module: what a FROM may name as a variable.
SCANNABLE = {
    "pandas": {"DataFrame"},
    "polars": {"DataFrame", "LazyFrame"},
    "pyarrow": {
        "Table",
        "RecordBatch",
        "RecordBatchReader",
        "Dataset",
        "FileSystemDataset",
        "InMemoryDataset",
        "UnionDataset",
        "Scanner",
    },
}

EMPTY: Mapping[str, Any] = {}


def caller_scope() -> Mapping[str, Any]:
    """Local then global variables of the innermost frame outside the matchsql package."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == "matchsql":
        frame = frame.f_back
    if frame is None:
        return EMPTY
    try:
        return ChainMap(dict(frame.f_locals), frame.f_globals)
    finally:
        del frame


def scannable(value: Any) -> bool:
    """Whether DuckDB can scan ``value`` as a table."""
    kind = type(value)
    return kind.__name__ in SCANNABLE.get(kind.__module__.split(".")[0], ())


def lookup(scope: Mapping[str, Any], name: str) -> Any | None:
    """The scannable object ``name`` refers to (exact name first, then any case), or None."""
    value = scope.get(name)
    if value is not None and scannable(value):
        return value
    folded = name.lower()
    for key in scope:
        if isinstance(key, str) and key.lower() == folded and scannable(scope[key]):
            return scope[key]
    return None
