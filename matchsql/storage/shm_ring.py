"""The live store's shared-memory segment: a header and a byte ring of Arrow IPC frames.

Layout of the segment (all integers little-endian int64, 8-byte aligned, so a
field is read and written with one machine load/store through a numpy view)::

    0      header words (see the W_* indexes): magic, data size, capacity in
           rows, head/tail byte positions, head/tail sequence numbers, rows in
           and out of the ring, end-of-stream flag and sequence number,
           on_full mode, writer-lock holder, the archive's cursor and lease, ...
    512    32 producer slots of 16 words: in use, closed, pid, start time,
           heartbeat, last batch id, rows written, name (64 bytes)
    5120   16 reader slots of 16 words: in use, pid, start time, heartbeat,
           released seq/byte position, read position, name (64 bytes)
    8192   the stream's Arrow schema, IPC-serialised (SCHEMA_LEN bytes)
    65536  the ring: frames ``[kind<<32|length, first_seq, rows, enqueue_ns]``
           followed by an Arrow IPC record-batch message padded to 8 bytes; a
           WRAP frame (or fewer than 32 bytes left) sends the reader back to 0

Head and tail are monotonic byte counters (position = counter % size), so
full and empty are never ambiguous. Every tuple has a sequence number: a
frame carries its first one. Tuples that a spilling producer could not fit
went to Parquet spill files instead (see :mod:`matchsql.storage.spill`); the
reader merges ring and spill by sequence number, which keeps the order exact.

Concurrency: producers serialise on a named semaphore used as a lock (whose
holder pid is recorded, so a producer that dies holding it is detected and
the lock taken over). A writer copies the frame, then publishes HEAD_BYTES
and then HEAD_SEQ; a reader loads HEAD_SEQ before HEAD_BYTES, so a sequence
number it sees is either in a published frame or in a spill file already
renamed into place. A counting semaphore per reader slot wakes that reader
when data arrives, and one wakes a blocked writer when space frees; waits use
a timeout (~200 ms) so liveness checks run even when nobody posts.

Many readers: every reader (any thread of any process) holds a reader slot
with its own cursor. Reading and freeing are two steps: a reader reads ahead
with its cursor and then *releases* what it consumed into its slot; the
ring's TAIL is the minimum over the live readers' released positions and,
for a stream with an archive, the archive's cursor (tuples go only once they
are durable in the stream's log). So the slowest reader holds the ring (a
``spill`` stream spills meanwhile), and the ring with the spill files holds
every tuple not yet in the log. A reader whose process died is reaped (its
slot freed) by the next reader or blocked writer that looks: a killed reader
holds the others up for at most a liveness check. The archive's cursor is
advanced by one reader at a time, the holder of the archive *lease* (a reader
slot index); when its holder dies another reader takes the lease over.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import time
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import posix_ipc
import pyarrow as pa

from matchsql.errors import StreamError
from matchsql.storage import liveness

MAGIC = int.from_bytes(b"MSQLRNG1", "little")
VERSION = 2
HEADER_BYTES = 65536
SLOT_BASE = 64  # word index of the first producer slot
SLOT_WORDS = 16
MAX_SLOTS = 32
SCHEMA_OFFSET = 8192
FRAME_HEADER = 32
KIND_BATCH = 1
KIND_WRAP = 2
WAIT_S = 0.2  # longest blocking wait between liveness checks

(
    W_MAGIC,
    W_VERSION,
    W_DATA_BYTES,
    W_CAPACITY,
    W_HEAD_BYTES,
    W_TAIL_BYTES,
    W_HEAD_SEQ,
    W_TAIL_SEQ,
    W_RING_IN,
    W_RING_OUT,
    W_EOS,
    W_EOS_SEQ,
    W_ON_FULL,
    W_HAS_ARCHIVE,
    W_ARCH_SEQ,
    W_ARCH_BYTES,
    W_WLOCK_PID,
    W_DROPPED,
    W_SCHEMA_LEN,
    W_SPILLED,
    W_MAX_QUEUE,
    W_OWNER_PID,
    W_OWNER_STARTED,
    W_WRITER_BLOCKED,
    W_ARCH_LEASE,
) = range(25)

(S_IN_USE, S_CLOSED, S_PID, S_STARTED, S_BEAT, S_LAST_BATCH, S_ROWS) = range(7)
S_NAME = 8  # 8 words = 64 bytes of UTF-8 name
NAME_BYTES = 64
READER_BASE = 640  # word index of the first reader slot
READER_WORDS = 16
MAX_READERS = 16
(R_IN_USE, R_PID, R_STARTED, R_BEAT, R_SEQ, R_BYTES, R_READ) = range(7)
R_NAME = 8

ON_FULL_CODES = {"block": 0, "spill": 1}
_FRAME = struct.Struct("<qqqq")


class Frame(NamedTuple):
    """One frame as read: its tuples' sequence numbers, IPC bytes and where it ends."""

    first: int
    rows: int
    enqueue_ns: int
    ipc: bytes
    end: int  # the ring's byte counter just after this frame


#: Where POSIX shared memory lives on Linux.
SHM_DIR = "/dev/shm"


def _align8(n: int) -> int:
    return (n + 7) & ~7


def ring_bytes(schema: pa.Schema, capacity: int) -> int:
    """Ring size for ``capacity`` rows of ``schema`` (variable-width values guessed at 24 B)."""
    width = 0
    for field in schema:
        try:
            width += max(1, field.type.bit_width // 8)
        except ValueError:  # variable width: offsets plus a guess at the data
            width += 28
    want = capacity * (width + 1) * 5 // 4 + (1 << 20)
    return _align8(min(max(want, 4 << 20), 8 << 30))


def _mib(size: int) -> str:
    return f"{size / (1 << 20):,.0f} MiB"


def _check_room(size: int, capacity: int, columns: int) -> None:
    """Refuse a ring the shared-memory file system cannot hold: its pages are taken as
    tuples arrive, and a write into a page there is no room for kills the writer (SIGBUS)."""
    try:
        stats = os.statvfs(SHM_DIR)
    except OSError:  # no /dev/shm to ask: the segment's creation says what is wrong
        return
    free = stats.f_bavail * stats.f_frsize
    if size > free:
        raise StreamError(
            f"a ring of {capacity:,} tuples of {columns} columns needs "
            f"{_mib(size)} of shared memory and {SHM_DIR} has {_mib(free)} "
            "free; give the stream a smaller capacity"
        )


def unlink_segment(segment: str) -> None:
    """Remove a segment and its semaphores; missing ones are fine."""
    if not segment:
        return
    with contextlib.suppress(posix_ipc.ExistentialError):
        posix_ipc.unlink_shared_memory(segment)
    for suffix in ("-d", "-s", "-w", *_reader_suffixes()):
        with contextlib.suppress(posix_ipc.ExistentialError):
            posix_ipc.unlink_semaphore(segment + suffix)


def sweep_orphans(prefix: str = f"msql-{os.getuid()}-", shm_dir: str = "/dev/shm") -> list[str]:
    """Remove this user's segments whose creating process is gone.

    A stream lives as long as the process that created it; a crash leaves
    its segment behind, and when the registry entry that would lead to it is
    gone too (a deleted runtime directory), only the owner recorded in the
    segment's header can tell that it is stale.
    """
    removed: list[str] = []
    try:
        names = sorted(os.listdir(shm_dir))
    except OSError:
        return removed
    for name in names:
        if not name.startswith(prefix):
            continue
        segment = "/" + name
        try:
            shm = posix_ipc.SharedMemory(segment)
        except (posix_ipc.ExistentialError, posix_ipc.PermissionsError):
            continue
        try:
            if shm.size < HEADER_BYTES:
                continue
            with mmap.mmap(shm.fd, HEADER_BYTES, prot=mmap.PROT_READ) as mm:
                words = np.frombuffer(mm, dtype=np.int64, count=W_OWNER_STARTED + 1).copy()
        finally:
            shm.close_fd()
        owner = int(words[W_OWNER_PID])
        if (
            words[W_MAGIC] == MAGIC
            and owner
            and not liveness.alive(owner, int(words[W_OWNER_STARTED]))
        ):
            unlink_segment(segment)
            removed.append(segment)
    return removed


def _reader_suffixes() -> list[str]:
    return [f"-r{i}" for i in range(MAX_READERS)]


class Ring:
    """One process's mapping of a stream segment (writer and reader operations)."""

    def __init__(
        self, segment: str, shm: posix_ipc.SharedMemory, sems: tuple[posix_ipc.Semaphore, ...]
    ) -> None:
        self.segment = segment
        self.mm = mmap.mmap(shm.fd, shm.size)
        shm.close_fd()
        self.data_sem, self.space_sem, self.wlock = sems
        self.h = np.ndarray((HEADER_BYTES // 8,), dtype=np.int64, buffer=self.mm)
        self.size = 0  # ring bytes, set once the header is valid
        self.pid = os.getpid()
        self._reader_sems: dict[int, posix_ipc.Semaphore] = {}

    # -- life cycle ----------------------------------------------------------------

    @classmethod
    def create(
        cls,
        segment: str,
        schema: pa.Schema,
        capacity: int,
        on_full: str,
        first_seq: int = 0,
        archived: bool = False,
    ) -> Ring:
        """Create an owner-only segment (a leftover of the same name is removed first).

        ``first_seq`` is the first tuple's sequence number: an archive that
        already holds tuples 0..k makes a re-created stream continue at k+1.
        """
        data = ring_bytes(schema, capacity)
        _check_room(HEADER_BYTES + data, capacity, len(schema))
        for attempt in (0, 1):
            try:
                shm = posix_ipc.SharedMemory(
                    segment, posix_ipc.O_CREX, mode=0o600, size=HEADER_BYTES + data
                )
                sems = tuple(
                    posix_ipc.Semaphore(segment + s, posix_ipc.O_CREX, mode=0o600, initial_value=v)
                    for s, v in (("-d", 0), ("-s", 0), ("-w", 1))
                )
                for suffix in _reader_suffixes():
                    posix_ipc.Semaphore(
                        segment + suffix, posix_ipc.O_CREX, mode=0o600, initial_value=0
                    ).close()
                break
            except posix_ipc.PermissionsError:
                raise StreamError(
                    f"cannot create the shared-memory segment {segment}: "
                    "another user holds its name"
                ) from None
            except posix_ipc.ExistentialError:
                if attempt:
                    raise StreamError(
                        f"cannot create the shared-memory segment {segment}"
                    ) from None
                unlink_segment(segment)  # a crashed owner's leftovers
            except OSError as error:  # no memory to map it, a limit on segments
                unlink_segment(segment)
                raise StreamError(
                    f"cannot create the stream's shared-memory segment of "
                    f"{_mib(HEADER_BYTES + data)}: {error.strerror or error}; "
                    "a smaller capacity needs less"
                ) from None
        ring = cls(segment, shm, sems)
        blob = schema.serialize()
        if SCHEMA_OFFSET + blob.size > HEADER_BYTES:
            ring.close()
            unlink_segment(segment)
            raise StreamError("the stream's schema is too large")
        ring.mm[SCHEMA_OFFSET : SCHEMA_OFFSET + blob.size] = memoryview(blob)
        h = ring.h
        h[W_VERSION] = VERSION
        h[W_DATA_BYTES] = data
        h[W_CAPACITY] = capacity
        h[W_ON_FULL] = ON_FULL_CODES[on_full]
        h[W_SCHEMA_LEN] = blob.size
        h[W_HEAD_SEQ] = h[W_TAIL_SEQ] = h[W_ARCH_SEQ] = first_seq
        h[W_HAS_ARCHIVE] = int(archived)
        h[W_OWNER_PID] = os.getpid()
        h[W_OWNER_STARTED] = liveness.start_time(os.getpid())
        h[W_MAGIC] = MAGIC
        ring.size = data
        return ring

    @classmethod
    def attach(cls, segment: str) -> Ring:
        try:
            shm = posix_ipc.SharedMemory(segment)
            sems = tuple(posix_ipc.Semaphore(segment + s) for s in ("-d", "-s", "-w"))
        except posix_ipc.ExistentialError:
            raise StreamError(
                "the stream's shared-memory segment is gone "
                "(the stream was dropped or its owner exited)"
            ) from None
        except posix_ipc.PermissionsError:
            raise StreamError(
                f"the stream's shared-memory segment {segment} belongs to another user"
            ) from None
        ring = cls(segment, shm, sems)
        if int(ring.h[W_MAGIC]) != MAGIC or int(ring.h[W_VERSION]) != VERSION:
            ring.close()
            raise StreamError(f"{segment} is not a matchsql stream segment of this version")
        ring.size = int(ring.h[W_DATA_BYTES])
        return ring

    def close(self) -> None:
        if self.mm.closed:
            return
        del self.h
        for sem in (self.data_sem, self.space_sem, self.wlock, *self._reader_sems.values()):
            with contextlib.suppress(posix_ipc.ExistentialError):
                sem.close()
        self.mm.close()

    @property
    def schema(self) -> pa.Schema:
        length = int(self.h[W_SCHEMA_LEN])
        return pa.ipc.read_schema(pa.py_buffer(self.mm[SCHEMA_OFFSET : SCHEMA_OFFSET + length]))

    @property
    def dropped(self) -> bool:
        return bool(self.h[W_DROPPED])

    def check_dropped(self) -> None:
        if self.h[W_DROPPED]:
            raise StreamError("the stream was dropped")

    # -- counters --------------------------------------------------------------------

    def word(self, index: int) -> int:
        return int(self.h[index])

    def set_word(self, index: int, value: int) -> None:
        self.h[index] = value

    @property
    def queued(self) -> int:
        """Tuples written and not yet read (ring and spill)."""
        return int(self.h[W_HEAD_SEQ]) - int(self.h[W_TAIL_SEQ])

    # -- the writer lock ------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the producers' lock; a lock held by a dead process is taken over."""
        while True:
            try:
                self.wlock.acquire(WAIT_S)
                break
            except posix_ipc.BusyError:
                self.check_dropped()
                holder = int(self.h[W_WLOCK_PID])
                if holder and holder != self.pid and not liveness.alive(holder):
                    break  # its holder died inside; the semaphore stays at 0 and is ours
        self.h[W_WLOCK_PID] = self.pid
        try:
            yield
        finally:
            self.h[W_WLOCK_PID] = 0
            self.wlock.release()

    # -- writing (hold the lock) ----------------------------------------------------------

    def try_write(self, payload: pa.Buffer, rows: int, enqueue_ns: int) -> int | None:
        """Append one frame; its first sequence number, or None when the ring is full."""
        h, size = self.h, self.size
        need = FRAME_HEADER + _align8(payload.size)
        if need > size:
            raise StreamError("a frame is larger than the stream's ring")
        head, tail = int(h[W_HEAD_BYTES]), int(h[W_TAIL_BYTES])
        pos = head % size
        to_end = size - pos
        skip = to_end if to_end < need else 0
        if head + skip + need - tail > size:
            return None
        in_ring = int(h[W_RING_IN]) - int(h[W_RING_OUT])
        if in_ring and in_ring + rows > int(h[W_CAPACITY]):
            return None
        if skip >= FRAME_HEADER:
            _FRAME.pack_into(self.mm, HEADER_BYTES + pos, KIND_WRAP << 32, 0, 0, 0)
        start = HEADER_BYTES + (0 if skip else pos)
        first = int(h[W_HEAD_SEQ])
        _FRAME.pack_into(self.mm, start, KIND_BATCH << 32 | payload.size, first, rows, enqueue_ns)
        body = start + FRAME_HEADER
        self.mm[body : body + payload.size] = memoryview(payload)
        h[W_RING_IN] += rows
        h[W_HEAD_BYTES] = head + skip + need  # publish the frame, then its sequence numbers
        h[W_HEAD_SEQ] = first + rows
        self._note_queue()
        self.wake_reader()
        return first

    def reserve_spill(self, rows: int) -> int:
        """First sequence number for ``rows`` tuples that go to a spill file."""
        return int(self.h[W_HEAD_SEQ])

    def publish_spill(self, first: int, rows: int) -> None:
        self.h[W_SPILLED] += rows
        self.h[W_HEAD_SEQ] = first + rows
        self._note_queue()
        self.wake_reader()

    def _note_queue(self) -> None:
        queued = self.queued
        if queued > self.h[W_MAX_QUEUE]:
            self.h[W_MAX_QUEUE] = queued

    def wake_reader(self) -> None:
        """Wake every registered reader (each waits on its slot's semaphore)."""
        for index in range(MAX_READERS):
            if self.h[READER_BASE + index * READER_WORDS + R_IN_USE]:
                sem = self._reader_sem(index)
                if sem is not None and sem.value == 0:
                    sem.release()

    def _reader_sem(self, index: int) -> posix_ipc.Semaphore | None:
        sem = self._reader_sems.get(index)
        if sem is None:
            try:
                sem = posix_ipc.Semaphore(f"{self.segment}-r{index}")
            except posix_ipc.ExistentialError:
                return None
            self._reader_sems[index] = sem
        return sem

    def note_blocked(self) -> None:
        """A writer found the ring full and waits: the reader should release what it can."""
        self.h[W_WRITER_BLOCKED] = 1

    def take_blocked(self) -> bool:
        """Whether a writer waited for space since the last call."""
        if not self.h[W_WRITER_BLOCKED]:
            return False
        self.h[W_WRITER_BLOCKED] = 0
        return True

    def wait_space(self) -> None:
        with contextlib.suppress(posix_ipc.BusyError):
            self.space_sem.acquire(WAIT_S)

    # -- reading (many readers, each with a cursor) ------------------------------------------

    def read_frames(self, tail: int, expected: int, max_rows: int) -> list[Frame]:
        """The ring's frames from byte counter ``tail`` that continue at sequence ``expected``.

        Reading moves nothing in the header: the reader keeps its own cursor
        and releases what it consumed into its slot (:meth:`release_slot`).
        Frames wholly before ``expected`` are skipped (a cursor's byte
        position may lag behind its sequence number); a frame that straddles
        it is returned whole, for the caller to slice. Stops before a frame
        that starts after ``expected``: the tuples in between are in spill
        files, which the caller reads first.
        """
        size, mm = self.size, self.mm
        head = int(self.h[W_HEAD_BYTES])
        frames: list[Frame] = []
        rows_taken = 0
        while tail < head and rows_taken < max_rows:
            pos = tail % size
            to_end = size - pos
            if to_end < FRAME_HEADER:
                tail += to_end
                continue
            kind_len, first, rows, stamp = _FRAME.unpack_from(mm, HEADER_BYTES + pos)
            if kind_len >> 32 == KIND_WRAP:
                tail += to_end
                continue
            if first > expected:
                break
            length = kind_len & 0xFFFFFFFF
            body = HEADER_BYTES + pos + FRAME_HEADER
            tail += FRAME_HEADER + _align8(length)
            if first + rows <= expected:
                continue  # consumed already (a cursor's byte position lags its seq)
            frames.append(Frame(first, rows, stamp, mm[body : body + length], tail))
            expected = first + rows
            rows_taken += rows
        return frames

    def frame_end_before(self, tail: int, seq: int) -> int:
        """The byte counter just after the last whole ring frame that ends at or before
        ``seq``, starting the walk at ``tail`` (frames are contiguous in sequence order)."""
        end = tail
        for after, first, rows in self._frames(tail, int(self.h[W_HEAD_BYTES])):
            if first + rows > seq:
                break
            end = after
        return end

    def _advance_tail(self) -> int:
        """Move TAIL to the slowest live cursor (readers, and the archive's); hold the lock.

        Without a live reader the tail stays: the tuples wait for the next
        one. TAIL_SEQ moves first: a process killed between the stores leaves
        frames wholly below TAIL_SEQ, which :meth:`recover_tail` frees.
        Returns the new TAIL_SEQ.
        """
        h = self.h
        cursors = [
            (int(self.reader(i)[R_SEQ]), int(self.reader(i)[R_BYTES])) for i in self.readers()
        ]
        if not cursors:
            return int(h[W_TAIL_SEQ])
        if h[W_HAS_ARCHIVE]:
            cursors.append((int(h[W_ARCH_SEQ]), int(h[W_ARCH_BYTES])))
        seq = min(c[0] for c in cursors)
        tail_seq, tail = int(h[W_TAIL_SEQ]), int(h[W_TAIL_BYTES])
        if seq <= tail_seq:
            return tail_seq
        # A cursor's byte position may lag its sequence number (one restored or taken
        # over): free every whole frame below the new tail all the same.
        to = self.frame_end_before(max(tail, min(c[1] for c in cursors)), seq)
        h[W_TAIL_SEQ] = seq
        if to > tail:
            h[W_RING_OUT] += self._rows_between(tail, to)
            h[W_TAIL_BYTES] = to
        if self.space_sem.value == 0:
            self.space_sem.release()
        return seq

    def _frames(self, tail: int, to: int) -> Iterator[tuple[int, int, int]]:
        """``(byte position after it, first sequence number, rows)`` of each data frame
        between byte positions ``tail`` and ``to``; wrap markers and the unusable end
        of the ring are skipped."""
        size = self.size
        while tail < to:
            pos = tail % size
            to_end = size - pos
            if to_end < FRAME_HEADER:
                tail += to_end
                continue
            kind_len, first, rows, _ = _FRAME.unpack_from(self.mm, HEADER_BYTES + pos)
            if kind_len >> 32 == KIND_WRAP:
                tail += to_end
                continue
            tail += FRAME_HEADER + _align8(kind_len & 0xFFFFFFFF)
            yield tail, first, rows

    def _rows_between(self, tail: int, to: int) -> int:
        return sum(rows for _, _, rows in self._frames(tail, to))

    def recover_tail(self) -> None:
        """Make the released position consistent after a process died while releasing.

        Call with the lock held (no writer moves HEAD meanwhile): frames wholly
        below TAIL_SEQ are freed, and the ring's row count is recomputed from
        the frames that remain.
        """
        h = self.h
        tail, head, tail_seq = int(h[W_TAIL_BYTES]), int(h[W_HEAD_BYTES]), int(h[W_TAIL_SEQ])
        freed_to = tail
        in_ring = 0
        for end, first, rows in self._frames(tail, head):
            if first + rows <= tail_seq and in_ring == 0:
                freed_to = end
            else:
                in_ring += rows
        h[W_TAIL_BYTES] = freed_to
        h[W_RING_OUT] = int(h[W_RING_IN]) - in_ring

    # -- reader slots ------------------------------------------------------------------------

    def reader(self, index: int) -> np.ndarray:
        base = READER_BASE + index * READER_WORDS
        return self.h[base : base + READER_WORDS]

    def readers(self) -> list[int]:
        """Indexes of the reader slots in use."""
        return [i for i in range(MAX_READERS) if self.h[READER_BASE + i * READER_WORDS]]

    def reader_name(self, index: int) -> str:
        raw = self.reader(index)[R_NAME : R_NAME + NAME_BYTES // 8].tobytes()
        return raw.rstrip(b"\0").decode("utf-8", "replace")

    def reader_alive(self, index: int) -> bool:
        slot = self.reader(index)
        return liveness.alive(int(slot[R_PID]), int(slot[R_STARTED]))

    def add_reader(self, stream: str, name: str = "") -> int:
        """Register a reader whose cursor starts at the oldest tuple the ring holds.

        Any number of readers, in this process or others, each get a slot;
        slots of dead processes are reaped first.
        """
        with self.locked():
            self._reap_locked()
            self.recover_tail()
            free = next((i for i in range(MAX_READERS) if not self.reader(i)[R_IN_USE]), None)
            if free is None:
                raise StreamError(f"stream {stream!r} has {MAX_READERS} readers already")
            slot = self.reader(free)
            slot[R_PID] = self.pid
            slot[R_STARTED] = liveness.start_time(self.pid)
            slot[R_BEAT] = time.monotonic_ns()
            slot[R_SEQ] = slot[R_READ] = self.h[W_TAIL_SEQ]
            slot[R_BYTES] = self.h[W_TAIL_BYTES]
            raw = name.encode("utf-8")[:NAME_BYTES].ljust(NAME_BYTES, b"\0")
            slot[R_NAME : R_NAME + NAME_BYTES // 8] = np.frombuffer(raw, dtype=np.int64)
            sem = self._reader_sem(free)
            while sem is not None and sem.value:  # a previous holder's leftover wake-ups
                with contextlib.suppress(posix_ipc.BusyError):
                    sem.acquire(0)
            slot[R_IN_USE] = 1
        return free

    def remove_reader(self, index: int) -> None:
        """Give the slot back (and the archive lease with it); the tail moves past it."""
        if self.mm.closed:
            return
        with self.locked():
            slot = self.reader(index)
            if slot[R_PID] != self.pid:
                return
            slot[R_IN_USE] = 0
            slot[R_PID] = 0
            if self.h[W_ARCH_LEASE] == index + 1:
                self.h[W_ARCH_LEASE] = 0
            self._advance_tail()

    def release_slot(self, index: int, seq: int, end_bytes: int) -> int:
        """Reader ``index`` consumed everything before ``seq`` (ring bytes up to
        ``end_bytes``); free what no cursor needs. Returns the ring's TAIL_SEQ."""
        slot = self.reader(index)
        slot[R_BYTES] = end_bytes
        slot[R_SEQ] = seq
        with self.locked():
            return self._advance_tail()

    def set_archived(self, seq: int, end_bytes: int) -> int:
        """The archive's cursor moved (its tuples are durable in the log); TAIL_SEQ after."""
        with self.locked():
            self.h[W_ARCH_BYTES] = end_bytes
            self.h[W_ARCH_SEQ] = seq
            return self._advance_tail()

    def take_archive_lease(self, index: int) -> bool:
        """Make reader ``index`` the archive's writer if nobody (alive) is."""
        with self.locked():
            holder = int(self.h[W_ARCH_LEASE])
            if holder == index + 1:
                return True
            if holder and self.reader(holder - 1)[R_IN_USE] and self.reader_alive(holder - 1):
                return False
            self.h[W_ARCH_LEASE] = index + 1
            return True

    def holds_archive_lease(self, index: int) -> bool:
        return int(self.h[W_ARCH_LEASE]) == index + 1

    def reap_readers(self) -> tuple[list[int], int]:
        """Free the slots of readers whose process died: (their pids, live readers left)."""
        with self.locked():
            return self._reap_locked()

    def _reap_locked(self) -> tuple[list[int], int]:
        dead, live = [], 0
        for index in self.readers():
            if self.reader_alive(index):
                live += 1
                continue
            slot = self.reader(index)
            dead.append(int(slot[R_PID]))
            slot[R_IN_USE] = 0
            slot[R_PID] = 0
            if self.h[W_ARCH_LEASE] == index + 1:
                self.h[W_ARCH_LEASE] = 0
        if dead:
            self._advance_tail()
        return dead, live

    def wait_data(self, index: int, timeout: float = WAIT_S) -> None:
        sem = self._reader_sem(index)
        if sem is None:
            time.sleep(timeout)
            return
        with contextlib.suppress(posix_ipc.BusyError):
            sem.acquire(timeout)

    # -- producer slots -------------------------------------------------------------------

    def slot(self, index: int) -> np.ndarray:
        base = SLOT_BASE + index * SLOT_WORDS
        return self.h[base : base + SLOT_WORDS]

    def slot_name(self, index: int) -> str:
        raw = self.slot(index)[S_NAME : S_NAME + NAME_BYTES // 8].tobytes()
        return raw.rstrip(b"\0").decode("utf-8", "replace")

    def set_slot_name(self, index: int, name: str) -> None:
        raw = name.encode("utf-8")[:NAME_BYTES].ljust(NAME_BYTES, b"\0")
        self.slot(index)[S_NAME : S_NAME + NAME_BYTES // 8] = np.frombuffer(raw, dtype=np.int64)

    def producers(self) -> list[int]:
        """Indexes of the slots in use."""
        return [i for i in range(MAX_SLOTS) if self.slot(i)[S_IN_USE]]

    def slot_alive(self, index: int) -> bool:
        slot = self.slot(index)
        return liveness.alive(int(slot[S_PID]), int(slot[S_STARTED]))
