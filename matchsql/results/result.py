"""``Result``: the rows of one statement, read lazily, named as in DuckDB's Python API.

A leaf module: the session layer (the executor, the stream statements) builds
Results and the connection hands them out; nothing here imports either. The
rows of a plain statement may stay a DuckDB relation (:class:`RelationSource`)
until they are read, so that text output never loads pyarrow.

Reading twice: the batches read are kept (up to :data:`KEEP_BYTES`), so once
every row was read, a full read (``fetchall``, ``arrow``, ``df``, ``pl``,
``fetch_record_batch``, ``render``) starts again from the first row, as a
DuckDB relation does. A result too large to keep raises a clear error on a
second full read instead of returning nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

import duckdb

from matchsql.errors import Error
from matchsql.results.duckdb_values import DuckType, data_frame, python_rows, types_of_schema
from matchsql.results.render import render_batches

if TYPE_CHECKING:
    import pyarrow as pa

#: Bytes of Arrow data a Result keeps so that it can be read again.
KEEP_BYTES = 64 * 1024 * 1024
#: DuckDB's default ``rows_per_batch`` of ``fetch_record_batch``.
ROWS_PER_BATCH = 1_000_000


class LazyReader:
    """A reader whose statement starts on the first read, not when the Result is made.

    A statement over a live stream would otherwise block in ``con.sql()``
    until the stream ends; its schema is known beforehand.
    """

    def __init__(self, schema: pa.Schema, start: Callable[[], Any]) -> None:
        self.schema = schema
        self._start = start
        self._reader: Any = None
        self._closed = False

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        if self._closed:
            return iter(())
        if self._reader is None:
            self._reader = self._start()
        return iter(self._reader)

    def close(self) -> None:
        self._closed = True
        if self._reader is not None:
            self._reader.close()


class Result:
    """Rows of one statement, fetched lazily from DuckDB or from the matchers.

    Holds on to whatever the statement registered in DuckDB (matcher output
    streams) until it is closed or exhausted.
    """

    def __init__(
        self,
        reader: Any,
        on_close: list[Callable[[], None]] | None = None,
        translate: Callable[[duckdb.Error | Error], Error] | None = None,
        *,
        stats: dict | None = None,
        continuous: bool = False,
        types: list[DuckType] | None = None,
    ) -> None:
        self._reader = reader
        self._types = types  # the statement's DuckDB column types, where it knows them
        self._translate = translate
        self._batches: Iterator[pa.RecordBatch] | None = None
        self._row_buffer: list[tuple] = []
        self._on_close = on_close or []
        self._closed = False
        self._exhausted = False  # every row was read from the reader
        self._kept: list[pa.RecordBatch] | None = []  # None once over KEEP_BYTES
        self._kept_bytes = 0
        #: Input metrics of a query over a live stream (InputMetrics.row, filled when it
        #: ends); None for others.
        self.stats = stats
        #: The columns that are a PARTITION BY column of the statement's MATCH_RECOGNIZE
        #: (match numbers count per partition: a plot draws a line per partition).
        self.partition_by: list[str] = []
        #: True for ``SELECT * FROM stream MATCH_RECOGNIZE``: rows arrive as matches
        #: become final, so the shell prints them one by one.
        self.continuous = continuous
        #: For a continuous result: the stream's lag now (tuples written and not yet read
        #: by its slowest reader), which the shell's status line shows; else None.
        self.lag: Callable[[], int | None] | None = None

    @property
    def schema(self) -> pa.Schema:
        return self._reader.schema

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)

    @property
    def types(self) -> list[DuckType]:
        """The DuckDB types of the columns, as DuckDB's ``relation.types`` gives them."""
        if self._types is None:
            self._types = types_of_schema(self.schema)
        return list(self._types)

    dtypes = types

    @property
    def type_names(self) -> list[str]:
        return [str(t) for t in self.types]

    @property
    def arrow_types(self) -> list[pa.DataType]:
        """The Arrow types of the columns (as :meth:`arrow` gives them)."""
        return list(self.schema.types)

    # -- batches ------------------------------------------------------------------

    def fetch_batches(self) -> Iterator[pa.RecordBatch]:
        """The rows as Arrow record batches, as they become available.

        The remaining ones while the result is being read; all of them again
        once it was read to its end.
        """
        if self._exhausted and not self._row_buffer:
            return self._again()
        if self._batches is None:
            self._batches = self._read_batches()
        return self._batches

    def _again(self) -> Iterator[pa.RecordBatch]:
        if self._kept is None:
            raise Error(
                f"this result was already read and is larger than "
                f"{KEEP_BYTES // (1024 * 1024)} MiB, too large to keep: "
                f"run the statement again to read its rows again"
            )
        return iter(list(self._kept))

    def _read_batches(self) -> Iterator[pa.RecordBatch]:
        # One generator for the Result's whole life: fetchone() and friends
        # take batches from it one at a time without ending the stream.
        try:
            if self._closed:
                return
            for batch in self._reader:
                if batch.num_rows:
                    self._keep(batch)
                    yield batch
            self._exhausted = True
        except (duckdb.Error, Error) as exc:  # a matcher's error gets its position here
            if self._translate is None:
                raise
            raise self._translate(exc) from None
        finally:
            self.close()

    def _keep(self, batch: pa.RecordBatch) -> None:
        if self._kept is None:
            return
        self._kept_bytes += batch.nbytes
        if self._kept_bytes > KEEP_BYTES:
            self._kept = None
        else:
            self._kept.append(batch)

    def fetch_record_batch(self, rows_per_batch: int = ROWS_PER_BATCH) -> pa.RecordBatchReader:
        """An Arrow RecordBatchReader over the rows, batches of at most ``rows_per_batch``."""
        if rows_per_batch <= 0:
            raise Error(f"rows_per_batch must be positive, got {rows_per_batch}")
        import pyarrow as pa  # pyarrow (with numpy): loaded when rows are read as Arrow (start-up)

        self._refuse_buffered("fetch_record_batch()")
        return pa.RecordBatchReader.from_batches(
            self.schema, _sliced(self.fetch_batches(), rows_per_batch)
        )

    to_arrow_reader = fetch_record_batch
    fetch_arrow_reader = fetch_record_batch

    # -- rows ---------------------------------------------------------------------

    def _next_rows(self) -> bool:
        if self._exhausted:
            return False
        batch = next(self.fetch_batches(), None)
        if batch is None:
            return False
        self._row_buffer.extend(self._rows(batch))
        return True

    def fetchone(self) -> tuple | None:
        """The next row; None after the last one."""
        if not self._row_buffer and not self._next_rows():
            return None
        return self._row_buffer.pop(0)

    def fetchmany(self, size: int = 1) -> list[tuple]:
        rows: list[tuple] = []
        while len(rows) < size:
            if not self._row_buffer and not self._next_rows():
                break
            take = min(size - len(rows), len(self._row_buffer))
            rows.extend(self._row_buffer[:take])
            del self._row_buffer[:take]
        return rows

    def fetchall(self) -> list[tuple]:
        """The remaining rows; every row again once the result was read to its end."""
        rows = self._row_buffer
        self._row_buffer = []
        batches = list(self.fetch_batches())
        if batches:
            import pyarrow as pa  # pyarrow (with numpy): loaded when rows are read (start-up)

            rows.extend(self._rows(pa.Table.from_batches(batches, schema=self.schema)))
        return rows

    def _rows(self, table: pa.Table | pa.RecordBatch) -> list[tuple]:
        """Python tuples of ``table``, valued as DuckDB's own fetchall values them."""
        return python_rows(table, self.types)

    def __iter__(self) -> Iterator[tuple]:
        while True:
            row = self.fetchone()
            if row is None:
                return
            yield row

    # -- tables -------------------------------------------------------------------

    def arrow(self) -> pa.Table:
        """The rows as an Arrow table (the remaining ones, or all once read to the end)."""
        import pyarrow as pa  # pyarrow (with numpy): loaded when rows are read as Arrow (start-up)

        self._refuse_buffered("arrow()")
        return pa.Table.from_batches(list(self.fetch_batches()), schema=self.schema)

    fetch_arrow_table = arrow
    to_arrow_table = arrow

    def df(self):
        """The rows as a pandas DataFrame, typed as DuckDB's ``df()`` types them."""
        return data_frame(self.arrow(), self._types)

    fetchdf = df
    to_df = df

    def pl(self):
        """The rows as a Polars DataFrame (needs the polars package)."""
        try:
            polars = importlib.import_module("polars")
        except ImportError:
            raise Error("pl() needs the polars package: pip install polars") from None
        return polars.from_arrow(self.arrow())

    def plot(
        self,
        x: str,
        y: str,
        *,
        match: str | None = None,
        by: str | list[str] | None = None,
        path: str | None = None,
        title: str | None = None,
    ):
        """A matplotlib Figure of ``y`` over ``x`` with each match banded (matchsql.results.plot).

        ``match`` names the MATCH_NUMBER() column (found by name when left
        out), ``by`` (a column or a list of them) draws one line per partition: by
        default the statement's PARTITION BY columns in the result; with ``path``
        the picture is also written there as a PNG.
        """
        # matplotlib's glue: loaded on the first plot (start-up).
        from matchsql.results.plot import plot_matches, save_plot

        table = self.arrow()
        by = by if by is not None else (self.partition_by or None)
        if path is not None:
            save_plot(table, path, x, y, match=match, by=by, title=title)
        return plot_matches(table, x, y, match=match, by=by, title=title)

    def _refuse_buffered(self, name: str) -> None:
        if self._row_buffer:
            raise Error(
                f"{name} after fetchone()/fetchmany() is not supported: "
                f"read the remaining rows with fetchall()"
            )

    def show(self, max_rows: int = 40) -> None:
        """Print the rows as a box table (DuckDB's rendering)."""
        print(self.render(max_rows=max_rows))

    def render(self, max_rows: int = 40) -> str:
        """The rows as a box table, keeping only the rows it shows."""
        return render_batches(
            self.schema,
            self.fetch_batches(),
            max_rows=max_rows,
            types=None if self._types is None else self.type_names,
        )

    def take_relation(self) -> duckdb.DuckDBPyRelation | None:
        """The DuckDB relation of a plain statement none of whose rows was read yet, handed
        over to be read through DuckDB (the shell casts its values to text there): the
        Result then has no rows left. None for any other Result."""
        if (
            not isinstance(self._reader, RelationSource)
            or self._batches is not None
            or self._row_buffer
            or self._closed
        ):
            return None
        relation = self._reader.take()
        if relation is not None:
            self._exhausted = True
            self._kept = None
        return relation

    def error(self, exc: duckdb.Error) -> Error:
        """``exc``, raised while reading this result's rows, as a matchsql error."""
        if self._translate is None:
            return Error(str(exc).splitlines()[0])
        return self._translate(exc)

    def close_with(self, callbacks: list[Callable[[], None]]) -> None:
        """Run ``callbacks`` too when the result is closed (what else the statement holds)."""
        self._on_close.extend(callbacks)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._reader.close()
        for callback in self._on_close:
            callback()
        self._on_close = []

    def __repr__(self) -> str:
        return f"<matchsql.Result columns={self.columns}>"


class RelationSource:
    """The rows of a plain DuckDB statement, as its relation: read as Arrow on the first
    read (pyarrow loads then), or handed over whole (:meth:`Result.take_relation`) to a
    caller that reads them through DuckDB, so that text output never loads pyarrow."""

    def __init__(self, relation: duckdb.DuckDBPyRelation, rows_per_batch: int) -> None:
        self._relation: duckdb.DuckDBPyRelation | None = relation
        self._rows = rows_per_batch
        self._reader: Any = None

    @property
    def schema(self) -> pa.Schema:
        return self._arrow().schema

    def _arrow(self) -> Any:
        if self._reader is None:
            if self._relation is None:
                raise Error("the rows of this result were already read")
            self._reader = self._relation.to_arrow_reader(self._rows)
            self._relation = None
        return self._reader

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return iter(self._arrow())

    def take(self) -> duckdb.DuckDBPyRelation | None:
        """The relation, if no row was read as Arrow yet; it is the caller's from now on."""
        relation, self._relation = self._relation, None
        return relation if self._reader is None else None

    def close(self) -> None:
        self._relation = None
        if self._reader is not None:
            self._reader.close()


class BatchSource:
    """The part of a RecordBatchReader that Result uses, over a generator it can close."""

    def __init__(self, schema: pa.Schema, batches: Generator[pa.RecordBatch]) -> None:
        self.schema = schema
        self._batches = batches

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self._batches

    def close(self) -> None:
        self._batches.close()


def table_result(table: pa.Table) -> Result:
    """A Result over rows already in memory (SHOW STREAMS, SHOW STATS, EXPLAIN)."""
    import pyarrow as pa  # pyarrow (with numpy): loaded when rows are read as Arrow (start-up)

    return Result(pa.RecordBatchReader.from_batches(table.schema, table.to_batches()))


def _sliced(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for start in range(0, batch.num_rows, rows):
            yield batch.slice(start, rows)
