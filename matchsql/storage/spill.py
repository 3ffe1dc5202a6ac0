"""Spill files: where a stream with ``on_full = 'spill'`` puts tuples its full ring cannot take.

A producer that finds the ring full writes the batch as one Parquet file
(zstd) named by its first sequence number, renames it into place and only
then publishes the sequence numbers, so the reader never looks for a file
that is not complete. The reader drains files in sequence order, merged with
the ring, materialises their tuples into the archive like any other, and
deletes them. A faster producer therefore loses nothing: it never blocks and
the backlog lives on disk instead of in shared memory. A file is deleted
only when its tuples are released (see :mod:`matchsql.storage.live_reader`).
Files are owner-only (0600 in a 0700 directory); an I/O failure is a
:class:`~matchsql.errors.StreamError` naming the path and the cause.

The spill files of a stream are bounded (its ``max_spill``): a producer
encodes a file in memory first, and writes it only if the files readers
still need (:class:`SpillSpace`) plus this one stay within the bound, so a
stream nobody reads fails its writes cleanly instead of filling the disk.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from matchsql.storage.files import io_error, make_private_dirs, write_bytes_atomically


def size_text(size: float) -> str:
    """``size`` bytes for people: ``512 KiB``, ``1.5 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if size < 1024 or unit == "PiB":
            return f"{size:.3g} {unit}" if unit != "B" else f"{size} B"
        size /= 1024
    raise AssertionError("unreachable")


def spill_path(directory: str, first_seq: int) -> Path:
    return Path(directory) / f"{first_seq:020d}.parquet"


def encode_spill(table: pa.Table) -> pa.Buffer:
    """``table`` as the bytes of a spill file (zstd Parquet), to weigh before writing."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def write_spill(directory: str, first_seq: int, data: pa.Buffer) -> None:
    """Write the spill file ``data`` (:func:`encode_spill`; first tuple ``first_seq``)
    atomically, or raise a StreamError and leave nothing behind (the caller has not
    published the tuples, so none is lost)."""
    final = spill_path(directory, first_seq)
    try:
        make_private_dirs(Path(directory))
    except OSError as exc:
        raise io_error("cannot create the spill directory", directory, exc) from None
    write_bytes_atomically(
        final, data, final.with_suffix(f".tmp{os.getpid()}"), "cannot write spill file", sync=False
    )


class SpillSpace:
    """The bytes of one stream's spill files that readers still need.

    That is what ``max_spill`` bounds: a file every reader has released (its
    first sequence number is below the ring's tail) counts no more, even if the
    reader that released it has not deleted it yet (or died before). The
    directory itself is the truth, whoever wrote or deleted the files (other
    producers, readers); sizes of files already seen are remembered (a spill
    file never changes), so a check costs one directory listing.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._sizes: dict[int, int] = {}  # first seq -> bytes, of the files seen

    def in_use(self, released: int) -> int:
        """Bytes of the spill files from sequence number ``released`` (the ring's tail) on."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:  # nothing spilled yet
            self._sizes.clear()
            return 0
        except OSError as exc:
            raise io_error("cannot list the spill directory", self.directory, exc) from None
        sizes: dict[int, int] = {}
        for name in names:
            stem, _, suffix = name.partition(".")
            if suffix != "parquet" or not stem.isdigit() or int(stem) < released:
                continue  # a temporary file of a write in progress, or released tuples
            first = int(stem)
            size = self._sizes.get(first)
            if size is None:
                try:
                    size = os.stat(os.path.join(self.directory, name)).st_size
                except FileNotFoundError:  # released and deleted meanwhile
                    continue
                except OSError as exc:
                    raise io_error(
                        "cannot read spill file", os.path.join(self.directory, name), exc
                    ) from None
            sizes[first] = size
        self._sizes = sizes
        return sum(sizes.values())

    def add(self, first_seq: int, size: int) -> None:
        """Remember a file this process wrote (no need to stat it at the next check)."""
        self._sizes[first_seq] = size


def read_spill(directory: str, first_seq: int) -> pa.Table | None:
    """The spill file that starts at ``first_seq``, or None if there is none (yet)."""
    path = spill_path(directory, first_seq)
    try:
        return pq.read_table(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise io_error("cannot read spill file", str(path), exc) from None


def remove_spill(directory: str, first_seq: int) -> None:
    try:
        spill_path(directory, first_seq).unlink()
    except FileNotFoundError:
        pass


def remove_spills_before(directory: str, seq: int) -> None:
    """Delete spill files whose tuples were all released (a reader died before deleting)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        stem, _, suffix = name.partition(".")
        if suffix == "parquet" and stem.isdigit() and int(stem) < seq:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))


def read_spill_covering(directory: str, seq: int) -> tuple[int, pa.Table] | None:
    """The spill file that holds ``seq`` (it may start before it), with its first seq.

    A cursor normally sits at the start of a file; one restored from a
    checkpoint or taken over from a dead archive writer may not.
    """
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    starts = sorted(
        int(stem)
        for stem, _, suffix in (n.partition(".") for n in names)
        if suffix == "parquet" and stem.isdigit() and int(stem) <= seq
    )
    for first in reversed(starts):
        table = read_spill(directory, first)
        if table is not None and first + table.num_rows > seq:
            return first, table
        if table is not None:
            return None
    return None
