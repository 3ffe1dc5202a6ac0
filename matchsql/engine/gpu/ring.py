"""Ring columns on the device for a live stream's held rows.

A live partition on the GPU path keeps the rows an attempt (or a ``PREV``) can
still read on the device, column by column, in ring buffers: a batch's rows
are written after the last held row, wrapping to the buffer's front, and rows
no attempt reaches any more are dropped by moving the head; a full ring
doubles its capacity (the held rows are copied, in order, to the new buffer on
the device). On a CUDA device with CuPy a batch is staged in pinned host
memory and copied with an asynchronous copy on the ring's own CUDA stream,
so the copy overlaps the host's work on the batch (the measures, the SKIP
scan); reading the ring synchronises that stream. In numba's simulator numpy
stands in for the device and the copies are plain assignments.

Each batch is one launch over the ring (CDP's "delay until the terminator",
:mod:`matchsql.engine.gpu.gpu_live`): the kernels index rows contiguously, so where the
held rows wrap around the buffer's end, :meth:`DeviceRing.column` joins the two
pieces on the device (a device-to-device copy of the held rows, never a host
transfer); otherwise it is a view.

The ring keeps the columns the row-local DEFINE terms read (string columns as
codes of its code table, as :func:`~matchsql.engine.gpu.columns.device_columns`
encodes them) and the register columns of the in-thread
bytecode (float64 values and validity). It holds no module object, stream or
pinned buffer between calls, so a continuous query's checkpoint can store it (as host arrays).
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa

from matchsql.engine.compiled.compiled_matcher import register_columns
from matchsql.engine.gpu.columns import Columns, device_columns
from matchsql.engine.gpu.device import array_module
from matchsql.engine.gpu.gpu_plan import GpuPlan
from matchsql.engine.gpu.timing import H2D, timed
from matchsql.saved_state.state_format import state_class

FIRST_CAPACITY = 1024
_REG, _VALID = "\0register ", "\0valid "  # ring names of the register columns


@state_class
class DeviceRing:
    """One live partition's held rows on the device; see the module docstring."""

    def __init__(self, plan: GpuPlan, capacity: int | None = None) -> None:
        self.names = list(plan.columns)
        self.registers = list(plan.registers.columns)
        self.capacity = max(1, FIRST_CAPACITY if capacity is None else capacity)
        self.head = 0  # buffer slot of the first held row
        self.size = 0  # rows held
        self.codes: dict[str, int] = {}
        self.data: dict[str, Any] = {}  # ring name -> device buffer of ``capacity`` slots
        self.nulls: dict[str, Any] = {}  # ring name -> NULL mask buffer, once a NULL came
        self.wraps = 0  # times a write went past the buffer's end (for tests)
        self._staged: list = []  # pinned blocks of copies in flight (empty after a sync)

    def __getstate__(self) -> dict:
        """The held rows as host arrays: a snapshot stores data, not device buffers."""
        self._sync()
        state = dict(self.__dict__)
        for part in ("data", "nulls"):
            state[part] = {name: _host(buf) for name, buf in state[part].items()}
        return state

    def __setstate__(self, state: dict) -> None:
        xp = array_module()
        for part in ("data", "nulls"):
            state[part] = {
                name: buf if xp is np else xp.asarray(buf) for name, buf in state[part].items()
            }
        self.__dict__.update(state)

    # -- writing --------------------------------------------------------------------------

    def append(self, batch: pa.Table, plan: GpuPlan) -> None:
        """Write ``batch``'s rows after the held ones (asynchronously on a device);
        ``plan`` is the query's (the ring's columns are its)."""
        k = batch.num_rows
        if not k:
            return
        host = device_columns(np, batch, self.names, self.codes)
        if self.registers:
            columns = {name: batch.column(name).combine_chunks() for name in self.registers}
            values, valid = register_columns(plan, columns, k)
            for c, name in enumerate(self.registers):
                host[_REG + name] = (values[c], None)
                host[_VALID + name] = (valid[c], None)
        xp = array_module()
        if self.size + k > self.capacity:
            self._grow(xp, self.size + k)
        at = (self.head + self.size) % self.capacity
        with timed(H2D, sum(d.nbytes + (0 if n is None else n.nbytes) for d, n in host.values())):
            for name, (values, null) in host.items():
                buf = self.data.get(name)
                if buf is None:
                    buf = self.data[name] = xp.zeros(self.capacity, values.dtype)
                self._write(xp, buf, at, values)
                if null is not None and name not in self.nulls:
                    self.nulls[name] = xp.zeros(self.capacity, bool)
                if name in self.nulls:
                    self._write(
                        xp, self.nulls[name], at, np.zeros(k, bool) if null is None else null
                    )
        if at + k > self.capacity:
            self.wraps += 1
        self.size += k

    def drop(self, rows: int) -> None:
        """Forget the ``rows`` oldest held rows."""
        rows = min(rows, self.size)
        self.head = (self.head + rows) % self.capacity
        self.size -= rows

    def _write(self, xp: ModuleType, buf: Any, at: int, values: np.ndarray) -> None:
        first = min(len(values), self.capacity - at)
        self._staged.append(_copy(xp, buf[at : at + first], values[:first]))
        if first < len(values):
            self._staged.append(_copy(xp, buf[: len(values) - first], values[first:]))

    def _grow(self, xp: ModuleType, needed: int) -> None:
        capacity = self.capacity
        while capacity < needed:
            capacity *= 2
        self._sync()
        for table in (self.data, self.nulls):
            for name, buf in table.items():
                grown = xp.zeros(capacity, buf.dtype)
                grown[: self.size] = self._ordered(xp, buf)
                table[name] = grown
        self.capacity = capacity
        self.head = 0

    # -- reading --------------------------------------------------------------------------

    def column(self, name: str) -> Any:
        """Ring column ``name``'s held rows in order, on the device."""
        self._sync()
        return self._ordered(array_module(), self.data[name])

    def columns(self) -> Columns:
        """The DEFINE terms' columns of the held rows (:data:`~matchsql.engine.gpu.columns.
        Columns`), on the device."""
        out = Columns(self.codes)
        for name in self.names:
            null = self.nulls.get(name)
            out[name] = (
                self.column(name),
                None if null is None else self._ordered(array_module(), null),
            )
        return out

    def register_arrays(self) -> tuple[Any, Any]:
        """``(values, valid)`` of the register columns over the held rows, as
        :func:`~matchsql.engine.compiled.compiled_matcher.register_columns` lays them out."""
        xp = array_module()
        if not self.registers:
            return xp.zeros((1, 1), np.float64), xp.ones((1, 1), np.uint8)
        return (
            xp.stack([self.column(_REG + n) for n in self.registers]),
            xp.stack([self.column(_VALID + n) for n in self.registers]),
        )

    def _ordered(self, xp: ModuleType, buf: Any) -> Any:
        end = self.head + self.size
        if end <= self.capacity:
            return buf[self.head : end]
        return xp.concatenate([buf[self.head :], buf[: end - self.capacity]])

    def _sync(self) -> None:
        if self._staged and array_module() is not np:
            _stream().synchronize()
        self._staged = []


def _host(buf: Any) -> np.ndarray:
    """A device buffer's contents in host memory (CuPy's ``get``; numpy's as is)."""
    return buf.get() if hasattr(buf, "get") and not isinstance(buf, np.ndarray) else buf


def _copy(xp: ModuleType, dst: Any, src: np.ndarray) -> Any:
    """``dst[:] = src`` from the host: on a device through a pinned block, asynchronously
    on the ring's stream; returns the block, to be kept until the stream is synchronised."""
    if xp is np:
        dst[...] = src
        return None
    pinned = importlib.import_module("cupyx").empty_pinned(src.shape, src.dtype)
    pinned[...] = src
    dst.set(pinned, stream=_stream())
    return pinned


@cache
def _stream() -> Any:
    return importlib.import_module("cupy").cuda.Stream(non_blocking=True)
