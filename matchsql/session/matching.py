"""MATCH_RECOGNIZE in a session: statements with MATCH_RECOGNIZE or row pattern windows,
and views over them (their EXPLAIN [ANALYZE]: :mod:`matchsql.session.explain`; prepared
statements of them: :mod:`matchsql.session.prepared`).

For each ``MATCH_RECOGNIZE`` table factor (innermost first) DuckDB computes
the input relation sorted by the partition and order keys and streams it out
as Arrow batches; the router feeds them to one matcher run per partition; the
matches stream back into DuckDB as a registered Arrow reader that replaces
the table factor, and DuckDB runs the rest of the statement. Nothing is
collected in Python lists: memory is bounded by the batch size and the
matchers' live windows.

The executor loads this module on the first statement that needs it: it
brings sqlglot, the matchsql dialect and the matchers, which plain SQL never
needs.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import itertools
import re
import time
from collections.abc import Callable, Iterator
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
from matchsql.execution.workers.scatter import scatter_plan
from matchsql.execution.workers.scatter_plan import ScatterPlan
from matchsql.expr.batch_select import project_result
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import known_depth, parse
from matchsql.grammar.subqueries import visible_ctes
from matchsql.grammar.typer import cast_back
from matchsql.plan.spec import quoted, select_list
from matchsql.results.duckdb_values import retyped_types
from matchsql.results.result import BatchSource, Result, table_result
from matchsql.runtime.deep import run_deep
from matchsql.session import held, window_measures
from matchsql.session.cleanups import run_all
from matchsql.session.explain import MatchExplain
from matchsql.session.failure import StatementFailure
from matchsql.session.host import Params, StatementHost
from matchsql.session.ordered_input import (
    InputQueries,
    input_batches,
    may_skip_sort,
    order_keys,
    ordered_rows,
    rereadable,
    unread_columns,
)
from matchsql.session.profile import MatchProfile
from matchsql.session.query_shape import (
    direct_select,
    input_error_offset,
    offset_of,
    plain_limit,
    prefix_limit,
)
from matchsql.session.scope import lookup
from matchsql.session.statement_kinds import (
    READS_TABLES,
    DefineView,
    ExplainMatch,
    MatchQuery,
    query,
)
from matchsql.session.statement_text import bind_values
from matchsql.session.temporary import temporary
from matchsql.session.views import create_stub, expand, view_query

_view_numbers = itertools.count()
#: A statement that reads at most this many rows of a MATCH_RECOGNIZE (``SELECT * ...
#: LIMIT n``) matches in this process: worker processes would match partitions whose
#: rows are never read, and the pool is killed when the reader stops early.
FEW_ROWS = 65_536


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

#: MATCH_RECOGNIZE runs of this process that still freeze what is alive when they
#: start (see :func:`freeze_engine`).
_freezes_left = 2
FREEZE = True  # False: leave the collector alone (a host that manages it itself)


def freeze_engine() -> None:
    """At the start of the process's first two MATCH_RECOGNIZE runs: collect, then
    ``gc.freeze()`` what is alive, which is the engine then (sqlglot, pyarrow, numba,
    and by the second run the kernels the first one loaded; the first run's own objects
    are gone by then).

    Python's full collection walked those objects every time: 85 ms on the 2-core
    machine, in the middle of a match run, where no interrupt can land (the reference
    VM's allocations trigger one every few hundred milliseconds: measured up to 96 ms
    between two looks at the cancel flag). Frozen, a full collection takes 2-3 ms.
    What is frozen is alive then; should it become cyclic garbage later it stays
    (reference counting still frees everything else).
    """
    global _freezes_left
    if _freezes_left <= 0 or not FREEZE:
        return
    _freezes_left -= 1
    gc.collect()
    gc.freeze()


_VIEW = re.compile(r"__matchsql_matches_\d+")
_POSITION = "__matchsql_input_position"


class MatchRunner:
    """The MATCH_RECOGNIZE statements of one :class:`~matchsql.session.executor.Executor`
    (known here as its :class:`~matchsql.session.host.StatementHost`)."""

    def __init__(self, executor: StatementHost) -> None:
        self.executor = executor
        # The objects the running statement's table names stand for (see external_tables).
        self._scans: dict[str, tuple[Any, bool]] = {}
        # The input metrics of the running statement's first MATCH_RECOGNIZE over a
        # stream (None while there is none): its Result's stats.
        self._live_stats: dict | None = None
        # The result columns of the MATCH_RECOGNIZE compiled last whose DuckDB type is not
        # what DuckDB reads their Arrow form as (spec.retyped): cast back where read.
        self._retyped: dict[str, str] = {}
        # EXPLAIN ANALYZE: the profile of each MATCH_RECOGNIZE, by its offset in the text.
        self.profiles: dict[int | None, MatchProfile] | None = None
        self._explain = MatchExplain(self)

    def finish(self) -> None:
        """The statement (all of ``run``'s text) ended: forget what it registered."""
        self._scans = {}

    # -- the statement kinds ---------------------------------------------------------

    def run(self, statement: MatchQuery, params: Params):
        """A statement with a MATCH_RECOGNIZE and/or a row pattern window (or their EXPLAIN)."""
        text = statement.text if params is None else bind_values(statement.text, params)
        if statement.windowed and (not statement.words or statement.words[0] in READS_TABLES):
            handled = self.pattern_windows(
                text, isinstance(statement, ExplainMatch) and statement.analyze, statement.head
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

    def expand(self, text: str, views: dict[str, str]) -> str:
        return expand(text, views)

    def define_view(self, statement: DefineView, views: dict[str, str]):
        """CREATE VIEW: stored here when its query (views expanded) has a MATCH_RECOGNIZE,
        checked by preparing it (not reading it); else DuckDB's."""
        create = statement.view
        if create is not None:
            text = expand(create.query, views)
            body = query(" " * create.query_offset + text, statement.offset)
            if isinstance(body, MatchQuery):
                check = self.executor.dispatch(body)
                try:
                    schema = check.schema
                finally:
                    check.close()
                try:
                    create_stub(self.executor.con, create, schema, view_query(create))
                except duckdb.Error as exc:
                    raise self.executor.translate(exc) from None
                return None
        return self.executor.run_duckdb(statement.text, [])

    # -- row pattern windows ----------------------------------------------------------

    def pattern_windows(self, statement: str, analyze: bool, head: int):
        """A statement with a row pattern window (see matchsql.session.window_measures): its
        Result or EXPLAIN (``head``: where the explained statement starts); False when it
        has no such window after all."""
        windows = window_measures.WindowMeasures(self)
        if not head:
            return run_deep(lambda: windows.run(statement))
        explained = " " * head + statement[head:]
        lines = run_deep(lambda: windows.explain_lines(explained))
        if not lines:
            return False
        if analyze:  # run it to its end: the statement's rows and time
            started = time.perf_counter()
            result = run_deep(lambda: windows.run(explained))
            rows = 0
            if result:
                try:
                    rows = sum(b.num_rows for b in result.fetch_batches())
                finally:
                    result.close()
            elapsed = time.perf_counter() - started
            lines += [
                "-- statement",
                f"analyze: rows {rows:,}",
                f"analyze: total {elapsed * 1000:.3f} ms",
            ]
        return table_result(pa.table({"explain": pa.array(lines, pa.string())}))

    # -- MATCH_RECOGNIZE ------------------------------------------------------------------

    def external_tables(self, tree, nodes: list) -> dict[str, tuple[Any, bool]]:
        """What the statement's unqualified table names stand for when they are not in
        the database: the caller's data frames, and this connection's temporary tables
        and registered objects, which the cursors that run MATCH_RECOGNIZE inputs do
        not see (read into Arrow tables; only those the inputs name). Each with whether
        the statement's own connection needs it too (the caller's variables)."""
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        names = {
            t.name
            for t in tree.find_all(exp.Table)
            if not t.args.get("db")
            and isinstance(t.this, exp.Identifier)
            and t.name.lower() not in ctes
            and not t.name.startswith("__matchsql_")
        }
        if not names:
            return {}
        inputs = {t.name.lower() for node in nodes for t in node.this.find_all(exp.Table)}
        con = self.executor.con
        temp = temporary(con, sorted(names))
        outer = {}  # names the catalog may still have: a caller's variable unless it has
        for name in sorted(names - temp):
            value = lookup(self.executor.scope, name)
            if value is not None:
                outer[name] = value
        persistent: set[str] = set()
        if outer:  # (rare: a variable named as a table; the catalog's tables come first)
            lowered = sorted({n.lower() for n in outer})
            rows = con.execute(
                "SELECT lower(table_name) FROM duckdb_tables() "
                "WHERE lower(table_name) IN (SELECT unnest(?)) AND NOT temporary "
                "UNION ALL SELECT lower(view_name) FROM duckdb_views() "
                "WHERE lower(view_name) IN (SELECT unnest(?)) AND NOT internal "
                "AND NOT temporary",
                [lowered, lowered],
            ).fetchall()
            persistent = {name for (name,) in rows}
        found: dict[str, tuple[Any, bool]] = {}
        for name in sorted(names):
            if name in temp:
                if name.lower() in inputs:
                    quoted = exp.to_identifier(name, quoted=True).sql(dialect="duckdb")
                    table = con.sql(f"SELECT * FROM {quoted}").to_arrow_table()
                    found[name] = (table, False)
            elif name in outer and name.lower() not in persistent:
                found[name] = (outer[name], True)
        return found

    def run_match_recognize(self, statement: str):

        trees = parse(statement)
        if len(trees) != 1:
            raise ParseError("expected one statement", sql=statement, offset=0)
        tree = trees[0]
        cleanups: list[Callable[[], None]] = []
        self._live_stats = None
        self._retyped = {}
        # Match streams not yet claimed by an enclosing MATCH_RECOGNIZE; each is
        # read once, by whichever connection runs the query that references it.
        pending: dict[str, pa.RecordBatchReader] = {}
        try:
            nodes = list(tree.find_all(MatchRecognizeTable, bfs=False))
            self._scans = self.external_tables(tree, nodes)
            for name, (value, outer) in self._scans.items():
                if outer:
                    self.executor.con.register(name, value)
                    cleanups.append(lambda name=name: self.executor.unregister(name))
            direct = self.executor.streams.direct_result(tree, nodes, statement)
            if direct is not None:  # SELECT * FROM stream MATCH_RECOGNIZE: rows bypass DuckDB
                return direct
            stops_early = held.may_stop_early(tree)
            if direct_select(tree, nodes, limit_ok=True) is not None:
                # SELECT * FROM table MATCH_RECOGNIZE: the matches are the result. Reading
                # them through an outer DuckDB query would run the input query nested in
                # it on the same database, which measured 30-70 ms slower per 1M rows.
                # With LIMIT n the matchers stop once n rows are out.
                limit = plain_limit(tree)
                schema, batches = self._match_source(
                    nodes[0], statement, pending, cleanups, Reading(stops_early, limit)
                )
                rows = self._direct(batches, self.executor.failure)
                if limit is not None:
                    rows = first_rows(rows, limit)
                types = retyped_types(schema, self._retyped) if self._retyped else None
                return Result(
                    BatchSource(schema, rows),
                    on_close=cleanups,
                    translate=self.executor.translator(self.executor.failure),
                    types=types,
                )
            for node in reversed(nodes):  # innermost first: their outputs feed the outer ones
                view = self.view_name()
                reading = Reading(stops_early, prefix_limit(tree, node))
                self._retyped = {}
                pending[view] = self._match_stream(node, statement, pending, cleanups, reading)
                node.replace(_read_back(view, self._retyped, node.args.get("alias")))
            for view, reader in pending.items():
                self.executor.con.register(view, reader)
                cleanups.append(lambda view=view: self.executor.unregister(view))
        except BaseException:
            run_all(cleanups)
            raise
        stats = self._live_stats
        sql = tree.sql(dialect="duckdb")
        if held.ENABLED and stats is None and pending and not held.may_stop_early(tree):
            # The matches are read before DuckDB runs the statement around them (see held.py).
            return self.executor.run_duckdb(
                sql, cleanups, live=pending, before=lambda: self._hold(pending)
            )
        return self.executor.run_duckdb(
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
        self,
        node,
        statement: str,
        pending: dict[str, pa.RecordBatchReader],
        cleanups: list,
        reading: Reading = READ_ALL,
    ) -> pa.RecordBatchReader:
        """Analyse ``node`` and return the lazy Arrow stream of its matches (see _match_source)."""
        stream = self.executor.streams.stream_of(node)
        if stream is not None:  # a live stream: continuous input, not a DuckDB query
            matches = self.executor.streams.match_reader(node, statement, stream)
            if self._live_stats is None:
                self._live_stats = matches.stats
            return matches.to_reader()
        schema, batches = self._match_source(node, statement, pending, cleanups, reading)
        return pa.RecordBatchReader.from_batches(schema, batches)

    @staticmethod
    def _direct(
        batches: Iterator[pa.RecordBatch], failure: StatementFailure
    ) -> Iterator[pa.RecordBatch]:
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
        self,
        node,
        statement: str,
        pending: dict[str, pa.RecordBatchReader],
        cleanups: list,
        reading: Reading = READ_ALL,
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """Analyse ``node``: the schema and the lazy batches of its matches (``reading``:
        how much of them the statement may read).

        The input query runs on a cursor of its own (DuckDB allows one open
        result per connection, and the outer statement needs ``self.executor.con``);
        match streams of inner MATCH_RECOGNIZEs that the input reads move to
        that cursor.
        """

        text = InputText.of(node)
        input_sql = text.query()
        cursor = self.executor.con.cursor()
        self.executor.cursors.add(cursor)
        cleanups.append(lambda: (self.executor.cursors.discard(cursor), cursor.close()))
        for name, (value, _) in self._scans.items():
            cursor.register(name, value)
        inner = {view: pending.pop(view) for view in _VIEW.findall(input_sql) if view in pending}
        for view, reader in inner.items():  # zero-row stand-ins while the schema is read
            cursor.register(view, reader.schema.empty_table())
        schema, input_types = self._typed_schema_of(cursor, input_sql, node, statement)
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
        narrow = self._projected(text, compiled)
        if narrow is not None:
            compiled, input_sql = narrow
        elif compiled.spec.derived:
            input_sql = text.query(derived=compiled.spec.derived)
        if compiled.spec.derived:  # DuckDB's own types for the derived columns, as it exports them
            compiled = compiled.over(self._schema_of(cursor, input_sql, node, statement))
        spec = compiled.spec
        self._retyped = _passed_retyped(spec, schema, input_types) | spec.retyped()
        # The unsorted attempt reads the input a second time when it is out of order: only
        # for a table, view or table function, none of them a stream that reads once.
        again = (
            isinstance(node.this, exp.Table)
            and not inner
            and all(rereadable(value) for value, _ in self._scans.values())
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
        on_workers = plan.workers
        scatter = (
            None  # the input queries of the scatter mode (matchsql/execution/workers/scatter.py),
        )
        # planned only for that mode: its catalog query costs every statement a millisecond
        if on_workers and self.executor.workers.mode == "scatter":
            scatter = scatter_plan(
                node,
                spec,
                spec.columns.names if narrow else None,
                cursor,
                presorted=queries.order if may_skip_sort(cursor) else None,
            )
        project = project_result(spec)
        failure = self.executor.failure  # the statement's, even if its matches are read later
        if self.profiles is None:
            batches = self._match_batches(
                compiled, plan, cursor, queries, failure, scatter=scatter, reading=reading
            )
        else:
            profile = MatchProfile(_path_name(plan), not spec.rows_per_match.all_rows)
            self.profiles[offset_of(node.this)] = profile
            batches = profile.output(
                self._match_batches(
                    compiled, plan, cursor, queries, failure, profile, scatter, reading
                )
            )
        return spec.result_schema(), batches if project is None else project.batches(batches)

    def _projected(
        self, text: InputText, compiled: CompiledMatch
    ) -> tuple[CompiledMatch, str] | None:
        """ONE ROW PER MATCH reads only the PARTITION BY and ORDER BY columns and
        those DEFINE and MEASURES name: the query and input query of just those
        (DuckDB then exports no other column), or None where all are needed.

        Analysis already resolved every column reference of DEFINE and MEASURES
        to an exact input column name (``exp.Column`` nodes), and nothing else in
        a ONE ROW PER MATCH spec depends on the other columns, so the narrow spec
        is the same spec over fewer columns.
        """
        spec = compiled.spec
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
        narrow = compiled.over(pa.schema(fields))
        if not narrow.spec.output_schema().equals(spec.output_schema()):
            return None
        return narrow, text.query([f.name for f in fields], derived=spec.derived)

    def input_schema(self, cursor, node, statement: str) -> pa.Schema:
        """The Arrow schema of ``node``'s input (for EXPLAIN, which runs nothing)."""
        return self._schema_of(cursor, _input_query(node), node, statement)

    @staticmethod
    def view_name() -> str:
        """A new name for the view of one MATCH_RECOGNIZE's matches."""
        return f"__matchsql_matches_{next(_view_numbers)}"

    def _schema_of(self, cursor, input_sql: str, node, statement: str) -> pa.Schema:
        return self._typed_schema_of(cursor, input_sql, node, statement)[0]

    def _typed_schema_of(
        self, cursor, input_sql: str, node, statement: str
    ) -> tuple[pa.Schema, list[str]]:
        """The input's Arrow schema and DuckDB's names of its column types."""
        try:
            relation = cursor.sql(f"SELECT * FROM ({input_sql}) LIMIT 0")
            return relation.to_arrow_table().schema, [str(kind) for kind in relation.types]
        except duckdb.Error as exc:
            err = self.executor.translate(exc)
            offset = input_error_offset(err.message, node)
            raise type(err)(err.message, sql=statement, offset=offset) from None

    def _match_batches(
        self,
        compiled: CompiledMatch,
        plan: planner.PhysicalPlan,
        cursor,
        queries: InputQueries,
        failure: StatementFailure,
        profile: MatchProfile | None = None,
        scatter: ScatterPlan | None = None,
        reading: Reading = READ_ALL,
    ) -> Iterator[pa.RecordBatch]:
        """Stream the input through one matcher run per partition, as ``plan`` (the
        query's physical plan under the statement's settings) says.

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
        cancel = self.executor.cancellation.child()
        try:
            # An interrupt that came while the statement was planned, before this
            # cursor could be interrupted, stops it here instead of after DuckDB's sort.
            cancel.check()

            def open_input(sql: str):
                reader = cursor.sql(sql).to_arrow_reader(config.batch_size)
                return reader if profile is None else profile.input(reader)

            def sorted_input():
                reader = input_batches(
                    queries,
                    lambda sql: cursor.sql(sql).to_arrow_reader(config.batch_size),
                    config.batch_size,
                    cursor,
                    config.threads,
                )
                # input time: the query, and the sort or the grouping
                return reader if profile is None else profile.input(reader)

            def ordered_input():
                # The workers' router takes the grouped rows whole, to share them (the
                # profile of EXPLAIN ANALYZE times batches: it gets those).
                if profile is not None:
                    return sorted_input()
                return ordered_rows(
                    queries,
                    lambda sql: cursor.sql(sql).to_arrow_reader(config.batch_size),
                    cursor,
                    config.threads,
                )

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
            reader = sorted_input()
            # A forced path that does not apply (plan.path is None): the first partition
            # says so. The plans were built with the physical plan, not racing in threads.

            def new_run(key: tuple):
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
                ).run(reader)
            else:
                router = SortedPartitionRouter(spec.partition_by, new_run, match_whole)
                for batch in reader:
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


def _passed_retyped(spec, schema: pa.Schema, types: list[str]) -> dict[str, str]:
    """The input columns the result passes through (PARTITION BY keys, ALL ROWS PER MATCH's
    columns) whose DuckDB type a cast must give back to them (a UUID, JSON or ENUM the
    matchers carry as a string, a HUGEINT as decimal128(38, 0)), each with its type."""
    measures = {m.name for m in spec.projection or spec.measures}
    out = set(spec.result_schema().names) - measures
    found = {}
    for field, kind in zip(schema, types):
        if field.name in out:
            back = cast_back(field.type, kind)
            if back is not None:
                found[field.name] = back
    return found


def _read_back(view: str, retyped: dict[str, str], alias: exp.Expression | None) -> exp.Expr:
    """What stands for a MATCH_RECOGNIZE in the statement DuckDB runs: its matches' view,
    with each ``retyped`` column cast back to its DuckDB type (a HUGEINT sum, which the
    matches carry as Arrow's decimal128(38, 0))."""
    if not retyped:
        return exp.Table(this=exp.to_identifier(view), alias=alias)
    casts = ", ".join(
        f"CAST({quoted(name)} AS {kind}) AS {quoted(name)}" for name, kind in retyped.items()
    )
    select = exp.maybe_parse(f"SELECT * REPLACE ({casts}) FROM {quoted(view)}", dialect="duckdb")
    return exp.Subquery(this=select, alias=alias or exp.TableAlias(this=exp.to_identifier(view)))


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


def _path_name(plan: planner.PhysicalPlan) -> str:
    """The CPU execution path of ``plan`` (see matchsql/engine/planner.py.choose_path)."""
    return plan.path.name if plan.path is not None else f"none ({plan.path_error})"


def _reader_error(exc: BaseException) -> Error:
    """The matchsql error for a failure the input's Arrow reader raised, without traceback."""
    message = one_line(str(exc))
    if "INTERRUPT" in message:
        return ExecutionError("statement interrupted")
    return ExecutionError(f"reading the MATCH_RECOGNIZE input failed: {message}")


def _input_query(node, columns: list[str] | None = None, sort: bool = True) -> str:
    """DuckDB SQL for the row pattern input table, sorted by partition and order keys
    (in the input's own order when not ``sort``).

    CTEs of the enclosing statement that precede ``node`` stay visible.
    ``columns``, when given, are the only input columns selected.
    """
    return InputText.of(node).query(columns, sort)


@dataclasses.dataclass(frozen=True)
class InputText:
    """A MATCH_RECOGNIZE's input as SQL pieces, rendered once: a statement builds its
    input query in several forms (sorted, in the input's own order, narrowed to the
    columns read), each a sqlglot rendering of the same clauses otherwise."""

    source: str
    keys: list[str]  # PARTITION BY then ORDER BY items
    partition_names: list[str]  # the partition columns, unqualified
    ordered: bool  # whether there is an ORDER BY
    ctes: str  # "WITH ... " of the CTEs visible to the input, or ""

    @classmethod
    def of(cls, node) -> InputText:
        keys = [p.sql(dialect="duckdb") for p in node.args.get("partition_by") or []]
        order = node.args.get("order")
        if order is not None:
            keys += [o.sql(dialect="duckdb") for o in order.expressions]
        ctes = visible_ctes(node)
        return cls(
            node.this.sql(dialect="duckdb"),
            keys,
            [_column_name(p) for p in node.args.get("partition_by") or []],
            order is not None,
            "WITH " + ", ".join(c.sql(dialect="duckdb") for c in ctes) + " " if ctes else "",
        )

    def query(
        self,
        columns: list[str] | None = None,
        sort: bool = True,
        derived: dict[str, str] | None = None,
    ) -> str:
        """The input query (see :func:`_input_query`), with the ``derived`` columns (name
        -> SQL) that ``columns`` names (all of them where ``columns`` is None)."""
        select = select_list(columns, derived or {})
        keys = self.keys if sort else []
        if keys and not self.ordered:
            # Without ORDER BY a partition keeps the input's order; DuckDB's sort is
            # not stable, so the input position breaks ties between equal keys.
            inner = select  # the window carries no other column
            select = f"* EXCLUDE ({_POSITION})" if columns is None else select_list(columns, {})
            query = (
                f"SELECT {select} FROM (SELECT {inner}, row_number() OVER () "
                f"AS {_POSITION} FROM {self.source}) ORDER BY "
                + ", ".join(self.partition_names)
                + f", {_POSITION}"
            )
        else:
            query = f"SELECT {select} FROM {self.source}"
            if keys:
                query += " ORDER BY " + ", ".join(keys)
        return self.ctes + query


def _column_name(column: exp.Expression) -> str:
    """A partition column as an unqualified identifier, for use outside its table's scope."""
    return exp.to_identifier(column.name, quoted=True).sql(dialect="duckdb")
