"""Source: a Structured Streaming query feeding a live stream, retries without duplicates.

The stream's reader must see every input row exactly once, in the order the
sink writes (``order_by``), across a restart that re-runs an already written
micro-batch and a direct retry of a batch id; then a continuous
MATCH_RECOGNIZE over the ended stream gives the embedded engine's rows.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pytest

import matchsql

from .helpers import canonical, embedded, trades
from .test_stream import FileSource

pytest.importorskip("matchsql.storage.producer")

pytestmark = [
    pytest.mark.xdist_group("spark"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]


@pytest.fixture
def live_stream(tmp_path: Path, monkeypatch):
    """A fresh live stream ``(con, name)`` in a private stream registry."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("MATCHSQL_RUNTIME_DIR", str(runtime))
    con = matchsql.connect(demo=False)
    name = f"trades_{uuid.uuid4().hex[:8]}"
    con.sql(f"CREATE STREAM {name} (symbol VARCHAR, price DOUBLE, volume BIGINT, ts TIMESTAMP)")
    yield con, name
    con.sql(f"DROP STREAM IF EXISTS {name}")
    con.close()


def read_all(name: str) -> pa.Table:
    from matchsql.storage.catalog import Catalog
    from matchsql.storage.live_reader import LiveReader

    reader = LiveReader(Catalog(None).require(name)).open()
    batches = []
    try:
        while (item := reader.read()) is not None:
            batches.append(item[1])
    finally:
        reader.close()
    return pa.Table.from_batches(batches, schema=reader.schema)


def test_micro_batch_retries_do_not_duplicate(spark, tmp_path: Path, live_stream) -> None:
    from matchsql.integrations.spark import write_stream

    _, name = live_stream
    data = trades(1500, 3, seed=21)
    source = FileSource(tmp_path, data)
    checkpoint = tmp_path / "checkpoint"

    def start():
        df = source.stream(spark).drop("eos")
        return write_stream(
            df,
            stream=name,
            database=None,
            order_by="ts",
            checkpoint_location=str(checkpoint),
            trigger={"availableNow": True},
        )

    for i in range(0, 900, 300):
        source.add(data.slice(i, 300))
    first = start()
    first.await_termination()
    assert first.batches_written == 3
    first.close(end_of_stream=False)  # the query will be restarted

    # Crash between writing batch 2 into the stream and committing it.
    for item in ("2", ".2.crc"):
        (checkpoint / "commits" / item).unlink(missing_ok=True)
    for i in range(900, 1500, 300):
        source.add(data.slice(i, 300))
    second = start()
    second.await_termination()
    assert second.batches_skipped == 1  # batch 2 again: already in the stream
    assert second.batches_written == 2
    # A retry of the last batch id from the same producer is skipped as well.
    second.write_batch(spark.createDataFrame(data.slice(0, 5).to_pandas()), 4)
    assert second.batches_skipped == 2
    second.close()  # end of stream

    got = read_all(name)
    assert got.num_rows == data.num_rows
    assert got.column("ts").to_pylist() == data.column("ts").to_pylist()  # in order, once
    assert got.equals(data.select(got.schema.names).cast(got.schema))


def test_live_stream_feeds_a_continuous_match_recognize(spark, tmp_path: Path, live_stream) -> None:
    from matchsql.integrations.spark import write_stream

    con, name = live_stream
    data = trades(900, 3, seed=22)
    source = FileSource(tmp_path, data)
    for i in range(0, 900, 300):
        source.add(data.slice(i, 300))
    writer = write_stream(
        source.stream(spark).drop("eos"),
        stream=name,
        order_by="ts",
        checkpoint_location=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    writer.await_termination()
    writer.close()
    query = (
        "SELECT * FROM {t} MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
        "MEASURES MATCH_NUMBER() AS m, FIRST(A.price) AS p "
        "PATTERN (A B+ C) DEFINE B AS price < PREV(price), C AS price > A.price)"
    )
    got = con.sql(query.format(t=name)).fetchall()
    expected = embedded("trade", data, query.format(t="trade"))
    assert len(expected) > 10
    assert canonical(got) == canonical(expected)
