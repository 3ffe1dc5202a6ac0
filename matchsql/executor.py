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
import threading
from collections.abc import Callable, Iterator

import duckdb
import pyarrow as pa
from sqlglot import exp

from matchsql.config import Config
from matchsql.deep import run_deep
from matchsql.errors import (
    CatalogError,
    Error,
    ExecutionError,
    LimitExceededError,
    ParseError,
    SemanticError,
)
from matchsql.fsm.program import check_pattern_size
from matchsql.fsm.spec import MatchSpec
from matchsql.grammar.sqltext import check_text

_MATCH_RECOGNIZE = re.compile(r"\bmatch_recognize\b", re.IGNORECASE)
_SET = re.compile(r"^\s*set\s+(?:session\s+)?(\w+)\s*(?:=|\bto\b)\s*(.+?)\s*$",
                  re.IGNORECASE | re.DOTALL)
_STREAM_DDL = re.compile(r"^\s*(create\s+stream|drop\s+stream|show\s+streams)\b",
                         re.IGNORECASE)
_view_numbers = itertools.count()
_EXPLAIN = re.compile(r"^\s*explain\b(?!\s+analyze\b)", re.IGNORECASE)
_VIEW = re.compile(r"__matchsql_matches_\d+")
_POSITION = "__matchsql_input_position"
_ROW_STATEMENTS = {
    duckdb.StatementType.SELECT,
    duckdb.StatementType.EXPLAIN,
    duckdb.StatementType.PRAGMA,
    duckdb.StatementType.CALL,
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
        # One event per running parallel match stream: interrupt() sets them all.
        self._cancels: set[threading.Event] = set()
        # Cursors running MATCH_RECOGNIZE inputs: interrupt() stops their sorts too.
        self._cursors: set[duckdb.DuckDBPyConnection] = set()

    @property
    def streams(self):
        """Live-stream hooks (DDL, continuous MATCH_RECOGNIZE); see matchsql.stream_statements."""
        if self._streams is None:
            from matchsql.stream_statements import StreamStatements

            self._streams = StreamStatements(self)
        return self._streams

    # -- statements ---------------------------------------------------------------

    def run(self, text: str):
        """Run every statement of ``text``; return the last statement's Result (or None)."""
        from matchsql.grammar import split_statements

        check_text(text)
        statements = split_statements(text)
        if not statements:
            return None
        result = None
        for statement, offset in statements:
            try:
                result = self._run_statement(statement)
            except Error as err:
                raise _relocate(err, text, offset) from None
            except MemoryError:
                raise _out_of_memory() from None
        return result

    def _run_statement(self, statement: str):
        if self._open_result is not None:
            self._open_result.close()
            self._open_result = None
        from matchsql import stats_statement  # SHOW STATS: the last continuous query's metrics

        if stats_statement.is_show_stats(statement):
            return stats_statement.show_stats(self)
        setting = _SET.match(statement)
        if setting and setting.group(1).lower() in Config.names():
            self.config.set(setting.group(1), _unquote(setting.group(2)))
            if setting.group(1).lower() == "threads":  # DuckDB's own setting of that name too
                return self._run_duckdb(statement, [])
            return None
        self.streams.reset()
        if _STREAM_DDL.match(statement):
            return self.streams.run_ddl(statement)
        if not _MATCH_RECOGNIZE.search(statement):
            return self._run_duckdb(statement, [])
        explained = _EXPLAIN.match(statement)
        if explained:  # parse and analysis recurse per nesting level: run_deep gives room
            return run_deep(lambda: self._explain_match_recognize(statement, explained.end()))
        return run_deep(lambda: self._run_match_recognize(statement))

    def _run_duckdb(self, sql: str, cleanups: list[Callable[[], None]]):
        """Run ``sql`` in DuckDB: rows stream lazily into a Result; other statements run now."""
        from matchsql.connection import Result

        self._failure.clear()
        try:
            statements = self.con.extract_statements(sql)
            if len(statements) != 1 or statements[0].type not in _ROW_STATEMENTS:
                self.con.execute(sql)
                _run_all(cleanups)
                self._raise_failure()
                return None
            reader = self.con.sql(sql).to_arrow_reader(self.config.batch_size)
        except duckdb.Error as exc:
            _run_all(cleanups)
            raise self._failure_or(exc) from None
        self._open_result = Result(reader, on_close=cleanups, translate=self._failure_or)
        return self._open_result

    def _run_match_recognize(self, statement: str):
        from matchsql.connection import Result
        from matchsql.grammar import parse
        from matchsql.grammar.nodes import MatchRecognizeTable

        trees = parse(statement)
        if len(trees) != 1:
            raise ParseError("expected one statement", sql=statement, offset=0)
        tree = trees[0]
        cleanups: list[Callable[[], None]] = []
        # Match streams not yet claimed by an enclosing MATCH_RECOGNIZE; each is
        # read once, by whichever connection runs the query that references it.
        pending: dict[str, pa.RecordBatchReader] = {}
        try:
            nodes = list(tree.find_all(MatchRecognizeTable, bfs=False))
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
        return self._run_duckdb(tree.sql(dialect="duckdb"), cleanups)

    # -- one MATCH_RECOGNIZE ------------------------------------------------------

    def _match_stream(self, node, statement: str, pending: dict[str, pa.RecordBatchReader],
                      cleanups: list) -> pa.RecordBatchReader:
        """Analyse ``node`` and return the lazy Arrow stream of its matches (see _match_source)."""
        stream = self.streams.stream_of(node)
        if stream is not None:  # a live stream: continuous input, not a DuckDB query
            return self.streams.match_reader(node, statement, stream).to_reader()
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
        inner = {view: pending.pop(view) for view in _VIEW.findall(input_sql) if view in pending}
        for view, reader in inner.items():  # zero-row stand-ins while the schema is read
            cursor.register(view, reader.schema.empty_table())
        schema = self._schema_of(cursor, input_sql, node, statement)
        for view, reader in inner.items():
            cursor.unregister(view)
            cursor.register(view, reader)
        spec = analyze(node, schema, sql=statement, con=self.con)
        check_pattern_size(spec.pattern, self.config.max_pattern_size, statement)
        if not spec.output_schema():
            # SQL:2016 asks ONE ROW PER MATCH for a partition column or a measure.
            raise SemanticError("ONE ROW PER MATCH without PARTITION BY needs at least one "
                                "measure: the output would have no columns",
                                sql=statement, offset=_offset_of(node.this))
        narrow = self._projected(node, spec)
        if narrow is not None:
            spec, input_sql = narrow
        return spec.output_schema(), self._match_batches(spec, cursor, input_sql)

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
            offset = _offset_of(node.this)
            raise type(err)(err.message, sql=statement, offset=offset) from None

    def _match_batches(self, spec: MatchSpec, cursor, input_sql: str) -> Iterator[pa.RecordBatch]:
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
        try:
            reader = cursor.sql(input_sql).to_arrow_reader(config.batch_size)
            try:  # plans are built once per spec: here, not racing in the workers
                choose_path(spec, config.execution_path)
            except Error:
                pass  # a forced path that does not apply: the first partition says so

            def new_run(key: tuple):
                return new_partition_matcher(spec, key, config)

            threads, _ = partition_threads(spec, config)
            whole, _ = whole_partitions(spec, config)
            if threads > 1:
                cancel = threading.Event()
                self._cancels.add(cancel)
                try:
                    yield from ParallelPartitionRouter(
                        spec.partition_by, new_run, threads,
                        chunk_rows=config.batch_size, cancel=cancel,
                        whole=whole.match if whole is not None else None).run(reader)
                finally:
                    self._cancels.discard(cancel)
            else:
                router = SortedPartitionRouter(spec.partition_by, new_run,
                                               whole.match if whole is not None else None)
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

    # -- EXPLAIN of a statement with MATCH_RECOGNIZE --------------------------------

    def _explain_match_recognize(self, statement: str, offset: int):
        """One row per line: for each MATCH_RECOGNIZE (innermost first) its chosen
        execution path, why, and its automaton program (see fsm/planner.explain).

        Inner MATCH_RECOGNIZEs are replaced by empty tables of their output
        schema so that outer ones can be analysed without running anything.
        """
        from matchsql.connection import Result
        from matchsql.fsm.planner import explain
        from matchsql.grammar import analyze, parse
        from matchsql.grammar.nodes import MatchRecognizeTable

        query = " " * offset + statement[offset:]  # keep offsets valid for error messages
        trees = parse(query)
        if len(trees) != 1:
            raise ParseError("expected one statement", sql=statement, offset=0)
        cursor = self.con.cursor()
        lines: list[str] = []
        try:
            nodes = list(trees[0].find_all(MatchRecognizeTable, bfs=False))
            for number, node in enumerate(reversed(nodes), 1):
                input_sql = _input_query(node)
                schema = self._schema_of(cursor, input_sql, node, query)
                spec = analyze(node, schema, sql=query, con=cursor)
                check_pattern_size(spec.pattern, self.config.max_pattern_size, query)
                view = f"__matchsql_matches_{next(_view_numbers)}"
                cursor.register(view, spec.output_schema().empty_table())
                node.replace(exp.Table(this=exp.to_identifier(view), alias=node.args.get("alias")))
                lines.append(f"-- MATCH_RECOGNIZE #{number} of {len(nodes)}")
                lines += explain(spec, self.config).splitlines()
        finally:
            cursor.close()
        table = pa.table({"explain": pa.array(lines, pa.string())})
        self._open_result = Result(pa.RecordBatchReader.from_batches(
            table.schema, table.to_batches()))
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
        for cancel in list(self._cancels):
            cancel.set()
        for cursor in list(self._cursors):
            try:
                cursor.interrupt()
            except duckdb.Error:
                pass
        self.streams.interrupt()
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
        return ExecutionError(_strip_prefix(message))


def direct_select(tree, nodes: list, limit_ok: bool = False):
    """The MATCH_RECOGNIZE of ``SELECT * FROM <row pattern recognition>`` with no other
    clause, whose result is exactly that table factor's output; None for any other
    statement. ``limit_ok``: a ``LIMIT n`` (:func:`plain_limit`) is allowed too; the
    caller then keeps the first n rows."""
    if len(nodes) != 1 or not isinstance(tree, exp.Select):
        return None
    if limit_ok and tree.args.get("limit") is not None and plain_limit(tree) is not None:
        tree = tree.copy()
        tree.set("limit", None)
        nodes = [next(tree.find_all(type(nodes[0]), bfs=False))]
    node = nodes[0]
    from_ = tree.args.get("from_") or tree.args.get("from")
    alias = node.args.get("alias")
    plain = (
        from_ is not None and from_.this is node
        and len(tree.expressions) == 1 and isinstance(tree.expressions[0], exp.Star)
        and not (isinstance(alias, exp.TableAlias) and alias.columns)
        and not any(tree.args.get(k) for k in (
            "joins", "where", "group", "having", "order", "limit", "offset", "qualify",
            "distinct", "with_", "with", "windows", "laterals", "pivots"))
    )
    return node if plain else None


def plain_limit(tree) -> int | None:
    """n of ``LIMIT n`` with a whole-number literal n; None for no LIMIT or any other."""
    limit = tree.args.get("limit")
    if not isinstance(limit, exp.Limit) or limit.args.get("offset") is not None:
        return None
    value = limit.args.get("expression")
    if isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit():
        return int(value.this)
    return None


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


class BatchSource:
    """The part of a RecordBatchReader that Result uses, over a generator it can close."""

    def __init__(self, schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> None:
        self.schema = schema
        self._batches = batches

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self._batches

    def close(self) -> None:
        self._batches.close()


def _out_of_memory() -> Error:
    """The error for a statement that ran out of memory despite the size checks."""
    return LimitExceededError(
        "the statement ran out of memory; lower its size (pattern, partitions) or raise "
        "the memory available to the process (max_buffered_rows and max_pattern_size "
        "bound the matchers)")


def _reader_error(exc: BaseException) -> Error:
    """The matchsql error for a failure the input's Arrow reader raised, without traceback."""
    message = str(exc).split("Detail: Python exception:")[0].strip()
    if "INTERRUPT" in message:
        return ExecutionError("statement interrupted")
    return ExecutionError(f"reading the MATCH_RECOGNIZE input failed: {message.splitlines()[0]}")


def _input_query(node, columns: list[str] | None = None) -> str:
    """DuckDB SQL for the row pattern input table, sorted by partition and order keys.

    CTEs of the enclosing statement that precede ``node`` stay visible.
    ``columns``, when given, are the only input columns selected.
    """
    source = node.this.sql(dialect="duckdb")
    select = "*" if columns is None else ", ".join(
        exp.to_identifier(c, quoted=True).sql(dialect="duckdb") for c in columns)
    keys = [p.sql(dialect="duckdb") for p in node.args.get("partition_by") or []]
    order = node.args.get("order")
    if order is not None:
        keys += [o.sql(dialect="duckdb") for o in order.expressions]
    if keys and order is None:
        # Without ORDER BY a partition keeps the input's order; DuckDB's sort is
        # not stable, so the input position breaks ties between equal keys.
        inner = "*" if columns is None else select  # the window carries no other column
        select = f"* EXCLUDE ({_POSITION})" if columns is None else select
        query = (f"SELECT {select} FROM (SELECT {inner}, row_number() OVER () "
                 f"AS {_POSITION} FROM {source}) ORDER BY "
                 + ", ".join(_column_name(p) for p in node.args["partition_by"])
                 + f", {_POSITION}")
    else:
        query = f"SELECT {select} FROM {source}"
        if keys:
            query += " ORDER BY " + ", ".join(keys)
    ctes = _visible_ctes(node)
    if ctes:
        query = "WITH " + ", ".join(c.sql(dialect="duckdb") for c in ctes) + " " + query
    return query


def _column_name(column: exp.Expression) -> str:
    """A partition column as an unqualified identifier, for use outside its table's scope."""
    return exp.to_identifier(column.name, quoted=True).sql(dialect="duckdb")


def _visible_ctes(node) -> list[exp.CTE]:
    """CTEs that the input of ``node`` may reference, outermost first."""
    visible: list[exp.CTE] = []
    child, parent = node, node.parent
    while parent is not None:
        if isinstance(parent, exp.With):
            # ``node`` sits inside one of these CTEs: only the earlier ones are
            # visible, and the owning statement must not add them all again.
            index = next(i for i, cte in enumerate(parent.expressions) if cte is child)
            visible = list(parent.expressions[:index]) + visible
            child = parent.parent
            parent = child.parent if child is not None else None
            continue
        with_ = parent.args.get("with_")
        if isinstance(with_, exp.With):
            visible = list(with_.expressions) + visible
        child, parent = parent, parent.parent
    return visible


def _offset_of(node: exp.Expression) -> int | None:
    for ident in node.find_all(exp.Identifier):
        start = ident.meta.get("start")
        if start is not None:
            return start
    return None


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
    return re.sub(r"^[A-Za-z ]+Error: ", "", message)
