"""What the pool's processes send through shared memory: bytes whose loading runs no code.

A message's payload lies in a shared-memory segment until its reader copies it
out; whatever could write there could hand the reader anything. So no payload
is ever a pickle: every one is JSON text (a list of entries: :func:`dumps`),
in the snapshot format of :mod:`matchsql.saved_state.state_format` (a JSON tree, raw
buffers, Arrow IPC) or an Arrow IPC stream (:mod:`.frames`), whose loading
builds data only. A reader refuses anything else with a :class:`MessageError`.

The query a worker runs (its :class:`~matchsql.plan.spec.MatchSpec`, its
:class:`~matchsql.config.Config`, and what its kind of query adds) is written
as the fields of a fixed set of the engine's dataclasses, members of its
enums, and sqlglot expression trees in sqlglot's own JSON form
(:mod:`sqlglot.serde`); reading looks every class name up in those fixed
tables (sqlglot's and matchsql's expression classes already loaded, never a
module named by the data) and builds the same objects again, through their
constructors. A plan the router derived from the spec (its memo) is no part of
the message: each worker plans the spec for itself, once per query it keeps
(:mod:`.process`).

Errors travel as the name of one of the user-facing error classes of
:mod:`matchsql.errors` (:data:`~matchsql.errors.WORKER_ERRORS`), their message
text and position; any other name reads as an :class:`~matchsql.errors.ExecutionError`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import struct
from enum import Enum
from typing import Any

import numpy as np
from sqlglot import exp

from matchsql.config import Config
from matchsql.engine.states import StateKind, StateSpec
from matchsql.errors import WORKER_ERRORS, Error, ExecutionError
from matchsql.execution.router.partitions import NAN
from matchsql.execution.router.presorted import OrderKey
from matchsql.execution.workers.scatter_plan import ScatterPlan
from matchsql.plan import pattern
from matchsql.plan.spec import MatchSpec, Measure, ResultMeasure, RowsPerMatch, SkipMode
from matchsql.saved_state import state_format
from matchsql.saved_state.state_format import SnapshotError, state_class


class MessageError(ExecutionError):
    """A message between the pool's processes that its reader will not load."""


def _named(classes: tuple[type, ...]) -> dict[str, type]:
    return {f"{cls.__module__}.{cls.__qualname__}": cls for cls in classes}


#: The dataclasses a query message may hold, built again through their constructors.
_DATA = _named(
    (
        MatchSpec,
        Measure,
        ResultMeasure,
        Config,
        ScatterPlan,
        OrderKey,
        StateSpec,
        pattern.Label,
        pattern.Empty,
        pattern.Anchor,
        pattern.Concatenation,
        pattern.Alternation,
        pattern.Permutation,
        pattern.Exclusion,
        pattern.Quantified,
    )
)
#: The enums whose members a query message may hold (by member name).
_ENUMS = _named((RowsPerMatch, SkipMode, pattern.AnchorKind, StateKind))


@state_class
class _Part:
    """A typed node of a query message: ``kind`` "data" (an allowed dataclass's init
    fields), "enum" (a member's name) or "expr" (a sqlglot tree in sqlglot's JSON form)."""

    def __init__(self, kind: str, name: str, value: Any) -> None:
        self.kind = kind
        self.name = name
        self.value = value


# -- plain data ---------------------------------------------------------------------------

#: Values JSON text gives back as they were (:func:`dumps`).
_SCALARS = frozenset((str, int, float, bool, type(None)))
#: The first byte of JSON text of a list, and of a table of entries (the snapshot
#: format starts with its magic, a pickle with 0x80 or an opcode: neither of these).
_LIST, _TABLE = ord("["), ord("E")
#: Columns of one Python type that travel as a raw buffer (numpy's dtype, its letter).
_ARRAYS = {int: ("<i8", "i"), bool: ("|b1", "b"), float: ("<f8", "f")}
_DTYPES = {letter: np.dtype(dtype) for dtype, letter in _ARRAYS.values()}
_LEN = struct.Struct("<Q")


def dumps(value: Any) -> bytes:
    """``value`` (numbers, strings, tuples, lists, dicts, numpy arrays, Arrow data, bytes)
    as message bytes.

    The commonest message, a list of entries (tuples of one shape: numbers, strings,
    keys), goes by its columns (:func:`_table`): its numbers as raw buffers, its
    other columns as JSON arrays, and ``zip`` puts the entries together again, so that
    reading it is C's work, not a walk of a tree in Python per entry (250 entries:
    1.5 times a pickle's time, where the snapshot format's tree took ten times). A
    list of scalars is JSON text; anything else is in the snapshot format."""
    if type(value) is list:
        kinds = set(map(type, value))
        if kinds <= _SCALARS:
            return json.dumps(value, separators=(",", ":"), check_circular=False).encode()
        if kinds == {tuple}:
            buffers: list[bytes] = []
            columns = _table(value, buffers)
            if columns is not None:
                head = json.dumps(
                    {"n": len(value), "c": columns}, separators=(",", ":"), check_circular=False
                ).encode()
                return b"".join((b"E", _LEN.pack(len(head)), head, *buffers))
    return state_format.dumps(value)


def _table(rows: list | tuple, buffers: list[bytes]) -> list | None:
    """The columns of ``rows`` (tuples of one length; None where they are not): per
    column ``{"r": dtype letter, "b": its buffer's number}`` (numbers of one type, the
    buffer added to ``buffers``), a JSON array of scalars, or ``{"t": columns}`` (a
    column of tuples)."""
    if len(set(map(len, rows))) != 1:
        return None
    columns: list[Any] = []
    for column in zip(*rows):
        kinds = set(map(type, column))
        array = _ARRAYS.get(next(iter(kinds))) if len(kinds) == 1 else None
        if array is not None:
            try:
                buffers.append(np.array(column, array[0]).tobytes())
                columns.append({"r": array[1], "b": len(buffers) - 1})
                continue
            except OverflowError:  # an integer beyond 64 bits: in JSON, below
                pass
        if kinds <= _SCALARS:
            columns.append(column)
            continue
        inner = _table(column, buffers) if kinds == {tuple} else None
        if inner is None:
            return None
        columns.append({"t": inner})
    return columns


def loads(payload: bytes | memoryview) -> Any:
    """The value :func:`dumps` wrote; :class:`MessageError` for anything else (a pickle
    among them: it is refused, never loaded)."""
    view = memoryview(payload)
    first = view[0] if len(view) else None
    if first == _LIST:
        found = _json(bytes(view))
        if type(found) is not list:
            raise MessageError("a worker process message is unreadable: JSON that is no list")
        return found
    if first == _TABLE:
        return _entries(view)
    try:
        return state_format.loads(view)
    except SnapshotError as exc:
        raise MessageError(f"a worker process message is unreadable: {exc.message}") from None


def _json(data: bytes) -> Any:
    try:
        return json.loads(data, parse_constant=_constant) if b"NaN" in data else json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise MessageError(
            f"a worker process message is unreadable: bad JSON ({type(exc).__name__})"
        ) from None


def _entries(view: memoryview) -> list[tuple]:
    """The entries of a table (see :func:`dumps`)."""
    size = _LEN.unpack_from(view, 1)[0] if len(view) >= 1 + _LEN.size else -1
    start = 1 + _LEN.size + size
    if size < 0 or start > len(view):
        raise MessageError("a worker process message is unreadable: a table of entries cut short")
    head = _json(bytes(view[1 + _LEN.size : start]))
    count = head.get("n") if type(head) is dict else None
    columns = head.get("c") if type(head) is dict else None
    if type(count) is not int or count < 0 or type(columns) is not list:
        raise MessageError("a worker process message is unreadable: a bad table of entries")
    buffers = _Buffers(view[start:], count)
    try:
        rows = _rows(columns, count, buffers)
    except RecursionError:
        raise MessageError(
            "a worker process message is unreadable: a table of entries nested too deeply"
        ) from None
    if buffers.at != len(buffers.data):
        raise MessageError("a worker process message is unreadable: bytes after a table of entries")
    return rows


class _Buffers:
    """The raw columns after a table's head, taken in order."""

    def __init__(self, data: memoryview, count: int) -> None:
        self.data = data
        self.count = count
        self.at = 0
        self.taken = 0

    def take(self, letter: Any, number: Any) -> list:
        dtype = _DTYPES.get(letter) if isinstance(letter, str) else None
        end = self.at + self.count * dtype.itemsize if dtype is not None else -1
        if number != self.taken or end < 0 or end > len(self.data):
            raise MessageError(
                "a worker process message is unreadable: a column of entries that is not in it"
            )
        values = np.frombuffer(self.data[self.at : end], dtype)
        self.at, self.taken = end, self.taken + 1
        if letter == "f" and np.isnan(values).any():
            return [NAN if v != v else v for v in values.tolist()]
        return values.tolist()


def _rows(columns: list, count: int, buffers: _Buffers) -> list[tuple]:
    """The ``count`` entries of :func:`_table`'s ``columns``."""
    if not columns:
        return [()] * count
    parts = []
    for column in columns:
        kind = type(column)
        if kind is list:
            values = column
        elif kind is dict and "r" in column:
            values = buffers.take(column["r"], column.get("b"))
        elif kind is dict and type(column.get("t")) is list:
            values = _rows(column["t"], count, buffers)
        else:
            raise MessageError(
                "a worker process message is unreadable: a column of entries that is not one"
            )
        if len(values) != count:
            raise MessageError(
                "a worker process message is unreadable: columns of entries of different lengths"
            )
        parts.append(values)
    return list(zip(*parts))


def _constant(name: str) -> float:
    """JSON's NaN as the one NaN of partition keys (see
    :func:`~matchsql.execution.router.partitions.partition_key`: every NaN of a partition's key is
    that object); its infinities as floats."""
    return NAN if name == "NaN" else float(name)


# -- queries ------------------------------------------------------------------------------


def query_bytes(*parts: Any) -> bytes:
    """A query's spec, settings and the rest its workers need, as message bytes (equal
    bytes for equal queries: a worker keeps what it built by them)."""
    try:
        return state_format.dumps(tuple(_lower(part) for part in parts))
    except SnapshotError as exc:
        raise ExecutionError(
            f"a query cannot be sent to the worker processes: {exc.message}"
        ) from None


def query_of(payload: bytes | memoryview) -> tuple:
    """The parts :func:`query_bytes` wrote, built again."""
    parts = loads(payload)
    if not isinstance(parts, tuple):
        raise MessageError("a worker process message is unreadable: a query that is not a tuple")
    try:
        return tuple(_raise(part) for part in parts)
    except MessageError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError) as exc:
        raise MessageError(
            f"a worker process message is unreadable: a query that does not "
            f"fit this matchsql ({type(exc).__name__}: {exc})"
        ) from None


def _lower(obj: Any) -> Any:
    kind = type(obj)
    if kind is tuple:
        return tuple(_lower(v) for v in obj)
    if kind is list:
        return [_lower(v) for v in obj]
    if kind is dict:
        return {_lower(k): _lower(v) for k, v in obj.items()}
    if isinstance(obj, exp.Expr):
        return _Part("expr", "", _tree(obj))
    if isinstance(obj, Enum):
        name = f"{kind.__module__}.{kind.__qualname__}"
        if _ENUMS.get(name) is kind:
            return _Part("enum", name, obj.name)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        name = f"{kind.__module__}.{kind.__qualname__}"
        if _DATA.get(name) is kind:
            return _Part(
                "data",
                name,
                {f.name: _lower(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init},
            )
    return obj  # anything else is the snapshot format's to write or refuse


def _tree(node: exp.Expr) -> list:
    from sqlglot.serde import dump

    return dump(node)


def _raise(obj: Any) -> Any:
    kind = type(obj)
    if kind is tuple:
        return tuple(_raise(v) for v in obj)
    if kind is list:
        return [_raise(v) for v in obj]
    if kind is dict:
        return {_raise(k): _raise(v) for k, v in obj.items()}
    if kind is not _Part:
        return obj
    if obj.kind == "data":
        cls = _known(_DATA, obj.name, "class")
        fields = obj.value
        if not isinstance(fields, dict) or not all(isinstance(k, str) for k in fields):
            raise MessageError(f"a worker process message holds a bad {obj.name}")
        return cls(**{k: _raise(v) for k, v in fields.items()})
    if obj.kind == "enum":
        return _known(_ENUMS, obj.name, "enum")[obj.value]
    if obj.kind == "expr":
        return _expression(obj.value)
    raise MessageError(f"a worker process message holds an unknown part {obj.kind!r}")


def _known(table: dict[str, Any], name: Any, what: str) -> Any:
    found = table.get(name) if isinstance(name, str) else None
    if found is None:
        raise MessageError(
            f"a worker process message holds a {what} {name!r}, which a query message may not hold"
        )
    return found


# -- sqlglot trees ------------------------------------------------------------------------

_DTYPE = "DataType.Type"  # sqlglot.serde's name of a data type's enum member
#: Leaf values of an expression tree (its identifiers' names, literals' text, flags).
_LEAVES = (str, int, float, bool, type(None))


@functools.cache
def _expression_classes() -> dict[str, type[exp.Expr]]:
    """sqlglot.serde's name of every expression class of sqlglot and matchsql already
    loaded (a subclass's module is imported with its base, never by a message)."""
    found: dict[str, type[exp.Expr]] = {}
    stack = [exp.Expr]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        module = cls.__module__
        if module.split(".")[0] not in ("sqlglot", "matchsql"):
            continue
        name = cls.__qualname__
        found[name if module == exp.__name__ else f"{module}.{name}"] = cls
    return found


def _expression(payloads: Any) -> exp.Expr:
    """The tree of :func:`sqlglot.serde.dump`'s list (what ``serde.load`` builds, with
    each class name looked up in :func:`_expression_classes`)."""
    if not isinstance(payloads, list) or not payloads:
        raise MessageError("a worker process message holds a bad expression")
    nodes: list[Any] = []
    for payload in payloads:
        if not isinstance(payload, dict):
            raise MessageError("a worker process message holds a bad expression node")
        node = _expression_node(payload) if "c" in payload else payload.get("v")
        if nodes:
            at, key = payload.get("i"), payload.get("k")
            if (
                type(at) is not int
                or not 0 <= at < len(nodes)
                or not isinstance(nodes[at], exp.Expr)
                or not isinstance(key, str)
            ):
                raise MessageError("a worker process message holds a bad expression node")
            if payload.get("a"):
                nodes[at].append(key, node)
            else:
                nodes[at].set(key, node)
        elif not isinstance(node, exp.Expr):
            raise MessageError("a worker process message holds a bad expression")
        nodes.append(node)
    return nodes[0]


def _expression_node(payload: dict) -> Any:
    name = payload["c"]
    if name == _DTYPE:
        return exp.DType(payload.get("v"))
    if name not in _expression_classes():
        _expression_classes.cache_clear()  # a class of a module loaded since, if any
    cls = _known(_expression_classes(), name, "expression class")
    node = cls()
    typed = payload.get("t")
    node._type = _expression(typed) if typed is not None else None
    comments = payload.get("o")
    if comments is not None and not (
        isinstance(comments, list) and all(isinstance(c, str) for c in comments)
    ):
        raise MessageError("a worker process message holds bad expression comments")
    node.comments = comments
    meta = payload.get("m")
    if meta is not None and not isinstance(meta, dict):
        raise MessageError("a worker process message holds bad expression metadata")
    node._meta = meta
    return node


# -- errors -------------------------------------------------------------------------------


def error_bytes(err: Error) -> bytes:
    """``err`` as its nearest class of :data:`~matchsql.errors.WORKER_ERRORS` (by name),
    its message and its position in the statement."""
    name = next(cls.__name__ for cls in type(err).__mro__ if WORKER_ERRORS.get(cls.__name__) is cls)
    return state_format.dumps(
        (name, str(err.message), _text(err.sql), _number(err.line), _number(err.column))
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: Any) -> int | None:
    return value if type(value) is int else None


def error_of(payload: bytes | memoryview) -> Error:
    """The error :func:`error_bytes` wrote (an :class:`ExecutionError` of a class name
    that is not on the list)."""
    found = loads(payload)
    if not (isinstance(found, tuple) and len(found) == 5 and isinstance(found[1], str)):
        raise MessageError("a worker process message is unreadable: an error that is not an error")
    name, message, sql, line, column = found
    cls = WORKER_ERRORS.get(name) if isinstance(name, str) else None
    return (cls or ExecutionError)(
        message, sql=_text(sql), line=_number(line), column=_number(column)
    )
