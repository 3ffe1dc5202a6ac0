"""Runs a session's statements: each text split once, each statement classified once
(:mod:`matchsql.session.statement_kinds`) and dispatched by its kind from one table,
:data:`HANDLERS`.

Plain SQL goes to DuckDB verbatim. What needs more is loaded on the first
statement that needs it: MATCH_RECOGNIZE (:mod:`matchsql.session.matching`:
sqlglot, the dialect, the matchers), prepared statements of it
(:mod:`matchsql.session.prepared`), views of it (:mod:`matchsql.session.views`,
:mod:`matchsql.session.view_creation`), streams, continuous queries and worker
processes; so a session of plain SQL starts with DuckDB and little else.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import duckdb

from matchsql.config import Config
from matchsql.errors import (
    CatalogError,
    Error,
    ExecutionError,
    ParseError,
    SemanticError,
    internal_error,
    one_line,
    out_of_memory,
    without_kind,
)
from matchsql.grammar.sqltext import check_text
from matchsql.results.result import LazyReader, RelationSource, Result, table_result
from matchsql.runtime.cancel import Cancellation
from matchsql.session.cleanups import run_all
from matchsql.session.failure import StatementFailure
from matchsql.session.host import Params
from matchsql.session.scope import EMPTY, lookup
from matchsql.session.statement_kinds import (
    READS_TABLES,
    ContinuousDdl,
    Deallocate,
    DefineView,
    Execute,
    ExplainMatch,
    MatchQuery,
    Prepare,
    Query,
    ResetSetting,
    SetSetting,
    ShowSetting,
    ShowStats,
    ShowWorkers,
    Sql,
    Statement,
    StreamDdl,
    classify,
    query,
    replace_settings,
    split,
)
from matchsql.session.stats import stats_table
from matchsql.session.view_catalog import STUB_MESSAGE, definitions, mentions

if TYPE_CHECKING:
    import pyarrow as pa

    from matchsql.engine.compiled_query import CompiledQueries
    from matchsql.execution.workers.session import WorkerSession
    from matchsql.session.continuous_queries import ContinuousQueries
    from matchsql.session.matching import MatchRunner
    from matchsql.session.prepared import PreparedMatches
    from matchsql.session.stream_statements import StreamStatements


#: Statements after which the MATCH_RECOGNIZE views are read from the catalog again, and
#: after which no compiled MATCH_RECOGNIZE is reused (a macro one calls may have changed).
_CHANGES_CATALOG = frozenset(
    {"CREATE", "DROP", "ALTER", "COMMENT", "ATTACH", "DETACH", "USE", "ROLLBACK", "IMPORT"}
)
_MISSING_TABLE = re.compile(r"Table with name (.+?) does not exist!")


def missing_table(exc: duckdb.CatalogException) -> str | None:
    """The table name whose absence ``exc`` reports; None for any other catalog error.

    The exception's type (``duckdb.CatalogException``, caught by type) says that
    a catalog entry is missing; which one only its text says: DuckDB's Python
    exceptions carry nothing but the message (no entry name, no error subtype),
    and asking DuckDB which tables a statement reads (``get_table_names``) would
    also list those that exist, CTEs' names and the tables of a missing function's
    arguments. So the name is read from DuckDB's message (``Table with name X does
    not exist!``); a message that does not match only means that no variable or
    stream stands in for the table, and DuckDB's own error is raised.
    """
    found = _MISSING_TABLE.search(str(exc))
    return None if found is None else found.group(1)


#: Settings that are matchsql's only: DuckDB knows ``threads`` itself.
_OWN_SETTINGS = frozenset(Config.names()) - {"threads"}
_ROW_STATEMENTS = {
    duckdb.StatementType.SELECT,
    duckdb.StatementType.EXPLAIN,
    duckdb.StatementType.PRAGMA,
    duckdb.StatementType.CALL,
    duckdb.StatementType.EXECUTE,  # of a prepared SELECT (others give a Count row)
}


class Executor:
    """Statement runner bound to one DuckDB connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection, config: Config) -> None:
        self.con = con
        self.config = config
        # The running statement's first error inside its Arrow readers (DuckDB only
        # sees a failing stream): new for each statement, as its cancellation is.
        self.failure = StatementFailure()
        self._running = ""  # the last statement's text, if it has a MATCH_RECOGNIZE
        # DuckDB allows one open result per connection: a new statement closes
        # the previous statement's unfinished Result, as DuckDB's own API does.
        self._open_result: Result | None = None
        # The running statement's cancellation: new for each statement (an old
        # statement's leftover work keeps its own token), set by interrupt().
        self.cancellation = Cancellation()
        # Cursors running MATCH_RECOGNIZE inputs: interrupt() stops their sorts too.
        self.cursors: set[duckdb.DuckDBPyConnection] = set()
        # The caller's variables while a statement runs (replacement scans), and the
        # names this statement registered for them.
        self.scope: Mapping[str, Any] = EMPTY
        self._scans: set[str] = set()
        # The input metrics of this connection's last query over a stream (SHOW STATS).
        self.last_stats: dict | None = None
        # MATCH_RECOGNIZE views by lower-cased name (None: read the catalog again).
        self._view_cache: dict[str, str] | None = None
        self._matching: MatchRunner | None = None
        self._prepared: PreparedMatches | None = None
        self._streams: StreamStatements | None = None
        self._continuous: ContinuousQueries | None = None
        self._workers: WorkerSession | None = None
        self._compiled: CompiledQueries | None = None
        # While run(as_relation=True) runs: plain statements' rows stay a DuckDB relation.
        self._as_relation = False

    # -- what is loaded on first use -------------------------------------------------------

    @property
    def matching(self) -> MatchRunner:
        """MATCH_RECOGNIZE statements (see matchsql.session.matching)."""
        if self._matching is None:
            # sqlglot, the dialect and the matchers: loaded on first use (start-up).
            from matchsql.session.matching import MatchRunner

            self._matching = MatchRunner(self)
        return self._matching

    @property
    def prepared(self) -> PreparedMatches:
        """Prepared statements with a MATCH_RECOGNIZE (see matchsql.session.prepared)."""
        if self._prepared is None:
            # sqlglot and the dialect (views, arguments): loaded on the first PREPARE (start-up).
            from matchsql.session.prepared import PreparedMatches

            self._prepared = PreparedMatches(self)
        return self._prepared

    @property
    def streams(self) -> StreamStatements:
        """Live-stream statements and inputs (see matchsql.session.stream_statements)."""
        if self._streams is None:
            # The stream registry and the continuous router: loaded on first use (start-up).
            from matchsql.session.stream_statements import StreamStatements

            self._streams = StreamStatements(self)
        return self._streams

    @property
    def continuous(self) -> ContinuousQueries:
        """Named continuous queries (see matchsql.session.continuous_queries)."""
        if self._continuous is None:
            # The checkpointing machinery and the matchers: loaded on first use (start-up).
            from matchsql.session.continuous_queries import ContinuousQueries

            self._continuous = ContinuousQueries(self)
        return self._continuous

    @property
    def workers(self) -> WorkerSession:
        """Worker processes of ``SET workers = N`` (matchsql/execution/workers/)."""
        if self._workers is None:
            # The worker pool and its router: loaded on first use (start-up).
            from matchsql.execution.workers.session import WorkerSession

            self._workers = WorkerSession()
        return self._workers

    @property
    def compiled(self) -> CompiledQueries:
        """The MATCH_RECOGNIZEs this connection compiled (see matchsql.engine.compiled_query)."""
        if self._compiled is None:
            # The analysis and the planner (numba): loaded with the first MATCH_RECOGNIZE.
            from matchsql.engine.compiled_query import CompiledQueries

            self._compiled = CompiledQueries()
        return self._compiled

    def close(self) -> None:
        """Stop what outlives statements: named continuous queries (a last checkpoint)
        and the worker pool. Only what was started is touched, so closing a connection
        that never used them loads none of their machinery."""
        if self._continuous is not None:
            self._continuous.close()
        if self._workers is not None:
            self._workers.close()

    # -- named continuous queries of the Python API --------------------------------------------
    # The same as their statements (see matchsql.session.continuous_queries); the API asks the
    # executor, not the part of it that runs them.

    def resume_interrupted_continuous(self) -> list[str]:
        """Resume the continuous queries whose process died (on connect); their names."""
        return self.continuous.resume_interrupted()

    def create_continuous(
        self, name: str, body: str, options: dict[str, float], if_not_exists: bool = False
    ) -> None:
        """``CREATE CONTINUOUS QUERY name WITH (options) AS body``."""
        self.continuous.create_from(name, body, options, if_not_exists)

    def resume_continuous(self, name: str) -> None:
        """``RESUME CONTINUOUS QUERY name``."""
        self.continuous.resume(name)

    def stop_continuous(self, name: str) -> None:
        """``STOP CONTINUOUS QUERY name``."""
        self.continuous.stop(name)

    def drop_continuous(self, name: str, *, if_exists: bool = False) -> None:
        """``DROP CONTINUOUS QUERY [IF EXISTS] name``."""
        self.continuous.drop(name, if_exists=if_exists)

    # -- statements ---------------------------------------------------------------------

    def run(
        self,
        text: str,
        params: Params = None,
        scope: Mapping[str, Any] = EMPTY,
        *,
        as_relation: bool = False,
    ):
        """Run every statement of ``text``; return the last statement's Result (or None).

        ``params`` are the values of the parameters (``?``, ``$1``, ``$name``)
        of a single statement; ``scope`` the caller's variables, for tables
        named by a Python variable (DuckDB's replacement scans). The text is
        split once; each statement's errors are located in the whole text here.
        With ``as_relation`` the Result of a plain statement holds its DuckDB
        relation, run when first read (see Result.take_relation), as DuckDB's
        ``con.sql()`` does: its errors come then.
        """
        check_text(text)
        pieces = split(text, self.con)
        if not pieces:
            return None
        if params is not None and len(pieces) != 1:
            raise Error(f"parameters need a single statement, got {len(pieces)}")
        self.scope = scope
        self._as_relation = as_relation
        result = None
        try:
            for piece in pieces:
                self._running = ""
                try:
                    result = self.dispatch(classify(piece), params)
                except Error as err:
                    raise _relocate(self._located(err), text, piece.offset) from None
                except MemoryError:
                    raise out_of_memory() from None
                except duckdb.Error as exc:
                    # A relation's rows read while the statement is set up (its schema,
                    # as_relation): a matcher's failure comes wrapped in DuckDB's error.
                    raise _relocate(self.failure_or(exc), text, piece.offset) from None
                except Exception as exc:  # a bug inside the engine: a one-line error
                    raise internal_error(exc) from exc
        finally:
            self._as_relation = False
            self.scope = EMPTY
            self._scans = set()
        if isinstance(result, Result) and result.stats is not None:
            self.last_stats = result.stats  # a continuous query's: SHOW STATS shows it
        return result

    def dispatch(self, statement: Statement, params: Params = None):
        """Run one statement by its kind (:data:`HANDLERS`); its Result is the open one."""
        if self._open_result is not None:
            self._open_result.close()
            self._open_result = None
        self.cancellation = Cancellation()
        self.failure = StatementFailure()
        if isinstance(statement, Query):
            statement = self._resolve(statement)
        result = HANDLERS[type(statement)](self, statement, params)
        self._open_result = result if isinstance(result, Result) else None
        return result

    def _resolve(self, statement: Query) -> Query:
        """``statement`` with matchsql's settings (``current_setting``) and its
        MATCH_RECOGNIZE views put in, classified again if that changed its text."""
        text = statement.text
        if statement.expanded:
            return statement
        if "current_setting" in text.lower():
            text = replace_settings(text, {n: getattr(self.config, n) for n in _OWN_SETTINGS})
        views = self._views(text)
        words = statement.words
        if words[:1] and words[0] in _CHANGES_CATALOG:
            self._view_cache = None
            if self._compiled is not None:
                self._compiled.clear()
        if views and (not words or words[0] in READS_TABLES) and mentions(text, views):
            # EXPLAIN [ANALYZE] stays in front: only the statement it explains is expanded.
            head = statement.head
            # sqlglot and the dialect: loaded by the first statement that names such a
            # view (start-up).
            from matchsql.session.views import expand

            text = text[:head] + expand(text[head:], views)
        if text == statement.text:
            return statement
        return query(text, statement.offset, expanded=True)

    def _views(self, statement: str) -> dict[str, str]:
        """The MATCH_RECOGNIZE views, read from the catalog once and again whenever a
        statement names one (so that one dropped or replaced elsewhere is not expanded)
        or changes the catalog; see matchsql.session.views."""
        if self._view_cache is None or mentions(statement, self._view_cache):
            self._view_cache = definitions(self.con)
        return self._view_cache

    # -- the handlers, one per statement kind ------------------------------------------------

    def _sql(self, statement: Sql, params: Params):
        try:
            return self.run_duckdb(statement.text, [], params, kind=statement.type)
        except Error as err:
            # A MATCH_RECOGNIZE view that another connection created since this
            # one last read the catalog: read it again and expand the view.
            if statement.expanded or STUB_MESSAGE not in err.message:
                raise
            self._view_cache = None
            again = self._resolve(statement)
            if again is statement:
                raise
            return HANDLERS[type(again)](self, again, params)

    def _match(self, statement: MatchQuery, params: Params):
        self._running = statement.text
        result = self.matching.run(statement, params)
        if (
            isinstance(result, Result)
            and statement.match
            and not isinstance(statement, ExplainMatch)
        ):
            # Parsed by the matchsql dialect, which the statement has loaded (start-up).
            from matchsql.session.query_shape import partition_columns

            result.partition_by = partition_columns(statement.text, result.columns)
        return result

    def _stream_ddl(self, statement: StreamDdl, params: Params):
        return self.streams.run_ddl(statement.node, statement.text)

    def _continuous_ddl(self, statement: ContinuousDdl, params: Params):
        return self.continuous.run(statement.node, statement.text)

    def _show_stats(self, statement: ShowStats, params: Params) -> Result:
        return table_result(stats_table(self.last_stats))

    def _show_workers(self, statement: ShowWorkers, params: Params) -> Result:
        return table_result(self.workers.table())

    def _set_setting(self, statement: SetSetting, params: Params):
        self.config.set(statement.name, statement.value)
        if statement.name == "threads":  # DuckDB's own setting of that name too
            return self.run_duckdb(statement.text, [])
        return None

    def _show_setting(self, statement: ShowSetting, params: Params) -> Result:
        import pyarrow as pa  # pyarrow (with numpy): loaded when rows are read as Arrow (start-up)

        value = getattr(self.config, statement.name)
        return table_result(pa.table({statement.name: pa.array([str(value)], pa.string())}))

    def _reset_setting(self, statement: ResetSetting, params: Params):
        self.config.set(statement.name, getattr(Config(), statement.name))
        if statement.name == "threads":
            return self.run_duckdb(statement.text, [])
        return None

    def _prepare(self, statement: Prepare, params: Params):
        """PREPARE: matchsql keeps a statement with a MATCH_RECOGNIZE (as text, its
        parameters bound by EXECUTE); DuckDB prepares any other."""
        if self.prepared.prepare(statement, self._views(statement.body)):
            return None
        return self.run_duckdb(statement.text, [], params)

    def _execute(self, statement: Execute, params: Params):
        if self._prepared is not None and self._prepared.prepared(statement.name):
            return self._prepared.execute(
                statement.name, statement.arguments, statement.text, statement.arguments_offset
            )
        return self.run_duckdb(statement.text, [], params)

    def _deallocate(self, statement: Deallocate, params: Params):
        if self._prepared is not None and self._prepared.deallocate(statement.name):
            return None
        return self.run_duckdb(statement.text, [], params)

    def _define_view(self, statement: DefineView, params: Params):
        views = self._views(statement.text)
        try:
            # sqlglot and the dialect: loaded by the first CREATE VIEW (start-up).
            from matchsql.session.view_creation import define_match_view

            return define_match_view(self, statement, views)
        finally:
            self._view_cache = None

    # -- DuckDB -------------------------------------------------------------------------------

    def run_duckdb(
        self,
        sql: str,
        cleanups: list[Callable[[], None]],
        params: Params = None,
        live: dict[str, pa.RecordBatchReader] | None = None,
        stats: dict | None = None,
        kind: duckdb.StatementType | None = None,
        before: Callable[[], None] | None = None,
    ):
        """Run ``sql`` in DuckDB: rows stream lazily into a Result; other statements run now.

        ``kind`` is DuckDB's statement type where the split already knows it.
        A table that DuckDB cannot find may be a data frame in a variable of
        the caller (registered for the statement, as DuckDB's replacement scan
        would, which only looks at its direct caller) or a live stream (its
        rows until end of stream). ``live`` are the readers registered for the
        statement that wait on a live stream: a statement reading them starts
        when its rows are first read (see _deferred), not in ``con.sql()``.
        ``before``, when given, runs just before DuckDB starts the statement (a row
        statement then starts on its first read, as with ``live``).
        """
        failure = self.failure  # this statement's, which its readers took too
        live = dict(live or {})
        while True:
            try:
                if kind is None:
                    statements = self.con.extract_statements(sql)
                    kind = statements[0].type if len(statements) == 1 else None
                if kind not in _ROW_STATEMENTS:
                    if before is not None:
                        before()
                    self.con.execute(sql, params)
                    run_all(cleanups)
                    if failure.error is not None:
                        raise self._located(failure.error)
                    return None
                if live or before is not None:
                    return self._deferred(sql, params, live, cleanups, stats, before, failure)
                relation = self.con.sql(sql, params=params)
                types = relation.types
                if self._as_relation:
                    reader = RelationSource(relation, self.config.batch_size)
                else:
                    reader = relation.to_arrow_reader(self.config.batch_size)
                break
            except duckdb.CatalogException as exc:
                if self._register_missing(exc, cleanups, live):
                    continue
                run_all(cleanups)
                raise self.failure_or(exc, failure) from None
            except duckdb.Error as exc:
                run_all(cleanups)
                raise self.failure_or(exc, failure) from None
        return Result(reader, on_close=cleanups, translate=self.translator(failure), types=types)

    def _deferred(
        self,
        sql: str,
        params: Params,
        live: dict[str, pa.RecordBatchReader],
        cleanups: list[Callable[[], None]],
        stats: dict | None,
        before: Callable[[], None] | None,
        failure: StatementFailure,
    ) -> Result:
        """A Result whose statement runs on its first read (after ``before``): its columns
        come from running it over empty stand-ins of the ``live`` readers (a row statement
        changes nothing)."""
        for name, reader in live.items():
            self.con.register(name, reader.schema.empty_table())
        stand_in = self.con.sql(sql, params=params)
        types = stand_in.types
        schema = stand_in.to_arrow_table().schema
        for name, reader in live.items():
            self.con.register(name, reader)
        rows = self.config.batch_size

        def start() -> pa.RecordBatchReader:
            if before is not None:
                before()
            return self.con.sql(sql, params=params).to_arrow_reader(rows)

        return Result(
            LazyReader(schema, start),
            on_close=cleanups,
            translate=self.translator(failure),
            stats=stats,
            types=types,
        )

    def _register_missing(
        self,
        exc: duckdb.CatalogException,
        cleanups: list[Callable[[], None]],
        live: dict[str, pa.RecordBatchReader],
    ) -> bool:
        """Register what the table name that ``exc`` misses stands for: the caller's variable,
        else a live stream (added to ``live``); False if neither."""
        name = missing_table(exc)
        if name is None:
            return False
        if name in self._scans or name in live:
            return False
        value = lookup(self.scope, name)
        if value is not None:
            self._scans.add(name)
        else:
            definition = self.streams.named(name)
            if definition is None:
                return False
            value = live[name] = self.streams.rows_reader(definition)
        self.con.register(name, value)
        cleanups.append(lambda: self.unregister(name))
        return True

    def unregister(self, view: str) -> None:
        try:
            self.con.unregister(view)
        except duckdb.Error:
            pass

    # -- errors -------------------------------------------------------------------------------

    def failure_or(
        self,
        exc: duckdb.Error | Error,
        failure: StatementFailure | None = None,
        running: str | None = None,
    ) -> Error:
        """The first reader error of the statement whose ``failure`` it is (the running
        statement's by default), else ``exc`` as a matchsql error; located in ``running``
        (by default the text of the running statement, see :meth:`_located`)."""
        failure = self.failure if failure is None else failure
        if failure.error is not None:
            return self._located(failure.error, running)
        return self._located(exc, running) if isinstance(exc, Error) else self.translate(exc)

    def translator(self, failure: StatementFailure) -> Callable[[duckdb.Error | Error], Error]:
        """The ``translate`` of a Result of the running statement: read later (after the
        next statement began, say), its errors are still its own statement's, located in
        its own text."""
        running = self._running
        return lambda exc: self.failure_or(exc, failure, running)

    def _located(self, err: Error, running: str | None = None) -> Error:
        """``err`` pointed at the DEFINE or MEASURES expression of the statement that
        raised it (``running``; by default the statement last run), where it has no position
        of its own (a division by zero, a value that does not compare: the matchers' values
        know no positions)."""
        text = self._running if running is None else running
        if err.line is None and isinstance(err, ExecutionError) and text:
            # Only a MATCH_RECOGNIZE statement sets _running: the matchsql dialect that
            # parses it is loaded already (start-up).
            from matchsql.session.query_shape import runtime_offset

            offset = runtime_offset(err.message, text)
            if offset is not None:
                err.located(text, offset)
        return err

    def watch(self, cursor: duckdb.DuckDBPyConnection) -> Callable[[], None]:
        """Let :meth:`interrupt` stop the queries of ``cursor`` (one the statement made
        for work of its own: analysis, a subquery's value) until the returned function
        is called. That function raises the interrupt error when the statement was
        interrupted meanwhile: what the cursor's work made of an interrupted query (a
        "subquery failed: Interrupted!", an expression taken for one DuckDB cannot
        evaluate) means nothing then. An interrupt that came before stops the statement
        here, as no interrupt of the cursor would."""
        token = self.cancellation
        token.check()
        self.cursors.add(cursor)

        def unwatch() -> None:
            self.cursors.discard(cursor)
            token.check()

        return unwatch

    def interrupt(self) -> None:
        self.cancellation.cancel()
        for cursor in list(self.cursors):
            try:
                cursor.interrupt()
            except duckdb.Error:
                pass
        self.con.interrupt()

    @staticmethod
    def translate(exc: duckdb.Error) -> Error:
        """Turn a DuckDB exception into the matching matchsql error, keeping its message."""
        message = str(exc)
        kind = {
            duckdb.ParserException: ParseError,
            duckdb.CatalogException: CatalogError,
            duckdb.BinderException: SemanticError,
        }
        for duck_type, ours in kind.items():
            if isinstance(exc, duck_type):
                return ours(without_kind(message))
        if isinstance(exc, duckdb.InterruptException):
            return ExecutionError("statement interrupted")
        return ExecutionError(without_kind(one_line(message)))


#: The one dispatch table: statement kind -> its handler.
HANDLERS: dict[type[Statement], Callable[[Executor, Any, Params], Any]] = {
    Sql: Executor._sql,
    MatchQuery: Executor._match,
    ExplainMatch: Executor._match,
    StreamDdl: Executor._stream_ddl,
    ContinuousDdl: Executor._continuous_ddl,
    ShowStats: Executor._show_stats,
    ShowWorkers: Executor._show_workers,
    SetSetting: Executor._set_setting,
    ShowSetting: Executor._show_setting,
    ResetSetting: Executor._reset_setting,
    Prepare: Executor._prepare,
    Execute: Executor._execute,
    Deallocate: Executor._deallocate,
    DefineView: Executor._define_view,
}


def _relocate(err: Error, text: str, offset: int) -> Error:
    """Re-anchor an error located in one statement onto the whole input text."""
    if err.line is None or err.sql is None or offset == 0 and err.sql == text:
        return err
    lines = err.sql.splitlines(keepends=True)
    local = sum(len(line) for line in lines[: err.line - 1]) + (err.column or 1) - 1
    return type(err)(err.message, sql=text, offset=offset + local)
