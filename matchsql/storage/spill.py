"""Spill files: where a stream with ``on_full = 'spill'`` puts tuples its full ring cannot take.

A producer that finds the ring full writes the batch as one Parquet file
(zstd) named by its first sequence number, renames it into place and only
then publishes the sequence numbers, so the reader never looks for a file
that is not complete. The reader drains files in sequence order, merged with
the ring, materialises their tuples into the archive like any other, and
deletes them. A faster producer therefore loses nothing: it never blocks and
the backlog lives on disk instead of in shared memory.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def spill_path(directory: str, first_seq: int) -> Path:
    return Path(directory) / f"{first_seq:020d}.parquet"


def write_spill(directory: str, first_seq: int, table: pa.Table) -> None:
    """Write ``table`` (first tuple ``first_seq``) atomically."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    final = spill_path(directory, first_seq)
    tmp = final.with_suffix(f".tmp{os.getpid()}")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, final)


def read_spill(directory: str, first_seq: int) -> pa.Table | None:
    """The spill file that starts at ``first_seq``, or None if there is none (yet)."""
    path = spill_path(directory, first_seq)
    try:
        return pq.read_table(path)
    except FileNotFoundError:
        return None


def remove_spill(directory: str, first_seq: int) -> None:
    try:
        spill_path(directory, first_seq).unlink()
    except FileNotFoundError:
        pass
