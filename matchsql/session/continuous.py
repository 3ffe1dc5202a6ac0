"""Named continuous queries: a MATCH_RECOGNIZE over a stream whose matches go to a table,
that survives its process (the statements: :mod:`matchsql.grammar.continuous_ddl`).

    CREATE CONTINUOUS QUERY spikes WITH (checkpoint_interval = 1)
        AS INSERT INTO spike_log SELECT * FROM trades MATCH_RECOGNIZE (...)

The query runs in a thread of the process that created (or resumed) it.
Every ``checkpoint_interval`` seconds and/or ``checkpoint_rows`` tuples it
commits, in **one DuckDB transaction**, the sink rows of the matches found
since the last checkpoint, the matchers' state (the partition matchers in
the snapshot format of :mod:`matchsql.state_format`: data only, so opening a
database whose checkpoint was tampered with runs nothing, the query fails
with the reason) and the stream position (the sequence number of the
next tuple to process). So the sink and the state never disagree: after a
kill -9 the query restarts from its last checkpoint, replays the tuples
after it from the stream's log (the archive, then the ring, which keeps
every tuple the archive does not hold yet), finds again exactly the matches
it had not committed, and the sink receives every match exactly once. A
match's identity is (partition, start sequence number, match number): the
replay is deterministic, so it produces the same identities again, and none
of them was committed before.

The query needs a stream with an unfiltered archive (the log to replay) and
a file database (the checkpoints). It resumes when the next connection to
the database opens (``matchsql.connect(path)``), or with
``RESUME CONTINUOUS QUERY name``. ``checkpoint_interval = 0`` with no
``checkpoint_rows`` turns checkpoints off: sink rows are inserted each second
(and at the end) and nothing is saved (after a crash the query restarts at the
stream's current end: at most once). At end of stream the partitions are
closed, the last matches committed and the query is ``finished``. Producer
deaths do not stop it (it waits for a new producer).

Definitions and checkpoints live in the table ``__matchsql_continuous_queries``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
from sqlglot import exp

import matchsql.snapshot as snapshot
from matchsql.adaptive.continuous import live_batches
from matchsql.cancel import Cancellation
from matchsql.compiled_query import CompiledMatch, compile_match
from matchsql.errors import CatalogError, Error, ExecutionError, SemanticError
from matchsql.expr.batch_select import derive_input, project_result
from matchsql.grammar.continuous_ddl import (
    NAME_RULE,
    ContinuousQueryAction,
    ContinuousStatement,
    CreateContinuousQuery,
    valid_name,
)
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse
from matchsql.plan.spec import MatchSpec
from matchsql.planner import new_partition_matcher
from matchsql.results.result import table_result
from matchsql.router.hashed import HashPartitionRouter
from matchsql.storage import faults, liveness, permissions
from matchsql.storage.catalog import StreamDef
from matchsql.storage.live_reader import LiveReader
from matchsql.storage.shm_ring import W_HEAD_SEQ, W_TAIL_SEQ, Ring
from matchsql.workers.router import WorkerLost

TABLE = "__matchsql_continuous_queries"
_DDL = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    name VARCHAR NOT NULL, body VARCHAR NOT NULL, stream VARCHAR NOT NULL,
    checkpoint_interval DOUBLE NOT NULL, checkpoint_rows BIGINT NOT NULL,
    state VARCHAR NOT NULL, error VARCHAR, position BIGINT NOT NULL, snapshot BLOB,
    matches BIGINT NOT NULL, checkpoints BIGINT NOT NULL, last_checkpoint TIMESTAMP,
    owner_pid BIGINT, owner_started BIGINT)"""
DEFAULT_INTERVAL_S = 1.0
MAX_RESTARTS = 10  # returns to the last checkpoint after lost worker processes, at most
SHOW_SCHEMA = pa.schema([
    ("name", pa.string()), ("stream", pa.string()), ("state", pa.string()),
    ("position", pa.int64()), ("lag", pa.int64()), ("matches", pa.int64()),
    ("checkpoints", pa.int64()), ("last_checkpoint", pa.timestamp("us")),
    ("checkpoint_interval", pa.float64()), ("checkpoint_rows", pa.int64()),
    ("pid", pa.int64()), ("error", pa.string()),
])


@dataclass
class _Plan:
    """What one continuous query runs: its stream, matcher factory and sink statement."""

    definition: StreamDef
    partition_by: list[str]
    new_run: Any  # key -> partition matcher
    insert_sql: str  # the INSERT with the MATCH_RECOGNIZE replaced by ``view``
    view: str
    schema: pa.Schema  # the matches' columns
    index: snapshot.PlanIndex  # the plan objects a snapshot refers to
    query: CompiledMatch  # the compiled MATCH_RECOGNIZE (worker processes get its spec)

    @property
    def spec(self) -> MatchSpec:
        return self.query.spec


class ContinuousQueries:
    """The continuous-query statements of one :class:`~matchsql.session.executor.Executor`."""

    def __init__(self, executor) -> None:
        self.executor = executor
        self.runners: dict[str, _Runner] = {}
        _LIVE.add(self)

    # -- statements ------------------------------------------------------------------------

    def run(self, parsed: ContinuousStatement, statement: str):
        """One continuous-query statement (``parsed`` from ``statement``)."""
        if isinstance(parsed, CreateContinuousQuery):
            self.create(parsed, statement)
            return None
        if isinstance(parsed, ContinuousQueryAction):
            if parsed.action == "resume":
                self.resume(parsed.name)
            elif parsed.action == "stop":
                self.stop(parsed.name)
            else:
                self.drop(parsed.name, if_exists=parsed.if_exists)
            return None
        return table_result(self.show())

    def create(self, parsed: CreateContinuousQuery, statement: str) -> None:
        con = self.executor.con
        con.execute(_DDL)
        if self._row(parsed.name) is not None:
            if parsed.if_not_exists:
                return
            raise CatalogError(f"continuous query {parsed.name!r} already exists")
        interval = parsed.options.get("checkpoint_interval",
                                      0.0 if "checkpoint_rows" in parsed.options
                                      else DEFAULT_INTERVAL_S)
        rows = int(parsed.options.get("checkpoint_rows", 0))
        plan = self._plan(parsed.name, parsed.body, statement, parsed.body_offset)
        position = self._start_position(plan.definition)
        con.execute(f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?, ?, 'running', NULL, ?, NULL, 0, 0, "
                    "NULL, ?, ?)", [parsed.name, parsed.body, plan.definition.name, interval,
                                    rows, position, os.getpid(),
                                    liveness.start_time(os.getpid())])
        self._start(parsed.name, plan)

    def create_from(self, name: str, body: str, options: dict[str, float],
                    if_not_exists: bool = False) -> None:
        """The Python API's CREATE: the same checks as the statement's."""
        if not valid_name(name):
            raise SemanticError(NAME_RULE)
        for key, value in options.items():
            if value < 0:
                raise SemanticError(f"{key} must be a non-negative number")
        self.create(CreateContinuousQuery(name, body, 0, dict(options), if_not_exists), body)

    def resume(self, name: str) -> None:
        row = self._require(name)
        name = row["name"]
        runner = self.runners.get(name)
        if runner is not None and runner.thread.is_alive():
            raise ExecutionError(f"continuous query {name!r} is running already")
        if row["state"] == "finished":
            raise ExecutionError(f"continuous query {name!r} finished (its stream ended)")
        if row["state"] == "running" and row["owner_pid"] != os.getpid() and \
                liveness.alive(row["owner_pid"], row["owner_started"]):
            raise ExecutionError(f"continuous query {name!r} runs in process "
                                 f"{row['owner_pid']}")
        plan = self._plan(name, row["body"], row["body"], 0)
        self.executor.con.execute(
            f"UPDATE {TABLE} SET state = 'running', error = NULL, owner_pid = ?, "
            "owner_started = ? WHERE name = ?",
            [os.getpid(), liveness.start_time(os.getpid()), name])
        self._start(name, plan, saved=row["snapshot"], position=row["position"])

    def resume_interrupted(self) -> list[str]:
        """Resume every query that was running in a process that died (on connect)."""
        if not self._has_table():
            return []
        resumed = []
        for row in self._rows():
            if row["state"] == "running" and not (
                    row["name"] in self.runners
                    or liveness.alive(row["owner_pid"], row["owner_started"])):
                with contextlib.suppress(Error):
                    self.resume(row["name"])
                    resumed.append(row["name"])
        return resumed

    def stop(self, name: str, state: str = "stopped") -> None:
        """Stop the query's thread after a last checkpoint (it resumes with RESUME)."""
        name = self._require(name)["name"]
        runner = self.runners.pop(name, None)
        if runner is not None:
            runner.stop(state)
        else:
            self.executor.con.execute(f"UPDATE {TABLE} SET state = ? WHERE name = ? "
                                      "AND state = 'running'", [state, name])

    def drop(self, name: str, *, if_exists: bool = False) -> None:
        row = self._row(name)
        if row is None:
            if if_exists:
                return
            raise CatalogError(f"continuous query {name!r} does not exist")
        name = row["name"]
        runner = self.runners.pop(name, None)
        if runner is not None:
            runner.stop("stopped")
        self.executor.con.execute(f"DELETE FROM {TABLE} WHERE name = ?", [name])

    def close(self) -> None:
        """The connection closes: stop the threads, leaving their queries to resume."""
        for name in list(self.runners):
            self.runners.pop(name).stop("running")

    def show(self) -> pa.Table:
        if not self._has_table():
            return SHOW_SCHEMA.empty_table()
        out = []
        for row in self._rows():
            runner = self.runners.get(row["name"])
            live = runner is not None and runner.thread.is_alive()
            state = row["state"]
            if state == "running" and not live and not liveness.alive(row["owner_pid"],
                                                                      row["owner_started"]):
                state = "interrupted"
            position = runner.position if live else row["position"]
            out.append({
                "name": row["name"], "stream": row["stream"], "state": state,
                "position": position, "lag": self._lag(row["stream"], position),
                "matches": (runner.committed if live else row["matches"]),
                "checkpoints": runner.checkpoints if live else row["checkpoints"],
                "last_checkpoint": row["last_checkpoint"],
                "checkpoint_interval": row["checkpoint_interval"],
                "checkpoint_rows": row["checkpoint_rows"],
                "pid": row["owner_pid"] if state == "running" else None,
                "error": row["error"],
            })
        return pa.Table.from_pylist(out, schema=SHOW_SCHEMA)

    # -- helpers ------------------------------------------------------------------------------

    def _lag(self, stream: str, position: int) -> int | None:
        """Tuples written to the stream that the query has not processed yet."""
        definition = self.executor.streams.named(stream)
        if definition is None:
            return None
        try:
            ring = Ring.attach(definition.segment)
        except Error:
            return None
        try:
            return max(0, ring.word(W_HEAD_SEQ) - position)
        finally:
            ring.close()

    def _has_table(self) -> bool:
        cursor = self.executor.con.cursor()
        try:
            return bool(cursor.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?",
                                       [TABLE]).fetchall()[0][0])
        finally:
            cursor.close()

    def _rows(self) -> list[dict]:
        cursor = self.executor.con.cursor()
        try:
            result = cursor.execute(f"SELECT * FROM {TABLE} ORDER BY name")
            names = [d[0] for d in result.description]
            return [dict(zip(names, values)) for values in result.fetchall()]
        finally:
            cursor.close()

    def _row(self, name: str) -> dict | None:
        if not self._has_table():
            return None
        return next((r for r in self._rows() if r["name"].lower() == name.lower()), None)

    def _require(self, name: str) -> dict:
        row = self._row(name)
        if row is None:
            raise CatalogError(f"continuous query {name!r} does not exist")
        return row

    def _plan(self, name: str, body: str, statement: str, offset: int) -> _Plan:
        """Compile the INSERT ... SELECT ... FROM stream MATCH_RECOGNIZE (...) body.

        The body is parsed after ``offset`` blanks, so that its errors point where it
        stands in ``statement`` (as a view's or a prepared statement's body does)."""
        body = " " * offset + body
        trees = parse(body)
        tree = trees[0] if len(trees) == 1 else None
        nodes = list(tree.find_all(MatchRecognizeTable, bfs=False)) if tree is not None else []
        if not isinstance(tree, exp.Insert) or len(nodes) != 1:
            raise SemanticError("a continuous query is one INSERT INTO <table> SELECT ... FROM "
                                "<stream> MATCH_RECOGNIZE (...) with one MATCH_RECOGNIZE",
                                sql=statement, offset=offset)
        node = nodes[0]
        definition = self.executor.streams.stream_of(node)
        if definition is None:
            raise SemanticError(f"the MATCH_RECOGNIZE of a continuous query reads a stream; "
                                f"{node.this.sql(dialect='duckdb')} is no live stream",
                                sql=statement, offset=offset)
        if not definition.archive or definition.archive_filter:
            raise SemanticError(f"stream {definition.name!r} needs an archive without "
                                "archive_filter for a continuous query: the archive is the "
                                "log it replays after a crash", sql=statement, offset=offset)
        schema = self.executor.streams.schema_of_stream(definition)
        config = self.executor.config
        compiled = compile_match(node, schema, sql=body, con=self.executor.con, config=config,
                                 cache=self.executor.compiled, watch=self.executor.watch)
        spec = compiled.spec

        def new_run(key: tuple):
            return new_partition_matcher(spec, key, config, live=True)

        roots = {"spec": spec, "config": config, "template": new_run(())}
        index = snapshot.PlanIndex(roots)
        try:
            index.dumps({(): new_run(())})
        except Exception as exc:  # noqa: BLE001 - any pickling failure means the same
            raise SemanticError(f"this MATCH_RECOGNIZE's matcher state cannot be checkpointed "
                                f"(it runs on the {type(roots['template']).__name__}: "
                                f"{type(exc).__name__}: {exc})") from None
        view = f"__matchsql_cq_{name.lower()}"
        node.replace(exp.Table(this=exp.to_identifier(view), alias=node.args.get("alias")))
        return _Plan(definition, spec.partition_by, new_run, tree.sql(dialect="duckdb"), view,
                     spec.result_schema(), index, compiled)

    def _start_position(self, definition: StreamDef) -> int:
        """A new query starts at the oldest tuple the ring still holds (the stream's
        unread tuples are its input; the archive's history is not)."""
        ring = Ring.attach(definition.segment)
        try:
            return ring.word(W_TAIL_SEQ)
        finally:
            ring.close()

    def _start(self, name: str, plan: _Plan, *, saved: bytes | None = None,
               position: int | None = None) -> None:
        row = self._require(name)
        runner = _Runner(self.executor, name, plan, row, saved,
                         row["position"] if position is None else position)
        self.runners[name] = runner
        runner.thread.start()


# Every instance, so that the process stops their threads before it exits: a daemon
# thread cut off inside DuckDB at interpreter shutdown aborts the process.
_LIVE: weakref.WeakSet[ContinuousQueries] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for queries in list(_LIVE):
        with contextlib.suppress(Exception):
            queries.close()


class _Runner:
    """The thread of one running continuous query."""

    def __init__(self, executor, name: str, plan: _Plan, row: dict, saved: bytes | None,
                 position: int) -> None:
        self.executor = executor
        self.name = name
        self.plan = plan
        self.interval = float(row["checkpoint_interval"])
        self.every_rows = int(row["checkpoint_rows"])
        self.checkpointing = bool(self.interval or self.every_rows)
        self.saved = saved
        self.position = position
        self.committed = int(row["matches"])
        self.checkpoints = int(row["checkpoints"])
        self.replayed = 0  # tuples read again from the log after a restart
        self.restarts = 0  # times a lost worker process sent the query back to its checkpoint
        self.snapshot_bytes = 0  # the largest matcher-state snapshot written
        # Set to a list to record each live batch's latency (bench/checkpoint.py).
        self.latencies_ns: list[int] | None = None
        self._pending: list[pa.RecordBatch] = []
        self._rows_since = 0
        self._last = time.monotonic()
        self._halt = threading.Event()
        self._final_state = "stopped"
        self._router: Any = None  # a HashPartitionRouter, or the workers' StreamRouter
        self._cursor: duckdb.DuckDBPyConnection | None = None
        # DuckDB's parts of the query: derived input columns, measures over the matches
        self._derive = derive_input(plan.spec)
        self._project = project_result(plan.spec)
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=f"matchsql-cq-{name}")

    def stop(self, state: str) -> None:
        self._final_state = state
        self._halt.set()
        self.thread.join(30)

    def _run(self) -> None:
        while self._run_once():
            if self.restarts >= MAX_RESTARTS:  # a worker that dies every time: say so
                cursor = self.executor.con.cursor()
                with contextlib.suppress(Exception):
                    cursor.execute(
                        f"UPDATE {TABLE} SET state = 'failed', error = ? WHERE name = ?",
                        [f"worker processes died {self.restarts + 1} times; the query "
                         "stopped at its last checkpoint", self.name])
                cursor.close()
                return
            self._back_to_checkpoint()

    def _back_to_checkpoint(self) -> None:
        """A worker process died: what it held is lost, so the whole query goes back to
        its last checkpoint (state and position; the uncommitted matches are found again
        by the replay from the stream's log, so the sink gets each exactly once)."""
        cursor = self.executor.con.cursor()
        try:
            self.saved, self.position = cursor.execute(
                f"SELECT snapshot, position FROM {TABLE} WHERE name = ?",
                [self.name]).fetchall()[0]
        finally:
            cursor.close()
        self._pending = []
        self._rows_since = 0
        self.restarts += 1

    def _new_router(self):
        """The partitions' runs: in worker processes with ``SET workers = N`` (when the
        pool is free), else in this thread."""
        config = self.executor.config
        router = self.executor.workers.stream_router(
            self.plan.query, config, Cancellation(), self.plan.new_run, live=False)
        if router is not None:
            return router
        return HashPartitionRouter(self.plan.partition_by, self.plan.new_run)

    def _run_once(self) -> bool:
        """Run until the end of the stream, a stop or a failure; True when a lost worker
        process sends the query back to its last checkpoint."""
        restart = False
        con = self.executor.con
        cursor = self._cursor = con.cursor()
        history = con.cursor()
        config = self.executor.config
        # A checkpoint falls between batches: checkpoint_rows bounds a batch too.
        batch_rows = min(config.batch_size, self.every_rows or config.batch_size)
        reader = LiveReader(self.plan.definition, on_producer_death="wait",
                            cancelled=self._halt.is_set, max_rows=batch_rows,
                            label=f"cq {self.name}")
        try:
            archive = reader.take_archive(history)
            reader.open()
            reader.on_wait = self._maybe_checkpoint
            router = self._router = self._new_router()
            if self.saved:
                router.runs = self.plan.index.loads(self.saved)
            start = self.position
            if not self.checkpointing:
                start = max(start, reader.next_seq)  # nothing to replay from: at most once
            next_seq = start
            if archive is not None and self.checkpointing:
                for last, batch in archive.history(history, batch_rows, since=start):
                    self.replayed += batch.num_rows
                    self._feed(batch, last + 1)
                    if self._halt.is_set():
                        raise ExecutionError("statement interrupted")
                next_seq = max(next_seq, self.position)
            self.position = next_seq  # live batches continue from there without a gap
            for batch, enqueue_sum_ns in live_batches(reader, next_seq):
                self._feed(batch, self.position + batch.num_rows)
                if self.latencies_ns is not None:  # enqueue to processed (and checkpointed)
                    self.latencies_ns.append(time.monotonic_ns()
                                             - enqueue_sum_ns // max(1, batch.num_rows))
            for out in router.finish():
                self._pending.append(out)
            self._checkpoint("finished")
        except WorkerLost:
            if self.checkpointing and not self._halt.is_set():
                restart = True
            else:
                self._fail()
        except ExecutionError:
            if self._halt.is_set():  # stopped between batches: the state is consistent
                with contextlib.suppress(Error, duckdb.Error):
                    self._checkpoint(self._final_state)
            else:
                self._fail()
        except (Error, duckdb.Error):
            self._fail()
        finally:
            with contextlib.suppress(Exception):
                reader.close()
            if hasattr(self._router, "close"):  # worker processes: the pool is free again
                with contextlib.suppress(Exception):
                    self._router.close()
            for c in (history, cursor):
                with contextlib.suppress(Exception):
                    c.close()
        return restart

    def _fail(self) -> None:
        error = sys.exc_info()[1]
        message = getattr(error, "message", None) or str(error).splitlines()[0]
        with contextlib.suppress(Exception):
            assert self._cursor is not None
            self._cursor.execute(f"UPDATE {TABLE} SET state = 'failed', error = ? "
                                 "WHERE name = ?", [message, self.name])

    def _feed(self, batch: pa.RecordBatch, next_position: int) -> None:
        assert self._router is not None
        self._pending.extend(self._router.route(self._derive(batch) if self._derive else batch))
        self.position = next_position
        self._rows_since += batch.num_rows
        self._maybe_checkpoint()

    def _maybe_checkpoint(self) -> None:
        if not self.checkpointing:  # sink rows only, each second (no state, no position)
            if self._pending and time.monotonic() - self._last >= DEFAULT_INTERVAL_S:
                self._insert(self._pending)
                self.committed += sum(b.num_rows for b in self._pending)
                self._pending = []
                self._last = time.monotonic()
            return
        due = (self.interval and time.monotonic() - self._last >= self.interval) or \
            (self.every_rows and self._rows_since >= self.every_rows)
        if due and (self._rows_since or self._pending):
            self._checkpoint("running")

    def _insert(self, batches: list[pa.RecordBatch]) -> None:
        cursor = self._cursor
        assert cursor is not None
        if self._project is not None:
            batches = [self._project(b) for b in batches]
        cursor.register(self.plan.view, pa.Table.from_batches(batches, schema=self.plan.schema))
        try:
            cursor.execute(self.plan.insert_sql)
        finally:
            cursor.unregister(self.plan.view)

    def _checkpoint(self, final: str) -> None:
        """Sink rows, matcher state and position, in one transaction."""
        cursor, router = self._cursor, self._router
        assert cursor is not None and router is not None
        state = self.plan.index.dumps(router.runs) if self.checkpointing else None
        self.snapshot_bytes = max(self.snapshot_bytes, len(state or b""))
        found = sum(b.num_rows for b in self._pending)
        cursor.begin()
        try:
            if self._pending:
                self._insert(self._pending)
            cursor.execute(f"UPDATE {TABLE} SET position = ?, snapshot = ?, "
                           "matches = matches + ?, checkpoints = checkpoints + 1, "
                           "last_checkpoint = now()::TIMESTAMP, state = ? WHERE name = ?",
                           [self.position, state, found, final, self.name])
            faults.point("checkpoint")  # everything written, nothing committed
            cursor.commit()
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                cursor.rollback()
            raise
        permissions.owner_only_database(self.executor.streams.database)  # a new log: 0600
        self._pending = []
        self._rows_since = 0
        self._last = time.monotonic()
        self.committed += found
        self.checkpoints += 1
