"""Continuous queries over live streams fed by producers in separate processes."""

from __future__ import annotations

import threading
import time

import pytest

from matchsql.errors import ExecutionError, StreamError
from matchsql.storage.demo import synthetic_trades
from tests.streams.conftest import bounded

TRADES = "CREATE STREAM trades (symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)"
QUERY = """SELECT * FROM {source} MATCH_RECOGNIZE(
  PARTITION BY symbol ORDER BY ts
  MEASURES MATCH_NUMBER() AS m, FIRST(A.price) AS p0, LAST(D.price) AS p1, LAST(D.ts) AS t1
  ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C* D+)
  DEFINE B AS B.price < A.price AND B.price <= PREV(B.price),
         C AS C.price > B.price AND C.price >= PREV(C.price) AND C.price <= A.price,
         D AS D.price > PREV(D.price) AND D.price > A.price)"""

PRODUCE_SYNTHETIC = """
    import sys
    from matchsql.storage import Producer
    from matchsql.storage.demo import synthetic_trades
    rows, chunk = int(sys.argv[1]), int(sys.argv[2])
    with Producer.open("trades") as producer:
        for batch in synthetic_trades(rows, 5, 7).to_batches(max_chunksize=chunk):
            producer.write_batch(batch)
"""


def one_shot(con, rows: int) -> list[tuple]:
    con.duckdb.register("trades_src", synthetic_trades(rows, 5, 7))
    con.sql("CREATE OR REPLACE TABLE trades_table AS SELECT * FROM trades_src")
    return sorted(con.sql(QUERY.format(source="trades_table")).fetchall())


def test_continuous_query_equals_one_shot(con, spawn):
    con.sql(TRADES)
    producer = spawn(PRODUCE_SYNTHETIC, "6000", "700")
    result = con.sql(QUERY.format(source="trades"))
    live = sorted(bounded(result.fetchall))
    assert producer.wait() == 0
    assert live == one_shot(con, 6000)
    assert live  # the data has matches


def test_through_duckdb_outer_query(con, spawn):
    con.sql(TRADES)
    producer = spawn(PRODUCE_SYNTHETIC, "3000", "500")
    sql = f"SELECT symbol, count(*) AS n FROM ({QUERY.format(source='trades')}) GROUP BY symbol"
    live = sorted(bounded(con.sql(sql).fetchall))
    assert producer.wait() == 0
    expected = {}
    for row in one_shot(con, 3000):
        expected[row[0]] = expected.get(row[0], 0) + 1
    assert live == sorted(expected.items())


GATED = """
    import os, sys, time, datetime as dt
    from matchsql.storage import Producer
    gate = sys.argv[1]
    producer = Producer.open("ticks")
    for i, price in enumerate([5, 4, 3, 6, 1]):
        producer.write((float(price), i))
    producer.flush()
    deadline = time.monotonic() + 60
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.01)
    producer.close()
"""


def test_rows_arrive_before_end_of_stream_and_dollar_waits(con, spawn, tmp_path):
    """A final match is emitted at once; a match needing ``$`` waits for end of stream."""
    con.sql("CREATE STREAM ticks (price DOUBLE, i BIGINT)")
    gate = tmp_path / "gate"
    spawn(GATED, str(gate))
    result = con.sql("""SELECT * FROM ticks MATCH_RECOGNIZE(
        MEASURES FIRST(A.i) AS first_i, LAST(A.i) AS last_i, CLASSIFIER() AS cls
        ONE ROW PER MATCH PATTERN (A+ B | C+ $)
        DEFINE A AS A.price > 2 AND (PREV(A.price) IS NULL OR A.price < PREV(A.price)),
               B AS B.price > PREV(B.price), C AS TRUE)""")
    batches = result.fetch_batches()
    first = bounded(lambda: next(batches), timeout=20)
    assert first.to_pylist() == [{"first_i": 0, "last_i": 2, "cls": "B"}]
    assert not gate.exists()  # the producer is still attached: the row came before the end
    late: list = []
    reader = threading.Thread(
        target=lambda: late.extend(b.to_pylist() for b in batches), daemon=True
    )
    reader.start()
    reader.join(0.5)
    assert late == []  # C+ $ must wait for the end of the stream
    gate.touch()
    reader.join(20)
    assert not reader.is_alive()
    assert late == [[{"first_i": None, "last_i": None, "cls": "C"}]]


def test_producer_death_ends_the_query_within_a_second(con, spawn):
    con.sql("CREATE STREAM ticks (price DOUBLE, i BIGINT)")
    producer = spawn("""
        import os, time
        from matchsql.storage import Producer
        p = Producer.open("ticks")
        p.write_batch({"price": [1.0, 2.0, 3.0], "i": [0, 1, 2]})
        time.sleep(0.3)
        print(time.monotonic(), flush=True)
        os._exit(3)  # dies without close()
    """)
    result = con.sql(
        "SELECT * FROM ticks MATCH_RECOGNIZE(MEASURES A.i AS i ONE ROW PER MATCH "
        "PATTERN (A) DEFINE A AS A.price > 0)"
    )
    rows: list = []

    def consume() -> None:
        for batch in result.fetch_batches():
            rows.extend(batch.to_pylist())

    with pytest.raises(StreamError, match="stopped without close"):
        bounded(consume, timeout=20)
    noticed = time.monotonic()
    died = float(producer.output().split()[0])
    assert producer.wait() == 3
    assert rows == [{"i": 0}, {"i": 1}, {"i": 2}]  # nothing it wrote was lost
    assert noticed - died < 1.0  # the query ended within a second of the death


def test_wait_for_a_new_producer(con, spawn):
    con.sql("CREATE STREAM ticks (price DOUBLE, i BIGINT)")
    con.sql("SET on_producer_death = 'wait'")
    first = spawn("""
        import os
        from matchsql.storage import Producer
        p = Producer.open("ticks", name="feed")
        p.write_batch({"price": [1.0], "i": [0]})
        os._exit(1)
    """)
    result = con.sql(
        "SELECT * FROM ticks MATCH_RECOGNIZE(MEASURES A.i AS i ONE ROW PER MATCH "
        "PATTERN (A) DEFINE A AS A.price > 0)"
    )
    assert first.wait() == 1
    batches = result.fetch_batches()
    assert bounded(lambda: next(batches), timeout=20).to_pylist() == [{"i": 0}]
    time.sleep(0.5)  # the reader notices the death and keeps waiting
    second = spawn("""
        from matchsql.storage import Producer
        with Producer.open("ticks", name="feed") as p:
            p.write_batch({"price": [2.0], "i": [1]})
    """)
    rest = bounded(lambda: [r for b in batches for r in b.to_pylist()], timeout=20)
    assert second.wait() == 0
    assert rest == [{"i": 1}]


def test_interrupt_stops_a_blocked_query(con):
    con.sql("CREATE STREAM ticks (price DOUBLE)")
    result = con.sql(
        "SELECT * FROM ticks MATCH_RECOGNIZE(MEASURES A.price AS p "
        "ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE)"
    )
    threading.Timer(0.3, con.interrupt).start()
    with pytest.raises(ExecutionError, match="interrupted"):
        bounded(result.fetchall, timeout=10)
    # the stream is free again for the next query
    threading.Timer(0.3, con.interrupt).start()
    with pytest.raises(ExecutionError, match="interrupted"):
        bounded(
            con.sql(
                "SELECT * FROM ticks MATCH_RECOGNIZE(MEASURES A.price AS p "
                "ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE)"
            ).fetchall,
            timeout=10,
        )


def test_per_row_writes_and_idempotent_batch_ids(con, spawn):
    con.sql("CREATE STREAM ticks (price DOUBLE, i BIGINT)")
    producer = spawn("""
        import pyarrow as pa
        from matchsql.storage import Producer
        with Producer.open("ticks", name="spark-0") as p:
            for i in range(5):
                p.write((float(i), i))                     # buffered, flushed by linger
            batch = lambda k: pa.table({"price": [1.0] * 3, "i": [100 * k + j for j in range(3)]})
            assert p.write_batch(batch(1), batch_id=1)
            assert p.write_batch(batch(2), batch_id=2)
            assert not p.write_batch(batch(2), batch_id=2)  # a retry: skipped
            assert not p.write_batch(batch(1), batch_id=1)  # an older one: skipped
            assert p.write_batch(batch(3), batch_id=3)
    """)
    rows = bounded(
        con.sql(
            "SELECT * FROM ticks MATCH_RECOGNIZE(MEASURES A.i AS i "
            "ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE)"
        ).fetchall
    )
    assert producer.wait() == 0, producer.output()
    assert [r[0] for r in rows] == [0, 1, 2, 3, 4, 100, 101, 102, 200, 201, 202, 300, 301, 302]


def test_batch_id_survives_a_producer_restart(con, spawn):
    con.sql("CREATE STREAM ticks (i BIGINT)")
    code = """
        import sys
        from matchsql.storage import Producer
        p = Producer.open("ticks", name="sink")
        for k in map(int, sys.argv[1:]):
            p.write_batch({"i": [k]}, batch_id=k)
        p.close(end_of_stream=sys.argv[-1] == "9")
    """
    assert spawn(code, "1", "2", "3").wait() == 0
    assert spawn(code, "3", "4", "9").wait() == 0  # 3 was already written by the first one
    rows = bounded(
        con.sql(
            "SELECT * FROM ticks MATCH_RECOGNIZE(MEASURES A.i AS i "
            "ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE)"
        ).fetchall
    )
    assert [r[0] for r in rows] == [1, 2, 3, 4, 9]


def test_full_stream_blocks_the_writer(con, spawn):
    con.sql("CREATE STREAM ticks (i BIGINT) WITH (capacity = 100)")
    producer = spawn("""
        from matchsql.errors import StreamError
        from matchsql.storage import Producer
        p = Producer.open("ticks")
        p.write_batch({"i": list(range(100))})
        try:
            p.write_batch({"i": [100]}, timeout=0.5)
        except StreamError as exc:
            print("blocked:", exc)
        p.close()
    """)
    assert producer.wait() == 0
    assert "stayed full" in producer.output()
    rows = bounded(
        con.sql(
            "SELECT * FROM ticks MATCH_RECOGNIZE(MEASURES A.i AS i "
            "ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE)"
        ).fetchall
    )
    assert [r[0] for r in rows] == list(range(100))


def test_slow_query_with_small_blocking_queue_loses_nothing(con, spawn):
    con.sql(TRADES + " WITH (capacity = 256)")
    producer = spawn(PRODUCE_SYNTHETIC, "3000", "100")
    live = sorted(bounded(con.sql(QUERY.format(source="trades")).fetchall))
    assert producer.wait() == 0
    assert live == one_shot(con, 3000)


def test_drop_while_reading_ends_the_query(con):
    con.sql("CREATE STREAM ticks (i BIGINT)")
    result = con.sql(
        "SELECT * FROM ticks MATCH_RECOGNIZE(MEASURES A.i AS i "
        "ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE)"
    )
    import matchsql

    other = matchsql.connect(demo=False)
    threading.Timer(0.3, lambda: other.sql("DROP STREAM ticks")).start()
    with pytest.raises(StreamError, match="dropped"):
        bounded(result.fetchall, timeout=10)
    other.close()


def test_file_database_namespace(spawn, tmp_path):
    import matchsql

    path = tmp_path / "db.duckdb"
    con = matchsql.connect(str(path))
    try:
        con.sql("CREATE STREAM ticks (i BIGINT)")
        other = matchsql.connect(demo=False)  # in memory: another namespace
        assert other.sql("SHOW STREAMS").fetchall() == []
        other.close()
        producer = spawn(
            """
            import sys
            from matchsql.storage import Producer
            with Producer.open("ticks", database=sys.argv[1]) as p:
                p.write_batch({"i": [1, 2]})
        """,
            str(path),
        )
        rows = bounded(
            con.sql(
                "SELECT * FROM ticks MATCH_RECOGNIZE(MEASURES A.i AS i "
                "ONE ROW PER MATCH PATTERN (A) DEFINE A AS TRUE)"
            ).fetchall
        )
        assert producer.wait() == 0
        assert rows == [(1,), (2,)]
    finally:
        con.close()
