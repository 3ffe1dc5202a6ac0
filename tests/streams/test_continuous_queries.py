"""Named continuous queries: sink rows and checkpoints in one transaction, resume after
kill -9 from the checkpoint with every match in the sink exactly once."""

from __future__ import annotations

import time

import duckdb
import pyarrow as pa
import pytest

import matchsql
from matchsql.errors import CatalogError, ParseError, SemanticError
from matchsql.storage import Producer
from matchsql.storage.stream_lifecycle import create_stream
from tests.streams.conftest import WAIT_S

COLUMNS = [("k", "BIGINT"), ("i", "BIGINT"), ("v", "DOUBLE")]
SCHEMA = pa.schema([("k", pa.int64()), ("i", pa.int64()), ("v", pa.float64())])
# Rising runs per partition: a match may span many batches (and checkpoints).
PATTERN = (
    "MATCH_RECOGNIZE(PARTITION BY k ORDER BY i MEASURES FIRST(A.i) AS s, LAST(B.i) AS e,"
    " MATCH_NUMBER() AS m ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
    "PATTERN (A B+) DEFINE B AS B.v > PREV(B.v))"
)
SINK = "CREATE TABLE IF NOT EXISTS sink (k BIGINT, s BIGINT, e BIGINT, m BIGINT)"


def data(start: int, stop: int) -> pa.Table:
    """Deterministic tuples: 5 partitions, values that rise and fall irregularly."""
    i = list(range(start, stop))
    return pa.table(
        {"k": [x % 5 for x in i], "i": i, "v": [(x * 7919 % 1000) / 10 for x in i]}, schema=SCHEMA
    )


def expected(stop: int) -> list[tuple]:
    """The one-time query's matches over tuples 0..stop-1 (the continuous query's must equal it)."""
    con = matchsql.connect(demo=False)
    table = data(0, stop)  # noqa: F841 - read by the query below
    rows = con.sql(f"SELECT * FROM table {PATTERN} ORDER BY k, s").fetchall()
    con.close()
    return rows


def write(database: str, start: int, stop: int, step: int = 1000) -> None:
    with Producer.open("ticks", database=database, name="p") as producer:
        for low in range(start, stop, step):
            producer.write_batch(data(low, min(low + step, stop)), batch_id=low)


def sink_rows(con) -> list[tuple]:
    return con.sql("SELECT * FROM sink ORDER BY k, s").fetchall()


def wait_state(con, name: str, state: str) -> dict:
    deadline = time.monotonic() + WAIT_S
    while True:
        shown = con.sql("SHOW CONTINUOUS QUERIES")
        rows = [dict(zip(shown.columns, r)) for r in shown.fetchall()]
        row = next(r for r in rows if r["name"] == name)
        if row["state"] == state:
            return row
        assert row["state"] != "failed", row["error"]
        assert time.monotonic() < deadline, row
        time.sleep(0.02)


@pytest.fixture
def db(tmp_path):
    """A file database whose stream 'ticks' (Parquet archive) is owned by this process."""
    path = str(tmp_path / "cq.duckdb")
    create_stream(
        duckdb.connect(), path, "ticks", COLUMNS, SCHEMA, archive=str(tmp_path / "hist") + "/"
    )
    return path


def test_matches_reach_the_sink_once_and_the_query_finishes_at_end_of_stream(db):
    con = matchsql.connect(db)
    con.sql(SINK)
    con.sql(
        f"CREATE CONTINUOUS QUERY rising WITH (checkpoint_rows = 3000) AS "
        f"INSERT INTO sink SELECT * FROM ticks {PATTERN}"
    )
    write(db, 0, 20000)
    row = wait_state(con, "rising", "finished")
    assert sink_rows(con) == expected(20000)
    assert row["position"] == 20000 and row["lag"] == 0
    # a checkpoint once 3,000 tuples were processed since the last (batches are <= 3,000)
    assert row["matches"] == len(expected(20000)) and row["checkpoints"] >= 20000 // 6000
    con.close()


def test_python_api_stop_and_resume(db):
    con = matchsql.connect(db)
    con.sql(SINK)
    con.create_continuous_query(
        "rising", f"INSERT INTO sink SELECT * FROM ticks {PATTERN}", checkpoint_interval=0.05
    )
    producer = Producer.open("ticks", database=db, name="p")
    producer.write_batch(data(0, 7000), batch_id=0)
    deadline = time.monotonic() + WAIT_S
    while wait_state(con, "rising", "running")["position"] < 7000:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    con.stop_continuous_query("rising")
    assert wait_state(con, "rising", "stopped")["position"] == 7000
    producer.write_batch(data(7000, 15000), batch_id=1)  # written while stopped
    producer.close()
    con.resume_continuous_query("rising")
    wait_state(con, "rising", "finished")
    assert sink_rows(con) == expected(15000)
    con.drop_continuous_query("rising")
    assert con.continuous_queries().fetchall() == []
    con.close()


CQ_PROCESS = """
    import sys, time
    import matchsql
    con = matchsql.connect(sys.argv[1], execution_path=sys.argv[3])  # resumes an interrupted query
    con.sql("CREATE TABLE IF NOT EXISTS sink (k BIGINT, s BIGINT, e BIGINT, m BIGINT)")
    con.sql("CREATE CONTINUOUS QUERY IF NOT EXISTS rising WITH (checkpoint_rows = 2000) AS "
            "INSERT INTO sink SELECT * FROM ticks " + sys.argv[2])
    print("started", flush=True)
    while con.sql("SELECT state FROM __matchsql_continuous_queries").fetchall()[0][0] \\
            != "finished":
        time.sleep(0.02)
"""


@pytest.mark.parametrize("path", ["auto", "reference"])
def test_kill_9_resumes_from_the_checkpoint_on_the_next_start(db, spawn, path):
    """On every path: the reference matcher's checkpoint holds its rows and threads, not
    its DEFINE closures (bound again on restore)."""
    first = spawn(CQ_PROCESS, db, PATTERN, path)
    assert first.proc.stdout.readline().strip() == "started"
    with Producer.open("ticks", database=db, name="p") as producer:
        for low in range(0, 25000, 1000):
            producer.write_batch(data(low, low + 1000), batch_id=low)
            if low == 11000:  # the stream has not ended: the query cannot finish first
                time.sleep(0.5)
                first.kill()  # SIGKILL: the sink holds what the last checkpoint committed
    second = spawn(CQ_PROCESS, db, PATTERN, path)
    assert second.wait() == 0, second.output()
    con = matchsql.connect(db)
    row = con.sql(
        "SELECT checkpoints, snapshot IS NOT NULL FROM __matchsql_continuous_queries"
    ).fetchall()[0]
    assert row[0] >= 2 and row[1]  # it did checkpoint (and resume from a checkpoint)
    assert sink_rows(con) == expected(25000)
    con.close()


def test_a_checkpoint_resumed_on_another_path_fails_with_a_clear_error(db):
    con = matchsql.connect(db, execution_path="reference")
    con.sql(SINK)
    con.create_continuous_query(
        "rising", f"INSERT INTO sink SELECT * FROM ticks {PATTERN}", checkpoint_rows=1000
    )
    producer = Producer.open("ticks", database=db, name="p")
    producer.write_batch(data(0, 3000), batch_id=0)
    deadline = time.monotonic() + WAIT_S
    while wait_state(con, "rising", "running")["position"] < 3000:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    con.stop_continuous_query("rising")
    con.close()
    con = matchsql.connect(db, execution_path="registers")
    con.resume_continuous_query("rising")
    while (row := con.sql("SELECT state, error FROM __matchsql_continuous_queries").fetchall()[0])[
        0
    ] != "failed":
        assert time.monotonic() < deadline, row
        time.sleep(0.02)
    assert "does not fit this plan" in row[1] and "execution_path" in row[1]
    producer.close()
    con.close()


@pytest.mark.parametrize(
    ("statement", "error", "message"),
    [
        ("CREATE CONTINUOUS QUERY q AS SELECT 1", ParseError, "a continuous query is INSERT"),
        (
            "CREATE CONTINUOUS QUERY q WITH (checkpoint_every = 1) AS INSERT INTO sink SELECT 1",
            ParseError,
            "unknown continuous query option 'checkpoint_every'",
        ),
        (
            "CREATE CONTINUOUS QUERY q WITH (checkpoint_rows = 1.5) AS INSERT INTO sink SELECT 1",
            ParseError,
            "checkpoint_rows must be 0 \\(none\\) or a whole number of tuples",
        ),
        (
            "CREATE CONTINUOUS QUERY q AS INSERT INTO sink SELECT * FROM sink",
            SemanticError,
            "one MATCH_RECOGNIZE",
        ),
        ("RESUME CONTINUOUS QUERY nope", CatalogError, "continuous query 'nope' does not exist"),
        ("DROP CONTINUOUS QUERY nope", CatalogError, "continuous query 'nope' does not exist"),
    ],
)
def test_statement_errors(db, statement, error, message):
    con = matchsql.connect(db)
    con.sql(SINK)
    with pytest.raises(error, match=message):
        con.sql(statement)
    con.sql("DROP CONTINUOUS QUERY IF EXISTS nope")
    con.close()


def test_a_stream_without_an_archive_is_refused(tmp_path):
    path = str(tmp_path / "cq.duckdb")
    create_stream(duckdb.connect(), path, "bare", COLUMNS, SCHEMA)
    con = matchsql.connect(path)
    con.sql(SINK)
    with pytest.raises(SemanticError, match="stream 'bare' needs an archive"):
        con.sql(f"CREATE CONTINUOUS QUERY q AS INSERT INTO sink SELECT * FROM bare {PATTERN}")
    con.close()


#: DuckDB's parts of a query (a hidden input column, a measure over the match's results and
#: a DuckDB aggregate) through checkpoints: the one-time query's rows.
FUNCTIONS = (
    "MATCH_RECOGNIZE(PARTITION BY k ORDER BY i MEASURES FIRST(A.i) AS s, "
    "concat_ws('-', CAST(FIRST(A.i) AS VARCHAR), CAST(LAST(B.i) AS VARCHAR)) AS span, "
    "median(B.v) AS med ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
    "PATTERN (A B+) DEFINE B AS round(B.v) > round(PREV(B.v)))"
)


def test_duckdb_functions_through_checkpoints(db):
    con = matchsql.connect(db)
    con.sql("CREATE TABLE sink (k BIGINT, s BIGINT, span VARCHAR, med DOUBLE)")
    con.sql(
        f"CREATE CONTINUOUS QUERY fns WITH (checkpoint_rows = 3000) AS "
        f"INSERT INTO sink SELECT * FROM ticks {FUNCTIONS}"
    )
    write(db, 0, 12000)
    row = wait_state(con, "fns", "finished")
    table = data(0, 12000)  # noqa: F841 - read by the query below
    once = matchsql.connect(demo=False)
    want = once.sql(f"SELECT * FROM table {FUNCTIONS} ORDER BY k, s").fetchall()
    once.close()
    assert len(want) > 100 and row["checkpoints"] >= 2
    assert con.sql("SELECT * FROM sink ORDER BY k, s").fetchall() == want
    con.close()
