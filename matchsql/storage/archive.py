"""The archived stream store: a stream's tuples, with sequence numbers, appended in order.

Two kinds, chosen by the ``archive`` option of ``CREATE STREAM``:

* a **DuckDB table** (``archive = 'trades_history'``): created if missing
  with a ``_seq BIGINT`` column followed by the stream's columns;
* a **Parquet directory** (``archive = './history/'``, anything path-like):
  one zstd-compressed file per flush, ``part-<first seq>.parquet``, with the
  same columns.

The reader side writes the archive: one of the stream's readers at a time
(the holder of the archive lease, see :mod:`matchsql.storage.archiver`)
appends every tuple of the live queue, fully or - with ``archive_filter`` -
only the rows the predicate keeps, so the archive is append-only and in
sequence order. Writes are buffered (64k rows or 1 s; sooner when a writer
waits for room in the ring or the buffer holds half of it) and flushed when
the query ends or stops. A DuckDB table archive is written through the
connection of the lease holder; readers in several processes should use a
Parquet directory, which every process sees.

The archive is the stream's log: a Parquet part is fsync'd and renamed into
place (and its directory fsync'd) before its tuples are released from the
ring, so a reader killed at any moment leaves each acknowledged tuple either
in the archive or still in the ring, never in neither. The directory and its
files are owner-only (0700 directories this creates, 0600 files).

A hybrid query reads the archive ordered by ``_seq`` and continues on the
live queue after the last archived sequence number.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import sqlglot
from sqlglot import exp

from matchsql.errors import ParseError, SemanticError, StreamError
from matchsql.grammar.statements import check_nesting, tokenize
from matchsql.runtime.deep import run_deep
from matchsql.storage import faults
from matchsql.storage.catalog import StreamDef
from matchsql.storage.files import write_atomically
from matchsql.storage.permissions import check_user_directory, io_error, make_private_dirs

SEQ = "_seq"
FLUSH_ROWS = 65_536
FLUSH_S = 1.0


def normalize_filter(predicate: str) -> str:
    """Parse an ``archive_filter`` predicate and render it back (one expression, no statements).

    Its nesting is bounded as a statement's is (3,000 NOTs would exhaust the parser's
    recursion), and parsing and rendering run with the room :func:`run_deep` gives.
    """
    try:
        check_nesting(tokenize(predicate), predicate)
    except ParseError as exc:
        raise SemanticError(f"archive_filter: {exc.message}") from None
    try:
        tree = run_deep(lambda: sqlglot.parse_one(predicate, read="duckdb", into=exp.Condition))
    except sqlglot.errors.ParseError as exc:
        raise SemanticError(f"archive_filter is not a SQL predicate: {exc}") from None
    if tree.find(exp.Query) is not None:
        raise SemanticError("archive_filter may not contain a query")
    return run_deep(lambda: tree.sql(dialect="duckdb"))


def normalize_table(name: str) -> str:
    """Validate a (possibly qualified) archive table name and quote it for DuckDB."""
    try:
        table = sqlglot.parse_one(name, read="duckdb", into=exp.Table)
    except sqlglot.errors.ParseError:
        raise SemanticError(f"archive {name!r} is neither a table name nor a directory") from None
    return table.sql(dialect="duckdb")


class Archive:
    """Appends to and reads back one stream's archive."""

    def __init__(
        self, definition: StreamDef, con: duckdb.DuckDBPyConnection, schema: pa.Schema
    ) -> None:
        self.definition = definition
        self.con = con
        self.schema = schema
        self.directory = (
            Path(os.path.expanduser(definition.archive or ""))
            if definition.archive_is_directory
            else None
        )
        self.table = None if self.directory else normalize_table(definition.archive or "")
        self.filter = definition.archive_filter
        self._buffer: list[pa.Table] = []
        self._buffered = 0
        self._buffered_bytes = 0
        self._since = time.monotonic()
        self._appended_to = 0
        # Every tuple before this sequence number is durable in the archive (or was
        # left out by archive_filter): the ring may let it go.
        self.durable_seq = 0

    def archived_schema(self) -> pa.Schema:
        return pa.schema([pa.field(SEQ, pa.int64()), *self.schema])

    def create(self) -> None:
        """Make sure the archive exists (table with the stream's columns, or directory)."""
        if self.directory is not None:
            try:
                make_private_dirs(self.directory)
            except OSError as exc:
                raise io_error(
                    f"cannot create the archive of stream {self.definition.name!r} at",
                    str(self.directory),
                    exc,
                ) from None
            self._check_directory()
            try:
                for leftover in self.directory.glob("part-*.tmp"):  # a crashed flush's
                    leftover.unlink()
            except OSError as exc:
                raise io_error(
                    f"cannot create the archive of stream {self.definition.name!r} at",
                    str(self.directory),
                    exc,
                ) from None
            return
        empty = self.archived_schema().empty_table()
        cursor = self.con.cursor()
        try:
            cursor.register("__matchsql_archive_shape", empty)
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} AS SELECT * FROM __matchsql_archive_shape"
            )
            names = cursor.sql(f"SELECT * FROM {self.table} LIMIT 0").columns
        except duckdb.Error as exc:
            raise StreamError(f"cannot create archive table {self.table}: {exc}") from None
        finally:
            cursor.close()
        if [n.lower() for n in names] != [n.lower() for n in empty.column_names]:
            raise StreamError(
                f"archive table {self.table} exists with other columns "
                f"({', '.join(names)}); it needs {', '.join(empty.column_names)}"
            )

    # -- appending -------------------------------------------------------------------

    def append(self, first_seq: int, batch: pa.RecordBatch, *, flush: bool = True) -> None:
        """Buffer ``batch`` whose first tuple is ``first_seq``; flush when due (and ``flush``)."""
        seq = pa.array(np.arange(first_seq, first_seq + batch.num_rows, dtype=np.int64))
        table = pa.Table.from_batches([batch]).add_column(0, SEQ, seq)
        if not self._buffer:
            self._since = time.monotonic()
        self._buffer.append(table)
        self._buffered += batch.num_rows
        self._buffered_bytes += batch.nbytes
        self._appended_to = first_seq + batch.num_rows
        if flush and (self._buffered >= FLUSH_ROWS or self.due()):
            self.flush()

    @property
    def buffered(self) -> int:
        """Tuples appended and not yet durable."""
        return self._buffered

    @property
    def buffered_bytes(self) -> int:
        return self._buffered_bytes

    def discard(self) -> None:
        """Forget buffered tuples (a new archive writer starts from what is durable)."""
        self._buffer, self._buffered, self._buffered_bytes = [], 0, 0

    def due(self) -> bool:
        """Whether buffered tuples waited the flush interval."""
        return bool(self._buffer) and time.monotonic() - self._since >= FLUSH_S

    def mark_durable(self, next_seq: int) -> None:
        """The tuples before ``next_seq`` are in the archive already (read as history)."""
        self.durable_seq = max(self.durable_seq, next_seq)

    def flush(self) -> None:
        """Make the buffered tuples durable; then :attr:`durable_seq` moves past them.

        On failure the buffer is kept and a StreamError names the path and the
        cause; the tuples are still in the stream's ring, so none is lost.
        """
        if not self._buffer:
            return
        table = pa.concat_tables(self._buffer)
        cursor = self.con.cursor()
        try:
            cursor.register("__matchsql_archive_rows", table)
            where = f" WHERE {self.filter}" if self.filter else ""
            select = f"SELECT * FROM __matchsql_archive_rows{where} ORDER BY {SEQ}"
            if self.directory is not None:
                self._check_directory()
                kept = cursor.sql(select).to_arrow_table()
                if kept.num_rows:
                    first = kept.column(SEQ)[0].as_py()
                    final = self.directory / f"part-{first:020d}.parquet"
                    write_atomically(
                        final,
                        kept,
                        final.with_suffix(".tmp"),
                        f"cannot append to the archive of stream {self.definition.name!r} at",
                    )
                    faults.point("archive")  # durable, not yet published to the ring
            else:
                cursor.execute(f"INSERT INTO {self.table} {select}")
        except duckdb.Error as exc:
            raise StreamError(
                f"cannot append to the archive of stream {self.definition.name!r}: {exc}"
            ) from None
        finally:
            cursor.close()
        self._buffer, self._buffered, self._buffered_bytes = [], 0, 0
        self.durable_seq = max(self.durable_seq, self._appended_to)

    # -- reading -----------------------------------------------------------------------

    def _check_directory(self) -> None:
        """Refuse an archive directory that other users could write to (they could
        replace the files this stream's history is read back from) or a system one."""
        assert self.directory is not None
        check_user_directory(self.directory, f"the archive of stream {self.definition.name!r}")

    def _source(self) -> str | None:
        if self.directory is None:
            return self.table
        if os.path.lexists(self.directory):
            self._check_directory()
        try:
            if not any(self.directory.glob("part-*.parquet")):
                return None
        except OSError as exc:
            raise io_error(
                f"cannot read the archive of stream {self.definition.name!r} at",
                str(self.directory),
                exc,
            ) from None
        pattern = str(self.directory / "part-*.parquet").replace("'", "''")
        return f"read_parquet('{pattern}')"

    def history(
        self, cursor: duckdb.DuckDBPyConnection, batch_rows: int, since: int = 0
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        """The archived tuples from sequence number ``since`` on, in order: (last seq of the
        batch, stream-shaped batch)."""
        source = self._source()
        if source is None:
            return
        columns = ", ".join(_quote(n) for n in self.schema.names)
        try:
            where = f" WHERE {SEQ} >= {int(since)}" if since else ""
            reader = cursor.sql(
                f"SELECT {SEQ}, {columns} FROM {source}{where} ORDER BY {SEQ}"
            ).to_arrow_reader(batch_rows)
            for batch in reader:
                if batch.num_rows:
                    last = batch.column(0)[batch.num_rows - 1].as_py()
                    body = (
                        pa.RecordBatch.from_arrays(batch.columns[1:], schema=self.schema)
                        if batch.schema.types[1:] == self.schema.types
                        else pa.RecordBatch.from_arrays(
                            batch.columns[1:], names=self.schema.names
                        ).cast(self.schema)
                    )
                    yield last, body
        except duckdb.Error as exc:
            raise StreamError(
                f"cannot read the archive of stream {self.definition.name!r}: {exc}"
            ) from None

    def last_seq(self, cursor: duckdb.DuckDBPyConnection) -> int:
        """The highest archived sequence number, or -1."""
        source = self._source()
        if source is None:
            return -1
        try:
            value = cursor.execute(f"SELECT max({SEQ}) FROM {source}").fetchall()[0][0]
        except duckdb.Error as exc:
            raise StreamError(
                f"cannot read the archive of stream {self.definition.name!r}: {exc}"
            ) from None
        return -1 if value is None else int(value)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
