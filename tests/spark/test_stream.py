"""Unbounded scale-out: a streaming MATCH_RECOGNIZE with matcher state in Spark's state store.

Input is a directory of Parquet files read one file per micro-batch (in
file modification order, which the tests set), with an ``eos`` end-marker
column; output goes to a Parquet file sink, which with the checkpoint is
exactly-once. The restart test stops the query half-way, makes Spark re-run
a micro-batch whose output was already written (as after a crash between
writing and committing), and resumes: the union of all output must be the
embedded engine's result, with nothing lost and nothing twice.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pyarrow.compute as pc
import pytest

from bench.queries import DEJAVU
from matchsql.integrations.spark import SinglePartitionWarning, match_recognize_stream

from .helpers import FileSource, canonical, embedded, rows, run_available, trades, with_order

pytestmark = [
    pytest.mark.xdist_group("spark"),
    pytest.mark.filterwarnings("ignore::matchsql.integrations.spark.SinglePartitionWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]


@pytest.mark.parametrize("buckets", [None, 3])
def test_restart_from_checkpoint_neither_loses_nor_duplicates(
    spark, tmp_path: Path, buckets: int | None
) -> None:
    """Also with key_buckets: then a state value holds a bucket's keys (some of the six
    symbols share a bucket, and the end markers finish them one key at a time)."""
    data = trades(1600, 6, seed=11)
    query = DEJAVU["Q4"]
    source = FileSource(tmp_path, data)
    chunks = [data.slice(i, 400) for i in range(0, data.num_rows, 400)]
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def start():
        return match_recognize_stream(
            source.stream(spark), query, input_order="ts", end_marker="eos", key_buckets=buckets
        )

    for chunk in chunks[:2]:
        source.add(chunk)
    first = run_available(start(), out, checkpoint)
    assert max(p["batchId"] for p in first.recentProgress) == 1
    first_rows = rows(spark.read.parquet(str(out)))
    assert first_rows  # matches are emitted before the stream ends

    # A crash after batch 1's output was written but before it was committed:
    # the restarted query must run batch 1 again, from the state before it.
    for name in ("1", ".1.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)

    for chunk in chunks[2:]:
        source.add(chunk)
    source.add_end_markers(pc.unique(data["symbol"]).to_pylist())
    second = run_available(start(), out, checkpoint)
    assert min(p["batchId"] for p in second.recentProgress) == 1  # batch 1 was re-run
    assert (checkpoint / "commits" / "1").exists()

    got = rows(spark.read.parquet(str(out)))
    expected = embedded("trade", data, with_order(query))
    assert len(got) == len(expected)  # no duplicate, no loss
    assert canonical(got) == canonical(expected)
    assert set(first_rows) <= set(got)


def test_stream_without_partition_by_and_outer_projection(spark, tmp_path: Path) -> None:
    data = trades(1200, 3, seed=12)
    query = (
        DEJAVU["Q3"].replace("SELECT *", "SELECT matchno").rstrip().rstrip(";")
        + " WHERE matchno % 3 = 0"
    )
    source = FileSource(tmp_path, data)
    for i in range(0, data.num_rows, 400):
        source.add(data.slice(i, 400))
    source.add_end_markers(["MSFT"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SinglePartitionWarning)
        df = match_recognize_stream(source.stream(spark), query, input_order="ts", end_marker="eos")
    run_available(df, tmp_path / "out", tmp_path / "checkpoint")
    got = rows(spark.read.parquet(str(tmp_path / "out")))
    expected = embedded("trade", data, query)
    assert len(expected) > 20
    assert canonical(got) == canonical(expected)


def test_stream_refuses_as_read_order(spark, tmp_path: Path) -> None:
    import matchsql

    source = FileSource(tmp_path, trades(10, 1))
    with pytest.raises(matchsql.SemanticError, match="no meaning for a stream"):
        match_recognize_stream(source.stream(spark), DEJAVU["Q1"], input_order="as_read")


def test_key_buckets_refuse_what_they_cannot_do(spark, tmp_path: Path) -> None:
    import matchsql

    stream = FileSource(tmp_path, trades(10, 1)).stream(spark)
    with pytest.raises(matchsql.SemanticError, match="needs a query with PARTITION BY"):
        match_recognize_stream(stream, DEJAVU["Q1"], input_order="ts", key_buckets=4)
    with pytest.raises(matchsql.SemanticError, match="positive integer"):
        match_recognize_stream(stream, DEJAVU["Q4"], input_order="ts", key_buckets=0)
    with pytest.raises(matchsql.SemanticError, match="idle_timeout is measured per state group"):
        match_recognize_stream(
            stream, DEJAVU["Q4"], input_order="ts", key_buckets=4, idle_timeout=5
        )


@pytest.mark.parametrize("buckets", [None, 1])
def test_stream_output_types_survive_the_state_operator(
    spark, tmp_path: Path, buckets: int | None
) -> None:
    """NULL measures, timestamps, strings and doubles come out as the embedded engine's
    (with key_buckets=1: both keys in one state value)."""
    data = trades(800, 2, seed=13)
    query = """SELECT * FROM trade MATCH_RECOGNIZE (
      PARTITION BY symbol ORDER BY ts
      MEASURES MATCH_NUMBER() AS m, CLASSIFIER() AS c, FIRST(A.ts) AS t0,
               RUNNING AVG(price) AS avg_price, LAST(B.volume) AS last_b
      ALL ROWS PER MATCH WITH UNMATCHED ROWS
      PATTERN (A B{2,} C) DEFINE B AS price < PREV(price), C AS price > A.price)"""
    source = FileSource(tmp_path, data)
    source.add(data.slice(0, 400))
    source.add(data.slice(400))
    source.add_end_markers(pc.unique(data["symbol"]).to_pylist())
    df = match_recognize_stream(source.stream(spark), query, end_marker="eos", key_buckets=buckets)
    run_available(df, tmp_path / "out", tmp_path / "checkpoint")
    out = spark.read.parquet(str(tmp_path / "out"))
    assert out.columns == ["symbol", "ts", "m", "c", "t0", "avg_price", "last_b", "price", "volume"]
    got = rows(out)
    expected = embedded("trade", data, query)
    assert len(got) == data.num_rows  # every row: matched or unmatched
    assert any(row[2] is None for row in got)
    assert canonical(got) == canonical(expected)
