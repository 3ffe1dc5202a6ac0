"""One direction between two processes: bytes through shared memory, notices through a pipe.

Payloads (Arrow IPC streams, matcher state snapshots) are copied into a byte
ring in a shared-memory segment (:class:`~matchsql.execution.workers.segments.Segment`); the
pipe carries only a small notice ``(kind, start, length, extra)`` per
payload, which also wakes the reader. Only the notice goes through the
kernel; the bulk data is one ``memcpy`` in and one out.

The ring is single-producer, single-consumer with monotonic byte counters
(position = counter % capacity); a payload starts again at the ring's start
as soon as the reader has released that much of it, so the pages in use stay
few and warm. The writer knows its own counter; the
reader publishes how far it has copied out (word 0 of the header) and how
many notices it has taken (word 1). The writer waits while the ring lacks
room or while :data:`MAX_NOTICES` notices are unread, so the pipe itself
never fills and a writer never blocks inside the kernel. A payload that
cannot fit the ring goes through a segment of its own, which the reader
unlinks once copied. A pool names its segments (``name``, ``prefix``: see
:mod:`.segments`), so that whatever a dead process left is found and removed.

The reader copies a payload out before releasing its bytes: matchers keep
references to the rows they buffer, so nothing may point into the ring.

Trust: nothing read from a segment is ever unpickled. A payload lies in shared
memory until its reader copies it out, so it is in a format whose loading
builds data and runs no code (:mod:`.wire`: JSON text, the snapshot format of
:mod:`matchsql.saved_state.state_format`, Arrow IPC); a reader refuses anything else,
pickles included, with an error. The pipe between the router and a worker it
spawned (inherited by the two processes only) carries multiprocessing's
pickles of the notices, and a notice holds only strings, integers and None,
the payload's kind, place and length and its ``extra`` (:func:`_plain_extra`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from matchsql.execution.workers import segments

if TYPE_CHECKING:
    from typing_extensions import TypeIs


@runtime_checkable
class Writable(Protocol):
    """A payload that writes itself into the ring (no copy of its own on the way)."""

    size: int

    def write_into(self, view: memoryview) -> None: ...


_HEADER = 64  # bytes: word 0 = bytes released by the reader, word 1 = notices taken
MAX_NOTICES = 256
#: Whether a payload goes back to the ring's start once the reader has released it
#: (see :meth:`RingWriter.send`); False only for the bench's "before".
EAGER_WRAP = True
_WAIT_S = 0.0002


class RingWriter:
    """The writing end: owns the segment (creates and unlinks it).

    ``name`` names the ring's segment and ``prefix`` starts the names of the
    oversized payloads' segments (None: a name, a prefix of its own).
    """

    def __init__(
        self, pipe: Connection, capacity: int, *, name: str | None = None, prefix: str | None = None
    ) -> None:
        self.pipe = pipe
        self.capacity = capacity
        self.prefix = prefix
        self.shm = segments.create(name or segments.new_name(prefix, "r"), _HEADER + capacity)
        self._words = np.ndarray(2, np.int64, self.shm.buf, 0)
        self._words[:] = 0
        self._written = 0
        self._sent = 0
        self._floor = 0  # every byte below this counter is released (or was skipped)

    @property
    def name(self) -> str:
        return self.shm.name

    def unread(self) -> int:
        """Notices sent that the reader has not taken yet (its queue length)."""
        return self._sent - int(self._words[1])

    def send(
        self,
        kind: str,
        payload: bytes | memoryview | Writable | None = None,
        extra: Any = None,
        idle: Callable[[], None] | None = None,
    ) -> None:
        """Copy ``payload`` into the ring (a :class:`Writable` writes itself there) and
        send its notice; ``idle`` runs while waiting."""
        extra = _plain_extra(extra)
        if payload is None:
            length = 0
        elif _writable(payload):
            length = payload.size
        else:
            payload = memoryview(payload).cast("B")  # bytes as bytes, whatever the exporter
            length = len(payload)
        if length > self.capacity // 2:
            assert payload is not None  # it has bytes
            seg = segments.create(segments.new_name(self.prefix, "b"), max(1, length))
            _put(seg.buf, 0, length, payload)
            name = seg.name
            seg.close()
            self._wait(lambda: self.unread() < MAX_NOTICES, idle)
            self._notice((kind, -1, length, extra, name))
            return
        start = self._written
        if length:
            pos = start % self.capacity
            lap = start - pos
            released = int(self._words[0])
            # Back to the ring's start where the payload does not fit its tail (payloads
            # are contiguous), and also where the reader has released the start already:
            # the bytes in use then stay in the first pages of the ring, mapped and in
            # cache, rather than going round all of it (a fresh page of shared memory
            # costs a fault and zeroing: 1M rows written into untouched pages took 19 ms,
            # into touched ones 4.5 ms).
            if pos and (
                pos + length > self.capacity
                or EAGER_WRAP
                and (released == start or released >= lap + length)
            ):
                if released == start:
                    self._floor = lap + self.capacity  # all released, the rest skipped
                start = lap + self.capacity
                pos = 0
            end = start + length
            self._wait(
                lambda: (
                    end - max(int(self._words[0]), self._floor) <= self.capacity
                    and self.unread() < MAX_NOTICES
                ),
                idle,
            )
            assert payload is not None  # it has bytes
            _put(self.shm.buf, _HEADER + pos, length, payload)
            self._written = end
        else:
            self._wait(lambda: self.unread() < MAX_NOTICES, idle)
        self._notice((kind, start, length, extra, None))

    def _notice(self, notice: tuple) -> None:
        self._sent += 1
        self.pipe.send(notice)

    @staticmethod
    def _wait(ready: Callable[[], bool], idle: Callable[[], None] | None) -> None:
        while not ready():
            if idle is not None:
                idle()
            time.sleep(_WAIT_S)

    def close(self) -> None:
        """Release and unlink the segment (the reader's mapping stays valid until it closes)."""
        self._words = None  # type: ignore[assignment]  # closed: no use after this
        try:
            self.shm.close()
        except BufferError:
            pass
        try:
            self.shm.unlink()
        except FileNotFoundError:
            pass


#: What a notice's ``extra`` may be made of (or a tuple of them).
_EXTRA = frozenset((str, int, bool, type(None)))


def _plain_extra(extra: Any, nested: bool = False) -> Any:
    """``extra`` as strings, integers and None (numpy's integers as Python's), or a
    tuple of them; anything else is refused: it belongs in the payload."""
    kind = type(extra)
    if kind in _EXTRA:
        return extra
    if isinstance(extra, np.integer):
        return int(extra)
    if kind is tuple and not nested:
        return tuple([_plain_extra(v, True) for v in extra])
    raise TypeError(f"a notice's extra holds a {kind.__name__}: it belongs in the payload")


def _writable(payload: object) -> TypeIs[Writable]:
    """``isinstance(payload, Writable)`` without the Protocol's check of every member
    (slow enough to show in the router's profile: it runs at every message)."""
    return hasattr(type(payload), "write_into")


def _put(buf: memoryview, start: int, length: int, payload: memoryview | Writable) -> None:
    view = buf[start : start + length]
    try:
        if _writable(payload):
            payload.write_into(view)
        else:
            view[:] = payload
    finally:
        view.release()


class RingReader:
    """The reading end: attaches to the writer's segment by name."""

    def __init__(self, pipe: Connection, name: str, capacity: int) -> None:
        self.pipe = pipe
        self.shm = segments.Segment(name)
        self.capacity = capacity
        self._words = np.ndarray(2, np.int64, self.shm.buf, 0)
        self._taken = 0

    def poll(self, timeout: float | None = 0.0) -> bool:
        return self.pipe.poll(timeout)

    def receive(self) -> tuple[str, bytes, Any]:
        """The next ``(kind, payload, extra)``; blocks until one comes (EOFError once the
        writer is gone)."""
        kind, start, length, extra, name = self.pipe.recv()
        if name is not None:
            seg = segments.Segment(name)
            try:
                payload = bytes(seg.buf[:length])
            finally:
                seg.close()
                seg.unlink()
        elif length:
            pos = start % self.capacity
            payload = bytes(self.shm.buf[_HEADER + pos : _HEADER + pos + length])
            self._words[0] = start + length
        else:
            payload = b""
        self._taken += 1
        self._words[1] = self._taken
        return kind, payload, extra

    def close(self, unlink: bool = False) -> None:
        """Detach; ``unlink`` also frees the segment (its writer died without doing so)."""
        self._words = None  # type: ignore[assignment]  # closed: no use after this
        try:
            self.shm.close()
        except BufferError:
            pass
        if unlink:
            try:
                self.shm.unlink()
            except FileNotFoundError:
                pass
