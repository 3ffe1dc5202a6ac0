"""A pool that cannot start says why and leaves no segment; a continuous query whose thread
ends for any reason is failed (never ``running``) and leaves its stream.

The interpreter the workers are spawned with is swapped for one that cannot
start (a script that exits with code 3, a path that does not exist): what a
Python the user cannot read did, which surfaced as a bare BrokenPipeError and
left three 32 MiB segments behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from multiprocessing import spawn

import pytest

import matchsql
from matchsql.errors import ExecutionError
from matchsql.execution.workers import segments
from matchsql.execution.workers.pool import WorkerPool, WorkerStartError
from matchsql.session import continuous_queries as continuous
from matchsql.storage.catalog import Catalog
from matchsql.storage.shm_ring import Ring
from tests.streams.conftest import WAIT_S, runtime_dir  # noqa: F401 - fixture
from tests.streams.test_continuous_queries import (  # noqa: F401 - db is a fixture
    PATTERN,
    SINK,
    db,
)

QUERY = (
    "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES "
    "COUNT(*) AS n ONE ROW PER MATCH PATTERN (A B+) DEFINE B AS v >= PREV(v))"
)


def _mine() -> list[str]:
    """This process's pool segments."""
    return [n for n in segments.names() if (segments.owner_of(n) or (0, 0))[0] == os.getpid()]


@pytest.fixture
def broken_interpreter(tmp_path):
    """``use(path)``: workers are spawned with ``path`` until the test ends."""
    before = spawn.get_executable()

    def use(path: str) -> None:
        spawn.set_executable(path)

    yield use
    spawn.set_executable(before)


def _exits_with_3(tmp_path) -> str:
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\nexit 3\n")
    script.chmod(0o700)
    return str(script)


@pytest.mark.parametrize("interpreter", ["exits", "missing"])
def test_a_pool_that_cannot_start_says_why_and_frees_its_segments(
    tmp_path, broken_interpreter, interpreter
):
    path = _exits_with_3(tmp_path) if interpreter == "exits" else str(tmp_path / "no-python")
    broken_interpreter(path)
    con = matchsql.connect(demo=False, workers=2)
    con.sql("CREATE TABLE t AS SELECT i % 7 AS p, i AS ts, i % 5 AS v FROM range(1000) r(i)")
    for _ in range(3):  # each try: the same clear error, nothing left behind
        with pytest.raises(ExecutionError) as info:
            con.sql(QUERY).fetchall()
        message = info.value.message
        if interpreter == "exits":
            assert message == "worker process 0 did not start: exited with code 3", message
        else:
            assert message.startswith(
                "worker process 0 did not start: exited with code 255 "
                f"(cannot run {path}: No such file or directory)"
            ), message
        assert _mine() == []
    con.close()


def test_a_worker_killed_while_starting_is_named_with_its_signal(tmp_path, broken_interpreter):
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\nkill -9 $$\n")
    script.chmod(0o700)
    broken_interpreter(str(script))
    with pytest.raises(
        WorkerStartError, match=r"^worker process 0 did not start: killed by signal 9 \(SIGKILL\)$"
    ):
        WorkerPool(2)
    assert _mine() == []


def test_segments_of_dead_owners_are_swept_and_live_ones_kept():
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(dead.stdout)
    orphan = segments.create(f"{segments.PREFIX}{pid}-123-feedbeef-i0", 4096)
    live = segments.create(segments.new_name(segments.pool_prefix(), "i"), 4096)
    try:
        removed = segments.sweep_dead_owners()
        assert orphan.name in removed and live.name not in removed
        assert live.name in segments.names() and orphan.name not in segments.names()
    finally:
        for segment in (orphan, live):
            segment.close()
            segments.unlink(segment.name)


def _show(con) -> dict:
    shown = con.sql("SHOW CONTINUOUS QUERIES")
    return dict(zip(shown.columns, shown.fetchall()[0]))


def _wait_not_running(con) -> dict:
    deadline = time.monotonic() + WAIT_S
    while (row := _show(con))["state"] == "running":
        assert time.monotonic() < deadline, row
        time.sleep(0.02)
    return row


def test_a_query_whose_pool_never_starts_fails_with_the_cause(
    db,  # noqa: F811
    tmp_path,
    broken_interpreter,
    monkeypatch,
):
    monkeypatch.setattr(continuous, "MAX_RESTARTS", 2)
    broken_interpreter(_exits_with_3(tmp_path))
    con = matchsql.connect(db, workers=2)
    try:
        con.sql(SINK)
        con.sql(
            f"CREATE CONTINUOUS QUERY rising WITH (checkpoint_rows = 500) AS "
            f"INSERT INTO sink SELECT * FROM ticks {PATTERN}"
        )
        row = _wait_not_running(con)
        assert row["state"] == "failed"
        assert row["error"] == (
            "worker processes died 3 times (the last: worker process 0 "
            "did not start: exited with code 3); the query stopped at its "
            "last checkpoint"
        ), row
        assert Ring.attach(Catalog(db).require("ticks").segment).readers() == []
        assert _mine() == []
    finally:
        con.close()


def test_a_thread_that_dies_unexpectedly_fails_the_query_and_leaves_the_stream(db, monkeypatch):  # noqa: F811
    def broken(self):
        raise EOFError

    monkeypatch.setattr(continuous._Runner, "_new_router", broken)
    # The database cannot even be written to say so: SHOW still does.
    monkeypatch.setattr(continuous._Runner, "_set_state", lambda self, state, error=None: None)
    con = matchsql.connect(db)
    try:
        con.sql(SINK)
        con.sql(
            f"CREATE CONTINUOUS QUERY rising WITH (checkpoint_rows = 500) AS "
            f"INSERT INTO sink SELECT * FROM ticks {PATTERN}"
        )
        row = _wait_not_running(con)
        assert (row["state"], row["error"]) == ("failed", "internal error (EOFError): no detail")
        assert Ring.attach(Catalog(db).require("ticks").segment).readers() == []
    finally:
        con.close()
