"""The executor's stream hooks: stream DDL, and MATCH_RECOGNIZE over a live stream.

Kept apart from :mod:`matchsql.session.executor` so the one-time path stays simple;
the executor calls in at three points (stream DDL, a MATCH_RECOGNIZE whose
input is a stream, interrupt).

Output of a continuous query:

* ``SELECT * FROM stream MATCH_RECOGNIZE (...)`` (nothing else around it)
  bypasses DuckDB: the Result iterates the matcher output directly, so a
  match is handed to the caller as soon as it is final.
* Any other statement over a stream (projection, WHERE, joins, LIMIT, ...)
  runs in DuckDB over the registered match stream. It works, but DuckDB
  pulls its input in chunks and blocking operators (ORDER BY, GROUP BY)
  wait for the end of the stream, so rows may arrive later than they are
  final; use the plain form when latency matters.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

import duckdb
import pyarrow as pa
from sqlglot import exp

import matchsql.engine.planner as planner  # by module: tests stand in for its functions
from matchsql.engine.compiled_query import compile_match
from matchsql.errors import Error, SemanticError, StreamError
from matchsql.execution.adaptive.continuous_input import continuous_batches
from matchsql.execution.adaptive.modes import InputOptions
from matchsql.execution.adaptive.statistics import Sliding
from matchsql.execution.live_source import LiveSource
from matchsql.expr.batch_select import derive_input, project_result
from matchsql.grammar.stream_ddl import CreateStream, DropStream, ShowStreamReaders, StreamStatement
from matchsql.grammar.subqueries import visible_ctes
from matchsql.plan.spec import SkipMode
from matchsql.results.result import BatchSource, Result, table_result
from matchsql.runtime.cancel import Cancellation
from matchsql.session.failure import StatementFailure
from matchsql.session.query_shape import direct_select
from matchsql.storage.archive import normalize_filter
from matchsql.storage.catalog import Catalog, StreamDef
from matchsql.storage.live_reader import LiveReader
from matchsql.storage.shm_ring import Ring
from matchsql.storage.stream_lifecycle import (
    create_stream,
    drop_stream,
    show_stream_readers,
    show_streams,
    stream_lag,
)


class StreamStatements:
    """Stream support for one :class:`~matchsql.session.executor.Executor`."""

    def __init__(self, executor) -> None:
        self.executor = executor
        self._database: str | None = None
        self._catalog: Catalog | None = None

    # -- plumbing ---------------------------------------------------------------------

    @property
    def database(self) -> str | None:
        """The DuckDB file of the connection (None in memory): the stream namespace."""
        if self._database is None:
            cursor = self.executor.con.cursor()
            try:
                rows = cursor.execute(
                    "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
                ).fetchall()
            finally:
                cursor.close()
            self._database = rows[0][0] if rows and rows[0][0] else ":memory:"
        return None if self._database == ":memory:" else self._database

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = Catalog(self.database)
        return self._catalog

    # -- DDL -------------------------------------------------------------------------------

    def run_ddl(self, parsed: StreamStatement, statement: str):
        """CREATE/DROP STREAM, SHOW STREAMS, SHOW STREAM READERS (``parsed`` from
        ``statement``, whose text locates errors)."""
        if isinstance(parsed, CreateStream):
            schema = self._schema_of(parsed, statement)
            options = parsed.options
            if "archive_filter" in options and "archive" not in options:
                raise SemanticError("archive_filter needs an archive")
            if "archive_filter" in options:
                options["archive_filter"] = normalize_filter(str(options["archive_filter"]))
            create_stream(
                self.executor.con,
                self.database,
                parsed.name,
                parsed.columns,
                schema,
                if_not_exists=parsed.if_not_exists,
                **options,
            )
            return None
        if isinstance(parsed, DropStream):
            drop_stream(self.database, parsed.name, if_exists=parsed.if_exists)
            return None
        if isinstance(parsed, ShowStreamReaders):
            return table_result(show_stream_readers(self.database, parsed.name))
        return table_result(show_streams(self.database))

    def _schema_of(self, create, statement: str) -> pa.Schema:
        """The Arrow schema DuckDB gives the declared columns (this validates the types)."""
        fields = []
        cursor = self.executor.con.cursor()
        try:
            for (name, type_text), offset in zip(create.columns, create.type_offsets):
                if ";" in type_text:
                    raise SemanticError(f"invalid type {type_text!r}", sql=statement, offset=offset)
                quoted = '"' + name.replace('"', '""') + '"'
                try:
                    table = cursor.sql(
                        f"SELECT CAST(NULL AS {type_text}) AS {quoted}"
                    ).to_arrow_table()
                except duckdb.Error as exc:
                    message = str(exc).splitlines()[0]
                    raise SemanticError(
                        f"column {name!r}: unknown or invalid type {type_text!r} ({message})",
                        sql=statement,
                        offset=offset,
                    ) from None
                fields.append(table.schema.field(0))
        finally:
            cursor.close()
        return pa.schema(fields)

    # -- MATCH_RECOGNIZE over a stream -----------------------------------------------------

    def stream_of(self, node) -> StreamDef | None:
        """The stream that ``node``'s input names, or None for anything else.

        A CTE of the same name hides the stream, as it hides a table. Without
        a usable stream registry (say, a read-only /tmp) there are no streams,
        and one-time queries must not fail because of it.
        """
        source = node.this
        if (
            not isinstance(source, exp.Table)
            or source.args.get("db")
            or not isinstance(source.this, exp.Identifier)
        ):
            return None
        name = source.name
        if any(cte.alias_or_name.lower() == name.lower() for cte in visible_ctes(node)):
            return None
        return self.named(name, source.this.quoted)

    def named(self, name: str, quoted: bool = False) -> StreamDef | None:
        """The stream called ``name``, or None (also when there is no usable registry)."""
        try:
            definition = self.catalog.get(name)
            if definition is None and not quoted:
                definition = self.catalog.get(name.lower())
        except (OSError, StreamError):
            return None
        return definition

    def rows_reader(self, definition: StreamDef) -> pa.RecordBatchReader:
        """The stream's rows for plain SQL over it, until end of stream.

        Nothing is read (nor the stream claimed) before DuckDB asks for the
        first batch; the archive's history comes first, as for MATCH_RECOGNIZE.
        """
        return pa.RecordBatchReader.from_batches(
            self.schema_of_stream(definition),
            self._recording(
                self._rows(definition, self.executor.cancellation), self.executor.failure
            ),
        )

    def _rows(self, definition: StreamDef, cancel: Cancellation) -> Iterator[pa.RecordBatch]:
        """``cancel`` is the statement's token, taken when it ran, not when it is read."""
        config = self.executor.config
        reader = LiveReader(
            definition,
            on_producer_death=config.on_producer_death,
            cancelled=lambda: cancel.cancelled,
            max_rows=config.batch_size,
        )
        source = LiveSource(reader, self.executor.con, config.batch_size)
        try:
            reader.open()
            yield from source.batches()
        finally:
            source.close()
            reader.close()

    def schema_of_stream(self, definition: StreamDef) -> pa.Schema:
        """The columns of a stream, as its shared-memory ring declares them."""
        ring = Ring.attach(definition.segment)
        try:
            return ring.schema
        finally:
            ring.close()

    def match_reader(self, node, statement: str, definition: StreamDef) -> _MatchReader:
        """Compile ``node`` against the stream's schema; the lazy reader of its matches."""
        config = self.executor.config
        compiled = compile_match(
            node,
            self.schema_of_stream(definition),
            sql=statement,
            con=self.executor.con,
            config=config,
            cache=self.executor.compiled,
            watch=self.executor.watch,
        )
        spec = compiled.spec
        stats: dict = {}  # filled with the input metrics when the query ends
        sliding = Sliding.PAST_LAST_ROW if spec.skip is SkipMode.PAST_LAST_ROW else Sliding.NEXT_ROW
        options = InputOptions.for_pattern(
            spec.pattern,
            config.input_mode,
            config.adaptive_u,
            sliding,
            stats,
            config.adaptive_rule,
            config.adaptive_memory_budget,
        )
        cancel = self.executor.cancellation  # this statement's, even if read later
        failure = self.executor.failure  # likewise

        def new_run(key: tuple):
            return planner.new_partition_matcher(spec, key, config, cancel, live=True)

        # SET workers = N: the partitions' runs live in worker processes (any input mode).
        router = self.executor.workers.stream_router(compiled, config, cancel, new_run, live=True)
        batches = continuous_batches(
            definition,
            spec.partition_by,
            new_run,
            con=self.executor.con,
            batch_rows=config.batch_size,
            cancelled=lambda: cancel.cancelled,
            on_producer_death=config.on_producer_death,
            input_options=options,
            workers=router,
            derive=derive_input(spec),
        )
        project = project_result(spec)
        if project is not None:
            batches = project.batches(batches)
        return _MatchReader(spec.result_schema(), self._recording(batches, failure), stats)

    def _recording(
        self, batches: Iterator[pa.RecordBatch], failure: StatementFailure
    ) -> Generator[pa.RecordBatch]:
        """Keep the first error for the statement (DuckDB only sees a failing stream):
        ``failure`` is the statement's, taken when it ran, not when it is read."""
        try:
            yield from batches
        except Error as err:
            failure.record(err)
            raise

    def direct_result(self, tree, nodes: list, statement: str):
        """A Result that bypasses DuckDB for ``SELECT * FROM stream MATCH_RECOGNIZE (...)``."""
        node = direct_select(tree, nodes)
        if node is None:
            return None
        definition = self.stream_of(node)
        if definition is None:
            return None
        reader = self.match_reader(node, statement, definition)
        # The shell prints its rows as they arrive; the input metrics (Avg/Max Mem,
        # ...) are filled in at the end.
        result = Result(reader, stats=reader.stats, continuous=True)
        result.lag = lambda: stream_lag(definition)
        return result


class _MatchReader(BatchSource):
    """A :class:`~matchsql.results.result.BatchSource` that also carries the input metrics."""

    def __init__(
        self, schema: pa.Schema, batches: Generator[pa.RecordBatch], stats: dict | None = None
    ) -> None:
        super().__init__(schema, batches)
        self.stats = stats

    def close(self) -> None:
        try:
            super().close()
        except ValueError:  # still running in another thread; it ends with its statement
            pass

    def to_reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.schema, self._batches)
