"""Snapshots of partition matchers: their state as data, their plan referenced by path.

A partition matcher holds two kinds of objects: its state (rows it keeps,
counters, the match number, partial threads) and the query's plan that every
partition shares (the analysed spec, the compiled program, DEFINE and
MEASURES functions - closures that cannot be stored - and the config). A
snapshot writes the state in :mod:`matchsql.saved_state.state_format` (data only: loading
it runs nothing) and writes each plan object as its *path* from the
plan's roots (``spec.measures[2].fn``); restoring walks a freshly planned copy
of the same query the same way and puts its objects back at those paths. So a
snapshot is small, and restoring it needs only the query text.

This is the one snapshot writer: a continuous query's checkpoint, a worker's
partitions moving to another worker and a Spark key's state between
micro-batches all go through :class:`PlanIndex`.
"""

from __future__ import annotations

import types
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np

from matchsql.saved_state import state_format
from matchsql.saved_state.state_format import SnapshotError

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

    def __init__(self, roots: Mapping[str, object], saved: str = "checkpoint") -> None:
        self.saved = saved  # what the user knows the snapshot as, for errors
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
        saved = self.saved

        def resolve(path: tuple) -> object:
            try:
                return paths[path]
            except (KeyError, TypeError):
                # A matcher restored into another matcher's plan (another execution_path
                # or matchsql version than the one that wrote the snapshot) does not fit.
                raise SnapshotError(
                    f"the {saved} does not fit this plan of the query "
                    f"(it was written under another execution_path or "
                    f"matchsql version: the plan has no object at "
                    f"{path})"
                ) from None

        return state_format.loads(blob, resolve)


# -- one matcher's snapshot ----------------------------------------------------------
#
# A single matcher (a worker's partition, a Spark key) names its plan through the
# attributes every matcher of the query shares: ReferenceMatcher.query,
# CompiledMatcher.plan, the analysed spec and the settings.

_SHARED_ATTRIBUTES = ("query", "plan", "spec", "config")
_INDEXES: dict[tuple[int, ...], PlanIndex] = {}
_MAX_INDEXES = 16


def matcher_plan(matcher: object) -> dict[str, object]:
    """The plan objects ``matcher`` shares with every matcher of its query, by name."""
    found = {name: getattr(matcher, name, None) for name in _SHARED_ATTRIBUTES}
    return {name: obj for name, obj in found.items() if obj is not None}


def matcher_index(matcher: object) -> PlanIndex:
    """The :class:`PlanIndex` of ``matcher``'s plan, built once per plan.

    Walking a plan takes about a millisecond, and a worker moving a bucket
    snapshots hundreds of partitions of the same plan; the index keeps its roots
    alive, so the ids it is found by cannot be reused while it is kept."""
    roots = matcher_plan(matcher)
    key = tuple(id(obj) for obj in roots.values())
    index = _INDEXES.get(key)
    if index is None or list(index.roots) != list(roots):
        if len(_INDEXES) >= _MAX_INDEXES:
            _INDEXES.pop(next(iter(_INDEXES)))
        index = _INDEXES[key] = PlanIndex(roots, saved="matcher state")
    return index


def snapshot_matcher(matcher: object) -> bytes:
    """``matcher``'s state as snapshot bytes, its plan written as paths."""
    return matcher_index(matcher).dumps(matcher)


def restore_like(template: object, data: bytes) -> Any:
    """The matcher of :func:`snapshot_matcher` bytes, on ``template``'s plan (a fresh
    matcher of the same query in this process); None when the bytes hold another
    kind of matcher."""
    matcher = matcher_index(template).loads(data)
    return matcher if type(matcher) is type(template) else None
