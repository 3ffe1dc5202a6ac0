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
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from matchsql.storage.files import io_error, make_private_dirs, write_atomically


def spill_path(directory: str, first_seq: int) -> Path:
    return Path(directory) / f"{first_seq:020d}.parquet"


def write_spill(directory: str, first_seq: int, table: pa.Table) -> None:
    """Write ``table`` (first tuple ``first_seq``) atomically, or raise a StreamError and
    leave nothing behind (the caller has not published the tuples, so none is lost)."""
    final = spill_path(directory, first_seq)
    try:
        make_private_dirs(Path(directory))
    except OSError as exc:
        raise io_error("cannot create the spill directory", directory, exc) from None
    write_atomically(final, table, final.with_suffix(f".tmp{os.getpid()}"),
                     "cannot write spill file", sync=False)


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
    starts = sorted(int(stem) for stem, _, suffix in (n.partition(".") for n in names)
                    if suffix == "parquet" and stem.isdigit() and int(stem) <= seq)
    for first in reversed(starts):
        table = read_spill(directory, first)
        if table is not None and first + table.num_rows > seq:
            return first, table
        if table is not None:
            return None
    return None
