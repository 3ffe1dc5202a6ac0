"""The Python API, shaped after DuckDB's: ``connect`` -> ``Connection`` -> ``Result``."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import duckdb
from duckdb import DuckDBPyConnection

from matchsql.config import Config, is_internal
from matchsql.execution.workers.segments import sweep_dead_owners
from matchsql.results.result import Result
from matchsql.runtime.allocator import keep_freed_memory
from matchsql.session.executor import Executor
from matchsql.session.scope import caller_scope
from matchsql.storage.demo_needed import needs_demo
from matchsql.storage.permissions import owner_only_database, owner_only_file

__all__ = ["Connection", "Result", "connect"]

#: A statement that names it loads the engine while the demo table is built.
_MATCH_RECOGNIZE = "MATCH_RECOGNIZE"


class Connection:
    """A DuckDB connection that also understands MATCH_RECOGNIZE."""

    def __init__(
        self,
        database: str = ":memory:",
        *,
        config: Config | None = None,
        duckdb_config: dict[str, Any] | None = None,
        read_only: bool = False,
        demo: bool = False,
    ) -> None:
        keep_freed_memory()  # a statement's buffers stay mapped for the next one
        # Shared memory of worker pools whose processes were all killed (nobody else frees it).
        sweep_dead_owners()
        self.database = database
        self.config = config or Config()
        #: Whether the demo ``trade`` table was asked for; it is built on first use.
        self.demo = demo
        self._demo_pending = demo
        # A database file this connection creates is the user's only (0600); its
        # write-ahead log gets the same mode after each statement (files.owner_only_database).
        self._file = None if database.startswith(":memory:") or read_only else database
        created = self._file is not None and not os.path.lexists(database)
        try:
            self._duckdb = duckdb.connect(database, read_only=read_only, config=duckdb_config or {})
        except duckdb.Error as exc:
            raise Executor.translate(exc) from None
        if created:
            owner_only_file(database)
        # DuckDB tracks progress (for query_progress()) but never prints a bar itself.
        self._duckdb.execute("SET enable_progress_bar = true")
        self._duckdb.execute("SET enable_progress_bar_print = false")
        self._executor = Executor(self._duckdb, self.config)
        if database != ":memory:" and not read_only:
            # Continuous queries whose process died go on from their last checkpoint.
            self._executor.resume_interrupted_continuous()

    @property
    def duckdb(self) -> DuckDBPyConnection:
        """The DuckDB connection underneath, for anything matchsql does not wrap."""
        self._build_demo()
        return self._duckdb

    def raw_cursor(self) -> DuckDBPyConnection:
        """A new DuckDB cursor on this database that, unlike :attr:`duckdb`, does not
        build the demo table: for helper queries that read no table of the user's
        (the shell renders values as text with one)."""
        return self._duckdb.cursor()

    def _build_demo(self, text: str | None = None) -> None:
        """Build the demo table if it is still pending and ``text`` (any use of the
        connection, without one) might see it."""
        if self._demo_pending and (text is None or needs_demo(text)):
            # numpy and pyarrow build the table: loaded on its first use (start-up).
            from matchsql.storage import demo

            try:
                if text is not None and _MATCH_RECOGNIZE in text.upper():
                    self._meanwhile_load_engine(demo.install_demo_trade)
                else:
                    demo.install_demo_trade(self._duckdb)
            except duckdb.Error as exc:  # e.g. Ctrl-C while it is built: built next time
                raise Executor.translate(exc) from None
            self._demo_pending = False

    def _meanwhile_load_engine(self, install: Callable[[DuckDBPyConnection], None]) -> None:
        """``install`` the demo table through a cursor on another thread while this one
        loads the engine that the statement needs next.

        Both take a new user's first query about a fifth of a second, and they overlap:
        numpy's random fills, sorts and cumulative sums and DuckDB's insert release the
        GIL, the engine's imports hold it.
        """
        cursor = self._duckdb.cursor()
        try:
            with ThreadPoolExecutor(1, thread_name_prefix="matchsql-demo") as pool:
                built = pool.submit(install, cursor)
                self._executor.matching  # noqa: B018 - loads the engine
                built.result()
        finally:
            cursor.close()

    def sql(
        self,
        text: str,
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        *,
        as_relation: bool = False,
    ) -> Result | None:
        """Run every statement in ``text``; return the last one's rows (None if it has none).

        ``params`` are the values of a single statement's parameters (``?``,
        ``$1``, ``$name``). A table may be named by a variable of the caller
        that holds a pandas or Polars DataFrame or an Arrow table, as in DuckDB.
        ``as_relation``: a plain statement's rows are run when first read, as
        with DuckDB's own ``sql()`` (its errors come then), and may be taken
        as a DuckDB relation (:meth:`Result.take_relation`; the shell does).
        """
        self._build_demo(text)
        try:
            return self._executor.run(text, params, caller_scope(), as_relation=as_relation)
        finally:
            owner_only_database(self._file)

    @property
    def last_stats(self) -> dict | None:
        """Input metrics of the last continuous query (filled when it ends), else None."""
        return self._executor.last_stats

    def execute(
        self, text: str, params: Sequence[Any] | Mapping[str, Any] | None = None
    ) -> Result | None:
        """Alias of :meth:`sql`, for DB-API habits."""
        return self.sql(text, params)

    def interrupt(self) -> None:
        """Cancel the statement running on this connection (safe from another thread)."""
        self._executor.interrupt()

    def query_progress(self) -> float:
        """DuckDB's estimate of how far the running plain-SQL statement is, in percent;
        -1 when it has none (as DuckDB's ``query_progress()``). Safe from another thread."""
        try:
            return float(self._duckdb.query_progress())
        except duckdb.Error:
            return -1.0

    def tables(self) -> list[str]:
        self._build_demo()
        return [
            row[0]
            for row in self._duckdb.execute(
                "SELECT table_name FROM information_schema.tables ORDER BY table_name"
            ).fetchall()
            if not is_internal(row[0])
        ]

    # -- named continuous queries (the same as their SQL statements) ----------------------

    def create_continuous_query(
        self,
        name: str,
        insert_sql: str,
        *,
        checkpoint_interval: float | None = None,
        checkpoint_rows: int | None = None,
        if_not_exists: bool = False,
    ) -> None:
        """``CREATE CONTINUOUS QUERY name WITH (...) AS insert_sql`` (see
        matchsql.session.continuous_queries)."""
        options = {
            k: v
            for k, v in (
                ("checkpoint_interval", checkpoint_interval),
                ("checkpoint_rows", checkpoint_rows),
            )
            if v is not None
        }
        self._executor.create_continuous(name, insert_sql, options, if_not_exists)

    def resume_continuous_query(self, name: str) -> None:
        self._executor.resume_continuous(name)

    def stop_continuous_query(self, name: str) -> None:
        self._executor.stop_continuous(name)

    def drop_continuous_query(self, name: str, *, if_exists: bool = False) -> None:
        self._executor.drop_continuous(name, if_exists=if_exists)

    def continuous_queries(self) -> Result:
        """``SHOW CONTINUOUS QUERIES``: name, state, position, lag, last checkpoint, ..."""
        result = self.sql("SHOW CONTINUOUS QUERIES")
        assert result is not None  # a SHOW statement has rows
        return result

    def close(self) -> None:
        self._executor.close()
        self._duckdb.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    database: str = ":memory:",
    *,
    demo: bool | None = None,
    read_only: bool = False,
    duckdb_config: dict[str, Any] | None = None,
    **config: Any,
) -> Connection:
    """Open a connection.

    ``database`` is ``":memory:"`` or a DuckDB file path. The in-memory default
    holds the demo ``trade`` table (``demo=False`` leaves it out; ``demo=True``
    adds it to a file database that lacks it). ``config`` sets matchsql options
    (see :class:`matchsql.config.Config`); ``duckdb_config`` goes to DuckDB.
    """
    if demo is None:
        demo = database == ":memory:"
    return Connection(
        database,
        config=Config.from_options(config),
        duckdb_config=duckdb_config,
        read_only=read_only,
        demo=demo,
    )
