"""The Python API, shaped after DuckDB's: ``connect`` -> ``Connection`` -> ``Result``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import duckdb
import pyarrow as pa

from matchsql.config import Config
from matchsql.errors import Error
from matchsql.executor import Executor


class Result:
    """Rows of one statement, fetched lazily from DuckDB.

    Holds on to whatever the statement registered in DuckDB (matcher output
    streams) until it is closed or exhausted.
    """

    def __init__(self, reader: pa.RecordBatchReader, on_close: list | None = None,
                 translate: Callable[[duckdb.Error], Error] | None = None) -> None:
        self._reader = reader
        self._translate = translate or Executor.translate
        self._batches: Iterator[pa.RecordBatch] | None = None
        self._row_buffer: list[tuple] = []
        self._on_close = on_close or []
        self._closed = False
        # Input metrics of a continuous query (InputMetrics.row), None for others.
        self.stats: dict | None = None

    @property
    def schema(self) -> pa.Schema:
        return self._reader.schema

    @property
    def columns(self) -> list[str]:
        return list(self._reader.schema.names)

    @property
    def types(self) -> list[pa.DataType]:
        return list(self._reader.schema.types)

    def fetch_batches(self) -> Iterator[pa.RecordBatch]:
        """Yield the remaining rows as Arrow record batches, as they become available."""
        if self._batches is None:
            self._batches = self._read_batches()
        return self._batches

    def _read_batches(self) -> Iterator[pa.RecordBatch]:
        # One generator for the Result's whole life: fetchone() and friends
        # take batches from it one at a time without ending the stream.
        try:
            if self._closed:
                return
            for batch in self._reader:
                if batch.num_rows:
                    yield batch
        except duckdb.Error as exc:
            raise self._translate(exc) from None
        finally:
            self.close()

    def _next_rows(self) -> bool:
        batch = next(self.fetch_batches(), None)
        if batch is None:
            return False
        self._row_buffer.extend(_rows(batch))
        return True

    def fetchone(self) -> tuple | None:
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
        rows = self._row_buffer
        self._row_buffer = []
        for batch in self.fetch_batches():
            rows.extend(_rows(batch))
        return rows

    def __iter__(self) -> Iterator[tuple]:
        while True:
            row = self.fetchone()
            if row is None:
                return
            yield row

    def arrow(self) -> pa.Table:
        """The remaining rows as an Arrow table."""
        batches = list(self.fetch_batches())
        if self._row_buffer:
            raise Error("arrow() after fetchone()/fetchmany() is not supported")
        return pa.Table.from_batches(batches, schema=self.schema)

    def df(self):
        """The remaining rows as a pandas DataFrame."""
        return self.arrow().to_pandas()

    def show(self, max_rows: int = 40) -> None:
        """Print the remaining rows as a box table (DuckDB's rendering)."""
        print(self.render(max_rows=max_rows))

    def render(self, max_rows: int = 40) -> str:
        """The remaining rows as a box table, keeping only the rows it shows."""
        from matchsql.render import render_batches

        return render_batches(self.schema, self.fetch_batches(), max_rows=max_rows)

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


def _rows(batch: pa.RecordBatch) -> list[tuple]:
    """Python tuples of ``batch``, with values converted as DuckDB's own fetchall does."""
    return list(zip(*(_values(column) for column in batch.columns)))


def _values(column: pa.Array) -> list:
    values = column.to_pylist()
    if pa.types.is_interval(column.type):
        # DuckDB hands intervals to Python as timedelta, counting a month as 30 days.
        return [None if v is None else timedelta(days=v.months * 30 + v.days,
                                                 microseconds=v.nanoseconds // 1000)
                for v in values]
    return values


class Connection:
    """A DuckDB connection that also understands MATCH_RECOGNIZE."""

    def __init__(self, database: str = ":memory:", *, config: Config | None = None,
                 duckdb_config: dict[str, Any] | None = None, read_only: bool = False) -> None:
        self.database = database
        self.config = config or Config()
        try:
            self._duckdb = duckdb.connect(database, read_only=read_only, config=duckdb_config or {})
        except duckdb.Error as exc:
            raise Executor.translate(exc) from None
        self._duckdb.execute("SET enable_progress_bar = false")
        self._executor = Executor(self._duckdb, self.config)

    @property
    def duckdb(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection underneath, for anything matchsql does not wrap."""
        return self._duckdb

    def sql(self, text: str) -> Result | None:
        """Run every statement in ``text``; return the last one's rows (None if it has none)."""
        from matchsql.stats_statement import remember

        result = self._executor.run(text)
        if result is not None:
            remember(self._executor, result.stats)  # a continuous query's: SHOW STATS shows it
        return result

    @property
    def last_stats(self) -> dict | None:
        """Input metrics of the last continuous query (filled when it ends), else None."""
        from matchsql.stats_statement import last_stats

        return last_stats(self._executor)

    def execute(self, text: str) -> Result | None:
        """Alias of :meth:`sql`, for DB-API habits."""
        return self.sql(text)

    def interrupt(self) -> None:
        """Cancel the statement running on this connection (safe from another thread)."""
        self._executor.interrupt()

    def tables(self) -> list[str]:
        return [row[0] for row in self._duckdb.execute(
            "SELECT table_name FROM information_schema.tables ORDER BY table_name").fetchall()]

    def close(self) -> None:
        self._duckdb.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(database: str = ":memory:", *, demo: bool | None = None, read_only: bool = False,
            duckdb_config: dict[str, Any] | None = None, **config: Any) -> Connection:
    """Open a connection.

    ``database`` is ``":memory:"`` or a DuckDB file path. The in-memory default
    holds the demo ``trade`` table (``demo=False`` leaves it out; ``demo=True``
    adds it to a file database that lacks it). ``config`` sets matchsql options
    (see :class:`matchsql.config.Config`); ``duckdb_config`` goes to DuckDB.
    """
    con = Connection(database, config=Config.from_options(config),
                     duckdb_config=duckdb_config, read_only=read_only)
    if demo is None:
        demo = database == ":memory:"
    if demo:
        from matchsql.storage.demo import install_demo_trade

        install_demo_trade(con.duckdb)
    return con
