"""Snapshots of partition matchers: their state as data, their plan referenced by path.

A partition matcher holds two kinds of objects: its state (rows it keeps,
counters, the match number, partial threads) and the query's plan that every
partition shares (the analysed spec, the compiled program, DEFINE and
MEASURES functions - closures that cannot be stored - and the config). A
snapshot writes the state in :mod:`matchsql.state_format` (data only: loading
it runs nothing) and writes each plan object as its *path* from the
plan's roots (``spec.measures[2].fn``); restoring walks a freshly planned copy
of the same query the same way and puts its objects back at those paths. So a
snapshot is small, and restoring it needs only the query text.
"""

from __future__ import annotations

import types
from collections import deque
from collections.abc import Mapping

import numpy as np

from matchsql import state_format
from matchsql.state_format import SnapshotError

_LEAVES = (str, bytes, int, float, complex, bool, type(None), range, types.ModuleType, type)
_MAX_OBJECTS = 200_000


def _children(obj: object) -> list[tuple[object, object]]:
    """(step, child) pairs in a deterministic order (no sets: their order varies)."""
    if isinstance(obj, (list, tuple)):
        return list(enumerate(obj))
    if isinstance(obj, dict):
        return [(("key", repr(k)), v) for k, v in obj.items() if isinstance(k, (str, int, tuple))]
    if isinstance(obj, (np.ndarray, types.FunctionType, types.BuiltinFunctionType)):
        return []
    found: list[tuple[object, object]] = []
    state = getattr(obj, "__dict__", None)
    if isinstance(state, dict):
        found.extend((("attr", k), v) for k, v in state.items())
    for cls in type(obj).__mro__:
        for slot in (
            getattr(cls, "__slots__", ())
            if isinstance(getattr(cls, "__slots__", ()), (tuple, list))
            else ()
        ):
            if hasattr(obj, slot) and not slot.startswith("__"):
                found.append((("attr", slot), getattr(obj, slot)))
    return found


def _opaque(obj: object) -> bool:
    """A cache beside the plan (``snapshot_opaque``, say a spec's plan memo): what it holds
    depends on what ran before, so its objects get no paths (the plan's reach them)."""
    return bool(getattr(type(obj), "snapshot_opaque", False))


def plan_paths(roots: Mapping[str, object]) -> dict[tuple, object]:
    """Every non-leaf object reachable from ``roots``, by the first path that reaches it
    (breadth first, so the same plan built twice gives the same paths)."""
    paths: dict[tuple, object] = {}
    seen: set[int] = set()
    queue: deque[tuple[tuple[object, ...], object]] = deque(
        ((name,), obj) for name, obj in roots.items()
    )
    while queue and len(paths) < _MAX_OBJECTS:
        path, obj = queue.popleft()
        if isinstance(obj, _LEAVES) or id(obj) in seen or _opaque(obj):
            continue
        seen.add(id(obj))
        paths[path] = obj
        queue.extend((path + (step,), child) for step, child in _children(obj))
    return paths


class PlanIndex:
    """The paths of one plan's objects, computed once for every snapshot of its matchers."""

    def __init__(self, roots: Mapping[str, object]) -> None:
        self.roots = dict(roots)  # keeps the objects (and so their ids) alive
        self.paths = plan_paths(roots)
        self._by_id = {id(obj): path for path, obj in self.paths.items()}

    def dumps(self, state: object) -> bytes:
        """``state`` in the snapshot format, writing every object of the plan as its path."""
        by_id = self._by_id
        return state_format.dumps(state, lambda obj: by_id.get(id(obj)))

    def loads(self, blob: bytes) -> object:
        """The state a :meth:`dumps` of the same query saved, in this plan's objects."""
        paths = self.paths

        def resolve(path: tuple) -> object:
            try:
                return paths[path]
            except (KeyError, TypeError):
                # A matcher restored into another matcher's plan (another execution_path
                # or matchsql version than the one that wrote the snapshot) does not fit.
                raise SnapshotError(
                    f"the checkpoint does not fit this plan of the query "
                    f"(it was written under another execution_path or "
                    f"matchsql version: the plan has no object at "
                    f"{path})"
                ) from None

        return state_format.loads(blob, resolve)
