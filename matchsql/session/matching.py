"""The MATCH_RECOGNIZE statement handler: a statement with MATCH_RECOGNIZE (or a row
pattern window, or their EXPLAIN [ANALYZE]) compiled, planned, run and returned as a
Result.

For each ``MATCH_RECOGNIZE`` table factor (innermost first) DuckDB computes
the input relation sorted by the partition and order keys and streams it out
as Arrow batches; the router feeds them to one matcher run per partition; the
matches stream back into DuckDB as a registered Arrow reader that replaces
the table factor, and DuckDB runs the rest of the statement. Nothing is
collected in Python lists: memory is bounded by the batch size and the
matchers' live windows.

What the handler needs besides has a module of its own: the input query's text and
schema (:mod:`~matchsql.session.input_query`), the tables the input cursors do not
see (:mod:`~matchsql.session.external_tables`), the matches' views in the statement
DuckDB runs (:mod:`~matchsql.session.matches_in_duckdb`), row pattern windows
(:mod:`~matchsql.session.pattern_window_statements`), EXPLAIN
(:mod:`~matchsql.session.explain`).

The executor loads this module on the first statement that needs it: it
brings sqlglot, the matchsql dialect and the matchers, which plain SQL never
needs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any

import duckdb
import pyarrow as pa
from sqlglot import exp

import matchsql.engine.planner as planner  # by module: tests stand in for its functions
from matchsql.engine.compiled_query import CompiledMatch, compile_match
from matchsql.errors import (
    Error,
    ExecutionError,
    ParseError,
    internal_error,
    one_line,
    out_of_memory,
)
from matchsql.execution.router.parallel import ParallelPartitionRouter, coalesce
from matchsql.execution.router.partitions import SortedPartitionRouter
from matchsql.execution.router.presorted import GroupedRows
from matchsql.execution.workers.scatter import scatter_plan
from matchsql.execution.workers.scatter_plan import ScatterPlan
from matchsql.expr.batch_select import project_result
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import known_depth, parse
from matchsql.results.duckdb_values import retyped_types
from matchsql.results.result import BatchSource, Result
from matchsql.runtime.cancel import Cancellation
from matchsql.runtime.deep import run_deep
from matchsql.runtime.engine_freeze import freeze_engine
from matchsql.session import held
from matchsql.session.cleanups import run_all
from matchsql.session.explain import MatchExplain
from matchsql.session.external_tables import ExternalTables, external_tables
from matchsql.session.failure import StatementFailure
from matchsql.session.host import Params, StatementHost
from matchsql.session.input_query import InputText, narrowed, typed_input_schema
from matchsql.session.matches_in_duckdb import MATCH_VIEW, passed_retyped, read_back, view_name
from matchsql.session.ordered_input import (
    InputQueries,
    input_batches,
    may_skip_sort,
    order_keys,
    ordered_rows,
    rereadable,
    unread_columns,
)
from matchsql.session.pattern_window_statements import run_pattern_windows
from matchsql.session.profile import MatchProfile
from matchsql.session.query_shape import (
    direct_select,
    offset_of,
    plain_limit,
    prefix_limit,
)
from matchsql.session.statement_kinds import READS_TABLES, ExplainMatch, MatchQuery
from matchsql.session.statement_text import bind_values

#: A statement that reads at most this many rows of a MATCH_RECOGNIZE (``SELECT * ...
#: LIMIT n``) matches in this process: worker processes would match partitions whose
#: rows are never read, and the pool is killed when the reader stops early.
FEW_ROWS = 65_536

#: Lazy batches of matches; closing them stops the matchers and the input query behind.
Batches = Generator[pa.RecordBatch, None, None]


@dataclasses.dataclass(frozen=True)
class Reading:
    """How much of a MATCH_RECOGNIZE's matches its statement may read.

    ``stops_early``: the statement has a LIMIT or FETCH, so it may stop reading at
    any batch; the compiled matchers then match each input batch as it comes instead
    of gathering up to millions of rows for one split run first (which a LIMIT 20
    waited for, and which ran all of a 200,000-row partition). ``rows``: it reads at
    most that many rows (``SELECT ... LIMIT n`` straight over the MATCH_RECOGNIZE), or
    None; when they are :attr:`few`, the partitions run in order in this process,
    neither on worker processes nor several at a time on the thread pool, which
    matched up to six input batches ahead of the first rows.
    """

    stops_early: bool = False
    rows: int | None = None

    @property
    def few(self) -> bool:
        return self.rows is not None and self.rows <= FEW_ROWS


READ_ALL = Reading()


@dataclasses.dataclass
class _Statement:
    """What one statement's MATCH_RECOGNIZEs share, taken by the handler when it starts:
    its lazy matches may be read after the next statement began, and must still answer
    to this one's token and failure record."""

    text: str
    cancel: Cancellation
    failure: StatementFailure
    #: The objects its table names stand for (see external_tables).
    scans: ExternalTables
    #: Undone when its Result is closed, or at once when it fails to start.
    cleanups: list[Callable[[], None]] = dataclasses.field(default_factory=list)
    #: Match streams not yet claimed by an enclosing MATCH_RECOGNIZE; each is read once,
    #: by whichever connection runs the query that references it.
    pending: dict[str, pa.RecordBatchReader] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class _Matches:
    """One MATCH_RECOGNIZE over a DuckDB query, set running: its schema and lazy batches,
    with the result columns a cast must give their DuckDB type back (see
    matches_in_duckdb)."""

    schema: pa.Schema
    batches: Iterator[pa.RecordBatch]
    retyped: dict[str, str]


class MatchRunner:
    """The MATCH_RECOGNIZE statements of one :class:`~matchsql.session.executor.Executor`
    (known here as its :class:`~matchsql.session.host.StatementHost`)."""

    def __init__(self, executor: StatementHost) -> None:
        self.executor = executor
        # EXPLAIN ANALYZE: the profile of each MATCH_RECOGNIZE, by its offset in the text.
        self.profiles: dict[int | None, MatchProfile] | None = None
        self._explain = MatchExplain(self)

    def run(self, statement: MatchQuery, params: Params) -> Any:
        """A statement with a MATCH_RECOGNIZE and/or a row pattern window (or their EXPLAIN)."""
        text = statement.text if params is None else bind_values(statement.text, params)
        if statement.windowed and (not statement.words or statement.words[0] in READS_TABLES):
            handled = run_pattern_windows(
                self,
                text,
                isinstance(statement, ExplainMatch) and statement.analyze,
                statement.head,
            )
            if handled is not False:
                return handled
        if not statement.match:  # no row pattern window after all: DuckDB's
            return self.executor.run_duckdb(statement.text, [], params)
        # Parse and analysis recurse per nesting level: run_deep gives them room.
        if isinstance(statement, ExplainMatch):
            if statement.analyze:
                return run_deep(lambda: self._explain.analyze(text, statement.head))
            return run_deep(lambda: self._explain.explain(text, statement.head))
        return run_deep(lambda: self.run_match_recognize(text), known_depth(text))

    def run_match_recognize(self, statement: str) -> Any:
        """The handler's core: each MATCH_RECOGNIZE of ``statement`` (innermost first)
        compiled, planned and set running as a lazy stream of matches; then the matches
        are the Result, or DuckDB runs the statement around them."""
        trees = parse(statement)
        if len(trees) != 1:
            raise ParseError("expected one statement", sql=statement, offset=0)
        tree = trees[0]
        executor = self.executor
        running = _Statement(statement, executor.cancellation, executor.failure, {})
        cleanups, pending = running.cleanups, running.pending
        try:
            nodes = list(tree.find_all(MatchRecognizeTable, bfs=False))
            running.scans = external_tables(executor, tree, nodes)
            for name, (value, outer) in running.scans.items():
                if outer:
                    executor.con.register(name, value)
                    cleanups.append(functools.partial(executor.unregister, name))
            direct = executor.streams.direct_result(tree, nodes, statement)
            if direct is not None:  # SELECT * FROM stream MATCH_RECOGNIZE: rows bypass DuckDB
                return direct
            stops_early = held.may_stop_early(tree)
            if direct_select(tree, nodes, limit_ok=True) is not None:
                # SELECT * FROM table MATCH_RECOGNIZE: the matches are the result. Reading
                # them through an outer DuckDB query would run the input query nested in
                # it on the same database, which measured 30-70 ms slower per 1M rows.
                # With LIMIT n the matchers stop once n rows are out.
                limit = plain_limit(tree)
                matches = self._match_source(nodes[0], running, Reading(stops_early, limit))
                rows = self._direct(matches.batches, running.failure)
                if limit is not None:
                    rows = first_rows(rows, limit)
                retyped = matches.retyped
                return Result(
                    BatchSource(matches.schema, rows),
                    on_close=cleanups,
                    translate=executor.translator(running.failure),
                    types=retyped_types(matches.schema, retyped) if retyped else None,
                )
            stats = None  # the input metrics of the first MATCH_RECOGNIZE over a stream
            for node in reversed(nodes):  # innermost first: their outputs feed the outer ones
                view = view_name()
                reading = Reading(stops_early, prefix_limit(tree, node))
                pending[view], retyped, live_stats = self._match_stream(node, running, reading)
                if stats is None:
                    stats = live_stats
                node.replace(read_back(view, retyped, node.args.get("alias")))
            for view, reader in pending.items():
                executor.con.register(view, reader)
                cleanups.append(functools.partial(executor.unregister, view))
        except BaseException:
            run_all(cleanups)
            raise
        sql = tree.sql(dialect="duckdb")
        if held.ENABLED and stats is None and pending and not held.may_stop_early(tree):
            # The matches are read before DuckDB runs the statement around them (see held.py).
            return executor.run_duckdb(
                sql, cleanups, live=pending, before=lambda: self._hold(pending)
            )
        return executor.run_duckdb(
            sql, cleanups, live=pending if stats is not None else None, stats=stats
        )

    def _hold(self, pending: dict[str, pa.RecordBatchReader]) -> None:
        """Read each match stream of ``pending`` into memory (as far as held.py allows) and
        register that in its place; ``pending`` is emptied, so a second call does nothing."""
        while pending:
            view, reader = pending.popitem()
            self.executor.con.register(view, held.hold(reader))

    # -- one MATCH_RECOGNIZE ------------------------------------------------------

    def _match_stream(
        self, node: MatchRecognizeTable, running: _Statement, reading: Reading = READ_ALL
    ) -> tuple[pa.RecordBatchReader, dict[str, str], dict | None]:
        """Analyse ``node``: the lazy Arrow stream of its matches, the columns DuckDB must
        cast back (see _match_source), and the input metrics of a live stream (None for
        any other input)."""
        stream = self.executor.streams.stream_of(node)
        if stream is not None:  # a live stream: continuous input, not a DuckDB query
            live = self.executor.streams.match_reader(node, running.text, stream)
            return live.to_reader(), {}, live.stats
        matches = self._match_source(node, running, reading)
        reader = pa.RecordBatchReader.from_batches(matches.schema, matches.batches)
        return reader, matches.retyped, None

    @staticmethod
    def _direct(batches: Iterable[pa.RecordBatch], failure: StatementFailure) -> Batches:
        """``batches`` raising the statement's matchsql error (``failure``, taken when the
        statement ran), as the DuckDB route does."""
        try:
            yield from batches
        except Error:
            raise
        except (duckdb.Error, OSError, pa.ArrowException):
            if failure.error is not None:
                raise failure.error from None
            raise

    def _match_source(
        self, node: MatchRecognizeTable, running: _Statement, reading: Reading = READ_ALL
    ) -> _Matches:
        """Analyse ``node``: its matches over a DuckDB query, as lazy batches (``reading``:
        how much of them the statement may read).

        The input query runs on a cursor of its own (DuckDB allows one open
        result per connection, and the outer statement needs ``self.executor.con``);
        match streams of inner MATCH_RECOGNIZEs that the input reads move to
        that cursor.
        """
        statement, pending, scans = running.text, running.pending, running.scans
        text = InputText.of(node)
        input_sql = text.query()
        cursor = self.executor.con.cursor()
        self.executor.cursors.add(cursor)
        running.cleanups.append(functools.partial(self._close_cursor, cursor))
        for name, (value, _) in scans.items():
            cursor.register(name, value)
        inner = {
            view: pending.pop(view) for view in MATCH_VIEW.findall(input_sql) if view in pending
        }
        for view, reader in inner.items():  # zero-row stand-ins while the schema is read
            cursor.register(view, reader.schema.empty_table())
        translate = self.executor.translate
        schema, input_types = typed_input_schema(cursor, input_sql, node, statement, translate)
        for view, reader in inner.items():
            cursor.unregister(view)
            cursor.register(view, reader)
        config = self.executor.config
        compiled = compile_match(
            node,
            schema,
            sql=statement,
            con=self.executor.con,
            config=config,
            cache=self.executor.compiled,
            watch=self.executor.watch,
        )
        narrow = narrowed(text, compiled)
        if narrow is not None:
            compiled, input_sql = narrow
        elif compiled.spec.derived:
            input_sql = text.query(derived=compiled.spec.derived)
        if compiled.spec.derived:  # DuckDB's own types for the derived columns, as it exports them
            derived, _ = typed_input_schema(cursor, input_sql, node, statement, translate)
            compiled = compiled.over(derived)
        spec = compiled.spec
        retyped = passed_retyped(spec, schema, input_types) | spec.retyped()
        # The unsorted attempt reads the input a second time when it is out of order: only
        # for a table, view or table function, none of them a stream that reads once.
        again = (
            isinstance(node.this, exp.Table)
            and not inner
            and all(rereadable(value) for value, _ in scans.values())
        )
        unsorted = (
            text.query(spec.columns.names if narrow else None, sort=False, derived=spec.derived)
            if again
            else None
        )
        queries = InputQueries(
            input_sql,
            unsorted,
            spec.partition_by,
            order_keys(node, spec.order_by),
            unread=unread_columns(spec),
        )
        plan = compiled.physical(config)
        # The input queries of the scatter mode (matchsql/execution/workers/scatter.py),
        # planned only for that mode: its catalog query costs every statement a millisecond.
        scatter = None
        if plan.workers and self.executor.workers.mode == "scatter":
            scatter = scatter_plan(
                node,
                spec,
                spec.columns.names if narrow else None,
                cursor,
                presorted=queries.order if may_skip_sort(cursor) else None,
            )
        project = project_result(spec)
        failure, cancel = running.failure, running.cancel
        batches: Iterator[pa.RecordBatch]
        if self.profiles is None:
            batches = self._match_batches(
                compiled, plan, cursor, queries, failure, cancel, scatter=scatter, reading=reading
            )
        else:
            profile = MatchProfile(_path_name(plan), not spec.rows_per_match.all_rows)
            self.profiles[offset_of(node.this)] = profile
            batches = profile.output(
                self._match_batches(
                    compiled, plan, cursor, queries, failure, cancel, profile, scatter, reading
                )
            )
        if project is not None:
            batches = project.batches(batches)
        return _Matches(spec.result_schema(), batches, retyped)

    def _close_cursor(self, cursor: duckdb.DuckDBPyConnection) -> None:
        self.executor.cursors.discard(cursor)
        cursor.close()

    def _match_batches(
        self,
        compiled: CompiledMatch,
        plan: planner.PhysicalPlan,
        cursor: duckdb.DuckDBPyConnection,
        queries: InputQueries,
        failure: StatementFailure,
        cancel: Cancellation,
        profile: MatchProfile | None = None,
        scatter: ScatterPlan | None = None,
        reading: Reading = READ_ALL,
    ) -> Batches:
        """Stream the input through one matcher run per partition, as ``plan`` (the
        query's physical plan under the statement's settings) says. ``failure`` and
        ``cancel`` are the statement's, taken when it ran: the batches may be read
        after the next statement began.

        The input comes sorted by partition and ORDER BY keys: by DuckDB's sort,
        or grouped here where it is in order already (see ordered_input.py).

        With ``threads`` > 1 the partitions run on a thread pool (the compiled
        kernels release the GIL) where the planner expects it to pay off
        (``plan.threads``), their outputs in the sequential order; see
        execution/router/parallel.py. The many small batches of short partitions are
        concatenated: DuckDB scans a few large batches much faster.
        """

        config = self.executor.config
        spec = compiled.spec
        freeze_engine()
        # This MATCH_RECOGNIZE's own token: its router cancels it when abandoned.
        cancel = cancel.child()
        try:
            # An interrupt that came while the statement was planned, before this
            # cursor could be interrupted, stops it here instead of after DuckDB's sort.
            cancel.check()

            def read(sql: str) -> pa.RecordBatchReader:
                return cursor.sql(sql).to_arrow_reader(config.batch_size)

            def open_input(sql: str) -> Iterable[pa.RecordBatch]:
                reader = read(sql)
                return reader if profile is None else profile.input(reader)

            def sorted_input() -> Iterable[pa.RecordBatch]:
                reader = input_batches(queries, read, config.batch_size, cursor, config.threads)
                # input time: the query, and the sort or the grouping
                return reader if profile is None else profile.input(reader)

            def ordered_input() -> GroupedRows | pa.Table | Iterable[pa.RecordBatch]:
                # The workers' router takes the grouped rows whole, to share them (the
                # profile of EXPLAIN ANALYZE times batches: it gets those).
                if profile is not None:
                    return sorted_input()
                return ordered_rows(queries, read, cursor, config.threads)

            if plan.workers and not reading.few and self.executor.workers.claim():
                yield from self.executor.workers.run(
                    compiled,
                    config,
                    cancel,
                    open_input=open_input,
                    sorted_input=ordered_input,
                    scatter=scatter,
                )
                return
            batches = sorted_input()
            # A forced path that does not apply (plan.path is None): the first partition
            # says so. The plans were built with the physical plan, not racing in threads.

            def new_run(key: tuple) -> Any:
                return planner.new_partition_matcher(
                    spec, key, config, cancel, gather=not reading.stops_early
                )

            # the partitions inside one batch, matched together where the plan batches them
            match_whole = (
                None
                if plan.whole is None
                else functools.partial(plan.whole.match_counted, cancel=cancel)
            )
            # A few rows wanted: the partitions in order, none matched ahead on the pool.
            if plan.threads > 1 and not reading.few:
                yield from ParallelPartitionRouter(
                    spec.partition_by,
                    new_run,
                    plan.threads,
                    chunk_rows=config.batch_size,
                    cancel=cancel,
                    whole=match_whole,
                ).run(batches)
            else:
                router = SortedPartitionRouter(spec.partition_by, new_run, match_whole)
                for batch in batches:
                    yield from coalesce(list(router.route(batch)))
                yield from coalesce(list(router.finish()))
        except Error as err:
            failure.record(err)
            raise
        except duckdb.Error as exc:
            failure.record(self.executor.translate(exc))
            raise
        except (OSError, pa.ArrowException) as exc:
            # The input query's Arrow reader reports DuckDB errors (an interrupt of
            # the sort, say) as Arrow I/O errors whose text carries a traceback.
            failure.record(_reader_error(exc))
            raise
        except MemoryError:
            raise failure.record(out_of_memory()) from None
        except Exception as exc:  # a bug inside the engine: a one-line error, no traceback
            raise failure.record(internal_error(exc)) from exc


def first_rows(batches: Batches, n: int) -> Batches:
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


def _path_name(plan: planner.PhysicalPlan) -> str:
    """The CPU execution path of ``plan`` (see matchsql/engine/planner.py.choose_path)."""
    return plan.path.name if plan.path is not None else f"none ({plan.path_error})"


def _reader_error(exc: BaseException) -> Error:
    """The matchsql error for a failure the input's Arrow reader raised, without traceback."""
    message = one_line(str(exc))
    if "INTERRUPT" in message:
        return ExecutionError("statement interrupted")
    return ExecutionError(f"reading the MATCH_RECOGNIZE input failed: {message}")
