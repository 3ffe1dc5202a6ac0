"""Named continuous queries: a MATCH_RECOGNIZE over a stream whose matches go to a table,
that survives its process (the statements: :mod:`matchsql.grammar.continuous_ddl`).

    CREATE CONTINUOUS QUERY spikes WITH (checkpoint_interval = 1)
        AS INSERT INTO spike_log SELECT * FROM trades MATCH_RECOGNIZE (...)

The query runs in a thread of the process that created (or resumed) it.
Every ``checkpoint_interval`` seconds and/or ``checkpoint_rows`` tuples it
commits, in **one DuckDB transaction**, the sink rows of the matches found
since the last checkpoint, the matchers' state (the partition matchers in
the snapshot format of :mod:`matchsql.saved_state.state_format`: data only, so opening a
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

Whatever ends a query's thread, SHOW CONTINUOUS QUERIES never says
``running`` for it: an error it did not expect (a worker pool that cannot
start and keeps failing, a bug) makes it ``failed`` with the cause, also where
the database cannot be written any more (the cause is kept in memory then),
and its stream reader is closed on every path, so that no producer waits on a
reader that is gone. A lost worker process - also one killed while the pool
starts - sends it back to its last checkpoint (at most :data:`MAX_RESTARTS`
times, after a pause that grows each time).

A disk that fills up under the database fails a checkpoint once: DuckDB
takes back what the commit wrote to its log, the query keeps its matches and
state in memory, stops reading and shows ``waiting: disk full`` (the error
column says which write failed); it commits the same checkpoint once the
disk has room for about twice what the failed commit held, and goes on by
itself (0 lost, 0 duplicated sink rows). Where the estimate was short and the
commit fails again, the room it waits for doubles.

Definitions and checkpoints live in the table ``__matchsql_continuous_queries``.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
from sqlglot import exp

import matchsql.saved_state.snapshot as snapshot
from matchsql.config import is_internal
from matchsql.engine.compiled_query import CompiledMatch, compile_match
from matchsql.engine.planner import new_partition_matcher
from matchsql.errors import (
    CatalogError,
    Error,
    ExecutionError,
    SemanticError,
    internal_error,
    one_line,
    without_kind,
)
from matchsql.execution.live_source import LiveSource
from matchsql.execution.router.hashed import HashPartitionRouter
from matchsql.execution.workers.pool import WorkerLost
from matchsql.expr.batch_select import derive_input, project_result
from matchsql.grammar.continuous_ddl import (
    NAME_RULE,
    OPTIONS,
    ContinuousQueryAction,
    ContinuousStatement,
    CreateContinuousQuery,
    check_option,
    valid_name,
)
from matchsql.grammar.nodes import MatchRecognizeTable
from matchsql.grammar.statements import parse
from matchsql.plan.spec import MatchSpec
from matchsql.results.result import table_result
from matchsql.runtime.cancel import Cancellation
from matchsql.storage import faults, liveness, permissions
from matchsql.storage.catalog import StreamDef
from matchsql.storage.live_reader import LiveReader
from matchsql.storage.shm_ring import W_HEAD_SEQ, W_TAIL_SEQ, Ring

TABLE = "__matchsql_continuous_queries"
_DDL = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    name VARCHAR NOT NULL, body VARCHAR NOT NULL, stream VARCHAR NOT NULL,
    checkpoint_interval DOUBLE NOT NULL, checkpoint_rows BIGINT NOT NULL,
    state VARCHAR NOT NULL, error VARCHAR, position BIGINT NOT NULL, snapshot BLOB,
    matches BIGINT NOT NULL, checkpoints BIGINT NOT NULL, last_checkpoint TIMESTAMP,
    owner_pid BIGINT, owner_started BIGINT)"""
DEFAULT_INTERVAL_S = 1.0
MAX_RESTARTS = 10  # returns to the last checkpoint after lost worker processes, at most
RESTART_PAUSE_S = 0.05  # before the first return to the checkpoint; doubles, up to 2 s
#: The state SHOW CONTINUOUS QUERIES gives a query whose checkpoint waits for disk space.
WAITING_DISK_FULL = "waiting: disk full"
#: How often a query waiting for disk space looks at the free space.
DISK_POLL_S = 0.1
#: Room asked for beyond twice the failed commit's bytes (DuckDB's log has overhead).
DISK_MARGIN = 64 << 10
SHOW_SCHEMA = pa.schema(
    [
        ("name", pa.string()),
        ("stream", pa.string()),
        ("state", pa.string()),
        ("position", pa.int64()),
        ("lag", pa.int64()),
        ("matches", pa.int64()),
        ("checkpoints", pa.int64()),
        ("last_checkpoint", pa.timestamp("us")),
        ("checkpoint_interval", pa.float64()),
        ("checkpoint_rows", pa.int64()),
        ("pid", pa.int64()),
        ("error", pa.string()),
    ]
)


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
        interval = parsed.options.get(
            "checkpoint_interval",
            0.0 if "checkpoint_rows" in parsed.options else DEFAULT_INTERVAL_S,
        )
        rows = int(parsed.options.get("checkpoint_rows", 0))
        plan = self._plan(parsed.name, parsed.body, statement, parsed.body_offset)
        position = self._start_position(plan.definition)
        con.execute(
            f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?, ?, 'running', NULL, ?, NULL, 0, 0, "
            "NULL, ?, ?)",
            [
                parsed.name,
                parsed.body,
                plan.definition.name,
                interval,
                rows,
                position,
                os.getpid(),
                liveness.start_time(os.getpid()),
            ],
        )
        self._start(parsed.name, plan)

    def create_from(
        self, name: str, body: str, options: dict[str, float], if_not_exists: bool = False
    ) -> None:
        """The Python API's CREATE: the same checks as the statement's."""
        if not valid_name(name):
            raise SemanticError(NAME_RULE)
        checked: dict[str, float] = {}
        for key, value in options.items():
            if key not in OPTIONS:
                raise SemanticError(
                    f"unknown continuous query option {key!r}; known: {', '.join(OPTIONS)}"
                )
            try:
                checked[key] = check_option(key, value)
            except ValueError as rule:
                raise SemanticError(f"{key} must be {rule}, got {value!r}") from None
        node = CreateContinuousQuery(
            this=name,
            body=body,
            body_offset=0,
            options=tuple(checked.items()),
            if_not_exists=if_not_exists,
        )
        self.create(node, body)

    def resume(self, name: str) -> None:
        row = self._require(name)
        name = row["name"]
        runner = self.runners.get(name)
        if runner is not None and runner.thread.is_alive():
            raise ExecutionError(f"continuous query {name!r} is running already")
        if row["state"] == "finished":
            raise ExecutionError(f"continuous query {name!r} finished (its stream ended)")
        if (
            row["state"] == "running"
            and row["owner_pid"] != os.getpid()
            and liveness.alive(row["owner_pid"], row["owner_started"])
        ):
            raise ExecutionError(f"continuous query {name!r} runs in process {row['owner_pid']}")
        plan = self._plan(name, row["body"], row["body"], 0)
        self.executor.con.execute(
            f"UPDATE {TABLE} SET state = 'running', error = NULL, owner_pid = ?, "
            "owner_started = ? WHERE name = ?",
            [os.getpid(), liveness.start_time(os.getpid()), name],
        )
        self._start(name, plan, saved=row["snapshot"], position=row["position"])

    def resume_interrupted(self) -> list[str]:
        """Resume every query that was running in a process that died (on connect)."""
        if not self._has_table():
            return []
        resumed = []
        for row in self._rows():
            if row["state"] == "running" and not (
                row["name"] in self.runners
                or liveness.alive(row["owner_pid"], row["owner_started"])
            ):
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
            self.executor.con.execute(
                f"UPDATE {TABLE} SET state = ? WHERE name = ? AND state = 'running'", [state, name]
            )

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
        # Which threads run, asked before the catalog is read: a thread writes its last
        # state there before it ends, so a row read after this is at least as new.
        running = {name: runner.thread.is_alive() for name, runner in self.runners.items()}
        for row in self._rows():
            runner = self.runners.get(row["name"])
            # A row whose query has ended (finished, stopped, failed) has its final counts
            # in the catalog, written with that state in one transaction; the thread's own
            # counters catch up a moment after the commit.
            live_runner = (
                runner if running.get(row["name"], True) and row["state"] == "running" else None
            )
            live = live_runner is not None
            state, error = row["state"], row["error"]
            if (
                state == "running"
                and not live
                and not liveness.alive(row["owner_pid"], row["owner_started"])
            ):
                state = "interrupted"
            if runner is not None and state == "running":
                # What the catalog cannot say: the thread died where the database could
                # not be written, or a checkpoint waits for disk space.
                if not live and runner.thread.ident is not None:
                    state, error = "failed", runner.error or "its thread ended unexpectedly"
                elif live and runner.waiting is not None:
                    state, error = WAITING_DISK_FULL, runner.waiting
            if live_runner is not None:
                position = live_runner.position
                matches, checkpoints = live_runner.committed, live_runner.checkpoints
            else:
                position = row["position"]
                matches, checkpoints = row["matches"], row["checkpoints"]
            out.append(
                {
                    "name": row["name"],
                    "stream": row["stream"],
                    "state": state,
                    "position": position,
                    "lag": self._lag(row["stream"], position),
                    "matches": matches,
                    "checkpoints": checkpoints,
                    "last_checkpoint": row["last_checkpoint"],
                    "checkpoint_interval": row["checkpoint_interval"],
                    "checkpoint_rows": row["checkpoint_rows"],
                    "pid": row["owner_pid"] if state in ("running", WAITING_DISK_FULL) else None,
                    "error": error,
                }
            )
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
            return bool(
                cursor.execute(
                    "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [TABLE]
                ).fetchall()[0][0]
            )
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
            raise SemanticError(
                "a continuous query is one INSERT INTO <table> SELECT ... FROM "
                "<stream> MATCH_RECOGNIZE (...) with one MATCH_RECOGNIZE",
                sql=statement,
                offset=offset,
            )
        node = nodes[0]
        definition = self.executor.streams.stream_of(node)
        if definition is None:
            raise SemanticError(
                f"the MATCH_RECOGNIZE of a continuous query reads a stream; "
                f"{node.this.sql(dialect='duckdb')} is no live stream",
                sql=statement,
                offset=offset,
            )
        if not definition.archive or definition.archive_filter:
            raise SemanticError(
                f"stream {definition.name!r} needs an archive without "
                "archive_filter for a continuous query: the archive is the "
                "log it replays after a crash",
                sql=statement,
                offset=offset,
            )
        schema = self.executor.streams.schema_of_stream(definition)
        config = self.executor.config
        compiled = compile_match(
            node,
            schema,
            sql=body,
            con=self.executor.con,
            config=config,
            cache=self.executor.compiled,
            watch=self.executor.watch,
        )
        spec = compiled.spec

        def new_run(key: tuple):
            return new_partition_matcher(spec, key, config, live=True)

        roots = {"spec": spec, "config": config, "template": new_run(())}
        index = snapshot.PlanIndex(roots)
        try:
            index.dumps({(): new_run(())})
        except Exception as exc:  # noqa: BLE001 - any pickling failure means the same
            raise SemanticError(
                f"this MATCH_RECOGNIZE's matcher state cannot be checkpointed "
                f"(it runs on the {type(roots['template']).__name__}: "
                f"{type(exc).__name__}: {exc})"
            ) from None
        view = f"__matchsql_cq_{name.lower()}"
        node.replace(exp.Table(this=exp.to_identifier(view), alias=node.args.get("alias")))
        plan = _Plan(
            definition,
            spec.partition_by,
            new_run,
            tree.sql(dialect="duckdb"),
            view,
            spec.result_schema(),
            index,
            compiled,
        )
        self._check_sink(tree, plan, statement, offset)
        return plan

    def _check_sink(self, tree: exp.Insert, plan: _Plan, statement: str, offset: int) -> None:
        """Refuse a sink the first checkpoint could not write to (a missing table or schema,
        a view, a column count that does not fit, matchsql's own tables): DuckDB binds the
        INSERT over an empty input of the query's result schema, without running it."""
        target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        if isinstance(target, exp.Table):  # point at the sink's name
            first = next((part for part in target.parts if "start" in part.meta), None)
            offset = first.meta["start"] if first is not None else offset
        if isinstance(target, exp.Table) and is_internal(target.name):
            raise SemanticError(
                f"{target.name} is matchsql's own table, not a sink", sql=statement, offset=offset
            )
        cursor = self.executor.con.cursor()
        try:
            cursor.register(plan.view, plan.schema.empty_table())
            cursor.execute("EXPLAIN " + plan.insert_sql)
        except duckdb.Error as error:
            raise SemanticError(
                f"the continuous query's sink cannot take its rows: "
                f"{without_kind(one_line(str(error)))}",
                sql=statement,
                offset=offset,
            ) from None
        finally:
            cursor.close()

    def _start_position(self, definition: StreamDef) -> int:
        """A new query starts at the oldest tuple the ring still holds (the stream's
        unread tuples are its input; the archive's history is not)."""
        ring = Ring.attach(definition.segment)
        try:
            return ring.word(W_TAIL_SEQ)
        finally:
            ring.close()

    def _start(
        self, name: str, plan: _Plan, *, saved: bytes | None = None, position: int | None = None
    ) -> None:
        row = self._require(name)
        runner = _Runner(
            self.executor, name, plan, row, saved, row["position"] if position is None else position
        )
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

    def __init__(
        self, executor, name: str, plan: _Plan, row: dict, saved: bytes | None, position: int
    ) -> None:
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
        self.error: str | None = None  # why the thread ended, where the catalog cannot say
        self.last_loss: str | None = None  # the last lost worker's message
        self.waiting: str | None = None  # the failed write while a checkpoint waits for room
        self.disk_full_failures = 0  # commits that failed for a full disk
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
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"matchsql-cq-{name}")

    def stop(self, state: str) -> None:
        self._final_state = state
        self._halt.set()
        self.thread.join(30)

    def _run(self) -> None:
        """The thread: the query, back to its last checkpoint after each lost worker.
        Whatever ends it, the query is not left ``running`` (see the module)."""
        try:
            while self._run_once():
                if self.restarts >= MAX_RESTARTS:  # a worker that dies every time: say so
                    self._set_failed(
                        f"worker processes died {self.restarts + 1} times "
                        f"(the last: {self.last_loss}); the query stopped at "
                        "its last checkpoint"
                    )
                    return
                # A pool that failed to start may fail again at once: not in a tight loop.
                if self._halt.wait(min(2.0, RESTART_PAUSE_S * 2**self.restarts)):
                    self._set_state(self._final_state)  # stopped: the checkpoint stands
                    return
                self._back_to_checkpoint()
        except BaseException as exc:  # noqa: BLE001 - a thread has no caller to raise to
            self._set_failed(_describe(exc))

    def _set_failed(self, message: str) -> None:
        """Mark the query failed with ``message`` (kept here too: the database may not be
        writable, and SHOW then reads it from here)."""
        self.error = message
        self._set_state("failed", message)

    def _set_state(self, state: str, error: str | None = None) -> None:
        with contextlib.suppress(Exception):
            cursor = self.executor.con.cursor()
            try:
                cursor.execute(
                    f"UPDATE {TABLE} SET state = ?, error = ? WHERE name = ?",
                    [state, error, self.name],
                )
            finally:
                cursor.close()

    def _back_to_checkpoint(self) -> None:
        """A worker process died: what it held is lost, so the whole query goes back to
        its last checkpoint (state and position; the uncommitted matches are found again
        by the replay from the stream's log, so the sink gets each exactly once)."""
        cursor = self.executor.con.cursor()
        try:
            self.saved, self.position = cursor.execute(
                f"SELECT snapshot, position FROM {TABLE} WHERE name = ?", [self.name]
            ).fetchall()[0]
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
            self.plan.query, config, Cancellation(), self.plan.new_run, live=False
        )
        if router is not None:
            return router
        return HashPartitionRouter(self.plan.partition_by, self.plan.new_run)

    def _run_once(self) -> bool:
        """Run until the end of the stream, a stop or a failure; True when a lost worker
        process sends the query back to its last checkpoint."""
        restart = False
        con = self.executor.con
        config = self.executor.config
        # A checkpoint falls between batches: checkpoint_rows bounds a batch too.
        batch_rows = min(config.batch_size, self.every_rows or config.batch_size)
        self._router = None
        cursor = history = reader = source = None
        try:
            cursor = self._cursor = con.cursor()
            history = con.cursor()
            reader = LiveReader(
                self.plan.definition,
                on_producer_death="wait",
                cancelled=self._halt.is_set,
                max_rows=batch_rows,
                label=f"cq {self.name}",
            )
            source = LiveSource(reader, history, batch_rows)
            reader.open()
            reader.on_wait = self._maybe_checkpoint
            router = self._router = self._new_router()
            if self.saved:
                router.runs = self.plan.index.loads(self.saved)
            source.next_seq = self.position
            if self.checkpointing:  # the checkpoint's position on, from the stream's log
                for batch, _ in source.history():
                    self.replayed += batch.num_rows
                    self._feed(batch, source.next_seq)
                    if self._halt.is_set():
                        raise ExecutionError("statement interrupted")
            else:  # nothing to replay from: at most once
                source.next_seq = max(source.next_seq, reader.next_seq)
            self.position = source.next_seq  # live batches continue from there without a gap
            for batch, enqueue_sum_ns in source.live():
                self._feed(batch, source.next_seq)
                if self.latencies_ns is not None:  # enqueue to processed (and checkpointed)
                    self.latencies_ns.append(
                        time.monotonic_ns() - enqueue_sum_ns // max(1, batch.num_rows)
                    )
            for out in router.finish():
                self._pending.append(out)
            self._checkpoint("finished")
        except WorkerLost as exc:  # also a pool that did not start
            self.last_loss = exc.message
            if self.checkpointing and not self._halt.is_set():
                restart = True
            else:
                self._set_failed(exc.message)
        except ExecutionError as exc:
            if self._halt.is_set():  # stopped between batches: the state is consistent
                with contextlib.suppress(Error, duckdb.Error):
                    self._checkpoint(self._final_state)
            else:
                self._set_failed(exc.message)
        except Exception as exc:  # noqa: BLE001 - DuckDB's, a bug: failed, with the cause
            self._set_failed(_describe(exc))
        finally:
            if reader is not None:  # its ring position goes: no producer waits for it
                with contextlib.suppress(Exception):
                    reader.close()
            if self._router is not None:  # worker processes: the pool is free again
                with contextlib.suppress(Exception):
                    self._router.close()
            if source is not None:
                with contextlib.suppress(Exception):
                    source.close()
            for c in (history, cursor):
                if c is not None:
                    with contextlib.suppress(Exception):
                        c.close()
        return restart

    def _feed(self, batch: pa.RecordBatch, next_position: int) -> None:
        assert self._router is not None
        self._pending.extend(self._router.route(self._derive(batch) if self._derive else batch))
        self.position = next_position
        self._rows_since += batch.num_rows
        self._maybe_checkpoint()

    def _maybe_checkpoint(self) -> None:
        if not self.checkpointing:  # sink rows only, each second (no state, no position)
            if self._pending and time.monotonic() - self._last >= DEFAULT_INTERVAL_S:
                self._durably(lambda: self._insert(self._pending), _nbytes(self._pending))
                self.committed += sum(b.num_rows for b in self._pending)
                self._pending = []
                self._last = time.monotonic()
            return
        due = (self.interval and time.monotonic() - self._last >= self.interval) or (
            self.every_rows and self._rows_since >= self.every_rows
        )
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

        def commit() -> None:
            cursor.begin()
            try:
                if self._pending:
                    self._insert(self._pending)
                cursor.execute(
                    f"UPDATE {TABLE} SET position = ?, snapshot = ?, "
                    "matches = matches + ?, checkpoints = checkpoints + 1, "
                    "last_checkpoint = now()::TIMESTAMP, state = ?, error = NULL "
                    "WHERE name = ?",
                    [self.position, state, found, final, self.name],
                )
                faults.point("checkpoint")  # everything written, nothing committed
                cursor.commit()
            except BaseException:
                with contextlib.suppress(duckdb.Error):
                    cursor.rollback()
                raise

        self._durably(commit, len(state or b"") + _nbytes(self._pending))
        permissions.owner_only_database(self.executor.streams.database)  # a new log: 0600
        self._pending = []
        self._rows_since = 0
        self._last = time.monotonic()
        self.committed += found
        self.checkpoints += 1

    def _durably(self, write: Callable[[], None], size: int) -> None:
        """Run ``write`` (a commit of about ``size`` bytes); where the disk is full, wait
        for room and run it again (see the module), the matches kept meanwhile."""
        need = 2 * size + DISK_MARGIN
        while True:
            try:
                write()
            except duckdb.Error as exc:
                if not _disk_full(exc):
                    raise
                self.disk_full_failures += 1
                self.waiting = (
                    f"a checkpoint could not be written: {_describe(exc)}; it is "
                    "written again once the disk has room"
                )
                if not self._wait_for_room(need):
                    raise ExecutionError(f"stopped while waiting for disk space ({exc})") from None
                need *= 2  # should this room not do either
                continue
            self.waiting = None
            return

    def _wait_for_room(self, need: int) -> bool:
        """Wait until the database's file system has ``need`` bytes free; False when the
        query is stopped meanwhile."""
        directory = os.path.dirname(os.path.abspath(self.executor.streams.database))
        while not self._halt.wait(DISK_POLL_S):
            try:
                stat = os.statvfs(directory)
            except OSError:
                continue
            if stat.f_bavail * stat.f_frsize >= need:
                return True
        return False


_DISK_FULL = tuple(os.strerror(code) for code in (errno.ENOSPC, errno.EDQUOT)) + (
    "disk is full",
    "out of disk space",
)


def _disk_full(exc: BaseException) -> bool:
    """Whether DuckDB failed because the file system has no room left."""
    text = str(exc)
    return any(phrase in text for phrase in _DISK_FULL)


def _nbytes(batches: list[pa.RecordBatch]) -> int:
    return sum(batch.nbytes for batch in batches)


def _describe(exc: BaseException) -> str:
    """One line for the error column: a matchsql error's message, else its kind and text."""
    if isinstance(exc, Error):
        return exc.message
    if isinstance(exc, duckdb.Error):
        return " ".join(str(exc).split()) or type(exc).__name__
    return internal_error(exc).message
