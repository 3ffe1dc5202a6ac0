"""Matcher state as bytes that loading cannot turn into a call: the snapshot format.

A checkpoint is read back from a database file, which anyone who can hand over
the file controls; so is a matcher's state handed between processes. Loading
must therefore build nothing but data. The format is a header (magic, format
version, lengths, a CRC-32) then a JSON tree and the raw buffers it refers to.
The tree holds numbers, strings, arrays (tuples) and tagged nodes for bytes,
lists, dicts, sets, deques, numpy arrays (fixed-size dtypes only), Arrow tables,
batches and schemas (Arrow IPC), references to the query's plan objects (their
path, resolved by the caller), shared references, and instances of the classes
that declare themselves matcher state with :func:`state_class`. The decoder
looks a class name up in that registry only - it imports nothing and calls no
name found in the data - and fills the instance's attributes without running
its constructor (a class's own ``__setstate__``, if it has one, binds again
what it left out). Anything else is an error that names what is wrong.
"""

from __future__ import annotations

import datetime
import inspect
import json
import struct
import types
import zlib
from collections import deque
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from matchsql.errors import ExecutionError
from matchsql.runtime.cancel import Cancellation

MAGIC = b"MSQLSNAP"
VERSION = 1
_HEAD = struct.Struct("<8sHIQI")  # magic, version, crc32 of what follows, tree bytes, buffers
_LEN = struct.Struct("<Q")
_PICKLE_PROTOCOL = 0x80

#: Types that JSON holds as they are.
_JSON = frozenset((str, int, float, bool, type(None)))
#: Python types of SQL values, written as a one-row Arrow column.
_VALUES = (Decimal, datetime.datetime, datetime.date, datetime.time, datetime.timedelta)
#: Class name -> class, for the classes whose instances a snapshot may hold.
_CLASSES: dict[str, type] = {}
#: Classes restored as a fresh instance (``cls()``): their state belongs to one process.
_FRESH: set[type] = set()
#: Types written as a plain value (``lower(obj)``) and read back as that value.
_LOWERED: dict[type, Callable[[Any], Any]] = {}


class SnapshotError(ExecutionError):
    """A snapshot that this version of matchsql cannot or will not load."""


def state_class(
    cls: type | None = None, *, fresh: bool = False, lower: Callable[[Any], Any] | None = None
):
    """Declare ``cls`` as part of a matcher's state, so that a snapshot may hold it.

    ``fresh``: a snapshot records only the class; loading makes ``cls()`` (a
    cancellation token belongs to one statement of one process). ``lower``: the
    instance is written as ``lower(obj)``, a plain value, and read back as it.
    """

    def register(klass: type) -> type:
        name = f"{klass.__module__}.{klass.__qualname__}"
        if _CLASSES.get(name, klass) is not klass:
            raise TypeError(f"two snapshot state classes named {name}")
        if lower is not None:
            _LOWERED[klass] = lower
            return klass
        _CLASSES[name] = klass
        if fresh:
            _FRESH.add(klass)
        return klass

    return register(cls) if cls is not None else register


# -- encoding -------------------------------------------------------------------------


class _Encoder:
    def __init__(self, plan_path: Callable[[Any], Any | None]) -> None:
        self.plan_path = plan_path
        self.buffers: list[memoryview] = []  # views, copied once into the snapshot
        self.memo: dict[int, int] = {}
        self.alive: list[Any] = []  # every memoised object, so that no id is reused meanwhile
        self.schemas: dict[pa.Schema, int] = {}

    def buffer(self, data: Any) -> int:
        self.buffers.append(memoryview(data).cast("B"))
        return len(self.buffers) - 1

    def encode(self, obj: Any) -> Any:
        kind = type(obj)
        if kind in _JSON:
            return obj
        path = self.plan_path(obj)
        if path is not None:
            return {"plan": self.encode(path)}
        lower = _LOWERED.get(kind)
        if lower is not None:
            obj = lower(obj)
            kind = type(obj)
        if kind is bytes:
            return {"bytes": self.buffer(obj)}
        if isinstance(obj, (np.generic, int, float, complex)) and not isinstance(obj, np.ndarray):
            return self._scalar(obj)
        if kind in _VALUES:  # SQL values in held rows and partial aggregates
            return {"value": self.buffer(_ipc(pa.table({"v": pa.array([obj])})))}
        if kind is tuple:  # a bare JSON array (the commonest node: keys, history entries);
            # immutable, so its identity does not matter and it is not memoised
            if all(type(v) in _JSON for v in obj):
                return list(obj)
            return [self.encode(v) for v in obj]
        seen = self.memo.get(id(obj))
        if seen is not None:
            return {"ref": seen}
        number = self.memo[id(obj)] = len(self.memo)
        self.alive.append(obj)
        node = self._container(obj, kind)
        node["id"] = number
        return node

    def _scalar(self, obj: Any) -> dict[str, Any] | bool | int | float:
        if isinstance(obj, np.generic):
            value = np.asarray(obj)
            self._check_dtype(value.dtype)
            return {"scalar": value.dtype.str, "data": self.buffer(value.tobytes())}
        if isinstance(obj, complex):
            return {"complex": [obj.real, obj.imag]}
        if isinstance(obj, bool):
            return bool(obj)
        return int(obj) if isinstance(obj, int) else float(obj)

    @staticmethod
    def _check_dtype(dtype: np.dtype) -> None:
        if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
            raise SnapshotError(
                f"a matcher state holds an array of dtype {dtype}, which a snapshot does not store"
            )

    def _container(self, obj: Any, kind: type) -> dict:
        encode = self.encode
        if kind is list:
            return {"list": [encode(v) for v in obj]}
        if kind is dict:
            return {"dict": [[encode(k), encode(v)] for k, v in obj.items()]}
        if kind is set or kind is frozenset:
            return {kind.__name__: [encode(v) for v in obj]}
        if kind is deque:
            return {"deque": [encode(v) for v in obj], "maxlen": obj.maxlen}
        if kind is bytearray:
            return {"bytearray": self.buffer(obj)}
        if kind is np.ndarray:
            self._check_dtype(obj.dtype)
            return {
                "ndarray": obj.dtype.str,
                "shape": list(obj.shape),
                "data": self.buffer(np.ascontiguousarray(obj).reshape(-1).view(np.uint8)),
            }
        if isinstance(obj, (pa.Table, pa.RecordBatch)):
            return {
                "arrow": "table" if isinstance(obj, pa.Table) else "batch",
                "data": self.buffer(_ipc(obj)),
            }
        if isinstance(obj, pa.Schema):
            return {"schema": self._schema(obj)}
        if isinstance(obj, pa.Field):
            return {"field": self._schema(pa.schema([obj]))}
        if isinstance(obj, pa.DataType):
            return {"type": self._schema(pa.schema([("t", obj)]))}
        if isinstance(obj, (pa.Array, pa.ChunkedArray)):
            table = pa.table({"a": obj})
            return {
                "arrow": "array" if isinstance(obj, pa.Array) else "chunked",
                "data": self.buffer(_ipc(table)),
            }
        if isinstance(obj, types.MethodType):
            return {
                "method": _method_name(type(obj.__self__), obj.__func__.__name__),
                "self": self.encode(obj.__self__),
            }
        return self._instance(obj, kind)

    def _schema(self, schema: pa.Schema) -> int:
        """The buffer of ``schema``: every partition's matcher has an equal one, written once."""
        found = self.schemas.get(schema)
        if found is None:
            found = self.schemas[schema] = self.buffer(schema.serialize())
        return found

    def _instance(self, obj: Any, kind: type) -> dict:
        name = f"{kind.__module__}.{kind.__qualname__}"
        if _CLASSES.get(name) is not kind:
            raise SnapshotError(
                f"a matcher state holds a {name}, which is not declared as snapshot state"
            )
        if kind in _FRESH:
            return {"fresh": name}
        return {"object": name, "state": self.encode(obj.__getstate__())}


def _ipc(data: pa.Table | pa.RecordBatch) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as writer:
        writer.write(data)
    return sink.getvalue()


def dumps(state: Any, plan_path: Callable[[Any], Any | None] = lambda obj: None) -> bytes:
    """``state`` as snapshot bytes; ``plan_path(obj)`` gives the path (a tuple of strings
    and integers) of an object of the query's plan, written instead of the object."""
    encoder = _Encoder(plan_path)
    tree = json.dumps(encoder.encode(state), separators=(",", ":")).encode()
    parts: list[Any] = [b"", tree]
    crc = zlib.crc32(tree)
    for data in encoder.buffers:
        size = _LEN.pack(data.nbytes)
        crc = zlib.crc32(data, zlib.crc32(size, crc))
        parts += [size, data]
    parts[0] = _HEAD.pack(MAGIC, VERSION, crc, len(tree), len(encoder.buffers))
    return b"".join(parts)


# -- decoding -------------------------------------------------------------------------


def _split(blob: bytes | memoryview) -> tuple[Any, list[memoryview]]:
    """The JSON tree and the buffers of a snapshot, after checking its header."""
    view = memoryview(blob).cast("B")
    if len(view) and view[0] == _PICKLE_PROTOCOL:
        raise SnapshotError(
            "the snapshot is a Python pickle, which matchsql never loads "
            "(written by an older matchsql, or tampered with)"
        )
    if len(view) < _HEAD.size or bytes(view[: len(MAGIC)]) != MAGIC:
        raise SnapshotError(
            f"the snapshot is not a matchsql snapshot ({len(view)} bytes "
            "without the snapshot header)"
        )
    magic, version, crc, tree_size, count = _HEAD.unpack_from(view)
    if version != VERSION:
        raise SnapshotError(
            f"the snapshot has format version {version}; this matchsql reads "
            f"version {VERSION} only (drop and create the continuous query "
            "again)"
        )
    body = view[_HEAD.size :]
    if zlib.crc32(body) != crc:
        raise SnapshotError(
            f"the snapshot is truncated or damaged ({len(view)} bytes, its checksum does not match)"
        )
    at = tree_size
    if at > len(body):
        raise SnapshotError("the snapshot is truncated (its tree runs past the end)")
    buffers = []
    for _ in range(count):
        if at + _LEN.size > len(body):
            raise SnapshotError("the snapshot is truncated (a buffer runs past the end)")
        (size,) = _LEN.unpack_from(body, at)
        at += _LEN.size
        if at + size > len(body):
            raise SnapshotError("the snapshot is truncated (a buffer runs past the end)")
        buffers.append(body[at : at + size])
        at += size
    if at != len(body):
        raise SnapshotError(f"the snapshot has {len(body) - at} bytes after its last buffer")
    try:
        tree = json.loads(bytes(body[:tree_size]))
    except (ValueError, RecursionError) as exc:
        raise SnapshotError(f"the snapshot's tree is not valid JSON ({exc})") from None
    return tree, buffers


class _Decoder:
    def __init__(self, buffers: list[memoryview], resolve: Callable[[Any], Any]) -> None:
        self.buffers = buffers
        self.resolve = resolve
        self.memo: dict[int, Any] = {}
        self.schemas: dict[int, pa.Schema] = {}

    def buffer(self, index: Any) -> memoryview:
        if type(index) is not int or not 0 <= index < len(self.buffers):
            raise SnapshotError(f"the snapshot refers to a buffer {index!r} it does not hold")
        return self.buffers[index]

    def decode(self, node: Any) -> Any:
        kind = type(node)
        if kind in _JSON:
            return node
        if kind is list:  # a tuple
            if all(type(v) in _JSON for v in node):
                return tuple(node)
            return tuple([self.decode(v) for v in node])
        if kind is not dict:
            raise SnapshotError(f"the snapshot holds an unknown node {type(node).__name__}")
        if "ref" in node:
            try:
                return self.memo[node["ref"]]
            except (KeyError, TypeError):
                raise SnapshotError(
                    f"the snapshot refers to object {node['ref']!r} before it is defined"
                ) from None
        if "plan" in node:
            return self.resolve(self._path(self.decode(node["plan"])))
        if "bytes" in node:
            return bytes(self.buffer(node["bytes"]))
        if "scalar" in node:
            dtype = _dtype(node["scalar"])
            return np.frombuffer(self.buffer(node["data"]), dtype, count=1)[0]
        if "value" in node:
            values = self._arrow("table", self.buffer(node["value"]))
            if values.num_rows != 1 or values.num_columns != 1:
                raise SnapshotError("the snapshot holds a bad SQL value")
            return values.column(0)[0].as_py()
        if "complex" in node:
            real, imag = node["complex"]
            return complex(float(real), float(imag))
        return self._container(node)

    @staticmethod
    def _path(path: Any) -> tuple:
        if not isinstance(path, tuple):
            raise SnapshotError("the snapshot holds a plan path that is not a tuple")
        return path

    def _keep(self, node: dict, obj: Any) -> Any:
        number = node.get("id")
        if type(number) is not int or number in self.memo:
            raise SnapshotError(f"the snapshot holds a node with a bad id {number!r}")
        self.memo[number] = obj
        return obj

    def _items(self, node: dict, key: str) -> list:
        items = node[key]
        if not isinstance(items, list):
            raise SnapshotError(f"the snapshot holds a {key} that is not a list")
        return items

    def _container(self, node: dict) -> Any:
        decode = self.decode
        if "list" in node:
            out: list = self._keep(node, [])
            out.extend(decode(v) for v in self._items(node, "list"))
            return out
        if "dict" in node:
            mapping: dict = self._keep(node, {})
            for pair in self._items(node, "dict"):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise SnapshotError("the snapshot holds a dict item that is not a pair")
                key = decode(pair[0])  # before the value: the order they were written in
                mapping[key] = decode(pair[1])
            return mapping
        if "set" in node:
            found: set = self._keep(node, set())
            found.update(decode(v) for v in self._items(node, "set"))
            return found
        if "frozenset" in node:
            return self._keep(node, frozenset(decode(v) for v in self._items(node, "frozenset")))
        if "deque" in node:
            maxlen = node.get("maxlen")
            if maxlen is not None and type(maxlen) is not int:
                raise SnapshotError("the snapshot holds a deque with a bad maxlen")
            queue: deque = self._keep(node, deque(maxlen=maxlen))
            queue.extend(decode(v) for v in self._items(node, "deque"))
            return queue
        if "bytearray" in node:
            return self._keep(node, bytearray(self.buffer(node["bytearray"])))
        if "ndarray" in node:
            return self._keep(node, self._array(node))
        if "arrow" in node:
            return self._keep(node, self._arrow(node["arrow"], self.buffer(node["data"])))
        if "schema" in node or "field" in node or "type" in node:
            kind = "schema" if "schema" in node else "field" if "field" in node else "type"
            schema = self._schema(node[kind])
            if kind != "schema" and len(schema) != 1:
                raise SnapshotError(f"the snapshot holds a bad Arrow {kind}")
            value = (
                schema
                if kind == "schema"
                else schema.field(0)
                if kind == "field"
                else schema.field(0).type
            )
            return self._keep(node, value)
        if "fresh" in node:
            return self._keep(node, _class(node["fresh"])())
        if "object" in node:
            return self._instance(node)
        if "method" in node:
            owner = self.decode(node["self"])
            name = _method_name(type(owner), node["method"])
            return self._keep(node, getattr(owner, name))
        raise SnapshotError(f"the snapshot holds an unknown node with keys {sorted(node)}")

    def _schema(self, index: Any) -> pa.Schema:
        """The schema in buffer ``index``, read once (a schema is immutable: shared)."""
        found = self.schemas.get(index) if type(index) is int else None
        if found is None:
            found = self.schemas[index] = _read_schema(self.buffer(index))
        return found

    def _array(self, node: dict) -> np.ndarray:
        dtype = _dtype(node["ndarray"])
        shape = node.get("shape")
        if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
            raise SnapshotError("the snapshot holds an array with a bad shape")
        data = self.buffer(node["data"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if count * dtype.itemsize != len(data):
            raise SnapshotError(
                f"the snapshot holds an array whose shape {shape} does not "
                f"fit its {len(data)} bytes"
            )
        return np.frombuffer(data, dtype, count=count).reshape(shape).copy()

    @staticmethod
    def _arrow(kind: Any, data: memoryview) -> Any:
        try:
            table = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
        except (pa.ArrowException, ValueError) as exc:
            raise SnapshotError(f"the snapshot holds damaged Arrow data ({exc})") from None
        if kind == "table":
            return table
        if kind == "batch":
            return (
                table.combine_chunks().to_batches()[0]
                if table.num_rows
                else pa.RecordBatch.from_pylist([], schema=table.schema)
            )
        if kind in ("array", "chunked") and table.num_columns == 1:
            column = table.column(0)
            return column if kind == "chunked" else column.combine_chunks()
        raise SnapshotError(f"the snapshot holds an unknown Arrow kind {kind!r}")

    def _instance(self, node: dict) -> Any:
        cls: Any = _class(node["object"])  # its own __new__, if it has one
        obj = self._keep(node, cls.__new__(cls))
        state = self.decode(node.get("state"))
        if hasattr(cls, "__setstate__"):
            obj.__setstate__(state)
            return obj
        attributes, slots = state if isinstance(state, tuple) and len(state) == 2 else (state, None)
        for part in (attributes, slots):
            if part is None:
                continue
            if not isinstance(part, dict) or not all(isinstance(k, str) for k in part):
                raise SnapshotError(f"the snapshot holds a {node['object']} with a bad state")
            for key, value in part.items():
                object.__setattr__(obj, key, value)
        return obj


def _method_name(cls: type, name: Any) -> str:
    """``name`` when it is a plain method of a snapshot state class (a bound method in
    a matcher's state: the owner's cancellation check, say)."""
    if (
        _CLASSES.get(f"{cls.__module__}.{cls.__qualname__}") is not cls
        or not isinstance(name, str)
        or name.startswith("__")
        or not isinstance(inspect.getattr_static(cls, name, None), types.FunctionType)
    ):
        raise SnapshotError(
            f"a snapshot holds a method {name!r} of {cls.__qualname__}, "
            "which is not a method of a matcher state class"
        )
    return name


def _class(name: Any) -> type[Any]:
    cls = _CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise SnapshotError(
            f"the snapshot holds a {name!r}, which is not a matcher state class of this matchsql"
        )
    return cls


def _dtype(text: Any) -> np.dtype:
    if not isinstance(text, str) or len(text) > 16:
        raise SnapshotError(f"the snapshot holds a bad array dtype {text!r}")
    try:
        dtype = np.dtype(text)
    except TypeError:
        raise SnapshotError(f"the snapshot holds a bad array dtype {text!r}") from None
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise SnapshotError(f"the snapshot holds an array of dtype {text!r}")
    return dtype


def _read_schema(data: memoryview) -> pa.Schema:
    try:
        return pa.ipc.read_schema(pa.py_buffer(data))
    except (pa.ArrowException, ValueError) as exc:
        raise SnapshotError(f"the snapshot holds a damaged Arrow schema ({exc})") from None


def loads(blob: bytes | memoryview, resolve: Callable[[tuple], Any] | None = None) -> Any:
    """The state :func:`dumps` wrote; ``resolve(path)`` gives the plan object at a path
    (raising :class:`SnapshotError` when there is none)."""
    tree, buffers = _split(blob)

    def no_plan(path: tuple) -> Any:
        raise SnapshotError(f"the snapshot refers to a plan object at {path}, and none was given")

    try:
        return _Decoder(buffers, resolve or no_plan).decode(tree)
    except RecursionError:
        raise SnapshotError("the snapshot is nested too deeply") from None
    except SnapshotError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        raise SnapshotError(
            f"the snapshot does not fit this matchsql's matcher state ({type(exc).__name__}: {exc})"
        ) from None


# A statement's cancellation token belongs to one process (its own ``__reduce__`` says
# so for pickling): a snapshot restores a fresh one. Declared here, as cancel.py is
# loaded at start-up, before numpy and pyarrow are needed.
state_class(Cancellation, fresh=True)
