"""Runs statements: plain SQL straight to DuckDB, MATCH_RECOGNIZE through the matchers.

For each ``MATCH_RECOGNIZE`` table factor (innermost first) DuckDB computes
the input relation sorted by the partition and order keys and streams it out
as Arrow batches; the router feeds them to one matcher run per partition; the
matches stream back into DuckDB as a registered Arrow reader that replaces
the table factor, and DuckDB runs the rest of the statement. Nothing is
collected in Python lists: memory is bounded by the batch size and the
matchers' live windows.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import duckdb
import pyarrow as pa
from sqlglot import exp

from matchsql import stats_statement, window_measures
from matchsql.cancel import Cancellation
from matchsql.config import Config
from matchsql.deep import run_deep
from matchsql.errors import (
    CatalogError,
    Error,
    ExecutionError,
    LimitExceededError,
    ParseError,
    SemanticError,
    internal_error,
    one_line,
    without_kind,
)
from matchsql.fsm.program import check_pattern_size
from matchsql.grammar import split_statements
from matchsql.grammar.continuous_ddl import is_continuous_statement
from matchsql.grammar.sqltext import check_text
from matchsql.grammar.stream_ddl import is_stream_statement
from matchsql.grammar.subqueries import visible_ctes
from matchsql.plan.spec import MatchSpec
from matchsql.profile import MatchProfile
from matchsql.query_shape import direct_select, offset_of, plain_limit, require_columns
from matchsql.result import BatchSource, LazyReader, Result, table_result
from matchsql.scope import EMPTY, lookup
from matchsql.statement_text import (
    after_words,
    bind_texts,
    bind_values,
    create_view,
    leading_words,
    replace_settings,
    split_arguments,
)
from matchsql.views import STUB_MESSAGE, create_stub, definitions, expand, mentions, view_query
from matchsql.workers.scatter import ScatterPlan, scatter_plan
from matchsql.workers.session import WorkerSession, is_show_workers

Params = Sequence[Any] | Mapping[str, Any] | None

_MATCH_RECOGNIZE = re.compile(r"\bmatch_recognize\b", re.IGNORECASE)
_SET = re.compile(r"^\s*set\s+(?:session\s+)?(\w+)\s*(?:=|\bto\b)\s*(.+?)\s*$",
                  re.IGNORECASE | re.DOTALL)
_view_numbers = itertools.count()
_EXPLAIN = re.compile(r"^\s*explain\b(?!\s+analyze\b)", re.IGNORECASE)
_VIEW = re.compile(r"__matchsql_matches_\d+")
_POSITION = "__matchsql_input_position"
#: Statements whose table references a MATCH_RECOGNIZE view expands in; DESCRIBE and
#: SHOW read the view's columns from DuckDB, others (PRAGMA, ATTACH, ...) name no query.
_READS_TABLES = frozenset({"SELECT", "WITH", "FROM", "VALUES", "TABLE", "PIVOT", "UNPIVOT",
                           "INSERT", "CREATE", "UPDATE", "DELETE", "COPY", "EXPLAIN"})
#: Statements after which the MATCH_RECOGNIZE views are read from the catalog again.
_CHANGES_CATALOG = [[w] for w in ("CREATE", "DROP", "ALTER", "COMMENT", "ATTACH", "DETACH",
                                  "USE", "ROLLBACK", "IMPORT")]
_MISSING_TABLE = re.compile(r'Table with name (.+?) does not exist!')
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
        # The first matcher failure of the running statement: DuckDB only sees
        # a failing Arrow stream, so the original error is kept here.
        self._failure: list[Error] = []
        # DuckDB allows one open result per connection: a new statement closes
        # the previous statement's unfinished Result, as DuckDB's own API does.
        self._open_result = None
        self._streams = None
        self._continuous = None
        # The running statement's cancellation: new for each statement (an old
        # statement's leftover work keeps its own token), set by interrupt().
        self._cancel = Cancellation()
        # Cursors running MATCH_RECOGNIZE inputs: interrupt() stops their sorts too.
        self._cursors: set[duckdb.DuckDBPyConnection] = set()
        # The caller's variables while a statement is prepared (replacement scans),
        # and the objects its table names stand for (see _external_tables).
        self._scope: Mapping[str, Any] = EMPTY
        self._scans: dict[str, tuple[Any, bool]] = {}
        # The input metrics of the running statement's first MATCH_RECOGNIZE over a
        # stream (None while there is none): its Result's stats.
        self._live_stats: dict | None = None
        # The input metrics of this connection's last query over a stream (SHOW STATS).
        self.last_stats: dict | None = None
        # MATCH_RECOGNIZE views by lower-cased name (None: read the catalog again).
        self._view_cache: dict[str, str] | None = None
        # PREPAREd statements with a MATCH_RECOGNIZE: lower-cased name -> text.
        self._prepared: dict[str, str] = {}
        # EXPLAIN ANALYZE: the profile of each MATCH_RECOGNIZE, by its offset in the text.
        self._profiles: dict[int | None, MatchProfile] | None = None
        # Worker processes of ``SET workers = N`` (matchsql/workers/), started on first use.
        self.workers = WorkerSession()

    @property
    def streams(self):
        """Live-stream hooks (DDL, continuous MATCH_RECOGNIZE); see matchsql.stream_statements."""
        if self._streams is None:
            from matchsql.stream_statements import StreamStatements

            self._streams = StreamStatements(self)
        return self._streams

    @property
    def continuous(self):
        """Named continuous queries (CREATE/RESUME/STOP/DROP/SHOW); see matchsql.continuous."""
        if self._continuous is None:
            from matchsql.continuous import ContinuousQueries

            self._continuous = ContinuousQueries(self)
        return self._continuous

    def close(self) -> None:
        """Stop what outlives statements: named continuous queries (a last checkpoint)
        and the worker pool. Only what was started is touched, so closing a connection
        that never used them loads none of their machinery."""
        if self._continuous is not None:
            self._continuous.close()
        self.workers.close()

    @property
    def cancellation(self) -> Cancellation:
        """The running (or last) statement's cancellation token."""
        return self._cancel

    # -- statements ---------------------------------------------------------------

    def run(self, text: str, params: Params = None, scope: Mapping[str, Any] = EMPTY):
        """Run every statement of ``text``; return the last statement's Result (or None).

        ``params`` are the values of the parameters (``?``, ``$1``, ``$name``)
        of a single statement; ``scope`` the caller's variables, for tables
        named by a Python variable (DuckDB's replacement scans).
        """
        check_text(text)
        statements = split_statements(text)
        if not statements:
            return None
        if params is not None and len(statements) != 1:
            raise Error(f"parameters need a single statement, got {len(statements)}")
        self._scope = scope
        result = None
        try:
            for statement, offset in statements:
                try:
                    result = self._run_statement(statement, params)
                except Error as err:
                    raise _relocate(err, text, offset) from None
                except MemoryError:
                    raise _out_of_memory() from None
                except Exception as exc:  # a bug inside the engine: a one-line error
                    raise internal_error(exc) from exc
        finally:
            self._scope = EMPTY
            self._scans = {}
        return result

    def _run_statement(self, statement: str, params: Params = None, retried: bool = False):
        if self._open_result is not None:
            self._open_result.close()
            self._open_result = None
        self._cancel = Cancellation()
        if stats_statement.is_show_stats(statement):
            return stats_statement.show_stats(self)
        if is_show_workers(statement):
            return table_result(self.workers.table())
        words = leading_words(statement, 3)
        setting = self._setting_statement(statement, words)
        if setting is not False:
            return setting
        if is_stream_statement(statement):
            return self.streams.run_ddl(statement)
        if is_continuous_statement(statement):
            return self.continuous.run(statement)
        if "current_setting" in statement.lower():
            statement = replace_settings(statement, {n: getattr(self.config, n)
                                                     for n in _OWN_SETTINGS})
        if words[:1] in (["PREPARE"], ["EXECUTE"], ["DEALLOCATE"]):
            handled = self._prepared_statement(statement, words)
            if handled is not False:
                return handled
        written = statement
        views = self._views(statement)
        if words[:1] in _CHANGES_CATALOG:
            self._view_cache = None
        create = create_view(statement)
        if create is not None:
            query = expand(create.query, views)
            if _MATCH_RECOGNIZE.search(query) or window_measures.mentions(query):
                return self._create_view(create, query, statement)
        elif views and (not words or words[0] in _READS_TABLES):
            # EXPLAIN [ANALYZE] stays in front: only the statement it explains is parsed.
            head = 0 if words[:1] != ["EXPLAIN"] else \
                after_words(statement, 2 if words[1:2] == ["ANALYZE"] else 1)
            statement = statement[:head] + expand(statement[head:], views)
        if window_measures.mentions(statement) and (not words or words[0] in _READS_TABLES):
            handled = self._pattern_windows(statement, words, params)
            if handled is not False:
                return handled
        if not _MATCH_RECOGNIZE.search(statement):
            try:
                return self._run_duckdb(statement, [], params)
            except Error as err:
                # A MATCH_RECOGNIZE view that another connection created since this
                # one last read the catalog: read it again and expand the view.
                if retried or STUB_MESSAGE not in err.message:
                    raise
                self._view_cache = None
                return self._run_statement(written, params, retried=True)
        if params is not None:
            statement = bind_values(statement, params)
        # Parse and analysis recurse per nesting level: run_deep gives them room.
        if words[:2] == ["EXPLAIN", "ANALYZE"]:
            return run_deep(lambda: self._explain_analyze(statement, after_words(statement, 2)))
        explained = _EXPLAIN.match(statement)
        if explained:
            return run_deep(lambda: self._explain_match_recognize(statement, explained.end()))
        return run_deep(lambda: self._run_match_recognize(statement))

    def _pattern_windows(self, statement: str, words: list[str], params: Params):
        """A statement with a row pattern window (see matchsql.window_measures): its Result
        or EXPLAIN; False when it has no such window after all."""
        if params is not None:
            statement = bind_values(statement, params)
        windows = window_measures.WindowMeasures(self)
        if words[:1] != ["EXPLAIN"]:
            return run_deep(lambda: windows.run(statement))
        analyze = words[1:2] == ["ANALYZE"]
        head = after_words(statement, 2 if analyze else 1)
        query = " " * head + statement[head:]
        lines = run_deep(lambda: windows.explain_lines(query))
        if not lines:
            return False
        if analyze:  # run it to its end: the statement's rows and time
            started = time.perf_counter()
            result = run_deep(lambda: windows.run(query))
            rows = 0
            if result:
                try:
                    rows = sum(b.num_rows for b in result.fetch_batches())
                finally:
                    result.close()
            elapsed = time.perf_counter() - started
            lines += ["-- statement", f"analyze: rows {rows:,}",
                      f"analyze: total {elapsed * 1000:.3f} ms"]
        self._open_result = table_result(pa.table({"explain": pa.array(lines, pa.string())}))
        return self._open_result

    def _views(self, statement: str) -> dict[str, str]:
        """The MATCH_RECOGNIZE views, read from the catalog once and again whenever a
        statement names one (so that one dropped or replaced elsewhere is not expanded)
        or changes the catalog; see matchsql.views."""
        if self._view_cache is None or mentions(statement, self._view_cache):
            self._view_cache = definitions(self.con)
        return self._view_cache

    # -- settings -----------------------------------------------------------------

    def _setting_statement(self, statement: str, words: list[str]):
        """SET, SHOW and RESET of a matchsql setting; False for any other statement."""
        setting = _SET.match(statement)
        if setting and setting.group(1).lower() in Config.names():
            self.config.set(setting.group(1), _unquote(setting.group(2)))
            if setting.group(1).lower() == "threads":  # DuckDB's own setting of that name too
                return self._run_duckdb(statement, [])
            return None
        if words[:1] not in (["SHOW"], ["RESET"]):
            return False
        name = _setting_name(statement, words)
        if name is None:
            return False
        if words[0] == "SHOW":
            value = getattr(self.config, name)
            return table_result(pa.table({name: pa.array([str(value)], pa.string())}))
        self.config.set(name, getattr(Config(), name))
        if name == "threads":
            return self._run_duckdb(statement, [])
        return None

    # -- prepared statements ------------------------------------------------------

    def _prepared_statement(self, statement: str, words: list[str]):
        """PREPARE / EXECUTE / DEALLOCATE of a statement with a MATCH_RECOGNIZE (kept
        here as text, its parameters bound as literals by EXECUTE); False for one that
        DuckDB prepares itself."""
        kind = words[0]
        if kind == "PREPARE":
            if len(words) < 3 or words[2] != "AS":
                return False
            body = statement[after_words(statement, 3):]
            expanded = expand(body, self._views(body))
            self._prepared.pop(words[1].lower(), None)
            if not _MATCH_RECOGNIZE.search(expanded) and not window_measures.mentions(expanded):
                return False
            self._prepared[words[1].lower()] = " " * after_words(statement, 3) + expanded
            return None
        if kind == "DEALLOCATE":
            name = words[2] if words[1:2] == ["PREPARE"] and len(words) > 2 else words[1:2]
            name = name[0] if isinstance(name, list) and name else name
            if isinstance(name, str) and self._prepared.pop(name.lower(), None) is not None:
                return None
            return False
        if len(words) < 2 or words[1].lower() not in self._prepared:
            return False
        stored = self._prepared[words[1].lower()]
        rest = statement[after_words(statement, 2):].strip()
        if rest and not (rest.startswith("(") and rest.endswith(")")):
            raise ParseError("EXECUTE takes its values in parentheses: EXECUTE name(v1, v2)",
                             sql=statement, offset=after_words(statement, 2))
        values = split_arguments(rest[1:-1]) if rest else []
        return self._run_statement(bind_texts(stored, values))

    # -- views --------------------------------------------------------------------

    def _create_view(self, create, query: str, statement: str):
        """CREATE VIEW of a query with a MATCH_RECOGNIZE: checked by preparing it (not
        reading it), then stored in the database (see matchsql.views)."""
        check = self._run_statement(" " * create.query_offset + query)
        try:
            schema = check.schema
        finally:
            check.close()
            self._open_result = None
        try:
            create_stub(self.con, create, schema, view_query(create))
        except duckdb.Error as exc:
            raise self.translate(exc) from None
        finally:
            self._view_cache = None
        return None

    def _run_duckdb(self, sql: str, cleanups: list[Callable[[], None]], params: Params = None,
                    live: dict[str, pa.RecordBatchReader] | None = None,
                    stats: dict | None = None):
        """Run ``sql`` in DuckDB: rows stream lazily into a Result; other statements run now.

        A table that DuckDB cannot find may be a data frame in a variable of
        the caller (registered for the statement, as DuckDB's replacement scan
        would, which only looks at its direct caller) or a live stream (its
        rows until end of stream). ``live`` are the readers registered for the
        statement that wait on a live stream: a statement reading them starts
        when its rows are first read (see _deferred), not in ``con.sql()``.
        """
        self._failure.clear()
        live = dict(live or {})
        while True:
            try:
                statements = self.con.extract_statements(sql)
                if len(statements) != 1 or statements[0].type not in _ROW_STATEMENTS:
                    self.con.execute(sql, params)
                    _run_all(cleanups)
                    self._raise_failure()
                    return None
                if live:
                    return self._deferred(sql, params, live, cleanups, stats)
                reader = self.con.sql(sql, params=params).to_arrow_reader(self.config.batch_size)
                break
            except duckdb.CatalogException as exc:
                if self._register_missing(exc, cleanups, live):
                    continue
                _run_all(cleanups)
                raise self._failure_or(exc) from None
            except duckdb.Error as exc:
                _run_all(cleanups)
                raise self._failure_or(exc) from None
        self._open_result = Result(reader, on_close=cleanups, translate=self._failure_or)
        return self._open_result

    def _deferred(self, sql: str, params: Params, live: dict[str, pa.RecordBatchReader],
                  cleanups: list[Callable[[], None]], stats: dict | None) -> Result:
        """A Result whose statement runs on its first read: its columns come from running
        it over empty stand-ins of the ``live`` readers (a row statement changes nothing)."""
        for name, reader in live.items():
            self.con.register(name, reader.schema.empty_table())
        schema = self.con.sql(sql, params=params).to_arrow_table().schema
        for name, reader in live.items():
            self.con.register(name, reader)
        rows = self.config.batch_size

        def start() -> pa.RecordBatchReader:
            return self.con.sql(sql, params=params).to_arrow_reader(rows)

        self._open_result = Result(LazyReader(schema, start), on_close=cleanups,
                                   translate=self._failure_or, stats=stats)
        return self._open_result

    def _register_missing(self, exc: duckdb.CatalogException, cleanups: list[Callable[[], None]],
                          live: dict[str, pa.RecordBatchReader]) -> bool:
        """Register what the table name that ``exc`` misses stands for: the caller's variable,
        else a live stream (added to ``live``); False if neither."""
        missing = _MISSING_TABLE.search(str(exc))
        if missing is None:
            return False
        name = missing.group(1)
        if name in self._scans or name in live:
            return False
        value = lookup(self._scope, name)
        if value is not None:
            self._scans[name] = (value, True)
        else:
            definition = self.streams.named(name)
            if definition is None:
                return False
            value = live[name] = self.streams.rows_reader(definition)
        self.con.register(name, value)
        cleanups.append(lambda: self._unregister(name))
        return True

    def _external_tables(self, tree, nodes: list) -> dict[str, tuple[Any, bool]]:
        """What the statement's unqualified table names stand for when they are not in
        the database: the caller's data frames, and this connection's temporary tables
        and registered objects, which the cursors that run MATCH_RECOGNIZE inputs do
        not see (read into Arrow tables; only those the inputs name). Each with whether
        the statement's own connection needs it too (the caller's variables)."""
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        names = {t.name for t in tree.find_all(exp.Table)
                 if not t.args.get("db") and isinstance(t.this, exp.Identifier)
                 and t.name.lower() not in ctes and not t.name.startswith("__matchsql_")}
        if not names:
            return {}
        inputs = {t.name.lower() for node in nodes for t in node.this.find_all(exp.Table)}
        lowered = sorted({n.lower() for n in names})
        rows = self.con.execute(
            "SELECT lower(table_name), temporary FROM duckdb_tables() "
            "WHERE lower(table_name) IN (SELECT unnest(?)) "
            "UNION ALL SELECT lower(view_name), temporary FROM duckdb_views() "
            "WHERE lower(view_name) IN (SELECT unnest(?)) AND NOT internal",
            [lowered, lowered]).fetchall()
        temporary = {name for name, temp in rows if temp}
        persistent = {name for name, temp in rows if not temp}
        found: dict[str, tuple[Any, bool]] = {}
        for name in sorted(names):
            folded = name.lower()
            if folded in temporary:
                if folded in inputs:
                    quoted = exp.to_identifier(name, quoted=True).sql(dialect="duckdb")
                    table = self.con.sql(f"SELECT * FROM {quoted}").to_arrow_table()
                    found[name] = (table, False)
            elif folded not in persistent:
                value = lookup(self._scope, name)
                if value is not None:
                    found[name] = (value, True)
        return found

    def _run_match_recognize(self, statement: str):
        from matchsql.grammar import parse
        from matchsql.grammar.nodes import MatchRecognizeTable

        trees = parse(statement)
        if len(trees) != 1:
            raise ParseError("expected one statement", sql=statement, offset=0)
        tree = trees[0]
        cleanups: list[Callable[[], None]] = []
        self._live_stats = None
        # Match streams not yet claimed by an enclosing MATCH_RECOGNIZE; each is
        # read once, by whichever connection runs the query that references it.
        pending: dict[str, pa.RecordBatchReader] = {}
        try:
            nodes = list(tree.find_all(MatchRecognizeTable, bfs=False))
            self._scans = self._external_tables(tree, nodes)
            for name, (value, outer) in self._scans.items():
                if outer:
                    self.con.register(name, value)
                    cleanups.append(lambda name=name: self._unregister(name))
            direct = self.streams.direct_result(tree, nodes, statement)
            if direct is not None:  # SELECT * FROM stream MATCH_RECOGNIZE: rows bypass DuckDB
                self._open_result = direct
                return direct
            if direct_select(tree, nodes, limit_ok=True) is not None:
                # SELECT * FROM table MATCH_RECOGNIZE: the matches are the result. Reading
                # them through an outer DuckDB query would run the input query nested in
                # it on the same database, which measured 30-70 ms slower per 1M rows.
                # With LIMIT n the matchers stop once n rows are out.
                schema, batches = self._match_source(nodes[0], statement, pending, cleanups)
                rows = self._direct(batches)
                limit = plain_limit(tree)
                if limit is not None:
                    rows = first_rows(rows, limit)
                self._open_result = Result(BatchSource(schema, rows),
                                           on_close=cleanups, translate=self._failure_or)
                return self._open_result
            for node in reversed(nodes):  # innermost first: their outputs feed the outer ones
                view = f"__matchsql_matches_{next(_view_numbers)}"
                pending[view] = self._match_stream(node, statement, pending, cleanups)
                node.replace(exp.Table(this=exp.to_identifier(view), alias=node.args.get("alias")))
            for view, reader in pending.items():
                self.con.register(view, reader)
                cleanups.append(lambda view=view: self._unregister(view))
        except BaseException:
            _run_all(cleanups)
            raise
        stats = self._live_stats
        return self._run_duckdb(tree.sql(dialect="duckdb"), cleanups,
                                live=pending if stats is not None else None, stats=stats)

    # -- one MATCH_RECOGNIZE ------------------------------------------------------

    def _match_stream(self, node, statement: str, pending: dict[str, pa.RecordBatchReader],
                      cleanups: list) -> pa.RecordBatchReader:
        """Analyse ``node`` and return the lazy Arrow stream of its matches (see _match_source)."""
        stream = self.streams.stream_of(node)
        if stream is not None:  # a live stream: continuous input, not a DuckDB query
            matches = self.streams.match_reader(node, statement, stream)
            if self._live_stats is None:
                self._live_stats = matches.stats
            return matches.to_reader()
        schema, batches = self._match_source(node, statement, pending, cleanups)
        return pa.RecordBatchReader.from_batches(schema, batches)

    def _direct(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``batches`` raising the statement's matchsql error, as the DuckDB route does."""
        self._failure.clear()
        try:
            yield from batches
        except Error:
            raise
        except (duckdb.Error, OSError, pa.ArrowException):
            if self._failure:
                raise self._failure[0] from None
            raise

    def _match_source(self, node, statement: str, pending: dict[str, pa.RecordBatchReader],
                      cleanups: list) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """Analyse ``node``: the schema and the lazy batches of its matches.

        The input query runs on a cursor of its own (DuckDB allows one open
        result per connection, and the outer statement needs ``self.con``);
        match streams of inner MATCH_RECOGNIZEs that the input reads move to
        that cursor.
        """
        from matchsql.grammar import analyze

        input_sql = _input_query(node)
        cursor = self.con.cursor()
        self._cursors.add(cursor)
        cleanups.append(lambda: (self._cursors.discard(cursor), cursor.close()))
        for name, (value, _) in self._scans.items():
            cursor.register(name, value)
        inner = {view: pending.pop(view) for view in _VIEW.findall(input_sql) if view in pending}
        for view, reader in inner.items():  # zero-row stand-ins while the schema is read
            cursor.register(view, reader.schema.empty_table())
        schema = self._schema_of(cursor, input_sql, node, statement)
        for view, reader in inner.items():
            cursor.unregister(view)
            cursor.register(view, reader)
        spec = analyze(node, schema, sql=statement, con=self.con)
        require_columns(spec, node, statement)
        check_pattern_size(spec.pattern, self.config.max_pattern_size, statement)
        narrow = self._projected(node, spec)
        if narrow is not None:
            spec, input_sql = narrow
        scatter = None  # the input queries of worker processes (matchsql/workers/scatter.py)
        if self.config.workers > 1 and spec.partition_by:
            scatter = scatter_plan(node, spec, spec.columns.names if narrow else None, cursor)
        if self._profiles is None:
            return spec.output_schema(), self._match_batches(spec, cursor, input_sql,
                                                             scatter=scatter)
        profile = MatchProfile(_path_name(spec, self.config), not spec.rows_per_match.all_rows)
        self._profiles[offset_of(node.this)] = profile
        return spec.output_schema(), profile.output(
            self._match_batches(spec, cursor, input_sql, profile, scatter))

    def _projected(self, node, spec: MatchSpec) -> tuple[MatchSpec, str] | None:
        """ONE ROW PER MATCH reads only the PARTITION BY and ORDER BY columns and
        those DEFINE and MEASURES name: the spec and input query of just those
        (DuckDB then exports no other column), or None where all are needed.

        Analysis already resolved every column reference of DEFINE and MEASURES
        to an exact input column name (``exp.Column`` nodes), and nothing else in
        a ONE ROW PER MATCH spec depends on the other columns, so the narrow spec
        is the same spec over fewer columns.
        """
        schema = spec.columns
        names = schema.names
        if spec.rows_per_match.all_rows or len(set(names)) != len(names):
            return None
        used = set(spec.partition_by) | set(spec.order_by)
        folded = {name.lower(): name for name in names}
        for expr in [*spec.defines.values(), *(m.expr for m in spec.measures)]:
            for column in expr.find_all(exp.Column):
                name = column.name if column.name in names else folded.get(column.name.lower())
                if name is not None:
                    used.add(name)
        if len(used) == len(names) or not used <= set(names):
            return None
        fields = [f for f in schema if f.name in used]
        narrow = dataclasses.replace(spec, columns=pa.schema(fields))
        if not narrow.output_schema().equals(spec.output_schema()):
            return None
        return narrow, _input_query(node, [f.name for f in fields])

    def _schema_of(self, cursor, input_sql: str, node, statement: str) -> pa.Schema:
        try:
            return cursor.sql(f"SELECT * FROM ({input_sql}) LIMIT 0").to_arrow_table().schema
        except duckdb.Error as exc:
            err = self.translate(exc)
            offset = offset_of(node.this)
            raise type(err)(err.message, sql=statement, offset=offset) from None

    def _match_batches(self, spec: MatchSpec, cursor, input_sql: str,
                       profile: MatchProfile | None = None,
                       scatter: ScatterPlan | None = None) -> Iterator[pa.RecordBatch]:
        """Stream the input through one matcher run per partition.

        With ``threads`` > 1 the partitions run on a thread pool (the compiled
        kernels release the GIL) where the planner expects it to pay off
        (``partition_threads``), their outputs in the sequential order; see
        router/parallel.py. The many small batches of short partitions are
        concatenated: DuckDB scans a few large batches much faster.
        """
        from matchsql.fsm.planner import (
            choose_path,
            new_partition_matcher,
            partition_threads,
            whole_partitions,
        )
        from matchsql.router.parallel import ParallelPartitionRouter, coalesce
        from matchsql.router.partitions import SortedPartitionRouter

        config = self.config
        # This MATCH_RECOGNIZE's own token: its router cancels it when abandoned.
        cancel = self._cancel.child()
        try:
            # An interrupt that came while the statement was planned, before this
            # cursor could be interrupted, stops it here instead of after DuckDB's sort.
            cancel.check()

            def open_input(sql: str):
                reader = cursor.sql(sql).to_arrow_reader(config.batch_size)
                return reader if profile is None else profile.input(reader)

            if scatter is not None and self.workers.claim():
                yield from self.workers.run(spec, config, cancel, open_input=open_input,
                                            input_sql=input_sql, scatter=scatter)
                return
            reader = open_input(input_sql)
            try:  # plans are built once per spec: here, not racing in the workers
                choose_path(spec, config.execution_path)
            except Error:
                pass  # a forced path that does not apply: the first partition says so

            def new_run(key: tuple):
                return new_partition_matcher(spec, key, config, cancel)

            def match_whole(batch: pa.RecordBatch, bounds) -> list[pa.RecordBatch]:
                return whole.match(batch, bounds, cancel)

            threads, _ = partition_threads(spec, config)
            whole, _ = whole_partitions(spec, config)
            if threads > 1:
                yield from ParallelPartitionRouter(
                    spec.partition_by, new_run, threads, chunk_rows=config.batch_size,
                    cancel=cancel, whole=match_whole if whole is not None else None).run(reader)
            else:
                router = SortedPartitionRouter(spec.partition_by, new_run,
                                               match_whole if whole is not None else None)
                for batch in reader:
                    yield from coalesce(list(router.route(batch)))
                yield from coalesce(list(router.finish()))
        except Error as err:
            self._failure.append(err)
            raise
        except duckdb.Error as exc:
            self._failure.append(self.translate(exc))
            raise
        except (OSError, pa.ArrowException) as exc:
            # The input query's Arrow reader reports DuckDB errors (an interrupt of
            # the sort, say) as Arrow I/O errors whose text carries a traceback.
            self._failure.append(_reader_error(exc))
            raise
        except MemoryError:
            self._failure.append(_out_of_memory())
            raise self._failure[-1] from None
        except Exception as exc:  # a bug inside the engine: a one-line error, no traceback
            err = internal_error(exc)
            self._failure.append(err)
            raise err from exc

    # -- EXPLAIN of a statement with MATCH_RECOGNIZE --------------------------------

    def _explain_match_recognize(self, statement: str, offset: int):
        """One row per line: for each MATCH_RECOGNIZE (innermost first) its chosen
        execution path, why, and its automaton program (see fsm/planner.explain)."""
        lines = [line for _, section in self._explain_sections(statement, offset)
                 for line in section]
        self._open_result = table_result(pa.table({"explain": pa.array(lines, pa.string())}))
        return self._open_result

    def _explain_sections(self, statement: str, offset: int) -> list[tuple[int | None, list[str]]]:
        """EXPLAIN lines of each MATCH_RECOGNIZE, with its offset in ``statement``.

        Inner MATCH_RECOGNIZEs are replaced by empty tables of their output
        schema so that outer ones can be analysed without running anything.
        """
        from matchsql.fsm.planner import explain
        from matchsql.grammar import analyze, parse
        from matchsql.grammar.nodes import MatchRecognizeTable

        query = " " * offset + statement[offset:]  # keep offsets valid for error messages
        trees = parse(query)
        if len(trees) != 1:
            raise ParseError("expected one statement", sql=statement, offset=0)
        cursor = self.con.cursor()
        sections: list[tuple[int | None, list[str]]] = []
        try:
            nodes = list(trees[0].find_all(MatchRecognizeTable, bfs=False))
            self._scans = self._external_tables(trees[0], nodes)
            for name, (value, _) in self._scans.items():
                cursor.register(name, value)
            for number, node in enumerate(reversed(nodes), 1):
                key = offset_of(node.this)
                stream = self.streams.stream_of(node)
                if stream is not None:
                    schema = self.streams.schema_of_stream(stream)
                else:
                    schema = self._schema_of(cursor, _input_query(node), node, query)
                spec = analyze(node, schema, sql=query, con=cursor)
                check_pattern_size(spec.pattern, self.config.max_pattern_size, query)
                view = f"__matchsql_matches_{next(_view_numbers)}"
                cursor.register(view, spec.output_schema().empty_table())
                node.replace(exp.Table(this=exp.to_identifier(view), alias=node.args.get("alias")))
                lines = [f"-- MATCH_RECOGNIZE #{number} of {len(nodes)}"]
                lines += explain(spec, self.config).splitlines()
                sections.append((key, lines))
        finally:
            cursor.close()
        return sections

    def _explain_analyze(self, statement: str, offset: int):
        """EXPLAIN ANALYZE: run the statement to its end, then the EXPLAIN lines of each
        MATCH_RECOGNIZE with what it did (rows in, matches, time per stage) and the
        statement's rows and time."""
        sections = self._explain_sections(statement, offset)
        query = " " * offset + statement[offset:]
        self._profiles = {}
        started = time.perf_counter()
        rows = 0
        try:
            result = self._run_match_recognize(query)
            for batch in result.fetch_batches():
                rows += batch.num_rows
            profiles = self._profiles
        finally:
            self._profiles = None
        elapsed = time.perf_counter() - started
        lines: list[str] = []
        for key, section in sections:
            lines += section
            profile = profiles.get(key)
            lines += profile.lines() if profile is not None else \
                ["analyze: not profiled (live stream input)"]
        lines += ["-- statement", f"analyze: rows {rows:,}",
                  f"analyze: total {elapsed * 1000:.3f} ms"]
        self._open_result = table_result(pa.table({"explain": pa.array(lines, pa.string())}))
        return self._open_result

    def _unregister(self, view: str) -> None:
        try:
            self.con.unregister(view)
        except duckdb.Error:
            pass

    # -- errors -------------------------------------------------------------------

    def _raise_failure(self) -> None:
        if self._failure:
            raise self._failure[0]

    def _failure_or(self, exc: duckdb.Error) -> Error:
        return self._failure[0] if self._failure else self.translate(exc)

    def interrupt(self) -> None:
        self._cancel.cancel()
        for cursor in list(self._cursors):
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
                return ours(_strip_prefix(message))
        if isinstance(exc, duckdb.InterruptException):
            return ExecutionError("statement interrupted")
        return ExecutionError(_strip_prefix(one_line(message)))


def _setting_name(statement: str, words: list[str]) -> str | None:
    """The matchsql setting of ``SHOW name`` / ``RESET name``; None for other statements."""
    if len(words) < 2 or words[1].lower() not in Config.names():
        return None
    if statement[after_words(statement, 2):].strip():
        return None
    return words[1].lower()


def first_rows(batches: Iterator[pa.RecordBatch], n: int) -> Iterator[pa.RecordBatch]:
    """The first ``n`` rows of ``batches``; then ``batches`` is closed, which stops
    the matchers and the input query behind it."""
    try:
        while n > 0:
            batch = next(batches, None)
            if batch is None:
                return
            if batch.num_rows > n:
                batch = batch.slice(0, n)
            n -= batch.num_rows
            yield batch
    finally:
        batches.close()


def _path_name(spec: MatchSpec, config: Config) -> str:
    """The execution path the planner picks for ``spec`` (see fsm/planner.choose_path)."""
    from matchsql.fsm.planner import choose_path

    try:
        return choose_path(spec, config.execution_path).name
    except Error as err:
        return f"none ({err.message})"


def _out_of_memory() -> Error:
    """The error for a statement that ran out of memory despite the size checks."""
    return LimitExceededError(
        "the statement ran out of memory; lower its size (pattern, partitions) or raise "
        "the memory available to the process (max_buffered_rows and max_pattern_size "
        "bound the matchers)")


def _reader_error(exc: BaseException) -> Error:
    """The matchsql error for a failure the input's Arrow reader raised, without traceback."""
    message = one_line(str(exc))
    if "INTERRUPT" in message:
        return ExecutionError("statement interrupted")
    return ExecutionError(f"reading the MATCH_RECOGNIZE input failed: {message}")


def _input_query(node, columns: list[str] | None = None) -> str:
    """DuckDB SQL for the row pattern input table, sorted by partition and order keys.

    CTEs of the enclosing statement that precede ``node`` stay visible.
    ``columns``, when given, are the only input columns selected.
    """
    source = node.this.sql(dialect="duckdb")
    select = "*" if columns is None else ", ".join(
        exp.to_identifier(c, quoted=True).sql(dialect="duckdb") for c in columns)
    order = node.args.get("order")
    keys = [_column_name(p) for p in node.args.get("partition_by") or []]
    keys += [_unqualified(o) for o in (order.expressions if order is not None else [])]
    if keys:
        # DuckDB's sort is not stable: the input position breaks ties between equal keys
        # (a partition keeps the input's order where ORDER BY does not decide it).
        inner = "*" if columns is None else select  # the window carries no other column
        select = f"* EXCLUDE ({_POSITION})" if columns is None else select
        query = (f"SELECT {select} FROM (SELECT {inner}, row_number() OVER () "
                 f"AS {_POSITION} FROM {source}) ORDER BY " + ", ".join(keys)
                 + f", {_POSITION}")
    else:
        query = f"SELECT {select} FROM {source}"
    ctes = visible_ctes(node)
    if ctes:
        query = "WITH " + ", ".join(c.sql(dialect="duckdb") for c in ctes) + " " + query
    return query


def _unqualified(item: exp.Expression) -> str:
    """An ORDER BY item over its column's bare name (it sorts the input query's output)."""
    if isinstance(item, exp.Ordered) and isinstance(item.this, exp.Column):
        item = item.copy()
        item.set("this", exp.column(exp.to_identifier(item.this.name, quoted=True)))
    return item.sql(dialect="duckdb")


def _column_name(column: exp.Expression) -> str:
    """A partition column as an unqualified identifier, for use outside its table's scope."""
    return exp.to_identifier(column.name, quoted=True).sql(dialect="duckdb")


def _relocate(err: Error, text: str, offset: int) -> Error:
    """Re-anchor an error located in one statement onto the whole input text."""
    if err.line is None or err.sql is None or offset == 0 and err.sql == text:
        return err
    lines = err.sql.splitlines(keepends=True)
    local = sum(len(line) for line in lines[: err.line - 1]) + (err.column or 1) - 1
    return type(err)(err.message, sql=text, offset=offset + local)


def _run_all(callbacks: list[Callable[[], None]]) -> None:
    while callbacks:
        callbacks.pop()()


def _unquote(value: str) -> str:
    value = value.strip().rstrip(";").strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _strip_prefix(message: str) -> str:
    return without_kind(message)
