"""Archived store, spill on full, and hybrid (archive, then live tail) queries."""

from __future__ import annotations

import random

import pyarrow.parquet as pq
import pytest

from matchsql.errors import StreamError
from matchsql.execution.workers.stream_router import StreamRouter
from matchsql.storage.demo import synthetic_trades
from tests.streams.conftest import bounded, wait_reopened
from tests.streams.test_live import PRODUCE_SYNTHETIC, QUERY, TRADES, one_shot

PRODUCE_RANGE = """
    import sys
    from matchsql.storage import Producer
    from matchsql.storage.demo import synthetic_trades
    rows, start, stop = map(int, sys.argv[1:4])
    table = synthetic_trades(rows, 5, 7).slice(start, stop - start)
    with Producer.open("trades") as producer:
        for batch in table.to_batches(max_chunksize=333):
            producer.write_batch(batch)
"""


def test_archive_table_with_filter(con, spawn):
    con.sql(TRADES + " WITH (archive = 'trades_history', archive_filter = 'volume >= 500')")
    assert spawn(PRODUCE_SYNTHETIC, "2000", "300").wait() == 0
    bounded(con.sql(QUERY.format(source="trades")).fetchall)
    archived = con.sql("SELECT * FROM trades_history ORDER BY _seq").fetchall()
    data = synthetic_trades(2000, 5, 7).to_pylist()
    expected = [(seq, *row.values()) for seq, row in enumerate(data) if row["volume"] >= 500]
    assert archived == expected
    assert 0 < len(archived) < 2000


def test_archive_parquet_directory(con, spawn, tmp_path):
    directory = tmp_path / "history"
    con.sql(TRADES + f" WITH (archive = '{directory}/')")
    assert spawn(PRODUCE_SYNTHETIC, "1500", "200").wait() == 0
    bounded(con.sql(QUERY.format(source="trades")).fetchall)
    files = sorted(directory.glob("part-*.parquet"))
    assert files
    assert pq.ParquetFile(files[0]).metadata.row_group(0).column(0).compression == "ZSTD"
    table = pq.read_table(directory).sort_by("_seq")
    assert table.column("_seq").to_pylist() == list(range(1500))
    assert table.drop_columns("_seq").to_pylist() == synthetic_trades(1500, 5, 7).to_pylist()


def test_spill_loses_nothing(con, spawn):
    """A producer far faster than the query: with on_full = 'spill' it never blocks."""
    con.sql(TRADES + " WITH (capacity = 200, on_full = 'spill')")
    producer = spawn(PRODUCE_SYNTHETIC, "4000", "100")
    assert producer.wait() == 0  # finished before any reader started: nothing blocked it
    stats = dict(zip(con.sql("SHOW STREAMS").columns, con.sql("SHOW STREAMS").fetchall()[0]))
    assert stats["written"] == 4000 and stats["spilled"] >= 3000
    live = sorted(bounded(con.sql(QUERY.format(source="trades")).fetchall))
    assert live == one_shot(con, 4000)
    stats = dict(zip(con.sql("SHOW STREAMS").columns, con.sql("SHOW STREAMS").fetchall()[0]))
    assert stats["read"] == 4000 and stats["queued"] == 0


def test_spill_while_reading(con, spawn):
    con.sql(TRADES + " WITH (capacity = 300, on_full = 'spill')")
    producer = spawn(PRODUCE_SYNTHETIC, "4000", "150")
    live = sorted(bounded(con.sql(QUERY.format(source="trades")).fetchall))
    assert producer.wait() == 0
    assert live == one_shot(con, 4000)


@pytest.mark.parametrize("workers", [1, 2])
def test_hybrid_query_equals_one_shot_at_random_splits(con, spawn, tmp_path, workers):
    """History from the archive, then the live tail: boundary-spanning matches found once.
    On two workers the history's batches go with the next one at hand (one in flight)."""
    rows = 3000
    expected = one_shot(con, rows)
    if workers > 1:
        con.sql(f"SET workers = {workers}")
        con.sql("SET batch_size = 250")  # several history batches
    rng = random.Random(5)
    for number, split in enumerate(sorted(rng.sample(range(1, rows), 2))):
        name = f"trades{number}"
        con.sql(TRADES.replace("trades", name) + f" WITH (archive = '{tmp_path / name}/')")
        code = PRODUCE_RANGE.replace('"trades"', f'"{name}"')
        query = QUERY.format(source=name)
        # A first query consumes (and so archives) the first `split` rows...
        assert spawn(code, str(rows), "0", str(split)).wait() == 0
        bounded(con.sql(query).fetchall)
        # ...then the rest arrives live, and a new query runs over both (once the
        # tail's producer has opened the stream: before that it is still ended).
        tail = spawn(code, str(rows), str(split), str(rows))
        wait_reopened(name, split)
        hybrid = sorted(bounded(con.sql(query).fetchall))
        assert tail.wait() == 0
        assert hybrid == expected, f"split at {split}"
        if workers > 1:
            assert isinstance(con._executor.workers.last, StreamRouter)
        con.sql(f"DROP STREAM {name}")


def test_archive_table_with_an_outer_duckdb_query(con, spawn):
    """The archive is appended to while DuckDB pulls the match stream (no deadlock)."""
    con.sql(TRADES + " WITH (archive = 'hist')")
    assert spawn(PRODUCE_SYNTHETIC, "2500", "100").wait() == 0
    counted = bounded(
        con.sql(f"SELECT count(*) FROM ({QUERY.format(source='trades')})").fetchall, timeout=60
    )
    assert counted == [(len(one_shot(con, 2500)),)]
    assert con.sql("SELECT count(*), min(_seq), max(_seq) FROM hist").fetchall() == [
        (2500, 0, 2499)
    ]


def test_recreated_stream_continues_the_archive(con, spawn):
    query = (
        "SELECT * FROM ticks MATCH_RECOGNIZE(MEASURES A.i AS i ONE ROW PER MATCH "
        "PATTERN (A) DEFINE A AS TRUE)"
    )
    write = """
        import sys
        from matchsql.storage import Producer
        start, stop = int(sys.argv[1]), int(sys.argv[2])
        with Producer.open("ticks") as p:
            p.write_batch({"i": list(range(start, stop))})
    """
    con.sql("CREATE STREAM ticks (i BIGINT) WITH (archive = 'ticks_history')")
    assert spawn(write, "0", "100").wait() == 0
    assert len(bounded(con.sql(query).fetchall)) == 100
    con.sql("DROP STREAM ticks")
    con.sql("CREATE STREAM ticks (i BIGINT) WITH (archive = 'ticks_history')")
    tail = spawn(write, "100", "150")
    rows = bounded(con.sql(query).fetchall)  # 100 archived, then 50 live
    assert tail.wait() == 0
    assert [r[0] for r in rows] == list(range(150))
    assert con.sql("SELECT _seq, i FROM ticks_history ORDER BY _seq").fetchall() == [
        (k, k) for k in range(150)
    ]
    con.sql("DROP STREAM ticks")
    with pytest.raises(StreamError, match="other columns"):
        con.sql("CREATE STREAM ticks (j VARCHAR) WITH (archive = 'ticks_history')")
